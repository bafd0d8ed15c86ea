/* SPDX-License-Identifier: MIT */
/* Trees: the serialized form, what parsing refuses, and ids that do not depend on the
 * order entries were added in. */
#include "helpers.h"
#include "store.h"

static lfs_id id_of(const char *text) {
        lfs_id id;
        lfs_sha256(text, strlen(text), &id);
        return id;
}

static void add_entry(lfs_tree *t, const char *name, uint32_t mode, uint64_t size, const char *seed) {
        lfs_id id = id_of(seed);
        lfs_tree_add(t, xstrdup(name), mode, size, &id);
}

/* Serializes t, parses it back and checks every field survived. */
static void assert_round_trip(lfs_tree *t) {
        char *data;
        size_t len;
        lfs_tree_sort(t);
        lfs_tree_serialize(t, &data, &len);
        lfs_tree back = { 0 };
        lfs_error *err = NULL;
        int r = lfs_tree_parse(data, len, &back, &err);
        if (r < 0) {
                /* Freed before failing: the failure must not also read as a leak. */
                print_error("parse of a serialized tree failed: %s\n", err ? err->message : "");
                lfs_error_free(err);
                free(data);
                lfs_tree_done(t);
                fail_msg("a serialized tree did not parse back");
        }
        assert_int_equal(back.n, t->n);
        for (size_t i = 0; i < t->n; i++) {
                const lfs_entry *want = &t->entries[i], *got = &back.entries[i];
                assert_msg(!strcmp(got->name, want->name), "entry %zu: name '%s', expected '%s'", i,
                           got->name, want->name);
                assert_int_equal(got->mode, want->mode);
                assert_int_equal(got->size, want->size);
                assert_memory_equal(got->id.bytes, want->id.bytes, LFS_ID_LEN);
        }
        /* The canonical form: serializing the parsed tree gives the same bytes. */
        char *again;
        size_t again_len;
        lfs_tree_serialize(&back, &again, &again_len);
        assert_int_equal(again_len, len);
        assert_memory_equal(again, data, len);
        free(again);
        free(data);
        lfs_tree_done(&back);
}

static void test_round_trip_every_mode(void **state) {
        (void)state;
        lfs_tree t = { 0 };
        add_entry(&t, "README.md", LFS_MODE_FILE, 1234, "readme");
        add_entry(&t, "build.sh", LFS_MODE_EXEC, 99, "build");
        add_entry(&t, "latest", LFS_MODE_LINK, 9, "link target");
        add_entry(&t, "src", LFS_MODE_DIR, 0, "a subtree");
        add_entry(&t, "empty", LFS_MODE_FILE, 0, "");
        assert_round_trip(&t);
        lfs_tree_done(&t);
}

static void test_round_trip_sizes(void **state) {
        (void)state;
        lfs_tree t = { 0 };
        add_entry(&t, "zero", LFS_MODE_FILE, 0, "0");
        add_entry(&t, "four-gib-plus-one", LFS_MODE_FILE, (UINT64_C(1) << 32) + 1, "4g");
        add_entry(&t, "largest", LFS_MODE_FILE, UINT64_MAX, "max");
        assert_round_trip(&t);
        lfs_tree_done(&t);
}

static void test_round_trip_awkward_names(void **state) {
        (void)state;
        lfs_tree t = { 0 };
        add_entry(&t, "with space.txt", LFS_MODE_FILE, 1, "a");
        add_entry(&t, "trailing space ", LFS_MODE_FILE, 1, "b");
        add_entry(&t, "caf\xc3\xa9 \xe2\x98\x95.txt", LFS_MODE_FILE, 1, "c"); /* "café ☕.txt" */
        add_entry(&t, "\xe6\x97\xa5\xe6\x9c\xac", LFS_MODE_DIR, 0, "d"); /* "日本" */
        add_entry(&t, "-dash", LFS_MODE_FILE, 1, "e");
        add_entry(&t, "...", LFS_MODE_FILE, 1, "f");
        add_entry(&t, ".hidden", LFS_MODE_FILE, 1, "g");
        add_entry(&t, "tab\there", LFS_MODE_FILE, 1, "h");
        add_entry(&t, "new\nline", LFS_MODE_FILE, 1, "i");
        add_entry(&t, "100644 7 looks-like-a-header", LFS_MODE_FILE, 1, "j");
        assert_round_trip(&t);
        lfs_tree_done(&t);
}

