/* SPDX-License-Identifier: MIT */
/*
 * cgroup/: finding the tree, spawning into a leaf (clone3 and the fork fallback), exit
 * codes of programs that cannot run, and ending a subtree with detached processes.
 * Against the real kernel: each test works below a root of its own,
 * <cgroup2 mount>/layerfs-unit-<pid>, which the teardown kills and removes even when
 * an assertion failed. Needs root; skipped otherwise.
 */
#include <linux/sched.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "helpers.h"
#include "util.h"

static char *test_root; /* <cgroup2 mount>/layerfs-unit-<pid> */

static int cgroup_setup(void **state) {
        (void)state;
        if (geteuid() != 0)
                return 0;
        unsetenv("LAYERFS_CGROUP_ROOT");
        unsetenv("LAYERFS_NO_CLONE3");
        char *root = NULL;
        lfs_error *err = NULL;
        if (lfs_cgroup_root(&root, &err) < 0) {
                lfs_error_free(err);
                return 0;
        }
        *strrchr(root, '/') = 0; /* the mount itself */
        if (asprintf(&test_root, "%s/layerfs-unit-%d", root, (int)getpid()) < 0)
                test_root = NULL;
        free(root);
        return test_root && lfs_cgroup_make(test_root) == 0 ? 0 : -1;
}

static int cgroup_teardown(void **state) {
        (void)state;
        unsetenv("LAYERFS_CGROUP_ROOT");
        unsetenv("LAYERFS_NO_CLONE3");
        if (test_root)
                lfs_cgroup_destroy(test_root, 5000);
        free(test_root);
        test_root = NULL;
        return 0;
}

#define NEED_CGROUPS()                                                                                      \
        do {                                                                                                \
                if (!test_root) {                                                                           \
                        print_message("skipped: needs root and cgroup2\n");                                 \
                        skip();                                                                             \
                }                                                                                           \
        } while (0)

static char *leaf_path(const char *name) {
        char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", test_root, name) > 0);
        assert_int_equal(lfs_cgroup_make(p), 0);
        return p;
}

/* Runs argv in leaf with stdout into a pipe; returns the exit code, output in out. */
static int run_in(const char *leaf, const char *const *paths, size_t n_paths, char *const *argv, char *out,
                  size_t cap) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        char *envp[] = { "PATH=/usr/bin:/bin", NULL };
        lfs_spawn_args a = { .cgroup = leaf,
                             .paths = paths,
                             .n_paths = n_paths,
                             .argv = argv,
                             .envp = envp,
                             .cwd = "/",
                             .cwd_fd = -1,
                             .uid = (uid_t)-1,
                             .gid = (gid_t)-1,
                             .fd_in = null,
                             .fd_out = p[1],
                             .fd_err = null };
        pid_t pid = -1;
        int pidfd = -1;
        lfs_spawn_stage stage;
        int r = lfs_cgroup_spawn(&a, &pid, &pidfd, &stage);
        close(p[1]);
        close(null);
        assert_msg(r == 0, "spawn into %s: %s", leaf, strerror(-r));
        read_to_end(p[0], out, cap);
        siginfo_t si = { 0 };
        assert_int_equal(waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED), 0);
        close(pidfd);
        assert_int_equal(si.si_code, CLD_EXITED);
        return si.si_status;
}

static void assert_lands_in_leaf(void) {
        _cleanup_free_ char *leaf = leaf_path("cmd-1");
        const char *paths[] = { "/bin/cat" };
        char *argv[] = { "cat", "/proc/self/cgroup", NULL };
        char out[4096];
        assert_int_equal(run_in(leaf, paths, 1, argv, out, sizeof(out)), 0);
        char want[256];
        snprintf(want, sizeof(want), "/layerfs-unit-%d/cmd-1\n", (int)getpid());
        assert_msg(strstr(out, want), "the child is not in its leaf: %s", out);
        assert_int_equal(lfs_cgroup_populated(leaf), 0);
        assert_int_equal(lfs_cgroup_remove_tree(leaf, 1000), 0);
}

