/* SPDX-License-Identifier: MIT */
/*
 * What a FUSE transport (fuse_transport.h) serves: a filesystem given as one table of
 * operations (ws_ops) over its own state (ws_fs, opaque here). The Workspace is one
 * (daemon/workspace.c, ws_workspace_ops); the bench's floor another (bench/fuse_floor.c,
 * in memory, answering at once), so that both are served by the same mount setup,
 * transports and dispatch and cannot drift apart.
 *
 * Every operation returns 0 (or a size) or a negative errno. An operation a table leaves
 * NULL is answered ENOSYS (WS_CALL), except those said to do nothing then.
 */
#ifndef LFS_FUSE_FS_H
#define LFS_FUSE_FS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#define WS_ROOT_INO 1

/* The filesystem a transport serves: defined by the one that implements ws_ops. */
typedef struct ws_fs ws_fs;

typedef struct ws_caller {
        uid_t uid;
        gid_t gid;
        mode_t umask;
} ws_caller;

/* setattr's to_set: the FUSE_SET_ATTR_* values (libfuse's, which the kernel's
 * FATTR_* share), kept here so that a filesystem does not depend on libfuse... */
#define WS_SET_MODE (1 << 0)
#define WS_SET_UID (1 << 1)
#define WS_SET_GID (1 << 2)
#define WS_SET_SIZE (1 << 3)
#define WS_SET_ATIME (1 << 4)
#define WS_SET_MTIME (1 << 5)
#define WS_SET_ATIME_NOW (1 << 7)
#define WS_SET_MTIME_NOW (1 << 8)
#define WS_SET_CTIME (1 << 10)
/* ... and this one: the caller lacks CAP_FSETID, clear the set-id bits. */
#define WS_SET_KILL_SUIDGID (1 << 11)

/* Where the bytes of a read are, so that the transport can splice them: up to length
 * bytes of fd from offset (fewer at the end of the file; length 0: nothing to read). fd
 * stays open until the handle is released. */
typedef struct ws_extent {
        int fd;
        off_t offset;
        size_t length;
} ws_extent;

/* readdir calls fill for each entry from offset on, until fill returns false (buffer
 * full). readdirplus's fill gets each entry with its attributes when with_entry (then
 * fill taking it counts as one lookup, as the kernel counts it). */
typedef bool (*ws_fill_fn)(void *userdata, const char *name, const struct stat *st, off_t next_offset);
typedef bool (*ws_fill_plus_fn)(void *userdata, const char *name, const struct stat *st, off_t next_offset,
                                bool with_entry);

/* A transport that can hand the kernel a backing file for an open (FUSE passthrough):
 * open registers fd (a file the filesystem opened itself) for the writes of owner:group
 * and returns its id (> 0) or -errno; close lets an id go. */
typedef struct ws_backing_ops {
        int (*open)(void *userdata, int fd, uid_t owner, gid_t group);
        void (*close)(void *userdata, int id);
} ws_backing_ops;

/* Below this size a file opened only for reading is served by the filesystem, not
 * passed through, unless it has a registration kept from an earlier open: it is one
 * READ (then kept in the page cache across opens), where registering it costs that open
 * a BACKING_OPEN besides the kernel's own open of the backing file. Measured
 * (docs/workspace.md, "Passthrough"; each open then paid its registration and its
 * unregistration): 4 KiB files read 1.6x slower passed through, 16 KiB about even,
 * 64 KiB and up faster. */
#ifndef WS_PASSTHROUGH_READ_MIN /* a build may set it, to measure another */
#define WS_PASSTHROUGH_READ_MIN (64 * 1024)
#endif

/* The operations, one row each; what each does is workspace.h's ws_<name>. File handles
 * are opaque numbers for the transport. open and create's ret_backing (NULL: the
 * transport serves every read and write itself) gets the backing id the open passes
 * through to, or 0 when its reads and writes come to the transport. */
