/* SPDX-License-Identifier: MIT */
/* Numbers from people, the environment and calls (numbers.h): digits only, finite, in
 * range; a refusal names the value and the range. */
#include "helpers.h"
#include "numbers.h"

static void assert_refused_naming(int r, lfs_error *err, const char *value, const char *range) {
        assert_msg(r < 0, "'%s' was accepted", value);
        assert_msg(err && err->code == LFS_INVALID_INPUT, "'%s': not InvalidInput", value);
        assert_msg(strstr(err->message, value) != NULL, "the message does not name '%s': %s", value,
                   err->message);
        assert_msg(strstr(err->message, range) != NULL, "the message does not name the range %s: %s", range,
                   err->message);
}

static void test_whole_numbers(void **state) {
        (void)state;
        static const char *const bad[] = { "",    " 5",  "5 ",   "+5",  "-5",
                                           " -5", "5x",  "0x10", "1e3", "1.0",
                                           "inf", "nan", "0",    "11",  "18446744073709551616",
                                           "٣" };
        for (size_t i = 0; i < COUNT_OF(bad); i++) {
                lfs_error *err = NULL;
                uint64_t v = 77;
                int r = lfs_parse_whole("--limit", bad[i], 1, 10, &v, &err);
                assert_refused_naming(r, err, bad[i], "from 1 to 10");
                assert_int_equal(v, 77); /* ret_ untouched on failure */
                lfs_error_free(err);
        }
        uint64_t v = 0;
        assert_int_equal(lfs_parse_whole("x", "10", 1, 10, &v, NULL), 0);
        assert_int_equal(v, 10);
        assert_int_equal(lfs_parse_whole("x", "007", 1, 10, &v, NULL), 0);
        assert_int_equal(v, 7);
        assert_int_equal(lfs_parse_whole("x", "18446744073709551615", 0, UINT64_MAX, &v, NULL), 0);
        assert_true(v == UINT64_MAX);
}

static void test_seconds(void **state) {
        (void)state;
        static const char *const bad[] = { "",   "inf", "-inf", "nan", "NaN",  "1e30", "1e400",
                                           "-1", "-0",  " 5",   "5 ",  "0x10", "5s",   "e5",
                                           ".",  "1e",  "1e+",  "121", "+5",   "1,5",  "0.0001" };
        for (size_t i = 0; i < COUNT_OF(bad); i++) {
                lfs_error *err = NULL;
                double v = 77;
                int r = lfs_parse_seconds("LAYERFS_IDLE_SECONDS", bad[i], 0.001, 120, &v, &err);
                assert_refused_naming(r, err, bad[i], "from 0.001 to 120");
                assert_true(v == 77);
                lfs_error_free(err);
        }
        static const struct {
                const char *text;
                double value;
        } good[] = { { "120", 120 }, { "0.5", 0.5 },     { ".5", 0.5 },     { "5.", 5 },
                     { "1e2", 100 }, { "2.5E-1", 0.25 }, { "0.001", 0.001 } };
        for (size_t i = 0; i < COUNT_OF(good); i++) {
                double v = 0;
                assert_msg(lfs_parse_seconds("x", good[i].text, 0.001, 120, &v, NULL) == 0, "'%s' refused",
                           good[i].text);
                assert_true(v == good[i].value);
        }
}

static void test_json_numbers(void **state) {
        (void)state;
        json_t *bad[] = { json_integer(4294967297LL), json_integer(0),  json_integer(-1), json_real(1.5),
                          json_real(1000.0),          json_string("5"), json_true(),      json_null() };
        for (size_t i = 0; i < COUNT_OF(bad); i++) {
                lfs_error *err = NULL;
                long long v = 77;
                int r = lfs_json_whole("pid", bad[i], 1, LFS_MAX_PID, &v, &err);
                char *text = json_dumps(bad[i], JSON_ENCODE_ANY);
                assert_refused_naming(r, err, text, "from 1 to 2147483647");
                assert_int_equal(v, 77);
                free(text);
                lfs_error_free(err);
                json_decref(bad[i]);
        }
        lfs_error *err = NULL;
        long long v = 0;
        assert_true(lfs_json_whole("pid", NULL, 1, 5, &v, &err) < 0 && strstr(err->message, "missing"));
        lfs_error_free(err);
        json_t *pid = json_integer(LFS_MAX_PID);
        assert_int_equal(lfs_json_whole("pid", pid, 1, LFS_MAX_PID, &v, NULL), 0);
        assert_int_equal(v, LFS_MAX_PID);
        json_decref(pid);
        double t = 0;
        json_t *timeouts[] = { json_real(-0.5), json_real(2e9), json_string("5"), json_false() };
        for (size_t i = 0; i < COUNT_OF(timeouts); i++) {
                err = NULL;
                assert_true(lfs_json_seconds("timeout", timeouts[i], 0, LFS_MAX_TIMEOUT_SECONDS, &t, &err) <
                            0);
                assert_true(err && strstr(err->message, "from 0 to 1000000000"));
                lfs_error_free(err);
                json_decref(timeouts[i]);
        }
        json_t *five = json_integer(5);
        assert_int_equal(lfs_json_seconds("timeout", five, 0, 10, &t, NULL), 0);
        assert_true(t == 5);
        json_decref(five);
}

