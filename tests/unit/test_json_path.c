/* SPDX-License-Identifier: MIT */
/* Paths in JSON: UTF-8 as it is, anything else shown lossy and kept exact in hex. */
#include "helpers.h"
#include "json_path.h"

static void test_utf8_validity(void **state) {
        (void)state;
        const char *valid[] = { "",
                                "plain",
                                "ünïcødé",
                                "\xe2\x82\xac",
                                "\xf0\x9f\x98\x80",
                                "\xf4\x8f\xbf\xbf",
                                "\xed\x9f\xbf" };
        for (size_t i = 0; i < sizeof(valid) / sizeof(*valid); i++)
                assert_msg(lfs_is_utf8(valid[i]), "'%s' is UTF-8", valid[i]);
        /* A lone continuation byte, a bad lead byte, overlong forms, a surrogate, past
         * U+10FFFF, and sequences cut short (also by the end of the string). */
        const char *invalid[] = {
                "\x80",         "a\xffz",           "\xc0\xaf", "\xe0\x80\xaf", "\xf0\x80\x80\xaf",
                "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe2\x82", "\xe2\x82z",    "\xf0\x9f\x98"
        };
        for (size_t i = 0; i < sizeof(invalid) / sizeof(*invalid); i++)
                assert_msg(!lfs_is_utf8(invalid[i]), "invalid sequence %zu taken as UTF-8", i);
}

static void test_lossy_text(void **state) {
        (void)state;
        json_t *j = lfs_json_path("bad\xffname\xe2\x82");
        assert_non_null(j);
        assert_string_equal(json_string_value(j), "bad\xef\xbf\xbdname\xef\xbf\xbd\xef\xbf\xbd");
        json_decref(j);
        j = lfs_json_path("fine/ünï");
        assert_string_equal(json_string_value(j), "fine/ünï");
        json_decref(j);
}

static void assert_round_trip(const char *path, bool expect_bytes) {
        json_t *obj = json_object();
        lfs_json_set_path(obj, "path", path);
        assert_non_null(json_string_value(json_object_get(obj, "path")));
        assert_int_equal(json_object_get(obj, "path_bytes") != NULL, expect_bytes);
        /* Through text and back, as the daemon and the library exchange it. */
        char *text = json_dumps(obj, JSON_COMPACT);
        json_decref(obj);
        obj = json_loads(text, 0, NULL);
        free(text);
        char *back = lfs_json_get_path(obj, "path");
        assert_non_null(back);
        assert_string_equal(back, path);
        free(back);
        json_decref(obj);
}

static void test_exact_bytes_round_trip(void **state) {
        (void)state;
        assert_round_trip("dir/plain.txt", false);
        assert_round_trip("dir/ünïcødé", false);
        assert_round_trip("dir/bad\xffname", true);
        assert_round_trip("\x80\x81\xfe", true);
        json_t *obj = json_object();
        assert_null(lfs_json_get_path(obj, "path"));
        json_object_set_new(obj, "path_bytes", json_string("6x"));
        assert_null(lfs_json_get_path(obj, "path")); /* not hex: refused, not guessed */
        json_decref(obj);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_utf8_validity),
                cmocka_unit_test(test_lossy_text),
                cmocka_unit_test(test_exact_bytes_round_trip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
