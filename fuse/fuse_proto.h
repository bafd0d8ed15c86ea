/* SPDX-License-Identifier: MIT */
/*
 * The FUSE wire protocol as the daemon speaks it on /dev/fuse: only the opcodes, flags
 * and messages fuse_dev.c uses, in our own words. The layouts follow the kernel's
 * include/uapi/linux/fuse.h at protocol 7.45 (Linux 6.18); Debian 12's libfuse ships
 * 7.38, which lacks what INIT's second flag word names. Every message is a fixed
 * struct, 64-bit aligned, little-endian on the machines we serve; a request is a
 * fuse_in_hdr then its opcode's struct then (for some) NUL-terminated names or data.
 */
#ifndef LFS_FUSE_PROTO_H
#define LFS_FUSE_PROTO_H

#include <stdint.h>
#include <sys/ioctl.h>

#define FUSE_PROTO_MAJOR 7
/* The newest minor we know of; the kernel and we use the smaller of its and ours. */
#define FUSE_PROTO_MINOR 45
/* Below this minor a kernel's INIT has no flags2 and its messages other sizes. */
#define FUSE_PROTO_MINOR_MIN 31
#define FUSE_ROOT_NODE 1
/* A read of /dev/fuse must offer at least this much room, whatever max_write is. */
#define FUSE_READ_BUFFER_MIN 8192

/* Opcodes the kernel sends. X(NAME, number). */
#define FUSE_OPCODES(X)                                                                                     \
        X(LOOKUP, 1)                                                                                        \
        X(FORGET, 2)                                                                                        \
        X(GETATTR, 3)                                                                                       \
        X(SETATTR, 4)                                                                                       \
        X(READLINK, 5)                                                                                      \
        X(SYMLINK, 6)                                                                                       \
        X(MKNOD, 8)                                                                                         \
        X(MKDIR, 9)                                                                                         \
        X(UNLINK, 10)                                                                                       \
        X(RMDIR, 11)                                                                                        \
        X(RENAME, 12)                                                                                       \
        X(LINK, 13)                                                                                         \
        X(OPEN, 14)                                                                                         \
        X(READ, 15)                                                                                         \
        X(WRITE, 16)                                                                                        \
        X(STATFS, 17)                                                                                       \
        X(RELEASE, 18)                                                                                      \
        X(FSYNC, 20)                                                                                        \
        X(SETXATTR, 21)                                                                                     \
        X(GETXATTR, 22)                                                                                     \
        X(LISTXATTR, 23)                                                                                    \
        X(REMOVEXATTR, 24)                                                                                  \
        X(FLUSH, 25)                                                                                        \
        X(INIT, 26)                                                                                         \
        X(OPENDIR, 27)                                                                                      \
        X(READDIR, 28)                                                                                      \
        X(RELEASEDIR, 29)                                                                                   \
        X(FSYNCDIR, 30)                                                                                     \
        X(GETLK, 31)                                                                                        \
        X(SETLK, 32)                                                                                        \
        X(SETLKW, 33)                                                                                       \
        X(ACCESS, 34)                                                                                       \
        X(CREATE, 35)                                                                                       \
        X(INTERRUPT, 36)                                                                                    \
        X(BMAP, 37)                                                                                         \
        X(DESTROY, 38)                                                                                      \
        X(IOCTL, 39)                                                                                        \
        X(POLL, 40)                                                                                         \
        X(NOTIFY_REPLY, 41)                                                                                 \
        X(BATCH_FORGET, 42)                                                                                 \
        X(FALLOCATE, 43)                                                                                    \
        X(READDIRPLUS, 44)                                                                                  \
        X(RENAME2, 45)                                                                                      \
        X(LSEEK, 46)                                                                                        \
        X(COPY_FILE_RANGE, 47)                                                                              \
        X(SETUPMAPPING, 48)                                                                                 \
        X(REMOVEMAPPING, 49)                                                                                \
        X(SYNCFS, 50)                                                                                       \
        X(TMPFILE, 51)                                                                                      \
        X(STATX, 52)                                                                                        \
        X(COPY_FILE_RANGE_64, 53)

