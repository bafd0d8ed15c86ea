/* SPDX-License-Identifier: MIT */
/*
 * The RPC client: one JSON line per request (the Sandbox's token added, fds passed with
 * SCM_RIGHTS) over the Sandbox's control socket, reached through its directory held
 * open, and one JSON line back, {"ok": result} or {"error": {code, message, paths}}.
 * The framing lives here only (docs/protocol.md).
 */
#include <fcntl.h>
#include <jansson.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "client.h"

/* The Sandbox's socket, reached through its directory held open (no path to swap, and
 * no limit of 108 bytes on the home's path). */
static int connect_control(int dir_fd) {
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/control.sock", dir_fd);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
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

/* Connects and sends req (token added) with fds passed along (SCM_RIGHTS); returns the
 * connected socket. */
int lfs_rpc_send(const sandbox_record *rec, json_t *req, const int *fds, size_t n_fds, lfs_error **err) {
        _cleanup_free_ char *token = rec->dir_fd >= 0 ? read_token(rec->dir_fd) : NULL;
        _cleanup_close_ int fd = rec->dir_fd >= 0 ? connect_control(rec->dir_fd) : -ENOENT;
        if (fd < 0 || !token) {
                json_decref(req);
                return lfs_daemon_gone(rec, fd < 0 ? -fd : ENOENT, err);
        }
        json_object_set_new(req, "token", json_string(token));
        _cleanup_free_ char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        size_t len = strlen(text);
        text[len] = '\n';
        union {
                char buf[CMSG_SPACE(sizeof(int) * 3)];
                struct cmsghdr align;
        } control = { 0 };
        struct iovec iov = { .iov_base = text, .iov_len = len + 1 };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (n_fds) {
                msg.msg_control = control.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (sent < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot talk to sandbox %d: %s", rec->number,
                                strerror(errno));
        /* The fds went with the first bytes; the rest of a long request follows. */
        for (size_t off = (size_t)sent; off < len + 1;) {
                ssize_t k = send(fd, text + off, len + 1 - off, MSG_NOSIGNAL);
                if (k <= 0)
                        return lfs_fail(err, LFS_FAILED, EIO, "cannot talk to sandbox %d", rec->number);
                off += (size_t)k;
        }
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

int lfs_rpc_answer(const sandbox_record *rec, const char *line, json_t **ret, lfs_error **err) {
        json_t *resp = line ? json_loads(line, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        if (!resp)
                return no_answer(rec, err);
        json_t *error = json_object_get(resp, "error");
        int r = 0;
        if (error) {
                json_t *paths = json_object_get(error, "paths");
                lfs_code code = lfs_code_from_name(json_string_value(json_object_get(error, "code")));
                const char *message = json_string_value(json_object_get(error, "message"));
                if (code == LFS_CONFLICT && json_is_array(paths)) {
                        size_t n = json_array_size(paths);
                        char **list = xcalloc(n, sizeof(char *));
                        for (size_t i = 0; i < n; i++)
                                list[i] = xstrdup(json_string_value(json_array_get(paths, i)) ?: "");
                        r = lfs_fail_conflict(err, list, n, "%s", message ? message : "conflict");
                } else {
                        r = lfs_fail(err, code, 0, "%s", message ? message : "failed");
                }
        } else if (ret) {
                *ret = json_incref(json_object_get(resp, "ok"));
        }
        json_decref(resp);
        return r;
}

/* Sends req and returns the "ok" result, or the daemon's error. */
int lfs_rpc(const sandbox_record *rec, json_t *req, json_t **ret, lfs_error **err) {
        int fd = lfs_rpc_send(rec, req, NULL, 0, err);
        if (fd < 0)
                return fd;
        FILE *in = fdopen(fd, "r");
        if (!in) {
                close(fd);
                return lfs_fail(err, LFS_FAILED, errno, "fdopen: %s", strerror(errno));
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t k = getline(&line, &cap, in);
        fclose(in);
        int r = lfs_rpc_answer(rec, k > 0 ? line : NULL, ret, err);
        free(line);
        return r;
}
