/* SPDX-License-Identifier: MIT */
/*
 * Every call a Sandbox's daemon serves, in one table (docs/protocol.md says what each
 * takes and answers). A row: the enum id, the wire name "group.method", how many fds
 * come with the request (SCM_RIGHTS; 0: none may), and flags:
 *
 *   LFS_CALL_UNLOCKED  runs without the daemon's lock: the call takes it itself, only
 *                      while it looks at the state (an exec holds its connection until
 *                      its command ends; the others would stop every call meanwhile),
 *                      and checks itself whether the Sandbox is closing;
 *   LFS_CALL_STREAMS   may answer with a stream of frames instead of one answer
 *                      (sandbox.events with follow: one frame per event);
 *   LFS_CALL_FDS_OR_NONE  takes its fds or none at all (workspace.exec: none with tty,
 *                      which makes the command's terminal itself); its handler checks
 *                      which fits its arguments.
 *
 * The enum, the name <-> id lookup (codec.c) and the flags all come from this table; the
 * daemon indexes its handlers by the enum.
 */
#ifndef LFS_PROTO_CALLS_H
#define LFS_PROTO_CALLS_H

#include <stddef.h>

enum {
        LFS_CALL_UNLOCKED = 1 << 0,
        LFS_CALL_STREAMS = 1 << 1,
        LFS_CALL_FDS_OR_NONE = 1 << 2,
};

/* X(ID, "group.method", FDS, FLAGS) */
#define LFS_CALLS(X)                                                                                        \
        X(SANDBOX_PING, "sandbox.ping", 0, 0)                                                               \
        X(SANDBOX_LIST_WORKSPACES, "sandbox.list_workspaces", 0, 0)                                         \
        X(SANDBOX_CLOSE, "sandbox.close", 0, 0)                                                             \
        X(SANDBOX_EVENTS, "sandbox.events", 0, LFS_CALL_UNLOCKED | LFS_CALL_STREAMS)                        \
        X(WORKSPACE_MOUNT, "workspace.mount", 0, 0)                                                         \
        X(WORKSPACE_STATUS, "workspace.status", 0, 0)                                                       \
        X(WORKSPACE_COMMIT, "workspace.commit", 0, 0)                                                       \
        X(WORKSPACE_UNMOUNT, "workspace.unmount", 0, 0)                                                     \
        X(WORKSPACE_EXEC, "workspace.exec", 3, LFS_CALL_UNLOCKED | LFS_CALL_FDS_OR_NONE)                    \
        X(PROCESS_START, "process.start", 0, LFS_CALL_UNLOCKED)                                             \
        X(PROCESS_LIST, "process.list", 0, 0)                                                               \
        X(PROCESS_KILL, "process.kill", 0, 0)

typedef enum lfs_call {
#define LFS_CALL_ENUM(id, name, fds, flags) LFS_CALL_##id,
        LFS_CALLS(LFS_CALL_ENUM)
#undef LFS_CALL_ENUM
                LFS_CALL_COUNT
} lfs_call;

/* The most fds any call takes: what a frame reader accepts at most. */
#define LFS_CALL_MAX_FDS 3

/* The call's wire name, "group.method"; NULL for an id out of range. */
const char *lfs_call_name(lfs_call call);
/* The call named name: 0 and *ret_call, or -ENOENT for a name that is no call. */
int lfs_call_from_name(const char *name, lfs_call *ret_call);
/* How many fds the call's request carries. */
size_t lfs_call_fds(lfs_call call);
unsigned lfs_call_flags(lfs_call call);

#endif
