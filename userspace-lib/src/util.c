/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

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

static int rm_rf_children(int dirfd) {
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
                int r = rm_rf_at(dirfd, de->d_name);
                if (r < 0 && ret == 0)
                        ret = r;
        }
        closedir(d);
        return ret;
}

int rm_rf_at(int dirfd, const char *name) {
        if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        /* Objects are read-only; the directory must be writable to empty it. */
        (void)fchmod(fd, 0700);
        int r = rm_rf_children(fd);
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
