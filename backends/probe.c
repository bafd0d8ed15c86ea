/* SPDX-License-Identifier: MIT */
/*
 * The kernel probes of runtime.status: what this host's kernel offers the runtime, found by trying it
 * (probes, never version numbers), and which watcher a new Sandbox would use. kconfig-notes/ explains each
 * probe: the kernel version and CONFIG options behind it, and what degrades without it.
 */
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/fuse.h>
#include <linux/sched.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <liburing.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <linux/netlink.h>

#include "cgroup.h"
#include "landlock.h"
#include "probe.h"
#include "util.h"

#ifndef FUSE_DEV_IOC_BACKING_OPEN /* protocol 7.40; Debian 12's header is 7.38 */
struct fuse_backing_map {
        int32_t fd;
        uint32_t flags;
        uint64_t padding;
};
#define FUSE_DEV_IOC_BACKING_OPEN _IOW(229, 1, struct fuse_backing_map)
#endif

static bool probe_cgroup2(char **ret_root) {
        return lfs_cgroup_root(ret_root, NULL) == 0;
}

/* cgroup.kill exists in every non-root cgroup of a kernel that has it: look in LayerFS's
 * root, made if need be (it is where every Sandbox goes anyway). */
static bool probe_cgroup_kill(const char *root) {
        if (!root || lfs_cgroup_make(root) < 0)
                return false;
        _cleanup_free_ char *kill_file = xasprintf("%s/cgroup.kill", root);
        return access(kill_file, W_OK) == 0;
}

/* A real clone3(CLONE_INTO_CGROUP | CLONE_PIDFD) of a child that exits at once. */
static bool probe_clone_into_cgroup(const char *root) {
        if (!root)
                return false;
        _cleanup_close_ int cgroup_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cgroup_fd < 0)
                return false;
        int pidfd = -1;
        struct clone_args args = { .flags = CLONE_PIDFD | CLONE_INTO_CGROUP,
                                   .pidfd = (uint64_t)(uintptr_t)&pidfd,
                                   .exit_signal = SIGCHLD,
                                   .cgroup = (uint64_t)cgroup_fd };
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid == 0)
                _exit(0);
        if (pid < 0)
                return false;
        waitpid(pid, NULL, 0);
        if (pidfd >= 0)
                close(pidfd);
        return true;
}