static void test_spawn_clone3_lands_in_leaf(void **state) {
        (void)state;
        NEED_CGROUPS();
        assert_lands_in_leaf();
}

static void test_spawn_fallback_lands_in_leaf(void **state) {
        (void)state;
        NEED_CGROUPS();
        setenv("LAYERFS_NO_CLONE3", "1", 1);
        assert_lands_in_leaf();
}

/* A child of lfs_clone3_shared runs on the caller's memory (what it writes, the caller
 * reads), on a stack of its own, and ends with what its function returned; CLONE_PIDFD and
 * the other flags are clone3's as given. Where this build has no trampoline: -ENOSYS. */
static int shared_child(void *arg) {
        *(int *)arg = 42;
        return 7;
}

static void test_clone3_shared_runs_on_the_callers_memory(void **state) {
        (void)state;
        int seen = 0, pidfd = -1;
        struct clone_args args = { .flags = CLONE_PIDFD,
                                   .pidfd = (uint64_t)(uintptr_t)&pidfd,
                                   .exit_signal = SIGCHLD };
        pid_t pid = lfs_clone3_shared(&args, shared_child, &seen);
#if defined(__x86_64__) || defined(__aarch64__)
        assert_msg(pid > 0, "lfs_clone3_shared: %s", strerror(-pid));
        /* CLONE_VFORK: it has ended by now, and its write is in this process's memory. */
        assert_int_equal(seen, 42);
        assert_true(pidfd >= 0);
        siginfo_t si = { 0 };
        assert_int_equal(waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED), 0);
        close(pidfd);
        assert_int_equal(si.si_pid, pid);
        assert_int_equal(si.si_code, CLD_EXITED);
        assert_int_equal(si.si_status, 7);
#else
        assert_int_equal(pid, -ENOSYS);
        assert_int_equal(seen, 0);
#endif
}

/* A command's child shares the daemon's memory until its execve: the daemon's address space
 * is not copied for each command. Seen from here by what the child does to that memory:
 * it makes it not dumpable (cgroup/spawn.c), which a copy's prctl would leave as it was, as
 * the fallback's fork does. */
static void test_spawn_shares_the_callers_memory(void **state) {
        (void)state;
        NEED_CGROUPS();
        assert_int_equal(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
        setenv("LAYERFS_NO_CLONE3", "1", 1);
        assert_lands_in_leaf();
        assert_int_equal(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
        unsetenv("LAYERFS_NO_CLONE3");
        assert_lands_in_leaf();
#if defined(__x86_64__) || defined(__aarch64__)
        assert_int_equal(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 0);
#else
        assert_int_equal(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0), 1);
#endif
        assert_int_equal(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), 0);
}

static void *idle_thread(void *arg) {
        (void)arg;
        pause();
        return NULL;
}

/* The daemon has threads. A child that drops privileges through glibc's wrappers would
 * wait for those threads, which do not exist after a raw clone3: it hung. Many spawns
 * with other threads alive, under an alarm that fails the test instead of hanging it. */
