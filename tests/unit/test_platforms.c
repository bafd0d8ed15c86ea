/* SPDX-License-Identifier: MIT */
/* backends/platforms.c: the table of the eight platforms, placements, what a home allows,
 * the read-time default of old records, and each refusal of SPEC 5. */
#include "helpers.h"
#include "platforms.h"
#include "util.h"

static int clean_env(void **state) {
        (void)state;
        unsetenv("LAYERFS_PLACEMENT");
        unsetenv("LAYERFS_SANDBOX");
        unsetenv("LAYERFS_RUNTIME");
        return 0;
}

static void assert_refusal(lfs_code code, const char *requested, const char *const *must_contain) {
        const lfs_platform *p = NULL;
        lfs_error *err = NULL;
        assert_true(lfs_platform_choose("/h", requested, &p, &err) < 0);
        assert_non_null(err);
        assert_msg(err->code == code, "'%s': %s, expected %s", requested ? requested : "(default)",
                   lfs_code_name(err->code), lfs_code_name(code));
        for (size_t i = 0; must_contain[i]; i++)
                assert_msg(strstr(err->message, must_contain[i]), "'%s': the message lacks '%s': %s",
                           requested ? requested : "(default)", must_contain[i], err->message);
        assert_null(p);
        lfs_error_free(err);
}

static void test_the_eight_in_order(void **state) {
        (void)state;
        static const char *const ids[] = { "linux", "docker", "podman", "firecracker",
                                           "qemu",  "lima",   "mac",    "wsl" };
        static const char *const runtimes[] = { "native", "docker", "docker", "vm", "vm", "vm", "vm", "vm" };
        assert_int_equal(lfs_n_platforms, 8);
        for (size_t i = 0; i < 8; i++) {
                assert_string_equal(lfs_platforms[i].id, ids[i]);
                assert_string_equal(lfs_platforms[i].runtime->name, runtimes[i]);
                assert_ptr_equal(lfs_platform_find(ids[i]), &lfs_platforms[i]);
        }
        assert_int_equal(lfs_platforms[0].family, LFS_FAMILY_LINUX);
        assert_int_equal(lfs_platforms[1].family, LFS_FAMILY_CONTAINER);
        assert_int_equal(lfs_platforms[7].family, LFS_FAMILY_VM);
        assert_string_equal(lfs_platform_names(),
                            "linux, docker, podman, firecracker, qemu, lima, mac, wsl");
}

static void test_find_is_exact(void **state) {
        (void)state;
        static const char *const not_names[] = { "Linux", "LINUX",  "native", "namespaces",
                                                 "",      "linux ", "dockr",  "windows" };
        for (size_t i = 0; i < ELEMENTSOF(not_names); i++)
                assert_null(lfs_platform_find(not_names[i]));
        assert_null(lfs_platform_find(NULL));
}

static void test_placements(void **state) {
        (void)state;
        const char *placement = NULL;
        assert_int_equal(lfs_placement(&placement, NULL), 0);
        assert_string_equal(placement, "host");
        static const char *const routes[] = { "firecracker", "qemu", "lima", "mac", "wsl", "host" };
        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                setenv("LAYERFS_PLACEMENT", routes[i], 1);
                assert_int_equal(lfs_placement(&placement, NULL), 0);
                assert_string_equal(placement, routes[i]);
        }
        static const char *const bad[] = { "linux", "docker", "podman", "HOST", "vm" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                lfs_error *err = NULL;
                setenv("LAYERFS_PLACEMENT", bad[i], 1);
                assert_true(lfs_placement(&placement, &err) < 0);
                assert_int_equal(err->code, LFS_INVALID_INPUT);
                assert_msg(strstr(err->message, bad[i]), "the message names '%s': %s", bad[i], err->message);
                lfs_error_free(err);
        }
}

static void test_what_each_placement_allows(void **state) {
        (void)state;
        _cleanup_free_ char *host = lfs_allowed_names("host"), *qemu = lfs_allowed_names("qemu"),
                            *wsl = lfs_allowed_names("wsl");
        assert_string_equal(host, "linux, docker, podman");
        assert_string_equal(qemu, "docker, podman, qemu");
        assert_string_equal(wsl, "docker, podman, wsl");
}

