/* SPDX-License-Identifier: MIT */
/*
 * test_seccomp.sh's probe: makes each call the namespaces runtime's seccomp filter denies
 * (cgroup/seccomp.c) and prints one line per call, "NAME RESULT": ok, or the errno's name.
 * The arguments are chosen so that, without the filter, the kernel answers an unprivileged
 * caller something other than EPERM where it can (a bad pointer, bad flags, a bad fd,
 * checked before the capability): then EPERM is the filter's. The calls whose capability
 * check comes first are marked "(EPERM anyway)": without the filter they are EPERM too.
 * Nothing here changes the host: every call fails either way (personality 0x0400000,
 * ADDR_NO_RANDOMIZE, only changes this process, and unshare and clone only make a user
 * namespace for a child that exits at once).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void show(const char *name, long r, const char *note) {
        const char *what = r >= 0 ? "ok" : strerrorname_np(errno);
        printf("%s %s%s\n", name, what ? what : "?", note);
}

#define BAD ((void *)1) /* an address nothing is mapped at */
#define CALL(name, ...) show(#name, syscall(__NR_##name, __VA_ARGS__), "")
/* Unprivileged, the kernel checks a capability before anything else. */
#define CALL_EPERM_ANYWAY(name, ...) show(#name, syscall(__NR_##name, __VA_ARGS__), " (EPERM anyway)")

int main(void) {
        setvbuf(stdout, NULL, _IOLBF, 0);
        CALL(mount, NULL, NULL, NULL, 0, NULL); /* EFAULT: the target's path */
        CALL(umount2, NULL, -1); /* EINVAL: flags */
        CALL_EPERM_ANYWAY(pivot_root, NULL, NULL);
        CALL_EPERM_ANYWAY(move_mount, -1, NULL, -1, NULL, 0);
        CALL(open_tree, -1, NULL, -1); /* EINVAL: flags */
        CALL_EPERM_ANYWAY(fsopen, NULL, 0);
        CALL(fsconfig, -1, 0, NULL, NULL, 0); /* EBADF */
        CALL_EPERM_ANYWAY(fsmount, -1, 0, 0);
        CALL_EPERM_ANYWAY(fspick, -1, NULL, 0);
        CALL(mount_setattr, -1, NULL, -1, NULL, 0); /* EINVAL: flags */
        CALL(add_key, BAD, BAD, NULL, 0, 0); /* EFAULT: the type */
        CALL(request_key, BAD, BAD, NULL, 0); /* EFAULT */
        CALL(keyctl, -1, 0, 0, 0, 0); /* EOPNOTSUPP: no such operation */
        CALL(bpf, -1, NULL, 0); /* EINVAL: no such command */
        CALL(perf_event_open, BAD, 0, -1, -1, 0); /* EFAULT: the attributes */
        CALL_EPERM_ANYWAY(kexec_load, 0, 0, NULL, 0);
        CALL_EPERM_ANYWAY(kexec_file_load, -1, -1, 0, NULL, 0);
        CALL_EPERM_ANYWAY(init_module, NULL, 0, "");
        CALL_EPERM_ANYWAY(finit_module, -1, "", 0);
        CALL_EPERM_ANYWAY(delete_module, "no_such_module", 0);
        CALL(open_by_handle_at, -1, BAD, 0); /* EBADF or EFAULT */
        CALL(userfaultfd, 1 /* UFFD_USER_MODE_ONLY */ | 4 /* no such flag */); /* EINVAL */
        CALL(swapon, NULL, -1); /* EINVAL: flags */
        CALL_EPERM_ANYWAY(swapoff, "/no/such/swap");
        CALL_EPERM_ANYWAY(reboot, 0, 0, 0, NULL);
        CALL(settimeofday, NULL, BAD); /* EFAULT: the time zone */
        CALL(clock_settime, -1, NULL); /* EINVAL: no such clock */
        CALL(clock_adjtime, -1, NULL); /* EINVAL */
        CALL(adjtimex, BAD); /* EFAULT */
        CALL_EPERM_ANYWAY(acct, "/no/such/file");
        CALL(quotactl, 0, NULL, 0, NULL); /* an unknown command */
        CALL(quotactl_fd, -1, 0, 0, NULL); /* EBADF */
        CALL(lookup_dcookie, 0, NULL, 0); /* ENOSYS in today's kernels */
        /* The size where dmesg is open to all (kernel.dmesg_restrict 0), else EPERM. */
        CALL_EPERM_ANYWAY(syslog, 10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
#ifdef __NR_iopl
        CALL(iopl, 4); /* EINVAL: no such level */
        CALL(ioperm, 0xffffffffUL, 1, 1); /* EINVAL: past the ports */
#endif
        /* Allowed to the filter (ok without it): a personality that weakens the process, a
         * user namespace of its own. */
        CALL(personality, 0x0400000 /* READ_IMPLIES_EXEC */);
        pid_t child = fork();
        if (child == 0) {
                long r = syscall(__NR_unshare, CLONE_NEWUSER);
                _exit(r < 0 ? errno : 0);
        }
        int status = 0;
        if (child > 0)
                waitpid(child, &status, 0);
        errno = WIFEXITED(status) ? WEXITSTATUS(status) : EIO;
        show("unshare(CLONE_NEWUSER)", errno ? -1 : 0, "");
        long r = syscall(__NR_clone, CLONE_NEWUSER | SIGCHLD, NULL, NULL, NULL, 0);
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        show("clone(CLONE_NEWUSER)", r, "");
        struct clone_args args = { .exit_signal = SIGCHLD };
        r = syscall(__NR_clone3, &args, sizeof(args));
        if (r == 0)
                _exit(0);
        if (r > 0)
                waitpid((pid_t)r, NULL, 0);
        show("clone3", r, "");
        /* What the filter lets through, as it is: the query, and a plain fork. */
        CALL(personality, 0xffffffffUL);
        child = fork();
        if (child == 0)
                _exit(0);
        show("fork", child > 0 ? waitpid(child, NULL, 0) : -1, "");
        return 0;
}
