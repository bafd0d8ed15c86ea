/* SPDX-License-Identifier: MIT */
/*
 * A linux Sandbox's limits (lfs_sandbox_limits) on its cgroup: memory.max, pids.max and
 * cpu.max of the Sandbox's cgroup, so that its daemon and every command count together.
 * The native runtime uses these, and every other runtime of the linux platform with a
 * cgroup per Sandbox is meant to. docs/runtime.md, "Limits".
 */
#ifndef LFS_RESOURCE_LIMITS_H
#define LFS_RESOURCE_LIMITS_H

#include "platforms.h"
#include "runtime.h"

/* cpu.max's period, in microseconds: --cpus X is a quota of X periods' worth of time. */
#define LFS_CPU_PERIOD_US 100000

/* The runtime operation check_limits (runtime.h): each limit asked for needs its
 * controller (memory, pids, cpu) offered to LayerFS's cgroup root; else Unsupported naming
 * the limit, the controller, the host and what the root offers. Makes nothing. */
int lfs_linux_check_limits(const lfs_platform *p, const char *root, const lfs_sandbox_limits *limits,
                           lfs_error **err);

/* Writes the limits on the Sandbox's cgroup place (made, empty), enabling each controller
 * in the cgroup root's subtree_control on the way. Failed, naming the file and the value,
 * if the kernel refuses one. */
int lfs_linux_apply_limits(const char *place, const lfs_sandbox_limits *limits, lfs_error **err);

/* --disk: one tmpfs of bytes at <dir>/disk holds the Workspaces' upper files, the
 * commands' TMPDIR and the logs of `process start` (its upper/, tmp/ and processes/,
 * bound at <dir>/upper, <dir>/tmp and <dir>/processes, where they are without it), and for
 * a Sandbox with ids of its own its view's /tmp and /dev/shm (view-tmp/, its init's), so
 * that all draw on one budget and a write past it fails with ENOSPC in the writer (the
 * Workspace checks the upper filesystem's free space before each write, tmpfs refuses the
 * rest). Made by the runtime's create before the daemon (and the init) start; teardown and
 * reclaim unmount everything beneath dir. */
int lfs_linux_make_disk(const lfs_sandbox_ref *sb, int dir_fd, uint64_t bytes, lfs_error **err);

#endif
