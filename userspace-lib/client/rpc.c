/* SPDX-License-Identifier: MIT */
/*
 * The RPC client: one request per connection over the Sandbox's control socket, reached
 * through its directory held open, made, framed and read by proto/ (docs/protocol.md):
 * the call named by its enum, the Sandbox's token added, fds passed with SCM_RIGHTS; one
 * answer back, {"v", "ok": result} or {"v", "error": {code, message, paths}}.
 */
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "client.h"
#include "frame.h"

/* The Sandbox's socket, reached through its directory held open (no path to swap, and
 * no limit of 108 bytes on the home's path). */
static int connect_control(int dir_fd, int flags) {
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/control.sock", dir_fd);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

static char *read_token(int dir_fd) {
        char buf[128] = "";
        int fd = openat(dir_fd, "token", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!f) {
                if (fd >= 0)
                        close(fd);
                return NULL;
        }
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = 0;
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return xstrdup(buf);
}

int lfs_daemon_gone(const sandbox_record *rec, int errnum, lfs_error **err) {
        return lfs_fail(err, LFS_NO_SUCH_SANDBOX, errnum,
                        "sandbox %d of project '%s' is gone: its daemon died; 'layerfs runtime reclaim' "
                        "(or 'layerfs project list_sandboxes') cleans up after it",
                        rec->number, rec->project);
}

int lfs_rpc_send(const sandbox_record *rec, lfs_call call, json_t *args, const int *fds, size_t n_fds,
                 lfs_error **err) {
        if (!args)
                return lfs_fail(err, LFS_INVALID_INPUT, EINVAL,
                                "cannot encode the arguments of '%s' to sandbox %d (a text that is not "
                                "UTF-8?); nothing was sent",
                                lfs_call_name(call), rec->number);
        _cleanup_free_ char *token = rec->dir_fd >= 0 ? read_token(rec->dir_fd) : NULL;
        _cleanup_close_ int fd = rec->dir_fd >= 0 ? connect_control(rec->dir_fd, 0) : -ENOENT;
        if (fd < 0 || !token) {
                json_decref(args);
                return lfs_daemon_gone(rec, fd < 0 ? -fd : ENOENT, err);
        }
        /* The arguments cannot stand for the head's keys ("v", "token", "call"). */
        json_t *req = lfs_proto_request(call, token);
        json_object_update_missing(req, args);
        json_decref(args);
        _cleanup_error_ lfs_error *e = NULL;
        int r = lfs_frame_write(fd, req, LFS_FRAME_MAX_REQUEST, fds, n_fds, false, &e);
        json_decref(req);
        if (r == -EMSGSIZE)
                return lfs_fail(err, LFS_INVALID_INPUT, EMSGSIZE, "the call to sandbox %d is too large: %s",
                                rec->number, e->message);
        if (r == -EPIPE || r == -ECONNRESET) {
                /* A daemon that turned the connection away (Busy) said why before it stopped
                 * reading, and one that closed meanwhile is no answer: what the answer's
                 * reader makes of either is the call's. */
                json_t *answer = NULL;
                _cleanup_error_ lfs_error *why = NULL;
                int k = lfs_rpc_read_answer(rec, fd, &answer, &why);
                json_decref(answer);
                if (k < 0 && why) {
                        if (err)
                                *err = TAKE_PTR(why);
                        return k;
                }
        }
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, -r, "cannot talk to sandbox %d: %s", rec->number,
                                strerror(-r));
        return TAKE_FD(fd);
}

/* No answer: a daemon that was closing (idle close, another caller's close) took the
 * connection but no longer read it; its teardown removes the Sandbox's directory last.
 * A daemon that died some other way (killed, crashed) leaves the directory, and the
 * call may have done part of its work. */
static int no_answer(const sandbox_record *rec, lfs_error **err) {
        lfs_wait_owner_gone(rec, 2000);
        if (!lfs_record_alive(rec) && access(rec->dir, F_OK) < 0 && errno == ENOENT)
                return lfs_fail(err, LFS_NO_SUCH_SANDBOX, 0,
                                "sandbox %d of project '%s' closed while the call was on its way; the call "
                                "did nothing",
                                rec->number, rec->project);
        if (!lfs_record_alive(rec))
                return lfs_fail(
                        err, LFS_NO_SUCH_SANDBOX, 0,
                        "sandbox %d of project '%s' is gone: its daemon died during the call, which may "
                        "have done part of its work; 'layerfs runtime reclaim' cleans up after it",
                        rec->number, rec->project);
        return lfs_fail(err, LFS_FAILED, EIO,
                        "sandbox %d's daemon gave no answer; see 'layerfs sandbox log %d'", rec->number,
                        rec->number);
}

int lfs_rpc_answer(const sandbox_record *rec, int got, json_t *frame, lfs_error *read_err, json_t **ret,
                   lfs_error **err) {
        _cleanup_error_ lfs_error *why = read_err;
        /* The connection ended (or was reset: a daemon closing drops what it has not
         * read) before a whole answer: no answer, whatever the reason. What came but is
         * no answer (too long, not JSON) is the daemon's fault. */
        if (got == 0 || (got < 0 && (!why || why->code == LFS_FAILED || got == -EPROTO)))
                return no_answer(rec, err);
        if (got < 0)
                return lfs_fail(err, LFS_FAILED, EIO,
                                "sandbox %d's daemon sent no proper answer: %s; see "
                                "'layerfs sandbox log %d'",
                                rec->number, why ? why->message : strerror(-got), rec->number);
        int r = lfs_proto_parse_answer(frame, ret, err);
        json_decref(frame);
        return r;
}