static void test_spawn_with_threads_drops_privileges(void **state) {
        (void)state;
        NEED_CGROUPS();
        pthread_t threads[4];
        for (int i = 0; i < 4; i++)
                assert_int_equal(pthread_create(&threads[i], NULL, idle_thread, NULL), 0);
        _cleanup_free_ char *leaf = leaf_path("cmd-threads");
        alarm(60);
        for (int i = 0; i < 50; i++) {
                int p[2];
                assert_int_equal(pipe2(p, O_CLOEXEC), 0);
                const char *paths[] = { "/usr/bin/id", "/bin/id" };
                char *argv[] = { "id", "-u", NULL };
                char *envp[] = { NULL };
                lfs_spawn_args a = { .cgroup = leaf,
                                     .paths = paths,
                                     .n_paths = 2,
                                     .argv = argv,
                                     .envp = envp,
                                     .cwd = "/",
                                     .cwd_fd = -1,
                                     .uid = 501,
                                     .gid = 20,
                                     .fd_in = p[0],
                                     .fd_out = p[1],
                                     .fd_err = p[1] };
                pid_t pid;
                int pidfd;
                lfs_spawn_stage stage;
                assert_int_equal(lfs_cgroup_spawn(&a, &pid, &pidfd, &stage), 0);
                close(p[1]);
                char out[32] = "";
                ssize_t k = read(p[0], out, sizeof(out) - 1);
                close(p[0]);
                siginfo_t si = { 0 };
                assert_int_equal(waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED), 0);
                close(pidfd);
                assert_true(k > 0);
                assert_string_equal(out, "501\n");
        }
        alarm(0);
        for (int i = 0; i < 4; i++) {
                pthread_cancel(threads[i]);
                pthread_join(threads[i], NULL);
        }
}

static void test_spawn_tries_each_candidate(void **state) {
        (void)state;
        NEED_CGROUPS();
        _cleanup_free_ char *leaf = leaf_path("cmd-2");
        const char *paths[] = { "/nonexistent/echo", "/bin/echo" };
        char *argv[] = { "echo", "found", NULL };
        char out[64];
        assert_int_equal(run_in(leaf, paths, 2, argv, out, sizeof(out)), 0);
        assert_string_equal(out, "found\n");
}

static void test_spawn_not_found_is_127_not_executable_126(void **state) {
        (void)state;
        NEED_CGROUPS();
        _cleanup_free_ char *leaf = leaf_path("cmd-3");
        const char *missing[] = { "/nonexistent/a", "/nonexistent/b" };
        const char *not_exec[] = { "/etc/hostname" };
        char *argv[] = { "x", NULL };
        char out[64];
        assert_int_equal(run_in(leaf, missing, 2, argv, out, sizeof(out)), 127);
        assert_int_equal(run_in(leaf, not_exec, 1, argv, out, sizeof(out)), 126);
}

static void test_spawn_into_missing_leaf_fails(void **state) {
        (void)state;
        NEED_CGROUPS();
        _cleanup_free_ char *leaf = NULL;
        assert_true(asprintf(&leaf, "%s/never-made", test_root) > 0);
        const char *paths[] = { "/bin/true" };
        char *argv[] = { "true", NULL };
        char *envp[] = { NULL };
        lfs_spawn_args a = { .cgroup = leaf,
                             .paths = paths,
                             .n_paths = 1,
                             .argv = argv,
                             .envp = envp,
                             .cwd_fd = -1,
                             .uid = (uid_t)-1,
                             .gid = (gid_t)-1,
                             .fd_in = 0,
                             .fd_out = 1,
                             .fd_err = 2 };
        pid_t pid;
        int pidfd;
        lfs_spawn_stage stage = _LFS_SPAWN_STAGE_MAX;
        assert_int_equal(lfs_cgroup_spawn(&a, &pid, &pidfd, &stage), -ENOENT);
        assert_int_equal(stage, LFS_SPAWN_STAGE_CLONE);
}

/* A start that fails says at which step (the child's, through its error pipe), by clone3 and
 * by fork alike: a working directory that does not exist, one the identity cannot enter. */
