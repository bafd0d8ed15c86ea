/* SPDX-License-Identifier: MIT */
/* Sizes in settings (LAYERFS_WORKSPACE_MEMORY): digits with an optional K, M, G or T. */
#include "helpers.h"
#include "numbers.h"

static void test_sizes_accepted(void **state) {
        (void)state;
        static const struct {
                const char *text;
                uint64_t bytes;
        } cases[] = {
                { "1", 1 },
                { "4096", 4096 },
                { "4K", 4096 },
                { "512M", 512ull << 20 },
                { "1G", 1ull << 30 },
                { "2T", 2ull << 40 },
                { "18446744073709551615", UINT64_MAX },
                { "16777215T", 16777215ull << 40 },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint64_t bytes = 0;
                int r = lfs_parse_size("size", cases[i].text, &bytes, NULL);
                assert_msg(r == 0, "'%s' was refused (%d)", cases[i].text, r);
                assert_msg(bytes == cases[i].bytes, "'%s' read as %llu", cases[i].text,
                           (unsigned long long)bytes);
        }
}

static void test_sizes_refused(void **state) {
        (void)state;
        static const char *invalid[] = { "",   "0",    "0K", "-1",   "+1",  " 1",  "1 ",  "1k", "1KB",
                                         "1P", "1.5G", "G",  "0x10", "1e3", "inf", "nan", "1KM" };
        for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
                uint64_t bytes = 7;
                assert_msg(lfs_parse_size("size", invalid[i], &bytes, NULL) == -EINVAL,
                           "'%s' was not refused", invalid[i]);
                assert_msg(bytes == 7, "'%s' changed the output though refused", invalid[i]);
        }
        uint64_t bytes = 7;
        assert_int_equal(lfs_parse_size("size", NULL, &bytes, NULL), -EINVAL);
        assert_int_equal(lfs_parse_size("size", "18446744073709551616", &bytes, NULL), -ERANGE);
        assert_int_equal(lfs_parse_size("size", "16777216T", &bytes, NULL), -ERANGE);
        assert_int_equal(bytes, 7);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sizes_accepted),
                cmocka_unit_test(test_sizes_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