static bool probe_pidfd(void) {
        int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

static bool probe_bpf_map(uint32_t type, uint32_t key_size, uint32_t value_size, uint32_t max_entries) {
        union bpf_attr attr = { 0 };
        attr.map_type = type;
        attr.key_size = key_size;
        attr.value_size = value_size;
        attr.max_entries = max_entries;
        int fd = (int)syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

static bool probe_fuse(void) {
        int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

/* Without a connection the kernel answers EPERM when it knows the ioctl, ENOTTY (too old)
 * or EOPNOTSUPP (CONFIG_FUSE_PASSTHROUGH off) when it does not. */
static bool probe_fuse_passthrough(void) {
        _cleanup_close_ int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
        struct fuse_backing_map map = { .fd = -1 };
        return fd >= 0 && ioctl(fd, FUSE_DEV_IOC_BACKING_OPEN, &map) < 0 && errno != ENOTTY &&
               errno != EOPNOTSUPP;
}

int lfs_probe_fuse_uring(void) {
        char v = 0;
        _cleanup_close_ int fd = open(LFS_FUSE_URING_SWITCH, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (read(fd, &v, 1) != 1)
                return -EIO;
        return v == 'Y' || v == '1';
}

int lfs_check_fuse_uring(lfs_error **err) {
        const char *transport = getenv("LAYERFS_FUSE_TRANSPORT");
        const char *uring = getenv("LAYERFS_FUSE_URING");
        bool rings_asked = uring && (!strcmp(uring, "on") || !strcmp(uring, "auto"));
        if (transport && !strcmp(transport, "libfuse") && rings_asked)
                return lfs_fail(
                        err, LFS_INVALID_INPUT, 0,
                        "LAYERFS_FUSE_URING=%s asks for io_uring, which libfuse's loop "
                        "(LAYERFS_FUSE_TRANSPORT=libfuse) does not have; give LAYERFS_FUSE_TRANSPORT=dev "
                        "or uring, or leave LAYERFS_FUSE_URING unset",
                        uring);
        if (!transport || strcmp(transport, "uring"))
                return 0;
        if (uring && !strcmp(uring, "off"))
                return lfs_fail(
                        err, LFS_INVALID_INPUT, 0,
                        "LAYERFS_FUSE_TRANSPORT=uring and LAYERFS_FUSE_URING=off contradict each other; "
                        "give one of them");
        int on = lfs_probe_fuse_uring();
        if (on < 0)
                return lfs_fail(
                        err, LFS_UNSUPPORTED, -on,
                        "LAYERFS_FUSE_TRANSPORT=uring: this kernel has no FUSE over io_uring (%s: %s); "
                        "it needs Linux 6.14 with CONFIG_FUSE_IO_URING; give LAYERFS_FUSE_TRANSPORT=dev",
                        LFS_FUSE_URING_SWITCH, strerror(-on));
        if (on == 0 && !(uring && !strcmp(uring, "on")))
                return lfs_fail(
                        err, LFS_UNSUPPORTED, 0,
                        "LAYERFS_FUSE_TRANSPORT=uring: FUSE over io_uring is off on this host (%s is "
                        "N); turn it on with 'echo 1 > %s', or let the daemon do it with "
                        "LAYERFS_FUSE_URING=on",
                        LFS_FUSE_URING_SWITCH, LFS_FUSE_URING_SWITCH);
        return 0;
}

static bool probe_io_uring(void) {
        struct io_uring ring;
        if (io_uring_queue_init(2, &ring, 0) < 0)
                return false;
        io_uring_queue_exit(&ring);
        return true;
}

static bool probe_proc_connector(void) {
        int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_CONNECTOR);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

/* What a probe's child tries, and with what. */
typedef struct probe_try {
        int (*try)(unsigned long arg);
        unsigned long arg;
} probe_try;

static int probe_child(void *arg) {
        const probe_try *t = arg;
        return t->try(t->arg) < 0 ? (errno ? errno : EINVAL) : 0;
}

/* Runs try(arg) in a child; the errno it failed with, or 0. The child is single-threaded whatever the caller
 * is (unshare(CLONE_NEWUSER) refuses a threaded caller), and takes the namespace or filter with it when it
 * exits. It shares the caller's memory: a create pays for this probe, and a fork's copy of the caller's page
 * tables was most of it (2.6 against 0.13 ms here). */
static int in_child(int (*try)(unsigned long arg), unsigned long arg) {
        probe_try t = { .try = try, .arg = arg };
        int r = lfs_run_in_shared_child(probe_child, &t, 0);
        return r < 0 ? -r : r;
}

static int try_unshare(unsigned long flag) {
        return unshare((int)flag);
}

/* A filter that allows everything, installed as a command's would be (no_new_privs). */
static int try_seccomp(unsigned long unused) {
        (void)unused;
        struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        struct sock_fprog prog = { .len = 1, .filter = &allow };
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -1;
        return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

/* The namespaces the namespaces runtime makes for a Sandbox, each tried on its own. */
static const struct {
        const char *name;
        int flag;
} namespace_probes[] = {
        { "kernel:userns", CLONE_NEWUSER },     { "kernel:pidns", CLONE_NEWPID },
        { "kernel:mntns", CLONE_NEWNS },        { "kernel:netns", CLONE_NEWNET },
        { "kernel:ipcns", CLONE_NEWIPC },       { "kernel:utsns", CLONE_NEWUTS },
        { "kernel:cgroupns", CLONE_NEWCGROUP },
};

/* The controllers that a Sandbox's limits need (--memory, --pids, --cpus). */
static const char *const limit_controllers[] = { "memory", "pids", "cpu" };

static bool probe_file(const char *path) {
        return access(path, F_OK) == 0;
}

int lfs_probe_namespaces(int flags) {
        return in_child(try_unshare, (unsigned long)flags);
}

bool lfs_probe_kernel(const char *name) {
        _cleanup_free_ char *root = NULL;
        for (size_t i = 0; i < ELEMENTSOF(namespace_probes); i++)
                if (!strcmp(name, namespace_probes[i].name))
                        return lfs_probe_namespaces(namespace_probes[i].flag) == 0;
        if (!strcmp(name, "kernel:seccomp"))
                return in_child(try_seccomp, 0) == 0;
        if (!strcmp(name, "kernel:cgroup2"))
                return probe_cgroup2(&root);
        if (!strcmp(name, "kernel:cgroup.kill"))
                return probe_cgroup2(&root) && geteuid() == 0 && probe_cgroup_kill(root);
        if (!strcmp(name, "kernel:pidfd"))
                return probe_pidfd();
        if (!strcmp(name, "kernel:fuse"))
                return probe_fuse();
        if (!strcmp(name, "kernel:kvm"))
                return probe_file("/dev/kvm");
        return false;
}

static void add(lfs_runtime_info *s, const char *name, bool present, const char *note) {
        GROW(s->features, s->cap_features, s->n_features + 1);
        s->features[s->n_features++] = (lfs_feature){ .name = xstrdup(name),
                                                      .present = present,
                                                      .note = note ? xstrdup(note) : NULL };
}

void lfs_runtime_add_missing(lfs_runtime_info *s, const char *name) {
        for (size_t i = 0; i < s->n_missing; i++)
                if (!strcmp(s->missing[i], name))
                        return;
        GROW(s->missing, s->cap_missing, s->n_missing + 1);
        s->missing[s->n_missing++] = xstrdup(name);
}

void lfs_probe_features(lfs_runtime_info *s) {
        _cleanup_free_ char *root = NULL;
        bool cgroup2 = probe_cgroup2(&root);
        bool root_user = geteuid() == 0;
        add(s, "kernel:cgroup2", cgroup2, root);
        add(s, "kernel:cgroup.kill", root_user && probe_cgroup_kill(root),
            root_user ? NULL : "needs root to probe");
        add(s, "kernel:clone-into-cgroup", root_user && probe_clone_into_cgroup(root),
            root_user ? NULL : "needs root to probe");
        add(s, "kernel:pidfd", probe_pidfd(), NULL);
        bool bpf = probe_bpf_map(BPF_MAP_TYPE_ARRAY, 4, 8, 1);
        add(s, "kernel:bpf", bpf, NULL);
        bool ringbuf = probe_bpf_map(BPF_MAP_TYPE_RINGBUF, 0, 0, 4096);
        add(s, "kernel:bpf-ringbuf", ringbuf, NULL);
        bool btf = probe_file("/sys/kernel/btf/vmlinux");
        add(s, "kernel:btf", btf, NULL);
        add(s, "kernel:fuse", probe_fuse(), NULL);
        add(s, "kernel:fuse-passthrough", probe_fuse_passthrough(), NULL);
        int uring = lfs_probe_fuse_uring();
        add(s, "kernel:fuse-io-uring", uring >= 0,
            uring > 0    ? "enabled"
            : uring == 0 ? "built, off (fuse.enable_uring=N)"
                         : NULL);
        add(s, "kernel:io_uring", probe_io_uring(), NULL);
        add(s, "kernel:proc-connector", probe_proc_connector(), NULL);
        /* Whether this caller can make each namespace (root can where the kernel has it). */
        for (size_t i = 0; i < ELEMENTSOF(namespace_probes); i++) {
                int e = lfs_probe_namespaces(namespace_probes[i].flag);
                _cleanup_free_ char *note = e ? xasprintf("unshare: %s%s", strerror(e),
                                                          root_user ? "" : " (as root it may work)")
                                              : NULL;
                add(s, namespace_probes[i].name, e == 0, note);
        }
        add(s, "kernel:landlock-scope", lfs_landlock_scope_available(),
            lfs_landlock_scope_available()
                    ? NULL
                    : "a --network host Sandbox's commands reach the host's abstract unix "
                      "sockets (Linux 6.12)");
        int e = in_child(try_seccomp, 0);
        _cleanup_free_ char *seccomp_note = e ? xasprintf("seccomp filter: %s", strerror(e)) : NULL;
        add(s, "kernel:seccomp", e == 0, seccomp_note);
        /* What --memory, --pids and --cpus need: the controller offered to LayerFS's root. */
        _cleanup_free_ char *offered = root ? lfs_cgroup_offered(root) : NULL;
        for (size_t i = 0; i < ELEMENTSOF(limit_controllers); i++) {
                const char *c = limit_controllers[i];
                bool present = root && lfs_cgroup_offers(root, c);
                _cleanup_free_ char *name = xasprintf("cgroup:%s", c), *note = NULL;
                if (!present && root)
                        note = xasprintf("not offered to %s (it offers %s)%s", root,
                                         *offered ? offered : "none",
                                         lfs_cgroup_v1_bound(c) ? "; bound to a cgroup v1 hierarchy" : "");
                add(s, name, present, note);
        }
        const char *want = getenv("LAYERFS_WATCHER");
        bool bpf_ok = bpf && ringbuf && btf;
        s->watcher = xstrdup(want && *want ? want : bpf_ok ? "bpf" : "cgroup");
        for (size_t i = 0; i < s->n_features; i++)
                if (!s->features[i].present)
                        lfs_runtime_add_missing(s, s->features[i].name);
}
