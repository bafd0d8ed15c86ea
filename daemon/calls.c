/* SPDX-License-Identifier: MIT */
/*
 * Each call of proto/calls.h and its handler, in one array indexed by the call's enum
 * (control.c has checked the frame, the version, the token, the call and its fds). A
 * handler reads its arguments with proto's typed readers: an argument of the wrong JSON
 * type is refused InvalidInput naming it, never read as absent or false and acted on.
 * workspace.exec and process.start read theirs in exec.c (prepare_command).
 */
#include "daemon.h"
#include "codec.h"

static json_t *handle_SANDBOX_PING(daemon_state *d, const call_request *r) {
        (void)d, (void)r;
        return lfs_proto_ok(json_pack("{s:i}", "pid", (int)getpid()));
}

static json_t *handle_SANDBOX_LIST_WORKSPACES(daemon_state *d, const call_request *r) {
        (void)r;
        return call_list(d);
}

static json_t *handle_SANDBOX_CLOSE(daemon_state *d, const call_request *r) {
        _cleanup_error_ lfs_error *e = NULL;
        bool force;
        if (lfs_proto_arg_bool(r->args, r->call, "force", false, &force, &e) < 0)
                return lfs_proto_error(e);
        return call_close(d, force, r->peer_pid, force ? "sandbox close --force" : "sandbox close");
}

static json_t *handle_SANDBOX_EVENTS(daemon_state *d, const call_request *r) {
        _cleanup_error_ lfs_error *e = NULL;
        bool follow;
        if (lfs_proto_arg_bool(r->args, r->call, "follow", false, &follow, &e) < 0)
                return lfs_proto_error(e);
        return call_events(d, r->fd, follow);
}

static json_t *handle_WORKSPACE_MOUNT(daemon_state *d, const call_request *r) {
        _cleanup_error_ lfs_error *e = NULL;
        const char *branch;
        if (lfs_proto_arg_string(r->args, r->call, "branch", &branch, &e) < 0)
                return lfs_proto_error(e);
        return call_mount(d, branch);
}

static json_t *handle_WORKSPACE_STATUS(daemon_state *d, const call_request *r) {
        _cleanup_error_ lfs_error *e = NULL;
        const char *branch;
        if (lfs_proto_arg_string(r->args, r->call, "branch", &branch, &e) < 0)
                return lfs_proto_error(e);
        return call_status(d, branch);
}

static json_t *handle_WORKSPACE_COMMIT(daemon_state *d, const call_request *r) {
        _cleanup_error_ lfs_error *e = NULL;
        const char *branch, *message;
        if (lfs_proto_arg_string(r->args, r->call, "branch", &branch, &e) < 0 ||
            lfs_proto_arg_string(r->args, r->call, "message", &message, &e) < 0)
                return lfs_proto_error(e);
        return call_commit(d, branch, message);
}

static json_t *handle_WORKSPACE_UNMOUNT(daemon_state *d, const call_request *r) {
        _cleanup_error_ lfs_error *e = NULL;
        const char *branch;
        bool discard;
        if (lfs_proto_arg_string(r->args, r->call, "branch", &branch, &e) < 0 ||
            lfs_proto_arg_bool(r->args, r->call, "discard", false, &discard, &e) < 0)
                return lfs_proto_error(e);
        return call_unmount(d, branch, discard);
}

static json_t *handle_WORKSPACE_EXEC(daemon_state *d, const call_request *r) {
        int fds[LFS_CALL_MAX_FDS];
        memcpy(fds, r->fds, sizeof(fds));
        return call_exec(d, r->args, r->fd, fds, r->n_fds);
}

static json_t *handle_PROCESS_START(daemon_state *d, const call_request *r) {
        return call_process_start(d, r->args);
}

static json_t *handle_PROCESS_LIST(daemon_state *d, const call_request *r) {
        (void)r;
        return call_process_list(d);
}

static json_t *handle_PROCESS_KILL(daemon_state *d, const call_request *r) {
        return call_process_kill(d, r->args);
}

typedef json_t *(*call_handler)(daemon_state *d, const call_request *r);

/* Made from the table itself: a call without its handle_<ID> does not compile, so no row
 * is ever NULL. */
static const call_handler handlers[LFS_CALL_COUNT] = {
#define HANDLER_ROW(id, name, fds, flags) [LFS_CALL_##id] = handle_##id,
        LFS_CALLS(HANDLER_ROW)
#undef HANDLER_ROW
};

json_t *handle_call(daemon_state *d, const call_request *r) {
        return handlers[r->call](d, r);
}
