/* SPDX-License-Identifier: MIT */
/* Shared by the unit tests that reach into a Store's database (after helpers.h and
 * store.h): SQL run on a project's store.db from a connection of the test's own. */
#ifndef LFS_TEST_STORE_HELPERS_H
#define LFS_TEST_STORE_HELPERS_H

#include <poll.h>
#include <sqlite3.h>
#include <sys/syscall.h>

/* Runs sql on project's store.db, failing the test if it fails. */
static inline void store_db_exec(test_env *env, const char *project, const char *sql) {
        sqlite3 *db;
        assert_int_equal(sqlite3_open(env_path(env, "home/projects/%s/store.db", project), &db), SQLITE_OK);
        char *msg = NULL;
        int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
        assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
        sqlite3_free(msg);
        sqlite3_close(db);
}

/* The first row of sql, stepped onto; the caller finalizes. */
static inline sqlite3_stmt *query_row(sqlite3 *db, const char *sql) {
        sqlite3_stmt *st = NULL;
        assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                   sqlite3_errmsg(db));
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        return st;
}

/* A child that opens project's Store and runs work on it with LAYERFS_FAULT=step (STEP#N@
 * is added), stopped there: its pid in *ret_pidfd (a pidfd). The step must be reached. */
typedef int (*store_child_fn)(lfs_store *store);
static inline void store_child_at(test_env *env, const char *project, const char *step, store_child_fn work,
                                  int *ret_pidfd) {
        const char *fifo = env_path(env, "fault-%s", project);
        assert_int_equal(mkfifo(fifo, 0600), 0);
        int fd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        assert_true(fd >= 0);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                _cleanup_free_ char *fault = xasprintf("%s@%s", step, fifo);
                lfs_store *store = NULL;
                setenv("LAYERFS_FAULT", fault, 1);
                _exit(lfs_store_open(env->home, project, &store, NULL) < 0 || work(store) < 0 ? 1 : 0);
        }
        int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        assert_true(pidfd >= 0);
        /* The child reaches the step (and writes to the pipe) or ends without it. */
        struct pollfd fds[] = { { .fd = fd, .events = POLLIN }, { .fd = pidfd, .events = POLLIN } };
        assert_true(poll(fds, 2, 120 * 1000) > 0);
        char line[128] = "";
        ssize_t n = fds[0].revents & POLLIN ? read(fd, line, sizeof(line) - 1) : 0;
        line[n > 0 ? n : 0] = 0;
        if (!(fds[0].revents & POLLIN))
                kill(pid, SIGKILL);
        close(fd);
        const char *name = strchr(step, '#') ? strndupa(step, (size_t)(strchr(step, '#') - step)) : step;
        assert_msg(!strncmp(line, name, strlen(name)),
                   "the child ended without reaching step %s (it said '%s')", step, line);
        *ret_pidfd = pidfd;
}

/* The child stopped at its step goes on: the test's side of the pipe opened and closed. */
static inline void store_child_go(test_env *env, const char *project) {
        int fd = open(env_path(env, "fault-%s", project), O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        close(fd);
}

static inline void store_child_kill(int pidfd) {
        siginfo_t si;
        assert_int_equal(syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0), 0);
        assert_int_equal(waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED), 0);
        close(pidfd);
}

/* Runs work(store, i, arg) in n (at most 8) children at once, child i on an open of its
 * own of project's Store; each must end well (work 0 or more). */
typedef int (*store_worker_fn)(lfs_store *store, size_t i, const void *arg);
static inline void store_children_run(test_env *env, const char *project, size_t n, store_worker_fn work,
                                      const void *arg) {
        pid_t pids[8];
        assert_true(n <= ELEMENTSOF(pids));
        fflush(stdout);
        fflush(stderr);
        for (size_t i = 0; i < n; i++) {
                pids[i] = fork();
                assert_true(pids[i] >= 0);
                if (pids[i] == 0) {
                        lfs_store *store = NULL;
                        int r = lfs_store_open(env->home, project, &store, NULL);
                        _exit(r < 0 || work(store, i, arg) < 0 ? 1 : 0);
                }
        }
        for (size_t i = 0; i < n; i++) {
                int status;
                assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
                assert_true(WIFEXITED(status));
                assert_int_equal(WEXITSTATUS(status), 0);
        }
}

#endif
