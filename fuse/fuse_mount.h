/* SPDX-License-Identifier: MIT */
/* How every FUSE mount of the project is set up, whichever loop serves it (libfuse's,
 * fuse_dev.c's or fuse_uring.c's): the mount options, then the mount's tuning once it
 * answered. One place, so that the Workspace and the bench's floor cannot drift apart. */
#ifndef LFS_FUSE_MOUNT_H
#define LFS_FUSE_MOUNT_H

#include <sys/types.h>

/* The kernel may cache entries, attributes and negative lookups this long: only the
 * mount's server changes what it shows. */
#define FUSE_CACHE_SECONDS 3600

/* The mount options after "fd=N,rootmode=...,user_id=...,group_id=...,": what libfuse is
 * given as -o, less its own fsname=/subtype=. */
#define FUSE_MOUNT_OPTIONS "allow_other,default_permissions"
/* The filesystem type in /proc/mounts: fuse.<subtype>. */
#define FUSE_MOUNT_SUBTYPE "layerfs"

/* Opens /dev/fuse and mounts it at mountpoint, named fsname (MS_NOSUID | MS_NODEV, as
 * libfuse does for root): the fd that serves it, or -errno (/dev/fuse missing, mount
 * refused). The caller answers INIT on the fd before anything stat()s the mount. */
int lfs_fuse_mount_fd(const char *mountpoint, const char *fsname);

/* Waits for the mount at mountpoint to answer (its loop serving: INIT done), then tunes
 * it (a read-ahead of 2 MiB): 0 and its device in *ret_dev, or -errno (it does not
 * answer). */
int lfs_fuse_mount_answered(const char *mountpoint, dev_t *ret_dev);

#endif
