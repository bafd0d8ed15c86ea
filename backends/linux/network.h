/* SPDX-License-Identifier: MIT */
/*
 * A namespaces Sandbox's network on the host's side (network.c): for --network private,
 * the veth pair between the host and the Sandbox's net namespace, its addresses and the
 * Sandbox's default route through the host's end, made at create and removed at
 * teardown and reclaim. none and host need nothing here (the init brings lo up; host
 * has no net namespace of its own). docs/runtime.md, "Networks".
 */
#ifndef LFS_LINUX_NETWORK_H
#define LFS_LINUX_NETWORK_H

#include "runtime.h"

/* For a private Sandbox (else nothing): the veth pair, its host end on the host with
 * net_base+1/30 (no forwarding, no IPv6, strict reverse-path filter) and up, its peer
 * eth0 in the net namespace of init_pidfd's process with net_base+2/30, up, and the
 * default route through the host's end. What it made stays for lfs_network_remove. */
int lfs_network_connect(const lfs_sandbox_ref *sb, int init_pidfd, lfs_error **err);

/* For a private Sandbox (else nothing): removes the host's end of its veth pair (the
 * peer goes with it), if it is there. 0, or a negative errno and *ret_why. */
int lfs_network_remove(const lfs_sandbox_ref *sb, char **ret_why);

#endif