static void test_round_trip_name_with_leading_space(void **state) {
        (void)state;
        /* A file may be called " notes" on disk; the tree must keep the space. */
        lfs_tree t = { 0 };
        add_entry(&t, " leading", LFS_MODE_FILE, 3, "a");
        add_entry(&t, "  two", LFS_MODE_FILE, 3, "b");
        assert_round_trip(&t);
        lfs_tree_done(&t);
}

static void test_serialized_form(void **state) {
        (void)state;
        /* "<mode octal> <size> <name>\0<32-byte id>" per entry, sorted: the ids depend on it. */
        lfs_tree t = { 0 };
        add_entry(&t, "b", LFS_MODE_EXEC, 7, "bee");
        add_entry(&t, "a", LFS_MODE_FILE, 12, "ay");
        lfs_tree_sort(&t);
        char *data;
        size_t len;
        lfs_tree_serialize(&t, &data, &len);
        const char first[] = "100644 12 a";
        const char second[] = "100755 7 b";
        assert_int_equal(len, sizeof(first) + LFS_ID_LEN + sizeof(second) + LFS_ID_LEN);
        assert_memory_equal(data, first, sizeof(first));
        lfs_id ay = id_of("ay"), bee = id_of("bee");
        assert_memory_equal(data + sizeof(first), ay.bytes, LFS_ID_LEN);
        assert_memory_equal(data + sizeof(first) + LFS_ID_LEN, second, sizeof(second));
        assert_memory_equal(data + sizeof(first) + LFS_ID_LEN + sizeof(second), bee.bytes, LFS_ID_LEN);
        free(data);
        lfs_tree_done(&t);
}

/* ---- corrupt data ---- */

typedef struct raw_tree {
        char data[4096];
        size_t len;
} raw_tree;

/* Appends "<header>\0<id>", header being "<mode> <size> <name>" as it should appear. */
static void raw_add(raw_tree *raw, const char *header, const char *seed) {
        size_t hl = strlen(header) + 1;
        assert_true(raw->len + hl + LFS_ID_LEN <= sizeof(raw->data));
        memcpy(raw->data + raw->len, header, hl);
        raw->len += hl;
        lfs_id id = id_of(seed);
        memcpy(raw->data + raw->len, id.bytes, LFS_ID_LEN);
        raw->len += LFS_ID_LEN;
}

static void assert_parse_refuses(const raw_tree *raw, const char *what) {
        lfs_tree t = { .n = 777 }; /* must stay as it is: ret_* is untouched on failure */
        lfs_error *err = NULL;
        int r = lfs_tree_parse(raw->data, raw->len, &t, &err);
        assert_msg(r < 0, "a tree with %s was accepted", what);
        assert_msg(err && err->code == LFS_FAILED, "a tree with %s: code %s, expected Failed", what,
                   err ? lfs_code_name(err->code) : "none");
        assert_non_null(strstr(err->message, "corrupt"));
        assert_int_equal(t.n, 777);
        assert_null(t.entries);
        lfs_error_free(err);
}

/* A tree of one entry with each header in turn is refused. */
static void assert_each_refused(const char *const *headers, size_t n) {
        for (size_t i = 0; i < n; i++) {
                raw_tree raw = { 0 };
                raw_add(&raw, headers[i], "1");
                assert_parse_refuses(&raw, headers[i]);
        }
}

static void test_parse_accepts_the_valid_base(void **state) {
        (void)state;
        /* The corrupt cases below differ from this one in one way each. */
        raw_tree raw = { 0 };
        raw_add(&raw, "100644 1 a", "1");
        raw_add(&raw, "40000 0 b", "2");
        lfs_tree t = { 0 };
        assert_int_equal(lfs_tree_parse(raw.data, raw.len, &t, NULL), 0);
        assert_int_equal(t.n, 2);
        assert_string_equal(t.entries[1].name, "b");
        assert_int_equal(t.entries[1].mode, LFS_MODE_DIR);
        assert_non_null(lfs_tree_find(&t, "a"));
        assert_null(lfs_tree_find(&t, "c"));
        lfs_tree_done(&t);
}

static void test_parse_empty_data_is_empty_tree(void **state) {
        (void)state;
        lfs_tree t = { .n = 5 };
        assert_int_equal(lfs_tree_parse("", 0, &t, NULL), 0);
        assert_int_equal(t.n, 0);
        lfs_tree_done(&t);
}

