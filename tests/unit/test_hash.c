/* SPDX-License-Identifier: MIT */
/* Ids: SHA-256, hex forms, object paths and the id set used by graph walks. */
#include "helpers.h"
#include "store.h"

#include <sys/wait.h>

/* hash.c hashes inputs up to this many bytes itself. */
#define SHORT_INPUT_MAX 256

/* FIPS 180-2 test vectors, so the ids agree with every other SHA-256. */
#define SHA256_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SHA256_ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA256_TWO_BLOCKS "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
#define SHA256_MILLION_A "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"

static void assert_hex(const lfs_id *id, const char *expected) {
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(id, hex);
        assert_string_equal(hex, expected);
}

/* Whether libcrypto is mapped into this process. */
static bool libcrypto_loaded(void) {
        FILE *f = fopen("/proc/self/maps", "re");
        assert_non_null(f);
        char line[1024];
        bool found = false;
        while (!found && fgets(line, sizeof(line), f))
                found = strstr(line, "/libcrypto.so") != NULL;
        fclose(f);
        return found;
}

/* Runs first: short inputs (a home's path for the cgroup's name, a branch's) are hashed
 * without loading libcrypto, which no CLI call that hashes nothing long pays for. */
static void test_short_inputs_load_no_libcrypto(void **state) {
        (void)state;
        lfs_id id;
        assert_false(libcrypto_loaded());
        lfs_sha256("abc", 3, &id);
        assert_hex(&id, SHA256_ABC);
        assert_false(libcrypto_loaded());
}

/* The same ids without libcrypto (LAYERFS_NO_LIBCRYPTO=1, as where it cannot be loaded):
 * in a child, before this process loads it, long inputs one-shot and streamed in uneven
 * pieces, and every length across the blocks' edges against the known vectors and
 * against each other. */
static void test_ids_without_libcrypto(void **state) {
        (void)state;
        enum { LEN = 1000000 };
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                setenv("LAYERFS_NO_LIBCRYPTO", "1", 1);
                char *data = malloc(LEN);
                lfs_id one_shot, streamed;
                char hex[LFS_HEX_LEN + 1];
                if (!data)
                        _exit(2);
                memset(data, 'a', LEN);
                lfs_sha256(data, LEN, &one_shot);
                lfs_id_to_hex(&one_shot, hex);
                if (strcmp(hex, SHA256_MILLION_A))
                        _exit(3);
                lfs_hasher *h = lfs_hasher_new();
                for (size_t off = 0, piece = 1; off < LEN; piece = piece * 3 % 1021 + 1) {
                        size_t n = piece < LEN - off ? piece : LEN - off;
                        lfs_hasher_update(h, data + off, n);
                        off += n;
                }
                lfs_hasher_finish(h, &streamed);
                if (!lfs_id_eq(&one_shot, &streamed))
                        _exit(4);
                for (size_t len = 0; len <= 400; len++) {
                        h = lfs_hasher_new();
                        for (size_t i = 0; i < len; i++)
                                lfs_hasher_update(h, data + i, 1);
                        lfs_hasher_finish(h, &streamed);
                        lfs_sha256(data, len, &one_shot);
                        if (!lfs_id_eq(&one_shot, &streamed))
                                _exit(5);
                }
                free(data);
                _exit(libcrypto_loaded() ? 6 : 0);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status))
                fail_msg("without libcrypto, check %d failed (3: the million a's, 4: streamed, 5: a short "
                         "length, 6: libcrypto was loaded anyway)",
                         WEXITSTATUS(status));
        /* Here, the first long input loads it. */
        lfs_id id;
        char data[SHORT_INPUT_MAX + 1];
        memset(data, 'x', sizeof(data));
        lfs_sha256(data, sizeof(data), &id);
        assert_true(libcrypto_loaded());
}

static void test_sha256_known_vectors(void **state) {
        (void)state;
        lfs_id id;
        lfs_sha256("", 0, &id);
        assert_hex(&id, SHA256_EMPTY);
        lfs_sha256("abc", 3, &id);
        assert_hex(&id, SHA256_ABC);
        const char *two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
        lfs_sha256(two_blocks, strlen(two_blocks), &id);
        assert_hex(&id, SHA256_TWO_BLOCKS);
}

static void test_sha256_reads_only_len_bytes(void **state) {
        (void)state;
        lfs_id id;
        /* The trailing bytes must not leak into the id. */
        lfs_sha256("abcdef", 3, &id);
        assert_hex(&id, SHA256_ABC);
}

