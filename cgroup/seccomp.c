/* SPDX-License-Identifier: MIT */
/* The seccomp filter of a namespaces Sandbox's commands and init (seccomp.h): a classic BPF
 * program written by hand, one table of denied calls. */
#include "seccomp.h"

#include <endian.h>
#include <errno.h>
#include <linux/audit.h>
#include <linux/sched.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

/*
 * The calls a command of a namespaces Sandbox is refused (EPERM), whatever their
 * arguments: docs/security.md lists them with why. Mounts of every kind (the view is the
 * init's to build, and a command has no business changing it, even within its own mount
 * namespace), the kernel keyring (not namespaced: keys outlive the Sandbox and reach the
 * host's users), BPF and perf events (kernel attack surface, and a view of the host), and
 * what only the host's administrator does: modules, kexec, reboot, swap, the clock,
 * process accounting, quotas, the kernel log, port I/O, handles that open any file of a
 * filesystem, userfaultfd (the usual tool to win kernel races).
 */
#define DENIED_CALLS(X)                                                                                     \
        X(mount)                                                                                            \
        X(umount2)                                                                                          \
        X(pivot_root)                                                                                       \
        X(move_mount)                                                                                       \
        X(open_tree)                                                                                        \
        X(fsopen)                                                                                           \
        X(fsconfig)                                                                                         \
        X(fsmount)                                                                                          \
        X(fspick)                                                                                           \
        X(mount_setattr)                                                                                    \
        X(add_key)                                                                                          \
        X(request_key)                                                                                      \
        X(keyctl)                                                                                           \
        X(bpf)                                                                                              \
        X(perf_event_open)                                                                                  \
        X(kexec_load)                                                                                       \
        X(kexec_file_load)                                                                                  \
        X(init_module)                                                                                      \
        X(finit_module)                                                                                     \
        X(delete_module)                                                                                    \
        X(open_by_handle_at)                                                                                \
        X(userfaultfd)                                                                                      \
        X(swapon)                                                                                           \
        X(swapoff)                                                                                          \
        X(reboot)                                                                                           \
        X(settimeofday)                                                                                     \
        X(clock_settime)                                                                                    \
        X(clock_adjtime)                                                                                    \
        X(adjtimex)                                                                                         \
        X(acct)                                                                                             \
        X(quotactl)                                                                                         \
        X(quotactl_fd)                                                                                      \
        X(lookup_dcookie)                                                                                   \
        X(syslog)                                                                                           \
        PORT_IO_CALLS(X)

#if defined(__x86_64__)
#define SANDBOX_ARCH AUDIT_ARCH_X86_64
#define PORT_IO_CALLS(X) X(iopl) X(ioperm)
#elif defined(__aarch64__)
#define SANDBOX_ARCH AUDIT_ARCH_AARCH64
#define PORT_IO_CALLS(X)
#endif

#ifdef SANDBOX_ARCH

#if __BYTE_ORDER == __LITTLE_ENDIAN
#define ARG0_LOW offsetof(struct seccomp_data, args[0])
#else
#define ARG0_LOW (offsetof(struct seccomp_data, args[0]) + 4)
#endif

#define RET(action) BPF_STMT(BPF_RET | BPF_K, (action))
#define ALLOW RET(SECCOMP_RET_ALLOW)
#define DENY RET(SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
/* Another ABI's calls have other numbers: the process ends (SIGSYS) rather than run
 * past a table that does not know them. */
#define FOREIGN RET(SECCOMP_RET_KILL_PROCESS)
#define LOAD(offset) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (offset))
#define IF_NR(nr, then, otherwise) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), (then), (otherwise))
#define DENY_CALL(name) IF_NR(__NR_##name, 0, 1), DENY,

static const struct sock_filter sandbox_filter[] = {
        LOAD(offsetof(struct seccomp_data, arch)),
        IF_NR(SANDBOX_ARCH, 1, 0),
        FOREIGN,
        LOAD(offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
        /* x32: the same arch, the numbers with this bit. */
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, __X32_SYSCALL_BIT, 0, 1),
        FOREIGN,
#endif
        DENIED_CALLS(DENY_CALL)
        /* New user namespaces: their root has every capability over what it makes there
         * (mounts of its own, FUSE, nftables...), the kernel's largest unprivileged surface.
         * Other namespaces need a capability a command has not. clone3 hides its flags in
         * memory a filter cannot read: it is ENOSYS, and glibc falls back to clone. */
        IF_NR(__NR_clone3, 0, 1),
        RET(SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
        IF_NR(__NR_unshare, 1, 0),
        IF_NR(__NR_clone, 0, 4),
        LOAD(ARG0_LOW),
        BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_NEWUSER, 0, 1),
        DENY,
        ALLOW,
        /* personality: only the ones programs use (the query, Linux, 32-bit and 2.6-style
         * uname); READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE and the rest weaken the process. */
        IF_NR(__NR_personality, 0, 8),
        LOAD(ARG0_LOW),
        IF_NR(0xffffffffu, 5, 0),
        IF_NR(0x0000, 4, 0), /* PER_LINUX */
        IF_NR(0x0008, 3, 0), /* PER_LINUX32 */
        IF_NR(0x20000, 2, 0), /* UNAME26 */
        IF_NR(0x20008, 1, 0), /* PER_LINUX32 | UNAME26 */
        DENY,
        ALLOW,
        ALLOW,
};

const struct sock_fprog *lfs_sandbox_seccomp(void) {
        static const struct sock_fprog prog = {
                .len = (unsigned short)ELEMENTSOF(sandbox_filter),
                .filter = (struct sock_filter *)sandbox_filter, /* the kernel only reads it */
        };
        return &prog;
}

#else

const struct sock_fprog *lfs_sandbox_seccomp(void) {
        return NULL;
}

#endif

bool lfs_seccomp_available(void) {
        static const unsigned actions[] = { SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS };
        for (size_t i = 0; i < ELEMENTSOF(actions); i++)
                if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &actions[i]) < 0)
                        return false;
        return lfs_sandbox_seccomp() != NULL;
}

int lfs_seccomp_install(const struct sock_fprog *prog) {
        return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, prog) < 0 ? -errno : 0;
}
