/* SPDX-License-Identifier: MIT */
/*
 * A Workspace: a Branch's Commit seen as a read-write filesystem, copy-on-write.
 *
 * The namespace lives in memory (an inode table and a (parent, name) index), loaded
 * lazily from the Store's trees, so a mount costs O(1) whatever the Branch's size and a
 * rename of a directory is a pointer move. File data stays in the Store's objects until
 * a write copies it up into <upper>/<ino>. These operations know nothing of FUSE: a
 * transport (a row of fuse_transport.h: libfuse, dev, uring) calls them through their
 * table, ws_workspace_ops (fuse_fs.h), and maps the results.
 *
 * Every call returns 0 or a negative errno. One mutex guards the state: the transport
 * and the control thread take turns; status and commit hold it only while they walk the
 * namespace, not while they read files' data.
 */
#ifndef LFS_WORKSPACE_H
#define LFS_WORKSPACE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "fuse_fs.h"
#include "layerfs.h"

/* The Workspace's operations as a transport calls them: each row is the ws_ function of
 * its name below. */
extern const ws_ops ws_workspace_ops;

/* store: opened by the caller, used only under the workspace's lock. */
int ws_open(lfs_store *store, const char *branch, const char *upper_dir, uid_t owner, gid_t group,
            ws_fs **ret, lfs_error **err);
void ws_close(ws_fs *fs);
const lfs_id *ws_base(const ws_fs *fs);
/* Called for each (parent, name) the kernel must forget after a merged commit; child is
 * the inode the name led to (0: none), which the kernel should let go of (FORGET). */
typedef void (*ws_invalidate_fn)(void *userdata, uint64_t parent, uint64_t child, const char *name);
void ws_set_invalidator(ws_fs *fs, ws_invalidate_fn fn, void *userdata);
/* From now on opens of upper files pass through, registered with ops (an upper file,
 * opened by us beneath the upper directory; ops NULL: none do). */
void ws_set_passthrough(ws_fs *fs, const ws_backing_ops *ops, void *userdata);

int ws_lookup(ws_fs *fs, uint64_t parent, const char *name, struct stat *ret);
void ws_forget(ws_fs *fs, uint64_t ino, uint64_t n);
int ws_getattr(ws_fs *fs, uint64_t ino, struct stat *ret);
/* to_set: FUSE_SET_ATTR_* bits and WS_SET_KILL_SUIDGID (fuse_fs.h). A chown of a file
 * that is not a directory clears its set-id bits whoever asks, as the kernel's own
 * filesystems do. */
int ws_setattr(ws_fs *fs, uint64_t ino, const struct stat *attr, int to_set, struct stat *ret);
/* The file was written or truncated by a caller without CAP_FSETID: clears S_ISUID, and
 * S_ISGID when the group may execute (as a disk does). 1 when the mode changed (the
 * kernel's cached attributes are stale), 0 when not, or a negative errno. */
int ws_kill_setid(ws_fs *fs, uint64_t ino);
int ws_readlink(ws_fs *fs, uint64_t ino, char **ret);
int ws_mknod(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
             struct stat *ret);
int ws_mkdir(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
             struct stat *ret);
int ws_symlink(ws_fs *fs, const ws_caller *who, const char *target, uint64_t parent, const char *name,
               struct stat *ret);
int ws_link(ws_fs *fs, uint64_t ino, uint64_t parent, const char *name, struct stat *ret);
int ws_unlink(ws_fs *fs, uint64_t parent, const char *name);
int ws_rmdir(ws_fs *fs, uint64_t parent, const char *name);
int ws_rename(ws_fs *fs, uint64_t parent, const char *name, uint64_t new_parent, const char *new_name,
              unsigned flags);

/* File handles are opaque numbers for the transport. ret_backing (NULL: the transport
 * serves every read and write itself) gets the backing id the open passes through to,
 * or 0 when reads and writes of this handle come to us. */
int ws_open_file(ws_fs *fs, uint64_t ino, int flags, uint64_t *ret_fh, int *ret_backing);
int ws_create(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode, int flags,
              struct stat *ret, uint64_t *ret_fh, int *ret_backing);
/* Where the bytes of a read are (ws_extent, fuse_fs.h): the upper file, the loose
 * object or the pack. */
