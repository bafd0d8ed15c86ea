/* SPDX-License-Identifier: MIT */
#ifndef LFS_FUSE_OPS_H
#define LFS_FUSE_OPS_H

#include <stdint.h>

#include "workspace.h"

/* A Workspace's mount and the loop that serves it: libfuse's, or ours over /dev/fuse
 * (fuse_dev.c) when LAYERFS_FUSE_TRANSPORT=dev, falling back to libfuse (and saying so
 * in the log) when ours cannot mount. */
typedef struct ws_session ws_session;

/* fs mounted at mountpoint; NULL on failure (the log or libfuse says why). */
ws_session *ws_session_mount(ws_fs *fs, const char *mountpoint, const char *fsname);
/* "dev" or "libfuse". */
const char *ws_session_transport(const ws_session *s);
/* Serves requests until the mount goes away or ws_session_exit (then after the next
 * request or interrupted read). */
void ws_session_serve(ws_session *s);
void ws_session_exit(ws_session *s);
/* Unmounts if still mounted, closes the connection, frees s. */
void ws_session_destroy(ws_session *s);

/* Tell the kernel to forget what it cached: 0 or a negative errno. */
int ws_session_notify_delete(ws_session *s, uint64_t parent, uint64_t child, const char *name);
int ws_session_notify_inval_entry(ws_session *s, uint64_t parent, const char *name);
int ws_session_notify_inval_inode(ws_session *s, uint64_t ino);

#endif
