/* SPDX-License-Identifier: MIT */
/*
 * What the two runtimes of the linux platform share (native.c, namespaces.c): a Sandbox is
 * a cgroup <root>/<tag>-<project>-<n> (its place) with its daemon in the leaf "daemon" and
 * each command in a leaf "cmd-<k>" of its own; ending the cgroup ends everything of it.
 * namespaces.c adds the Sandbox's namespaces on top and uses the rest as it is. Only
 * backends/linux/ includes this.
 */
#ifndef LFS_LINUX_RUNTIME_H
#define LFS_LINUX_RUNTIME_H

#include "cgroup.h"
#include "platforms.h"
#include "runtime.h"

struct sock_fprog;

/* How long a new daemon (or a Sandbox's init) gets to say it is ready. */
#define LFS_LINUX_READY_TIMEOUT_MS 5000

/* In a child that is to become a detached process of a Sandbox (its daemon, its init):
 * null_fd on 0, log_fd on 1 and 2, ready_fd on LFS_DAEMON_READY_FD, hold_fd (or -1) on
 * LFS_INIT_HOLD_FD, the default signal mask and actions, nothing else of the caller's
 * open; then exe with argv. Never returns (126: the fds could not be set, 127: exe did
 * not run). Async-signal-safe. */
_Noreturn void lfs_linux_exec_child(const char *exe, const char *const *argv, int null_fd, int log_fd,
                                    int ready_fd, int hold_fd);
/* Adds what both need: root, cgroup2, cgroup.kill, pidfd, FUSE. */
void lfs_linux_probe(const lfs_platform *p, lfs_missing *m);
/* Root, and the cgroup root (*ret_root). */
int lfs_linux_prepare(const lfs_platform *p, char **ret_root, lfs_error **err);
int lfs_linux_reach(const lfs_platform *p, const lfs_sandbox_ref *sb, lfs_error **err);
/* Makes the Sandbox's cgroup, sets its limits and starts its daemon in the leaf "daemon",
 * without waiting: its handle and the read end of its readiness pipe (*ret_ready_fd). */
int lfs_linux_start_daemon(const lfs_sandbox_ref *sb, const lfs_daemon_start *start, lfs_daemon_handle *ret,
                           int *ret_ready_fd, lfs_error **err);
/* Waits for the daemon lfs_linux_start_daemon started to say it listens. */
int lfs_linux_await_daemon(const lfs_sandbox_ref *sb, const lfs_daemon_handle *h, int ready_fd,
                           lfs_error **err);
/* Both, in turn (native's create). */
int lfs_linux_create(const lfs_sandbox_ref *sb, const lfs_daemon_start *start, lfs_daemon_handle *ret,
                     lfs_error **err);
/* Waits, in poll, until ready_fd gives a byte, or pidfd's process exits, or
 * LFS_LINUX_READY_TIMEOUT_MS pass: 0, -ESRCH (it exited or closed the pipe without a
 * word), -ETIMEDOUT. */
int lfs_linux_wait_ready(int ready_fd, int pidfd);
/* A command in its own leaf; joining ns_flags of ns_pidfd's process (0: none), under the
 * seccomp filter seccomp (NULL: none). On failure *err names the step (lfs_linux_spawn_failed). */
int lfs_linux_spawn(const lfs_sandbox_ref *sb, const lfs_command_spec *spec, int ns_flags, int ns_pidfd,
                    const struct sock_fprog *seccomp, pid_t *ret_pid, int *ret_pidfd, lfs_error **err);
/* The start of spec's command failed at stage with the negative errno r: *err (Failed)
 * says which step, with its value and, where there is one, what to do. Returns r. */
int lfs_linux_spawn_failed(const lfs_sandbox_ref *sb, const lfs_command_spec *spec, lfs_spawn_stage stage,
                           int r, lfs_error **err);
int lfs_linux_end_command(const lfs_sandbox_ref *sb, const char *name, int timeout_ms);
void lfs_linux_command_done(const lfs_sandbox_ref *sb, const char *name);
void lfs_linux_list(const lfs_sandbox_ref *sb, lfs_process_fn fn, void *userdata);
int lfs_linux_signal(const lfs_sandbox_ref *sb, pid_t pid, int sig);
int lfs_linux_teardown(const lfs_sandbox_ref *sb, bool leave_place, lfs_teardown_hook hook, void *userdata,
                       char **ret_why);
int lfs_linux_reclaim(const lfs_sandbox_ref *sb, char **ret_why);
/* orphans.c: labels sb's cgroup with its home (create, before the daemon starts), and the
 * runtimes' reclaim_orphans over the labelled cgroups of the cgroup root. */
int lfs_linux_label_place(const lfs_sandbox_ref *sb, lfs_error **err);
int lfs_linux_reclaim_orphans(lfs_orphan_fn fn, void *userdata);

#endif