static void test_settings(void **state) {
        (void)state;
        uid_t uid = 0;
        gid_t gid = 0;
        double idle = 0;
        unsetenv("LAYERFS_COMMAND_UID");
        unsetenv("LAYERFS_COMMAND_GID");
        unsetenv("LAYERFS_IDLE_SECONDS");
        assert_int_equal(lfs_command_identity(&uid, &gid, NULL), 0);
        assert_int_equal(uid, 501);
        assert_int_equal(gid, 20);
        assert_int_equal(lfs_idle_seconds(&idle, NULL), 0);
        assert_true(idle == 120);
        /* Cut to 32 bits, these were root (0) and "no change" ((uid_t)-1, root kept). */
        static const char *const bad_ids[] = { "4294967296", "-1", "4294967295", "0", "501x", " 501" };
        for (size_t i = 0; i < COUNT_OF(bad_ids); i++) {
                lfs_error *err = NULL;
                setenv("LAYERFS_COMMAND_UID", bad_ids[i], 1);
                int r = lfs_command_identity(&uid, &gid, &err);
                assert_refused_naming(r, err, bad_ids[i], "from 1 to 4294967294");
                assert_true(strstr(err->message, "LAYERFS_COMMAND_UID") != NULL);
                lfs_error_free(err);
        }
        setenv("LAYERFS_COMMAND_UID", "1000", 1);
        setenv("LAYERFS_COMMAND_GID", "1001", 1);
        assert_int_equal(lfs_command_identity(&uid, &gid, NULL), 0);
        assert_int_equal(uid, 1000);
        assert_int_equal(gid, 1001);
        unsetenv("LAYERFS_COMMAND_UID");
        unsetenv("LAYERFS_COMMAND_GID");
        static const char *const bad_idle[] = { "inf", "nan", "1e30", "0", "-1", "121" };
        for (size_t i = 0; i < COUNT_OF(bad_idle); i++) {
                lfs_error *err = NULL;
                setenv("LAYERFS_IDLE_SECONDS", bad_idle[i], 1);
                int r = lfs_idle_seconds(&idle, &err);
                assert_refused_naming(r, err, bad_idle[i], "from 0.001 to 120");
                lfs_error_free(err);
        }
        setenv("LAYERFS_IDLE_SECONDS", "", 1); /* empty: the default, as unset */
        assert_int_equal(lfs_idle_seconds(&idle, NULL), 0);
        assert_true(idle == 120);
        unsetenv("LAYERFS_IDLE_SECONDS");
}

/* A Sandbox's limits (lfs_parse_limits): each option's form and range, named in the
 * refusal with its value; nothing given is no limit. */
static void test_limits(void **state) {
        (void)state;
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        _cleanup_free_ char *too_many = xasprintf("%ld.5", online),
                            *cpus_range = xasprintf("from 0.01 to %ld", online);
        static const struct {
                lfs_sandbox_options o;
                const char *option, *value, *says;
        } bad[] = {
                { { .memory = "2X" }, "--memory", "2X", "not a size" },
                { { .memory = "0" }, "--memory", "0", "not a size" },
                { { .memory = "-1G" }, "--memory", "-1G", "not a size" },
                { { .memory = "1M" }, "--memory", "1M", "from 64M" },
                { { .memory = "99999999999T" }, "--memory", "99999999999T", "out of range" },
                { { .pids = "0" }, "--pids", "0", "from 64 to 4194304" },
                { { .pids = "63" }, "--pids", "63", "from 64 to 4194304" },
                { { .pids = "5x" }, "--pids", "5x", "from 64 to 4194304" },
                { { .pids = "4194305" }, "--pids", "4194305", "from 64 to 4194304" },
                { { .cpus = "0" }, "--cpus", "0", "number of CPUs" },
                { { .cpus = "0.001" }, "--cpus", "0.001", "number of CPUs" },
                { { .cpus = "nan" }, "--cpus", "nan", "number of CPUs" },
                { { .cpus = "1,5" }, "--cpus", "1,5", "number of CPUs" },
                { { .disk = "512K" }, "--disk", "512K", "from 1M" },
                { { .disk = "10Q" }, "--disk", "10Q", "not a size" },
                { { .memory = "1G", .disk = "" }, "--disk", "''", "not a size" },
        };
        for (size_t i = 0; i < COUNT_OF(bad); i++) {
                lfs_error *err = NULL;
                lfs_sandbox_limits l = { .pids = 77 };
                int r = lfs_parse_limits(&bad[i].o, &l, &err);
                assert_msg(r < 0 && err && err->code == LFS_INVALID_INPUT, "%s %s was accepted",
                           bad[i].option, bad[i].value);
                assert_msg(strstr(err->message, bad[i].option) && strstr(err->message, bad[i].value) &&
                                   strstr(err->message, bad[i].says),
                           "%s %s: %s", bad[i].option, bad[i].value, err->message);
                assert_int_equal(l.pids, 77); /* ret_ untouched on failure */
                lfs_error_free(err);
        }
        lfs_error *err = NULL;
        lfs_sandbox_options o = { .cpus = too_many };
        lfs_sandbox_limits l = { 0 };
        assert_true(lfs_parse_limits(&o, &l, &err) < 0);
        assert_msg(strstr(err->message, cpus_range) != NULL, "%s", err->message);
        lfs_error_free(err);
        o = (lfs_sandbox_options){ .memory = "2G", .pids = "512", .cpus = "0.5", .disk = "64M" };
        assert_int_equal(lfs_parse_limits(&o, &l, NULL), 0);
        assert_true(l.memory == 2ull << 30 && l.pids == 512 && l.cpus == 0.5 && l.disk == 64ull << 20);
        assert_int_equal(lfs_parse_limits(NULL, &l, NULL), 0);
        assert_true(l.memory == 0 && l.pids == 0 && l.cpus == 0 && l.disk == 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_whole_numbers), cmocka_unit_test(test_seconds),
                cmocka_unit_test(test_json_numbers),  cmocka_unit_test(test_settings),
                cmocka_unit_test(test_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
