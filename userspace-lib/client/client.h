/* SPDX-License-Identifier: MIT */
/*
 * What the Sandbox client's files share (userspace-lib/client/): opening a Sandbox's
 * record, its daemon (daemon.c), the RPC client (rpc.c), the removal of what a Sandbox
 * left (sandbox.c) and the checks of a command (exec.c). Functions return 0 or a
 * negative errno with *err set.
 */
#ifndef LFS_CLIENT_H
#define LFS_CLIENT_H

#include <jansson.h>

#include "calls.h"
#include "codec.h"
#include "platforms.h"
#include "records.h"

/* ---- the Sandbox (sandbox.c) ---- */
/* Opens the checked record of project's Sandbox number, and its directory if it is
 * there (ret->dir_fd, else -1). */
int lfs_sandbox_open(lfs_home *home, const char *project, int number, sandbox_record *ret, lfs_error **err);
/* The running Sandboxes of project (NULL: of every project) whose daemon is alive, from
 * the home's records (none before the home has any). */
int lfs_live_sandboxes(lfs_home *home, const char *project, lfs_sandbox_info **ret, size_t *ret_n,
                       lfs_error **err);
/* Opens the record of a Sandbox whose daemon must be alive to answer. */
int lfs_sandbox_open_live(lfs_home *home, const char *project, int number, sandbox_record *ret,
                          lfs_error **err);
/* Opens the Sandbox and sends call with args (taken) to its daemon: *ret its "ok" result. */
int lfs_sandbox_call(lfs_home *home, const char *project, int sandbox, lfs_call call, json_t *args,
                     json_t **ret, lfs_error **err);
/* The runtime a checked record names, which acts on it (its platform's, or for linux
 * native or namespaces), *ret_platform its platform (if not NULL), and *ret the record as
 * that runtime sees it (pointing into rec). */
const lfs_runtime *lfs_record_runtime(const lfs_home *home, const sandbox_record *rec,
                                      const lfs_platform **ret_platform, lfs_sandbox_ref *ret);
/* Everything a Sandbox left (its runtime's reclaim), its record last; the caller owns the
 * record. */
int lfs_remove_remains(lfs_home *home, sqlite3 *db, sandbox_record *rec, lfs_error **err);
/* runtime.reclaim over db, a connection to the home's records the caller holds (and
 * closes): create reclaims on the connection that then claims its number. */
int lfs_reclaim_with(lfs_home *home, sqlite3 *db, lfs_reclaimed **ret, size_t *ret_n, lfs_error **err);

/* Opens the Sandbox's directory (rec->dir_fd) beneath the home, following no link. */
int lfs_sandbox_open_dir(lfs_home *home, sandbox_record *rec, lfs_error **err);

/* ---- the pool (pool.c) ---- */
/* What a create takes from its caller, which a pooled Sandbox must have been made with. */
typedef struct lfs_pool_request {
        const char *project, *platform, *runtime, *daemon;
        lfs_network network;
        const lfs_sandbox_limits *limits;
} lfs_pool_request;
/* The key of the creates a Sandbox made now by this process may serve (64 hex digits);
 * NULL for a caller that no pool serves (under a seccomp filter). */
char *lfs_pool_key(const lfs_pool_request *q);
/* Takes a pooled Sandbox of project with key whose daemon answers in time: *ret_sandbox
 * its number. One that does not is ended. -ENOENT when there is none. */
int lfs_pool_claim(lfs_home *home, sqlite3 *db, const char *project, const char *key, int *ret_sandbox);
/* Ends every pooled Sandbox of the home, whatever its project and key (a create that found
 * no number, id range or network left: the ranges are the home's); how many. */
int lfs_pool_drain(lfs_home *home, sqlite3 *db);
/* The fill lock of key's pool (HOME/pool/KEY16.lock), taken without waiting: -EWOULDBLOCK
 * (no error set) while another process fills that pool. With key NULL, the fillers' lock
 * (HOME/pool/fillers.lock), shared and without waiting too (-EWOULDBLOCK while someone
 * holds it exclusively): held by every filler while it runs, so that one who takes it
 * exclusively (flock) waits for every fill under way. */
