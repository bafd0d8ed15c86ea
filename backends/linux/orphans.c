/* SPDX-License-Identifier: MIT */
/*
 * The Sandboxes whose home is gone (docs/runtime.md, "A home that is gone"). A Sandbox's
 * cgroup is named by a hash of its home's path, and only that home's records name it: a
 * home deleted while its Sandboxes' cgroups remain (a daemon killed, then the home
 * removed; or the home removed under a live daemon) left them for ever. So create labels
 * each Sandbox's cgroup with its home (the trusted.layerfs.home attribute, which only
 * root can set or read), and reclaim ends and removes the labelled cgroups whose home is
 * no longer there, in the view it was made in: never one whose home is there, never one
 * it cannot judge (made in another mount namespace or root directory, or labelled by no
 * one).
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "cgroup.h"
#include "fault.h"
#include "linux.h"
#include "names.h"
#include "network.h"
#include "numbers.h"
#include "teardown.h"

#define HOME_LABEL "trusted.layerfs.home"
/* Sandboxes: a project name, '-', a number; the tag before them: 8 hex digits, '-'. */
#define TAG_LEN 8

/* Where a home was made and which directory it is: the creator's mount namespace and
 * root directory (a path means something only in them), the home's device and inode,
 * and its birth time, so that a home made again at the same path (whose inode number the
 * filesystem may reuse) is another home. */
typedef struct home_identity {
        uint64_t mnt_ns, root_dev, root_ino;
        uint64_t dev, ino;
        int64_t born_sec;
        uint32_t born_nsec;
} home_identity;

/* This process's view: its mount namespace and root directory. */
static int own_view(home_identity *id) {
        struct stat ns, root;
        if (stat("/proc/self/ns/mnt", &ns) < 0 || stat("/", &root) < 0)
                return -errno;
        id->mnt_ns = ns.st_ino;
        id->root_dev = root.st_dev;
        id->root_ino = root.st_ino;
        return 0;
}

/* The directory at path as this process sees it (stat follows a last symlink: a home
 * moved and linked back is still there). */
static int directory_identity(const char *path, home_identity *id) {
        struct statx st;
        if (statx(AT_FDCWD, path, 0, STATX_TYPE | STATX_INO | STATX_BTIME, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.stx_mode))
                return -ENOTDIR;
        id->dev = makedev(st.stx_dev_major, st.stx_dev_minor);
        id->ino = st.stx_ino;
        id->born_sec = st.stx_mask & STATX_BTIME ? st.stx_btime.tv_sec : 0;
        id->born_nsec = st.stx_mask & STATX_BTIME ? st.stx_btime.tv_nsec : 0;
        return own_view(id);
}

int lfs_linux_label_place(const lfs_sandbox_ref *sb, lfs_error **err) {
        home_identity id = { 0 };
        int r = directory_identity(sb->home, &id);
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, -r, "cannot read what the home %s is: %s", sb->home,
                                strerror(-r));
        _cleanup_free_ char *label = xasprintf(
                "1 %s %s %llu %llu %llu %llu %llu %lld %u %s", sb->instance, lfs_network_name(sb->network),
                (unsigned long long)id.mnt_ns, (unsigned long long)id.root_dev,
                (unsigned long long)id.root_ino, (unsigned long long)id.dev, (unsigned long long)id.ino,
                (long long)id.born_sec, id.born_nsec, sb->home);
        _cleanup_close_ int fd = lfs_cgroup_open(sb->place);
        if (fd < 0 || fsetxattr(fd, HOME_LABEL, label, strlen(label), 0) < 0)
                return lfs_fail(err, LFS_FAILED, fd < 0 ? -fd : errno,
                                "cannot label the cgroup %s with its home (%s): %s; a reclaim could not "
                                "remove it once the home is gone",
                                sb->place, HOME_LABEL, strerror(fd < 0 ? -fd : errno));
        return 0;
}

/* One labelled cgroup, read back: what its Sandbox was. */
typedef struct labelled {
        char instance[33];
        char network[16];
        home_identity id;
        char *home;
} labelled;

/* The label of the cgroup fd: 1 and *ret, 0 without one (not made by a create that
 * labels), a negative errno for a label that does not read as one. */
static int read_label(int fd, labelled *ret) {
        char buf[PATH_MAX + 256];
        ssize_t k = fgetxattr(fd, HOME_LABEL, buf, sizeof(buf) - 1);
        if (k < 0)
                return errno == ENODATA ? 0 : -errno;
        buf[k] = 0;
        unsigned long long v[7];
        long long born_sec;
        int path_at = -1;
        if (sscanf(buf, "1 %32[0-9a-f] %15[a-z] %llu %llu %llu %llu %llu %lld %llu %n", ret->instance,
                   ret->network, &v[0], &v[1], &v[2], &v[3], &v[4], &born_sec, &v[5], &path_at) != 9 ||
            path_at < 0 || buf[path_at] != '/')
                return -EINVAL;
        ret->id = (home_identity){ .mnt_ns = v[0],
                                   .root_dev = v[1],
                                   .root_ino = v[2],
                                   .dev = v[3],
                                   .ino = v[4],
                                   .born_sec = born_sec,
                                   .born_nsec = (uint32_t)v[5] };
        ret->home = xstrdup(buf + path_at);
        return 1;
}

/* Splits a Sandbox cgroup's name, <tag>-<project>-<n>, checking the tag against home:
 * false for anything else. */
