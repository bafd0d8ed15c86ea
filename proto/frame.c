/* SPDX-License-Identifier: MIT */
#include "frame.h"

#include "codec.h"

#include <poll.h>
#include <sys/socket.h>

#define FIRST_BUFFER 4096

/* Room for one more fd than any call takes: one too many is received (and closed, and
 * counted), not silently cut by the kernel. */
#define CONTROL_FDS (LFS_CALL_MAX_FDS + 1)

void lfs_frame_reader_init(lfs_frame_reader *r, int fd, size_t max, size_t max_fds) {
        *r = (lfs_frame_reader){ .fd = fd,
                                 .max = max,
                                 .max_fds = max_fds < LFS_CALL_MAX_FDS ? max_fds : LFS_CALL_MAX_FDS };
}

static void close_fds(lfs_frame_reader *r) {
        for (size_t i = 0; i < r->n_fds; i++)
                close(r->fds[i]);
        r->n_fds = 0;
}

void lfs_frame_reader_done(lfs_frame_reader *r) {
        close_fds(r);
        free(r->buf);
        r->buf = NULL;
        r->len = r->cap = r->scanned = 0;
}

/* Keeps the fds of one message up to max_fds; closes and counts the rest. */
static void keep_fds(lfs_frame_reader *r, struct msghdr *msg) {
        for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                const unsigned char *data = CMSG_DATA(c);
                for (size_t i = 0; i < n; i++) {
                        int fd;
                        memcpy(&fd, data + i * sizeof(int), sizeof(int));
                        if (r->n_fds < r->max_fds) {
                                r->fds[r->n_fds++] = fd;
                        } else {
                                close(fd);
                                r->fds_dropped++;
                        }
                }
        }
        /* More than the control buffer holds: the kernel closed the rest. */
        if (msg->msg_flags & MSG_CTRUNC)
                r->fds_cut = true;
}

/* One read into the buffer: 1 bytes came, 0 the peer closed, or a negative errno. */
static int fill(lfs_frame_reader *r) {
        if (r->cap - r->len == 0) {
                size_t cap = r->cap ? 2 * r->cap : FIRST_BUFFER;
                r->buf = xrealloc(r->buf, cap < r->max ? cap : r->max);
                r->cap = cap < r->max ? cap : r->max;
        }
        union {
                char buf[CMSG_SPACE(sizeof(int) * CONTROL_FDS)];
                struct cmsghdr align;
        } control;
        struct iovec iov = { .iov_base = r->buf + r->len, .iov_len = r->cap - r->len };
        struct msghdr msg = { .msg_iov = &iov,
                              .msg_iovlen = 1,
                              .msg_control = control.buf,
                              .msg_controllen = sizeof(control.buf) };
        for (;;) {
                ssize_t k = recvmsg(r->fd, &msg, MSG_CMSG_CLOEXEC);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                keep_fds(r, &msg);
                r->len += (size_t)k;
                return k > 0;
        }
}

