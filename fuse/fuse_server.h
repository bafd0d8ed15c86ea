/* SPDX-License-Identifier: MIT */
/*
 * What our two FUSE loops share (fuse_dev.c's, over /dev/fuse, and fuse_uring.c's rings):
 * the connection, a worker and its request, and the one dispatch that checks a request
 * and serves it through the filesystem's table (fuse_fs.h). The loops differ only in where a request comes
 * from and where its answer goes: /dev/fuse's read and writev, or a ring entry's
 * buffers and the commit that hands them back.
 */
#ifndef LFS_FUSE_SERVER_H
#define LFS_FUSE_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fuse_proto.h"
#include "fuse_fs.h"

/* The largest WRITE we accept, and so the largest READ the kernel asks: 256 pages, as
 * libfuse negotiates. A worker's buffer holds one such request and its headers. */
#define FUSE_DEV_MAX_WRITE (1024 * 1024)
#define FUSE_DEV_HEADROOM 4096
#define FUSE_DEV_BUFFER (FUSE_DEV_MAX_WRITE + FUSE_DEV_HEADROOM)

typedef struct fuse_dev_conn fuse_dev_conn;

/* The connection both loops serve: /dev/fuse, what INIT agreed, and (fuse_uring.c)
 * whether to ask for rings and what to do once INIT is answered. */
struct fuse_dev_conn {
        fuse_fs fs; /* what it serves */
        int fd;
        char *mountpoint;
        atomic_bool exited;
        atomic_bool initialized;
        uint32_t minor; /* the protocol minor both sides speak, once initialized */
        uint64_t flags; /* what INIT agreed */
        bool debug;
        /* LAYERFS_FUSE_PASSTHROUGH: 0 off, 1 asked for (said in the log when the kernel
         * does not offer it), unset: on when offered. */
        int passthrough_asked;
        atomic_bool backing_failed; /* a BACKING_OPEN failed: said once in the log */
        /* Rings wait to serve: INIT asks FUSE_OVER_IO_URING, and once it is answered
         * (agreed or not) initialized_hook runs on the /dev/fuse loop's thread. */
        bool rings_ready;
        void (*initialized_hook)(fuse_dev_conn *c);
        void *rings;
};

typedef struct fuse_worker fuse_worker;

/* Where a worker's answers go when not to /dev/fuse (a ring entry): 0 or -errno. */
typedef int (*fuse_answer_fn)(fuse_worker *w, uint64_t unique, int32_t error, const struct iovec *body,
                              size_t n_body);

/* One worker: its request and answer buffers (FUSE_DEV_BUFFER bytes each; a ring's has
 * no request buffer, its requests stay in the ring's entry), the pipe its
 * large reads go through (-1: none, they are copied) with its size, and where its
 * answers go (answer NULL: /dev/fuse). A ring's worker builds answers in the entry's
 * payload, where the kernel takes them: so does a handler filling w->out, which must
 * therefore be done with the request's names and data before it writes there. */
struct fuse_worker {
        fuse_dev_conn *c;
        char *in, *out;
        int pipe[2];
        size_t pipe_size;
        fuse_answer_fn answer;
        void *answer_data;
        int ring; /* the ring's queue it serves, for the log; -1: /dev/fuse */
};

/* Mounts fs at mountpoint over /dev/fuse and fills c (zeroed by the caller) with the
 * connection: 0, or -errno with nothing mounted. */
int fuse_dev_conn_open(fuse_fs fs, const char *mountpoint, const char *fsname, fuse_dev_conn *c);

/* Serves one request. hdr, then the opcode's fixed arguments at arg (arg_len bytes, at
 * least the opcode's), then its names and data at rest (rest_len bytes); rest NULL:
 * they follow the fixed arguments inside arg, as /dev/fuse lays a request out. Every
 * request that has an answer gets one, through the worker. */
void fuse_serve_request(fuse_worker *w, const struct fuse_in_hdr *hdr, const char *arg, size_t arg_len,
                        const char *rest, size_t rest_len);

#endif
