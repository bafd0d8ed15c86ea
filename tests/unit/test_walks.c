/* SPDX-License-Identifier: MIT */
/*
 * Walks over deep and wide trees (issue 13): a path as long as the Store records (4,095
 * bytes: 2,047 directories "a" and a file) goes in and out again, one byte more is
 * refused by name; trees nested far deeper than that (made row by row) diff, merge and
 * verify; commit_changes of thousands of names in one directory builds the same tree as
 * an import of that directory; rm_rf_at empties a deep tree without following a
 * symlink or keeping fds; the blob writer can leave out what it cannot read and stops
 * when cancelled.
 */
#include "helpers.h"
#include "store.h"

/* Makes <dir>/a/a/.../a (levels directories) with a file `leaf` at the bottom, one
 * directory fd at a time: the path is too long for one system call. */
static void make_chain(const char *dir, size_t levels, const char *leaf) {
        assert_msg(mkdir(dir, 0755) == 0, "mkdir %s: %s", dir, strerror(errno));
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        for (size_t i = 0; i < levels; i++) {
                assert_int_equal(mkdirat(fd, "a", 0755), 0);
                int next = openat(fd, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_true(next >= 0);
                close(fd);
                fd = next;
        }
        int f = openat(fd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        assert_true(f >= 0);
        assert_int_equal(write(f, "bottom\n", 7), 7);
        close(f);
        close(fd);
}

/* The contents of <dir>/a/.../a/<leaf>, read one directory at a time. */
static char *read_chain(const char *dir, size_t levels, const char *leaf) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (size_t i = 0; i < levels && fd >= 0; i++) {
                int next = openat(fd, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                close(fd);
                fd = next;
        }
        assert_true(fd >= 0);
        int f = openat(fd, leaf, O_RDONLY | O_CLOEXEC);
        close(fd);
        assert_true(f >= 0);
        char *buf = calloc(1, 64);
        assert_non_null(buf);
        assert_true(read(f, buf, 63) > 0);
        close(f);
        return buf;
}

/* 2,047 levels and "f": 4,095 bytes, recorded and written out again; "ff" is one byte
 * too many, for import and for commit_changes alike. */
static void test_longest_path_goes_in_and_out(void **state) {
        test_env *env = *state;
        const char *fits = env_fresh_path(env, "fits"), *over = env_fresh_path(env, "over");
        make_chain(fits, 2047, "f");
        make_chain(over, 2047, "ff");
        lfs_id commit;
        assert_ok(env, lfs_project_init(env->home, "deep", fits, &commit, &env->err));
        assert_ok(env, lfs_store_open(env->home, "deep", &env->store, &env->err));
        const char *out = env_fresh_path(env, "out");
        assert_ok(env, lfs_branch_export(env->store, "main", out, &env->err));
        char *text = read_chain(out, 2047, "f");
        assert_string_equal(text, "bottom\n");
        free(text);
        uint64_t checked;
        assert_ok(env, lfs_store_verify(env->store, &checked, &env->err));

        int r = lfs_branch_commit(env->store, "main", over, "one byte more", &commit, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "at most 4,095 bytes");
        char path[LFS_PATH_MAX + 2];
        for (size_t i = 0; i < 2047; i++)
                memcpy(path + 2 * i, "a/", 2);
        memcpy(path + 2 * 2047, "ff", 3);
        const lfs_id head = head_of(env, "main");
        const lfs_path_change too_long = { path, LFS_ENTRY_SYMLINK, "target", NULL, 0 };
        r = lfs_store_commit_changes(env->store, "main", &head, &too_long, 1, "m", &commit, NULL, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "at most 4,095 bytes");
        path[2 * 2047 + 1] = 0; /* "a/.../a/f": fits */
        const lfs_path_change fits_change = { path, LFS_ENTRY_SYMLINK, "target", NULL, 0 };
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &head, &fits_change, 1, "m", &commit,
                                                NULL, &env->err));
        int dirfd = open(env->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dirfd >= 0);
        for (const char *d = fits; d; d = d == fits ? over : d == over ? out : NULL)
                assert_int_equal(rm_rf_at(dirfd, strrchr(d, '/') + 1), 0);
        close(dirfd);
}

/* Trees far deeper than any path the Store records, as an older Store could hold: built
 * row by row, then diffed, merged and verified. */
