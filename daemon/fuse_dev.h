/* SPDX-License-Identifier: MIT */
/* Our own FUSE loop: requests read from /dev/fuse and answered by workspace.h's
 * operations, without libfuse (fuse_dev.c). */
#ifndef LFS_FUSE_DEV_H
#define LFS_FUSE_DEV_H

#include <stdint.h>

#include "workspace.h"

typedef struct fuse_dev_conn fuse_dev_conn;

/* Mounts fs at mountpoint over /dev/fuse (fuse_mount.h): 0 and *ret, or -errno with
 * nothing mounted. The mount answers once fuse_dev_serve runs. */
int fuse_dev_mount(ws_fs *fs, const char *mountpoint, const char *fsname, fuse_dev_conn **ret);
/* Serves requests until the mount goes away or fuse_dev_exit; each thread that calls it
 * has a request buffer of its own. */
void fuse_dev_serve(fuse_dev_conn *c);
/* Makes fuse_dev_serve return at its next request or interrupted read. */
void fuse_dev_exit(fuse_dev_conn *c);
/* Unmounts (if the mount is still there) and closes the connection. */
void fuse_dev_destroy(fuse_dev_conn *c);

/* Tell the kernel to drop what it cached: 0 or -errno (-ENOTCONN before INIT). */
int fuse_dev_notify_delete(fuse_dev_conn *c, uint64_t parent, uint64_t child, const char *name);
int fuse_dev_notify_inval_entry(fuse_dev_conn *c, uint64_t parent, const char *name);
int fuse_dev_notify_inval_inode(fuse_dev_conn *c, uint64_t ino);

#endif