int lfs_pool_lock(lfs_home *home, const char *key, int *ret_fd, lfs_error **err);

/* ---- the daemon (daemon.c) ---- */
/* Waits (on a pidfd) until the record's owner has exited, at most timeout_ms. True when
 * it has. */
bool lfs_wait_owner_gone(const sandbox_record *rec, int timeout_ms);
/* Which layerfs-daemon a Sandbox runs (an absolute path). */
int lfs_daemon_path(char **ret_path, lfs_error **err);
/* Makes the Sandbox's directory and token, and has the record's runtime (of platform) make
 * its place and start daemon there; returns once it answers on its socket. id_hold (or -1):
 * the id range's lock, for the Sandbox's init to keep. */
int lfs_start_daemon(lfs_home *home, int base_fd, const lfs_platform *platform, sandbox_record *rec,
                     const char *daemon, int id_hold, pid_t *ret_pid, lfs_error **err);
/* Appends the last lines of the daemon's log to *err's message. */
void lfs_add_daemon_log(const sandbox_record *rec, lfs_error **err);

/* ---- the RPC client (rpc.c) ---- */
/* NoSuchSandbox: the record's daemon is gone. */
int lfs_daemon_gone(const sandbox_record *rec, int errnum, lfs_error **err);
/* Connects and sends call's request, args (an object of its arguments, taken: {} for
 * none) with the token added, and fds passed along; returns the connected socket. NULL
 * args are arguments json_pack could not make: refused, never sent as none. */
int lfs_rpc_send(const sandbox_record *rec, lfs_call call, json_t *args, const int *fds, size_t n_fds,
                 lfs_error **err);
/* The daemon's answer as lfs_frame_read gave it (got, with frame or read_err; both taken):
 * *ret its "ok" result (if ret), or its refusal as ours; none (the connection ended or
 * was reset before a whole answer) is the daemon closing or gone. */
int lfs_rpc_answer(const sandbox_record *rec, int got, json_t *frame, lfs_error *read_err, json_t **ret,
                   lfs_error **err);
/* Reads the answer on fd (blocking) and takes it as lfs_rpc_answer does. */
int lfs_rpc_read_answer(const sandbox_record *rec, int fd, json_t **ret, lfs_error **err);
/* Sends call with args (taken) and returns the "ok" result, or the daemon's error. A
 * refusal of the answer's version (another build's daemon) is -EPROTO, Unsupported: the
 * call may have taken effect. */
int lfs_rpc(const sandbox_record *rec, lfs_call call, json_t *args, json_t **ret, lfs_error **err);

/* ---- commands (exec.c) ---- */
/* The arguments of workspace.exec (and process.start) for argv with o's settings. */
json_t *lfs_exec_request(const char *branch, const char *const *argv, size_t n_argv,
                         const lfs_exec_options *o);
/* The command, its environment, cwd and timeout: refused before anything is sent. */
int lfs_check_exec_input(const char *const *argv, size_t n_argv, const lfs_exec_options *o, lfs_error **err);

/* One call (without arguments) to each of n Sandboxes' daemons at once, through
 * recs[i].dir_fd: at most 64 connections open, every answer awaited until timeout_ms from
 * the start. ret_status[i]: 0 and ret_results[i] the "ok" result (the caller's), or a
 * negative errno and NULL: -ETIMEDOUT for a daemon that gave no answer in time (stopped,
 * hung, or not asked before the time was up), -EAGAIN for one that accepts no connection,
 * -ECONNREFUSED or -ENOENT for one that is gone, another for a refusal or a bad answer. A
 * daemon that never answers costs the caller timeout_ms, never more. */
void lfs_rpc_all(const sandbox_record *recs, size_t n, lfs_call call, int timeout_ms, json_t **ret_results,
                 int *ret_status);

#endif
