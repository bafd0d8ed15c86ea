/* SPDX-License-Identifier: MIT */
/*
 * cgroup/seccomp.c, the namespaces runtime's filter, against the real kernel, as root: in a
 * child under the filter each call below is EPERM, and in a child without it the same
 * call as root gets the kernel's own answer (EFAULT, EBADF, ENOENT...: the capability
 * check passes). These are the calls that an unprivileged command would get EPERM for
 * anyway, which tests/adversarial/test_seccomp.sh cannot tell from the filter's. Needs
 * root; skipped otherwise. Every call fails either way: nothing changes on the host.
 */
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "helpers.h"
#include "seccomp.h"
#include "util.h"

#define BAD ((void *)1)

typedef struct probe {
        const char *name;
        long nr;
        long args[5];
        const char *sysctl; /* a switch that refuses the call to root too when 1 (NULL: none) */
} probe;

static const probe probes[] = {
        { "pivot_root", __NR_pivot_root, { 0, 0 }, NULL },
        { "move_mount", __NR_move_mount, { -1, 0, -1, 0, 0 }, NULL },
        { "fsopen", __NR_fsopen, { 0, 0 }, NULL },
        { "fsmount", __NR_fsmount, { -1, 0, 0 }, NULL },
        { "fspick", __NR_fspick, { -1, 0, 0 }, NULL },
        { "swapoff", __NR_swapoff, { (long)"/no/such/swap" }, NULL },
        { "reboot", __NR_reboot, { 0, 0, 0, 0 }, NULL }, /* EINVAL: no magic */
        { "acct", __NR_acct, { (long)"/no/such/file" }, NULL },
        { "syslog", __NR_syslog, { 10, 0, 0 }, NULL }, /* the log's size */
        { "delete_module",
          __NR_delete_module,
          { (long)"no_such_module", 0 },
          "/proc/sys/kernel/modules_disabled" },
        { "finit_module", __NR_finit_module, { -1, (long)"", 0 }, "/proc/sys/kernel/modules_disabled" },
        { "kexec_load", __NR_kexec_load, { 0, 0, 0, 0x7fff0000 }, "/proc/sys/kernel/kexec_load_disabled" },
};

/* Each probe's errno (0: it succeeded), in a child: under the filter or not. */
static void run_probes(bool filtered, int *ret_errnos) {
        int p[2];
        assert_int_equal(pipe(p), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(p[0]);
                if (filtered && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                                 lfs_seccomp_install(lfs_sandbox_seccomp()) < 0))
                        _exit(1);
                for (size_t i = 0; i < ELEMENTSOF(probes); i++) {
                        const long *a = probes[i].args;
                        int e = syscall(probes[i].nr, a[0], a[1], a[2], a[3], a[4]) < 0 ? errno : 0;
                        if (write(p[1], &e, sizeof(e)) != sizeof(e))
                                _exit(1);
                }
                _exit(0);
        }
        close(p[1]);
        size_t want = ELEMENTSOF(probes) * sizeof(int), got = 0;
        ssize_t k;
        while (got < want && (k = read(p[0], (char *)ret_errnos + got, want - got)) > 0)
                got += (size_t)k;
        close(p[0]);
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == want,
                   "the %s child failed (status %d, %zu of %zu bytes)", filtered ? "filtered" : "unfiltered",
                   status, got, want);
}

static bool switched_off(const char *sysctl) {
        _cleanup_fclose_ FILE *f = sysctl ? fopen(sysctl, "re") : NULL;
        int v = 0;
        return f && fscanf(f, "%d", &v) == 1 && v != 0;
}

static void test_the_filter_denies_what_root_could_call(void **state) {
        (void)state;
        if (geteuid() != 0)
                skip();
        assert_true(lfs_seccomp_available());
        int with[ELEMENTSOF(probes)], without[ELEMENTSOF(probes)];
        run_probes(true, with);
        run_probes(false, without);
        for (size_t i = 0; i < ELEMENTSOF(probes); i++) {
                assert_msg(with[i] == EPERM, "%s under the filter: %s, not EPERM", probes[i].name,
                           strerror(with[i]));
                assert_msg(without[i] != EPERM || switched_off(probes[i].sysctl),
                           "%s without the filter is EPERM for root too: the probe shows nothing",
                           probes[i].name);
        }
}

/* What the filter lets through, under it: a plain fork, the personality query. */
static void test_the_filter_lets_the_rest_through(void **state) {
        (void)state;
        if (geteuid() != 0)
                skip();
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                    lfs_seccomp_install(lfs_sandbox_seccomp()) < 0)
                        _exit(1);
                if (syscall(__NR_personality, 0xffffffffUL) < 0 || getpid() <= 0)
                        _exit(2);
                pid_t child = fork();
                if (child == 0)
                        _exit(0);
                _exit(child > 0 && waitpid(child, NULL, 0) == child ? 0 : 3);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the filtered child: status %d", status);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_the_filter_denies_what_root_could_call),
                cmocka_unit_test(test_the_filter_lets_the_rest_through),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
