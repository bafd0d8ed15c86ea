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

size_t path_buf_push(path_buf *p, const char *name) {
        size_t before = p->len, n = strlen(name);
        GROW(p->s, p->cap, p->len + n + 2);
        if (p->len)
                p->s[p->len++] = '/';
        memcpy(p->s + p->len, name, n + 1);
        p->len += n;
        return before;
}

void path_buf_cut(path_buf *p, size_t len) {
        if (p->s)
                p->s[len] = 0;
        p->len = len;
}

void path_buf_done(path_buf *p) {
        free(p->s);
        *p = (path_buf){ 0 };
}

/* Before Linux 5.6 (no openat2): one component at a time, none of them a symlink. */
static int open_dir_by_components(int dirfd, const char *path) {
        _cleanup_free_ char *copy = xstrdup(path);
        int fd = dup(dirfd);
        if (fd < 0)
                return -errno;
        char *save = NULL;
        for (char *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
                int next = strcmp(part, "..")
                                   ? openat(fd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                                   : -1;
                int e = strcmp(part, "..") ? errno : EXDEV;
                close(fd);
                if (next < 0)
                        return -e;
                fd = next;
        }
        return fd;
}

int open_dir_beneath(int dirfd, const char *path) {
        struct open_how how = { .flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        for (int tries = 0;; tries++) {
                long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
                if (fd >= 0)
                        return (int)fd;
                /* EAGAIN: a rename elsewhere raced with the lookup; the kernel asks to retry. */
                if (errno == EAGAIN && tries < 16)
                        continue;
                return errno == ENOSYS ? open_dir_by_components(dirfd, path) : -errno;
        }
}

/* A directory being emptied: its stream, and its name in the one above (NULL at the top). */
typedef struct rm_level {
        DIR *d;
        char *name;
} rm_level;

/* Directories open at once: a tree deeper than this is flattened as it is met. */
#define RM_OPEN_MAX 32

/* The directory dirfd/name opened to be emptied, or NULL with errno set. */
static DIR *open_for_removal(int dirfd, const char *name) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        /* Objects are read-only; the directory must be writable to empty it. */
        (void)fchmod(fd, 0700);
        DIR *d = fdopendir(fd);
        if (!d) {
                int e = errno;
                close(fd);
                errno = e;
        }
        return d;
}

/* Moves dir_fd/name up into the top directory under a name of its own. */
static int hoist(int dir_fd, const char *name, int top_fd, unsigned long *counter) {
        for (;;) {
                char to[64];
                snprintf(to, sizeof(to), ".layerfs-rm-%lu", (*counter)++);
                if (renameat2(dir_fd, name, top_fd, to, RENAME_NOREPLACE) == 0)
                        return 0;
                if (errno != EEXIST)
                        return -errno;
        }
}

/* Empties the directory top, depth first, with at most RM_OPEN_MAX directories open: one
 * found deeper is moved up into top (renameat between directories already open, never
 * through ".."), where the next pass finds it. Memory and fds stay bounded whatever the
 * depth; each pass brings the deepest part RM_OPEN_MAX - 1 levels up. */
static int rm_rf_children(DIR *top) {
        int ret = 0;
        unsigned long counter = 0;
        for (bool moved = true; moved;) {
                moved = false;
                ret = 0; /* what an earlier pass could not remove, this one tries again */
                rm_level stack[RM_OPEN_MAX] = { { .d = top } };
                size_t n = 1;
                rewinddir(top);
                while (n) {
                        rm_level *cur = &stack[n - 1];
                        int cur_fd = dirfd(cur->d);
                        errno = 0;
                        struct dirent *de = readdir(cur->d);
                        if (!de) {
                                if (errno && ret == 0)
                                        ret = -errno;
                                if (--n == 0)
                                        break;
                                closedir(cur->d);
                                if (unlinkat(dirfd(stack[n - 1].d), cur->name, AT_REMOVEDIR) < 0 &&
                                    errno != ENOENT && ret == 0)
                                        ret = -errno;
                                free(cur->name);
                                continue;
                        }
                        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                                continue;
                        if (unlinkat(cur_fd, de->d_name, 0) == 0 || errno == ENOENT)
                                continue;
                        int r = -errno;
                        if (r == -EISDIR || r == -EPERM) {
                                DIR *sub;
                                if (n == RM_OPEN_MAX) {
                                        r = hoist(cur_fd, de->d_name, dirfd(top), &counter);
                                        moved = moved || r == 0;
                                } else if ((sub = open_for_removal(cur_fd, de->d_name))) {
                                        stack[n++] = (rm_level){ .d = sub, .name = xstrdup(de->d_name) };
                                        r = 0;
                                } else {
                                        r = -errno;
                                }
                        }
                        if (r < 0 && r != -ENOENT && ret == 0)
                                ret = r;
                }
        }
        return ret;
}

int rm_rf_at(int dirfd, const char *name) {
        if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        DIR *top = open_for_removal(dirfd, name);
        if (!top)
                return errno == ENOENT ? 0 : -errno;
        int r = rm_rf_children(top);
        closedir(top);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                return r < 0 ? r : -errno;
        return r;
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
