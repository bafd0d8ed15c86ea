/* SPDX-License-Identifier: MIT */
/* Cleanup attributes, ownership transfer and small helpers shared by the library. */
#ifndef LFS_UTIL_H
#define LFS_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "layerfs.h"

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _unused_ __attribute__((unused))

static inline void freep(void *p) {
        free(*(void **)p);
}
static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}
static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
static inline void lfs_error_freep(lfs_error **e) {
        lfs_error_free(*e);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_error_ _cleanup_(lfs_error_freep)

/* Hands ownership out of a cleanup variable. */
#define TAKE_PTR(p)                                                                                         \
        ({                                                                                                  \
                __typeof__(p) _p = (p);                                                                     \
                (p) = NULL;                                                                                 \
                _p;                                                                                         \
        })
#define TAKE_FD(fd)                                                                                         \
        ({                                                                                                  \
                int _fd = (fd);                                                                             \
                (fd) = -1;                                                                                  \
                _fd;                                                                                        \
        })

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* The code named name (lfs_code_name's inverse); Failed for an unknown name. */
lfs_code lfs_code_from_name(const char *name);

/* Sets *err (if err) and returns a negative errno: -errnum, or -EINVAL when errnum is 0. */
int lfs_fail(lfs_error **err, lfs_code code, int errnum, const char *fmt, ...) _printf_(4, 5);
int lfs_failv(lfs_error **err, lfs_code code, int errnum, const char *fmt, va_list ap);
/* Adds context to an error on its way up: fmt's text after its message. Returns what the
 * error's lfs_fail returned (-errnum, or -EINVAL); -EINVAL, and nothing else, without one. */
int lfs_error_append(lfs_error **err, const char *fmt, ...) _printf_(2, 3);
/* Takes ownership of paths (an array of n malloc'd strings). */
int lfs_fail_conflict(lfs_error **err, char **paths, size_t n, const char *fmt, ...) _printf_(4, 5);

/* Allocation that aborts: the library does not limp on after out-of-memory. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
/* A buffer for large reads and writes (freed with free): page-aligned, so that the kernel's
 * copies between it and the page cache run at full speed. Where malloc put a 1 MiB buffer
 * depends on what was freed before: at 16 bytes past a page (an mmap of its own), the
 * copies of a 64 MiB commit took ~2x the time (perf: _copy_to_iter 26% against 15%). */
void *xmalloc_io(size_t n);

/* CLOCK_MONOTONIC in milliseconds: deadlines and idle times. */
long long lfs_now_ms(void);
/* The CLOCK_MONOTONIC time ms milliseconds from now (now for ms < 0), for a
 * pthread_cond_timedwait on a condition made with that clock. */
struct timespec lfs_monotonic_deadline(long long ms);
/* This boot's id (/proc/sys/kernel/random/boot_id) in buf, "" when unreadable. */
void lfs_boot_id_read(char *buf, size_t cap);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) _printf_(1, 2);

/* Grows *array of *cap elements of size elem so that it holds at least need. */
void grow_array(void **array, size_t *cap, size_t need, size_t elem);
#define GROW(array, cap, need) grow_array((void **)&(array), &(cap), (need), sizeof(*(array)))

/* Joins a relative path: "" + "x" = "x", "a" + "x" = "a/x". */
char *path_join(const char *dir, const char *name);

/* A relative path built one component at a time by a walk, so that a deep tree costs one
 * buffer rather than a copy of every ancestor's path: push a name going down, cut back to
 * the length it had going up. */
typedef struct path_buf {
        char *s; /* NUL-terminated; "" when empty */
        size_t len, cap;
} path_buf;
/* Appends "/name" ("name" when empty) and returns the length before, to cut back to. */
size_t path_buf_push(path_buf *p, const char *name);
void path_buf_cut(path_buf *p, size_t len);
void path_buf_done(path_buf *p);

/* qsort/bsearch order of an array of strings (char *): strcmp of the pointed-to strings. */
int lfs_strcmp_ptrs(const void *a, const void *b);
/* A stream over the entries of the directory dirfd holds, on a close-on-exec copy of it
 * (dirfd stays the caller's to close; the copy shares its offset); NULL with errno set. */
DIR *lfs_opendir_at_fd(int dirfd);

/* rm -rf below dirfd/name; missing is fine. Never follows a symlink and never crosses
 * into a mount (what is mounted there stays, and so does the directory: -EBUSY). */
int rm_rf_at(int dirfd, const char *name);
/* The same; on failure *ret_failed (if not yet set) names the first path that stayed,
 * relative to dirfd ("name/a/b"). */
int rm_rf_at_report(int dirfd, const char *name, char **ret_failed);

/* openat2 below dirfd with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
 * (one component at a time with O_NOFOLLOW where openat2 is missing): no symlink, no
 * "..", nothing outside dirfd. O_CLOEXEC is added. The fd, or a negative errno (-ELOOP
 * for a symlink on the way). */
int lfs_open_beneath(int dirfd, const char *path, int flags);

/* pread (pwrite) at offset until len bytes are done, the end of the file is reached
 * (pread) or the file takes nothing more (pwrite), or an error other than EINTR comes:
 * the bytes done, or a negative errno. A short read is the end of the file only when
 * the call itself says 0. */
ssize_t lfs_pread_full(int fd, void *buf, size_t len, off_t offset);
ssize_t lfs_pwrite_full(int fd, const void *buf, size_t len, off_t offset);

/* Runs fn(arg) in a child that shares this process's memory and waits for it, as
 * posix_spawn does (CLONE_VM | CLONE_VFORK): nothing of the caller's memory is copied, and
 * the calling thread is suspended until the child has exited. A fork copies the caller's
 * page tables and its child's exit tears them down: in the VMs this runs in, 2.6 ms for
 * the CLI against 0.13 ms this way. flags adds CLONE_ flags (CLONE_FILES: what the child
 * opens is the caller's, a pidfd of a process it clones say). fn makes async-signal-safe
 * calls only (its memory is the caller's, with the caller's locks); signals are blocked
 * while it runs, and its end sends the caller no SIGCHLD. What fn returned, or a negative
 * errno when the child could not be started (-EINTR: it ended before fn returned). */
int lfs_run_in_shared_child(int (*fn)(void *arg), void *arg, int flags);

/* Whether an environment entry ("NAME=value") is one a Sandbox's daemon and init keep from
 * their creator's environment (the rest is dropped at their start): the LAYERFS_ settings;
 * what the dynamic loader, libc and the libraries they use read (LD_*, GLIBC_TUNABLES,
 * MALLOC_*, the locale, TZ, FUSE_*, LIBBPF_*, SQLITE_*, OPENSSL_*); the temporary directory; PATH;
 * the sanitizers' options. A create's pool key hashes these (a daemon gets nothing else
 * of its caller's environment). Async-signal-safe. */
bool lfs_env_reaches_daemon(const char *entry);

struct clone_args;
/* clone3(args) of a child that shares this process's memory (CLONE_VM | CLONE_VFORK are
 * added, and a stack of the child's own: args' stack fields are set here), which runs
 * fn(arg) and exits with what it returned, unless it calls execve first: no copy of the
 * caller's address space, as lfs_run_in_shared_child, but with what only clone3 does
 * (CLONE_INTO_CGROUP). The calling thread is suspended until the child's execve or exit;
 * the daemon's other threads run on. fn makes raw or async-signal-safe calls only, touches
 * no memory but its own stack and what it only reads, and never returns into the caller's
 * frames; signals are blocked in the calling thread around the clone, and the child starts
 * with all of them blocked. The child's pid, or a negative errno: -ENOSYS on an architecture
 * this file has no trampoline for (x86_64 and aarch64 have one), where the caller clones a
 * copy instead. */
pid_t lfs_clone3_shared(struct clone_args *args, int (*fn)(void *arg), void *arg);

/* /proc/PID/mountinfo escapes space, tab, newline and backslash as \ooo: undone in place. */
void lfs_unescape_octal(char *s);

#endif
