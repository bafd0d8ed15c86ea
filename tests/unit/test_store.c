/* SPDX-License-Identifier: MIT */
/*
 * The Store through the public API on a real temporary home: refusals and their codes,
 * compare-and-swap moves, commits of change sets, verification of damaged objects,
 * directory round trips, and the io layer with and without io_uring.
 */
#include <inttypes.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/syscall.h>
#include <sys/types.h>

#include "helpers.h"
#include "store.h"
#include "store_helpers.h"

/* Entries in dir other than "." and "..". */
static size_t count_entries(const char *dir) {
        DIR *d = opendir(dir);
        if (!d)
                return 0;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static void close_store(test_env *env) {
        lfs_store_close(env->store);
        env->store = NULL;
}

/* ---- project init and open ---- */

static void test_init_refuses_bad_names(void **state) {
        test_env *env = *state;
        static const char *const bad[] = { "Bad", "", "-x", ".x", "a/b", "../escape", "a b" };
        const char *from = make_tree_dir(env, TREE(REG("f", "1")));
        for (size_t i = 0; i < COUNT_OF(bad); i++) {
                lfs_id commit;
                memset(&commit, 0x11, sizeof(commit));
                int r = lfs_project_init(env->home, bad[i], from, &commit, &env->err);
                char quoted[128];
                fmt_path(quoted, "'%s'", bad[i]);
                assert_error(env, r, LFS_INVALID_INPUT, quoted);
                assert_int_equal(commit.bytes[0], 0x11);
        }
        /* Refused before anything was made. */
        assert_int_equal(count_entries(env_path(env, "home/projects")), 0);
        lfs_project_info *projects = NULL;
        size_t n = 99;
        assert_ok(env, lfs_project_list(env->home, &projects, &n, &env->err));
        assert_int_equal(n, 0);
        lfs_project_list_free(projects, n);
}

static void test_init_refuses_missing_from_dir(void **state) {
        test_env *env = *state;
        const char *missing = env_path(env, "does-not-exist");
        lfs_id commit;
        int r = lfs_project_init(env->home, "proj", missing, &commit, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, missing);
        r = lfs_store_open(env->home, "proj", &env->store, &env->err);
        assert_error(env, r, LFS_NO_SUCH_PROJECT, "proj");
        assert_null(env->store);
}

static void test_init_refuses_a_file_as_from(void **state) {
        test_env *env = *state;
        const char *file = env_path(env, "a-file");
        write_text(file, "not a directory");
        lfs_id commit;
        int r = lfs_project_init(env->home, "proj", file, &commit, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, file);
        r = lfs_store_open(env->home, "proj", &env->store, &env->err);
        assert_error(env, r, LFS_NO_SUCH_PROJECT, "proj");
        /* No half-made project or temporary directory is left. */
        assert_int_equal(count_entries(env_path(env, "home/projects")), 0);
}

static void test_init_twice_is_refused_and_keeps_the_first(void **state) {
        test_env *env = *state;
        lfs_id first = env_init_project(env, "proj", TREE(REG("first", "1")));
        close_store(env);
        const char *other = make_tree_dir(env, TREE(REG("second", "2")));
        lfs_id second;
        int r = lfs_project_init(env->home, "proj", other, &second, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "'proj'");

        assert_ok(env, lfs_store_open(env->home, "proj", &env->store, &env->err));
        lfs_id head = head_of(env, "main");
        assert_id_equal(env, &head, &first);
        assert_dir_matches(export_ref(env, "main"), TREE(REG("first", "1")));
        assert_int_equal(count_entries(env_path(env, "home/projects")), 1);
}

static void test_init_without_from_is_empty(void **state) {
        test_env *env = *state;
        lfs_id commit = env_init_project(env, "proj", NULL);
        assert_string_equal(lfs_store_project(env->store), "proj");
        lfs_commit_info c = commit_info(env, "main");
        assert_id_equal(env, &c.id, &commit);
        assert_int_equal(c.n_parents, 0);
        assert_id_equal(env, &c.tree, lfs_empty_tree_id());
        assert_dir_matches(export_ref(env, "main"), NO_ENTRIES);
}

static void test_open_missing_project(void **state) {
        test_env *env = *state;
        int r = lfs_store_open(env->home, "nope", &env->store, &env->err);
        assert_error(env, r, LFS_NO_SUCH_PROJECT, "nope");
        env_init_project(env, "proj", NULL);
        close_store(env);
        r = lfs_store_open(env->home, "nope", &env->store, &env->err);
        assert_error(env, r, LFS_NO_SUCH_PROJECT, "nope");
        /* A name that could never be a project is bad input, not a missing project. */
        r = lfs_store_open(env->home, "../proj", &env->store, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "../proj");
        assert_null(env->store);
}

static void test_open_without_a_name(void **state) {
        test_env *env = *state;
        int r = lfs_store_open(env->home, NULL, &env->store, &env->err);
        assert_error(env, r, LFS_NO_SUCH_PROJECT, NULL);
        env_init_project(env, "only", NULL);
        close_store(env);
        assert_ok(env, lfs_store_open(env->home, NULL, &env->store, &env->err));
        assert_string_equal(lfs_store_project(env->store), "only");
        close_store(env);
        env_init_project(env, "another", NULL);
        close_store(env);
        r = lfs_store_open(env->home, NULL, &env->store, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, NULL);
}

static void test_project_list(void **state) {
        test_env *env = *state;
        env_init_project(env, "zeta", NULL);
        assert_ok(env, lfs_branch_create(env->store, "dev", NULL, NULL, &env->err));
        env_init_project(env, "alpha", NULL);
        lfs_project_info *projects = NULL;
        size_t n = 0;
        assert_ok(env, lfs_project_list(env->home, &projects, &n, &env->err));
        assert_int_equal(n, 2);
        assert_string_equal(projects[0].project, "alpha");
        assert_int_equal(projects[0].n_branches, 1);
        assert_string_equal(projects[0].branches[0], "main");
        assert_string_equal(projects[1].project, "zeta");
        assert_int_equal(projects[1].n_branches, 2);
        assert_string_equal(projects[1].branches[0], "dev");
        assert_string_equal(projects[1].branches[1], "main");
        lfs_project_list_free(projects, n);
}

static void test_open_garbage_store_db(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("f", "1")));
        close_store(env);
        const char *db = env_path(env, "home/projects/proj/store.db");
        char garbage[8192];
        for (size_t i = 0; i < sizeof(garbage); i++)
                garbage[i] = (char)("not a database "[i % 15]);
        write_bytes(db, garbage, sizeof(garbage), 0644);
        unlink(env_path(env, "home/projects/proj/store.db-wal"));
        unlink(env_path(env, "home/projects/proj/store.db-shm"));
        int r = lfs_store_open(env->home, "proj", &env->store, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "store.db");
        assert_null(env->store);
}

static void test_open_sqlite_db_that_is_not_a_store(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        close_store(env);
        const char *db = env_path(env, "home/projects/proj/store.db");
        assert_int_equal(unlink(db), 0);
        sqlite3 *other;
        assert_int_equal(sqlite3_open(db, &other), SQLITE_OK);
        assert_int_equal(
                sqlite3_exec(other, "CREATE TABLE t(x); INSERT INTO t VALUES(1);", NULL, NULL, NULL),
                SQLITE_OK);
        sqlite3_close(other);
        int r = lfs_store_open(env->home, "proj", &env->store, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "store.db");
        assert_null(env->store);
}

static void test_open_project_without_store_db(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        close_store(env);
        assert_int_equal(unlink(env_path(env, "home/projects/proj/store.db")), 0);
        int r = lfs_store_open(env->home, "proj", &env->store, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "store.db");
        /* Opening must not make a new, empty Store in its place. */
        struct stat st;
        assert_int_equal(stat(env_path(env, "home/projects/proj/store.db"), &st), -1);
}

/* ---- branches ---- */

static void test_branch_create_existing_is_refused(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("f", "1")));
        assert_ok(env, lfs_branch_create(env->store, "dev", NULL, NULL, &env->err));
        lfs_id moved = commit_spec(env, "main", TREE(REG("f", "2")), "change");
        int r = lfs_branch_create(env->store, "dev", "main", NULL, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "'dev'");
        r = lfs_branch_create(env->store, "main", "dev", NULL, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "'main'");
        lfs_id dev = head_of(env, "dev"), main_head = head_of(env, "main");
        assert_id_equal(env, &dev, &base);
        assert_id_equal(env, &main_head, &moved);
}

static void test_branch_create_refusals(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        int r = lfs_branch_create(env->store, "bad..name.", NULL, NULL, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "bad..name.");
        r = lfs_branch_create(env->store, "dev", "no-such-branch", NULL, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "no-such-branch");
        lfs_branch_info *branches;
        size_t n;
        assert_ok(env, lfs_branch_list(env->store, &branches, &n, &env->err));
        assert_int_equal(n, 1);
        lfs_branch_list_free(branches, n);
}

static void test_branch_create_from_commit_prefix(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("f", "1")));
        commit_spec(env, "main", TREE(REG("f", "2")), "change");
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&base, hex);
        hex[8] = 0;
        lfs_id created;
        assert_ok(env, lfs_branch_create(env->store, "old", hex, &created, &env->err));
        assert_id_equal(env, &created, &base);
        assert_dir_matches(export_ref(env, "old"), TREE(REG("f", "1")));
}

static void test_branch_delete_and_log_of_missing_branch(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        int r = lfs_branch_delete(env->store, "ghost", 0, NULL, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "ghost");
        lfs_commit_info *log = NULL;
        size_t n = 0;
        r = lfs_branch_log(env->store, "ghost", 0, &log, &n, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "ghost");
        assert_null(log);

        assert_ok(env, lfs_branch_create(env->store, "dev", NULL, NULL, &env->err));
        lfs_id dev_head = head_of(env, "dev"), was;
        assert_ok(env, lfs_branch_delete(env->store, "dev", 0, &was, &env->err));
        assert_id_equal(env, &was, &dev_head);
        r = lfs_branch_log(env->store, "dev", 0, &log, &n, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "dev");
        r = lfs_branch_delete(env->store, "dev", 0, NULL, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "dev");
        /* Hostile names are refused by the name rules before anything is looked at. */
        r = lfs_branch_delete(env->store, "../x", 1, NULL, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "../x");
        /* main only with force, and the refusal names the flag. */
        r = lfs_branch_delete(env->store, "main", 0, NULL, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "--force");
        lfs_id main_head = head_of(env, "main");
        assert_ok(env, lfs_branch_delete(env->store, "main", 1, &was, &env->err));
        assert_id_equal(env, &was, &main_head);
        r = lfs_branch_log(env->store, "main", 0, &log, &n, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "main");
}