typedef struct ws_ops {
        int (*lookup)(ws_fs *fs, uint64_t parent, const char *name, struct stat *ret);
        void (*forget)(ws_fs *fs, uint64_t ino, uint64_t n); /* NULL: nothing to do */
        int (*getattr)(ws_fs *fs, uint64_t ino, struct stat *ret);
        int (*setattr)(ws_fs *fs, uint64_t ino, const struct stat *attr, int to_set, struct stat *ret);
        /* 1 when the mode changed, 0 when not; NULL: never changes */
        int (*kill_setid)(ws_fs *fs, uint64_t ino);
        int (*readlink)(ws_fs *fs, uint64_t ino, char **ret);
        int (*mknod)(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
                     struct stat *ret);
        int (*mkdir)(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
                     struct stat *ret);
        int (*symlink)(ws_fs *fs, const ws_caller *who, const char *target, uint64_t parent,
                       const char *name, struct stat *ret);
        int (*link)(ws_fs *fs, uint64_t ino, uint64_t parent, const char *name, struct stat *ret);
        int (*unlink)(ws_fs *fs, uint64_t parent, const char *name);
        int (*rmdir)(ws_fs *fs, uint64_t parent, const char *name);
        int (*rename)(ws_fs *fs, uint64_t parent, const char *name, uint64_t new_parent,
                      const char *new_name, unsigned flags);
        int (*open)(ws_fs *fs, uint64_t ino, int flags, uint64_t *ret_fh, int *ret_backing);
        int (*create)(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
                      int flags, struct stat *ret, uint64_t *ret_fh, int *ret_backing);
        int (*read_extent)(ws_fs *fs, uint64_t fh, size_t size, off_t off, ws_extent *ret);
        ssize_t (*write)(ws_fs *fs, uint64_t fh, const char *buf, size_t size, off_t off);
        int (*fsync)(ws_fs *fs, uint64_t fh, bool datasync);
        int (*fallocate)(ws_fs *fs, uint64_t fh, int mode, off_t off, off_t len);
        int (*lseek)(ws_fs *fs, uint64_t fh, off_t off, int whence, off_t *ret);
        int (*release)(ws_fs *fs, uint64_t fh);
        int (*opendir)(ws_fs *fs, uint64_t ino);
        void (*releasedir)(ws_fs *fs, uint64_t ino); /* NULL: nothing to do */
        int (*readdir)(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_fn fill, void *userdata);
        int (*readdirplus)(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_plus_fn fill, void *userdata);
        int (*statfs)(ws_fs *fs, struct statvfs *ret);
        int (*setxattr)(ws_fs *fs, uint64_t ino, const char *name, const char *value, size_t size,
                        int flags);
        /* size 0: returns the size needed */
        ssize_t (*getxattr)(ws_fs *fs, uint64_t ino, const char *name, char *value, size_t size);
        ssize_t (*listxattr)(ws_fs *fs, uint64_t ino, char *list, size_t size);
        int (*removexattr)(ws_fs *fs, uint64_t ino, const char *name);
        /* From now on opens may pass through, registered with ops (INIT agreed to
         * passthrough); NULL: none ever do. */
        void (*set_passthrough)(ws_fs *fs, const ws_backing_ops *ops, void *userdata);
} ws_ops;

/* A filesystem as a transport serves it: its table and its state. */
typedef struct fuse_fs {
        const ws_ops *ops;
        ws_fs *fs;
} fuse_fs;

/* served's (a fuse_fs) operation op, or none when its table has none (void: nothing). */
#define WS_CALL_OR(served, op, none, ...)                                                                   \
        ((served).ops->op ? (served).ops->op((served).fs, __VA_ARGS__) : (none))
/* ... or -ENOSYS. */
#define WS_CALL(served, op, ...) WS_CALL_OR(served, op, -ENOSYS, __VA_ARGS__)

#endif
