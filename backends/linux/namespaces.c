/* SPDX-License-Identifier: MIT */
/*
 * The namespaces runtime of the linux platform (runtime.h): native's cgroups (linux.h),
 * and namespaces of the Sandbox's own. At create, while the daemon starts, a Sandbox init
 * (layerfs-init, beside the daemon; init/sandbox_init.c) starts in the leaf "init"
 * of the Sandbox's cgroup with new user, pid, mount, ipc, uts, cgroup and net namespaces:
 * pid 1 there, it reaps and never exits on its own. Its user namespace maps ids 0..65535
 * onto the host ids id_base..id_base+65535 of the Sandbox's record. Each command joins
 * the init's namespaces (setns on a pidfd of the init) in its own leaf, as native's do;
 * ending the cgroup ends the init and with it every namespace. --network host leaves the
 * net namespace out (the host's is the Sandbox's); private adds a veth pair to the host
 * (network.c), whose host end teardown and reclaim remove. docs/runtime.md.
 */
#include <fcntl.h>
#include <libgen.h>
#include <linux/magic.h>
#include <linux/major.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "linux.h"
#include "probe.h"
#include "network.h"
#include "resource_limits.h"
#include "seccomp.h"
#include "util.h"

/* The namespaces a Sandbox has, and every command joins. */
#define SANDBOX_NAMESPACES                                                                                  \
        (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP |       \
         CLONE_NEWNET)

/* sb's namespaces: with --network host, the host's net namespace is its (and a command
 * could not join it from the Sandbox's user namespace anyway). */
static int sandbox_namespaces(const lfs_sandbox_ref *sb) {
        return sb->network == LFS_NETWORK_HOST ? SANDBOX_NAMESPACES & ~CLONE_NEWNET : SANDBOX_NAMESPACES;
}
/* How many ids a Sandbox's user namespace maps: 0..65535, with the command identity
 * 501:20 among them. */
#define SANDBOX_IDS 65536u

/* What the namespaces runtime needs beyond native's: each namespace a Sandbox gets
 * (runtime status's names), and seccomp for its commands' filter. */
static const char *const namespaces_needs[] = { "kernel:userns",  "kernel:pidns", "kernel:mntns",
                                                "kernel:netns",   "kernel:ipcns", "kernel:utsns",
                                                "kernel:cgroupns" };

static void namespaces_probe(const lfs_platform *p, lfs_missing *m) {
        lfs_linux_probe(p, m);
        for (size_t i = 0; i < ELEMENTSOF(namespaces_needs); i++)
                if (!lfs_probe_kernel(namespaces_needs[i]))
                        lfs_missing_add(m, namespaces_needs[i]);
        if (!lfs_seccomp_available())
                lfs_missing_add(m, "kernel:seccomp");
}

/* One child that makes them at once, not one per namespace: create pays for this. */
static int namespaces_prepare(const lfs_platform *p, char **ret_root, lfs_error **err) {
        /* Without a net namespace: making one costs as much as all the others together
         * (0.5 ms here). Without a mount namespace either: its copy of the host's mounts and
         * their teardown, which the child's exit waits for, are a third of what is left
         * (1.9 against 1.2 ms, means of 200 here under load). A kernel with user namespaces
         * has both, and what refuses namespaces to a process (a seccomp filter as
         * container engines install, an LSM) refuses the others too. Only a host that sets
         * user.max_mnt_namespaces or max_net_namespaces to 0 gets past this: its create
         * fails (Failed, from the init's clone, naming the namespaces), and runtime status
         * names kernel:mntns or kernel:netns, probing each on its own. */
        int e = lfs_probe_namespaces(SANDBOX_NAMESPACES & ~(CLONE_NEWNET | CLONE_NEWNS));
        if (e)
                return lfs_fail(
                        err, LFS_UNSUPPORTED, e,
                        "the namespaces runtime cannot make a Sandbox's namespaces (user, pid, mount, "
                        "ipc, uts, cgroup, net) here: %s; 'layerfs runtime status' names the one "
                        "missing; use LAYERFS_RUNTIME=native",
                        strerror(e));
        /* Never a Sandbox without its filter: its commands would have calls that docs/security.md
         * says they have not. */
        if (!lfs_seccomp_available())
                return lfs_fail(err, LFS_UNSUPPORTED, EOPNOTSUPP,
                                "the namespaces runtime needs seccomp filters (kernel:seccomp), which this "
                                "kernel or build does not offer (CONFIG_SECCOMP_FILTER, and a filter for "
                                "this architecture); use LAYERFS_RUNTIME=native");
        return lfs_linux_prepare(p, ret_root, err);
}