static void test_parse_rejects_truncated_id(void **state) {
        (void)state;
        raw_tree raw = { 0 };
        raw_add(&raw, "100644 1 a", "1");
        raw_add(&raw, "100644 1 b", "2");
        for (size_t cut = 1; cut <= LFS_ID_LEN; cut++) {
                raw_tree shorter = raw;
                shorter.len -= cut;
                assert_parse_refuses(&shorter, "a truncated id");
        }
}

static void test_parse_rejects_missing_nul(void **state) {
        (void)state;
        raw_tree raw = { 0 };
        memcpy(raw.data, "100644 1 a", 10);
        raw.len = 10;
        assert_parse_refuses(&raw, "no NUL after the name");
}

static void test_parse_rejects_trailing_garbage(void **state) {
        (void)state;
        raw_tree raw = { 0 };
        raw_add(&raw, "100644 1 a", "1");
        memcpy(raw.data + raw.len, "xyz", 3);
        raw.len += 3;
        assert_parse_refuses(&raw, "bytes after the last entry");
}

static void test_parse_rejects_bad_modes(void **state) {
        (void)state;
        static const char *const headers[] = {
                "100600 1 a", "100777 1 a", "100664 1 a", "0 1 a",      "20000 0 a",
                "160000 0 a", "644 1 a",    "abc 1 a",    "100644 x a", "100644a",
        };
        assert_each_refused(headers, COUNT_OF(headers));
}

/* The fields are digits and one space each, as lfs_tree_serialize writes them: no sign,
 * no leading blank, no size past 64 bits (the largest one is taken). */
static void test_parse_rejects_numbers_out_of_form(void **state) {
        (void)state;
        static const char *const headers[] = {
                "+100644 1 a",
                " 100644 1 a",
                "100644 +1 a",
                "100644  1 a",
                "100644 -1 a",
                "100644 18446744073709551616 a",
                "100644 99999999999999999999 a",
                "100644 1a",
                "40000000000000000000000 0 a",
        };
        assert_each_refused(headers, COUNT_OF(headers));
        raw_tree raw = { 0 };
        raw_add(&raw, "100644 18446744073709551615 a", "1");
        lfs_tree t = { 0 };
        assert_int_equal(lfs_tree_parse(raw.data, raw.len, &t, NULL), 0);
        assert_int_equal(t.n, 1);
        assert_true(t.entries[0].size == UINT64_MAX);
        lfs_tree_done(&t);
}

static void test_parse_rejects_unsorted_names(void **state) {
        (void)state;
        raw_tree raw = { 0 };
        raw_add(&raw, "100644 1 b", "1");
        raw_add(&raw, "100644 1 a", "2");
        assert_parse_refuses(&raw, "names out of order");
}

static void test_parse_rejects_duplicate_names(void **state) {
        (void)state;
        raw_tree raw = { 0 };
        raw_add(&raw, "100644 1 a", "1");
        raw_add(&raw, "40000 0 a", "2");
        assert_parse_refuses(&raw, "a duplicate name");
}

static void test_parse_rejects_bad_names(void **state) {
        (void)state;
        static const char *const headers[] = {
                "100644 1 a/b", "100644 1 /a", "100644 1 a/", "40000 0 .", "40000 0 ..", "100644 1 ",
        };
        assert_each_refused(headers, COUNT_OF(headers));
}

static void test_entry_name_valid(void **state) {
        (void)state;
        assert_true(lfs_entry_name_valid("a"));
        assert_true(lfs_entry_name_valid("..."));
        assert_true(lfs_entry_name_valid(".a"));
        assert_true(lfs_entry_name_valid("a b"));
        assert_false(lfs_entry_name_valid(""));
        assert_false(lfs_entry_name_valid("."));
        assert_false(lfs_entry_name_valid(".."));
        assert_false(lfs_entry_name_valid("a/b"));
}

static void test_mode_valid(void **state) {
        (void)state;
        assert_true(lfs_mode_valid(LFS_MODE_FILE));
        assert_true(lfs_mode_valid(LFS_MODE_EXEC));
        assert_true(lfs_mode_valid(LFS_MODE_LINK));
        assert_true(lfs_mode_valid(LFS_MODE_DIR));
        assert_false(lfs_mode_valid(0));
        assert_false(lfs_mode_valid(0100600));
        assert_false(lfs_mode_valid(0160000));
}

/* ---- ids ---- */