static void test_branch_log_order_and_limit(void **state) {
        test_env *env = *state;
        lfs_id c0 = env_init_project(env, "proj", TREE(REG("f", "0")));
        lfs_id c1 = commit_spec(env, "main", TREE(REG("f", "1")), "first");
        lfs_id c2 = commit_spec(env, "main", TREE(REG("f", "2")), "second");
        lfs_commit_info *log = NULL;
        size_t n = 0;
        assert_ok(env, lfs_branch_log(env->store, "main", 0, &log, &n, &env->err));
        assert_int_equal(n, 3);
        assert_id_equal(env, &log[0].id, &c2);
        assert_id_equal(env, &log[1].id, &c1);
        assert_id_equal(env, &log[2].id, &c0);
        assert_string_equal(log[0].message, "second");
        assert_string_equal(log[0].author, "unit-test <unit@test>");
        assert_id_equal(env, &log[0].parents[0], &c1);
        assert_int_equal(log[2].n_parents, 0);
        lfs_commit_info_free(log, n);
        assert_ok(env, lfs_branch_log(env->store, "main", 2, &log, &n, &env->err));
        assert_int_equal(n, 2);
        assert_id_equal(env, &log[1].id, &c1);
        lfs_commit_info_free(log, n);
}

static void test_branch_commit_refusals(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("f", "1")));
        const char *dir = make_tree_dir(env, TREE(REG("f", "2")));
        lfs_id commit;
        int r = lfs_branch_commit(env->store, "main", dir, "", &commit, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, NULL);
        r = lfs_branch_commit(env->store, "main", dir, NULL, &commit, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, NULL);
        r = lfs_branch_commit(env->store, "ghost", dir, "msg", &commit, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "ghost");
        const char *missing = env_path(env, "missing-dir");
        r = lfs_branch_commit(env->store, "main", missing, "msg", &commit, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, missing);
        lfs_id head = head_of(env, "main");
        assert_id_equal(env, &head, &base);
        assert_int_equal(log_length(env, "main"), 1);
}

static void test_branch_commit_of_unchanged_dir_makes_no_commit(void **state) {
        test_env *env = *state;
        const entry_spec *spec = TREE(REG("f", "1"), XREG("run", "x"), LINK("l", "f"), EMPTY_DIR("e/f"));
        lfs_id base = env_init_project(env, "proj", spec);
        lfs_id again = commit_spec(env, "main", spec, "nothing changed");
        assert_id_equal(env, &again, &base);
        assert_int_equal(log_length(env, "main"), 1);
        /* An export recorded again is the same tree too. */
        const char *exported = export_ref(env, "main");
        lfs_id from_export;
        assert_ok(env, lfs_branch_commit(env->store, "main", exported, "same", &from_export, &env->err));
        assert_id_equal(env, &from_export, &base);
}

static void test_branch_move_compare_and_swap(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("f", "1")));
        assert_ok(env, lfs_branch_create(env->store, "dev", NULL, NULL, &env->err));
        lfs_id newer = commit_spec(env, "main", TREE(REG("f", "2")), "newer");

        /* dev is at base, not at newer: a stale expectation must not move it. */
        int r = lfs_branch_move(env->store, "dev", &newer, &newer, &env->err);
        assert_error(env, r, LFS_BUSY, "dev");
        lfs_id dev = head_of(env, "dev");
        assert_id_equal(env, &dev, &base);

        assert_ok(env, lfs_branch_move(env->store, "dev", &base, &newer, &env->err));
        dev = head_of(env, "dev");
        assert_id_equal(env, &dev, &newer);

        /* The same call again is now stale. */
        r = lfs_branch_move(env->store, "dev", &base, &newer, &env->err);
        assert_error(env, r, LFS_BUSY, "dev");

        /* Backwards is allowed when expected is right. */
        assert_ok(env, lfs_branch_move(env->store, "dev", &newer, &base, &env->err));
        dev = head_of(env, "dev");
        assert_id_equal(env, &dev, &base);
}

static void test_branch_move_refusals(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", NULL);
        lfs_id unknown;
        lfs_sha256("no such commit", 14, &unknown);
        int r = lfs_branch_move(env->store, "main", &base, &unknown, &env->err);
        assert_true(r < 0);
        assert_non_null(env->err);
        lfs_error_free(env->err);
        env->err = NULL;
        lfs_id head = head_of(env, "main");
        assert_id_equal(env, &head, &base);
        r = lfs_branch_move(env->store, "ghost", &base, &base, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "ghost");
}

/* ---- export ---- */

static void test_export_into_non_empty_dir_is_refused(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("f", "1")));
        const char *target = env_path(env, "target");
        write_text(env_path(env, "target/precious"), "keep me");
        int r = lfs_branch_export(env->store, "main", target, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, target);
        assert_dir_matches(target, TREE(REG("precious", "keep me")));
        /* Nothing was left beside it either. */
        assert_int_equal(count_entries(env->root), 3); /* home, dir-0, target */
}

static void test_export_refusals(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("f", "1")));
        const char *file = env_path(env, "a-file");
        write_text(file, "x");
        int r = lfs_branch_export(env->store, "main", file, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, file);
        r = lfs_branch_export(env->store, "ghost", env_path(env, "out"), &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "ghost");
        const char *orphan = env_path(env, "no/parent/out");
        r = lfs_branch_export(env->store, "main", orphan, &env->err);
        assert_true(r < 0);
        lfs_error_free(env->err);
        env->err = NULL;
        struct stat st;
        assert_int_equal(stat(env_path(env, "out"), &st), -1);
        assert_int_equal(stat(env_path(env, "no"), &st), -1);
}

static void test_export_into_existing_empty_dir(void **state) {
        test_env *env = *state;
        const entry_spec *spec = TREE(REG("f", "1"), REG("d/g", "2"));
        env_init_project(env, "proj", spec);
        const char *target = env_path(env, "empty-target");
        assert_int_equal(mkdir(target, 0755), 0);
        assert_ok(env, lfs_branch_export(env->store, "main", target, &env->err));
        assert_dir_matches(target, spec);
}

/* ---- round trips of directories ---- */

static void test_round_trip_of_every_kind(void **state) {
        test_env *env = *state;
        const entry_spec *spec =
                TREE(REG("plain.txt", "hello\n"), REG("empty", ""), XREG("bin/tool", "#!/bin/sh\necho hi\n"),
                     LINK("rel-link", "plain.txt"), LINK("abs-link", "/etc/hostname"),
                     LINK("dangling", "no/such/target"), LINK("dir-link", "bin"), EMPTY_DIR("cache/a/b"),
                     REG("with space.txt", "s"), REG("trailing ", "t"), REG("caf\xc3\xa9 \xe2\x98\x95", "u"),
                     REG("-dash", "d"), REG(".hidden/x", "h"), REG("deep/er/and/deeper/file", "deep"),
                     REG("tab\there", "tab"), REG("binary", "\x01\x02\xff\xfe"));
        env_init_project(env, "proj", spec);
        assert_dir_matches(export_ref(env, "main"), spec);
}

static void test_round_trip_of_name_with_leading_space(void **state) {
        test_env *env = *state;
        /* Legal names on Linux; nothing may rename them on the way through the Store. */
        const entry_spec *spec = TREE(REG(" leading", "1"), REG("ok", "2"), REG("d/ x", "3"));
        env_init_project(env, "proj", spec);
        assert_dir_matches(export_ref(env, "main"), spec);
        uint64_t checked = 0;
        assert_ok(env, lfs_store_verify(env->store, &checked, &env->err));
}

static void test_round_trip_of_many_and_large_files(void **state) {
        test_env *env = *state;
        const char *dir = env_path(env, "many");
        /* More than one io batch, files of many sizes, and a file above the streaming size. */
        for (int i = 0; i < 200; i++) {
                char path[PATH_MAX], data[600];
                fmt_path(path, "%s/sub%d/file-%03d", dir, i % 3, i);
                for (int k = 0; k < i * 3 && k < (int)sizeof(data); k++)
                        data[k] = (char)('a' + (i + k) % 26);
                write_bytes(path, data, (size_t)(i * 3 < 600 ? i * 3 : 600), i % 7 ? 0644 : 0755);
        }
        size_t big_len = (5u << 20) + 17;
        char *big = malloc(big_len);
        assert_non_null(big);
        for (size_t i = 0; i < big_len; i++)
                big[i] = (char)(i * 2654435761u >> 13);
        write_bytes(env_path(env, "many/big.bin"), big, big_len, 0644);
        free(big);
        /* Fifos are not recorded (SPEC 1). */
        assert_int_equal(mkfifo(env_path(env, "many/fifo"), 0644), 0);

        lfs_id commit;
        assert_ok(env, lfs_project_init(env->home, "proj", dir, &commit, &env->err));
        assert_ok(env, lfs_store_open(env->home, "proj", &env->store, &env->err));
        const char *out = export_ref(env, "main");
        char fifo[PATH_MAX];
        fmt_path(fifo, "%s/fifo", out);
        struct stat st;
        assert_int_equal(lstat(fifo, &st), -1);
        assert_int_equal(unlink(env_path(env, "many/fifo")), 0);
        assert_same_tree(dir, out);
        uint64_t checked = 0;
        assert_ok(env, lfs_store_verify(env->store, &checked, &env->err));
        /* 1 commit, 4 trees (root and sub0..2), 201 blobs (every length differs) and big.bin. */
        assert_int_equal(checked, 1 + 4 + 201);
}

/* ---- commit_changes ---- */

