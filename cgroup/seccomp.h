/* SPDX-License-Identifier: MIT */
/*
 * The seccomp filter of a namespaces Sandbox (docs/security.md, "The seccomp filter"):
 * every command gets it in its child just before execve (spawn.c, after no_new_privs),
 * and the Sandbox's init once its namespaces are set up. The denied calls are one table
 * in seccomp.c; each fails with EPERM. A program of another ABI than the build's (i386's
 * int 0x80, x32) is ended (SIGSYS): its calls have other numbers, which the table does
 * not know.
 */
#ifndef LFS_SECCOMP_H
#define LFS_SECCOMP_H

#include <linux/filter.h>
#include <stdbool.h>

/* The filter; NULL where this build has no table for the architecture. */
const struct sock_fprog *lfs_sandbox_seccomp(void);

/* The kernel takes seccomp filters that answer with an errno and that end a process
 * (SECCOMP_GET_ACTION_AVAIL): what lfs_sandbox_seccomp needs. */
bool lfs_seccomp_available(void);

/* Installs prog on the calling thread: no_new_privs must be set (or the caller have
 * CAP_SYS_ADMIN in its user namespace). 0 or a negative errno; async-signal-safe. */
int lfs_seccomp_install(const struct sock_fprog *prog);

#endif