enum fuse_opcode_id {
#define FUSE_OPCODE_ENUM(name, number) FUSE_OP_##name = number,
        FUSE_OPCODES(FUSE_OPCODE_ENUM)
#undef FUSE_OPCODE_ENUM
                FUSE_OP_LIMIT
};

/* INIT's flags, both words as one 64-bit set (bits 32-63 travel in flags2, and only
 * when both sides set FUSE_F_INIT_EXT). */
#define FUSE_F_ASYNC_READ (1ull << 0)
#define FUSE_F_POSIX_LOCKS (1ull << 1)
#define FUSE_F_ATOMIC_O_TRUNC (1ull << 3)
#define FUSE_F_EXPORT_SUPPORT (1ull << 4)
#define FUSE_F_BIG_WRITES (1ull << 5)
#define FUSE_F_DONT_MASK (1ull << 6)
#define FUSE_F_SPLICE_WRITE (1ull << 7)
#define FUSE_F_SPLICE_MOVE (1ull << 8)
#define FUSE_F_SPLICE_READ (1ull << 9)
#define FUSE_F_FLOCK_LOCKS (1ull << 10)
#define FUSE_F_IOCTL_DIR (1ull << 11)
#define FUSE_F_AUTO_INVAL_DATA (1ull << 12)
#define FUSE_F_DO_READDIRPLUS (1ull << 13)
#define FUSE_F_READDIRPLUS_AUTO (1ull << 14)
#define FUSE_F_ASYNC_DIO (1ull << 15)
#define FUSE_F_WRITEBACK_CACHE (1ull << 16)
#define FUSE_F_PARALLEL_DIROPS (1ull << 18)
#define FUSE_F_HANDLE_KILLPRIV (1ull << 19)
#define FUSE_F_MAX_PAGES (1ull << 22)
#define FUSE_F_INIT_EXT (1ull << 30)
#define FUSE_F_HANDLE_KILLPRIV_V2 (1ull << 28)
#define FUSE_F_PASSTHROUGH (1ull << 37)
#define FUSE_F_NO_EXPORT_SUPPORT (1ull << 38)
#define FUSE_F_OVER_IO_URING (1ull << 41)

/* SETATTR's valid bits (the Workspace's ws_setattr takes the same values). */
#define FUSE_ATTR_SET_MODE (1u << 0)
#define FUSE_ATTR_SET_UID (1u << 1)
#define FUSE_ATTR_SET_GID (1u << 2)
#define FUSE_ATTR_SET_SIZE (1u << 3)
#define FUSE_ATTR_SET_ATIME (1u << 4)
#define FUSE_ATTR_SET_MTIME (1u << 5)
#define FUSE_ATTR_SET_ATIME_NOW (1u << 7)
#define FUSE_ATTR_SET_MTIME_NOW (1u << 8)
#define FUSE_ATTR_SET_CTIME (1u << 10)
/* HANDLE_KILLPRIV_V2: the caller lacks CAP_FSETID, clear the set-id bits (SETATTR's
 * valid, WRITE's write_flags, OPEN's open_flags for O_TRUNC). */
#define FUSE_ATTR_KILL_SUIDGID (1u << 11)
#define FUSE_WRITE_KILL_SUIDGID (1u << 2)
#define FUSE_OPEN_KILL_SUIDGID (1u << 0)

/* OPEN and CREATE answers' open_flags. */
#define FUSE_OPEN_KEEP_CACHE (1u << 1)
#define FUSE_OPEN_NOFLUSH (1u << 5)
#define FUSE_OPEN_PASSTHROUGH (1u << 7)

#define FUSE_FSYNC_DATASYNC (1u << 0)

/* Notifications we send (in the answer header's error field, with unique 0). */
enum {
        FUSE_NOTE_INVAL_INODE = 2,
        FUSE_NOTE_INVAL_ENTRY = 3,
        FUSE_NOTE_DELETE = 6,
};

struct fuse_in_hdr {
        uint32_t len; /* the whole request, this header included */
        uint32_t opcode;
        uint64_t unique;
        uint64_t nodeid;
        uint32_t uid, gid, pid;
        uint16_t total_extlen; /* extensions after the arguments, in 8-byte units */
        uint16_t padding;
};