/* Every row has a runtime with every operation: the library and the daemon call them
 * without looking. */
static void test_every_row_has_a_whole_runtime(void **state) {
        (void)state;
        for (size_t i = 0; i < lfs_n_platforms; i++) {
                const lfs_runtime *rt = lfs_platforms[i].runtime;
                const char *id = lfs_platforms[i].id;
                assert_msg(rt != NULL, "platform '%s' has no runtime", id);
                assert_msg(rt->name && rt->probe && rt->prepare && rt->check_limits && rt->reach &&
                                   rt->create && rt->spawn && rt->open_terminal && rt->end_command &&
                                   rt->command_done && rt->list && rt->signal && rt->teardown && rt->reclaim,
                           "platform '%s': its runtime '%s' lacks an operation", id,
                           rt->name ? rt->name : "?");
        }
        assert_ptr_equal(lfs_platforms[0].runtime, &lfs_runtime_native);
}

/* A platform whose runtime is not in this build answers Unsupported through the same
 * table: prepare and reach with today's messages, the daemon's operations with
 * -EOPNOTSUPP (spawn's error Unsupported too), and its readiness names what is missing. */
static void test_an_unbuilt_runtime_is_unsupported(void **state) {
        (void)state;
        static const char *const missing[] = {
                NULL,         "backend:docker", "backend:podman", "route:firecracker",
                "route:qemu", "route:lima",     "route:mac",      "route:wsl"
        };
        lfs_sandbox_ref sb = { .home = "/h", .project = "p", .number = 3, .dir = "/h/sandboxes/p-3" };
        for (size_t i = 1; i < lfs_n_platforms; i++) {
                const lfs_platform *p = &lfs_platforms[i];
                const lfs_runtime *rt = p->runtime;
                lfs_error *err = NULL;
                char *root = NULL, *why = NULL;
                assert_true(rt->prepare(p, &root, &err) < 0);
                assert_int_equal(err->code, LFS_UNSUPPORTED);
                _cleanup_free_ char *want = xasprintf("platform '%s' cannot be driven by this build", p->id);
                assert_string_equal(err->message, want);
                assert_null(root);
                lfs_error_free(err);
                err = NULL;
                assert_true(rt->reach(p, &sb, &err) < 0);
                assert_int_equal(err->code, LFS_UNSUPPORTED);
                _cleanup_free_ char *drive = xasprintf(
                        "sandbox 3 of project 'p' runs on platform '%s', which this build cannot drive",
                        p->id);
                assert_string_equal(err->message, drive);
                lfs_error_free(err);
                err = NULL;
                lfs_daemon_handle h;
                lfs_daemon_start start = { .exe = "/bin/false",
                                           .args = (const char *const[]){ NULL },
                                           .dir_fd = -1,
                                           .init_holds_fd = -1 };
                assert_true(rt->create(&sb, &start, &h, &err) < 0);
                assert_int_equal(err->code, LFS_UNSUPPORTED);
                lfs_error_free(err);
                err = NULL;
                pid_t pid;
                int pidfd;
                lfs_command_spec spec = { .name = "cmd-1" };
                assert_int_equal(rt->spawn(&sb, &spec, &pid, &pidfd, &err), -EOPNOTSUPP);
                assert_int_equal(err->code, LFS_UNSUPPORTED);
                lfs_error_free(err);
                err = NULL;
                assert_int_equal(rt->open_terminal(&sb), -EOPNOTSUPP);
                assert_int_equal(rt->signal(&sb, getpid(), 0), -EOPNOTSUPP);
                assert_int_equal(rt->end_command(&sb, "cmd-1", 0), -EOPNOTSUPP);
                assert_int_equal(rt->reclaim(&sb, &why), -EOPNOTSUPP);
                assert_non_null(why);
                free(why);
                lfs_missing m = { 0 };
                lfs_platform_missing(p, &m);
                assert_true(m.n >= 1);
                assert_string_equal(m.names[m.n - 1], missing[i]);
        }
        /* Native's reach lets calls through; its probe names only what this host lacks. */
        assert_int_equal(lfs_runtime_native.reach(&lfs_platforms[0], &sb, NULL), 0);
}

