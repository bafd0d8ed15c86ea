/* SPDX-License-Identifier: MIT */
/*
 * Frames on a Sandbox's control socket (docs/protocol.md): one JSON object, UTF-8, on
 * one line (no byte 0x0A inside, as a compact dump never has one) ending with "\n". The
 * fds of a request travel with its bytes (SCM_RIGHTS). A request is at most
 * LFS_FRAME_MAX_REQUEST bytes with its "\n"; an answer or a stream's frame at most
 * LFS_FRAME_MAX_ANSWER (a bound on a runaway peer, not a working limit).
 *
 * Errors: what a peer sent wrong (a frame cut short by the end of the connection, too
 * long, not JSON, not an object) is LFS_INVALID_INPUT, the message saying which; the
 * socket's own failures are LFS_FAILED. A reader of answers (the library) wraps them in
 * its own words: there they are the daemon's fault, not the caller's.
 */
#ifndef LFS_PROTO_FRAME_H
#define LFS_PROTO_FRAME_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "calls.h"
#include "util.h"

#define LFS_FRAME_MAX_REQUEST ((size_t)1 << 20)
#define LFS_FRAME_MAX_ANSWER ((size_t)1 << 30)

/* One connection's incoming frames: bytes read past a frame's end wait for the next one
 * (a stream's frames may come in one read), fds wait until taken. */
typedef struct lfs_frame_reader {
        int fd;
        size_t max; /* a frame's most bytes, its "\n" included */
        size_t max_fds; /* fds kept; more are closed as they arrive (and counted) */
        char *buf;
        size_t len, cap;
        size_t scanned; /* bytes of buf known to hold no "\n" */
        bool eof; /* the peer has closed its side */
        int fds[LFS_CALL_MAX_FDS];
        size_t n_fds;
        size_t fds_dropped; /* fds past max_fds, closed on arrival */
        bool fds_cut; /* the kernel closed more than the control buffer held (MSG_CTRUNC) */
} lfs_frame_reader;

void lfs_frame_reader_init(lfs_frame_reader *r, int fd, size_t max, size_t max_fds);
/* Frees the buffer and closes fds not taken (not r->fd, which is the caller's). */
void lfs_frame_reader_done(lfs_frame_reader *r);

/*
 * The next frame as a JSON object: 1 and *ret_frame; 0 when the peer closed the
 * connection between frames (nothing pending); a negative errno with *err for a frame
 * cut short by the end of the connection (-EPROTO), too long (-EMSGSIZE: nothing more
 * is read from this connection), not one JSON object (-EBADMSG), or the socket's failure.
 * Blocks until then (EINTR is retried). On a non-blocking socket, -EAGAIN (no error set)
 * when what has come so far is not a whole frame: call again once the socket is readable.
 */
int lfs_frame_read(lfs_frame_reader *r, json_t **ret_frame, lfs_error **err);

/*
 * The fds that came with the frames so far, for a call that takes exactly `want` of them:
 * 0 and ret_fds[0..want) (the caller's now). Any other number, or fds dropped because
 * more than max_fds came, closes every one of them and fails (LFS_INVALID_INPUT) naming
 * the call (what) and both counts.
 */
int lfs_frame_take_fds(lfs_frame_reader *r, const char *what, size_t want, int *ret_fds, lfs_error **err);
/* No fd has come with the frames so far (none kept, dropped or cut). */
bool lfs_frame_no_fds(const lfs_frame_reader *r);

/*
 * Writes frame (compact, with its "\n") on fd, with fds passed along with its first
 * bytes (SCM_RIGHTS; at most LFS_CALL_MAX_FDS). Refuses one longer than max with its
 * "\n" before anything is sent (-EMSGSIZE, LFS_INVALID_INPUT). Short writes and EINTR
 * are continued; a non-blocking socket is waited for, unless dontwait: then a write
 * that would block fails with -EAGAIN (for a refusal that must not hold its sender).
 * SIGPIPE is never raised (a peer gone is -EPIPE).
 */
int lfs_frame_write(int fd, json_t *frame, size_t max, const int *fds, size_t n_fds, bool dontwait,
                    lfs_error **err);

#endif