static void test_spawn_failure_names_its_step(void **state) {
        (void)state;
        for (int i = 0; i < _LFS_SPAWN_STAGE_MAX; i++)
                assert_non_null(strstr(lfs_spawn_stage_name((lfs_spawn_stage)i), " "));
        NEED_CGROUPS();
        _cleanup_free_ char *leaf = leaf_path("cmd-4");
        /* A directory of root's that uid 501 cannot enter: a cgroup of the test's, so that
         * the teardown removes it however the test ends. */
        _cleanup_free_ char *locked = leaf_path("locked");
        assert_int_equal(chmod(locked, 0700), 0);
        const char *paths[] = { "/bin/true" };
        char *argv[] = { "true", NULL };
        char *envp[] = { NULL };
        for (int fork_way = 0; fork_way < 2; fork_way++) {
                if (fork_way)
                        setenv("LAYERFS_NO_CLONE3", "1", 1);
                const struct {
                        const char *cwd;
                        int errnum;
                } cases[] = { { "/nonexistent/dir", ENOENT }, { locked, EACCES } };
                for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                        lfs_spawn_args a = { .cgroup = leaf,
                                             .paths = paths,
                                             .n_paths = 1,
                                             .argv = argv,
                                             .envp = envp,
                                             .cwd = cases[k].cwd,
                                             .cwd_fd = -1,
                                             .uid = 501,
                                             .gid = 20,
                                             .fd_in = 0,
                                             .fd_out = 1,
                                             .fd_err = 2 };
                        pid_t pid = -1;
                        int pidfd = -1;
                        lfs_spawn_stage stage = _LFS_SPAWN_STAGE_MAX;
                        assert_int_equal(lfs_cgroup_spawn(&a, &pid, &pidfd, &stage), -cases[k].errnum);
                        assert_int_equal(stage, LFS_SPAWN_STAGE_CWD);
                        assert_int_equal(pid, -1); /* nothing written but the step */
                        assert_int_equal(pidfd, -1);
                }
        }
        unsetenv("LAYERFS_NO_CLONE3");
}

/* A detached process (own session, parent gone) in a nested leaf: destroy ends it and
 * removes the whole subtree. */
static void test_destroy_ends_detached_processes(void **state) {
        (void)state;
        NEED_CGROUPS();
        _cleanup_free_ char *sandbox = leaf_path("sb"), *leaf = leaf_path("sb/cmd-1");
        const char *paths[] = { "/bin/sh" };
        char *argv[] = { "sh", "-c", "setsid sleep 1000 >/dev/null 2>&1 & echo $!", NULL };
        char out[64];
        assert_int_equal(run_in(leaf, paths, 1, argv, out, sizeof(out)), 0);
        pid_t detached = (pid_t)atoi(out);
        assert_true(detached > 0);
        assert_int_equal(kill(detached, 0), 0);
        assert_int_equal(lfs_cgroup_populated(sandbox), 1);
        /* A populated cgroup is not removed without the kill. */
        assert_int_equal(lfs_cgroup_remove_tree(sandbox, 0), -EBUSY);
        assert_int_equal(lfs_cgroup_destroy(sandbox, 5000), 0);
        struct stat st;
        assert_int_equal(stat(sandbox, &st), -1);
        assert_int_equal(errno, ENOENT);
        /* Gone, or a zombie waiting for its reaper: either way it runs no more. */
        char path[64], buf[512] = "";
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)detached);
        FILE *f = fopen(path, "re");
        if (f) {
                if (!fgets(buf, sizeof(buf), f))
                        buf[0] = 0;
                fclose(f);
                const char *p = strrchr(buf, ')');
                assert_msg(p && (p[2] == 'Z' || p[2] == 'X'), "the detached process still runs: %s", buf);
        }
        /* Destroying what is gone is fine. */
        assert_int_equal(lfs_cgroup_destroy(sandbox, 1000), 0);
}

