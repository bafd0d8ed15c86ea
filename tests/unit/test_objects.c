/* SPDX-License-Identifier: MIT */
/* The blob writer: files that vanish or change between the walk and the read, what a
 * writer leaves when it is dropped, and de-duplication within one operation. */
#include "helpers.h"
#include "store.h"

/* The walk saw the file; by the time it is read it is gone. */
static void test_vanished_file_is_invalid_input(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        const char *path = env_path(env, "gone");
        write_text(path, "here during the walk\n");
        lfs_id id;
        lfs_blob_source src = { .dirfd = AT_FDCWD, .follow = true, .path = path, .size = 21, .ret_id = &id };
        assert_int_equal(unlink(path), 0);
        lfs_blob_writer *w = lfs_blob_writer_new(env->store);
        int r = lfs_blob_writer_add_files(w, &src, 1, &env->err);
        lfs_blob_writer_free(w);
        assert_error(env, r, LFS_INVALID_INPUT, "vanished");
}

/* The walk saw 4 bytes; the read finds more or fewer: the snapshot would mix two
 * versions, so it is refused. */
static void test_changed_size_is_invalid_input(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        const char *path = env_path(env, "grew");
        write_text(path, "now longer than it was\n");
        for (uint64_t seen = 4; seen <= 40; seen += 36) {
                lfs_id id;
                lfs_blob_source src = {
                        .dirfd = AT_FDCWD, .follow = true, .path = path, .size = seen, .ret_id = &id
                };
                lfs_blob_writer *w = lfs_blob_writer_new(env->store);
                int r = lfs_blob_writer_add_files(w, &src, 1, &env->err);
                lfs_blob_writer_free(w);
                assert_error(env, r, LFS_INVALID_INPUT, "changed");
        }
}

static size_t entries_in(const char *dir) {
        DIR *d = opendir(dir);
        assert_non_null(d);
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                n += de->d_name[0] != '.';
        closedir(d);
        return n;
}

/* A writer dropped before its commit leaves no pack and no tmp object; the same content
 * twice in one operation is written once. */
static void test_dropped_writer_leaves_nothing(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        const char *packs = env_keep(env, strdup(env_path(env, "home/projects/proj/objects/packs")));
        const char *tmp = env_keep(env, strdup(env_path(env, "home/projects/proj/objects/tmp")));
        size_t packs_before = entries_in(packs);

        size_t big_len = LFS_PACK_MAX_BLOB + 1;
        char *big = calloc(1, big_len);
        assert_non_null(big);
        write_bytes(env_path(env, "big"), big, big_len, 0644);
        free(big);
        write_text(env_path(env, "a"), "same\n");
        write_text(env_path(env, "b"), "same\n");
        lfs_id ids[3];
        lfs_blob_source src[3] = {
                { .dirfd = AT_FDCWD,
                  .follow = true,
                  .path = env_path(env, "a"),
                  .size = 5,
                  .ret_id = &ids[0] },
                { .dirfd = AT_FDCWD,
                  .follow = true,
                  .path = env_path(env, "b"),
                  .size = 5,
                  .ret_id = &ids[1] },
                { .dirfd = AT_FDCWD,
                  .follow = true,
                  .path = env_path(env, "big"),
                  .size = big_len,
                  .ret_id = &ids[2] },
        };
        lfs_blob_writer *w = lfs_blob_writer_new(env->store);
        assert_ok(env, lfs_blob_writer_add_files(w, src, 3, &env->err));
        assert_memory_equal(ids[0].bytes, ids[1].bytes, LFS_ID_LEN);
        assert_int_equal(lfs_blob_writer_written(w), 5 + big_len);
        assert_ok(env, lfs_blob_writer_publish(w, &env->err));
        assert_int_equal(entries_in(packs), packs_before + 1);
        lfs_blob_writer_free(w); /* never committed */
        assert_int_equal(entries_in(packs), packs_before);
        assert_int_equal(entries_in(tmp), 0);
}

/* The copy of large blobs: a source with holes and with written zeros gives the id of all
 * its bytes and a copy of the same bytes whose holes and zero chunks take no blocks. */