static void test_hasher_streaming_equals_one_shot(void **state) {
        (void)state;
        enum { LEN = 1000000 };
        char *data = malloc(LEN);
        assert_non_null(data);
        memset(data, 'a', LEN);
        lfs_id one_shot, streamed;
        lfs_sha256(data, LEN, &one_shot);
        assert_hex(&one_shot, SHA256_MILLION_A);

        /* Uneven pieces cross SHA-256's 64-byte blocks at every offset. */
        lfs_hasher *h = lfs_hasher_new();
        size_t off = 0, piece = 1;
        while (off < LEN) {
                size_t n = piece < LEN - off ? piece : LEN - off;
                lfs_hasher_update(h, data + off, n);
                off += n;
                piece = piece * 3 % 1021 + 1;
        }
        lfs_hasher_finish(h, &streamed);
        free(data);
        assert_memory_equal(streamed.bytes, one_shot.bytes, LFS_ID_LEN);
}

/* lfs_sha256 hashes short inputs itself and long ones through libcrypto, as the streaming
 * hasher always does: every length across the padding's edges (55, 56, 63, 64 bytes...)
 * and across the switch between the two gives the hasher's id. */
static void test_sha256_short_inputs_equal_libcrypto(void **state) {
        (void)state;
        uint8_t data[400];
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t)(i * 131 + 7);
        for (size_t len = 0; len <= sizeof(data); len++) {
                lfs_id one_shot, streamed;
                lfs_sha256(data, len, &one_shot);
                lfs_hasher *h = lfs_hasher_new();
                lfs_hasher_update(h, data, len);
                lfs_hasher_finish(h, &streamed);
                if (memcmp(one_shot.bytes, streamed.bytes, LFS_ID_LEN))
                        fail_msg("the SHA-256 of %zu bytes differs from libcrypto's", len);
        }
}

static void test_hasher_with_no_input_is_empty_id(void **state) {
        (void)state;
        lfs_id id;
        lfs_hasher *h = lfs_hasher_new();
        lfs_hasher_update(h, "", 0);
        lfs_hasher_finish(h, &id);
        assert_hex(&id, SHA256_EMPTY);
}

static void test_hex_round_trip(void **state) {
        (void)state;
        for (int seed = 0; seed < 64; seed++) {
                lfs_id id, back;
                char hex[LFS_HEX_LEN + 1];
                lfs_sha256(&seed, sizeof(seed), &id);
                lfs_id_to_hex(&id, hex);
                assert_int_equal(strlen(hex), LFS_HEX_LEN);
                assert_int_equal(strspn(hex, "0123456789abcdef"), LFS_HEX_LEN);
                assert_int_equal(lfs_id_from_hex(hex, &back), 0);
                assert_memory_equal(back.bytes, id.bytes, LFS_ID_LEN);
        }
}

static void test_hex_every_byte_value(void **state) {
        (void)state;
        lfs_id id, back;
        char hex[LFS_HEX_LEN + 1];
        for (int i = 0; i < LFS_ID_LEN; i++)
                id.bytes[i] = (uint8_t)(i * 8 + 7);
        lfs_id_to_hex(&id, hex);
        assert_string_equal(hex, "070f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff");
        assert_int_equal(lfs_id_from_hex(hex, &back), 0);
        assert_memory_equal(back.bytes, id.bytes, LFS_ID_LEN);
}

static void test_hex_uppercase_accepted(void **state) {
        (void)state;
        lfs_id lower, upper;
        assert_int_equal(lfs_id_from_hex(SHA256_ABC, &lower), 0);
        assert_int_equal(
                lfs_id_from_hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD", &upper),
                0);
        assert_memory_equal(lower.bytes, upper.bytes, LFS_ID_LEN);
}

