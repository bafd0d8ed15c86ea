/* SPDX-License-Identifier: MIT */
/*
 * layerfs-init, the Sandbox init of the namespaces runtime (backends/linux/namespaces.c
 * starts it, from beside layerfs-daemon): pid 1
 * of the Sandbox's pid namespace, root of its user namespace. It sets the namespaces up
 * once (the Sandbox's view of the files, the hostname, lo up through rtnetlink unless the
 * Sandbox has the host's network), says
 * so, and then only reaps: every process of the Sandbox whose parent
 * ends becomes its child. It never exits on its own: the Sandbox's end kills it with the
 * rest of the Sandbox's cgroup, and the namespaces go with it. It keeps fd 4
 * (LFS_INIT_HOLD_FD) open and untouched for its life: the host-wide lock of the Sandbox's
 * id range, which create took (userspace-lib/client/records.c), and which goes with it.
 *
 * A program of its own, not a mode of the daemon's binary: it links libc and libmnl only,
 * so its exec costs a Sandbox's create 0.6 ms of CPU where the daemon's twelve libraries
 * cost 4 ms (perf stat here), and it keeps none of them mapped for the Sandbox's life.
 */
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "rtnetlink.h"
#include "runtime.h"
#include "seccomp.h"
#include "util.h"

/* Sets lo up, through rtnetlink: the only link of a new net namespace, down until then. */
static int bring_lo_up(void) {
        lfs_rtnl *nl = NULL;
        int r = lfs_rtnl_open(&nl);
        if (r == 0)
                r = lfs_rtnl_link_up(nl, "lo");
        lfs_rtnl_close(nl);
        return r;
}

/* Makes the directories of path that are missing (mode), each beneath the last. A path
 * that exists on a read-only mount is fine (mkdir says EEXIST first). */