/* ---- the init ---- */

/* Writes v in decimal into buf (at least 12 bytes), async-signal-safe; its length. */
static size_t format_uint(char *buf, unsigned long v) {
        char rev[24];
        size_t n = 0;
        do {
                rev[n++] = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        for (size_t i = 0; i < n; i++)
                buf[i] = rev[n - 1 - i];
        buf[n] = 0;
        return n;
}

/* Writes text into /proc/<pid>/<file>; async-signal-safe. */
static int write_proc_file(pid_t pid, const char *file, const char *text, size_t len) {
        char path[64] = "/proc/";
        size_t n = 6 + format_uint(path + 6, (unsigned long)pid);
        path[n++] = '/';
        for (const char *c = file; *c && n < sizeof(path) - 1; c++)
                path[n++] = *c;
        path[n] = 0;
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t k = write(fd, text, len);
        int e = errno;
        close(fd);
        return k == (ssize_t)len ? 0 : -(k < 0 ? e : EIO);
}

/* What the child that becomes the init needs, all made before the fork. */
typedef struct init_start {
        const char *exe;
        const char *const *argv;
        int cgroup_fd; /* the leaf "init" */
        int namespaces; /* sandbox_namespaces */
        int ready_fd, null_fd, log_fd;
        int hold_fd; /* the id range's lock, kept by the init (LFS_INIT_HOLD_FD), or -1 */
        char map[64]; /* "0 <base> 65536\n" for uid_map and gid_map */
        size_t map_len;
        pid_t pid; /* what the starter leaves: the init's pid, or a negative errno */
        int pidfd; /* in the caller's fd table, or -1 */
} init_start;

/* The init, before it execs: waits for its maps, becomes root of its user namespace (so
 * that it keeps its capabilities there through execve) and runs the daemon's init mode.
 * Async-signal-safe calls only. */
static _Noreturn void init_child(const init_start *s, int sync_fd) {
        char go;
        ssize_t k;
        while ((k = read(sync_fd, &go, 1)) < 0 && errno == EINTR)
                ;
        if (k != 1)
                _exit(126); /* the maps were not written */
        if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setgroups, 0, NULL) < 0 ||
            syscall(SYS_setresuid, 0, 0, 0) < 0)
                _exit(126);
        lfs_linux_exec_child(s->exe, s->argv, s->null_fd, s->log_fd, s->ready_fd, s->hold_fd);
}

/* The init's starter runs in a child that shares the caller's memory and fd table
 * (lfs_run_in_shared_child): a session of its own, the init cloned from it into its leaf
 * with the Sandbox's namespaces and a pidfd (CLONE_PIDFD, into the table it shares with the
 * caller: a pid never looked up again cannot have been reused), its maps written, the
 * init let go, and the starter's exit, so that the init is not the caller's child.
 * Async-signal-safe calls only; the clone is a raw system call. */
