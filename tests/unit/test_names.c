/* SPDX-License-Identifier: MIT */
/* What a project (SPEC 1: [a-z0-9][a-z0-9._-]{0,62}) or a branch may be called. */
#include "helpers.h"
#include "store.h"

typedef int (*name_check_fn)(const char *name, lfs_error **err);

static void assert_accepted(name_check_fn check, const char *kind, const char *name) {
        lfs_error *err = NULL;
        int r = check(name, &err);
        assert_msg(r == 0 && !err, "%s name '%s' was refused: %s", kind, name,
                   err ? err->message : "(no error)");
}

/* Refused with InvalidInput, and the message quotes the value so a user sees which. */
static void assert_refused(name_check_fn check, const char *kind, const char *name) {
        lfs_error *err = NULL;
        int r = check(name, &err);
        assert_msg(r < 0, "%s name '%s' was accepted", kind, name ? name : "(null)");
        assert_msg(err != NULL, "%s name '%s': no error set", kind, name);
        assert_msg(err->code == LFS_INVALID_INPUT, "%s name '%s': code %s, expected InvalidInput", kind,
                   name, lfs_code_name(err->code));
        char quoted[512];
        snprintf(quoted, sizeof(quoted), "'%s'", name ? name : "");
        assert_msg(strstr(err->message, quoted) != NULL, "the message for '%s' does not name it: %s", name,
                   err->message);
        lfs_error_free(err);
        /* Without err the result is the same: callers may only ask. */
        assert_true(check(name, NULL) < 0);
}

static char *repeat(char c, size_t n) {
        char *s = malloc(n + 1);
        assert_non_null(s);
        memset(s, c, n);
        s[n] = 0;
        return s;
}

static void test_project_names_accepted(void **state) {
        (void)state;
        static const char *const ok[] = {
                "a",      "0",  "web", "my-project", "my_project", "v1.2",
                "9lives", "a-", "a.",  "a_",         "a..b",       "x-y.z_0",
        };
        for (size_t i = 0; i < COUNT_OF(ok); i++)
                assert_accepted(lfs_check_project_name, "project", ok[i]);
}

static void test_project_names_refused(void **state) {
        (void)state;
        static const char *const bad[] = {
                "",     "-a",  ".a",  "_a",          "A",    "Web",  "webApp", "a b", "a/b",
                "a\\b", "a:b", "a@b", "caf\xc3\xa9", "a\tb", "a\nb", "..",     ".",
        };
        for (size_t i = 0; i < COUNT_OF(bad); i++)
                assert_refused(lfs_check_project_name, "project", bad[i]);
}

static void test_project_name_length_limit(void **state) {
        (void)state;
        char *max = repeat('a', 63), *over = repeat('a', 64);
        assert_accepted(lfs_check_project_name, "project", max);
        assert_refused(lfs_check_project_name, "project", over);
        free(max);
        free(over);
}

static void test_project_name_null_refused(void **state) {
        (void)state;
        lfs_error *err = NULL;
        assert_true(lfs_check_project_name(NULL, &err) < 0);
        assert_non_null(err);
        assert_int_equal(err->code, LFS_INVALID_INPUT);
        lfs_error_free(err);
}

static void test_branch_names_accepted(void **state) {
        (void)state;
        static const char *const ok[] = {
                "main", "feature/x", "v1.2",    "Feature", "a",  "a-b_c.d", "user/a/b",
                "0",    "release/1", "x.y/z.w", "a..b",    "a-", "UPPER",   "beef",
        };
        for (size_t i = 0; i < COUNT_OF(ok); i++)
                assert_accepted(lfs_check_branch_name, "branch", ok[i]);
}

