/* SPDX-License-Identifier: MIT */
/*
 * The FUSE transports: ways of serving a Workspace's mount, each a row of operations
 * (fuse_transport) over one filesystem interface, a table of operations (fuse_fs.h). A mount picks its row
 * by name from LAYERFS_FUSE_TRANSPORT (fuse_transport.c's table); libfuse's loop
 * (fuse_libfuse.c) is the default, our own over /dev/fuse (fuse_dev.c) is "dev", and
 * the same loop with io_uring rings carrying the requests (fuse_uring.c) is "uring".
 */
#ifndef LFS_FUSE_TRANSPORT_H
#define LFS_FUSE_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

#include "fuse_fs.h"

/* A connection of a transport: what its mount returns, opaque to everyone else. */
typedef struct fuse_conn fuse_conn;

typedef struct fuse_transport {
        const char *name;
        /* fs mounted at mountpoint: 0 and *ret, or -errno with nothing mounted (the log
         * says why). The mount answers once serve runs. */
        int (*mount)(fuse_fs fs, const char *mountpoint, const char *fsname, fuse_conn **ret);
        /* Serves requests until the mount goes away or exit (then after the next request
         * or interrupted read). */
        void (*serve)(fuse_conn *c);
        void (*exit)(fuse_conn *c);
        /* Unmounts if still mounted, closes the connection, frees c. */
        void (*destroy)(fuse_conn *c);
        /* Tell the kernel to drop what it cached: 0 or -errno. */
        int (*notify_delete)(fuse_conn *c, uint64_t parent, uint64_t child, const char *name);
        int (*notify_inval_entry)(fuse_conn *c, uint64_t parent, const char *name);
        int (*notify_inval_inode)(fuse_conn *c, uint64_t ino);
        /* Whether regular files' data goes between the kernel and their backing files
         * without the daemon (FUSE passthrough); NULL: never. Known once INIT is done. */
        bool (*passthrough)(const fuse_conn *c);
        /* Which loop serves c once it answered, when it can differ from the row's name
         * (the rings refused: "dev"); NULL: the row's name. */
        const char *(*serving)(const fuse_conn *c);
} fuse_transport;

extern const fuse_transport fuse_transport_libfuse;
extern const fuse_transport fuse_transport_dev;
extern const fuse_transport fuse_transport_uring;

/* The transport called name, or NULL. */
const fuse_transport *fuse_transport_find(const char *name);

/* A Workspace's mount and the transport that serves it. */
typedef struct ws_session ws_session;

/* fs mounted at mountpoint by the transport LAYERFS_FUSE_TRANSPORT names (unset:
 * libfuse, or uring when LAYERFS_FUSE_URING is on or auto), falling back (and saying so
 * in the log) when another cannot mount: uring to dev unless named, dev to libfuse;
 * NULL on failure, an unknown name or a contradiction included (the log says why). */
ws_session *ws_session_mount(fuse_fs fs, const char *mountpoint, const char *fsname);
/* The loop that serves s: "libfuse", "dev", "uring". */
const char *ws_session_transport(const ws_session *s);
bool ws_session_passthrough(const ws_session *s);
void ws_session_serve(ws_session *s);
void ws_session_exit(ws_session *s);
void ws_session_destroy(ws_session *s);
int ws_session_notify_delete(ws_session *s, uint64_t parent, uint64_t child, const char *name);
int ws_session_notify_inval_entry(ws_session *s, uint64_t parent, const char *name);
int ws_session_notify_inval_inode(ws_session *s, uint64_t ino);

#endif