struct fuse_out_hdr {
        uint32_t len;
        int32_t error; /* 0 or a negative errno; a notification's code when unique is 0 */
        uint64_t unique;
};

struct fuse_attr_wire {
        uint64_t ino, size, blocks, atime, mtime, ctime;
        uint32_t atimensec, mtimensec, ctimensec;
        uint32_t mode, nlink, uid, gid, rdev, blksize, flags;
};

struct fuse_entry_wire {
        uint64_t nodeid, generation;
        uint64_t entry_valid, attr_valid; /* seconds */
        uint32_t entry_valid_nsec, attr_valid_nsec;
        struct fuse_attr_wire attr;
};

struct fuse_attr_answer {
        uint64_t attr_valid;
        uint32_t attr_valid_nsec, dummy;
        struct fuse_attr_wire attr;
};

struct fuse_init_request {
        uint32_t major, minor, max_readahead, flags;
        uint32_t flags2; /* from 7.36 */
        uint32_t unused[11];
};

struct fuse_init_answer {
        uint32_t major, minor, max_readahead, flags;
        uint16_t max_background, congestion_threshold;
        uint32_t max_write, time_gran;
        uint16_t max_pages, map_alignment;
        uint32_t flags2;
        uint32_t max_stack_depth; /* passthrough: how deep backing files may stack (7.40) */
        uint16_t request_timeout;
        uint16_t unused[11];
};

struct fuse_forget_request {
        uint64_t nlookup;
};

struct fuse_forget_one {
        uint64_t nodeid, nlookup;
};

struct fuse_batch_forget_request {
        uint32_t count, dummy; /* count fuse_forget_one follow */
};

struct fuse_getattr_request {
        uint32_t getattr_flags, dummy;
        uint64_t fh;
};

struct fuse_setattr_request {
        uint32_t valid, padding;
        uint64_t fh, size, lock_owner, atime, mtime, ctime;
        uint32_t atimensec, mtimensec, ctimensec, mode, unused4, uid, gid, unused5;
};

struct fuse_mknod_request {
        uint32_t mode, rdev, umask, padding;
};

struct fuse_mkdir_request {
        uint32_t mode, umask;
};

struct fuse_rename_request {
        uint64_t newdir;
};

struct fuse_rename2_request {
        uint64_t newdir;
        uint32_t flags, padding;
};

struct fuse_link_request {
        uint64_t oldnodeid;
};

struct fuse_open_request {
        uint32_t flags, open_flags;
};

struct fuse_create_request {
        uint32_t flags, mode, umask, open_flags;
};

struct fuse_open_answer {
        uint64_t fh;
        uint32_t open_flags;
        int32_t backing_id; /* with FUSE_OPEN_PASSTHROUGH */
};

struct fuse_release_request {
        uint64_t fh;
        uint32_t flags, release_flags;
        uint64_t lock_owner;
};

struct fuse_flush_request {
        uint64_t fh;
        uint32_t unused, padding;
        uint64_t lock_owner;
};

struct fuse_read_request {
        uint64_t fh, offset;
        uint32_t size, read_flags;
        uint64_t lock_owner;
        uint32_t flags, padding;
};

struct fuse_write_request {
        uint64_t fh, offset;
        uint32_t size, write_flags;
        uint64_t lock_owner;
        uint32_t flags, padding;
};

struct fuse_write_answer {
        uint32_t size, padding;
};

struct fuse_statfs_answer {
        uint64_t blocks, bfree, bavail, files, ffree;
        uint32_t bsize, namelen, frsize, padding;
        uint32_t spare[6];
};

struct fuse_fsync_request {
        uint64_t fh;
        uint32_t fsync_flags, padding;
};

/* Without FUSE_SETXATTR_EXT (which we do not ask for): 8 bytes. */
struct fuse_setxattr_request {
        uint32_t size, flags;
};

struct fuse_getxattr_request {
        uint32_t size, padding;
};

struct fuse_getxattr_answer {
        uint32_t size, padding;
};

struct fuse_interrupt_request {
        uint64_t unique;
};