/* linux has two runtimes, each whole; a new Sandbox's is LAYERFS_RUNTIME's, else
 * LAYERFS_SANDBOX's, else the preferred one (namespaces) with native to fall back on; a
 * record's is the one it names. */
static void test_linux_has_two_runtimes(void **state) {
        (void)state;
        const lfs_platform *linux_p = lfs_platform_find("linux"), *docker = lfs_platform_find("docker");
        const lfs_runtime *ns = &lfs_runtime_namespaces;
        assert_true(ns->probe && ns->prepare && ns->reach && ns->create && ns->spawn && ns->open_terminal &&
                    ns->end_command && ns->command_done && ns->list && ns->signal && ns->teardown &&
                    ns->reclaim);
        assert_string_equal(ns->name, "namespaces");
        assert_ptr_equal(linux_p->preferred, ns);
        assert_null(docker->preferred);
        assert_ptr_equal(lfs_platform_runtime(linux_p, "namespaces"), ns);
        assert_ptr_equal(lfs_platform_runtime(linux_p, "native"), &lfs_runtime_native);
        assert_ptr_equal(lfs_platform_runtime(linux_p, NULL), &lfs_runtime_native);
        assert_null(lfs_platform_runtime(linux_p, "docker"));
        assert_null(lfs_platform_runtime(docker, "namespaces"));
        const lfs_runtime *rt = NULL, *fallback = NULL;
        lfs_error *err = NULL;
        unsetenv("LAYERFS_RUNTIME");
        unsetenv("LAYERFS_SANDBOX");
        assert_int_equal(lfs_platform_new_runtime(linux_p, &rt, &fallback, &err), 0);
        assert_ptr_equal(rt, ns);
        assert_ptr_equal(fallback, &lfs_runtime_native);
        setenv("LAYERFS_SANDBOX", "docker", 1); /* a platform: linux chooses as if unset */
        assert_int_equal(lfs_platform_new_runtime(linux_p, &rt, &fallback, &err), 0);
        assert_ptr_equal(rt, ns);
        assert_ptr_equal(fallback, &lfs_runtime_native);
        setenv("LAYERFS_SANDBOX", "native", 1);
        assert_int_equal(lfs_platform_new_runtime(linux_p, &rt, &fallback, &err), 0);
        assert_ptr_equal(rt, &lfs_runtime_native);
        assert_null(fallback);
        setenv("LAYERFS_SANDBOX", "namespaces", 1);
        assert_int_equal(lfs_platform_new_runtime(linux_p, &rt, &fallback, &err), 0);
        assert_ptr_equal(rt, ns);
        assert_null(fallback);
        setenv("LAYERFS_RUNTIME", "native", 1);
        assert_int_equal(lfs_platform_new_runtime(linux_p, &rt, &fallback, &err), 0);
        assert_ptr_equal(rt, &lfs_runtime_native);
        assert_null(fallback);
        unsetenv("LAYERFS_SANDBOX");
        setenv("LAYERFS_RUNTIME", "namespaces", 1);
        assert_int_equal(lfs_platform_new_runtime(linux_p, &rt, &fallback, &err), 0);
        assert_ptr_equal(rt, ns);
        assert_null(fallback);
        assert_int_equal(lfs_platform_new_runtime(docker, &rt, &fallback, &err), 0);
        assert_ptr_equal(rt, docker->runtime);
        assert_null(fallback);
        static const char *const bad[] = { "", "docker", "Namespaces", "vm" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                setenv("LAYERFS_RUNTIME", bad[i], 1);
                rt = NULL;
                assert_true(lfs_platform_new_runtime(linux_p, &rt, &fallback, &err) < 0);
                assert_int_equal(err->code, LFS_INVALID_INPUT);
                _cleanup_free_ char *want = xasprintf("LAYERFS_RUNTIME='%s' is not a runtime", bad[i]);
                assert_msg(strstr(err->message, want), "%s", err->message);
                assert_null(rt);
                lfs_error_free(err);
                err = NULL;
        }
}

