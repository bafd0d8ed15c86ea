/* SPDX-License-Identifier: MIT */
/* Ending a Sandbox: processes, mounts, cgroups, directory (teardown.h). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "cgroup.h"
#include "teardown.h"
#include "util.h"

int lfs_sandbox_end_processes(const char *cgroup, int timeout_ms, char **ret_why) {
        int r = lfs_cgroup_kill_wait(cgroup, timeout_ms);
        if (r < 0 && ret_why) {
                _cleanup_free_ char *left = lfs_cgroup_describe(cgroup);
                *ret_why = left ? xasprintf("processes of %s did not end within %d s: %s", cgroup,
                                            timeout_ms / 1000, left)
                                : xasprintf("cannot end the processes of %s: %s", cgroup, strerror(-r));
        }
        return r;
}

typedef struct mount_entry {
        int id;
        char *path;
        size_t depth;
} mount_entry;

static int cmp_depth(const void *a, const void *b) {
        const mount_entry *x = a, *y = b;
        return x->depth < y->depth ? -1 : x->depth > y->depth;
}

/* The mounts at or below dir, shallowest first. */
static size_t mounts_beneath(const char *dir, mount_entry **ret) {
        size_t dlen = strlen(dir), n = 0, cap = 0;
        mount_entry *out = NULL;
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        char *line = NULL;
        size_t line_cap = 0;
        while (f && getline(&line, &line_cap, f) > 0) {
                int id;
                char *path = NULL;
                if (sscanf(line, "%d %*d %*s %*s %ms", &id, &path) != 2)
                        continue;
                lfs_unescape_octal(path);
                if (strncmp(path, dir, dlen) || (path[dlen] && path[dlen] != '/')) {
                        free(path);
                        continue;
                }
                size_t depth = 0;
                for (const char *p = path; *p; p++)
                        depth += *p == '/';
                GROW(out, cap, n + 1);
                out[n++] = (mount_entry){ .id = id, .path = path, .depth = depth };
        }
        free(line);
        if (n)
                qsort(out, n, sizeof(*out), cmp_depth);
        *ret = out;
        return n;
}

static void mounts_free(mount_entry *m, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(m[i].path);
        free(m);
}

/* The mount id of an open file, from /proc/self/fdinfo (no call into its filesystem). */
static int fd_mount_id(int fd) {
        char path[64], line[128];
        snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        int id;
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "mnt_id: %d", &id) == 1)
                        return id;
        return -1;
}

/* Unmounts m if the path from dir_fd still leads to exactly that mount. */
static bool unmount_one(int dir_fd, size_t dlen, const mount_entry *m) {
        const char *rel = m->path + dlen;
        while (*rel == '/')
                rel++;
        _cleanup_close_ int fd = lfs_open_beneath(dir_fd, *rel ? rel : ".", O_PATH);
        if (fd < 0 || fd_mount_id(fd) != m->id)
                return false;
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
        return umount2(self, MNT_DETACH) == 0;
}

int lfs_unmount_beneath(const char *dir, char **ret_left) {
        size_t dlen = strlen(dir);
        mount_entry *m = NULL;
        size_t n = 0;
        /* Each pass takes the shallowest mounts (and what is below them); stacked mounts
         * take a pass each. */
        for (int pass = 0; pass < 64; pass++) {
                mounts_free(m, n);
                n = mounts_beneath(dir, &m);
                if (!n)
                        break;
                _cleanup_close_ int dir_fd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                bool progress = false;
                for (size_t i = 0; dir_fd >= 0 && i < n; i++)
                        progress |= unmount_one(dir_fd, dlen, &m[i]);
                if (!progress)
                        break;
        }
        int r = 0;
        if (n) {
                r = -EBUSY;
                if (ret_left) {
                        char *left = NULL;
                        for (size_t i = 0; i < n; i++) {
                                char *next =
                                        xasprintf("%s%s%s", left ? left : "", left ? ", " : "", m[i].path);
                                free(left);
                                left = next;
                        }
                        *ret_left = left;
                }
        }
        mounts_free(m, n);
        return r;
}

/* The directories right below name (beneath parent_fd), each removed on a thread of its
 * own before the whole goes: where the file system discards a freed block at once (ext4
 * mounted with `discard` and no journal, as on this project's test machines), each rmdir
 * waits for the disk, 0.7 to 4 ms here, and the waits overlap (4 directories: 6.1 ms one
 * after the other, 3.2 at once, medians of 15 at load 7). A Sandbox has four or five
 * (mnt, tmp, root, upper, processes). What this pass leaves (a mount that stayed, a
 * failure) the removal of the whole meets again and reports. */
#define REMOVED_AT_ONCE 8

typedef struct removal {
        int dir_fd;
        char *name;
} removal;

static void *remove_one(void *arg) {
        removal *r = arg;
        (void)rm_rf_at(r->dir_fd, r->name);
        return NULL;
}

static void remove_directories_at_once(int parent_fd, const char *name) {
        _cleanup_close_ int fd = lfs_open_beneath(parent_fd, name, O_RDONLY | O_DIRECTORY);
        DIR *d = fd < 0 ? NULL : lfs_opendir_at_fd(fd);
        if (!d)
                return;
        removal jobs[REMOVED_AT_ONCE];
        pthread_t threads[REMOVED_AT_ONCE];
        bool started[REMOVED_AT_ONCE];
        size_t n = 0;
        struct dirent *de;
        while (n < REMOVED_AT_ONCE && (de = readdir(d)))
                if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        jobs[n++] = (removal){ .dir_fd = fd, .name = xstrdup(de->d_name) };
        closedir(d);
        for (size_t i = 0; i < n; i++)
                if (!(started[i] = pthread_create(&threads[i], NULL, remove_one, &jobs[i]) == 0))
                        remove_one(&jobs[i]);
        for (size_t i = 0; i < n; i++) {
                if (started[i])
                        pthread_join(threads[i], NULL);
                free(jobs[i].name);
        }
}

int lfs_sandbox_remove(const char *cgroup, const char *dir, char **ret_why) {
        _cleanup_free_ char *left = NULL, *failed = NULL, *parent = dir ? xstrdup(dir) : NULL;
        char *why = NULL;
        int r = dir ? lfs_unmount_beneath(dir, &left) : 0;
        if (r < 0)
                why = xasprintf("still mounted: %s", left);
        int k = cgroup ? lfs_cgroup_remove_tree(cgroup, 5000) : 0;
        if (k < 0 && !why)
                why = xasprintf("cannot remove the cgroup %s: %s", cgroup, strerror(-k));
        if (k < 0 && r == 0)
                r = k;
        /* The directory last, beneath its parent: never through a symlink, never into
         * a mount that stayed. */
        char *slash = parent ? strrchr(parent, '/') : NULL;
        if (slash && slash != parent) {
                *slash = 0;
                _cleanup_close_ int parent_fd =
                        open(parent, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (parent_fd >= 0)
                        remove_directories_at_once(parent_fd, slash + 1);
                k = parent_fd < 0 ? -errno : rm_rf_at_report(parent_fd, slash + 1, &failed);
                if (k == -ENOENT)
                        k = 0;
                if (k < 0 && !why)
                        why = xasprintf("cannot remove %s/%s: %s", parent, failed ? failed : slash + 1,
                                        strerror(-k));
                if (k < 0 && r == 0)
                        r = k;
        }
        if (r < 0 && ret_why)
                *ret_why = why;
        else
                free(why);
        return r;
}