int lfs_rpc_read_answer(const sandbox_record *rec, int fd, json_t **ret, lfs_error **err) {
        lfs_frame_reader reader;
        lfs_frame_reader_init(&reader, fd, LFS_FRAME_MAX_ANSWER, 0);
        json_t *frame = NULL;
        lfs_error *read_err = NULL;
        int got = lfs_frame_read(&reader, &frame, &read_err);
        lfs_frame_reader_done(&reader);
        return lfs_rpc_answer(rec, got, frame, read_err, ret, err);
}

int lfs_rpc(const sandbox_record *rec, lfs_call call, json_t *args, json_t **ret, lfs_error **err) {
        _cleanup_close_ int fd = lfs_rpc_send(rec, call, args, NULL, 0, err);
        if (fd < 0)
                return fd;
        return lfs_rpc_read_answer(rec, fd, ret, err);
}

/* ---- one call to many Sandboxes at once ---- */

/* Connections open at once: far below any fd limit, and more than the CPUs that answer. */
#define RPC_ALL_IN_FLIGHT 64

typedef struct rpc_pending {
        size_t index;
        int fd;
        lfs_frame_reader reader;
} rpc_pending;

/* Connects to recs[i]'s daemon without waiting (a daemon that stopped accepting, its
 * backlog full, is -EAGAIN at once) and sends the call; the connection, or -errno. */
static int rpc_start(const sandbox_record *rec, lfs_call call) {
        _cleanup_free_ char *token = rec->dir_fd >= 0 ? read_token(rec->dir_fd) : NULL;
        if (!token)
                return -ENOENT;
        _cleanup_close_ int fd = connect_control(rec->dir_fd, SOCK_NONBLOCK);
        if (fd < 0)
                return fd;
        json_t *req = lfs_proto_request(call, token);
        /* A request of a few dozen bytes fits in any socket's buffer: a write that would
         * wait is a daemon that does not read. */
        int r = lfs_frame_write(fd, req, LFS_FRAME_MAX_REQUEST, NULL, 0, true, NULL);
        json_decref(req);
        return r < 0 ? r : TAKE_FD(fd);
}

static void rpc_finish(rpc_pending *p, int status, json_t **ret_results, int *ret_status) {
        ret_status[p->index] = status;
        if (status < 0)
                ret_results[p->index] = NULL;
        lfs_frame_reader_done(&p->reader);
        close(p->fd);
}

/* Reads what came on p's connection: 1 while its answer is not whole yet, else 0 (done:
 * ret_status and ret_results of its index set). */
static int rpc_read(rpc_pending *p, json_t **ret_results, int *ret_status) {
        json_t *frame = NULL;
        lfs_error *e = NULL;
        int got = lfs_frame_read(&p->reader, &frame, &e);
        if (got == -EAGAIN)
                return 1;
        json_t *ok = NULL;
        int r = got > 0 ? lfs_proto_parse_answer(frame, &ok, NULL) : got == 0 ? -EPIPE : got;
        if (got > 0)
                json_decref(frame);
        lfs_error_free(e);
        ret_results[p->index] = r < 0 ? NULL : ok;
        rpc_finish(p, r < 0 ? r : 0, ret_results, ret_status);
        return 0;
}

void lfs_rpc_all(const sandbox_record *recs, size_t n, lfs_call call, int timeout_ms, json_t **ret_results,
                 int *ret_status) {
        rpc_pending pending[RPC_ALL_IN_FLIGHT];
        struct pollfd polled[RPC_ALL_IN_FLIGHT];
        size_t next = 0, n_pending = 0;
        long long deadline = lfs_now_ms() + timeout_ms;
        while (next < n || n_pending) {
                /* As many more as there is room for. */
                while (next < n && n_pending < RPC_ALL_IN_FLIGHT) {
                        size_t i = next++;
                        int fd = rpc_start(&recs[i], call);
                        if (fd < 0) {
                                ret_results[i] = NULL;
                                ret_status[i] = fd;
                                continue;
                        }
                        rpc_pending *p = &pending[n_pending++];
                        p->index = i;
                        p->fd = fd;
                        lfs_frame_reader_init(&p->reader, fd, LFS_FRAME_MAX_ANSWER, 0);
                }
                if (!n_pending)
                        continue;
                long long left = deadline - lfs_now_ms();
                for (size_t k = 0; k < n_pending; k++)
                        polled[k] = (struct pollfd){ .fd = pending[k].fd, .events = POLLIN };
                int ready = left > 0 ? poll(polled, n_pending, (int)left) : 0;
                if (ready < 0 && errno == EINTR)
                        continue;
                if (ready <= 0) {
                        /* The time is up (or poll failed): whoever has not answered did not
                         * answer in time, and those not asked yet are not asked. */
                        for (size_t k = 0; k < n_pending; k++)
                                rpc_finish(&pending[k], -ETIMEDOUT, ret_results, ret_status);
                        n_pending = 0;
                        for (; next < n; next++) {
                                ret_results[next] = NULL;
                                ret_status[next] = -ETIMEDOUT;
                        }
                        continue;
                }
                /* The answered ones leave; the last pending takes each one's place. */
                for (size_t k = n_pending; k-- > 0;)
                        if (polled[k].revents && rpc_read(&pending[k], ret_results, ret_status) == 0)
                                pending[k] = pending[--n_pending];
        }
}