struct fuse_fallocate_request {
        uint64_t fh, offset, length;
        uint32_t mode, padding;
};

struct fuse_lseek_request {
        uint64_t fh, offset;
        uint32_t whence, padding;
};

struct fuse_lseek_answer {
        uint64_t offset;
};

/* A READDIR answer is a run of these, each followed by its name and padded to 8. */
struct fuse_dirent_wire {
        uint64_t ino, off;
        uint32_t namelen, type;
};

struct fuse_note_inval_inode {
        uint64_t ino;
        int64_t off, len;
};

struct fuse_note_inval_entry {
        uint64_t parent;
        uint32_t namelen, flags;
};

struct fuse_note_delete {
        uint64_t parent, child;
        uint32_t namelen, padding;
};

/* Passthrough (7.40): register a backing fd with the connection, get an id for OPEN's
 * answer. Named for the step that uses it, not used yet. */
struct fuse_backing_map_wire {
        int32_t fd;
        uint32_t flags;
        uint64_t padding;
};
#define FUSE_DEV_IOCTL_MAGIC 229
#define FUSE_DEV_IOC_BACKING_OPEN_CMD _IOW(FUSE_DEV_IOCTL_MAGIC, 1, struct fuse_backing_map_wire)
#define FUSE_DEV_IOC_BACKING_CLOSE_CMD _IOW(FUSE_DEV_IOCTL_MAGIC, 2, uint32_t)

/* FUSE over io_uring (7.42): each ring entry is a header buffer and a payload buffer,
 * registered with an IORING_OP_URING_CMD on /dev/fuse whose SQE128 command area holds
 * fuse_uring_cmd_wire. The kernel writes a request's fuse_in_hdr into in_out, its
 * opcode's fixed struct into op_in and its names and data into the payload
 * (payload_sz bytes), and completes the command; the answer goes back the same way
 * (fuse_out_hdr in in_out, the body in the payload) with a COMMIT_AND_FETCH naming the
 * request's unique as commit_id, which also waits for the next request. */
#define FUSE_URING_HEADER_AREA 128
enum {
        FUSE_URING_CMD_REGISTER = 1,
        FUSE_URING_CMD_COMMIT_AND_FETCH = 2,
};

struct fuse_uring_ent_wire {
        uint64_t flags;
        uint64_t commit_id;
        uint32_t payload_sz;
        uint32_t padding;
        uint64_t reserved;
};

struct fuse_uring_header_wire {
        char in_out[FUSE_URING_HEADER_AREA];
        char op_in[FUSE_URING_HEADER_AREA];
        struct fuse_uring_ent_wire ent;
};

struct fuse_uring_cmd_wire {
        uint64_t flags;
        uint64_t commit_id;
        uint16_t qid;
        uint8_t padding[6];
};

_Static_assert(sizeof(struct fuse_uring_header_wire) == 288, "fuse_uring_req_header is 288 bytes");
_Static_assert(sizeof(struct fuse_uring_cmd_wire) == 24, "fuse_uring_cmd_req is 24 bytes");
_Static_assert(sizeof(struct fuse_in_hdr) == 40, "fuse_in_header is 40 bytes");
_Static_assert(sizeof(struct fuse_out_hdr) == 16, "fuse_out_header is 16 bytes");
_Static_assert(sizeof(struct fuse_attr_wire) == 88, "fuse_attr is 88 bytes");
_Static_assert(sizeof(struct fuse_entry_wire) == 128, "fuse_entry_out is 128 bytes");
_Static_assert(sizeof(struct fuse_init_request) == 64, "fuse_init_in is 64 bytes");
_Static_assert(sizeof(struct fuse_init_answer) == 64, "fuse_init_out is 64 bytes");
_Static_assert(sizeof(struct fuse_setattr_request) == 88, "fuse_setattr_in is 88 bytes");
_Static_assert(sizeof(struct fuse_read_request) == 40, "fuse_read_in is 40 bytes");
_Static_assert(sizeof(struct fuse_write_request) == 40, "fuse_write_in is 40 bytes");
_Static_assert(sizeof(struct fuse_statfs_answer) == 80, "fuse_statfs_out is 80 bytes");

#endif
