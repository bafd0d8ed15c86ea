/* SPDX-License-Identifier: MIT */
/* A linux Sandbox's limits on its cgroup (resource_limits.h). */
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>

#include "cgroup.h"
#include "resource_limits.h"
#include "util.h"

/* One limit of lfs_sandbox_limits: its option, its controller and the file it sets. */
typedef struct cgroup_limit {
        const char *option;
        const char *controller;
        const char *file;
} cgroup_limit;

static const cgroup_limit memory_limit = { "--memory", "memory", "memory.max" };
static const cgroup_limit pids_limit = { "--pids", "pids", "pids.max" };
static const cgroup_limit cpu_limit = { "--cpus", "cpu", "cpu.max" };

static int refuse(const cgroup_limit *l, const char *root, lfs_error **err) {
        struct utsname u;
        const char *host = uname(&u) == 0 ? u.nodename : "this host";
        _cleanup_free_ char *offered = lfs_cgroup_offered(root);
        bool v1 = lfs_cgroup_v1_bound(l->controller);
        return lfs_fail(
                err, LFS_UNSUPPORTED, EOPNOTSUPP,
                "%s needs the cgroup controller '%s', which host %s does not offer to LayerFS's cgroup "
                "root %s (it offers %s)%s; leave %s out, or run where cgroup v2 has that controller "
                "('layerfs runtime status' lists cgroup:%s)",
                l->option, l->controller, host, root, *offered ? offered : "none",
                v1 ? ": it is bound to a cgroup v1 hierarchy here (a hybrid layout); a host booted "
                     "with systemd.unified_cgroup_hierarchy=1 has it"
                   : "",
                l->option, l->controller);
}

int lfs_linux_check_limits(const lfs_platform *p, const char *root, const lfs_sandbox_limits *limits,
                           lfs_error **err) {
        (void)p;
        const struct {
                bool asked;
                const cgroup_limit *limit;
        } wanted[] = { { limits->memory > 0, &memory_limit },
                       { limits->pids > 0, &pids_limit },
                       { limits->cpus > 0, &cpu_limit } };
        for (size_t i = 0; i < ELEMENTSOF(wanted); i++)
                if (wanted[i].asked && !lfs_cgroup_offers(root, wanted[i].limit->controller))
                        return refuse(wanted[i].limit, root, err);
        return 0;
}

static int apply(const char *place, const cgroup_limit *l, const char *value, lfs_error **err) {
        int r = lfs_cgroup_enable(place, l->controller);
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, -r,
                                "cannot enable the cgroup controller '%s' for %s (%s: %s): %s",
                                l->controller, place, l->option, value, strerror(-r));
        if ((r = lfs_cgroup_write(place, l->file, value)) < 0)
                return lfs_fail(err, LFS_FAILED, -r, "cannot write '%s' to %s/%s (%s): %s", value, place,
                                l->file, l->option, strerror(-r));
        return 0;
}

int lfs_linux_apply_limits(const char *place, const lfs_sandbox_limits *limits, lfs_error **err) {
        char value[64];
        int r = 0;
        if (limits->memory > 0) {
                snprintf(value, sizeof(value), "%llu", (unsigned long long)limits->memory);
                r = apply(place, &memory_limit, value, err);
        }
        if (r == 0 && limits->pids > 0) {
                snprintf(value, sizeof(value), "%llu", (unsigned long long)limits->pids);
                r = apply(place, &pids_limit, value, err);
        }
        if (r == 0 && limits->cpus > 0) {
                snprintf(value, sizeof(value), "%lld %d",
                         (long long)(limits->cpus * LFS_CPU_PERIOD_US + 0.5), LFS_CPU_PERIOD_US);
                r = apply(place, &cpu_limit, value, err);
        }
        return r;
}

/* The parts of the budget: each a directory of its tmpfs bound at <dir>/<name>. view-tmp
 * only for a Sandbox with ids of its own (namespaces), whose init makes its /tmp and
 * /dev/shm there (init/sandbox_init.c). */
static const char *const disk_parts[] = { "tmp", "upper", "processes", "view-tmp" };

