/* SPDX-License-Identifier: MIT */
#ifndef LFS_FUSE_OPS_H
#define LFS_FUSE_OPS_H

#include "workspace.h"

struct fuse_session;

/* A session serving fs at mountpoint (mounted); NULL on failure (libfuse said why). */
struct fuse_session *ws_fuse_mount(ws_fs *fs, const char *mountpoint, const char *fsname);

/* Raises the readahead of the mount on device dev to 2 MiB, once it has answered. */
void ws_fuse_widen_readahead(dev_t dev);

#endif