static void test_commit_changes_applies_every_kind(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj",
                                       TREE(REG("keep", "k"), REG("old", "o"), REG("dir/del", "d"),
                                            REG("dir/stay", "s"), REG("gone/a", "1"), REG("gone/b/c", "2"),
                                            REG("modify", "before"), REG("to-dir", "was a file")));
        write_text(env_path(env, "sources/new.txt"), "brand new");
        write_text(env_path(env, "sources/tool"), "#!/bin/sh\n");
        write_text(env_path(env, "sources/modified"), "after");
        write_text(env_path(env, "sources/deep"), "deep file");
        const lfs_path_change changes[] = {
                { "new.txt", LFS_ENTRY_FILE, env_path(env, "sources/new.txt"), NULL, 0 },
                { "bin/tool", LFS_ENTRY_EXEC, env_path(env, "sources/tool"), NULL, 0 },
                { "link", LFS_ENTRY_SYMLINK, "new.txt", NULL, 0 },
                { "old", LFS_ENTRY_NONE, NULL, NULL, 0 },
                { "dir/del", LFS_ENTRY_NONE, NULL, NULL, 0 },
                { "gone", LFS_ENTRY_NONE, NULL, NULL, 0 },
                { "empty/deeper/still", LFS_ENTRY_DIR, NULL, NULL, 0 },
                { "a/b/c/d.txt", LFS_ENTRY_FILE, env_path(env, "sources/deep"), NULL, 0 },
                { "modify", LFS_ENTRY_FILE, env_path(env, "sources/modified"), NULL, 0 },
                { "to-dir/inside", LFS_ENTRY_FILE, env_path(env, "sources/new.txt"), NULL, 0 },
                { "not-there", LFS_ENTRY_NONE, NULL, NULL, 0 },
        };
        lfs_id commit;
        int merged = -1;
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &base, changes, COUNT_OF(changes),
                                                "apply", &commit, &merged, &env->err));
        assert_int_equal(merged, 0);
        lfs_id head = head_of(env, "main");
        assert_id_equal(env, &head, &commit);
        lfs_commit_info c = commit_info(env, "main");
        assert_int_equal(c.n_parents, 1);
        assert_id_equal(env, &c.parents[0], &base);
        assert_dir_matches(export_ref(env, "main"),
                           TREE(REG("keep", "k"), REG("dir/stay", "s"), REG("new.txt", "brand new"),
                                XREG("bin/tool", "#!/bin/sh\n"), LINK("link", "new.txt"),
                                EMPTY_DIR("empty/deeper/still"), REG("a/b/c/d.txt", "deep file"),
                                REG("modify", "after"), REG("to-dir/inside", "brand new")));
        uint64_t checked;
        assert_ok(env, lfs_store_verify(env->store, &checked, &env->err));
}

static void test_commit_changes_later_change_wins(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("f", "1")));
        write_text(env_path(env, "one"), "one");
        write_text(env_path(env, "two"), "two");
        const lfs_path_change changes[] = {
                { "f", LFS_ENTRY_FILE, env_path(env, "one"), NULL, 0 },
                { "f", LFS_ENTRY_NONE, NULL, NULL, 0 },
                { "f", LFS_ENTRY_FILE, env_path(env, "two"), NULL, 0 },
                { "g", LFS_ENTRY_FILE, env_path(env, "one"), NULL, 0 },
                { "g", LFS_ENTRY_NONE, NULL, NULL, 0 },
        };
        lfs_id commit;
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &base, changes, COUNT_OF(changes), "m",
                                                &commit, NULL, &env->err));
        assert_dir_matches(export_ref(env, "main"), TREE(REG("f", "two")));
}

static void test_commit_changes_refuses_bad_changes(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("f", "1")));
        const char *good = env_path(env, "good");
        write_text(good, "g");
        static const char *const bad_paths[] = { "", "/abs", "a/../b", "./a", "a//b", "a/", "..", "a/." };
        for (size_t i = 0; i < COUNT_OF(bad_paths); i++) {
                const lfs_path_change change = { bad_paths[i], LFS_ENTRY_FILE, good, NULL, 0 };
                lfs_id commit;
                int r = lfs_store_commit_changes(env->store, "main", &base, &change, 1, "m", &commit, NULL,
                                                 &env->err);
                assert_error(env, r, LFS_INVALID_INPUT, NULL);
        }
        const lfs_path_change bad_sources[] = {
                { "x", LFS_ENTRY_FILE, env_path(env, "missing"), NULL, 0 },
                { "x", LFS_ENTRY_EXEC, env->root, NULL, 0 },
                { "x", LFS_ENTRY_FILE, NULL, NULL, 0 },
                { "x", LFS_ENTRY_SYMLINK, NULL, NULL, 0 },
        };
        for (size_t i = 0; i < COUNT_OF(bad_sources); i++) {
                lfs_id commit;
                int r = lfs_store_commit_changes(env->store, "main", &base, &bad_sources[i], 1, "m", &commit,
                                                 NULL, &env->err);
                assert_error(env, r, LFS_INVALID_INPUT, NULL);
        }
        const lfs_path_change fine = { "x", LFS_ENTRY_FILE, good, NULL, 0 };
        lfs_id commit;
        int r = lfs_store_commit_changes(env->store, "main", &base, &fine, 1, "", &commit, NULL, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, NULL);
        r = lfs_store_commit_changes(env->store, "ghost", &base, &fine, 1, "m", &commit, NULL, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "ghost");
        lfs_id head = head_of(env, "main");
        assert_id_equal(env, &head, &base);
        assert_int_equal(log_length(env, "main"), 1);
}

static void test_commit_changes_without_changes_makes_no_commit(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("f", "same")));
        lfs_id commit;
        int merged = -1;
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &base, NULL, 0, "nothing", &commit,
                                                &merged, &env->err));
        assert_id_equal(env, &commit, &base);
        assert_int_equal(merged, 0);
        /* Writing the same contents again is no change either. */
        write_text(env_path(env, "same"), "same");
        const lfs_path_change rewrite = { "f", LFS_ENTRY_FILE, env_path(env, "same"), NULL, 0 };
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &base, &rewrite, 1, "rewrite", &commit,
                                                &merged, &env->err));
        assert_id_equal(env, &commit, &base);
        assert_int_equal(log_length(env, "main"), 1);
}

static void test_commit_changes_without_changes_after_branch_moved(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("f", "1")));
        lfs_id moved = commit_spec(env, "main", TREE(REG("f", "1"), REG("g", "2")), "moved");
        lfs_id commit;
        int merged = -1;
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &base, NULL, 0, "nothing", &commit,
                                                &merged, &env->err));
        /* Nothing was changed against base, so there is nothing to record. */
        lfs_id head = head_of(env, "main");
        assert_id_equal(env, &head, &moved);
        assert_int_equal(log_length(env, "main"), 2);
}

static void test_commit_changes_merges_when_branch_moved(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("theirs", "1"), REG("mine", "1")));
        lfs_id moved = commit_spec(env, "main", TREE(REG("theirs", "2"), REG("mine", "1")), "moved");
        write_text(env_path(env, "mine"), "2");
        const lfs_path_change change = { "mine", LFS_ENTRY_FILE, env_path(env, "mine"), NULL, 0 };
        lfs_id commit;
        int merged = -1;
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &base, &change, 1, "workspace", &commit,
                                                &merged, &env->err));
        assert_int_equal(merged, 1);
        lfs_id head = head_of(env, "main");
        assert_id_equal(env, &head, &commit);
        lfs_commit_info c = commit_info(env, "main");
        assert_int_equal(c.n_parents, 2);
        assert_id_equal(env, &c.parents[0], &moved);
        assert_dir_matches(export_ref(env, "main"), TREE(REG("theirs", "2"), REG("mine", "2")));
        /* The workspace's own commit is the second parent, on top of base. */
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&c.parents[1], hex);
        lfs_commit_info *log;
        size_t n;
        assert_ok(env, lfs_branch_log(env->store, hex, 0, &log, &n, &env->err));
        assert_int_equal(n, 2);
        assert_id_equal(env, &log[1].id, &base);
        assert_string_equal(log[0].message, "workspace");
        lfs_commit_info_free(log, n);
        assert_dir_matches(export_ref(env, hex), TREE(REG("theirs", "1"), REG("mine", "2")));
}

static void test_commit_changes_conflict_changes_nothing(void **state) {
        test_env *env = *state;
        lfs_id base = env_init_project(env, "proj", TREE(REG("f", "base"), REG("g", "base")));
        lfs_id moved = commit_spec(env, "main", TREE(REG("f", "theirs"), REG("g", "theirs")), "moved");
        write_text(env_path(env, "mine"), "mine");
        const lfs_path_change changes[] = {
                { "f", LFS_ENTRY_FILE, env_path(env, "mine"), NULL, 0 },
                { "g", LFS_ENTRY_NONE, NULL, NULL, 0 },
                { "h", LFS_ENTRY_FILE, env_path(env, "mine"), NULL, 0 },
        };
        lfs_id commit;
        memset(&commit, 0x22, sizeof(commit));
        int merged = -1;
        int r = lfs_store_commit_changes(env->store, "main", &base, changes, COUNT_OF(changes), "ws",
                                         &commit, &merged, &env->err);
        assert_true(r < 0);
        assert_non_null(env->err);
        assert_int_equal(env->err->code, LFS_CONFLICT);
        assert_int_equal(env->err->n_paths, 2);
        assert_string_equal(env->err->paths[0], "f");
        assert_string_equal(env->err->paths[1], "g");
        lfs_error_free(env->err);
        env->err = NULL;
        assert_int_equal(merged, -1);
        assert_int_equal(commit.bytes[0], 0x22);
        lfs_id head = head_of(env, "main");
        assert_id_equal(env, &head, &moved);
        assert_int_equal(log_length(env, "main"), 2);
        assert_dir_matches(export_ref(env, "main"), TREE(REG("f", "theirs"), REG("g", "theirs")));
}

/* ---- verify ---- */

/* Larger than any blob the Store packs together, so it is a file of its own. */
#ifdef LFS_PACK_MAX_BLOB
#define LOOSE_BLOB_SIZE ((size_t)LFS_PACK_MAX_BLOB + 4096)
#else
#define LOOSE_BLOB_SIZE ((size_t)100 << 10)
#endif

/*
 * Overwrites the first byte of `content` wherever the Store keeps it below objects/
 * (a loose object, or inside a pack), as a disk error would. Returns how many copies
 * were damaged. Blobs are stored uncompressed, so their bytes can be found.
 */
