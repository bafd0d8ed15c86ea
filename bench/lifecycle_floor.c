/* SPDX-License-Identifier: MIT */
/*
 * The kernel's floors beside which bench/lifecycle.sh reports a Sandbox's lifecycle, each
 * measured here with no LayerFS code in the way:
 *
 *   lifecycle-floor spawn N           posix_spawn of /bin/true and its wait, N times
 *   lifecycle-floor fork N [PROG...]  fork of a child that exits at once, and its wait, N
 *                                     times: a process's start and end on the host, where
 *                                     every attached sched_process_fork and _exit program
 *                                     runs (bench/watcher.sh). With the ids of BPF programs,
 *                                     a third figure: the sum of their mean run times (ns),
 *                                     from the kernel's own count (BPF_ENABLE_STATS, on
 *                                     while this runs), i.e. what they add to each process
 *                                     of the host whatever else keeps the machine busy
 *   lifecycle-floor clone3 N PARENT   mkdir of a cgroup below PARENT, clone3(CLONE_INTO_CGROUP)
 *                                     of /bin/true into it, its wait, rmdir; N times
 *   lifecycle-floor kill N PARENT P   a tree of P processes (half plain children of a shell,
 *                                     half setsid and double-forked: the tree bench/runtime.sh
 *                                     uses) in a cgroup below PARENT, then cgroup.kill and a
 *                                     wait (inotify on cgroup.events) for "populated 0"; N
 *                                     times, the tree's making untimed
 *   lifecycle-floor move N PARENT     a process moved between two cgroups below PARENT (a
 *                                     write of its pid to cgroup.procs), N times: what a
 *                                     daemon pays to step out of a Sandbox's cgroup, or a
 *                                     pre-started daemon to step into one (cgroup2 refuses
 *                                     to rename a cgroup: EPERM), 0.1 s apart
 *
 * Each prints one line: "median_us p99_us" over the N trials (fork with programs: and their
 * sum). Needs root for the cgroups.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "samples.h"

extern char **environ;

static void die(const char *what) {
        fprintf(stderr, "lifecycle-floor: %s: %s\n", what, strerror(errno));
        exit(1);
}

static void wait_child(pid_t pid) {
        int status;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        die("waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status))
                errno = ECHILD, die("the child failed");
}

/* Starts exe (with "-c script" when script is not NULL) straight into the cgroup at path
 * (clone3 CLONE_INTO_CGROUP), its stdio /dev/null; its pid. */
static pid_t run_in(const char *path, const char *exe, const char *script) {
        int cg = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg < 0)
                die(path);
        struct clone_args args = { .flags = CLONE_INTO_CGROUP,
                                   .exit_signal = SIGCHLD,
                                   .cgroup = (uint64_t)cg };
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid == 0) {
                int null = open("/dev/null", O_RDWR);
                dup2(null, 0), dup2(null, 1), dup2(null, 2);
                if (script)
                        execl(exe, exe, "-c", script, (char *)NULL);
                else
                        execl(exe, exe, (char *)NULL);
                _exit(127);
        }
        if (pid < 0)
                die("clone3");
        close(cg);
        return pid;
}

static int64_t spawn_once(void) {
        char *const argv[] = { "true", NULL };
        pid_t pid;
        int64_t start = now_us();
        errno = posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ);
        if (errno)
                die("posix_spawn /bin/true");
        wait_child(pid);
        return now_us() - start;
}

static int64_t fork_once(void) {
        int64_t start = now_us();
        pid_t pid = fork();
        if (pid == 0)
                _exit(0);
        if (pid < 0)
                die("fork");
        wait_child(pid);
        return now_us() - start;
}

static int bpf_call(int cmd, union bpf_attr *attr) {
        return (int)syscall(SYS_bpf, cmd, attr, sizeof(*attr));
}

/* The run time and count the kernel has summed for BPF program id so far. */
static void prog_runs(uint32_t id, uint64_t *ret_ns, uint64_t *ret_count) {
        union bpf_attr attr = { .prog_id = id };
        int fd = bpf_call(BPF_PROG_GET_FD_BY_ID, &attr);
        if (fd < 0)
                die("BPF_PROG_GET_FD_BY_ID");
        struct bpf_prog_info info = { 0 };
        attr = (union bpf_attr){ .info = { .bpf_fd = (uint32_t)fd,
                                           .info_len = sizeof(info),
                                           .info = (uint64_t)(uintptr_t)&info } };
        if (bpf_call(BPF_OBJ_GET_INFO_BY_FD, &attr) < 0)
                die("BPF_OBJ_GET_INFO_BY_FD");
        close(fd);
        *ret_ns = info.run_time_ns;
        *ret_count = info.run_cnt;
}

static int64_t clone3_once(const char *parent, int i) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/floor-%d-%d", parent, (int)getpid(), i);
        int64_t start = now_us();
        if (mkdir(path, 0755) < 0)
                die(path);
        wait_child(run_in(path, "/bin/true", NULL));
        if (rmdir(path) < 0)
                die(path);
        return now_us() - start;
}

static int count_lines(const char *path) {
        FILE *f = fopen(path, "re");
        if (!f)
                die(path);
        int n = 0, c;
        while ((c = fgetc(f)) != EOF)
                n += c == '\n';
        fclose(f);
        return n;
}

static int populated(const char *events) {
        FILE *f = fopen(events, "re");
        if (!f)
                die(events);
        char line[64];
        int value = -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "populated %d", &value) == 1)
                        break;
        fclose(f);
        return value;
}

