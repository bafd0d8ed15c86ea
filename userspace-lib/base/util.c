/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

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

long long lfs_now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec lfs_monotonic_deadline(long long ms) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        /* A deadline already past is now: a negative remainder would make tv_nsec negative,
         * which pthread_cond_timedwait refuses with EINVAL at once, again and again, to a
         * waiter that waits for ETIMEDOUT (a command that came after the watcher's load wait
         * ended spun so, holding the daemon's lock: the whole daemon hung). */
        if (ms < 0)
                ms = 0;
        t.tv_nsec += (ms % 1000) * 1000000L;
        t.tv_sec += ms / 1000 + t.tv_nsec / 1000000000L;
        t.tv_nsec %= 1000000000L;
        return t;
}

void lfs_boot_id_read(char *buf, size_t cap) {
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
        buf[0] = 0;
        if (f) {
                if (!fgets(buf, (int)cap, f))
                        buf[0] = 0;
                fclose(f);
        }
        buf[strcspn(buf, "\n")] = 0;
}

void *xmalloc_io(size_t n) {
        void *p = NULL;
        if (posix_memalign(&p, 4096, n ? n : 1) != 0)
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
        size_t before = p->len, n = strlen(name), need = p->len + n + 2;
        if (!p->s || need > p->cap) {
                p->cap = need > 2 * p->cap ? need : 2 * p->cap;
                p->s = xrealloc(p->s, p->cap);
        }
        char *end = p->s + p->len;
        if (p->len)
                *end++ = '/';
        memcpy(end, name, n + 1);
        p->len = (size_t)(end - p->s) + n;
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

int lfs_open_beneath(int dirfd, const char *path, int flags) {
        struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
                                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
        int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
                return fd < 0 ? -errno : fd;
        /* Before openat2 (Linux 5.6), or where a seccomp filter refuses it EPERM (container
         * runtimes' profiles older than the call: every import of a tree failed "cannot
         * read: Operation not permitted"): one component at a time, none a symlink or "..".
         * A file's own EPERM comes back from these opens. */
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
static void note_failure(char **ret_failed, const path_buf *dir, const char *name) {
        if (ret_failed && !*ret_failed)
                *ret_failed = name ? path_join(dir->s, name) : xstrdup(dir->s);
}

/* dirfd/name, a directory, opened to be emptied: never through a symlink and never into
 * a mount (-EBUSY: what is mounted there stays, and so does the directory). NULL with
 * *ret_err set (0 when it is gone) otherwise; unlink_errno is why it was not unlinked. */
static DIR *open_for_removal(int dirfd, const char *name, int unlink_errno, int *ret_err) {
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
                /* Not a directory after all: what unlink said is the reason. */
                *ret_err = errno == ENOENT    ? 0
                           : errno == EXDEV   ? -EBUSY
                           : errno == ENOTDIR ? -unlink_errno
                                              : -errno;
                return NULL;
        }
        /* Objects are read-only; the directory must be writable to empty it. */
        (void)fchmod(fd, 0700);
        DIR *d = fdopendir(fd);
        if (!d) {
                *ret_err = -errno;
                close(fd);
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

/* A directory being emptied: its stream, its name in the one above (NULL at the top),
 * and the length of its path in the walk's path buffer. */
typedef struct rm_level {
        DIR *d;
        char *name;
        size_t path_len;
} rm_level;

/* Directories open at once: a tree deeper than this is flattened as it is met. */
#define RM_OPEN_MAX 32

/* One depth-first pass over top, at most RM_OPEN_MAX directories open: a directory met
 * deeper is moved up into top (renameat between directories already open, never through
 * ".."), for the next pass. Memory and fds stay bounded whatever the depth, and each
 * pass brings the deepest part RM_OPEN_MAX - 1 levels up. *moved says whether it moved
 * any; path holds top's path on entry and on return. */
static int rm_pass(DIR *top, path_buf *path, unsigned long *counter, bool *moved, char **ret_failed) {
        rm_level stack[RM_OPEN_MAX] = { { .d = top, .path_len = path->len } };
        size_t n = 1;
        int ret = 0;
        rewinddir(top);
        while (n) {
                rm_level *cur = &stack[n - 1];
                int cur_fd = dirfd(cur->d), r = 0;
                errno = 0;
                struct dirent *de = readdir(cur->d);
                if (!de) {
                        if (errno && ret == 0)
                                ret = -errno;
                        if (--n == 0)
                                break;
                        closedir(cur->d);
                        path_buf_cut(path, stack[n - 1].path_len);
                        if (unlinkat(dirfd(stack[n - 1].d), cur->name, AT_REMOVEDIR) < 0 &&
                            errno != ENOENT) {
                                r = -errno;
                                note_failure(ret_failed, path, cur->name);
                        }
                        free(cur->name);
                } else if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
                           unlinkat(cur_fd, de->d_name, 0) < 0 && errno != ENOENT) {
                        int unlink_errno = errno;
                        DIR *sub = NULL;
                        if (unlink_errno != EISDIR && unlink_errno != EPERM)
                                r = -unlink_errno;
                        else if (n < RM_OPEN_MAX)
                                sub = open_for_removal(cur_fd, de->d_name, unlink_errno, &r);
                        else if ((r = hoist(cur_fd, de->d_name, dirfd(top), counter)) == 0)
                                *moved = true;
                        if (r < 0)
                                note_failure(ret_failed, path, de->d_name);
                        if (sub) {
                                path_buf_push(path, de->d_name);
                                stack[n++] = (rm_level){ .d = sub,
                                                         .name = xstrdup(de->d_name),
                                                         .path_len = path->len };
                        }
                }
                if (r < 0 && ret == 0)
                        ret = r;
        }
        return ret;
}

/* rm -rf of dirfd/name, name one component; prefix is dirfd's path for the report. */
static int rm_rf_entry(int dirfd, const char *name, const char *prefix, char **ret_failed) {
        if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
                return 0;
        int unlink_errno = errno, r = -unlink_errno;
        path_buf path = { 0 };
        if (*prefix)
                path_buf_push(&path, prefix);
        DIR *top = NULL;
        if (unlink_errno == EISDIR || unlink_errno == EPERM)
                top = open_for_removal(dirfd, name, unlink_errno, &r);
        if (!top) {
                if (r < 0)
                        note_failure(ret_failed, &path, name);
                path_buf_done(&path);
                return r;
        }
        size_t top_len = path_buf_push(&path, name);
        unsigned long counter = 0;
        _cleanup_free_ char *failed = NULL;
        bool moved = true;
        r = 0;
        /* What an earlier pass could not remove, the next one tries again: the last says. */
        while (moved) {
                moved = false;
                free(TAKE_PTR(failed));
                r = rm_pass(top, &path, &counter, &moved, ret_failed ? &failed : NULL);
        }
        closedir(top);
        path_buf_cut(&path, top_len);
        if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT) {
                int e = -errno;
                if (!failed)
                        failed = path_join(path.s, name);
                r = r < 0 ? r : e;
        }
        if (r < 0 && ret_failed && !*ret_failed)
                *ret_failed = TAKE_PTR(failed);
        path_buf_done(&path);
        return r;
}

int rm_rf_at_report(int dirfd, const char *name, char **ret_failed) {
        const char *slash = strrchr(name, '/');
        if (!slash)
                return rm_rf_entry(dirfd, name, "", ret_failed);
        /* A path: its last component is removed beneath its parent, so that what is
         * checked for a mount is the entry itself. */
        _cleanup_free_ char *parent =
                slash == name ? xstrdup("/") : xasprintf("%.*s", (int)(slash - name), name);
        if (!slash[1])
                return -EINVAL;
        _cleanup_close_ int fd = openat(dirfd, parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        return rm_rf_entry(fd, slash + 1, parent, ret_failed);
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

int lfs_strcmp_ptrs(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

DIR *lfs_opendir_at_fd(int dirfd) {
        int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0)
                return NULL;
        DIR *d = fdopendir(fd);
        if (!d) {
                int e = errno;
                close(fd);
                errno = e;
        }
        return d;
}

ssize_t lfs_pread_full(int fd, void *buf, size_t len, off_t offset) {
        size_t done = 0;
        while (done < len) {
                ssize_t k = pread(fd, (char *)buf + done, len - done, offset + (off_t)done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                done += (size_t)k;
        }
        return (ssize_t)done;
}

ssize_t lfs_pwrite_full(int fd, const void *buf, size_t len, off_t offset) {
        size_t done = 0;
        while (done < len) {
                ssize_t k = pwrite(fd, (const char *)buf + done, len - done, offset + (off_t)done);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break; /* never for a file: a device that takes nothing more */
                done += (size_t)k;
        }
        return (ssize_t)done;
}

bool lfs_env_reaches_daemon(const char *entry) {
        static const char *const prefixes[] = { "LAYERFS_", "LD_",     "GLIBC_",  "MALLOC_",  "LC_",
                                                "FUSE_",    "LIBBPF_", "SQLITE_", "OPENSSL_", NULL };
        static const char *const names[] = { "LANG",         "LANGUAGE",      "TZ",
                                             "TZDIR",        "TMPDIR",        "PATH",
                                             "NLSPATH",      "LOCPATH",       "GCONV_PATH",
                                             "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS",
                                             "MSAN_OPTIONS", "TSAN_OPTIONS",  NULL };
        for (size_t i = 0; prefixes[i]; i++)
                if (!strncmp(entry, prefixes[i], strlen(prefixes[i])))
                        return true;
        for (size_t i = 0; names[i]; i++) {
                size_t len = strlen(names[i]);
                if (!strncmp(entry, names[i], len) && entry[len] == '=')
                        return true;
        }
        return false;
}

/* What the child of lfs_run_in_shared_child runs, and what it returned. */
typedef struct shared_child {
        int (*fn)(void *arg);
        void *arg;
        int result;
} shared_child;

static int shared_child_main(void *arg) {
        shared_child *c = arg;
        c->result = c->fn(c->arg);
        _exit(0);
}

int lfs_run_in_shared_child(int (*fn)(void *arg), void *arg, int flags) {
        /* The child runs on this frame's stack while the caller's thread waits for it. */
        _Alignas(16) char stack[64 * 1024];
        /* What the caller reads if the child ended before it returned. */
        shared_child c = { .fn = fn, .arg = arg, .result = -EINTR };
        /* No handler of the caller's runs in the child, on memory it shares. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        /* No exit signal: the caller's SIGCHLD (a handler, or SIG_IGN, which would reap
         * the child before our wait) is none of this child's business. */
        pid_t pid = clone(shared_child_main, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | flags, &c);
        int e = errno;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (pid < 0)
                return -e;
        /* It has exited (CLONE_VFORK): this only reaps it. */
        while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
                ;
        return c.result;
}

/* clone3 with a stack of the child's own: glibc 2.36 has no wrapper for it, and a child that
 * shares the caller's memory cannot return from syscall() on the caller's stack as a fork's
 * child can. The trampoline makes the call; in the child (the kernel gave it the stack that
 * args names and a copy of every register but the result), it calls fn(arg) and exits with
 * what fn returned; in the caller it returns what the kernel gave: a pid or -errno. One row
 * per architecture; any other has none and lfs_clone3_shared says -ENOSYS. */
#if defined(__x86_64__)
#define LFS_CLONE3_TRAMPOLINE 1
_Static_assert(__NR_clone3 == 435 && __NR_exit == 60, "the numbers the x86_64 trampoline calls");
/* args in rdi, size in rsi, fn in rdx, arg in rcx. The kernel keeps every register but rax,
 * rcx and r11 across a system call, in both processes: fn and arg go across in r8 and r9.
 * The child's stack is aligned to 16 bytes, so fn starts as the ABI wants after the call. */
__asm__(".pushsection .text\n"
        ".globl lfs_clone3_trampoline\n"
        ".hidden lfs_clone3_trampoline\n"
        ".type lfs_clone3_trampoline, @function\n"
        "lfs_clone3_trampoline:\n"
        ".cfi_startproc\n"
        "\tmovq %rdx, %r8\n"
        "\tmovq %rcx, %r9\n"
        "\tmovl $435, %eax\n" /* __NR_clone3 */
        "\tsyscall\n"
        "\ttestq %rax, %rax\n"
        "\tjz 1f\n"
        "\tret\n"
        "1:\n"
        ".cfi_undefined rip\n"
        "\txorl %ebp, %ebp\n"
        "\tmovq %r9, %rdi\n"
        "\tcallq *%r8\n"
        "\tmovl %eax, %edi\n"
        "\tmovl $60, %eax\n" /* __NR_exit */
        "\tsyscall\n"
        "\thlt\n"
        ".cfi_endproc\n"
        ".size lfs_clone3_trampoline, .-lfs_clone3_trampoline\n"
        ".popsection\n");
#elif defined(__aarch64__)
#define LFS_CLONE3_TRAMPOLINE 1
_Static_assert(__NR_clone3 == 435 && __NR_exit == 93, "the numbers the aarch64 trampoline calls");
/* args in x0, size in x1, fn in x2, arg in x3. A system call keeps every register but x0, in
 * both processes: fn and arg go across in x10 and x11. */
__asm__(".pushsection .text\n"
        ".globl lfs_clone3_trampoline\n"
        ".hidden lfs_clone3_trampoline\n"
        ".type lfs_clone3_trampoline, %function\n"
        "lfs_clone3_trampoline:\n"
        ".cfi_startproc\n"
        "\tmov x10, x2\n"
        "\tmov x11, x3\n"
        "\tmov x8, #435\n" /* __NR_clone3 */
        "\tsvc #0\n"
        "\tcbz x0, 1f\n"
        "\tret\n"
        "1:\n"
        ".cfi_undefined x30\n"
        "\tmov x29, xzr\n"
        "\tmov x30, xzr\n"
        "\tmov x0, x11\n"
        "\tblr x10\n"
        "\tmov x8, #93\n" /* __NR_exit */
        "\tsvc #0\n"
        "\tbrk #0\n"
        ".cfi_endproc\n"
        ".size lfs_clone3_trampoline, .-lfs_clone3_trampoline\n"
        ".popsection\n");
#endif

/* The child's stack under AddressSanitizer: the child's frames poison their redzones in the
 * shadow memory it shares with the caller and never return to clear them (it ends in execve
 * or _exit), so the region is cleared before each child runs on it (the last one's marks
 * would be read as this one's errors, and hung it) and after (the caller's later frames use
 * the same memory). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define UNPOISON_CHILD_STACK(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define UNPOISON_CHILD_STACK(p, n) ((void)(p), (void)(n))
#endif

#ifdef LFS_CLONE3_TRAMPOLINE
__attribute__((visibility("hidden"))) long lfs_clone3_trampoline(struct clone_args *args, size_t size,
                                                                 int (*fn)(void *arg), void *arg);
#endif

pid_t lfs_clone3_shared(struct clone_args *args, int (*fn)(void *arg), void *arg) {
#ifdef LFS_CLONE3_TRAMPOLINE
        /* The child runs on this frame's stack while the caller's thread waits for it. */
        _Alignas(16) char stack[64 * 1024];
        args->flags |= CLONE_VM | CLONE_VFORK;
        args->stack = (uint64_t)(uintptr_t)stack;
        args->stack_size = sizeof(stack);
        /* No handler of the caller's runs in the child, on memory it shares. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        UNPOISON_CHILD_STACK(stack, sizeof(stack));
        long pid = lfs_clone3_trampoline(args, sizeof(*args), fn, arg);
        UNPOISON_CHILD_STACK(stack, sizeof(stack));
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        return (pid_t)pid;
#else
        (void)args, (void)fn, (void)arg;
        return -ENOSYS;
#endif
}