static void test_deep_trees_diff_merge_and_verify(void **state) {
        test_env *env = *state;
        enum { DEPTH = 20000 };
        lfs_id base_commit = env_init_project(env, "proj", NULL);
        lfs_tree_rows rows = { 0 };
        lfs_id bottoms[3], roots[3];
        lfs_tree leaf = { 0 };
        lfs_tree_store(&leaf, &rows, &bottoms[0]); /* empty */
        const char *names[3] = { NULL, "x", "y" };
        for (int k = 1; k < 3; k++) {
                lfs_tree t = { 0 };
                lfs_tree_add(&t, strdup(names[k]), LFS_MODE_DIR, 0, lfs_empty_tree_id());
                lfs_tree_store(&t, &rows, &bottoms[k]);
                lfs_tree_done(&t);
        }
        for (int k = 0; k < 3; k++) {
                lfs_id id = bottoms[k];
                for (int i = 0; i < DEPTH; i++) {
                        lfs_tree t = { 0 };
                        lfs_tree_add(&t, strdup("c"), LFS_MODE_DIR, 0, &id);
                        lfs_tree_store(&t, &rows, &id);
                        lfs_tree_done(&t);
                }
                roots[k] = id;
        }
        lfs_blob_writer *w = lfs_blob_writer_new(env->store);
        lfs_id base, ours;
        assert_ok(env, lfs_record_commit(env->store, w, &rows, "main", &base_commit, &roots[0], &base_commit,
                                         1, "chain", &base, &env->err));
        lfs_blob_writer_free(w);
        lfs_tree_rows_done(&rows);
        lfs_id created;
        assert_ok(env, lfs_branch_create(env->store, "other", "main", &created, &env->err));
        /* ours: x at the bottom, by commit_changes; theirs: y, by a commit of the tree. */
        char *path = malloc(2 * DEPTH + 2);
        assert_non_null(path);
        for (int i = 0; i < DEPTH; i++)
                memcpy(path + 2 * i, "c/", 2);
        strcpy(path + 2 * DEPTH, "x");
        w = lfs_blob_writer_new(env->store);
        lfs_id theirs;
        assert_ok(env, lfs_record_commit(env->store, w, &rows, "other", &base, &roots[2], &base, 1, "y",
                                         &theirs, &env->err));
        lfs_blob_writer_free(w);
        lfs_tree_rows_done(&rows);
        /* commit_changes refuses the path (longer than the Store records): a row does it. */
        const lfs_path_change deep = { path, LFS_ENTRY_DIR, NULL, NULL, 0 };
        int r = lfs_store_commit_changes(env->store, "main", &base, &deep, 1, "x", &ours, NULL, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "at most 4,095 bytes");
        w = lfs_blob_writer_new(env->store);
        assert_ok(env, lfs_record_commit(env->store, w, &rows, "main", &base, &roots[1], &base, 1, "x",
                                         &ours, &env->err));
        lfs_blob_writer_free(w);

        lfs_change *changes;
        size_t n;
        assert_ok(env, lfs_branch_diff(env->store, "main", "other", &changes, &n, &env->err));
        assert_int_equal(n, 2);
        assert_int_equal(changes[0].kind, LFS_DELETED);
        assert_string_equal(changes[0].path, path);
        path[2 * DEPTH] = 'y';
        assert_int_equal(changes[1].kind, LFS_ADDED);
        assert_string_equal(changes[1].path, path);
        lfs_change_list_free(changes, n);

        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "other", "main", &res, &env->err));
        assert_int_equal(res.fast_forward, 0);
        assert_ok(env, lfs_branch_diff(env->store, "other", "main", &changes, &n, &env->err));
        assert_int_equal(n, 1);
        path[2 * DEPTH] = 'x';
        assert_string_equal(changes[0].path, path);
        lfs_change_list_free(changes, n);
        free(path);
        uint64_t checked;
        assert_ok(env, lfs_store_verify(env->store, &checked, &env->err));
        /* 5 commits (the empty first one, base, ours, theirs, the merge); trees: the empty
         * one, the base's chain above it, and ours, theirs and the merge, DEPTH + 1 each. */
        assert_int_equal(checked, 5 + 1 + DEPTH + 3 * (DEPTH + 1));
}

/* Thousands of names in one directory, added, replaced and removed, beside names that
 * sort right next to "/" (0x01, '-', '.'): the same tree as an import of the result. */
