/* SPDX-License-Identifier: MIT */
/*
 * cgroup v2 for the Linux runtime: where the tree is, a cgroup per Sandbox with a leaf
 * per command, spawning straight into a leaf, and ending a subtree so that nothing of
 * it remains. Functions return 0 (or a value) on success and a negative errno on failure.
 */
#ifndef LFS_CGROUP_H
#define LFS_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "layerfs.h"

struct sock_fprog;

/* The root of LayerFS's cgroups: $LAYERFS_CGROUP_ROOT, or "<cgroup2 mount>/layerfs"
 * with the mount found in /proc/self/mountinfo (pure v2 at /sys/fs/cgroup, or the
 * "unified" hierarchy of a hybrid host). Unsupported, naming what was looked at,
 * when there is no cgroup2 or the override is not on one. Makes nothing. */
int lfs_cgroup_root(char **ret_root, lfs_error **err);

/* "<root>/<tag>-<project>-<number>": a Sandbox's cgroup, tag being the first 8 hex
 * digits of the SHA-256 of the home's path. Homes share the cgroup root (one per host),
 * so without the tag two homes with a project of the same name would share cgroups,
 * and closing a Sandbox of one would end the same-numbered Sandbox of the other. */
char *lfs_cgroup_sandbox_path(const char *root, const char *home, const char *project, int number);

/* "/layerfs/p-1" for "/sys/fs/cgroup/unified/layerfs/p-1": the path below the cgroup2
 * mount, as /proc/PID/cgroup shows it. NULL if path does not exist. */
char *lfs_cgroup_relative(const char *path);

/* Opens a cgroup: a directory in a cgroup2 filesystem (the last component not a
 * symlink); -EXDEV for anything else. Every function below that reads cgroup.procs or
 * writes cgroup.kill opens its path through this: a path that is not a cgroup (a record
 * pointing at /tmp/x with a cgroup.procs file of its own) is never acted on. */
int lfs_cgroup_open(const char *path);

/* Calls fn for each cgroup of the subtree at cgroup_fd (itself first), with its fd. */
void lfs_cgroup_each(int cgroup_fd, void (*fn)(int fd, void *userdata), void *userdata);
/* Calls fn for each id that file ("cgroup.procs", "cgroup.threads") lists in each cgroup
 * of the subtree. */
void lfs_cgroup_each_id(int cgroup_fd, const char *file, void (*fn)(int id, void *userdata), void *userdata);

/* mkdir; an existing cgroup is fine. */
int lfs_cgroup_make(const char *path);

/* Whether controller can be enabled for the Sandboxes below root (LayerFS's cgroup root):
 * root's cgroup.controllers lists it (before root is made: its parent's subtree_control
 * does). Makes nothing. */
bool lfs_cgroup_offers(const char *root, const char *controller);
/* The controllers root offers, as the kernel lists them ("hugetlb", "" for none). */
char *lfs_cgroup_offered(const char *root);
/* Whether controller is bound to a cgroup v1 hierarchy (/proc/cgroups): then the v2
 * hierarchy cannot have it (a hybrid host). */
bool lfs_cgroup_v1_bound(const char *controller);

/* Makes controller's interface files appear in cgroup: enables it in its parent's
 * cgroup.subtree_control unless it is there already. -EOPNOTSUPP when the parent does
 * not have it; -EBUSY when the parent holds processes of its own. */
int lfs_cgroup_enable(const char *cgroup, const char *controller);
/* Writes value to file ("pids.max") of cgroup (opened as lfs_cgroup_open does). */
int lfs_cgroup_write(const char *cgroup, const char *file, const char *value);

/* Sets memory.max of leaf, a child of the Sandbox's cgroup, enabling the memory
 * controller in the LayerFS root's and the Sandbox's subtree_control on the way.
 * -EOPNOTSUPP where the controller is not in the LayerFS root's cgroup.controllers (a
 * hybrid host's v2 hierarchy has none). */
int lfs_cgroup_limit_memory(const char *sandbox, const char *leaf, uint64_t bytes);

/* Moves pid (0: the caller, with all its threads) into the cgroup. */
int lfs_cgroup_enter(const char *path, pid_t pid);

/* 1 if a process lives in the cgroup or below, 0 if not, -ENOENT if it is gone. */
int lfs_cgroup_populated(const char *path);

/* Ends every process of the subtree (cgroup.kill), waits until it is empty (inotify on
 * cgroup.events, at most timeout_ms), then removes the subtree, leaves first, retrying
 * while the kernel still says EBUSY. A cgroup that is already gone is success. */
int lfs_cgroup_destroy(const char *path, int timeout_ms);

/* Kills and waits, without removing: the subtree stays, empty. Processes still there
 * after a second are released from the FUSE connections that hold them
 * (lfs_cgroup_abort_fuse), again each second until timeout_ms: -ETIMEDOUT if some
 * still did not end. */
int lfs_cgroup_kill_wait(const char *path, int timeout_ms);

/* A process that waits for the answer to a FUSE request that its server has read
 * sleeps uninterruptibly, through SIGKILL, until the answer comes or the connection is
 * aborted; when the server belongs to the same Sandbox (or the waiting process holds
 * the connection's /dev/fuse itself) nothing but an abort ends it. Aborts, through
 * /sys/fs/fuse/connections/N/abort (a detached fusectl instance of our own when that is
 * not mounted), every FUSE connection of the subtree's processes: those whose /dev/fuse
 * they hold (fdinfo names the connection) and those mounted in mount namespaces of
 * theirs but not in the caller's. Connections of others are never aborted. Returns how
 * many it aborted, or a negative errno. (fuse_abort.c) */