static int init_starter_main(void *arg) {
        init_start *s = arg;
        setsid();
        int sync[2];
        if (pipe2(sync, O_CLOEXEC) < 0) {
                s->pid = -errno;
                return 0;
        }
        struct clone_args args = {
                .flags = (uint64_t)s->namespaces | CLONE_INTO_CGROUP | CLONE_PIDFD,
                .pidfd = (uint64_t)(uintptr_t)&s->pidfd,
                .exit_signal = SIGCHLD,
                .cgroup = (uint64_t)s->cgroup_fd,
        };
        pid_t pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid == 0) {
                close(sync[1]);
                init_child(s, sync[0]);
        }
        int r = pid < 0 ? -errno : 0;
        close(sync[0]);
        /* setgroups stays allowed: the maps are written by root of the parent namespace. */
        if (r == 0)
                r = write_proc_file(pid, "uid_map", s->map, s->map_len);
        if (r == 0)
                r = write_proc_file(pid, "gid_map", s->map, s->map_len);
        if (r == 0 && write(sync[1], "1", 1) != 1)
                r = -errno;
        close(sync[1]);
        if (r < 0 && pid > 0)
                kill(pid, SIGKILL); /* it waits for its maps, which it did not get */
        s->pid = r < 0 ? r : pid;
        return 0;
}

/* The Sandbox init, layerfs-init, is installed beside the daemon (make install, the deb;
 * the build tree has both in build/), so that the two a Sandbox runs are one build's.
 * Found before anything is made: without it, create leaves nothing behind. */
static int find_init_program(const lfs_sandbox_ref *sb, const lfs_daemon_start *start, char **ret_path,
                             lfs_error **err) {
        _cleanup_free_ char *daemon = xstrdup(start->exe);
        _cleanup_free_ char *path = xasprintf("%s/layerfs-init", dirname(daemon));
        if (access(path, X_OK) < 0)
                return lfs_fail(err, LFS_FAILED, errno,
                                "sandbox %d has no init to start: %s, beside the daemon %s, cannot be "
                                "run (%s); install LayerFS ('make install') so that the two are together, "
                                "or use LAYERFS_RUNTIME=native",
                                sb->number, path, start->exe, strerror(errno));
        *ret_path = TAKE_PTR(path);
        return 0;
}

/* Starts the Sandbox's init (the program init_exe), detached, in the leaf <place>/init,
 * without waiting for it to be ready: *ret_pidfd is a pidfd of it, *ret_ready_fd where its
 * ready byte comes. */
static int start_init(const lfs_sandbox_ref *sb, const lfs_daemon_start *start, const char *init_exe,
                      int *ret_pidfd, int *ret_ready_fd, lfs_error **err) {
        _cleanup_free_ char *leaf = xasprintf("%s/init", sb->place);
        int r = lfs_cgroup_make(leaf);
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, -r, "cannot make the cgroup %s: %s", leaf, strerror(-r));
        _cleanup_close_ int cgroup_fd = lfs_cgroup_open(leaf);
        if (cgroup_fd < 0)
                return lfs_fail(err, LFS_FAILED, -cgroup_fd, "cannot open the cgroup %s: %s", leaf,
                                strerror(-cgroup_fd));
        _cleanup_free_ char *hostname = xasprintf("sandbox-%d", sb->number);
        const char *const argv[] = { "layerfs-init",
                                     "--hostname",
                                     hostname,
                                     "--home",
                                     sb->home,
                                     "--dir",
                                     sb->dir,
                                     "--network",
                                     lfs_network_name(sb->network),
                                     NULL };
        _cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        _cleanup_close_ int log_fd = openat(start->dir_fd, "daemon.log",
                                            O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (null_fd < 0 || log_fd < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot open /dev/null or %s/daemon.log: %s",
                                sb->dir, strerror(errno));
        int ready[2];
        if (pipe2(ready, O_CLOEXEC) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "pipe: %s", strerror(errno));
        _cleanup_close_ int ready_read = ready[0], ready_write = ready[1];
        init_start s = { .exe = init_exe,
                         .argv = argv,
                         .cgroup_fd = cgroup_fd,
                         .namespaces = sandbox_namespaces(sb),
                         .ready_fd = ready_write,
                         .null_fd = null_fd,
                         .log_fd = log_fd,
                         .hold_fd = start->init_holds_fd,
                         .pid = -ECHILD,
                         .pidfd = -1 };
        int len = snprintf(s.map, sizeof(s.map), "0 %u %u\n", (unsigned)sb->id_base, SANDBOX_IDS);
        s.map_len = (size_t)len;
        r = lfs_run_in_shared_child(init_starter_main, &s, CLONE_FILES);
        _cleanup_close_ int pidfd = s.pidfd;
        int why = r < 0 ? -r : r > 0 ? ECHILD : s.pid < 0 ? -s.pid : 0;
        if (why)
                return lfs_fail(err, LFS_FAILED, why,
                                "could not start sandbox %d's init with its namespaces (user, pid, mount, "
                                "ipc, uts, cgroup, net) and its ids from %u: %s",
                                sb->number, (unsigned)sb->id_base, strerror(why));
        *ret_pidfd = TAKE_FD(pidfd);
        *ret_ready_fd = TAKE_FD(ready_read);
        return 0;
}