static void test_commit_changes_of_a_big_directory(void **state) {
        test_env *env = *state;
        enum { OLD = 300, NEW = 3000 };
        const char *base_dir = env_fresh_path(env, "base");
        assert_int_equal(mkdir(base_dir, 0755), 0);
        char path[PATH_MAX];
        for (int i = 0; i < OLD; i++) {
                fmt_path(path, "%s/d/old%04d", base_dir, i);
                write_text(path, "old\n");
        }
        fmt_path(path, "%s/a\001", base_dir);
        write_text(path, "one\n");
        fmt_path(path, "%s/a/x", base_dir);
        write_text(path, "under a\n");
        lfs_id base;
        assert_ok(env, lfs_project_init(env->home, "proj", base_dir, &base, &env->err));
        assert_ok(env, lfs_store_open(env->home, "proj", &env->store, &env->err));

        const char *source = env_path(env, "source");
        write_text(source, "new\n");
        lfs_path_change *changes = calloc(NEW + OLD, sizeof(*changes));
        char **names = calloc(NEW + OLD, sizeof(char *));
        assert_true(changes && names);
        size_t n = 0;
        for (int i = NEW - 1; i >= 0; i--) { /* in no particular order */
                assert_true(asprintf(&names[n], "d/new%05d", i) > 0);
                changes[n] = (lfs_path_change){ names[n], LFS_ENTRY_FILE, source, NULL, 0 };
                n++;
        }
        for (int i = 0; i < OLD; i += 2) {
                assert_true(asprintf(&names[n], "d/old%04d", i) > 0);
                changes[n] = (lfs_path_change){ names[n], i % 4 ? LFS_ENTRY_NONE : LFS_ENTRY_FILE, source,
                                                NULL, 0 };
                n++;
        }
        const lfs_path_change more[] = {
                { "a-b", LFS_ENTRY_FILE, source, NULL, 0 },     { "a/y", LFS_ENTRY_FILE, source, NULL, 0 },
                { "a.c", LFS_ENTRY_SYMLINK, "a\001", NULL, 0 }, { "a\001", LFS_ENTRY_NONE, NULL, NULL, 0 },
                { "a\001", LFS_ENTRY_FILE, source, NULL, 0 },
        };
        lfs_id commit;
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &base, changes, n, "big", &commit, NULL,
                                                &env->err));
        assert_ok(env, lfs_store_commit_changes(env->store, "main", &commit, more, COUNT_OF(more), "more",
                                                &commit, NULL, &env->err));

        /* The same directory on disk, recorded by import on another branch. */
        for (int i = 0; i < NEW; i++) {
                fmt_path(path, "%s/d/new%05d", base_dir, i);
                write_text(path, "new\n");
        }
        for (int i = 0; i < OLD; i += 2) {
                fmt_path(path, "%s/d/old%04d", base_dir, i);
                if (i % 4)
                        assert_int_equal(unlink(path), 0);
                else
                        write_text(path, "new\n");
        }
        fmt_path(path, "%s/a-b", base_dir);
        write_text(path, "new\n");
        fmt_path(path, "%s/a/y", base_dir);
        write_text(path, "new\n");
        fmt_path(path, "%s/a\001", base_dir);
        write_text(path, "new\n");
        fmt_path(path, "%s/a.c", base_dir);
        assert_int_equal(symlink("a\001", path), 0);
        lfs_id created, imported;
        assert_ok(env, lfs_branch_create(env->store, "import", "main", &created, &env->err));
        assert_ok(env, lfs_branch_commit(env->store, "import", base_dir, "import", &imported, &env->err));
        /* Nothing to record: the branch already holds exactly that tree. */
        assert_id_equal(env, &imported, &commit);
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        free(changes);
}

/* A tree deeper than any fd limit, with read-only directories and a symlink out of it:
 * removed whole, the symlink's target kept, no fd left open. */
