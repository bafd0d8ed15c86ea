/* SPDX-License-Identifier: MIT */
#include "leftover.h"

#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "fault.h"
#include "util.h"

/* The directory's own lock, which a sweep holds exclusively while it looks and a make
 * shared from its make to its lock: no sweep takes an entry for a dead writer's between
 * the two (concurrent inits of two projects refused each other Busy). -1 where the
 * directory cannot be opened to read (one a writer may write in but not list): then only
 * each entry's lock tells. Waits: a sweep holds it for as long as its removals take. */
static int lock_directory(int dirfd, int op) {
        int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        while (flock(fd, op) < 0)
                if (errno != EINTR) {
                        close(fd);
                        return -1;
                }
        return fd;
}

static int leftover_make(int dirfd, const char *name, int flags, mode_t mode, bool lock_dir) {
        _cleanup_close_ int directory = lock_dir ? lock_directory(dirfd, LOCK_SH) : -1;
        _cleanup_close_ int fd = -1;
        if (flags & O_DIRECTORY) {
                if (mkdirat(dirfd, name, mode) < 0)
                        return -errno;
                fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        } else {
                fd = openat(dirfd, name, flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
                if (fd < 0 && errno == EEXIST)
                        return -EEXIST;
        }
        lfs_fault_point("leftover-made"); /* made, not locked yet */
        int r = fd < 0 ? -errno : flock(fd, LOCK_EX | LOCK_NB) < 0 ? -errno : 0;
        /* ENOENT: a sweep took the directory, made but not locked yet, for a leftover. */
        if (r == -EWOULDBLOCK || r == -ENOENT)
                return -EBUSY;
        if (r < 0) {
                /* Made but not lockable (a file system without flock): not left behind. */
                (void)unlinkat(dirfd, name, flags & O_DIRECTORY ? AT_REMOVEDIR : 0);
                return r;
        }
        /* Between the make and the lock another writer may have taken it for a dead one's
         * (and removed it, or made another in its place): then it is not ours. */
        struct stat held, named;
        if (fstat(fd, &held) < 0 || fstatat(dirfd, name, &named, AT_SYMLINK_NOFOLLOW) < 0 ||
            held.st_dev != named.st_dev || held.st_ino != named.st_ino)
                return -EBUSY;
        return TAKE_FD(fd);
}

int lfs_leftover_make(int dirfd, const char *name, int flags, mode_t mode) {
        return leftover_make(dirfd, name, flags, mode, true);
}

int lfs_leftover_make_shared(int dirfd, const char *name, int flags, mode_t mode) {
        return leftover_make(dirfd, name, flags, mode, false);
}

/* dirfd/name, if a dead writer's: removed. */
static bool remove_leftover(int dirfd, const char *name, lfs_leftover_check is_garbage, void *userdata) {
        if (is_garbage && !is_garbage(userdata, name, false))
                return false;
        /* O_NONBLOCK: a FIFO of that name opens without waiting for a writer. */
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid() ||
            !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
                return false;
        lfs_fault_point("leftover-opened"); /* opened by its name, not locked yet */
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return false;
        if (is_garbage && !is_garbage(userdata, name, true))
                return false;
        /* Locked once its writer let go: the name may lead elsewhere by now (an init's
         * directory renamed to its project's name, a new writer's of the same name), and
         * what it leads to is not what was judged. */
        struct stat named;
        if (fstatat(dirfd, name, &named, AT_SYMLINK_NOFOLLOW) < 0 || named.st_dev != st.st_dev ||
            named.st_ino != st.st_ino)
                return false;
        if (S_ISREG(st.st_mode))
                return unlinkat(dirfd, name, 0) == 0;
        return lfs_leftover_remove_held(dirfd, name, fd) == 0;
}

int lfs_leftover_remove_held(int dirfd, const char *name, int fd) {
        DIR *d = lfs_opendir_at_fd(fd);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        (void)rm_rf_at(fd, de->d_name);
        closedir(d);
        return unlinkat(dirfd, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

static size_t leftovers_remove(int dirfd, const char *prefix, lfs_leftover_check is_garbage, void *userdata,
                               bool lock_dir) {
        /* Listed through a descriptor of its own, which holds the directory's lock (no make
         * between its make and its lock meanwhile): dirfd may be O_PATH (a directory one may
         * write in but not list). */
        int fd = lock_dir ? lock_directory(dirfd, LOCK_EX)
                          : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return 0;
        }
        size_t len = strlen(prefix), removed = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (!strncmp(de->d_name, prefix, len) && strcmp(de->d_name, ".") &&
                    strcmp(de->d_name, "..") && remove_leftover(dirfd, de->d_name, is_garbage, userdata))
                        removed++;
        closedir(d);
        return removed;
}

size_t lfs_leftovers_remove(int dirfd, const char *prefix, lfs_leftover_check is_garbage, void *userdata) {
        return leftovers_remove(dirfd, prefix, is_garbage, userdata, true);
}

size_t lfs_leftovers_remove_shared(int dirfd, const char *prefix, lfs_leftover_check is_garbage,
                                   void *userdata) {
        return leftovers_remove(dirfd, prefix, is_garbage, userdata, false);
}