/* Makes <dir>/name (mode) and binds it onto itself as a shared mount of its own: what the
 * daemon mounts there later (the Workspaces in mnt, the disk budget's tmpfs on tmp)
 * propagates to the Sandbox's view, whose copy is a slave, whenever the init binds it. */
static int make_shared(const lfs_sandbox_ref *sb, int dir_fd, const char *name, mode_t mode,
                       lfs_error **err) {
        _cleanup_free_ char *path = xasprintf("%s/%s", sb->dir, name);
        if (mkdirat(dir_fd, name, mode) < 0 && errno != EEXIST)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s: %s", path, strerror(errno));
        _cleanup_close_ int fd = lfs_open_beneath(dir_fd, name, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return lfs_fail(err, LFS_FAILED, -fd, "cannot open %s: %s", path, strerror(-fd));
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
        if (mount(self, self, NULL, MS_BIND, NULL) < 0 || mount(NULL, path, NULL, MS_PRIVATE, NULL) < 0 ||
            mount(NULL, path, NULL, MS_SHARED, NULL) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s a shared mount: %s", path,
                                strerror(errno));
        return 0;
}

/* On the host, before the daemon and the init start: <dir>/mnt (the Workspaces, 0711 as
 * the daemon makes it) and <dir>/tmp (HOME and TMPDIR, the daemon gives it to the command
 * identity) as shared mounts, and <dir>/root, where the init builds the view. So the init
 * needs nothing the daemon makes, and both start at once. */
static int prepare_view(const lfs_sandbox_ref *sb, int dir_fd, lfs_error **err) {
        if (mkdirat(dir_fd, "root", 0700) < 0 && errno != EEXIST)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s/root: %s", sb->dir, strerror(errno));
        int r = make_shared(sb, dir_fd, "mnt", 0711, err);
        if (r == 0)
                r = make_shared(sb, dir_fd, "tmp", 0700, err);
        return r;
}

/* The daemon and the init start together (the init's namespaces, exec and view take about
 * as long as the daemon's start): then each is waited for, and a private network is
 * connected. */
static int namespaces_create(const lfs_sandbox_ref *sb, const lfs_daemon_start *start,
                             lfs_daemon_handle *ret, lfs_error **err) {
        if (sb->id_base == 0 || sb->id_base > UINT32_MAX - SANDBOX_IDS)
                return lfs_fail(
                        err, LFS_FAILED, EINVAL,
                        "sandbox %d has no id range of its own (id_base %u) to map its user namespace "
                        "onto",
                        sb->number, (unsigned)sb->id_base);
        lfs_daemon_handle h = { .pid = -1, .pidfd = -1 };
        _cleanup_close_ int daemon_ready = -1, init_process = -1, init_ready = -1;
        _cleanup_free_ char *init_exe = NULL;
        int r = find_init_program(sb, start, &init_exe, err);
        if (r == 0)
                r = prepare_view(sb, start->dir_fd, err);
        if (r == 0)
                r = lfs_linux_start_daemon(sb, start, &h, &daemon_ready, err);
        if (r < 0)
                return r;
        /* The init's namespaces, exec and view are made while the daemon starts. */
        if ((r = start_init(sb, start, init_exe, &init_process, &init_ready, err)) < 0 ||
            (r = lfs_linux_await_daemon(sb, &h, daemon_ready, err)) < 0) {
                close(h.pidfd);
                return r;
        }
        if ((r = lfs_linux_wait_ready(init_ready, init_process)) < 0) {
                close(h.pidfd);
                return lfs_fail(err, LFS_FAILED, -r, "sandbox %d's init did not become ready (%s)",
                                sb->number, strerror(-r));
        }
        /* --network private: the veth pair, once the init's net namespace is there. */
        if ((r = lfs_network_connect(sb, init_process, err)) < 0) {
                close(h.pidfd);
                return r;
        }
        *ret = h;
        return 0;
}

/* ---- commands ---- */

/* The daemon's pidfd of its Sandbox's init, found once: the one process of the leaf
 * "init", checked to be there still once its pidfd is open (a pid reused meanwhile would
 * have to be in that leaf, which only the init's clone enters). */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static int init_pidfd = -1;
static pid_t init_pid = -1;

static int find_init(const lfs_sandbox_ref *sb, int *ret_pidfd, pid_t *ret_pid) {
        _cleanup_free_ char *leaf = xasprintf("%s/init", sb->place);
        for (int attempt = 0; attempt < 2; attempt++) {
                _cleanup_close_ int cgroup_fd = lfs_cgroup_open(leaf);
                if (cgroup_fd < 0)
                        return cgroup_fd;
                int procs = openat(cgroup_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
                _cleanup_fclose_ FILE *f = procs >= 0 ? fdopen(procs, "re") : NULL;
                if (!f) {
                        if (procs >= 0)
                                close(procs);
                        return -errno;
                }
                int pid;
                if (fscanf(f, "%d", &pid) != 1)
                        return -ESRCH; /* the init is gone: the Sandbox cannot run commands */
                int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
                if (pidfd < 0)
                        continue;
                rewind(f);
                int again;
                if (fscanf(f, "%d", &again) == 1 && again == pid) {
                        *ret_pidfd = pidfd;
                        *ret_pid = pid;
                        return 0;
                }
                close(pidfd);
        }
        return -ESRCH;
}

/* A pidfd of the Sandbox's init (the caller's to close) and its pid; -ESRCH once it has
 * ended (killed from the host: its namespaces can no longer be joined). */
static int get_init(const lfs_sandbox_ref *sb, int *ret_pidfd, pid_t *ret_pid) {
        pthread_mutex_lock(&init_lock);
        int r = 0;
        if (init_pidfd < 0)
                r = find_init(sb, &init_pidfd, &init_pid);
        struct pollfd p = { .fd = init_pidfd, .events = POLLIN };
        if (r == 0 && poll(&p, 1, 0) > 0)
                r = -ESRCH;
        int pidfd = r == 0 ? fcntl(init_pidfd, F_DUPFD_CLOEXEC, 3) : -1;
        pid_t pid = init_pid;
        pthread_mutex_unlock(&init_lock);
        if (r < 0)
                return r;
        if (pidfd < 0)
                return -errno;
        *ret_pidfd = pidfd;
        *ret_pid = pid;
        return 0;
}

static int namespaces_spawn(const lfs_sandbox_ref *sb, const lfs_command_spec *spec, pid_t *ret_pid,
                            int *ret_pidfd, lfs_error **err) {
        _cleanup_close_ int pidfd = -1;
        pid_t pid = -1;
        int r = get_init(sb, &pidfd, &pid);
        if (r < 0) /* no init, no namespaces to join */
                return lfs_linux_spawn_failed(sb, spec, LFS_SPAWN_STAGE_NAMESPACES, r, err);
        return lfs_linux_spawn(sb, spec, sandbox_namespaces(sb), pidfd, lfs_sandbox_seccomp(), ret_pid,
                               ret_pidfd, err);
}

/* A terminal of the Sandbox's own devpts (the view's /dev/pts, made by the init), reached
 * through the init's root: /proc/<init>/root is the one link followed, the init's by a
 * pidfd taken before and checked alive after /proc/<init> was opened (a pid reused since
 * would not be that directory's). Beneath that root nothing is followed (no symlink, no
 * magic link, no ".."), and what opens must be a ptmx of a devpts: the view is the
 * Sandbox's, and the daemon, root on the host, never takes a path of it elsewhere. */
static int namespaces_open_terminal(const lfs_sandbox_ref *sb) {
        _cleanup_close_ int pidfd = -1;
        pid_t pid = -1;
        int r = get_init(sb, &pidfd, &pid);
        if (r < 0)
                return r;
        char path[32];
        snprintf(path, sizeof(path), "/proc/%d", (int)pid);
        _cleanup_close_ int proc = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (proc < 0)
                return -errno;
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        if (poll(&p, 1, 0) != 0)
                return -ESRCH;
        _cleanup_close_ int root = openat(proc, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return -errno;
        _cleanup_close_ int fd = lfs_open_beneath(root, "dev/pts/ptmx", O_RDWR | O_NOCTTY);
        if (fd < 0)
                return fd;
        struct stat st;
        struct statfs fs;
        if (fstat(fd, &st) < 0 || fstatfs(fd, &fs) < 0)
                return -errno;
        if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(TTYAUX_MAJOR, 2) ||
            fs.f_type != DEVPTS_SUPER_MAGIC)
                return -ENOTTY;
        return TAKE_FD(fd);
}

/* Native's, and then the host's end of a private network: the Sandbox's net namespace
 * ended with its init, and with it the pair, unless something still holds the namespace
 * (a socket of it passed out): its end on the host goes regardless. */
static int namespaces_teardown(const lfs_sandbox_ref *sb, bool leave_place, lfs_teardown_hook hook,
                               void *userdata, char **ret_why) {
        int r = lfs_linux_teardown(sb, leave_place, hook, userdata, ret_why);
        int k = lfs_network_remove(sb, r < 0 ? NULL : ret_why);
        return r < 0 ? r : k < 0 ? k : r;
}

static int namespaces_reclaim(const lfs_sandbox_ref *sb, char **ret_why) {
        int r = lfs_linux_reclaim(sb, ret_why);
        int k = lfs_network_remove(sb, r < 0 ? NULL : ret_why);
        return r < 0 ? r : k;
}

const lfs_runtime lfs_runtime_namespaces = {
        .name = "namespaces",
        .networks = LFS_NETWORK_BIT(LFS_NETWORK_NONE) | LFS_NETWORK_BIT(LFS_NETWORK_HOST) |
                    LFS_NETWORK_BIT(LFS_NETWORK_PRIVATE),
        .default_network = LFS_NETWORK_NONE,
        .owns_id_range = true,
        .probe = namespaces_probe,
        .prepare = namespaces_prepare,
        .check_limits = lfs_linux_check_limits,
        .reach = lfs_linux_reach,
        .create = namespaces_create,
        .spawn = namespaces_spawn,
        .open_terminal = namespaces_open_terminal,
        .end_command = lfs_linux_end_command,
        .command_done = lfs_linux_command_done,
        .list = lfs_linux_list,
        .signal = lfs_linux_signal,
        .teardown = namespaces_teardown,
        .reclaim = namespaces_reclaim,
        .reclaim_orphans = lfs_linux_reclaim_orphans,
};