static size_t corrupt_stored_bytes(const char *dir, const char *content, size_t len) {
        DIR *d = opendir(dir);
        assert_msg(d, "cannot read %s: %s", dir, strerror(errno));
        size_t damaged = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                char path[PATH_MAX];
                fmt_path(path, "%s/%s", dir, de->d_name);
                struct stat st;
                assert_int_equal(lstat(path, &st), 0);
                if (S_ISDIR(st.st_mode)) {
                        damaged += corrupt_stored_bytes(path, content, len);
                        continue;
                }
                size_t size = 0;
                char *data = read_whole(path, &size);
                assert_non_null(data);
                const char *at = memmem(data, size, content, len);
                if (at) {
                        /* Objects are read-only; a disk error does not care. */
                        assert_int_equal(chmod(path, (st.st_mode & 07777) | S_IWUSR), 0);
                        int fd = open(path, O_WRONLY | O_CLOEXEC);
                        assert_true(fd >= 0);
                        char flipped = (char)(content[0] ^ 0x20);
                        assert_int_equal(pwrite(fd, &flipped, 1, at - data), 1);
                        close(fd);
                        damaged++;
                }
                free(data);
        }
        closedir(d);
        return damaged;
}

static void corrupt_blob(test_env *env, const char *project, const char *content, size_t len) {
        size_t n = corrupt_stored_bytes(env_path(env, "home/projects/%s/objects", project), content, len);
        assert_msg(n == 1, "the blob was found %zu times below objects/", n);
}

/* A file content of `size` bytes that appears nowhere else. */
static char *distinct_content(size_t size, char seed) {
        char *data = malloc(size + 1);
        assert_non_null(data);
        for (size_t i = 0; i < size; i++)
                data[i] = (char)('A' + (seed + i * 7 + i / 26) % 26);
        data[size] = 0;
        return data;
}

static void test_verify_passes_on_a_fresh_store(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj",
                         TREE(REG("a", "1"), REG("b", "2"), REG("d/c", "3"), REG("d/dup", "1")));
        uint64_t checked = 0;
        assert_ok(env, lfs_store_verify(env->store, &checked, &env->err));
        /* 1 commit + 2 trees + 3 distinct blobs. */
        assert_int_equal(checked, 6);
}

/* Damages the blob holding `content` (file "victim") and expects verify and export to
 * fail naming it. */
static void check_damaged_blob(test_env *env, const char *content) {
        const char *dir = make_tree_dir(env, TREE(REG("a", "hello")));
        char victim[PATH_MAX];
        fmt_path(victim, "%s/victim", dir);
        write_text(victim, content);
        lfs_id commit;
        assert_ok(env, lfs_project_init(env->home, "proj", dir, &commit, &env->err));
        assert_ok(env, lfs_store_open(env->home, "proj", &env->store, &env->err));
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));

        corrupt_blob(env, "proj", content, strlen(content));
        lfs_id blob;
        lfs_sha256(content, strlen(content), &blob);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&blob, hex);
        uint64_t checked = 12345;
        int r = lfs_store_verify(env->store, &checked, &env->err);
        assert_error(env, r, LFS_FAILED, hex);
        assert_int_equal(checked, 12345);

        /* Export checks what it reads too, and leaves nothing behind. */
        size_t before = count_entries(env->root);
        r = export_isolated(env, "main", env_path(env, "out"));
        assert_error(env, r, LFS_FAILED, hex);
        assert_int_equal(count_entries(env->root), before);
}

static void test_verify_fails_on_a_damaged_small_blob(void **state) {
        check_damaged_blob(*state, "a small file that the Store may pack with others");
}

static void test_verify_fails_on_a_damaged_loose_blob(void **state) {
        char *content = distinct_content(LOOSE_BLOB_SIZE, 3);
        check_damaged_blob(*state, content);
        free(content);
}

static void test_verify_fails_on_a_missing_blob(void **state) {
        test_env *env = *state;
        char *content = distinct_content(LOOSE_BLOB_SIZE, 5);
        const char *dir = make_tree_dir(env, TREE(REG("a", "hello")));
        char big[PATH_MAX];
        fmt_path(big, "%s/d/big", dir);
        write_text(big, content);
        lfs_id commit;
        assert_ok(env, lfs_project_init(env->home, "proj", dir, &commit, &env->err));
        assert_ok(env, lfs_store_open(env->home, "proj", &env->store, &env->err));
        lfs_id blob;
        lfs_sha256(content, strlen(content), &blob);
        free(content);
        char rel[LFS_HEX_LEN + 2];
        lfs_id_object_path(&blob, rel);
        assert_int_equal(unlink(env_path(env, "home/projects/proj/objects/%s", rel)), 0);
        int r = lfs_store_verify(env->store, NULL, &env->err);
        assert_error(env, r, LFS_FAILED, NULL);
}

static void test_verify_fails_on_a_damaged_blob_on_another_branch(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("a", "1")));
        assert_ok(env, lfs_branch_create(env->store, "side", NULL, NULL, &env->err));
        commit_spec(env, "side", TREE(REG("a", "1"), REG("only-on-side", "side data")), "side");
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        corrupt_blob(env, "proj", "side data", 9);
        int r = lfs_store_verify(env->store, NULL, &env->err);
        assert_error(env, r, LFS_FAILED, NULL);
}

/* Changes the row of a tree in store.db behind the library's back. */
static void damage_tree_row(test_env *env, const char *project, const lfs_id *tree, bool remove) {
        sqlite3 *db;
        assert_int_equal(sqlite3_open(env_path(env, "home/projects/%s/store.db", project), &db), SQLITE_OK);
        sqlite3_stmt *st;
        const char *sql =
                remove ? "DELETE FROM trees WHERE id=?" : "UPDATE trees SET data=X'3130303634' WHERE id=?";
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        sqlite3_bind_blob(st, 1, tree->bytes, LFS_ID_LEN, SQLITE_STATIC);
        assert_int_equal(sqlite3_step(st), SQLITE_DONE);
        assert_int_equal(sqlite3_changes(db), 1);
        sqlite3_finalize(st);
        sqlite3_close(db);
}

/* A tree that cannot be read is an error to report, never a crash or a partial export. */
static void check_unreadable_tree(test_env *env, bool remove) {
        env_init_project(env, "proj", TREE(REG("a", "1"), REG("d/b", "2")));
        lfs_commit_info c = commit_info(env, "main");
        close_store(env);
        damage_tree_row(env, "proj", &c.tree, remove);
        assert_ok(env, lfs_store_open(env->home, "proj", &env->store, &env->err));

        size_t before = count_entries(env->root);
        int r = export_isolated(env, "main", env_path(env, "out"));
        assert_error(env, r, LFS_FAILED, NULL);
        assert_int_equal(count_entries(env->root), before);

        r = lfs_store_verify(env->store, NULL, &env->err);
        assert_error(env, r, LFS_FAILED, NULL);

        assert_ok(env, lfs_branch_create(env->store, "other", NULL, NULL, &env->err));
        lfs_change *changes = NULL;
        size_t n = 0;
        r = lfs_branch_diff(env->store, "main", "other", &changes, &n, &env->err);
        assert_ok(env, r); /* equal commits: nothing needs reading */
        lfs_change_list_free(changes, n);
        const char *dir = make_tree_dir(env, TREE(REG("a", "2")));
        lfs_id commit;
        r = lfs_branch_commit(env->store, "other", dir, "m", &commit, &env->err);
        assert_error(env, r, LFS_FAILED, NULL);
}

static void test_export_of_a_corrupt_tree_fails_cleanly(void **state) {
        check_unreadable_tree(*state, false);
}

static void test_export_of_a_missing_tree_fails_cleanly(void **state) {
        check_unreadable_tree(*state, true);
}

/* ---- the io layer ---- */

/* Store ids must not depend on how the bytes were read. */
static void test_no_uring_gives_identical_ids(void **state) {
        test_env *env = *state;
        const char *dir = env_path(env, "src");
        for (int i = 0; i < 150; i++) {
                char path[PATH_MAX], data[64];
                fmt_path(path, "%s/d%d/f%d", dir, i % 4, i);
                int len = snprintf(data, sizeof(data), "file number %d\n", i);
                write_bytes(path, data, (size_t)len, i % 5 ? 0644 : 0755);
        }
        size_t big_len = (4u << 20) + 1;
        char *big = calloc(1, big_len);
        assert_non_null(big);
        big[big_len / 2] = 'x';
        write_bytes(env_path(env, "src/big"), big, big_len, 0644);
        free(big);
        assert_int_equal(symlink("d0/f0", env_path(env, "src/link")), 0);

        lfs_id a, b;
        unsetenv("LAYERFS_NO_URING");
        assert_ok(env, lfs_project_init(env->home, "uring", dir, &a, &env->err));
        close_store(env);
        assert_ok(env, lfs_store_open(env->home, "uring", &env->store, &env->err));
        if (!lfs_io_uses_uring(env->store->io))
                print_message("note: io_uring is not available here; both paths ran plain\n");
        lfs_commit_info *ca = NULL, *cb = NULL;
        size_t n = 0;
        assert_ok(env, lfs_branch_log(env->store, "main", 1, &ca, &n, &env->err));
        assert_int_equal(n, 1);
        const char *out_a = export_ref(env, "main");

        setenv("LAYERFS_NO_URING", "1", 1);
        assert_ok(env, lfs_project_init(env->home, "plain", dir, &b, &env->err));
        close_store(env);
        assert_ok(env, lfs_store_open(env->home, "plain", &env->store, &env->err));
        assert_false(lfs_io_uses_uring(env->store->io));
        assert_ok(env, lfs_branch_log(env->store, "main", 1, &cb, &n, &env->err));
        assert_int_equal(n, 1);
        /* Exported without io_uring too: the child inherits the setting. */
        const char *out_b = export_ref(env, "main");
        unsetenv("LAYERFS_NO_URING");

        assert_id_equal(env, &ca->tree, &cb->tree);
        assert_same_tree(out_a, out_b);
        assert_same_tree(dir, out_a);
        /* A commit id covers its time in seconds, and the two imports may fall in
         * different seconds (a loaded machine takes more than one between them): the
         * plain commit, given the io_uring commit's time, must have its id. */
        assert_id_equal(env, &ca->id, &a);
        assert_id_equal(env, &cb->id, &b);
        assert_string_equal(ca->author, cb->author);
        assert_string_equal(ca->message, cb->message);
        assert_int_equal(ca->n_parents, cb->n_parents);
        cb->time = ca->time;
        lfs_commit_compute_id(cb);
        assert_id_equal(env, &cb->id, &a);
        lfs_commit_info_free(ca, 1);
        lfs_commit_info_free(cb, 1);
}

