/* SPDX-License-Identifier: MIT */
/* The home's records (records.c): openers that meet on a new home.db, and the connection
 * an lfs_home keeps between calls. */
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

/* How many records home.db has, read through db. */
static int count_records(sqlite3 *db) {
        sqlite3_stmt *st = NULL;
        assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM sandboxes", -1, &st, NULL), SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        int n = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        return n;
}

/* A record written by another connection (another process's), as a create writes one. */
static void write_record_elsewhere(const char *dir, int number) {
        char *path = xasprintf("%s/home.db", dir), *sql = xasprintf(
                "INSERT INTO sandboxes(project, number, platform, runtime, dir, state) VALUES"
                " ('p', %d, 'linux', 'native', '/nowhere', 'starting')", number);
        sqlite3 *other = NULL;
        assert_int_equal(sqlite3_open(path, &other), SQLITE_OK);
        assert_int_equal(sqlite3_exec(other, sql, NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(other);
        free(path);
        free(sql);
}

/* The connection given back is the next call's, and sees what others wrote meanwhile; it
 * is one caller's at a time; a home.db replaced since (a home made again at its path) is
 * read through a new connection; a forked child never uses its parent's. */
static void test_kept_connection(void **state) {
        test_env *env = *state;
        const char *dir = env_fresh_path(env, "home");
        lfs_home *home = NULL;
        lfs_error *err = NULL;
        sqlite3 *db = NULL, *again = NULL, *second = NULL;
        assert_int_equal(lfs_home_open(dir, &home, &err), 0);
        assert_int_equal(lfs_records_open(home, &db, &err), 0);
        assert_int_equal(count_records(db), 0);
        lfs_records_close(home, db);
        write_record_elsewhere(dir, 1);
        assert_int_equal(lfs_records_open(home, &again, &err), 0);
        assert_ptr_equal(again, db);
        assert_int_equal(count_records(again), 1);
        /* Taken: a second caller meanwhile gets a connection of its own. */
        assert_int_equal(lfs_records_open(home, &second, &err), 0);
        assert_ptr_not_equal(second, again);
        assert_int_equal(count_records(second), 1);
        lfs_records_close(home, second); /* kept */
        lfs_records_close(home, again); /* closed: one is kept already */
        /* A forked child opens its own. */
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                sqlite3 *child = NULL;
                int ok = lfs_records_open(home, &child, NULL) == 0 && child != second &&
                         count_records(child) == 1;
                lfs_records_close(home, child);
                _exit(ok ? 0 : 1);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        /* home.db replaced by a new one: read there, not through the kept connection. */
        static const char *const files[] = { "home.db", "home.db-wal", "home.db-shm" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                char *from = xasprintf("%s/%s", dir, files[i]), *to = xasprintf("%s/old-%s", dir, files[i]);
                assert_int_equal(rename(from, to), 0);
                free(from);
                free(to);
        }
        assert_int_equal(lfs_records_open(home, &db, &err), 0);
        assert_int_equal(count_records(db), 0);
        lfs_records_close(home, db);
        write_record_elsewhere(dir, 2);
        assert_int_equal(lfs_records_open(home, &db, &err), 0);
        assert_int_equal(count_records(db), 1);
        lfs_records_close(home, db);
        lfs_home_close(home);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                env_test(test_concurrent_first_opens),
                env_test(test_kept_connection),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