static void test_hex_rejects_bad_input(void **state) {
        (void)state;
        static const char *const bad[] = {
                "",
                "ab",
                /* 63 and 65 characters */
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b8555",
                /* 64 characters with one that is not hex, at the start, middle and end */
                "g3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                "e3b0c44298fc1c149afbf4c8996fb924 7ae41e4649b934ca495991b7852b855",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85z",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85-",
                "0xb0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        };
        for (size_t i = 0; i < COUNT_OF(bad); i++) {
                lfs_id id;
                memset(id.bytes, 0x5a, LFS_ID_LEN);
                int r = lfs_id_from_hex(bad[i], &id);
                assert_msg(r == -EINVAL, "'%s' gave %d, expected -EINVAL", bad[i], r);
                /* ret_* is untouched on failure (layerfs.h). */
                for (int k = 0; k < LFS_ID_LEN; k++)
                        assert_msg(id.bytes[k] == 0x5a, "'%s' wrote into the result", bad[i]);
        }
}

static void test_object_path_layout(void **state) {
        (void)state;
        lfs_id id;
        char path[LFS_HEX_LEN + 2];
        memset(path, 'X', sizeof(path));
        lfs_sha256("abc", 3, &id);
        lfs_id_object_path(&id, path);
        assert_string_equal(path, "ba/7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_int_equal(strlen(path), LFS_HEX_LEN + 1);
}

static void test_idset_empty_has_nothing(void **state) {
        (void)state;
        lfs_idset set = { 0 };
        lfs_id id;
        lfs_sha256("x", 1, &id);
        assert_false(lfs_idset_has(&set, &id));
        lfs_idset_done(&set);
        assert_null(set.slots);
        assert_int_equal(set.n, 0);
}

static void test_idset_many_ids_survive_growth(void **state) {
        (void)state;
        enum { N = 20000 };
        lfs_idset set = { 0 };
        for (uint32_t i = 0; i < N; i++) {
                lfs_id id;
                lfs_sha256(&i, sizeof(i), &id);
                assert_msg(lfs_idset_add(&set, &id), "id %u was reported as already present", i);
                assert_true(lfs_idset_has(&set, &id));
        }
        assert_int_equal(set.n, N);
        /* Open addressing needs free slots to end a probe. */
        assert_true(set.cap >= 2 * set.n);
        for (uint32_t i = 0; i < N; i++) {
                lfs_id id;
                lfs_sha256(&i, sizeof(i), &id);
                assert_msg(lfs_idset_has(&set, &id), "id %u was lost while the set grew", i);
                assert_false(lfs_idset_add(&set, &id));
        }
        assert_int_equal(set.n, N);
        for (uint32_t i = N; i < N + 1000; i++) {
                lfs_id id;
                lfs_sha256(&i, sizeof(i), &id);
                assert_msg(!lfs_idset_has(&set, &id), "id %u was never added", i);
        }
        lfs_idset_done(&set);
}

static void test_idset_ids_sharing_a_slot(void **state) {
        (void)state;
        /* The slot comes from the first 8 bytes; ids equal there must still be told apart. */
        enum { N = 300 };
        lfs_idset set = { 0 };
        lfs_id ids[N];
        for (int i = 0; i < N; i++) {
                memset(ids[i].bytes, 0xab, LFS_ID_LEN);
                ids[i].bytes[LFS_ID_LEN - 1] = (uint8_t)i;
                ids[i].bytes[LFS_ID_LEN - 2] = (uint8_t)(i >> 8);
                assert_true(lfs_idset_add(&set, &ids[i]));
        }
        for (int i = 0; i < N; i++) {
                assert_true(lfs_idset_has(&set, &ids[i]));
                assert_false(lfs_idset_add(&set, &ids[i]));
        }
        lfs_id other = ids[0];
        other.bytes[LFS_ID_LEN - 2] = 0xff;
        assert_false(lfs_idset_has(&set, &other));
        assert_int_equal(set.n, N);
        lfs_idset_done(&set);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                /* These two first: before anything loads libcrypto. */
                cmocka_unit_test(test_short_inputs_load_no_libcrypto),
                cmocka_unit_test(test_ids_without_libcrypto),
                cmocka_unit_test(test_sha256_known_vectors),
                cmocka_unit_test(test_sha256_reads_only_len_bytes),
                cmocka_unit_test(test_hasher_streaming_equals_one_shot),
                cmocka_unit_test(test_sha256_short_inputs_equal_libcrypto),
                cmocka_unit_test(test_hasher_with_no_input_is_empty_id),
                cmocka_unit_test(test_hex_round_trip),
                cmocka_unit_test(test_hex_every_byte_value),
                cmocka_unit_test(test_hex_uppercase_accepted),
                cmocka_unit_test(test_hex_rejects_bad_input),
                cmocka_unit_test(test_object_path_layout),
                cmocka_unit_test(test_idset_empty_has_nothing),
                cmocka_unit_test(test_idset_many_ids_survive_growth),
                cmocka_unit_test(test_idset_ids_sharing_a_slot),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