static void run_io_layer(test_env *env, bool uring) {
        if (uring)
                unsetenv("LAYERFS_NO_URING");
        else
                setenv("LAYERFS_NO_URING", "1", 1);
        lfs_io *io = lfs_io_new();
        unsetenv("LAYERFS_NO_URING");
        if (uring && !lfs_io_uses_uring(io)) {
                lfs_io_free(io);
                skip();
        }
        assert_int_equal(lfs_io_uses_uring(io), uring);
        assert_int_equal(mkdir(env_path(env, "io"), 0755), 0);
        int dirfd = open(env_path(env, "io"), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dirfd >= 0);

        enum { N = 150 }; /* more than two batches */
        static char names[N][32], renamed[N][32], data[N][64];
        lfs_io_item items[N];
        for (int i = 0; i < N; i++) {
                fmt_path(names[i], "f-%03d", i);
                fmt_path(renamed[i], "g-%03d", i);
                int len = snprintf(data[i], sizeof(data[i]), "contents of file %d%s", i, i % 2 ? "!" : "");
                items[i] = (lfs_io_item){ .dirfd = dirfd,
                                          .path = names[i],
                                          .open_flags = O_WRONLY | O_CREAT | O_EXCL,
                                          .mode = 0600,
                                          .buf = data[i],
                                          .len = (size_t)len };
        }
        items[7].len = 0; /* an empty file */
        assert_int_equal(lfs_io_write_files(io, items, N), 0);
        for (int i = 0; i < N; i++) {
                assert_int_equal(items[i].result, 0);
                size_t len = 0;
                char *got = read_whole(env_path(env, "io/%s", names[i]), &len);
                assert_non_null(got);
                assert_int_equal(len, items[i].len);
                assert_memory_equal(got, data[i], len);
                free(got);
        }

        /* O_EXCL: writing again fails for every file, and says so per item. */
        assert_int_equal(lfs_io_write_files(io, items, N), -EEXIST);
        for (int i = 0; i < N; i++)
                assert_int_equal(items[i].result, -EEXIST);

        /* Reads: exact sizes pass; a file larger or smaller than expected is -EIO. */
        static char bufs[N][80];
        size_t lens[N];
        for (int i = 0; i < N; i++) {
                lens[i] = items[i].len;
                items[i] = (lfs_io_item){ .dirfd = dirfd, .path = names[i], .buf = bufs[i], .len = lens[i] };
        }
        assert_int_equal(lfs_io_read_files(io, items, N), 0);
        for (int i = 0; i < N; i++) {
                assert_int_equal(items[i].result, 0);
                assert_memory_equal(bufs[i], data[i], lens[i]);
        }
        items[70].len = lens[70] - 1; /* the file grew */
        items[71].len = lens[71] + 1; /* the file shrank */
        items[140].path = "missing";
        assert_int_equal(symlink(names[0], env_path(env, "io/link")), 0);
        items[141].path = "link"; /* objects are never read through a link */
        int r = lfs_io_read_files(io, items, N);
        assert_true(r < 0);
        for (int i = 0; i < N; i++) {
                int want = i == 70 || i == 71 ? -EIO : i == 140 ? -ENOENT : i == 141 ? -ELOOP : 0;
                assert_msg(items[i].result == want, "read item %d: result %d, expected %d", i,
                           items[i].result, want);
        }

        /* Started reads: three batches in flight at once (the third waits for the first's
         * half of the file table), waited for last batch first; each wait returns its own
         * items' first failure only. */
        memset(bufs, 0, sizeof(bufs));
        for (int i = 0; i < N; i++)
                items[i] = (lfs_io_item){ .dirfd = dirfd, .path = names[i], .buf = bufs[i], .len = lens[i] };
        items[100].path = "missing";
        assert_int_equal(lfs_io_start_files(io, items, 64, false), 0);
        assert_int_equal(lfs_io_start_files(io, items + 64, 64, false), 0);
        assert_int_equal(lfs_io_start_files(io, items + 128, N - 128, false), 0);
        assert_int_equal(lfs_io_wait_files(io, items + 128, N - 128), 0);
        assert_int_equal(lfs_io_wait_files(io, items + 64, 64), -ENOENT);
        assert_int_equal(lfs_io_wait_files(io, items, 64), 0);
        for (int i = 0; i < N; i++) {
                assert_false(items[i].in_flight);
                assert_int_equal(items[i].result, i == 100 ? -ENOENT : 0);
                if (i != 100)
                        assert_memory_equal(bufs[i], data[i], lens[i]);
        }

        /* A background vectored write lands whole, its pieces in order. */
        int fd = openat(dirfd, "vectored", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        struct iovec iov[N];
        size_t total = 0;
        for (int i = 0; i < N; i++) {
                iov[i] = (struct iovec){ .iov_base = data[i], .iov_len = lens[i] };
                total += lens[i];
        }
        lfs_io_at at = { .fd = fd, .offset = 5, .len = total, .iov = iov, .iovcnt = N };
        assert_int_equal(lfs_io_start_pwritev(io, &at), 0);
        assert_int_equal(lfs_io_wait_background(io), 0);
        assert_int_equal(at.result, 0);
        close(fd);
        size_t got_len = 0;
        char *got = read_whole(env_path(env, "io/vectored"), &got_len);
        assert_non_null(got);
        assert_int_equal(got_len, 5 + total);
        for (size_t i = 0, off = 5; i < N; off += lens[i], i++)
                assert_memory_equal(got + off, data[i], lens[i]);
        free(got);

        for (int i = 0; i < N; i++)
                items[i] = (lfs_io_item){ .dirfd = dirfd, .path = names[i], .new_path = renamed[i] };
        assert_int_equal(lfs_io_rename_files(io, items, N), 0);
        struct stat st;
        for (int i = 0; i < N; i++) {
                assert_int_equal(items[i].result, 0);
                assert_int_equal(fstatat(dirfd, names[i], &st, 0), -1);
                assert_int_equal(fstatat(dirfd, renamed[i], &st, 0), 0);
        }
        assert_int_equal(lfs_io_rename_files(io, items, 1), -ENOENT);
        assert_int_equal(items[0].result, -ENOENT);
        close(dirfd);
        lfs_io_free(io);
}

static void test_io_layer_plain(void **state) {
        run_io_layer(*state, false);
}

static void test_io_layer_uring(void **state) {
        run_io_layer(*state, true);
}

/* ---- gc ---- */

static bool loose_exists(test_env *env, const char *content) {
        lfs_id blob;
        lfs_sha256(content, strlen(content), &blob);
        char rel[LFS_HEX_LEN + 2];
        lfs_id_object_path(&blob, rel);
        return access(env_path(env, "home/projects/proj/objects/%s", rel), F_OK) == 0;
}

static void run_gc(test_env *env, lfs_gc_result *ret) {
        lfs_gc_options options = { 0 };
        assert_ok(env, lfs_store_gc(env->store, &options, ret, &env->err));
}

/* A pin keeps a deleted branch's commit while its owner holds it; unpinned, it goes. A pin
 * file no one holds is a dead owner's: removed, and what it named is not kept. */
static void test_gc_keeps_pinned_commits_only_while_held(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("a", "1")));
        char *big = distinct_content(LOOSE_BLOB_SIZE, 9);
        assert_ok(env, lfs_branch_create(env->store, "x", NULL, NULL, &env->err));
        lfs_id x = commit_spec(env, "x", TREE(REG("big", big)), "x");
        assert_ok(env, lfs_store_delete_branch(env->store, "x", NULL, NULL, NULL, &env->err));

        lfs_pin *pin = NULL;
        assert_ok(env, lfs_store_hold(env->store, &env->err));
        assert_ok(env, lfs_pin_new(env->store, &x, &pin, &env->err));
        lfs_store_release(env->store);
        lfs_gc_result res;
        run_gc(env, &res);
        assert_int_equal(res.pins, 1);
        assert_int_equal(res.commits, 0);
        assert_true(loose_exists(env, big));
        lfs_gc_result_done(&res);

        /* Its owner gone: a file like a pin, but no one holds its lock. */
        lfs_pin_free(pin);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&x, hex);
        write_text(env_path(env, "home/projects/proj/pins/1-dead-0"), hex);
        run_gc(env, &res);
        assert_int_equal(res.pins, 0);
        assert_int_equal(res.stale_pins, 1);
        assert_int_equal(res.commits, 1);
        assert_int_equal(res.loose_objects, 1);
        assert_false(loose_exists(env, big));
        assert_int_equal(count_entries(env_path(env, "home/projects/proj/pins")), 0);
        lfs_gc_result_done(&res);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        free(big);
}

/* A live pin that is not a list of commits: nothing may go. */
static void test_gc_refuses_an_unreadable_live_pin(void **state) {
        test_env *env = *state;
        lfs_id first = env_init_project(env, "proj", TREE(REG("a", "1")));
        char *big = distinct_content(LOOSE_BLOB_SIZE, 4);
        assert_ok(env, lfs_branch_create(env->store, "x", NULL, NULL, &env->err));
        commit_spec(env, "x", TREE(REG("big", big)), "x");
        assert_ok(env, lfs_store_delete_branch(env->store, "x", NULL, NULL, NULL, &env->err));
        lfs_pin *pin = NULL;
        assert_ok(env, lfs_store_hold(env->store, &env->err));
        assert_ok(env, lfs_pin_new(env->store, &first, &pin, &env->err));
        lfs_store_release(env->store);
        DIR *d = opendir(env_path(env, "home/projects/proj/pins"));
        assert_non_null(d);
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        write_text(env_path(env, "home/projects/proj/pins/%s", de->d_name),
                                   "not a commit\n");
        closedir(d);
        lfs_gc_options options = { 0 };
        lfs_gc_result res = { .commits = 77 };
        int r = lfs_store_gc(env->store, &options, &res, &env->err);
        assert_error(env, r, LFS_FAILED, "nothing was removed");
        assert_int_equal(res.commits, 77);
        assert_true(loose_exists(env, big));
        lfs_pin_free(pin);
        free(big);
}