static int make_path(const char *path, mode_t mode) {
        _cleanup_free_ char *walk = xstrdup(path);
        for (char *p = walk + 1;; p++) {
                if (*p != '/' && *p)
                        continue;
                char saved = *p;
                *p = 0;
                if (mkdir(walk, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = saved;
                if (!saved)
                        return 0;
        }
}

/* What failed while the view was built, for the log. */
static const char *view_step;

static int must(int r, const char *step) {
        if (r < 0) {
                view_step = step;
                return -errno;
        }
        return 0;
}

/* A scratch directory of the view (/tmp, /dev/shm, mode 01777) at where: a tmpfs of its
 * own, or with a disk budget (--disk: the daemon gives the init DIR/view-tmp on the
 * budget's tmpfs, daemon/main.c) its directory name there, bound, so that what the
 * commands write there draws on the budget too. */
static int mount_scratch(const char *budget, const char *name, const char *where) {
        if (!budget)
                return mount("tmpfs", where, "tmpfs", MS_NOSUID | MS_NODEV, "mode=01777");
        _cleanup_free_ char *from = xasprintf("%s/%s", budget, name);
        if ((mkdir(from, 0700) < 0 && errno != EEXIST) || chmod(from, 01777) < 0)
                return -1;
        return mount(from, where, NULL, MS_BIND, NULL);
}

/* /dev with the safe nodes only: each bound from the host's (a user namespace cannot make
 * device nodes), a pts of its own, shm; then read-only. */
static int set_up_dev(const char *view, const char *budget) {
        static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
        static const char *const links[][2] = {
                { "pts/ptmx", "ptmx" },          { "/proc/self/fd", "fd" },
                { "/proc/self/fd/0", "stdin" },  { "/proc/self/fd/1", "stdout" },
                { "/proc/self/fd/2", "stderr" },
        };
        _cleanup_free_ char *dev = xasprintf("%s/dev", view);
        int r = must(mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k"), "/dev");
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(nodes); i++) {
                _cleanup_free_ char *from = xasprintf("/dev/%s", nodes[i]),
                                    *to = xasprintf("%s/%s", dev, nodes[i]);
                int fd = open(to, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
                if (fd >= 0)
                        close(fd);
                r = must(fd < 0 ? -1 : mount(from, to, NULL, MS_BIND, NULL), "a node of /dev");
        }
        for (size_t i = 0; r == 0 && i < ELEMENTSOF(links); i++) {
                _cleanup_free_ char *to = xasprintf("%s/%s", dev, links[i][1]);
                r = must(symlink(links[i][0], to), "a link of /dev");
        }
        _cleanup_free_ char *pts = xasprintf("%s/pts", dev), *shm = xasprintf("%s/shm", dev);
        if (r == 0)
                r = must(mkdir(pts, 0755), "/dev/pts");
        if (r == 0)
                r = must(mount("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC,
                               "newinstance,ptmxmode=0666,mode=0620"),
                         "/dev/pts");
        if (r == 0)
                r = must(mkdir(shm, 01777), "/dev/shm");
        if (r == 0)
                r = must(mount_scratch(budget, "shm", shm), "/dev/shm");
        if (r == 0)
                r = must(mount(NULL, dev, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC,
                               NULL),
                         "/dev read-only");
        return r;
}

/* /run: a tmpfs of the Sandbox's own. The host's holds its services' sockets, and many are
 * anyone's to connect to whatever the mount's read-only flag (connect() writes nothing):
 * the journal's, D-Bus's, a database's (/run/postgresql). Commands get /run/lock (01777)
 * and /run/shm (a link to /dev/shm) as a host has them, and with the host's network only,
 * the host's resolver's directory, read-only (/etc/resolv.conf may point into it; its
 * sockets resolve names, which is the network a none or private Sandbox does not have).
 * Sockets elsewhere in the host's tree stay reachable: docs/security.md. */
static int set_up_run(const char *view, bool own_net) {
        _cleanup_free_ char *run = xasprintf("%s/run", view), *lock = xasprintf("%s/run/lock", view),
                            *shm = xasprintf("%s/run/shm", view),
                            *resolve = xasprintf("%s/run/systemd/resolve", view);
        struct stat st;
        if (stat(run, &st) < 0 || !S_ISDIR(st.st_mode))
                return 0; /* a host without /run has none to hide */
        int r = must(mount("tmpfs", run, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=1m"),
                     "/run");
        if (r == 0)
                r = must(mkdir(lock, 0755) < 0 ? -1 : chmod(lock, 01777), "/run/lock");
        if (r == 0)
                r = must(symlink("/dev/shm", shm), "/run/shm");
        if (r == 0 && !own_net && stat("/run/systemd/resolve", &st) == 0 && S_ISDIR(st.st_mode)) {
                r = must(make_path(resolve, 0755), "/run/systemd/resolve");
                if (r == 0)
                        r = must(mount("/run/systemd/resolve", resolve, NULL, MS_BIND, NULL),
                                 "/run/systemd/resolve");
                if (r == 0)
                        r = must(mount(NULL, resolve, NULL,
                                       MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL),
                                 "/run/systemd/resolve read-only");
        }
        return r;
}

/* The home seen from inside: an empty read-only tmpfs with only this Sandbox's tmp (its
 * HOME and TMPDIR) and mnt (its Workspaces, a slave of the host's mnt, so that the
 * daemon's later mounts appear here) at their own paths. */
static int set_up_home(const char *view, const char *home, const char *dir) {
        _cleanup_free_ char *in_home = xasprintf("%s%s", view, home), *tmp = xasprintf("%s/tmp", dir),
                            *mnt = xasprintf("%s/mnt", dir), *in_tmp = xasprintf("%s%s", view, tmp),
                            *in_mnt = xasprintf("%s%s", view, mnt);
        int r = must(make_path(in_home, 0711), "the path to the home");
        if (r == 0)
                r = must(mount("tmpfs", in_home, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                               "mode=0711,size=64k"),
                         "the home");
        if (r == 0)
                r = must(make_path(in_tmp, 0711), "the Sandbox's tmp");
        if (r == 0)
                r = must(make_path(in_mnt, 0711), "the Sandbox's mnt");
        if (r == 0)
                r = must(mount(tmp, in_tmp, NULL, MS_BIND, NULL), "the Sandbox's tmp");
        if (r == 0)
                r = must(mount(mnt, in_mnt, NULL, MS_BIND, NULL), "the Sandbox's mnt");
        if (r == 0)
                r = must(mount(NULL, in_home, NULL,
                               MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
                         "the home read-only");
        return r;
}

/* /sys: a sysfs of the Sandbox's net namespace. With the host's network (own_net false)
 * there is none to mount (sysfs wants the net namespace's owner), and the host's /sys,
 * read-only in the view already, stays, but for its cgroup trees beneath /sys/fs/cgroup
 * (every Sandbox's cgroup and processes): an empty read-only tmpfs covers them. */
static int set_up_sys(const char *view, bool own_net) {
        _cleanup_free_ char *sys = xasprintf("%s/sys", view), *cgroup = xasprintf("%s/sys/fs/cgroup", view);
        if (own_net)
                return must(mount("sysfs", sys, "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL),
                            "/sys");
        struct stat st;
        if (stat(cgroup, &st) < 0)
                return 0;
        return must(mount("tmpfs", cgroup, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          "mode=0755,size=4k"),
                    "/sys/fs/cgroup hidden");
}

/* The Sandbox's view, built in <dir>/root and made the root: the host's root read-only
 * (nothing of the host propagates into it but the Sandbox's mnt), a /proc of the new pid
 * namespace, /sys (set_up_sys), /dev with the safe nodes, a /tmp of its own (a tmpfs, or
 * on the disk budget), a /run of its own (set_up_run), and of the home only the Sandbox's
 * tmp and mnt. */
static int set_up_view(const char *home, const char *dir, bool own_net, const char *budget) {
        _cleanup_free_ char *view = xasprintf("%s/root", dir), *proc = xasprintf("%s/proc", view),
                            *tmp = xasprintf("%s/tmp", view);
        struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID };
        int r = must(mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL), "/ as a slave");
        if (r == 0)
                r = must(mount("/", view, NULL, MS_BIND | MS_REC, NULL), "the host's root");
        if (r == 0)
                r = must(mount(NULL, view, NULL, MS_REC | MS_PRIVATE, NULL), "the host's root private");
        if (r == 0)
                r = must(mount_setattr(AT_FDCWD, view, AT_RECURSIVE, &ro, sizeof(ro)),
                         "the host's root read-only");
        if (r == 0)
                r = must(mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), "/proc");
        if (r == 0)
                r = set_up_sys(view, own_net);
        if (r == 0)
                r = set_up_dev(view, budget);
        if (r == 0)
                r = must(mount_scratch(budget, "tmp", tmp), "/tmp");
        if (r == 0)
                r = set_up_run(view, own_net);
        if (r == 0)
                r = set_up_home(view, home, dir);
        /* pivot_root(".", "."): the old root stays stacked beneath and is detached. */
        if (r == 0)
                r = must(chdir(view), "the view");
        if (r == 0)
                r = must((int)syscall(SYS_pivot_root, ".", "."), "pivot_root");
        if (r == 0)
                r = must(umount2(".", MNT_DETACH), "the host's root");
        if (r == 0)
                r = must(chdir("/"), "/");
        return r;
}

/* Reaps every child that ends, for ever: SIGCHLD is taken with sigwaitinfo, every other
 * signal is blocked (pid 1 of a namespace gets none but SIGKILL from outside anyway). */
static _Noreturn void reap_forever(void) {
        sigset_t all, chld;
        sigfillset(&all);
        sigprocmask(SIG_BLOCK, &all, NULL);
        sigemptyset(&chld);
        sigaddset(&chld, SIGCHLD);
        for (;;) {
                while (waitpid(-1, NULL, WNOHANG) > 0)
                        ;
                (void)sigwaitinfo(&chld, NULL);
        }
}

static const char init_usage[] =
        "usage: layerfs-init --hostname NAME --home HOME --dir SANDBOX_DIR\n"
        "                    [--network none|host|private]\n"
        "(only as pid 1 of a Sandbox's namespaces: the namespaces runtime starts it)\n";

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "hostname", required_argument, NULL, 'h' },
                { "home", required_argument, NULL, 'H' },
                { "dir", required_argument, NULL, 'd' },
                { "network", required_argument, NULL, 'n' },
                { NULL, 0, NULL, 0 },
        };
        const char *hostname = NULL, *home = NULL, *dir = NULL, *network_name = "none";
        int c;
        while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
                if (c == 'h')
                        hostname = optarg;
                else if (c == 'H')
                        home = optarg;
                else if (c == 'd')
                        dir = optarg;
                else if (c == 'n')
                        network_name = optarg;
                else {
                        fputs(init_usage, stderr);
                        return 2;
                }
        }
        lfs_network network;
        if (!hostname || !home || !dir || home[0] != '/' || dir[0] != '/' || getpid() != 1 ||
            !lfs_network_from_name(network_name, &network)) {
                fputs(init_usage, stderr);
                return 2;
        }
        view_step = "the mounts";
        /* With the host's network there is no net namespace of the Sandbox's, and no lo of
         * its own to bring up; private's veth is the library's to make, from the host. */
        bool own_net = network != LFS_NETWORK_HOST;
        /* There only with a disk budget, made before the init starts (the runtime's create:
         * backends/linux/resource_limits.c). */
        _cleanup_free_ char *budget = xasprintf("%s/view-tmp", dir);
        struct stat st;
        if (stat(budget, &st) < 0 || !S_ISDIR(st.st_mode))
                free(TAKE_PTR(budget));
        int r = set_up_view(home, dir, own_net, budget);
        const char *what = view_step;
        if (r == 0 && sethostname(hostname, strlen(hostname)) < 0) {
                r = -errno;
                what = "the hostname";
        }
        if (r == 0 && own_net && (r = bring_lo_up()) < 0)
                what = "lo";
        /* The init is the Sandbox's too: what its commands may not call, neither may it
         * (it only reaps from here on). */
        if (r == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                r = -errno;
                what = "no_new_privs";
        }
        if (r == 0 && (r = lfs_seccomp_install(lfs_sandbox_seccomp())) < 0)
                what = "the seccomp filter";
        if (r < 0) {
                fprintf(stderr, "sandbox init: cannot set up %s: %s\n", what, strerror(-r));
                return 1;
        }
        /* The runtime's create waits for this byte (or our exit). */
        (void)!write(LFS_DAEMON_READY_FD, &(char){ LFS_DAEMON_READY }, 1);
        close(LFS_DAEMON_READY_FD);
        reap_forever();
}
