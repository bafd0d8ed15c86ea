/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static void out_of_memory(void) {
        fputs("layerfs: out of memory\n", stderr);
        abort();
}

void *xmalloc(size_t n) {
        void *p = malloc(n ? n : 1);
        if (!p)
                out_of_memory();
        return p;
}

void *xcalloc(size_t n, size_t size) {
        void *p = calloc(n ? n : 1, size ? size : 1);
        if (!p)
                out_of_memory();
        return p;
}

void *xrealloc(void *p, size_t n) {
        p = realloc(p, n ? n : 1);
        if (!p)
                out_of_memory();
        return p;
}

char *xstrdup(const char *s) {
        char *p = strdup(s);
        if (!p)
                out_of_memory();
        return p;
}

char *xasprintf(const char *fmt, ...) {
        va_list ap;
        char *s;
        va_start(ap, fmt);
        int r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                out_of_memory();
        return s;
}

void grow_array(void **array, size_t *cap, size_t need, size_t elem) {
        if (need <= *cap)
                return;
        size_t n = *cap ? *cap * 2 : 16;
        while (n < need)
                n *= 2;
        *array = xrealloc(*array, n * elem);
        memset((char *)*array + *cap * elem, 0, (n - *cap) * elem);
        *cap = n;
}

char *path_join(const char *dir, const char *name) {
        if (!dir || !*dir)
                return xstrdup(name);
        return xasprintf("%s/%s", dir, name);
}

int lfs_open_beneath(int dirfd, const char *path, int flags) {
        struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (fd >= 0 || errno != ENOSYS)
                return fd < 0 ? -errno : fd;
        /* Before openat2 (Linux 5.6): one component at a time, none a symlink or "..". */
        _cleanup_free_ char *copy = xstrdup(path);
        int at = dirfd;
        char *save = NULL;
        for (char *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
                bool last = !save || !*save || strspn(save, "/") == strlen(save);
                if (!strcmp(part, "..")) {
                        fd = -EXDEV;
                        break;
                }
                fd = openat(at, part,
                            last ? flags | O_NOFOLLOW | O_CLOEXEC
                                 : O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        fd = -errno;
                if (at != dirfd)
                        close(at);
                if (fd < 0 || last)
                        break;
                at = fd;
        }
        return fd;
}

/* The first path that could not be removed, relative to where rm_rf_at started. */
static void note_failure(char **ret_failed, const char *prefix, const char *name) {
        if (ret_failed && !*ret_failed)
                *ret_failed = path_join(prefix, name);
}

static int rm_rf_inner(int dirfd, const char *name, const char *prefix, char **ret_failed);

static int rm_rf_children(int dirfd, const char *prefix, char **ret_failed) {
        DIR *d = fdopendir(dirfd);
        if (!d) {
                close(dirfd);
                return -errno;
        }
        int ret = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                int r = rm_rf_inner(dirfd, de->d_name, prefix, ret_failed);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        closedir(d);
        return ret;
}

/* Never follows a symlink and never crosses into a mount: a directory with something
 * mounted on it stays, with what the mount holds (-EBUSY). */
static int rm_rf_inner(int dirfd, const char *name, const char *prefix, char **ret_failed) {
        if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        int unlink_errno = errno;
        if (errno != EISDIR && errno != EPERM) {
                note_failure(ret_failed, prefix, name);
                return -unlink_errno;
        }
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV };
        int fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
        if (fd < 0 && errno == ENOSYS) {
                struct stat parent, child;
                fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd >= 0 &&
                    (fstat(dirfd, &parent) < 0 || fstat(fd, &child) < 0 || parent.st_dev != child.st_dev)) {
                        close(fd);
                        fd = -1;
                        errno = EXDEV;
                }
        }
        if (fd < 0) {
                if (errno == ENOENT)
                        return 0;
                /* Not a directory after all: what unlink said is the reason. */
                int r = errno == EXDEV ? -EBUSY : errno == ENOTDIR ? -unlink_errno : -errno;
                note_failure(ret_failed, prefix, name);
                return r;
        }
        /* Objects are read-only; the directory must be writable to empty it. */
        (void)fchmod(fd, 0700);
        _cleanup_free_ char *inner = path_join(prefix, name);
        int r = rm_rf_children(fd, inner, ret_failed);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
                int e = -errno;
                note_failure(ret_failed, prefix, name);
                return r < 0 ? r : e;
        }
        return r;
}

int rm_rf_at_report(int dirfd, const char *name, char **ret_failed) {
        const char *slash = strrchr(name, '/');
        if (!slash)
                return rm_rf_inner(dirfd, name, "", ret_failed);
        /* A path: its last component is removed beneath its parent, so that what is
         * checked for a mount is the entry itself. */
        _cleanup_free_ char *parent =
                slash == name ? xstrdup("/") : xasprintf("%.*s", (int)(slash - name), name);
        if (!slash[1])
                return -EINVAL;
        _cleanup_close_ int fd = openat(dirfd, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        return rm_rf_inner(fd, slash + 1, parent, ret_failed);
}

int rm_rf_at(int dirfd, const char *name) {
        return rm_rf_at_report(dirfd, name, NULL);
}

void lfs_unescape_octal(char *s) {
        char *out = s;
        for (char *p = s; *p; p++) {
                if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
                    p[3] >= '0' && p[3] <= '7') {
                        *out++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                        p += 3;
                } else {
                        *out++ = *p;
                }
        }
        *out = 0;
}

/* "<prefix><pid>-...": is that writer's process gone? */
static bool writer_is_gone(const char *name, const char *prefix) {
        size_t len = strlen(prefix);
        if (strncmp(name, prefix, len))
                return false;
        char *end;
        long pid = strtol(name + len, &end, 10);
        return pid > 0 && *end == '-' && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

void for_each_dead_writer(int dirfd, const char *prefix, dead_writer_fn fn, void *userdata) {
        int fd = dup(dirfd);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d)))
                if (writer_is_gone(de->d_name, prefix))
                        fn(userdata, dirfd, de->d_name);
        closedir(d);
}
