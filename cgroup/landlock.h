/* SPDX-License-Identifier: MIT */
/*
 * Landlock's scoping of abstract unix sockets (Linux 6.12, Landlock ABI 6): a process so
 * scoped connects to no abstract unix socket made outside its domain. Abstract sockets
 * belong to the network namespace and have no permissions; a command of a Sandbox with the
 * host's network (--network host) would otherwise reach every one the host's processes
 * listen on (docs/security.md). spawn.c scopes such a command in its child.
 */
#ifndef LFS_LANDLOCK_H
#define LFS_LANDLOCK_H

#include <stdbool.h>

/* The kernel scopes abstract unix sockets (Landlock ABI 6 or later, Landlock enabled). */
bool lfs_landlock_scope_available(void);

/* Puts the calling thread in a Landlock domain of its own that scopes abstract unix
 * sockets and restricts nothing else: no_new_privs must be set. 0 or a negative errno
 * (-EOPNOTSUPP where the kernel cannot); async-signal-safe. */
int lfs_landlock_scope_abstract_unix(void);

#endif