static void test_gc_refuses_bad_options(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("a", "1")));
        lfs_gc_options options = { .repack_below = 101 };
        lfs_gc_result res = { .commits = 77 };
        int r = lfs_store_gc(env->store, &options, &res, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "101%");
        assert_int_equal(res.commits, 77);
        /* A handle inside a writing operation would wait for itself. */
        options.repack_below = 0;
        assert_ok(env, lfs_store_hold(env->store, &env->err));
        r = lfs_store_gc(env->store, &options, &res, &env->err);
        assert_error(env, r, LFS_BUSY, "handle of its own");
        lfs_store_release(env->store);
        run_gc(env, &res);
        assert_int_equal(res.commits, 0);
        lfs_gc_result_done(&res);
}

/* Deletions since the last gc: a Store without any reads 0; each delete counts; a refused
 * one does not; a gc (not a dry run), even one with nothing to remove, starts again. */
static void test_gc_counts_deletions_since_the_last(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("a", "1")));
        uint64_t n = 99;
        assert_ok(env, lfs_store_deleted_branches(env->store, &n, &env->err));
        assert_int_equal(n, 0);
        assert_ok(env, lfs_branch_create(env->store, "x", NULL, NULL, &env->err));
        assert_ok(env, lfs_branch_create(env->store, "y", NULL, NULL, &env->err));
        assert_ok(env, lfs_store_delete_branch(env->store, "x", NULL, NULL, NULL, &env->err));
        assert_ok(env, lfs_store_delete_branch(env->store, "y", NULL, NULL, NULL, &env->err));
        int r = lfs_store_delete_branch(env->store, "ghost", NULL, NULL, NULL, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "ghost");
        assert_ok(env, lfs_store_deleted_branches(env->store, &n, &env->err));
        assert_int_equal(n, 2);
        lfs_gc_options dry = { .dry_run = 1 };
        lfs_gc_result res;
        assert_ok(env, lfs_store_gc(env->store, &dry, &res, &env->err));
        lfs_gc_result_done(&res);
        assert_ok(env, lfs_store_deleted_branches(env->store, &n, &env->err));
        assert_int_equal(n, 2);
        run_gc(env, &res);
        assert_int_equal(res.commits, 0);
        lfs_gc_result_done(&res);
        assert_ok(env, lfs_store_deleted_branches(env->store, &n, &env->err));
        assert_int_equal(n, 0);
}

/* ---- each tree's count of subdirectories (tree_subdirs) ---- */

typedef struct subdirs_walk {
        test_env *env;
        size_t trees, stored; /* trees visited, those with a count stored */
} subdirs_walk;

static int check_stored_subdirs(void *userdata, const lfs_id *id, const lfs_tree *t, lfs_error **err) {
        (void)err;
        subdirs_walk *w = userdata;
        uint64_t n = 12345;
        int r = lfs_db_stored_subdirs(w->env->store, id, &n, &w->env->err);
        w->trees++;
        if (r == -ENOENT) {
                assert_int_equal(n, 12345);
        } else {
                assert_ok(w->env, r);
                assert_int_equal(n, lfs_tree_subdirs(t));
                w->stored++;
        }
        return 0;
}

/* Every tree of ref's commit: how many, and how many have their count stored (each the
 * tree's own). */
static subdirs_walk walk_subdirs(test_env *env, const char *ref) {
        lfs_commit_info c = commit_info(env, ref);
        subdirs_walk w = { .env = env };
        lfs_idset seen = { 0 };
        assert_ok(env, lfs_for_each_tree(env->store, &c.tree, &seen, check_stored_subdirs, &w, &env->err));
        lfs_idset_done(&seen);
        return w;
}

static uint64_t root_subdirs(test_env *env, const char *ref) {
        lfs_commit_info c = commit_info(env, ref);
        uint64_t n = 12345;
        assert_ok(env, lfs_db_stored_subdirs(env->store, &c.tree, &n, &env->err));
        return n;
}

/* The trees import, commit, a Workspace's commit and both merges write have their count
 * of subdirectories stored beside them, and gc takes it away with the tree. */
static void test_tree_subdirs_stored_by_every_writer(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj",
                         TREE(REG("a", "1"), REG("d1/x", "1"), EMPTY_DIR("d2"), REG("d3/sub/y", "2"),
                              LINK("l", "a")));
        subdirs_walk w = walk_subdirs(env, "main");
        assert_int_equal(w.trees, 5);
        assert_int_equal(w.stored, w.trees);
        assert_int_equal(root_subdirs(env, "main"), 3);

        commit_spec(env, "main", TREE(REG("a", "1"), REG("d1/x", "1"), EMPTY_DIR("d2"), EMPTY_DIR("d4")),
                    "commit");
        w = walk_subdirs(env, "main");
        assert_int_equal(w.stored, w.trees);
        assert_int_equal(root_subdirs(env, "main"), 3);

        /* A merge of branches (merge.c's trees through branch merge). */
        assert_ok(env, lfs_branch_create(env->store, "side", NULL, NULL, &env->err));
        commit_spec(env, "side",
                    TREE(REG("a", "1"), REG("d1/x", "1"), EMPTY_DIR("d2"), EMPTY_DIR("d4"),
                         REG("s/f", "side"), REG("s/t/g", "side")),
                    "side");
        lfs_id base = commit_spec(
                env, "main",
                TREE(REG("a", "1"), REG("d1/x", "1"), REG("d1/m/f", "m"), EMPTY_DIR("d2"), EMPTY_DIR("d4")),
                "main");
        lfs_merge_result mr;
        assert_ok(env, lfs_branch_merge(env->store, "side", "main", &mr, &env->err));
        assert_false(mr.fast_forward);
        w = walk_subdirs(env, "main");
        assert_int_equal(w.stored, w.trees);
        assert_int_equal(root_subdirs(env, "main"), 4); /* d1, d2, d4, s */

        /* A Workspace's commit (commit.c's trees), merged with the branch moved meanwhile. */
        write_text(env_path(env, "new-file"), "new");
        const lfs_path_change changes[] = {
                { "w/deep/f", LFS_ENTRY_FILE, env_path(env, "new-file"), NULL, 0 },
                { "w/e", LFS_ENTRY_DIR, NULL, NULL, 0 },
        };
        lfs_id commit;
        int merged = -1;
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &base, changes, COUNT_OF(changes), "ws",
                                                &commit, &merged, &env->err));
        assert_int_equal(merged, 1);
        w = walk_subdirs(env, "main");
        assert_int_equal(w.stored, w.trees);
        assert_int_equal(root_subdirs(env, "main"), 5); /* d1, d2, d4, s, w */

        /* gc: the counts go with their trees. */
        assert_ok(env, lfs_branch_create(env->store, "gone", NULL, NULL, &env->err));
        commit_spec(env, "gone", TREE(REG("only/here/f", "gone")), "gone");
        assert_ok(env, lfs_store_delete_branch(env->store, "gone", NULL, NULL, NULL, &env->err));
        lfs_gc_result res;
        run_gc(env, &res);
        assert_true(res.trees >= 3);
        lfs_gc_result_done(&res);
        sqlite3_stmt *st;
        assert_int_equal(sqlite3_prepare_v2(env->store->db,
                                            "SELECT (SELECT count(*) FROM trees), (SELECT count(*) FROM "
                                            "tree_subdirs), (SELECT count(*) FROM tree_subdirs WHERE id NOT "
                                            "IN (SELECT id FROM trees))",
                                            -1, &st, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(st, 2), 0);
        assert_int_equal(sqlite3_column_int(st, 0), sqlite3_column_int(st, 1));
        sqlite3_finalize(st);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
}

/* A Store made before the table (its trees without a count): opened, it gets the table;
 * its trees' counts come from the trees themselves, the trees written from then on have
 * theirs stored, and verify passes. */
static void test_tree_subdirs_of_a_store_made_before_them(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj",
                         TREE(REG("a", "1"), REG("d1/x", "1"), EMPTY_DIR("d2"), REG("d3/sub/y", "2")));
        const char *project = env_close_store(env);
        store_db_exec(env, project, "DROP TABLE tree_subdirs");
        env_reopen_store(env, project);
        sqlite3_stmt *st;
        assert_int_equal(
                sqlite3_prepare_v2(env->store->db, "SELECT count(*) FROM tree_subdirs", -1, &st, NULL),
                SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(st, 0), 0);
        sqlite3_finalize(st);
        subdirs_walk w = walk_subdirs(env, "main");
        assert_int_equal(w.trees, 5);
        assert_int_equal(w.stored, 0);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));

        /* A Workspace's commit writes only the trees on the changed path (the root, d3):
         * they have their count; d1, d2 and d3/sub, not written again, still none. */
        lfs_id base = head_of(env, "main");
        write_text(env_path(env, "new-file"), "new");
        const lfs_path_change change = { "d3/new", LFS_ENTRY_FILE, env_path(env, "new-file"), NULL, 0 };
        lfs_id commit;
        int merged = -1;
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &base, &change, 1, "ws", &commit,
                                                &merged, &env->err));
        w = walk_subdirs(env, "main");
        assert_int_equal(w.trees, 5);
        assert_int_equal(w.stored, 2);
        assert_int_equal(root_subdirs(env, "main"), 3);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));

        /* A commit of the whole directory writes every tree again: each already there gets
         * its count too. */
        commit_spec(env, "main",
                    TREE(REG("a", "1"), REG("d1/x", "1"), EMPTY_DIR("d2"), REG("d3/sub/y", "2"),
                         EMPTY_DIR("d3/e")),
                    "commit");
        w = walk_subdirs(env, "main");
        assert_int_equal(w.trees, 5); /* d2 and d3/e: the empty tree, once */
        assert_int_equal(w.stored, w.trees);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
}

/* A count stored that is not the tree's own is damage verify reports. */
static void test_verify_fails_on_a_wrong_subdir_count(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("a", "1"), REG("d1/x", "1")));
        lfs_commit_info c = commit_info(env, "main");
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&c.tree, hex);
        const char *project = env_close_store(env);
        _cleanup_free_ char *sql = xasprintf("UPDATE tree_subdirs SET n=7 WHERE id=X'%s'", hex);
        store_db_exec(env, project, sql);
        env_reopen_store(env, project);
        int r = lfs_store_verify(env->store, NULL, &env->err);
        assert_non_null(env->err);
        assert_non_null(strstr(env->err->message ?: "", "7 subdirectories stored beside it but holds 1"));
        assert_error(env, r, LFS_FAILED, hex);
}