static void test_rm_rf_at_deep_tree(void **state) {
        test_env *env = *state;
        const char *outside = env_path(env, "outside/keep"), *outside_dir = env_path(env, "outside");
        write_text(outside, "keep\n");
        int root = open(env->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(root >= 0);
        assert_int_equal(mkdirat(root, "deep", 0755), 0);
        int fd = openat(root, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        for (int i = 0; i < 3000; i++) {
                assert_int_equal(mkdirat(fd, "d", 0755), 0);
                if (i % 100 == 0) {
                        assert_int_equal(symlinkat(outside_dir, fd, "link"), 0);
                        assert_int_equal(mkdirat(fd, "ro", 0755), 0);
                        int f = openat(fd, "ro/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0444);
                        assert_true(f >= 0);
                        close(f);
                        assert_int_equal(fchmodat(fd, "ro", 0500, 0), 0);
                }
                int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                assert_true(next >= 0);
                close(fd);
                fd = next;
        }
        close(fd);
        size_t before = open_descriptors();
        assert_int_equal(rm_rf_at(root, "deep"), 0);
        assert_int_equal(open_descriptors(), before);
        struct stat st;
        assert_int_equal(fstatat(root, "deep", &st, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(errno, ENOENT);
        char *text = read_whole(outside, NULL);
        assert_string_equal(text, "keep\n");
        free(text);
        assert_int_equal(rm_rf_at(root, "deep"), 0); /* gone already: fine */
        close(root);
}

/* Files that vanish, or are not the size the walk saw, are left out; the rest is stored. */
static void test_lenient_writer_leaves_out_what_it_cannot_read(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        size_t big = (5u << 20) + 3;
        char *data = malloc(big);
        assert_non_null(data);
        memset(data, 'b', big);
        write_bytes(env_path(env, "big"), data, big, 0644);
        memset(data, 'c', big);
        write_bytes(env_path(env, "big-grown"), data, big, 0644);
        free(data);
        write_text(env_path(env, "small"), "small\n");
        write_text(env_path(env, "small-grown"), "grown since\n");
        lfs_id ids[5] = { { { 0 } } };
        lfs_blob_source src[5] = {
                { .dirfd = AT_FDCWD,
                  .follow = true,
                  .path = env_path(env, "small"),
                  .size = 6,
                  .ret_id = &ids[0] },
                { .dirfd = AT_FDCWD,
                  .follow = true,
                  .path = env_path(env, "gone"),
                  .size = 6,
                  .ret_id = &ids[1] },
                { .dirfd = AT_FDCWD,
                  .follow = true,
                  .path = env_path(env, "small-grown"),
                  .size = 4,
                  .ret_id = &ids[2] },
                { .dirfd = AT_FDCWD,
                  .follow = true,
                  .path = env_path(env, "big"),
                  .size = big,
                  .ret_id = &ids[3] },
                { .dirfd = AT_FDCWD,
                  .follow = true,
                  .path = env_path(env, "big-grown"),
                  .size = big - 1,
                  .ret_id = &ids[4] },
        };
        lfs_blob_writer *w = lfs_blob_writer_new(env->store);
        assert_ok(env, lfs_blob_writer_add_files_lenient(w, src, 5, &env->err));
        assert_int_equal(src[0].result, 0);
        assert_int_equal(src[1].result, -ENOENT);
        assert_int_equal(src[2].result, -EIO);
        assert_int_equal(src[3].result, 0);
        assert_int_equal(src[4].result, -EIO);
        assert_ok(env, lfs_blob_writer_publish(w, &env->err));
        assert_true(lfs_object_exists(env->store, &ids[3]));
        /* Nothing of what was left out stays: added again at its size, it is written. */
        src[4].size = big;
        assert_ok(env, lfs_blob_writer_add_files(w, &src[4], 1, &env->err));
        assert_ok(env, lfs_blob_writer_publish(w, &env->err));
        assert_true(lfs_object_exists(env->store, &ids[4]));
        lfs_blob_writer_free(w);
}

static bool cancel_after_two(void *userdata) {
        return ++*(int *)userdata > 2;
}

/* A large read asks between chunks, and stops when told. */
static void test_writer_stops_when_cancelled(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        size_t big = 16u << 20;
        char *data = calloc(1, big);
        assert_non_null(data);
        write_bytes(env_path(env, "big"), data, big, 0644);
        free(data);
        lfs_id id;
        lfs_blob_source src = {
                .dirfd = AT_FDCWD, .follow = true, .path = env_path(env, "big"), .size = big, .ret_id = &id
        };
        int asked = 0;
        lfs_blob_writer *w = lfs_blob_writer_new(env->store);
        lfs_blob_writer_set_cancel(w, cancel_after_two, &asked);
        int r = lfs_blob_writer_add_files_lenient(w, &src, 1, &env->err);
        lfs_blob_writer_free(w);
        assert_int_equal(r, -ECANCELED);
        assert_int_equal(asked, 3);
        assert_error(env, r, LFS_FAILED, "cancelled");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                env_test(test_longest_path_goes_in_and_out),
                env_test(test_deep_trees_diff_merge_and_verify),
                env_test(test_commit_changes_of_a_big_directory),
                env_test(test_rm_rf_at_deep_tree),
                env_test(test_lenient_writer_leaves_out_what_it_cannot_read),
                env_test(test_writer_stops_when_cancelled),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