static int64_t kill_once(const char *parent, int i, int procs) {
        char path[4096], file[4200], tree[512];
        snprintf(path, sizeof(path), "%s/floor-kill-%d-%d", parent, (int)getpid(), i);
        if (mkdir(path, 0755) < 0)
                die(path);
        snprintf(tree, sizeof(tree),
                 "i=0; while [ $i -lt %d ]; do sleep 1000 & setsid sh -c 'sleep 1000 &'; i=$((i+1)); done",
                 procs / 2);
        wait_child(run_in(path, "/bin/sh", tree)); /* the shell; what it started stays */
        snprintf(file, sizeof(file), "%s/cgroup.procs", path);
        int n = count_lines(file);
        if (n < procs) {
                fprintf(stderr, "lifecycle-floor: only %d processes in %s\n", n, path);
                exit(1);
        }
        snprintf(file, sizeof(file), "%s/cgroup.events", path);
        int in = inotify_init1(IN_CLOEXEC);
        if (in < 0 || inotify_add_watch(in, file, IN_MODIFY) < 0)
                die("inotify on cgroup.events");
        char kill_file[4200];
        snprintf(kill_file, sizeof(kill_file), "%s/cgroup.kill", path);
        int64_t start = now_us();
        int kfd = open(kill_file, O_WRONLY | O_CLOEXEC);
        if (kfd < 0 || write(kfd, "1", 1) != 1)
                die(kill_file);
        close(kfd);
        char buf[4096];
        while (populated(file) != 0)
                if (read(in, buf, sizeof(buf)) < 0 && errno != EINTR)
                        die("read inotify");
        int64_t took = now_us() - start;
        close(in);
        if (rmdir(path) < 0)
                die(path);
        return took;
}

/* The process moved is made once (moves[0] is the first cgroup it is in) and ended by the
 * last trial. */
static int64_t move_once(const char *parent, int i, int n) {
        static char paths[2][4096];
        static pid_t pid;
        if (i == 0) {
                for (int k = 0; k < 2; k++) {
                        snprintf(paths[k], sizeof(paths[k]), "%s/floor-move-%d-%d", parent, (int)getpid(),
                                 k);
                        if (mkdir(paths[k], 0755) < 0)
                                die(paths[k]);
                }
                pid = run_in(paths[0], "/bin/sh", "exec sleep 1000");
        }
        char file[4200], value[32];
        snprintf(file, sizeof(file), "%s/cgroup.procs", paths[(i + 1) % 2]);
        int len = snprintf(value, sizeof(value), "%d", (int)pid);
        /* Untimed: a move within a grace period of the last finds the kernel's rwsem still
         * in its slow mode (rcu_sync) and does not wait; a daemon's one move does. */
        usleep(100000);
        int64_t start = now_us();
        int fd = open(file, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, value, (size_t)len) != len)
                die(file);
        close(fd);
        int64_t took = now_us() - start;
        if (i == n - 1) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                for (int k = 0; k < 2; k++)
                        if (rmdir(paths[k]) < 0)
                                die(paths[k]);
        }
        return took;
}

int main(int argc, char **argv) {
        if (argc < 3 || atoi(argv[2]) < 1) {
                fprintf(stderr,
                        "usage: lifecycle-floor spawn N | fork N | clone3 N PARENT | move N PARENT | kill N PARENT PROCS\n");
                return 2;
        }
        int n = atoi(argv[2]);
        /* fork's BPF programs: their counts before the trials, and the kernel counting. */
        int progs = !strcmp(argv[1], "fork") ? argc - 3 : 0, stats = -1;
        uint64_t *ns = calloc((size_t)progs + 1, sizeof(*ns)),
                 *runs = calloc((size_t)progs + 1, sizeof(*runs));
        if (progs) {
                union bpf_attr attr = { .enable_stats = { .type = BPF_STATS_RUN_TIME } };
                if ((stats = bpf_call(BPF_ENABLE_STATS, &attr)) < 0)
                        die("BPF_ENABLE_STATS");
        }
        for (int p = 0; p < progs; p++)
                prog_runs((uint32_t)atoi(argv[3 + p]), &ns[p], &runs[p]);
        int64_t *samples = calloc((size_t)n, sizeof(*samples));
        if (!samples)
                die("calloc");
        for (int i = 0; i < n; i++) {
                if (!strcmp(argv[1], "spawn"))
                        samples[i] = spawn_once();
                else if (!strcmp(argv[1], "fork"))
                        samples[i] = fork_once();
                else if (!strcmp(argv[1], "clone3") && argc == 4)
                        samples[i] = clone3_once(argv[3], i);
                else if (!strcmp(argv[1], "move") && argc == 4)
                        samples[i] = move_once(argv[3], i, n);
                else if (!strcmp(argv[1], "kill") && argc == 5 && atoi(argv[4]) > 1)
                        samples[i] = kill_once(argv[3], i, atoi(argv[4]));
                else {
                        fprintf(stderr, "lifecycle-floor: unknown mode or arguments: %s\n", argv[1]);
                        return 2;
                }
        }
        samples_report(samples, n);
        if (progs) {
                double sum = 0;
                for (int p = 0; p < progs; p++) {
                        uint64_t t, k;
                        prog_runs((uint32_t)atoi(argv[3 + p]), &t, &k);
                        sum += k > runs[p] ? (double)(t - ns[p]) / (double)(k - runs[p]) : 0;
                }
                close(stats);
                printf(" %.0f", sum);
        }
        printf("\n");
        free(ns);
        free(runs);
        free(samples);
        return 0;
}
