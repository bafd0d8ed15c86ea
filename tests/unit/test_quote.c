/* SPDX-License-Identifier: MIT */
/* Text for output (quote.h): one line per entry, nothing that drives a terminal. */
#include "helpers.h"
#include "quote.h"

static void expect(const char *in, lfs_quote_style style, const char *want) {
        char *got = lfs_quote(in, style);
        assert_msg(!strcmp(got, want), "quoting '%s' (style %d) gave '%s', expected '%s'", in, style, got,
                   want);
        free(got);
}

static void test_entries(void **state) {
        (void)state;
        expect("plain/path.txt", LFS_QUOTE_ENTRY, "plain/path.txt");
        expect("with space", LFS_QUOTE_ENTRY, "with space");
        expect("ünïcødé/日本.txt", LFS_QUOTE_ENTRY, "ünïcødé/日本.txt");
        expect("harmless\nD a.txt", LFS_QUOTE_ENTRY, "\"harmless\\nD a.txt\"");
        expect("osc\033]0;pwned\a.txt", LFS_QUOTE_ENTRY, "\"osc\\033]0;pwned\\a.txt\"");
        expect("tab\there\r\b\v\f", LFS_QUOTE_ENTRY, "\"tab\\there\\r\\b\\v\\f\"");
        expect("del\x7f", LFS_QUOTE_ENTRY, "\"del\\177\"");
        expect("c1\xc2\x9b"
               "31m",
               LFS_QUOTE_ENTRY, "\"c1\\302\\23331m\"");
        expect("not-utf8\xff\xfe", LFS_QUOTE_ENTRY, "\"not-utf8\\377\\376\"");
        expect("rlo\xe2\x80\xaegnp.exe", LFS_QUOTE_ENTRY, "\"rlo\\342\\200\\256gnp.exe\"");
        expect("line\xe2\x80\xa8sep", LFS_QUOTE_ENTRY, "\"line\\342\\200\\250sep\"");
        /* A quote or backslash is escaped, so that "x" printed plain cannot be mistaken for
         * a quoted entry. */
        expect("say \"hi\"", LFS_QUOTE_ENTRY, "\"say \\\"hi\\\"\"");
        expect("back\\slash", LFS_QUOTE_ENTRY, "\"back\\\\slash\"");
        expect("", LFS_QUOTE_ENTRY, "");
        expect(NULL, LFS_QUOTE_ENTRY, "");
}

static void test_messages(void **state) {
        (void)state;
        expect("cwd 'x\033]0;y\ay' leads outside", LFS_QUOTE_INLINE, "cwd 'x\\033]0;y\\ay' leads outside");
        expect("a \"quoted\" C:\\path", LFS_QUOTE_INLINE, "a \"quoted\" C:\\path");
        expect("two\nlines", LFS_QUOTE_INLINE, "two\\nlines");
        expect("subject\n\n\tbody \033[2J", LFS_QUOTE_LINES, "subject\n\n\tbody \\033[2J");
}

static void test_json(void **state) {
        (void)state;
        expect("{\"comm\":\"c1\xc2\x9b"
               "31m\x7f\",\"x\":\"\\u001b\"}",
               LFS_QUOTE_JSON, "{\"comm\":\"c1\\u009b31m\\u007f\",\"x\":\"\\u001b\"}");
        expect("{\"name\":\"日本\\n\"}", LFS_QUOTE_JSON, "{\"name\":\"日本\\n\"}");
        expect("{\"x\":\"\xe2\x80\xae\"}", LFS_QUOTE_JSON, "{\"x\":\"\\u202e\"}");
}

/* No input, however hostile, gives output with a raw control character or an unescaped
 * C1 or override: every byte string of length 1 and 2, and random ones. */
static void test_no_raw_controls(void **state) {
        (void)state;
        unsigned seed = 12;
        for (int round = 0; round < 20000; round++) {
                unsigned char in[8];
                size_t n = round < 256 ? 1 : 1 + (size_t)(rand_r(&seed) % 7);
                for (size_t i = 0; i < n; i++)
                        in[i] = round < 256 ? (unsigned char)round : (unsigned char)(rand_r(&seed) % 256);
                in[n] = 0;
                if (!in[0])
                        continue;
                for (int style = LFS_QUOTE_ENTRY; style <= LFS_QUOTE_LINES; style++) {
                        char *out = lfs_quote((const char *)in, (lfs_quote_style)style);
                        for (const unsigned char *p = (const unsigned char *)out; *p; p++) {
                                bool allowed_ws = style == LFS_QUOTE_LINES && (*p == '\n' || *p == '\t');
                                assert_msg(*p >= 0x20 || allowed_ws, "raw control 0x%02x in '%s'", *p, out);
                                assert_msg(*p != 0x7f, "raw DEL in '%s'", out);
                                assert_msg(!(p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f), "raw C1 in '%s'",
                                           out);
                        }
                        free(out);
                }
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_entries),
                cmocka_unit_test(test_messages),
                cmocka_unit_test(test_json),
                cmocka_unit_test(test_no_raw_controls),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