/* ---- the shape of table trees ---- */

/* table trees as Stores made before 2026-12-07 have it. */
#define OLD_TREES_TABLE "CREATE TABLE trees(id BLOB PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID"

/* A tree of n files named "<prefix><i>" (all the blob "1", which the Store must have),
 * written to the Store; its id. */
static lfs_id put_tree_of(test_env *env, const char *prefix, size_t n, size_t *ret_len) {
        lfs_id blob, id;
        lfs_sha256("1", 1, &blob);
        lfs_tree t = { 0 };
        for (size_t i = 0; i < n; i++)
                lfs_tree_add(&t, xasprintf("%s%zu", prefix, i), LFS_MODE_FILE, 1, &blob);
        lfs_tree_rows rows = { 0 };
        lfs_tree_store(&t, &rows, &id);
        if (ret_len)
                *ret_len = rows.items[0].len;
        assert_ok(env, lfs_tree_rows_insert(env->store, &rows, &env->err));
        lfs_tree_rows_done(&rows);
        lfs_tree_done(&t);
        return id;
}

/* The lookup of a small tree reads that tree, not a big one beside it. In a WITHOUT ROWID
 * table SQLite compares a lookup's key with whole records, a big tree's overflow pages
 * and all, whenever its binary search passes one: on the old shape the lookups of the
 * small trees below read the 5 MB tree again, most 5.1 MB each. */
static void test_tree_lookup_reads_only_its_own_row(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("a", "1")));
        enum { SMALL = 3000 };
        lfs_id *small = calloc(SMALL, sizeof(*small));
        assert_non_null(small);
        size_t big_len = 0;
        assert_ok(env, lfs_db_begin(env->store, &env->err));
        for (size_t i = 0; i < SMALL; i++) {
                char prefix[32];
                fmt_path(prefix, "small-%zu-", i);
                small[i] = put_tree_of(env, prefix, 1, NULL);
        }
        (void)put_tree_of(env, "a-file-of-a-big-directory-", 100000, &big_len);
        assert_ok(env, lfs_db_commit(env->store, &env->err));
        /* A connection of its own, as another mount's: nothing in SQLite's cache. */
        env_reopen_store(env, env_close_store(env));

        uint64_t most = 0, total = 0;
        for (size_t i = 0; i < SMALL; i++) {
                uint64_t before = bytes_read();
                lfs_tree t;
                assert_ok(env, lfs_db_get_tree(env->store, &small[i], &t, &env->err));
                uint64_t read = bytes_read() - before;
                assert_int_equal(t.n, 1);
                lfs_tree_done(&t);
                most = read > most ? read : most;
                total += read;
        }
        free(small);
        print_message("big tree %zu bytes; %d lookups of small trees read %" PRIu64
                      " bytes, at most %" PRIu64 " for one\n",
                      big_len, SMALL, total, most);
        assert_msg(big_len > 4000000, "the big tree holds only %zu bytes", big_len);
        assert_msg(most < big_len / 10, "a small tree's lookup read %" PRIu64 " bytes, the big tree is %zu",
                   most, big_len);
}

/* What table trees holds, read behind the library's back. */
typedef struct trees_state {
        char *dump; /* each tree's id and data, in id order, as hex, of both tables */
        bool without_rowid; /* table trees is WITHOUT ROWID */
        bool split; /* the old table is there too */
        int version; /* the schema's */
} trees_state;

static trees_state trees_look(test_env *env, const char *project) {
        sqlite3 *db;
        assert_int_equal(sqlite3_open(env_path(env, "home/projects/%s/store.db", project), &db), SQLITE_OK);
        sqlite3_busy_timeout(db, 10000);
        trees_state ts = { 0 };
        sqlite3_stmt *st =
                query_row(db, "SELECT (SELECT sql LIKE '%WITHOUT ROWID%' FROM sqlite_schema WHERE "
                              "name='trees'), (SELECT count(*) FROM sqlite_schema WHERE "
                              "name='" LFS_TREES_OLD "'), (SELECT user_version FROM "
                              "pragma_user_version), (SELECT integrity_check FROM "
                              "pragma_integrity_check)");
        ts.without_rowid = sqlite3_column_int(st, 0);
        ts.split = sqlite3_column_int(st, 1);
        ts.version = sqlite3_column_int(st, 2);
        assert_string_equal((const char *)sqlite3_column_text(st, 3), "ok");
        sqlite3_finalize(st);
        st = query_row(db,
                       ts.split ? "SELECT group_concat(hex(id) || ':' || hex(data), ',') FROM (SELECT id, "
                                  "data FROM trees UNION SELECT id, data FROM " LFS_TREES_OLD " ORDER BY id)"
                                : "SELECT group_concat(hex(id) || ':' || hex(data), ',') FROM (SELECT id, "
                                  "data FROM trees ORDER BY id)");
        ts.dump = xstrdup((const char *)sqlite3_column_text(st, 0) ?: "");
        sqlite3_finalize(st);
        sqlite3_close(db);
        /* Split exactly while the schema's version says so. */
        assert_int_equal(ts.version, ts.split ? LFS_STORE_SCHEMA_SPLIT : LFS_STORE_SCHEMA);
        return ts;
}

/* Every tree of before is in after. */
static void assert_trees_kept(const char *before, const char *after) {
        _cleanup_free_ char *rows = xstrdup(before);
        for (char *save = NULL, *row = strtok_r(rows, ",", &save); row; row = strtok_r(NULL, ",", &save))
                assert_msg(strstr(after, row), "tree %.64s is gone", row);
}

static char *make_old_shape(test_env *env, const char *project);

/* A project whose table trees has the shape Stores made before 2026-12-07 have, closed;
 * its trees' dump. extra trees of n entries each are added first (n 0: none). */
static char *make_old_store(test_env *env, const char *project, size_t extra, size_t n) {
        env_init_project(env, project,
                         TREE(REG("a", "1"), REG("d1/x", "1"), EMPTY_DIR("d2"), REG("d3/sub/y", "2"),
                              LINK("l", "a")));
        commit_spec(env, "main", TREE(REG("a", "2"), REG("d1/x", "1"), REG("d4/z", "3")), "second");
        if (extra) {
                /* Reachable (a gc keeps them): the directories of a commit on branch big. */
                lfs_tree top = { 0 };
                for (size_t i = 0; i < extra; i++) {
                        char prefix[32];
                        fmt_path(prefix, "big-%zu-", i);
                        lfs_id id = put_tree_of(env, prefix, n, NULL);
                        lfs_tree_add(&top, xasprintf("big%zu", i), LFS_MODE_DIR, 0, &id);
                }
                lfs_tree_rows rows = { 0 };
                lfs_commit_info c = { .author = "test", .message = "big", .time = 1 };
                lfs_tree_store(&top, &rows, &c.tree);
                lfs_commit_compute_id(&c);
                assert_ok(env, lfs_tree_rows_insert(env->store, &rows, &env->err));
                assert_ok(env, lfs_db_put_commit(env->store, &c, &env->err));
                assert_ok(env, lfs_db_cas_branch(env->store, "big", NULL, &c.id, &env->err));
                lfs_tree_rows_done(&rows);
                lfs_tree_done(&top);
        }
        env_close_store(env);
        return make_old_shape(env, project);
}

/* Project (closed) given table trees of the old shape; its trees' dump. */
static char *make_old_shape(test_env *env, const char *project) {
        trees_state ts = trees_look(env, project);
        assert_false(ts.without_rowid);
        store_db_exec(env, project,
                      "BEGIN; ALTER TABLE trees RENAME TO trees_new; " OLD_TREES_TABLE
                      "; INSERT INTO trees SELECT id, data FROM trees_new; DROP TABLE trees_new; COMMIT");
        trees_state old = trees_look(env, project);
        assert_true(old.without_rowid);
        assert_string_equal(old.dump, ts.dump);
        free(old.dump);
        return ts.dump;
}

/* A Store of the old shape converted one tree a step: in every state between, the Store
 * verifies, takes a commit (its new tree in the rowid table) and verifies again; at the end
 * table trees has the rowid shape, the schema's version is back, and every tree is kept. */
static void test_trees_of_an_old_store_converted_step_by_step(void **state) {
        test_env *env = *state;
        _cleanup_free_ char *before = make_old_store(env, "proj", 0, 0);
        env_reopen_store(env, "proj");
        uint64_t moved = 0;
        int steps = 0, r;
        while ((r = lfs_trees_convert_step(env->store, 1, &moved, &env->err)) > 0) {
                steps++;
                trees_state ts = trees_look(env, "proj");
                assert_trees_kept(before, ts.dump);
                free(ts.dump);
                if (ts.split) {
                        assert_false(ts.without_rowid);
                        assert_true(lfs_db_trees_split(env->store));
                }
                assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
                char content[16];
                fmt_path(content, "%d", steps);
                commit_spec(env, "main", TREE(REG("a", content), REG("d1/x", "1"), REG("d5/n", content)),
                            "during the conversion");
                assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        }
        assert_ok(env, r);
        /* The split, a step a tree, and the old table dropped. */
        int trees = 0;
        for (const char *p = before; *p; p++)
                trees += *p == ',';
        assert_int_equal(moved, trees + 1);
        assert_int_equal(steps, trees + 1 + 2);
        trees_state ts = trees_look(env, "proj");
        assert_false(ts.without_rowid);
        assert_false(ts.split);
        assert_trees_kept(before, ts.dump);
        free(ts.dump);
        assert_false(lfs_db_trees_split(env->store));
        assert_int_equal(lfs_trees_convert_step(env->store, 1, &moved, &env->err), 0);
        env_reopen_store(env, env_close_store(env));
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        lfs_id head = head_of(env, "main");
        lfs_commit_info c;
        assert_ok(env, lfs_db_get_commit(env->store, &head, &c, &env->err));
        lfs_commit_info_done(&c);
}

static int gc_work(lfs_store *store) {
        lfs_gc_result res = { 0 };
        return lfs_store_gc(store, NULL, &res, NULL);
}