/* The frame of buf's first n bytes (its "\n" left out), taken out of the buffer. */
static int take_frame(lfs_frame_reader *r, size_t n, json_t **ret_frame, lfs_error **err) {
        json_error_t jerr;
        /* Duplicate keys are refused: two readers must not see two different requests. */
        json_t *frame = json_loadb(r->buf, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        memmove(r->buf, r->buf + n + 1, r->len - n - 1);
        r->len -= n + 1;
        r->scanned = 0;
        if (!frame)
                return lfs_fail(
                        err, LFS_INVALID_INPUT, EBADMSG,
                        "the frame is not one JSON text: %s (at byte %d of %zu); send one JSON object "
                        "on one line",
                        jerr.text, jerr.position, n);
        if (!json_is_object(frame)) {
                int r2 = lfs_fail(err, LFS_INVALID_INPUT, EBADMSG,
                                  "the frame is %s, not a JSON object; send one JSON object on one line",
                                  lfs_proto_json_kind(frame));
                json_decref(frame);
                return r2;
        }
        *ret_frame = frame;
        return 1;
}

int lfs_frame_read(lfs_frame_reader *r, json_t **ret_frame, lfs_error **err) {
        for (;;) {
                const char *nl =
                        r->len > r->scanned ? memchr(r->buf + r->scanned, '\n', r->len - r->scanned) : NULL;
                if (nl)
                        return take_frame(r, (size_t)(nl - r->buf), ret_frame, err);
                r->scanned = r->len;
                if (r->len >= r->max) {
                        /* Nothing more is read: the rest of the frame is not worth taking. */
                        r->len = r->scanned = 0;
                        r->eof = true;
                        return lfs_fail(
                                err, LFS_INVALID_INPUT, EMSGSIZE,
                                "the frame is longer than %zu bytes (its newline included), the most "
                                "this side reads",
                                r->max);
                }
                if (r->eof) {
                        if (!r->len)
                                return 0;
                        size_t n = r->len;
                        r->len = r->scanned = 0;
                        return lfs_fail(
                                err, LFS_INVALID_INPUT, EPROTO,
                                "the connection ended in the middle of a frame: %zu bytes without the "
                                "newline that ends one",
                                n);
                }
                int k = fill(r);
                if (k == -EAGAIN || k == -EWOULDBLOCK)
                        return -EAGAIN;
                if (k < 0)
                        return lfs_fail(err, LFS_FAILED, -k, "cannot read from the socket: %s",
                                        strerror(-k));
                if (k == 0)
                        r->eof = true;
        }
}

bool lfs_frame_no_fds(const lfs_frame_reader *r) {
        return !r->n_fds && !r->fds_dropped && !r->fds_cut;
}

int lfs_frame_take_fds(lfs_frame_reader *r, const char *what, size_t want, int *ret_fds, lfs_error **err) {
        if (r->n_fds == want && !r->fds_dropped && !r->fds_cut) {
                memcpy(ret_fds, r->fds, want * sizeof(int));
                r->n_fds = 0;
                return 0;
        }
        size_t came = r->n_fds + r->fds_dropped;
        const char *more = r->fds_cut ? " or more" : "";
        close_fds(r);
        r->fds_dropped = 0;
        r->fds_cut = false;
        if (want)
                return lfs_fail(
                        err, LFS_INVALID_INPUT, EBADF,
                        "'%s' takes %zu fds with its request (SCM_RIGHTS), but %zu%s came; they were "
                        "closed and the call was not run",
                        what, want, came, more);
        return lfs_fail(err, LFS_INVALID_INPUT, EBADF,
                        "'%s' takes no fds, but %zu%s came with the request; they were closed and the call "
                        "was not run",
                        what, came, more);
}

static int wait_writable(int fd) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        while (poll(&p, 1, -1) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

int lfs_frame_write(int fd, json_t *frame, size_t max, const int *fds, size_t n_fds, bool dontwait,
                    lfs_error **err) {
        if (n_fds > LFS_CALL_MAX_FDS)
                return lfs_fail(err, LFS_INVALID_INPUT, EINVAL, "a frame carries at most %d fds, not %zu",
                                LFS_CALL_MAX_FDS, n_fds);
        _cleanup_free_ char *text = json_is_object(frame) ? json_dumps(frame, JSON_COMPACT) : NULL;
        if (!text)
                return lfs_fail(err, LFS_FAILED, EINVAL, "cannot encode the frame: not a JSON object");
        size_t len = strlen(text);
        if (len + 1 > max)
                return lfs_fail(err, LFS_INVALID_INPUT, EMSGSIZE,
                                "the frame would be %zu bytes, more than the %zu its reader takes", len + 1,
                                max);
        text[len] = '\n'; /* over the NUL: json_dumps's buffer has len + 1 bytes */
        union {
                char buf[CMSG_SPACE(sizeof(int) * LFS_CALL_MAX_FDS)];
                struct cmsghdr align;
        } control = { 0 };
        int flags = MSG_NOSIGNAL | (dontwait ? MSG_DONTWAIT : 0);
        bool fds_sent = n_fds == 0;
        for (size_t off = 0; off < len + 1;) {
                struct iovec iov = { .iov_base = text + off, .iov_len = len + 1 - off };
                struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
                if (!fds_sent) {
                        msg.msg_control = control.buf;
                        msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                        c->cmsg_level = SOL_SOCKET;
                        c->cmsg_type = SCM_RIGHTS;
                        c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                        memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
                }
                ssize_t k = sendmsg(fd, &msg, flags);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && !dontwait) {
                        int r = wait_writable(fd);
                        if (r < 0)
                                return lfs_fail(err, LFS_FAILED, -r, "cannot write to the socket: %s",
                                                strerror(-r));
                        continue;
                }
                if (k < 0) {
                        int e = errno == EWOULDBLOCK ? EAGAIN : errno;
                        return lfs_fail(err, LFS_FAILED, e, "cannot write to the socket: %s", strerror(e));
                }
                /* The fds went with the first bytes; the rest of a long frame follows. */
                fds_sent = true;
                off += (size_t)k;
        }
        return 0;
}