static void test_branch_names_refused(void **state) {
        (void)state;
        static const char *const bad[] = {
                "",    "-x",  "a//b", "a/",     "/a",          ".hidden", "a/.b", "a.",  "a/b.",
                "/",   ".",   "..",   "a/../b", "a b",         "a~b",     "a^b",  "a:b", "a?b",
                "a*b", "a[b", "a\\b", "a@{b",   "caf\xc3\xa9", "a\tb",    "a\nb",
        };
        for (size_t i = 0; i < COUNT_OF(bad); i++)
                assert_refused(lfs_check_branch_name, "branch", bad[i]);
}

static void test_branch_name_length_limit(void **state) {
        (void)state;
        char *max = repeat('b', 200), *over = repeat('b', 201);
        assert_accepted(lfs_check_branch_name, "branch", max);
        assert_refused(lfs_check_branch_name, "branch", over);
        /* The limit is on the whole name, not a component. */
        char *parts = repeat('c', 201);
        for (size_t i = 10; i < 200; i += 10)
                parts[i] = '/';
        assert_refused(lfs_check_branch_name, "branch", parts);
        parts[200] = 0;
        assert_accepted(lfs_check_branch_name, "branch", parts);
        free(max);
        free(over);
        free(parts);
}

static void test_branch_name_null_refused(void **state) {
        (void)state;
        lfs_error *err = NULL;
        assert_true(lfs_check_branch_name(NULL, &err) < 0);
        assert_non_null(err);
        assert_int_equal(err->code, LFS_INVALID_INPUT);
        lfs_error_free(err);
}

/* A branch as one directory name: the daemon's mount points and branch delete's look
 * for them must agree, and no two branches may share one. */
static void test_branch_dir_names(void **state) {
        (void)state;
        char *k = lfs_branch_dir_name("feature/x%y");
        assert_string_equal(k, "feature%2Fx%25y");
        free(k);
        char longest[201];
        memset(longest, 'a', 200);
        longest[200] = 0;
        for (int i = 1; i < 199; i += 2)
                longest[i] = '/';
        char *a = lfs_branch_dir_name(longest);
        longest[198] = 'b';
        char *b = lfs_branch_dir_name(longest);
        assert_true(strlen(a) <= NAME_MAX && strlen(b) <= NAME_MAX);
        assert_non_null(strstr(a, "%~"));
        assert_string_not_equal(a, b);
        free(a);
        free(b);
}

static void test_error_keeps_the_first_failure(void **state) {
        (void)state;
        /* A second failure must not overwrite or leak the first error. */
        lfs_error *err = NULL;
        assert_true(lfs_check_branch_name("-first", &err) < 0);
        assert_true(lfs_check_project_name("Second", &err) < 0);
        assert_non_null(strstr(err->message, "'-first'"));
        lfs_error_free(err);
}

static void test_code_names(void **state) {
        (void)state;
        /* SPEC 6 spells them so; the CLI prints them first. */
        assert_string_equal(lfs_code_name(LFS_INVALID_INPUT), "InvalidInput");
        assert_string_equal(lfs_code_name(LFS_NO_SUCH_PROJECT), "NoSuchProject");
        assert_string_equal(lfs_code_name(LFS_NO_SUCH_BRANCH), "NoSuchBranch");
        assert_string_equal(lfs_code_name(LFS_BUSY), "Busy");
        assert_string_equal(lfs_code_name(LFS_CONFLICT), "Conflict");
        assert_string_equal(lfs_code_name(LFS_FAILED), "Failed");
        assert_string_equal(lfs_code_name((lfs_code)999), "Failed");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_project_names_accepted),
                cmocka_unit_test(test_project_names_refused),
                cmocka_unit_test(test_project_name_length_limit),
                cmocka_unit_test(test_project_name_null_refused),
                cmocka_unit_test(test_branch_names_accepted),
                cmocka_unit_test(test_branch_names_refused),
                cmocka_unit_test(test_branch_name_length_limit),
                cmocka_unit_test(test_branch_name_null_refused),
                cmocka_unit_test(test_branch_dir_names),
                cmocka_unit_test(test_error_keeps_the_first_failure),
                cmocka_unit_test(test_code_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