static void test_tree_id_independent_of_insertion_order(void **state) {
        (void)state;
        static const char *const names[] = { "zeta", "alpha", "Mid", "alpha2", "caf\xc3\xa9", "a b", "_" };
        enum { N = COUNT_OF(names) };
        lfs_tree forward = { 0 }, backward = { 0 };
        for (size_t i = 0; i < N; i++)
                add_entry(&forward, names[i], LFS_MODE_FILE, i, names[i]);
        for (size_t i = N; i-- > 0;)
                add_entry(&backward, names[i], LFS_MODE_FILE, i, names[i]);
        lfs_tree_rows rows = { 0 };
        lfs_id a, b;
        lfs_tree_store(&forward, &rows, &a);
        lfs_tree_store(&backward, &rows, &b);
        assert_memory_equal(a.bytes, b.bytes, LFS_ID_LEN);
        /* Stored sorted bytewise, so lookups work. */
        for (size_t i = 1; i < forward.n; i++)
                assert_true(strcmp(forward.entries[i - 1].name, forward.entries[i].name) < 0);
        assert_non_null(lfs_tree_find(&forward, "Mid"));
        /* The queued row is the serialized tree, named by its SHA-256. */
        assert_int_equal(rows.n, 2);
        lfs_id of_row;
        lfs_sha256(rows.items[0].data, rows.items[0].len, &of_row);
        assert_memory_equal(of_row.bytes, a.bytes, LFS_ID_LEN);
        assert_memory_equal(rows.items[0].id.bytes, a.bytes, LFS_ID_LEN);
        lfs_tree_rows_done(&rows);
        lfs_tree_done(&forward);
        lfs_tree_done(&backward);
}

static void test_tree_id_changes_with_any_field(void **state) {
        (void)state;
        lfs_id ids[5];
        for (int variant = 0; variant < 5; variant++) {
                lfs_tree t = { 0 };
                add_entry(&t, variant == 1 ? "B" : "b", variant == 2 ? LFS_MODE_EXEC : LFS_MODE_FILE,
                          variant == 3 ? 2 : 1, variant == 4 ? "other" : "same");
                lfs_tree_rows rows = { 0 };
                lfs_tree_store(&t, &rows, &ids[variant]);
                lfs_tree_rows_done(&rows);
                lfs_tree_done(&t);
        }
        for (int i = 0; i < 5; i++)
                for (int j = i + 1; j < 5; j++)
                        assert_msg(memcmp(ids[i].bytes, ids[j].bytes, LFS_ID_LEN),
                                   "variants %d and %d have the same id", i, j);
}

static void test_empty_tree_id_is_sha256_of_nothing(void **state) {
        (void)state;
        lfs_id expected;
        assert_int_equal(lfs_id_from_hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                                         &expected),
                         0);
        assert_memory_equal(lfs_empty_tree_id()->bytes, expected.bytes, LFS_ID_LEN);

        lfs_tree empty = { 0 };
        lfs_tree_rows rows = { 0 };
        lfs_id stored;
        lfs_tree_store(&empty, &rows, &stored);
        assert_memory_equal(stored.bytes, expected.bytes, LFS_ID_LEN);
        assert_int_equal(rows.n, 1);
        assert_int_equal(rows.items[0].len, 0);
        lfs_tree_rows_done(&rows);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip_every_mode),
                cmocka_unit_test(test_round_trip_sizes),
                cmocka_unit_test(test_round_trip_awkward_names),
                cmocka_unit_test(test_round_trip_name_with_leading_space),
                cmocka_unit_test(test_serialized_form),
                cmocka_unit_test(test_parse_accepts_the_valid_base),
                cmocka_unit_test(test_parse_empty_data_is_empty_tree),
                cmocka_unit_test(test_parse_rejects_truncated_id),
                cmocka_unit_test(test_parse_rejects_missing_nul),
                cmocka_unit_test(test_parse_rejects_trailing_garbage),
                cmocka_unit_test(test_parse_rejects_bad_modes),
                cmocka_unit_test(test_parse_rejects_numbers_out_of_form),
                cmocka_unit_test(test_parse_rejects_unsorted_names),
                cmocka_unit_test(test_parse_rejects_duplicate_names),
                cmocka_unit_test(test_parse_rejects_bad_names),
                cmocka_unit_test(test_entry_name_valid),
                cmocka_unit_test(test_mode_valid),
                cmocka_unit_test(test_tree_id_independent_of_insertion_order),
                cmocka_unit_test(test_tree_id_changes_with_any_field),
                cmocka_unit_test(test_empty_tree_id_is_sha256_of_nothing),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
