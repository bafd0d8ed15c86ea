/* SPDX-License-Identifier: MIT */
/*
 * The kernel probes (probe.c): what this host's kernel offers, found by trying it (never
 * version numbers). The platforms' readiness (platforms.c) asks them; nothing here asks
 * the platforms.
 */
#ifndef LFS_PROBE_H
#define LFS_PROBE_H

#include <stdbool.h>

#include "layerfs.h"

/* One of runtime.status's kernel probes by its name ("kernel:cgroup2", "kernel:fuse",
 * "kernel:pidfd", "kernel:cgroup.kill", "kernel:kvm", "kernel:userns" and the other
 * namespaces, "kernel:seccomp"); false for an unknown name. */
bool lfs_probe_kernel(const char *name);
/* Whether this caller can make the namespaces of flags (CLONE_NEW*) at once: a child
 * unshares them and exits; 0, or the errno it failed with. */
int lfs_probe_namespaces(int flags);
/* runtime.status's features: each kernel probe, the watcher a new Sandbox would use, and
 * the absent features in s->missing. */
void lfs_probe_features(lfs_runtime_info *s);
/* The FUSE loop a Workspace gets when LAYERFS_FUSE_TRANSPORT is unset: our own over
 * /dev/fuse, with passthrough where the kernel has it (fuse/fuse_transport.c mounts it,
 * runtime status names it). */
#define LFS_FUSE_DEFAULT_TRANSPORT "dev"

/* The kernel's switch for FUSE over io_uring, one for the whole host (Linux 6.14 with
 * CONFIG_FUSE_IO_URING); it offers the rings to a FUSE server only while it is set. */
#define LFS_FUSE_URING_SWITCH "/sys/module/fuse/parameters/enable_uring"
/* 1 when set, 0 when not, -errno when this kernel has no such switch (-ENOENT). */
int lfs_probe_fuse_uring(void);
/* LAYERFS_FUSE_URING against LAYERFS_FUSE_TRANSPORT, as sandbox create and the daemon's
 * mount check them: rings only on our own loop (InvalidInput for libfuse with on or
 * auto, and for uring with off), and the transport named uring only where the kernel
 * offers them or LAYERFS_FUSE_URING=on lets the daemon turn them on (Unsupported,
 * naming the switch and both fixes). 0 or -errno. */
int lfs_check_fuse_uring(lfs_error **err);
/* Adds name to s->missing unless it is there already. */
void lfs_runtime_add_missing(lfs_runtime_info *s, const char *name);

#endif
