/* SPDX-License-Identifier: MIT */
/* Shared by the unit tests that reach into a Store's database (after helpers.h and
 * store.h): SQL run on a project's store.db from a connection of the test's own. */
#ifndef LFS_TEST_STORE_HELPERS_H
#define LFS_TEST_STORE_HELPERS_H

#include <sqlite3.h>

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
        assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        return st;
}

#endif
