/* SPDX-License-Identifier: MIT */
/* The home's records (records.c): openers that meet on a new home.db, and openers that
 * meet a transaction of another connection of the process, and a home made again under a
 * handle of it. */
#include <pthread.h>
#include <spawn.h>

#include "helpers.h"
#include "records.h"

#define OPENERS 6
#define ROUNDS 100

/* OPENERS processes, released at once, open the records of a new home each round: every
 * one must succeed. The first opens switch home.db to WAL; two switching at once used to
 * fail one of them with "database is locked" at once, without the busy wait (SQLite
 * refuses a lock upgrade that could deadlock): the load suite (tests/load) met it as
 * concurrent 'sandbox create's failing. Before the fix about one round in thirty failed
 * here (5 of 150), so 100 rounds find it almost always. */
static void test_concurrent_first_opens(void **state) {
        test_env *env = *state;
        int failed_rounds = 0;
        char first_failure[512] = "";
        for (int round = 0; round < ROUNDS; round++) {
                const char *dir = env_fresh_path(env, "home");
                int go[2], results[2];
                assert_int_equal(pipe2(go, O_CLOEXEC), 0);
                assert_int_equal(pipe2(results, O_CLOEXEC), 0);
                pid_t pids[OPENERS];
                for (int i = 0; i < OPENERS; i++) {
                        pids[i] = fork();
                        assert_true(pids[i] >= 0);
                        if (pids[i] == 0) {
                                close(go[1]);
                                char c;
                                (void)!read(go[0], &c, 1); /* returns at EOF: all start together */
                                lfs_home *home = NULL;
                                lfs_error *err = NULL;
                                sqlite3 *db = NULL;
                                char msg[256] = "";
                                if (lfs_home_open(dir, &home, &err) < 0 ||
                                    lfs_records_open(home, &db, &err) < 0)
                                        snprintf(msg, sizeof(msg), "%s\n",
                                                 err ? err->message : "(no error)");
                                (void)!write(results[1], msg, strlen(msg));
                                _exit(db ? 0 : 1);
                        }
                }
                close(go[0]);
                close(go[1]);
                close(results[1]);
                int failures = 0;
                for (int i = 0; i < OPENERS; i++) {
                        int status;
                        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
                        failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                }
                char msg[512] = "";
                ssize_t k = read(results[0], msg, sizeof(msg) - 1);
                close(results[0]);
                if (failures) {
                        failed_rounds++;
                        if (!first_failure[0] && k > 0)
                                snprintf(first_failure, sizeof(first_failure), "%.*s", (int)k, msg);
                }
        }
        assert_msg(failed_rounds == 0,
                   "%d of %d rounds of %d openers of a new home.db had one fail; first: %s", failed_rounds,
                   ROUNDS, OPENERS, first_failure);
}

/* What `sqlite3 db "BEGIN IMMEDIATE; ROLLBACK;"` says, run as another process (a new one,
 * not a fork: a forked child would find the parent's connections in SQLite's memory, and
 * take their locks for its own): 0 if it took the write lock, else its stderr in out. */