static bool sandbox_name(const char *name, const char *home, char **ret_project, int *ret_number) {
        _cleanup_free_ char *expected = lfs_cgroup_sandbox_path("", home, "", 0);
        /* expected is "/<tag>--0". */
        if (strncmp(name, expected + 1, TAG_LEN) || name[TAG_LEN] != '-')
                return false;
        _cleanup_free_ char *project = xstrdup(name + TAG_LEN + 1);
        char *dash = strrchr(project, '-');
        uint64_t n;
        if (!dash)
                return false;
        *dash = 0;
        if (lfs_check_project_name(project, NULL) < 0 ||
            lfs_parse_whole("sandbox", dash + 1, 1, INT32_MAX, &n, NULL) < 0)
                return false;
        *ret_project = TAKE_PTR(project);
        *ret_number = (int)n;
        return true;
}

/* The label's home directory is still at its path, the same one (device, inode, birth
 * time): what the Sandbox left in it (its mounts and directory) is there to remove. */
static bool home_directory_stays(const labelled *l) {
        home_identity now = { 0 };
        return directory_identity(l->home, &now) == 0 && now.dev == l->id.dev && now.ino == l->id.ino &&
               now.born_sec == l->id.born_sec && now.born_nsec == l->id.born_nsec;
}

/* Whether the label's home is there: its directory, still holding its records. A home
 * whose records (home.db) are gone is gone for its Sandboxes even while its directory
 * stays (rm -rf stops at a Sandbox's mounts). */
static bool home_there(const labelled *l) {
        _cleanup_free_ char *db = xasprintf("%s/home.db", l->home);
        return home_directory_stays(l) && (access(db, F_OK) == 0 || errno != ENOENT);
}

/* Whether place is still the cgroup judged (open as judged_fd): a home made again at the
 * same path names its Sandboxes by the same paths, and its create removes the old cgroup
 * there as remains and makes its own, which no one judged. */
static bool still_judged(const char *place, int judged_fd) {
        struct stat judged, now;
        return fstat(judged_fd, &judged) == 0 && stat(place, &now) == 0 && judged.st_dev == now.st_dev &&
               judged.st_ino == now.st_ino;
}

/* Ends and removes the Sandbox of place (judged_fd: the cgroup whose label was read), whose
 * home is gone. */
static void reclaim_orphan(const char *place, int judged_fd, const labelled *l, const char *project,
                           int number, lfs_orphan_fn fn, void *userdata) {
        _cleanup_free_ char *dir = xasprintf("%s/sandboxes/%s-%d", l->home, project, number);
        if (!still_judged(place, judged_fd))
                return; /* gone meanwhile, or made again: another Sandbox's now */
        lfs_sandbox_ref sb = { .home = l->home,
                               .project = project,
                               .number = number,
                               /* Only within the home's own directory, still the one it was:
                                * a path that now leads elsewhere is not the Sandbox's. */
                               .dir = home_directory_stays(l) ? dir : NULL,
                               .place = place,
                               .instance = l->instance };
        if (!lfs_network_from_name(l->network, &sb.network))
                sb.network = LFS_NETWORK_NONE;
        _cleanup_free_ char *why = NULL;
        int r = lfs_linux_reclaim(&sb, &why);
        if (r == 0)
                r = lfs_network_remove(&sb, &why);
        fn(userdata, l->home, project, number, dir, r < 0 ? (why ? why : strerror(-r)) : NULL);
}

int lfs_linux_reclaim_orphans(lfs_orphan_fn fn, void *userdata) {
        _cleanup_free_ char *root = NULL;
        lfs_error *e = NULL;
        if (geteuid() != 0 || lfs_cgroup_root(&root, &e) < 0) {
                lfs_error_free(e); /* no cgroups of ours here, or none this caller can read */
                return 0;
        }
        home_identity view = { 0 };
        int r = own_view(&view);
        if (r < 0)
                return r;
        DIR *d = opendir(root);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                _cleanup_free_ char *place = xasprintf("%s/%s", root, de->d_name);
                _cleanup_close_ int fd = lfs_cgroup_open(place);
                labelled l = { 0 };
                int k = fd < 0 ? 0 : read_label(fd, &l);
                _cleanup_free_ char *home = l.home, *project = NULL;
                int number = 0;
                if (k == 0)
                        continue; /* not a labelled Sandbox's: never ours to judge */
                if (k < 0 || !l.home || !sandbox_name(de->d_name, l.home, &project, &number)) {
                        _cleanup_free_ char *why = xasprintf(
                                "the cgroup %s: its label (%s) does not name its home as a create writes it",
                                place, HOME_LABEL);
                        fn(userdata, home ? home : "", de->d_name, 0, place, why);
                        continue;
                }
                if (l.id.mnt_ns != view.mnt_ns || l.id.root_dev != view.root_dev ||
                    l.id.root_ino != view.root_ino) {
                        /* Its home's path means something only there: it may well exist. */
                        if (!home_there(&l)) {
                                _cleanup_free_ char *why = xasprintf(
                                        "the cgroup %s was made in another mount namespace or root "
                                        "directory than this reclaim's, where its home %s may still be; run "
                                        "the reclaim there",
                                        place, l.home);
                                _cleanup_free_ char *dir =
                                        xasprintf("%s/sandboxes/%s-%d", l.home, project, number);
                                fn(userdata, l.home, project, number, dir, why);
                        }
                        continue;
                }
                if (home_there(&l))
                        continue; /* that home's records name it: its own reclaim's */
                lfs_fault_point("reclaim-orphan-judged"); /* judged gone, nothing ended yet */
                reclaim_orphan(place, fd, &l, project, number, fn, userdata);
        }
        closedir(d);
        return 0;
}
