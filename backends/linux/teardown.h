/* SPDX-License-Identifier: MIT */
/*
 * What every teardown of a Sandbox does, whether its daemon closes it or the library
 * reclaims it after the daemon died: end its processes (whatever holds them), remove
 * whatever is mounted below its directory, its cgroups and its directory, and say
 * precisely what stayed if something did. The record goes only after this succeeded.
 */
#ifndef LFS_TEARDOWN_H
#define LFS_TEARDOWN_H

/* Ends every process of the Sandbox's cgroup, however it detached, and releases those
 * that a FUSE connection of the Sandbox's own holds (lfs_cgroup_kill_wait); at most
 * timeout_ms. 0, or a negative errno and *ret_why saying which processes stayed. */
int lfs_sandbox_end_processes(const char *cgroup, int timeout_ms, char **ret_why);

/* Detaches every mount at or below dir in the caller's mount namespace, shallowest first
 * (MNT_DETACH takes what is mounted below it along). Each mount is reached from dir
 * without following a symlink (openat2 RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and
 * unmounted through that descriptor only if it is the mount that mountinfo lists there:
 * a path swapped meanwhile cannot lead the unmount elsewhere. 0, or -EBUSY and
 * *ret_left naming the mounts that stayed. */
int lfs_unmount_beneath(const char *dir, char **ret_left);

/* After the processes ended: the mounts below dir, the cgroup subtree and dir itself
 * (either may be NULL: a Sandbox whose home is gone has no directory of its own left), never following a
 * symlink or crossing into a mount. 0 when none of it is left; else a negative errno and *ret_why saying
 * what stayed. */
int lfs_sandbox_remove(const char *cgroup, const char *dir, char **ret_why);

#endif