/* How many bytes of the budget one inode stands for: a page, so that the budget holds as
 * many files as it could hold files of one page each. A tmpfs counts no block for an empty
 * file, a directory or an attribute, and without nr_inodes has half the host's pages as
 * its inodes whatever its size: a command of a 1 MiB budget made 400,000 empty files
 * (+407 MB of the kernel's memory, df saying 0 used) and hung 300 MB of user.* attributes
 * on one file (the kernel counts attributes against nr_inodes * 1 KiB).
 * tests/adversarial/test_namespaces_escape2.sh. */
#define DISK_BYTES_PER_INODE 4096u

int lfs_linux_make_disk(const lfs_sandbox_ref *sb, int dir_fd, uint64_t bytes, lfs_error **err) {
        _cleanup_free_ char *disk = xasprintf("%s/disk", sb->dir),
                            *options = xasprintf("size=%llu,nr_inodes=%llu,mode=0700",
                                                 (unsigned long long)bytes,
                                                 (unsigned long long)(bytes / DISK_BYTES_PER_INODE));
        /* Made here, before anything of the Sandbox runs: nothing beneath dir is anyone
         * else's yet, and the paths are checked beneath dir_fd all the same. */
        if (mkdirat(dir_fd, "disk", 0700) < 0 && errno != EEXIST)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s: %s", disk, strerror(errno));
        _cleanup_close_ int disk_fd = lfs_open_beneath(dir_fd, "disk", O_PATH | O_DIRECTORY);
        if (disk_fd < 0)
                return lfs_fail(err, LFS_FAILED, -disk_fd, "cannot open %s: %s", disk, strerror(-disk_fd));
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", disk_fd);
        if (mount("layerfs-disk", self, "tmpfs", MS_NOSUID | MS_NODEV, options) < 0)
                return lfs_fail(err, LFS_FAILED, errno,
                                "cannot mount the disk budget's tmpfs of %llu bytes on %s: %s",
                                (unsigned long long)bytes, disk, strerror(errno));
        _cleanup_close_ int budget_fd = lfs_open_beneath(dir_fd, "disk", O_DIRECTORY | O_RDONLY);
        if (budget_fd < 0)
                return lfs_fail(err, LFS_FAILED, -budget_fd, "cannot open %s: %s", disk,
                                strerror(-budget_fd));
        for (size_t i = 0; i < ELEMENTSOF(disk_parts); i++) {
                const char *name = disk_parts[i];
                bool view_tmp = !strcmp(name, "view-tmp");
                if (view_tmp && !sb->id_base)
                        continue;
                _cleanup_free_ char *at = xasprintf("%s/%s", sb->dir, name);
                if ((mkdirat(budget_fd, name, 0700) < 0 && errno != EEXIST) ||
                    (view_tmp && fchownat(budget_fd, name, lfs_host_id(sb, 0), lfs_host_id(sb, 0),
                                          AT_SYMLINK_NOFOLLOW) < 0) ||
                    (mkdirat(dir_fd, name, 0700) < 0 && errno != EEXIST))
                        return lfs_fail(err, LFS_FAILED, errno, "cannot make %s/%s or %s: %s", disk, name,
                                        at, strerror(errno));
                _cleanup_close_ int from = lfs_open_beneath(budget_fd, name, O_PATH | O_DIRECTORY),
                                    to = lfs_open_beneath(dir_fd, name, O_PATH | O_DIRECTORY);
                char from_path[64], to_path[64];
                snprintf(from_path, sizeof(from_path), "/proc/self/fd/%d", from);
                snprintf(to_path, sizeof(to_path), "/proc/self/fd/%d", to);
                if (from < 0 || to < 0 || mount(from_path, to_path, NULL, MS_BIND, NULL) < 0)
                        return lfs_fail(err, LFS_FAILED,
                                        from < 0 ? -from
                                        : to < 0 ? -to
                                                 : errno,
                                        "cannot bind %s/%s at %s: %s", disk, name, at,
                                        strerror(from < 0 ? -from
                                                 : to < 0 ? -to
                                                          : errno));
        }
        return 0;
}
