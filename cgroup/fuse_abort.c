/* SPDX-License-Identifier: MIT */
/*
 * Releasing the processes of a cgroup that a FUSE connection holds (cgroup.h,
 * lfs_cgroup_abort_fuse). A process whose FUSE request has been read by its server waits
 * for the answer uninterruptibly, SIGKILL or not; if the server is one of the Sandbox's
 * own processes that will never answer, or the waiting process holds the connection's
 * /dev/fuse itself (so that killing the server does not end the connection), only an
 * abort through the fusectl filesystem ends the wait.
 *
 * Which connections are the subtree's: those whose /dev/fuse one of its processes holds
 * (the kernel names the connection in the descriptor's fdinfo, "fuse_connection: N"),
 * and those mounted in a mount namespace of one of its processes but not in ours (a
 * mount made in `unshare -Urm`: the processes' own). A connection mounted in our
 * namespace (another Sandbox's Workspace, a user's sshfs) is never aborted for being
 * visible to a process of the subtree.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>

#include "cgroup.h"
#include "util.h"

#define FUSECTL_SUPER_MAGIC 0x65735543

typedef struct conn_set {
        unsigned *ids;
        size_t n, cap;
} conn_set;

static void conn_add(conn_set *s, unsigned id) {
        for (size_t i = 0; i < s->n; i++)
                if (s->ids[i] == id)
                        return;
        GROW(s->ids, s->cap, s->n + 1);
        s->ids[s->n++] = id;
}

static bool conn_has(const conn_set *s, unsigned id) {
        for (size_t i = 0; i < s->n; i++)
                if (s->ids[i] == id)
                        return true;
        return false;
}

/* The connections of the FUSE mounts in a mountinfo: a fuse (not fuseblk) superblock's
 * device is 0:N, and N names its connection. */
static void mounted_connections(const char *mountinfo, conn_set *out) {
        _cleanup_fclose_ FILE *f = fopen(mountinfo, "re");
        if (!f)
                return;
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, f) > 0) {
                unsigned major, minor;
                const char *sep = strstr(line, " - ");
                if (!sep || sscanf(line, "%*s %*s %u:%u", &major, &minor) != 2 || major != 0)
                        continue;
                const char *type = sep + 3;
                if (!strncmp(type, "fuse ", 5) || !strncmp(type, "fuse.", 5))
                        conn_add(out, minor);
        }
        free(line);
}

/* The connections whose /dev/fuse the thread holds. Reading fdinfo never calls into the
 * filesystem of the file (stat on /proc/PID/fd/N would, and could hang on the very mount
 * we are rescuing from). */
static void held_connections(int tid, conn_set *out) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fdinfo", tid);
        DIR *d = opendir(path);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC);
                FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
                if (!f) {
                        if (fd >= 0)
                                close(fd);
                        continue;
                }
                char line[128];
                unsigned id;
                while (fgets(line, sizeof(line), f))
                        if (sscanf(line, "fuse_connection: %u", &id) == 1)
                                conn_add(out, id);
                fclose(f);
        }
        closedir(d);
}

typedef struct scan {
        char own_ns[64]; /* readlink of /proc/self/ns/mnt */
        conn_set ours; /* mounted in our namespace */
        conn_set found;
} scan;

static void scan_thread(int tid, void *userdata) {
        scan *s = userdata;
        held_connections(tid, &s->found);
        char path[64], ns[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", tid);
        ssize_t k = readlink(path, ns, sizeof(ns) - 1);
        if (k <= 0)
                return;
        ns[k] = 0;
        if (!strcmp(ns, s->own_ns))
                return;
        conn_set theirs = { 0 };
        snprintf(path, sizeof(path), "/proc/%d/mountinfo", tid);
        mounted_connections(path, &theirs);
        for (size_t i = 0; i < theirs.n; i++)
                if (!conn_has(&s->ours, theirs.ids[i]))
                        conn_add(&s->found, theirs.ids[i]);
        free(theirs.ids);
}

/* The fusectl filesystem: /sys/fs/fuse/connections where it is mounted, else an instance
 * of our own made with the new mount API and never attached anywhere (no mount appears in
 * any namespace, nothing to clean up: closing the fd releases it). */
static int open_fusectl(void) {
        int fd = open("/sys/fs/fuse/connections", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct statfs fs;
        if (fd >= 0 && fstatfs(fd, &fs) == 0 && fs.f_type == FUSECTL_SUPER_MAGIC)
                return fd;
        if (fd >= 0)
                close(fd);
        _cleanup_close_ int fsfd = (int)syscall(SYS_fsopen, "fusectl", FSOPEN_CLOEXEC);
        if (fsfd < 0)
                return -errno;
        if (syscall(SYS_fsconfig, fsfd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        int mfd = (int)syscall(SYS_fsmount, fsfd, FSMOUNT_CLOEXEC, 0);
        return mfd < 0 ? -errno : mfd;
}

int lfs_cgroup_abort_fuse(int cgroup_fd) {
        scan s = { 0 };
        ssize_t k = readlink("/proc/self/ns/mnt", s.own_ns, sizeof(s.own_ns) - 1);
        s.own_ns[k > 0 ? k : 0] = 0;
        mounted_connections("/proc/self/mountinfo", &s.ours);
        /* Every thread of the subtree: cgroup.threads lists them all. */
        lfs_cgroup_each_id(cgroup_fd, "cgroup.threads", scan_thread, &s);
        int r = 0;
        if (s.found.n) {
                _cleanup_close_ int ctl = open_fusectl();
                if (ctl < 0)
                        r = ctl;
                for (size_t i = 0; ctl >= 0 && i < s.found.n; i++) {
                        char name[32];
                        snprintf(name, sizeof(name), "%u/abort", s.found.ids[i]);
                        _cleanup_close_ int fd = openat(ctl, name, O_WRONLY | O_CLOEXEC);
                        if (fd >= 0 && write(fd, "1", 1) == 1)
                                r++;
                }
        }
        free(s.ours.ids);
        free(s.found.ids);
        return r;
}