static void test_root_override(void **state) {
        (void)state;
        NEED_CGROUPS();
        char *root = NULL;
        lfs_error *err = NULL;
        setenv("LAYERFS_CGROUP_ROOT", "relative/path", 1);
        assert_true(lfs_cgroup_root(&root, &err) < 0);
        assert_int_equal(err->code, LFS_INVALID_INPUT);
        lfs_error_free(TAKE_PTR(err));
        setenv("LAYERFS_CGROUP_ROOT", "/tmp/not-a-cgroup/layerfs", 1);
        assert_true(lfs_cgroup_root(&root, &err) < 0);
        assert_int_equal(err->code, LFS_UNSUPPORTED);
        assert_msg(strstr(err->message, "/tmp/not-a-cgroup/layerfs"), "the message names the root: %s",
                   err->message);
        lfs_error_free(TAKE_PTR(err));
        /* A root that does not exist yet, in a cgroup2 filesystem, is fine. */
        _cleanup_free_ char *fresh = NULL;
        assert_true(asprintf(&fresh, "%s/not-yet", test_root) > 0);
        setenv("LAYERFS_CGROUP_ROOT", fresh, 1);
        assert_int_equal(lfs_cgroup_root(&root, &err), 0);
        assert_string_equal(root, fresh);
        free(root);
        /* Tagged by the home: two homes never share a Sandbox's cgroup. */
        _cleanup_free_ char *sb = lfs_cgroup_sandbox_path(fresh, "/home/a/.layerfs", "web", 3);
        _cleanup_free_ char *other = lfs_cgroup_sandbox_path(fresh, "/home/b/.layerfs", "web", 3);
        _cleanup_free_ char *again = lfs_cgroup_sandbox_path(fresh, "/home/a/.layerfs", "web", 3);
        char prefix[512];
        snprintf(prefix, sizeof(prefix), "%s/", fresh);
        assert_int_equal(strncmp(sb, prefix, strlen(prefix)), 0);
        const char *name = sb + strlen(prefix);
        assert_int_equal(strlen(name), 8 + strlen("-web-3"));
        assert_int_equal(strspn(name, "0123456789abcdef"), 8);
        assert_string_equal(name + 8, "-web-3");
        assert_string_equal(sb, again);
        assert_string_not_equal(sb, other);
}

/* A directory that is not a cgroup (where a forged record points: /tmp/x with a
 * cgroup.procs naming someone) is never acted on: nothing is signalled or removed. */
static void test_not_a_cgroup_is_never_acted_on(void **state) {
        (void)state;
        NEED_CGROUPS();
        char dir[] = "/tmp/layerfs-unit-not-a-cgroup-XXXXXX";
        assert_non_null(mkdtemp(dir));
        pid_t decoy = fork();
        if (decoy == 0) {
                pause();
                _exit(0);
        }
        assert_true(decoy > 0);
        char procs[128], value[32];
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
        snprintf(value, sizeof(value), "%d\n", (int)decoy);
        FILE *f = fopen(procs, "we");
        assert_non_null(f);
        fputs(value, f);
        fclose(f);
        assert_int_equal(lfs_cgroup_open(dir), -EXDEV);
        assert_int_equal(lfs_cgroup_kill_wait(dir, 1000), -EXDEV);
        assert_int_equal(lfs_cgroup_destroy(dir, 1000), -EXDEV);
        assert_int_equal(lfs_cgroup_populated(dir), -EXDEV);
        assert_null(lfs_cgroup_describe(dir));
        int status;
        assert_int_equal(waitpid(decoy, &status, WNOHANG), 0); /* still running */
        kill(decoy, SIGKILL);
        waitpid(decoy, &status, 0);
        assert_int_equal(unlink(procs), 0);
        assert_int_equal(rmdir(dir), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_not_a_cgroup_is_never_acted_on, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_clone3_lands_in_leaf, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_fallback_lands_in_leaf, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test(test_clone3_shared_runs_on_the_callers_memory),
                cmocka_unit_test_setup_teardown(test_spawn_shares_the_callers_memory, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_with_threads_drops_privileges, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_tries_each_candidate, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_not_found_is_127_not_executable_126, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_failure_names_its_step, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test_setup_teardown(test_spawn_into_missing_leaf_fails, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test_setup_teardown(test_destroy_ends_detached_processes, cgroup_setup,
                                                cgroup_teardown),
                cmocka_unit_test_setup_teardown(test_root_override, cgroup_setup, cgroup_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
