/* SPDX-License-Identifier: MIT */
/*
 * The native runtime of the linux platform (runtime.h): a Sandbox is a cgroup
 * <root>/<tag>-<project>-<n> (its place), its daemon runs in the leaf "daemon", each
 * command in a leaf "cmd-<k>" of its own; ending the cgroup ends everything of it
 * (teardown.c). The kernel work is cgroup/'s; this file says what each operation of a
 * runtime means for cgroups. docs/runtime.md.
 */
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "fault.h"
#include "linux.h"
#include "platforms.h"
#include "probe.h"
#include "resource_limits.h"
#include "runtime.h"
#include "teardown.h"
#include "util.h"
#include "watcher_set.h"

/* Where the daemon-to-be moves what it keeps before it takes its final fd numbers (0-3). */
#define HIGH_FD 10
/* How long the processes of a Sandbox get to end (cgroup.kill, then FUSE aborts). */
#define END_TIMEOUT_MS 10000

void lfs_linux_probe(const lfs_platform *p, lfs_missing *m) {
        (void)p;
        if (geteuid() != 0)
                lfs_missing_add(m, "user:root");
        static const char *const kernel[] = { "kernel:cgroup2", "kernel:cgroup.kill", "kernel:pidfd",
                                              "kernel:fuse" };
        for (size_t i = 0; i < ELEMENTSOF(kernel); i++)
                if (!lfs_probe_kernel(kernel[i]))
                        lfs_missing_add(m, kernel[i]);
}

int lfs_linux_prepare(const lfs_platform *p, char **ret_root, lfs_error **err) {
        (void)p;
        if (geteuid() != 0)
                return lfs_fail(
                        err, LFS_UNSUPPORTED, EPERM,
                        "the linux platform needs root (it mounts FUSE and makes cgroups); run as root");
        return lfs_cgroup_root(ret_root, err);
}

int lfs_linux_reach(const lfs_platform *p, const lfs_sandbox_ref *sb, lfs_error **err) {
        (void)p, (void)sb, (void)err;
        return 0;
}

/* ---- create ---- */

_Noreturn void lfs_linux_exec_child(const char *exe, const char *const *argv, int null_fd, int log_fd,
                                    int ready_fd, int hold_fd) {
        /* What the child keeps goes above its final numbers first: the caller may have 0, 1
         * or 2 closed, so the readiness pipe, /dev/null or the log may have one of those
         * numbers, which the dup2s below would overwrite (the daemon then wrote its
         * readiness byte into its log). */
        int ready_high = ready_fd < 0 ? -1 : fcntl(ready_fd, F_DUPFD_CLOEXEC, HIGH_FD);
        int null_high = null_fd < 0 ? -1 : fcntl(null_fd, F_DUPFD_CLOEXEC, HIGH_FD);
        int log_high = log_fd < 0 ? -1 : fcntl(log_fd, F_DUPFD_CLOEXEC, HIGH_FD);
        int hold_high = hold_fd < 0 ? -1 : fcntl(hold_fd, F_DUPFD_CLOEXEC, HIGH_FD);
        /* dup2 clears close-on-exec on its target. Without them the child would run with the
         * caller's 0, 1, 2 (a pipe it held open would keep the caller's reader waiting until
         * the Sandbox closes): it does not start. */
        if (ready_high < 0 || null_high < 0 || log_high < 0 || dup2(null_high, 0) < 0 ||
            dup2(log_high, 1) < 0 || dup2(log_high, 2) < 0 || dup2(ready_high, LFS_DAEMON_READY_FD) < 0 ||
            (hold_fd >= 0 && (hold_high < 0 || dup2(hold_high, LFS_INIT_HOLD_FD) < 0)))
                _exit(126);
        /* Nor the caller's signal state: a SIGCHLD it ignores would make every wait of the
         * daemon's for its commands fail, a signal it blocks would never come. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        for (int sig = 1; sig < NSIG; sig++)
                (void)sigaction(sig, &dfl, NULL);
        /* Nothing else of the caller's: no other descriptor, and of its environment only
         * what the daemon and the init read (lfs_env_reaches_daemon), so that a Sandbox
         * made ahead for a pool (whose key hashes the same) and one made by its own
         * create get the same. Pointers only, on this stack: nothing is allocated here. */
        close_range(hold_fd >= 0 ? LFS_INIT_HOLD_FD + 1 : LFS_DAEMON_READY_FD + 1, ~0U, 0);
        extern char **environ;
        const char *envp[256];
        size_t n = 0;
        for (char **e = environ; e && *e && n < ELEMENTSOF(envp) - 1; e++)
                if (lfs_env_reaches_daemon(*e))
                        envp[n++] = *e;
        envp[n] = NULL;
        execve(exe, (char *const *)argv, (char *const *)envp);
        dprintf(2, "cannot run %s: %s\n", exe, strerror(errno));
        _exit(127);
}