/* A child gc of project stopped at step (store_child_at). */
static void gc_child_at(test_env *env, const char *project, const char *step, int *ret_pidfd) {
        store_child_at(env, project, step, gc_work, ret_pidfd);
}

/* A gc killed inside each step of the conversion (the split, a move, the drop; each in a
 * transaction not committed yet) leaves a Store that has every tree and verifies; the
 * next gc ends the conversion. */
static void test_trees_conversion_killed_at_each_step(void **state) {
        test_env *env = *state;
        for (int nth = 1; nth <= 3; nth++) {
                char project[16], step[32];
                fmt_path(project, "proj%d", nth);
                fmt_path(step, "store-trees-step#%d", nth);
                _cleanup_free_ char *before = make_old_store(env, project, 0, 0);
                int pidfd;
                gc_child_at(env, project, step, &pidfd);
                store_child_kill(pidfd);
                trees_state ts = trees_look(env, project);
                assert_string_equal(ts.dump, before);
                /* Killed inside the split, nothing changed; inside the move, still split. */
                assert_int_equal(ts.split, nth > 1);
                free(ts.dump);
                env_reopen_store(env, project);
                assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
                lfs_gc_result res;
                run_gc(env, &res);
                lfs_gc_result_done(&res);
                assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
                env_close_store(env);
                ts = trees_look(env, project);
                assert_false(ts.without_rowid);
                assert_false(ts.split);
                assert_string_equal(ts.dump, before);
                free(ts.dump);
        }
}

static off_t file_size(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 ? st.st_size : 0;
}

/* A gc converts a Store with 44 MB of trees (6 of 100,000 entries) while this process
 * commits: stopped between two steps, a commit goes through at once, and commits made all
 * along the rest of the conversion succeed (a step holds the Store as long as a commit).
 * The database grows by about a step, not by the trees again, and the WAL stays about a
 * step long. */
static void test_trees_conversion_beside_a_writer(void **state) {
        test_env *env = *state;
        _cleanup_free_ char *before = make_old_store(env, "proj", 6, 100000);
        const char *db = env_path(env, "home/projects/proj/store.db");
        const char *wal = env_path(env, "home/projects/proj/store.db-wal");
        off_t db_before = file_size(db);
        int pidfd;
        /* The split, then the first move. */
        gc_child_at(env, "proj", "gc-trees-stepped#2", &pidfd);
        env_reopen_store(env, "proj");
        assert_true(lfs_db_trees_split(env->store));
        commit_spec(env, "main", TREE(REG("a", "between two steps")), "between");
        int commits = 0;
        store_child_go(env, "proj");
        off_t wal_most = 0;
        for (;;) {
                struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
                if (poll(&pfd, 1, 0) > 0)
                        break;
                char content[32];
                fmt_path(content, "%d", commits++);
                commit_spec(env, "main", TREE(REG("a", content), REG("b", "1")), "during");
                off_t w = file_size(wal);
                wal_most = w > wal_most ? w : wal_most;
        }
        siginfo_t si;
        assert_int_equal(waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED), 0);
        close(pidfd);
        assert_int_equal(si.si_code, CLD_EXITED);
        assert_int_equal(si.si_status, 0);
        assert_false(lfs_db_trees_split(env->store));
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        env_close_store(env);
        off_t db_after = file_size(db);
        print_message(
                "%d commits during the conversion; store.db %lld bytes before, %lld after; WAL at most "
                "%lld\n",
                commits, (long long)db_before, (long long)db_after, (long long)wal_most);
        trees_state ts = trees_look(env, "proj");
        assert_false(ts.without_rowid);
        assert_false(ts.split);
        assert_trees_kept(before, ts.dump);
        free(ts.dump);
        assert_msg(db_after < db_before + 4 * (off_t)LFS_TREES_MOVE_BYTES,
                   "the conversion grew store.db from %lld to %lld bytes", (long long)db_before,
                   (long long)db_after);
        assert_msg(wal_most < db_before / 2, "the WAL grew to %lld bytes", (long long)wal_most);
}

/* A gc while table trees is split removes the dead trees of both tables (and their
 * counts), and keeps every live one, in either table. */
static void test_gc_while_trees_are_split(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", TREE(REG("a", "1"), REG("d/x", "1")));
        assert_ok(env, lfs_branch_create(env->store, "gone", "main", NULL, &env->err));
        commit_spec(env, "gone", TREE(REG("a", "1"), REG("old-dead/y", "1")), "to be deleted");
        env_close_store(env);
        _cleanup_free_ char *before = make_old_shape(env, "proj");
        env_reopen_store(env, "proj");
        uint64_t moved = 0;
        assert_int_equal(lfs_trees_convert_step(env->store, 1, &moved, &env->err), 1);
        assert_true(lfs_db_trees_split(env->store));
        /* A dead tree in the new table too, and a live one. */
        assert_ok(env, lfs_branch_create(env->store, "gone2", "main", NULL, &env->err));
        commit_spec(env, "gone2", TREE(REG("a", "1"), REG("new-dead/z", "1")), "to be deleted too");
        commit_spec(env, "main", TREE(REG("a", "1"), REG("d/x", "1"), REG("e/w", "1")), "kept");
        assert_ok(env, lfs_branch_delete(env->store, "gone", 1, NULL, &env->err));
        assert_ok(env, lfs_branch_delete(env->store, "gone2", 1, NULL, &env->err));
        lfs_gc_options dry = { .dry_run = 1 };
        lfs_gc_result res;
        assert_ok(env, lfs_store_gc(env->store, &dry, &res, &env->err));
        /* Each of the two deleted commits' top tree and its new directory. */
        assert_int_equal(res.trees, 4);
        lfs_gc_result_done(&res);
        assert_true(lfs_db_trees_split(env->store));
        run_gc(env, &res);
        assert_int_equal(res.trees, 4);
        lfs_gc_result_done(&res);
        assert_false(lfs_db_trees_split(env->store));
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        sqlite3_stmt *st =
                query_row(env->store->db, "SELECT (SELECT count(*) FROM trees), (SELECT count(*) FROM "
                                          "tree_subdirs WHERE id NOT IN (SELECT id FROM trees))");
        assert_int_equal(sqlite3_column_int(st, 1), 0);
        /* main's two commits: its top trees, d, e. */
        assert_int_equal(sqlite3_column_int(st, 0), 4);
        sqlite3_finalize(st);
}

static int convert_all(lfs_store *store, size_t i, const void *arg) {
        (void)i;
        (void)arg;
        uint64_t moved = 0;
        int r;
        while ((r = lfs_trees_convert_step(store, 1, &moved, NULL)) > 0)
                ;
        return r;
}

/* Two processes converting one Store at once, a tree a step: both end well, taking turns
 * (each step looks at the state again under the write lock), and every tree is kept once. */
static void test_trees_converted_by_two_processes_at_once(void **state) {
        test_env *env = *state;
        _cleanup_free_ char *before = make_old_store(env, "proj", 0, 0);
        store_children_run(env, "proj", 2, convert_all, NULL);
        trees_state ts = trees_look(env, "proj");
        assert_false(ts.without_rowid);
        assert_false(ts.split);
        assert_string_equal(ts.dump, before);
        free(ts.dump);
        env_reopen_store(env, "proj");
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                env_test(test_init_refuses_bad_names),
                env_test(test_init_refuses_missing_from_dir),
                env_test(test_init_refuses_a_file_as_from),
                env_test(test_init_twice_is_refused_and_keeps_the_first),
                env_test(test_init_without_from_is_empty),
                env_test(test_open_missing_project),
                env_test(test_open_without_a_name),
                env_test(test_project_list),
                env_test(test_open_garbage_store_db),
                env_test(test_open_sqlite_db_that_is_not_a_store),
                env_test(test_open_project_without_store_db),
                env_test(test_gc_keeps_pinned_commits_only_while_held),
                env_test(test_gc_refuses_an_unreadable_live_pin),
                env_test(test_gc_refuses_bad_options),
                env_test(test_gc_counts_deletions_since_the_last),
                env_test(test_branch_create_existing_is_refused),
                env_test(test_branch_create_refusals),
                env_test(test_branch_create_from_commit_prefix),
                env_test(test_branch_delete_and_log_of_missing_branch),
                env_test(test_branch_log_order_and_limit),
                env_test(test_branch_commit_refusals),
                env_test(test_branch_commit_of_unchanged_dir_makes_no_commit),
                env_test(test_branch_move_compare_and_swap),
                env_test(test_branch_move_refusals),
                env_test(test_export_into_non_empty_dir_is_refused),
                env_test(test_export_refusals),
                env_test(test_export_into_existing_empty_dir),
                env_test(test_round_trip_of_every_kind),
                env_test(test_round_trip_of_name_with_leading_space),
                env_test(test_round_trip_of_many_and_large_files),
                env_test(test_commit_changes_applies_every_kind),
                env_test(test_commit_changes_later_change_wins),
                env_test(test_commit_changes_refuses_bad_changes),
                env_test(test_commit_changes_without_changes_makes_no_commit),
                env_test(test_commit_changes_without_changes_after_branch_moved),
                env_test(test_commit_changes_merges_when_branch_moved),
                env_test(test_commit_changes_conflict_changes_nothing),
                env_test(test_verify_passes_on_a_fresh_store),
                env_test(test_verify_fails_on_a_damaged_small_blob),
                env_test(test_verify_fails_on_a_damaged_loose_blob),
                env_test(test_verify_fails_on_a_missing_blob),
                env_test(test_verify_fails_on_a_damaged_blob_on_another_branch),
                env_test(test_export_of_a_corrupt_tree_fails_cleanly),
                env_test(test_export_of_a_missing_tree_fails_cleanly),
                env_test(test_no_uring_gives_identical_ids),
                env_test(test_io_layer_plain),
                env_test(test_io_layer_uring),
                env_test(test_tree_subdirs_stored_by_every_writer),
                env_test(test_tree_subdirs_of_a_store_made_before_them),
                env_test(test_verify_fails_on_a_wrong_subdir_count),
                env_test(test_tree_lookup_reads_only_its_own_row),
                env_test(test_trees_of_an_old_store_converted_step_by_step),
                env_test(test_trees_conversion_killed_at_each_step),
                env_test(test_trees_conversion_beside_a_writer),
                env_test(test_gc_while_trees_are_split),
                env_test(test_trees_converted_by_two_processes_at_once),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