static void test_stream_keeps_holes(void **state) {
        test_env *env = *state;
        const uint64_t size = 64ull << 20;
        const uint64_t at[] = { 0, 5000000, size - 3 };
        _cleanup_close_ int in = open(env_path(env, "in"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        _cleanup_close_ int out = open(env_path(env, "out"), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        assert_true(in >= 0 && out >= 0);
        assert_int_equal(ftruncate(in, (off_t)size), 0);
        for (size_t i = 0; i < 3; i++)
                assert_int_equal(pwrite(in, "abc", 3, (off_t)at[i]), 3);
        /* 4 MiB of written zeros: data to the file system, a hole in the copy. */
        _cleanup_free_ char *zeros = xcalloc(1, 4u << 20);
        assert_int_equal(pwrite(in, zeros, 4u << 20, 32 << 20), 4 << 20);

        _cleanup_free_ char *all = xcalloc(1, size);
        assert_int_equal(pread(in, all, size, 0), (ssize_t)size);
        lfs_id want, got, hashed_only;
        lfs_sha256(all, size, &want);
        assert_int_equal(lfs_stream_sparse(in, size, out, NULL, NULL, &got), 0);
        assert_id_equal(env, &got, &want);
        assert_int_equal(lfs_stream_sparse(in, size, -1, NULL, NULL, &hashed_only), 0);
        assert_id_equal(env, &hashed_only, &want);

        struct stat st;
        assert_int_equal(fstat(out, &st), 0);
        assert_int_equal(st.st_size, (off_t)size);
        assert_true(st.st_blocks * 512 < (4 << 20)); /* three 1 MiB chunks at most */
        _cleanup_free_ char *copy = xcalloc(1, size);
        assert_int_equal(pread(out, copy, size, 0), (ssize_t)size);
        assert_memory_equal(copy, all, size);

        /* A source that is not the size it was said to be is -EIO. */
        assert_int_equal(lfs_stream_sparse(in, size - 1, -1, NULL, NULL, &got), -EIO);
        assert_int_equal(lfs_stream_sparse(in, size + 1, -1, NULL, NULL, &got), -EIO);
}

/* A file stored as a loose object is read once on import: hashed as it is copied into the
 * Store, not hashed first and read again to copy it (twice its bytes). A file known from
 * the tree before and unchanged is read once and not written. */
static void test_large_file_is_read_once(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        const size_t size = 8u << 20;
        _cleanup_free_ unsigned char *data = xmalloc(size);
        uint32_t x = 2463534242u; /* xorshift: data with no zero run the copy could skip */
        for (size_t i = 0; i < size; i++) {
                x ^= x << 13, x ^= x >> 17, x ^= x << 5;
                data[i] = (unsigned char)(x | 1);
        }
        const char *path = env_path(env, "big");
        write_bytes(path, data, size, 0644);
        lfs_id want;
        lfs_sha256(data, size, &want);

        lfs_id id;
        lfs_blob_source src = {
                .dirfd = AT_FDCWD, .follow = true, .path = path, .size = size, .ret_id = &id
        };
        lfs_blob_writer *w = lfs_blob_writer_new(env->store);
        uint64_t before = bytes_read();
        assert_ok(env, lfs_blob_writer_add_files(w, &src, 1, &env->err));
        uint64_t read = bytes_read() - before;
        assert_msg(read >= size && read < size + size / 2, "importing %zu bytes read %llu", size,
                   (unsigned long long)read);
        assert_id_equal(env, &id, &want);
        assert_int_equal(lfs_blob_writer_written(w), size);
        assert_ok(env, lfs_blob_writer_publish(w, &env->err));
        lfs_blob_writer_free(w);

        src = (lfs_blob_source){ .dirfd = AT_FDCWD,
                                 .follow = true,
                                 .path = path,
                                 .size = size,
                                 .has_known = true,
                                 .known = want,
                                 .ret_id = &id };
        w = lfs_blob_writer_new(env->store);
        before = bytes_read();
        assert_ok(env, lfs_blob_writer_add_files(w, &src, 1, &env->err));
        read = bytes_read() - before;
        assert_msg(read >= size && read < size + size / 2, "hashing a known %zu bytes read %llu", size,
                   (unsigned long long)read);
        assert_id_equal(env, &id, &want);
        assert_int_equal(lfs_blob_writer_written(w), 0);
        lfs_blob_writer_free(w);
}

/* A source below its directory (an imported tree, which another user may change between
 * the walk and the read) is read beneath it: never through a symlink on the way (a
 * listed directory swapped for a symlink to /etc read /etc's file), and a fifo put in a
 * file's place is refused at once rather than waited on for a writer. The caller's own
 * path (follow) goes through the symlink. Small (a batch) and large (read alone). */
static void test_source_is_read_beneath(void **state) {
        test_env *env = *state;
        env_init_project(env, "proj", NULL);
        const char *tree = env_path(env, "tree");
        assert_int_equal(mkdir(tree, 0755), 0);
        const char *secrets = env_path(env, "secrets");
        assert_int_equal(mkdir(secrets, 0700), 0);
        size_t big = 200u << 10;
        char *data = calloc(1, big);
        assert_non_null(data);
        write_text(env_path(env, "secrets/small"), "root's\n");
        write_bytes(env_path(env, "secrets/big"), data, big, 0600);
        free(data);
        assert_int_equal(symlink(secrets, env_path(env, "tree/a")), 0);
        assert_int_equal(mkfifo(env_path(env, "tree/fifo"), 0644), 0);
        int dirfd = open(tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dirfd >= 0);
        const struct {
                const char *path;
                uint64_t size;
        } cases[] = { { "a/small", 7 }, { "a/big", big }, { "fifo", 7 }, { "fifo", big } };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                lfs_id id;
                lfs_blob_source src = {
                        .dirfd = dirfd, .path = cases[i].path, .size = cases[i].size, .ret_id = &id
                };
                lfs_blob_writer *w = lfs_blob_writer_new(env->store);
                int r = lfs_blob_writer_add_files(w, &src, 1, &env->err);
                lfs_blob_writer_free(w);
                assert_error(env, r, LFS_INVALID_INPUT, "changed or vanished");
        }
        for (size_t i = 0; i < 2; i++) {
                lfs_id id;
                lfs_blob_source src = { .dirfd = dirfd,
                                        .path = cases[i].path,
                                        .follow = true,
                                        .size = cases[i].size,
                                        .ret_id = &id };
                lfs_blob_writer *w = lfs_blob_writer_new(env->store);
                assert_ok(env, lfs_blob_writer_add_files(w, &src, 1, &env->err));
                lfs_blob_writer_free(w);
        }
        close(dirfd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                env_test(test_vanished_file_is_invalid_input), env_test(test_changed_size_is_invalid_input),
                env_test(test_dropped_writer_leaves_nothing),  env_test(test_stream_keeps_holes),
                env_test(test_large_file_is_read_once),        env_test(test_source_is_read_beneath),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