static void test_old_records_read_as_their_runtime_implies(void **state) {
        (void)state;
        assert_string_equal(lfs_record_platform(NULL, "native", "host"), "linux");
        assert_string_equal(lfs_record_platform(NULL, "namespaces", "host"), "linux");
        assert_string_equal(lfs_record_platform("", "native", "host"), "linux");
        assert_string_equal(lfs_record_platform(NULL, "docker", "host"), "docker");
        assert_string_equal(lfs_record_platform(NULL, "vm", "lima"), "lima");
        /* A recorded platform is what it says. */
        assert_string_equal(lfs_record_platform("podman", "docker", "host"), "podman");
}

static void test_unknown_names_are_invalid_input(void **state) {
        (void)state;
        static const char *const bad[] = { "windows", "native", "namespaces", "", "Linux", "dockr" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                const char *want[] = { "unknown platform",
                                       "linux, docker, podman, firecracker, qemu, lima, mac, wsl", NULL };
                assert_refusal(LFS_INVALID_INPUT, bad[i], want);
        }
}

static void test_a_route_on_a_host_home_is_unsupported(void **state) {
        (void)state;
        const char *want[] = { "platform 'qemu' is not allowed", "home /h", "placement host",
                               "allows linux, docker, podman", NULL };
        assert_refusal(LFS_UNSUPPORTED, "qemu", want);
}

static void test_linux_on_a_vm_home_is_unsupported(void **state) {
        (void)state;
        setenv("LAYERFS_PLACEMENT", "lima", 1);
        const char *want[] = { "platform 'linux' is not allowed", "placement lima",
                               "allows docker, podman, lima", NULL };
        assert_refusal(LFS_UNSUPPORTED, "linux", want);
        assert_refusal(LFS_UNSUPPORTED, NULL, want); /* the default is linux */
}

static void test_an_allowed_platform_not_ready_is_unsupported(void **state) {
        (void)state;
        const char *want[] = { "platform 'docker' is not ready", "missing", "backend:docker", NULL };
        assert_refusal(LFS_UNSUPPORTED, "docker", want);
        setenv("LAYERFS_PLACEMENT", "mac", 1);
        const char *mac[] = { "platform 'mac' is not ready", "host:macos", "route:mac", NULL };
        assert_refusal(LFS_UNSUPPORTED, "mac", mac);
}

static void test_the_home_default_follows_layerfs_sandbox(void **state) {
        (void)state;
        setenv("LAYERFS_SANDBOX", "docker", 1);
        const char *want[] = { "platform 'docker'", NULL };
        assert_refusal(LFS_UNSUPPORTED, NULL, want);
        if (geteuid() == 0) { /* linux is ready here only as root */
                const lfs_platform *p = NULL;
                setenv("LAYERFS_SANDBOX", "native", 1);
                assert_int_equal(lfs_platform_choose("/h", NULL, &p, NULL), 0);
                assert_string_equal(p->id, "linux");
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_the_eight_in_order, clean_env, clean_env),
                cmocka_unit_test_setup_teardown(test_find_is_exact, clean_env, clean_env),
                cmocka_unit_test_setup_teardown(test_every_row_has_a_whole_runtime, clean_env, clean_env),
                cmocka_unit_test_setup_teardown(test_an_unbuilt_runtime_is_unsupported, clean_env,
                                                clean_env),
                cmocka_unit_test_setup_teardown(test_linux_has_two_runtimes, clean_env, clean_env),
                cmocka_unit_test_setup_teardown(test_placements, clean_env, clean_env),
                cmocka_unit_test_setup_teardown(test_what_each_placement_allows, clean_env, clean_env),
                cmocka_unit_test_setup_teardown(test_old_records_read_as_their_runtime_implies, clean_env,
                                                clean_env),
                cmocka_unit_test_setup_teardown(test_unknown_names_are_invalid_input, clean_env, clean_env),
                cmocka_unit_test_setup_teardown(test_a_route_on_a_host_home_is_unsupported, clean_env,
                                                clean_env),
                cmocka_unit_test_setup_teardown(test_linux_on_a_vm_home_is_unsupported, clean_env,
                                                clean_env),
                cmocka_unit_test_setup_teardown(test_an_allowed_platform_not_ready_is_unsupported, clean_env,
                                                clean_env),
                cmocka_unit_test_setup_teardown(test_the_home_default_follows_layerfs_sandbox, clean_env,
                                                clean_env),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