/* What the daemon's starter needs (made before it runs: it makes async-signal-safe calls
 * only), and what it leaves for the caller in the memory they share. */
typedef struct daemon_starter {
        const lfs_daemon_start *start;
        const char *const *argv;
        int leaf_fd, procs_fd, ready_fd;
        bool try_clone3;
        pid_t pid; /* the daemon's, or a negative errno */
        int pidfd; /* in the caller's fd table, or -1 */
        int pidfd_errno;
} daemon_starter;

/* The daemon, until its exec: into the Sandbox's cgroup before anything else (the fork of
 * the fallback joins it here), so that ending the cgroup always ends the daemon too. */
static _Noreturn void daemon_child(const daemon_starter *s, bool in_leaf) {
        if (!in_leaf && write(s->procs_fd, "0", 1) != 1)
                _exit(126);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        int out = openat(s->start->dir_fd, "daemon.log",
                         O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        lfs_linux_exec_child(s->start->exe, s->argv, null, out, s->ready_fd, -1);
}

/* The starter runs in a child that shares the caller's memory and fd table
 * (lfs_run_in_shared_child): a session of its own, the daemon cloned from it, then its
 * exit, so that the daemon is not the caller's child. The daemon's pidfd comes from its
 * clone (CLONE_PIDFD), into the table it shares with the caller: a pid that is never
 * looked up again cannot have been reused. The daemon is cloned straight into its leaf: a
 * write to cgroup.procs moves a running process, and the kernel's move waits for an RCU
 * grace period (several ms here, the largest single cost of a create before). The write
 * stays as the fallback where clone3 or CLONE_INTO_CGROUP is refused, or
 * LAYERFS_NO_CLONE3=1 asks: then the starter's own pidfd_open, while the daemon is still
 * its child. Its clones are raw system calls: glibc's fork would run the caller's fork
 * handlers on the memory it shares with the caller. */
static int daemon_starter_main(void *arg) {
        daemon_starter *s = arg;
        setsid();
        struct clone_args args = { .flags = CLONE_INTO_CGROUP | CLONE_PIDFD,
                                   .pidfd = (uint64_t)(uintptr_t)&s->pidfd,
                                   .exit_signal = SIGCHLD,
                                   .cgroup = (uint64_t)s->leaf_fd };
        pid_t pid = s->try_clone3 ? (pid_t)syscall(SYS_clone3, &args, sizeof(args)) : -1;
        bool in_leaf = pid >= 0;
        if (pid < 0 && (!s->try_clone3 || lfs_clone3_refused(errno))) {
                pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
                if (pid > 0 && (s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
                        s->pidfd_errno = errno;
        }
        if (pid == 0)
                daemon_child(s, in_leaf);
        s->pid = pid < 0 ? -errno : pid;
        return 0;
}

/* Starts the daemon detached (its own session, not our child) in the leaf
 * <place>/daemon, with ready_fd as its fd LFS_DAEMON_READY_FD; returns its pid and a pidfd. */
static int spawn_daemon(const lfs_sandbox_ref *sb, const lfs_daemon_start *start, int ready_fd,
                        lfs_daemon_handle *ret, lfs_error **err) {
        _cleanup_free_ char *leaf = xasprintf("%s/daemon", sb->place);
        _cleanup_close_ int leaf_fd = lfs_cgroup_open(leaf);
        _cleanup_close_ int procs_fd =
                leaf_fd < 0 ? -1 : openat(leaf_fd, "cgroup.procs", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        if (procs_fd < 0)
                return lfs_fail(err, LFS_FAILED, leaf_fd < 0 ? -leaf_fd : errno,
                                "cannot open %s/cgroup.procs: %s", leaf,
                                strerror(leaf_fd < 0 ? -leaf_fd : errno));
        size_t n_args = 0;
        while (start->args[n_args])
                n_args++;
        _cleanup_free_ const char **argv = xcalloc(n_args + 2, sizeof(char *));
        argv[0] = "layerfs-daemon";
        memcpy(argv + 1, start->args, n_args * sizeof(char *));
        const char *no_clone3 = getenv("LAYERFS_NO_CLONE3");
        daemon_starter s = { .start = start,
                             .argv = argv,
                             .leaf_fd = leaf_fd,
                             .procs_fd = procs_fd,
                             .ready_fd = ready_fd,
                             .try_clone3 = !(no_clone3 && !strcmp(no_clone3, "1")),
                             .pid = -ECHILD,
                             .pidfd = -1 };
        int r = lfs_run_in_shared_child(daemon_starter_main, &s, CLONE_FILES);
        int why = r < 0 ? -r : r > 0 ? ECHILD : s.pid < 0 ? -s.pid : 0;
        if (why)
                return lfs_fail(err, LFS_FAILED, why, "could not start %s: %s", start->exe, strerror(why));
        if (s.pidfd < 0)
                return lfs_fail(err, LFS_FAILED, s.pidfd_errno, "pidfd_open(%d) of the daemon: %s",
                                (int)s.pid, strerror(s.pidfd_errno));
        *ret = (lfs_daemon_handle){ .pid = s.pid, .pidfd = s.pidfd };
        return 0;
}

/* Waits, in poll, until the daemon writes its readiness byte (it listens), or exits, or
 * LFS_LINUX_READY_TIMEOUT_MS pass: 0, -E2BIG (its byte says its cgroup root is full,
 * LFS_DAEMON_LIMIT_REACHED), -ESRCH (it exited or closed the pipe without a word),
 * -ETIMEDOUT. */
int lfs_linux_wait_ready(int ready_fd, int pidfd) {
        struct pollfd p[2] = { { .fd = ready_fd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
        int k;
        while ((k = poll(p, 2, LFS_LINUX_READY_TIMEOUT_MS)) < 0 && errno == EINTR)
                ;
        if (k < 0)
                return -errno;
        if (k == 0)
                return -ETIMEDOUT;
        char byte;
        ssize_t got = 0;
        while (p[0].revents && (got = read(ready_fd, &byte, 1)) < 0 && errno == EINTR)
                ;
        if (got == 1)
                return byte == LFS_DAEMON_LIMIT_REACHED ? -E2BIG : 0;
        return -ESRCH;
}

int lfs_linux_start_daemon(const lfs_sandbox_ref *sb, const lfs_daemon_start *start, lfs_daemon_handle *ret,
                           int *ret_ready_fd, lfs_error **err) {
        _cleanup_free_ char *root = xstrdup(sb->place), *leaf = xasprintf("%s/daemon", sb->place);
        int r;
        if ((r = lfs_cgroup_make(dirname(root))) < 0 || (r = lfs_cgroup_make(sb->place)) < 0 ||
            (r = lfs_cgroup_make(leaf)) < 0)
                return lfs_fail(err, LFS_FAILED, -r, "cannot make the cgroup %s: %s", leaf, strerror(-r));
        /* Before anything runs there: a reclaim finds it once its home is gone. */
        if ((r = lfs_linux_label_place(sb, err)) < 0)
                return r;
        /* Before the daemon starts: nothing of the Sandbox ever runs unlimited. */
        if (start->limits && (r = lfs_linux_apply_limits(sb->place, start->limits, err)) < 0)
                return r;
        if (start->limits && start->limits->disk &&
            (r = lfs_linux_make_disk(sb, start->dir_fd, start->limits->disk, err)) < 0)
                return r;
        int ready[2];
        if (pipe2(ready, O_CLOEXEC) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "pipe: %s", strerror(errno));
        _cleanup_close_ int ready_read = ready[0];
        lfs_daemon_handle h = { .pid = -1, .pidfd = -1 };
        r = spawn_daemon(sb, start, ready[1], &h, err);
        close(ready[1]); /* the daemon's is the only write end now: its exit ends the wait */
        if (r < 0)
                return r;
        *ret = h;
        *ret_ready_fd = TAKE_FD(ready_read);
        return 0;
}

int lfs_linux_await_daemon(const lfs_sandbox_ref *sb, const lfs_daemon_handle *h, int ready_fd,
                           lfs_error **err) {
        int r = lfs_linux_wait_ready(ready_fd, h->pidfd);
        if (r == -E2BIG) {
                _cleanup_free_ char *root = xstrdup(sb->place);
                return lfs_fail(
                        err, LFS_LIMIT_REACHED, E2BIG,
                        "sandbox %d cannot start: its cgroup root %s already has %u Sandboxes open, "
                        "the most one root's BPF watcher serves; close one ('layerfs sandbox close'), "
                        "or give this home another cgroup root (LAYERFS_CGROUP_ROOT)",
                        sb->number, dirname(root), (unsigned)lfs_watcher_max_sandboxes());
        }
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, -r, "sandbox %d's daemon did not become ready (%s)",
                                sb->number, strerror(-r));
        return 0;
}

int lfs_linux_create(const lfs_sandbox_ref *sb, const lfs_daemon_start *start, lfs_daemon_handle *ret,
                     lfs_error **err) {
        lfs_daemon_handle h = { .pid = -1, .pidfd = -1 };
        _cleanup_close_ int ready_fd = -1;
        int r = lfs_linux_start_daemon(sb, start, &h, &ready_fd, err);
        if (r < 0)
                return r;
        if ((r = lfs_linux_await_daemon(sb, &h, ready_fd, err)) < 0) {
                close(h.pidfd);
                return r;
        }
        *ret = h;
        return 0;
}

/* ---- commands ---- */

static char *command_leaf(const lfs_sandbox_ref *sb, const char *name) {
        return xasprintf("%s/%s", sb->place, name);
}

int lfs_linux_spawn_failed(const lfs_sandbox_ref *sb, const lfs_command_spec *spec, lfs_spawn_stage stage,
                           int r, lfs_error **err) {
        const char *step = lfs_spawn_stage_name(stage), *why = strerror(-r);
        switch (stage) {
        case LFS_SPAWN_STAGE_CWD:
                /* EXDEV: in the Sandbox's mount view the path reached another directory. */
                return lfs_fail(
                        err, LFS_FAILED, -r,
                        "cannot %s, '%s': %s; give --cwd a directory inside the Workspace that the "
                        "command identity (uid %u) can enter, and leave it in place while the command "
                        "starts",
                        step, spec->cwd,
                        r == -EXDEV ? "the path leads to another directory than the one checked" : why,
                        (unsigned)spec->uid);
        case LFS_SPAWN_STAGE_NAMESPACES:
                if (r == -ESRCH)
                        return lfs_fail(
                                err, LFS_FAILED, -r,
                                "cannot %s, those of sandbox %d's init: the init has ended (%s), and "
                                "the Sandbox's namespaces with it; close the Sandbox ('layerfs "
                                "sandbox close %d') and create another",
                                step, sb->number, why, sb->number);
                return lfs_fail(err, LFS_FAILED, -r, "cannot %s, those of sandbox %d's init: %s", step,
                                sb->number, why);
        case LFS_SPAWN_STAGE_LEAF:
        case LFS_SPAWN_STAGE_CLONE:
        case LFS_SPAWN_STAGE_CGROUP: {
                _cleanup_free_ char *leaf = command_leaf(sb, spec->name);
                /* pids.max reached: a fork or clone into the cgroup fails EAGAIN (a mkdir's
                 * EAGAIN is cgroup.max.descendants or max.depth, a move's is not pids.max). */
                if (r == -EAGAIN && stage == LFS_SPAWN_STAGE_CLONE)
                        return lfs_fail(err, LFS_FAILED, -r,
                                        "cannot %s, %s: %s; sandbox %d has as many processes and threads as "
                                        "its pids.max (sandbox create --pids) allows: end some ('layerfs "
                                        "process kill'), or create the Sandbox with a higher --pids",
                                        step, leaf, why, sb->number);
                return lfs_fail(err, LFS_FAILED, -r, "cannot %s, %s: %s", step, leaf, why);
        }
        case LFS_SPAWN_STAGE_IDENTITY:
                return lfs_fail(err, LFS_FAILED, -r, "cannot %s, %u:%u: %s", step, (unsigned)spec->uid,
                                (unsigned)spec->gid, why);
        default:
                return lfs_fail(err, LFS_FAILED, -r, "cannot %s: %s", step, why);
        }
}

int lfs_linux_spawn(const lfs_sandbox_ref *sb, const lfs_command_spec *spec, int ns_flags, int ns_pidfd,
                    const struct sock_fprog *seccomp, pid_t *ret_pid, int *ret_pidfd, lfs_error **err) {
        _cleanup_free_ char *leaf = command_leaf(sb, spec->name);
        lfs_spawn_args a = {
                .cgroup = leaf,
                .paths = spec->paths,
                .n_paths = spec->n_paths,
                .argv = spec->argv,
                .envp = spec->envp,
                .cwd_fd = spec->cwd_fd,
                .cwd = spec->cwd,
                .uid = spec->uid,
                .gid = spec->gid,
                .fd_in = spec->fds[0],
                .fd_out = spec->fds[1],
                .fd_err = spec->fds[2],
                /* Never the daemon's session: a command in its daemon's process group could
                 * orphan that group with a stopped member, and the kernel would send the
                 * daemon SIGHUP, which closes the Sandbox. */
                .new_session = true,
                .controlling_tty = spec->tty,
                .ns_flags = ns_flags,
                .seccomp = seccomp,
                /* A Sandbox's namespaces with the host's network (--network host): the
                 * host's abstract unix sockets are in that network namespace. */
                .scope_abstract_unix = ns_flags && !(ns_flags & CLONE_NEWNET),
                .ns_pidfd = ns_pidfd,
                .born_fd = spec->born_fd,
        };
        lfs_spawn_stage stage = LFS_SPAWN_STAGE_LEAF;
        int r = lfs_cgroup_make(leaf);
        if (r == 0) {
                stage = LFS_SPAWN_STAGE_CLONE;
                if (spec->placed)
                        spec->placed(spec->userdata, spec->name);
                lfs_fault_point("spawn-leaf-made"); /* the leaf made, no process in it yet */
                r = lfs_cgroup_spawn(&a, ret_pid, ret_pidfd, &stage);
        }
        if (r < 0) {
                lfs_cgroup_remove_tree(leaf, 0);
                return lfs_linux_spawn_failed(sb, spec, stage, r, err);
        }
        return 0;
}

static int native_spawn(const lfs_sandbox_ref *sb, const lfs_command_spec *spec, pid_t *ret_pid,
                        int *ret_pidfd, lfs_error **err) {
        return lfs_linux_spawn(sb, spec, 0, -1, NULL, ret_pid, ret_pidfd, err);
}

int lfs_linux_end_command(const lfs_sandbox_ref *sb, const char *name, int timeout_ms) {
        _cleanup_free_ char *leaf = command_leaf(sb, name);
        return lfs_cgroup_kill_wait(leaf, timeout_ms);
}

void lfs_linux_command_done(const lfs_sandbox_ref *sb, const char *name) {
        _cleanup_free_ char *leaf = command_leaf(sb, name);
        lfs_cgroup_remove_tree(leaf, 0);
}

/* Calls fn for each pid in the cgroup.procs of each command leaf (cmd-*) of sb, until it
 * returns true; true if one did. */
static bool each_command_pid(const lfs_sandbox_ref *sb,
                             bool (*fn)(void *userdata, pid_t pid, const char *leaf), void *userdata) {
        bool stop = false;
        DIR *dir = opendir(sb->place);
        struct dirent *de;
        while (dir && !stop && (de = readdir(dir))) {
                if (strncmp(de->d_name, "cmd-", 4))
                        continue;
                _cleanup_free_ char *procs = xasprintf("%s/%s/cgroup.procs", sb->place, de->d_name);
                _cleanup_fclose_ FILE *f = fopen(procs, "re");
                int pid;
                while (f && !stop && fscanf(f, "%d", &pid) == 1)
                        stop = fn(userdata, pid, de->d_name);
        }
        if (dir)
                closedir(dir);
        return stop;
}

typedef struct list_state {
        lfs_process_fn fn;
        void *userdata;
} list_state;

static bool list_one(void *userdata, pid_t pid, const char *leaf) {
        list_state *s = userdata;
        s->fn(s->userdata, pid, leaf);
        return false;
}

void lfs_linux_list(const lfs_sandbox_ref *sb, lfs_process_fn fn, void *userdata) {
        list_state s = { .fn = fn, .userdata = userdata };
        each_command_pid(sb, list_one, &s);
}

static bool is_pid(void *userdata, pid_t pid, const char *leaf) {
        (void)leaf;
        return *(pid_t *)userdata == pid;
}

/* The pidfd is taken first: if the process ends and its pid is reused before the signal,
 * the signal fails instead of reaching the newcomer. */
int lfs_linux_signal(const lfs_sandbox_ref *sb, pid_t pid, int sig) {
        _cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pidfd < 0 || !each_command_pid(sb, is_pid, &pid))
                return -ESRCH;
        if (syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0) < 0)
                return -errno;
        return 0;
}

/* ---- the end ---- */

/* Ends the processes of every cgroup of the Sandbox but its daemon's own leaf, however they
 * detached, also those that a FUSE server of the Sandbox's own holds: each is sent
 * cgroup.kill first, then each is waited for, so they die together. The daemon's leaf and
 * the place stay. */
static int end_all_but_daemon(const lfs_sandbox_ref *sb, char **ret_why) {
        DIR *dir = opendir(sb->place);
        if (!dir) {
                if (ret_why)
                        *ret_why = xasprintf("cannot list %s: %s", sb->place, strerror(errno));
                return -errno;
        }
        char **leaves = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        while ((de = readdir(dir)))
                if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                    strcmp(de->d_name, "daemon")) {
                        GROW(leaves, cap, n + 1);
                        leaves[n++] = command_leaf(sb, de->d_name);
                }
        closedir(dir);
        for (size_t i = 0; i < n; i++)
                (void)lfs_cgroup_write(leaves[i], "cgroup.kill", "1");
        int r = 0;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *why = NULL;
                int k = lfs_sandbox_end_processes(leaves[i], END_TIMEOUT_MS, &why);
                if (k < 0 && r == 0) {
                        r = k;
                        if (ret_why)
                                *ret_why = TAKE_PTR(why);
                }
                free(leaves[i]);
        }
        free(leaves);
        return r;
}

/* Ends every process the Sandbox started. Leaving the place to the caller, the daemon
 * stays in its leaf and ends every other cgroup of it: stepping out is a write to
 * cgroup.procs, which waits for an RCU grace period (cgroup_threadgroup_rwsem), the most
 * of an idle close's time. Otherwise the daemon steps out of the Sandbox's cgroup into
 * LayerFS's root and kills the Sandbox's whole subtree; where it cannot step out (a
 * delegated root with controllers), it leaves the place after all (*leave_place). */
static int end_processes(const lfs_sandbox_ref *sb, bool *leave_place, char **ret_why) {
        if (!*leave_place) {
                _cleanup_free_ char *root = xstrdup(sb->place);
                int r = lfs_cgroup_enter(dirname(root), 0);
                if (r == 0)
                        return lfs_sandbox_end_processes(sb->place, END_TIMEOUT_MS, ret_why);
                fprintf(stderr,
                        "cannot leave %s (%s): ending each of its cgroups but the daemon's instead; the "
                        "library removes the rest after the daemon exits\n",
                        sb->place, strerror(-r));
                *leave_place = true;
        }
        return end_all_but_daemon(sb, ret_why);
}

int lfs_linux_teardown(const lfs_sandbox_ref *sb, bool leave_place, lfs_teardown_hook hook, void *userdata,
                       char **ret_why) {
        int r = end_processes(sb, &leave_place, ret_why);
        if (r < 0)
                return r;
        if (hook)
                hook(userdata);
        r = lfs_sandbox_remove(leave_place ? NULL : sb->place, sb->dir, ret_why);
        return r < 0 ? r : leave_place;
}

int lfs_linux_reclaim(const lfs_sandbox_ref *sb, char **ret_why) {
        /* A daemon that was killed left its ring in the map its root's daemons share, under
         * its Sandbox's cgroup id (the cgroup's inode number, read before it goes). */
        struct stat st;
        bool place = sb->place && stat(sb->place, &st) == 0;
        int r = sb->place ? lfs_sandbox_end_processes(sb->place, END_TIMEOUT_MS, ret_why) : 0;
        if (r < 0 || (r = lfs_sandbox_remove(sb->place, sb->dir, ret_why)) < 0 || !place)
                return r;
        /* Not a failure of the reclaim if it stays: it receives nothing more (its cgroup is
         * gone), and it goes with the root's last daemon. */
        _cleanup_free_ char *root = xstrdup(sb->place);
        (void)lfs_watcher_forget(dirname(root), (uint64_t)st.st_ino);
        return r;
}

/* The host's devpts: the command's view is the host's. */
static int native_open_terminal(const lfs_sandbox_ref *sb) {
        (void)sb;
        int fd = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

const lfs_runtime lfs_runtime_native = {
        .name = "native",
        /* Its commands are processes of the host: the host's network is theirs. */
        .networks = LFS_NETWORK_BIT(LFS_NETWORK_HOST),
        .default_network = LFS_NETWORK_HOST,
        .networks_why = "its commands are processes of the host, in the host's network: --network host",
        .probe = lfs_linux_probe,
        .prepare = lfs_linux_prepare,
        .check_limits = lfs_linux_check_limits,
        .reach = lfs_linux_reach,
        .create = lfs_linux_create,
        .spawn = native_spawn,
        .open_terminal = native_open_terminal,
        .end_command = lfs_linux_end_command,
        .command_done = lfs_linux_command_done,
        .list = lfs_linux_list,
        .signal = lfs_linux_signal,
        .teardown = lfs_linux_teardown,
        .reclaim = lfs_linux_reclaim,
        .reclaim_orphans = lfs_linux_reclaim_orphans,
};