int ws_read_extent(ws_fs *fs, uint64_t fh, size_t size, off_t off, ws_extent *ret);
ssize_t ws_write(ws_fs *fs, uint64_t fh, const char *buf, size_t size, off_t off);
int ws_fsync(ws_fs *fs, uint64_t fh, bool datasync);
int ws_fallocate(ws_fs *fs, uint64_t fh, int mode, off_t off, off_t len);
/* lseek's SEEK_DATA and SEEK_HOLE on handle fh: the holes of its upper file, or of its
 * loose object while it is still the Store's. -ENXIO at or past the end, as lseek. */
int ws_lseek(ws_fs *fs, uint64_t fh, off_t off, int whence, off_t *ret);
int ws_release(ws_fs *fs, uint64_t fh);

/* A listing of directory ino starts and ends: while one is open, the offsets that
 * readdir gave stay true. */
int ws_opendir(ws_fs *fs, uint64_t ino);
void ws_releasedir(ws_fs *fs, uint64_t ino);
/* Calls fill for each entry from offset on, until fill returns false (buffer full). */
int ws_readdir(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_fn fill, void *userdata);
/* READDIRPLUS: the same walk, each entry with its attributes when with_entry (then fill
 * taking it counts as one lookup, as the kernel counts it). "." and "..", and
 * directories never listed yet (their link count would cost a tree read
 * each), come without: the kernel looks those up itself when it needs them. */
int ws_readdirplus(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_plus_fn fill, void *userdata);
/* What the Workspace's writer can use: the upper filesystem without its root reserve
 * (writes that would reach into it get ENOSPC) and the inodes the budget has room for. */
int ws_statfs(ws_fs *fs, struct statvfs *ret);
/* memory: the budget in bytes of the Workspace's records, names, symlink targets and
 * xattrs (0: none); past it new names and xattrs get ENOSPC. fd_shares: how many
 * Workspaces share the daemon's fds, each keeping at most its share of them open. */
void ws_set_limits(ws_fs *fs, uint64_t memory, unsigned fd_shares);
/* Whether another thread serves requests while one waits (the rings; libfuse's loop and
 * ours over /dev/fuse serve one request at a time, in the kernel's order): only then
 * does a write-open on a short disk wait for the kernel's RELEASE and FORGET of files
 * just removed (await_frees). */
void ws_set_concurrent_requests(ws_fs *fs, bool concurrent);
/* What the namespace holds now: bytes counted against the budget, and inode records
 * (those of what the kernel let go of and the Store can give again are not kept). */
typedef struct ws_usage {
        uint64_t metadata_bytes;
        uint64_t inodes;
} ws_usage;
void ws_get_usage(ws_fs *fs, ws_usage *ret);
/* The inodes open for writing now, whose pages in the kernel (a live shared mapping's
 * too) may hold data not yet written to us; *ret to be freed. */
int ws_open_writers(ws_fs *fs, uint64_t **ret, size_t *ret_n);

int ws_setxattr(ws_fs *fs, uint64_t ino, const char *name, const char *value, size_t size, int flags);
/* size 0: returns the size needed. */
ssize_t ws_getxattr(ws_fs *fs, uint64_t ino, const char *name, char *value, size_t size);
ssize_t ws_listxattr(ws_fs *fs, uint64_t ino, char *list, size_t size);
int ws_removexattr(ws_fs *fs, uint64_t ino, const char *name);

/* Changed paths against the base commit. A path the Store could not record (longer than
 * 4,095 bytes) is refused (InvalidInput). */
int ws_status(ws_fs *fs, lfs_change **ret, size_t *ret_n, lfs_error **err);
/* Whether there is any change (true also when that cannot be told). */
bool ws_is_dirty(ws_fs *fs, lfs_error **err);
/* Records the changes on the Branch (merging if it moved); the base becomes the result.
 * One at a time per Workspace (Busy). The files' data is read without the lock that the
 * mount's requests take, so the Workspace stays usable meanwhile. */
int ws_commit(ws_fs *fs, const char *message, lfs_id *ret_commit, int *ret_merged, lfs_error **err);
/* Stops the status, dirty check or commit running on fs: they fail with -ECANCELED
 * (error code Failed, errnum ECANCELED). Those begun later run normally. */
void ws_cancel(ws_fs *fs);
/* Files open right now (unmount refuses Busy while any is). */
unsigned ws_open_files(ws_fs *fs);

#endif