static int other_process_begin_immediate(const char *db, char *out, size_t size) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, p[1], STDERR_FILENO);
        posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
        char *argv[] = { "sqlite3", "-bail", (char *)db, "BEGIN IMMEDIATE; ROLLBACK;", NULL };
        extern char **environ;
        pid_t pid;
        int r = posix_spawnp(&pid, "sqlite3", &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        assert_msg(r == 0, "cannot run sqlite3 (a test tool, make check's packages): %s", strerror(r));
        read_to_end(p[0], out, size);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/* A connection of this process holds a write transaction on home.db while another opens
 * and closes the records (as the daemon's threads and a library client's do): another
 * process must still find home.db locked. Opening home.db, its WAL and its index to set
 * their modes and closing them dropped every POSIX lock of the process on those files
 * (Linux drops them at any close), SQLite's included, which then went on as if it held
 * them: the other process took the write lock in the middle of the transaction. */
static void test_open_keeps_a_writers_lock(void **state) {
        test_env *env = *state;
        sqlite3 *db = NULL;
        assert_ok(env, lfs_records_open(env->home, &db, &env->err));
        lfs_records_close(db);
        char path[PATH_MAX];
        fmt_path(path, "%s/home.db", env->home_dir);
        sqlite3 *writer = NULL;
        assert_int_equal(sqlite3_open_v2(path, &writer, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
        int began = sqlite3_exec(writer, "BEGIN IMMEDIATE", NULL, NULL, NULL);
        db = NULL;
        int opened = began == SQLITE_OK ? lfs_records_open(env->home, &db, &env->err) : 0;
        lfs_records_close(db);
        char said[512] = "";
        int status = began == SQLITE_OK && opened == 0
                             ? other_process_begin_immediate(path, said, sizeof(said))
                             : 0;
        sqlite3_exec(writer, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(writer);
        assert_int_equal(began, SQLITE_OK);
        assert_ok(env, opened);
        assert_msg(status != 0,
                   "another process took home.db's write lock while a connection of this process "
                   "held it (the records' open dropped the process's locks)");
        assert_msg(strstr(said, "locked"), "sqlite3 failed otherwise than on the lock: %s", said);
}

/* The first opener of a home.db not in WAL yet switches it under a flock, which was taken
 * on a descriptor of home.db and closed: the same loss as above, here of the write lock of
 * a transaction in the rollback journal (two writers then change the file at once). The
 * switch fails at once (SQLite refuses the upgrade to an exclusive lock that could
 * deadlock, without the busy wait: 14 ms for the whole test); SQLite's own
 * descriptor of the failed connection is kept open while another connection holds a lock
 * (SQLite's doing), so only the records' own descriptor could drop it. */
static void test_wal_switch_keeps_a_writers_lock(void **state) {
        test_env *env = *state;
        char path[PATH_MAX];
        fmt_path(path, "%s/home.db", env->home_dir);
        assert_int_equal(mkdir(env->home_dir, 0711), 0);
        sqlite3 *writer = NULL;
        assert_int_equal(sqlite3_open(path, &writer), SQLITE_OK);
        int began = sqlite3_exec(writer, "CREATE TABLE t(x); BEGIN IMMEDIATE", NULL, NULL, NULL);
        sqlite3 *db = NULL;
        int opened = began == SQLITE_OK ? lfs_records_open(env->home, &db, &env->err) : 0;
        lfs_records_close(db);
        char said[512] = "";
        int status = began == SQLITE_OK ? other_process_begin_immediate(path, said, sizeof(said)) : 0;
        sqlite3_exec(writer, "ROLLBACK", NULL, NULL, NULL);
        sqlite3_close(writer);
        assert_int_equal(began, SQLITE_OK);
        assert_msg(opened < 0,
                   "the records switched home.db to WAL during another connection's transaction");
        assert_msg(status != 0,
                   "another process took home.db's write lock while a connection of this process "
                   "held it (the records' WAL switch dropped the process's locks)");
        assert_msg(strstr(said, "locked"), "sqlite3 failed otherwise than on the lock: %s", said);
}

/* A home removed while a handle of it is open, then made again at its path (by another
 * process's create, or by this handle's next records open): the handle held the removed
 * directory, so every records open failed ("cannot make <home>/home.db: No such file or
 * directory") until the process ended. The handle follows the path. */
static void test_home_made_again(void **state) {
        test_env *env = *state;
        char path[PATH_MAX];
        fmt_path(path, "%s/home.db", env->home_dir);
        sqlite3 *db = NULL;
        assert_ok(env, lfs_records_open(env->home, &db, &env->err));
        assert_int_equal(sqlite3_exec(db, "CREATE TABLE old_home(x)", NULL, NULL, NULL), SQLITE_OK);
        lfs_records_close(db);

        assert_int_equal(remove_tree(env->home_dir), 0);
        int fd = -1;
        assert_int_equal(lfs_home_dir(env->home, "sandboxes", 0711, false, &fd, &env->err), -ENOENT);
        assert_int_equal(mkdir(env->home_dir, 0711), 0); /* another process's create */
        db = NULL;
        assert_ok(env, lfs_records_open(env->home, &db, &env->err));
        int old = sqlite3_exec(db, "SELECT x FROM old_home", NULL, NULL, NULL);
        lfs_records_close(db);
        assert_msg(old != SQLITE_OK, "the records opened were the removed home's");
        assert_int_equal(access(path, F_OK), 0);

        assert_int_equal(remove_tree(env->home_dir), 0); /* this time made again by the open */
        db = NULL;
        assert_ok(env, lfs_records_open(env->home, &db, &env->err));
        lfs_records_close(db);
        assert_int_equal(access(path, F_OK), 0);
        assert_ok(env, lfs_home_dir(env->home, "sandboxes", 0711, true, &fd, &env->err));
        close(fd);

        /* A handle opened before the home existed finds what another made since. */
        assert_int_equal(remove_tree(env->home_dir), 0);
        lfs_home *early = NULL;
        assert_ok(env, lfs_home_open(env->home_dir, &early, &env->err));
        assert_ok(env, lfs_home_dir(env->home, "sandboxes", 0711, true, &fd, &env->err));
        close(fd);
        fd = -1;
        int r = lfs_home_dir(early, "sandboxes", 0711, false, &fd, &env->err);
        lfs_home_close(early);
        assert_ok(env, r);
        close(fd);
}

/* A library client's threads, at once, on a handle opened before its home existed: each
 * records open makes the home. The first bind replaced home->fd and home->path without
 * a thought for the others: a closed descriptor number reused for a file ("cannot make
 * <home>/home.db: Not a directory") and a double free of the path (an abort within a
 * second, mostly). */
#define MAKERS 4
#define MAKE_ROUNDS 300

typedef struct maker {
        lfs_home *home;
        pthread_barrier_t *start;
        int failed;
        char said[256];
} maker;

static void *make_and_open(void *arg) {
        maker *m = arg;
        pthread_barrier_wait(m->start);
        lfs_error *err = NULL;
        sqlite3 *db = NULL;
        if (lfs_records_open(m->home, &db, &err) < 0) {
                m->failed = 1;
                snprintf(m->said, sizeof(m->said), "%s", err ? err->message : "(no message)");
                lfs_error_free(err);
                return NULL;
        }
        lfs_records_close(db);
        return NULL;
}

static void test_threads_make_a_missing_home_at_once(void **state) {
        test_env *env = *state;
        size_t before = open_descriptors();
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, MAKERS);
        for (int round = 0; round < MAKE_ROUNDS; round++) {
                assert_true(access(env->home_dir, F_OK) < 0 || remove_tree(env->home_dir) == 0);
                lfs_home *home = NULL;
                assert_ok(env, lfs_home_open(env->home_dir, &home, &env->err));
                maker m[MAKERS];
                pthread_t t[MAKERS];
                for (int k = 0; k < MAKERS; k++) {
                        m[k] = (maker){ .home = home, .start = &start };
                        assert_int_equal(pthread_create(&t[k], NULL, make_and_open, &m[k]), 0);
                }
                for (int k = 0; k < MAKERS; k++)
                        pthread_join(t[k], NULL);
                lfs_home_close(home);
                for (int k = 0; k < MAKERS; k++)
                        assert_msg(!m[k].failed, "round %d: a thread's records open failed: %s", round,
                                   m[k].said);
        }
        pthread_barrier_destroy(&start);
        assert_int_equal(open_descriptors(), before);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                env_test(test_concurrent_first_opens),
                env_test(test_open_keeps_a_writers_lock),
                env_test(test_wal_switch_keeps_a_writers_lock),
                env_test(test_home_made_again),
                env_test(test_threads_make_a_missing_home_at_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
