/* SPDX-License-Identifier: MIT */
/* The home's records (records.c): openers that meet on a new home.db. */
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

int main(void) {
        const struct CMUnitTest tests[] = {
                env_test(test_concurrent_first_opens),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