int lfs_cgroup_abort_fuse(int cgroup_fd);

/* "123 (sleep, state S), 124 (python3, state D in request_wait_answer)": the processes
 * still in the subtree (at most 5 named), for messages; NULL if none. */
char *lfs_cgroup_describe(const char *path);

/* Removes the empty cgroups of the subtree, path itself too; leaves populated ones. */
int lfs_cgroup_remove_tree(const char *path, int timeout_ms);

/* ---- spawning (spawn.c) ---- */

typedef struct lfs_spawn_args {
        const char *cgroup; /* the leaf the child starts in */
        const char *const *paths; /* the program: each candidate tried in turn (PATH) */
        size_t n_paths;
        char *const *argv; /* argv[0] as given */
        char *const *envp;
        const char *cwd;
        int cwd_fd; /* >= 0: start in this directory (fchdir) instead of cwd; else -1 */
        uid_t uid; /* (uid_t)-1: keep */
        gid_t gid;
        int fd_in, fd_out, fd_err; /* become 0, 1, 2 */
        bool new_session; /* setsid(): no controlling terminal of ours */
        bool controlling_tty; /* with new_session: fd_in, a terminal, becomes the session's */
        /* Namespaces the child joins (CLONE_NEW* flags; 0: none, it stays in the caller's):
         * those of the process ns_pidfd names. With CLONE_NEWPID the child starts as a member
         * of that process's pid namespace (the calling thread's pid_for_children is switched
         * around the clone, and back). With CLONE_NEWNS the child reaches its directory by
         * cwd (a path of that mount view) and it must be the directory cwd_fd holds (same
         * device and inode): an fd of another mount view is never made its cwd. */
        int ns_flags;
        int ns_pidfd;
        /* Installed in the child after no_new_privs, just before execve (seccomp.h); NULL:
         * none. */
        const struct sock_fprog *seccomp;
        /* Scoped from abstract unix sockets made outside its own Landlock domain
         * (landlock.h), after no_new_privs: for a command that joins a Sandbox's
         * namespaces but shares the host's network; where the kernel cannot, without. */
        bool scope_abstract_unix;
        /* > 0: an eventfd the child adds 1 to as soon as it is in its leaf, before it
         * changes identity (after which the command identity may stop it short of its
         * execve and so hold its start for ever): a closer waiting for the start is woken
         * and ends the leaf. 0: none. */
        int born_fd;
} lfs_spawn_args;

/* The calling process's own limits that would end or cripple a long-lived daemon, as
 * inherited from whoever started it (a Sandbox's creator with `ulimit -f`: the first
 * Workspace write past it killed the daemon with SIGXFSZ, the Workspace lost; `ulimit -t`:
 * SIGXCPU, then SIGKILL, after that much CPU; `ulimit -v`: its allocations): file size,
 * CPU time, address space and data, lifted (to the hard limit without CAP_SYS_RESOURCE).
 * Every child lfs_cgroup_spawn starts gets them back as they were, so that commands keep
 * what their creator set. Called once, at the start. */
void lfs_cgroup_lift_limits(void);

/* The steps of a start, the caller's then the child's in the order it takes them: which
 * one failed, so that a message can say it (lfs_spawn_stage_name). */
typedef enum lfs_spawn_stage {
        LFS_SPAWN_STAGE_LEAF, /* the caller's: making the command's leaf (its mkdir) */
        LFS_SPAWN_STAGE_CLONE, /* the caller's: opening the leaf, the clone (or fork) itself */
        LFS_SPAWN_STAGE_CGROUP, /* the child joins its leaf (the fork's way) */
        LFS_SPAWN_STAGE_NAMESPACES, /* joining ns_pidfd's namespaces (the caller's pid namespace too) */
        LFS_SPAWN_STAGE_STREAMS, /* fd_in, fd_out, fd_err become 0, 1, 2 */
        LFS_SPAWN_STAGE_TERMINAL, /* fd_in becomes its controlling terminal */
        LFS_SPAWN_STAGE_IDENTITY, /* uid and gid, no supplementary groups, no capabilities, no_new_privs */
        LFS_SPAWN_STAGE_CWD, /* its working directory */
        LFS_SPAWN_STAGE_SCOPE, /* Landlock's scope of abstract unix sockets */
        LFS_SPAWN_STAGE_LIMITS, /* the creator's resource limits given back */
        LFS_SPAWN_STAGE_SECCOMP, /* the seccomp filter */
        _LFS_SPAWN_STAGE_MAX,
} lfs_spawn_stage;

/* What the step does, in words that follow "cannot": "enter the working directory". */
const char *lfs_spawn_stage_name(lfs_spawn_stage stage);

/* Starts the child in its leaf with clone3(CLONE_INTO_CGROUP | CLONE_PIDFD), or with
 * fork + a write to cgroup.procs where the kernel refuses that (ENOSYS, E2BIG,
 * EOPNOTSUPP, EBUSY, EACCES) or LAYERFS_NO_CLONE3=1 asks for it. The child makes only
 * async-signal-safe calls before execve (the daemon has threads); if no candidate can
 * be executed it exits 127 (not found) or 126 (found but not executable). On failure
 * (a negative errno) *failed_stage says which step failed; it is left alone on success. */
int lfs_cgroup_spawn(const lfs_spawn_args *a, pid_t *ret_pid, int *ret_pidfd, lfs_spawn_stage *failed_stage);
/* Whether clone3's errnum means "not here" (ENOSYS, E2BIG, EOPNOTSUPP, EBUSY, EACCES):
 * then fork and a write to the leaf's cgroup.procs do its job. */
bool lfs_clone3_refused(int errnum);

#endif
