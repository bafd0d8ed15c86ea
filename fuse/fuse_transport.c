/* SPDX-License-Identifier: MIT */
/* The table of FUSE transports and a Workspace's session over the one it chose. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuse_transport.h"
#include "log.h"
#include "probe.h"
#include "util.h"

/* The default is LFS_FUSE_DEFAULT_TRANSPORT's row (probe.h, which runtime status reads
 * too). The last row is the fallback that any kernel with FUSE serves: libfuse's. */
static const fuse_transport *const transports[] = {
        &fuse_transport_dev,
        &fuse_transport_uring,
        &fuse_transport_libfuse,
};
#define FALLBACK_TRANSPORT (transports[ELEMENTSOF(transports) - 1])

const fuse_transport *fuse_transport_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(transports); i++)
                if (!strcmp(transports[i]->name, name))
                        return transports[i];
        return NULL;
}

struct ws_session {
        const fuse_transport *t;
        fuse_conn *c;
};

/* "libfuse, dev": what LAYERFS_FUSE_TRANSPORT may name, for messages. */
static void transport_names(char *buf, size_t size) {
        size_t used = 0;
        buf[0] = 0;
        for (size_t i = 0; i < ELEMENTSOF(transports) && used < size; i++) {
                const fuse_transport *t = transports[i];
                if (t) /* always: clang-analyzer cannot tell */
                        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", t->name);
        }
}

ws_session *ws_session_mount(fuse_fs fs, const char *mountpoint, const char *fsname) {
        const char *name = getenv("LAYERFS_FUSE_TRANSPORT");
        const char *uring = getenv("LAYERFS_FUSE_URING");
        bool named = name && *name;
        bool rings_wanted = uring && (!strcmp(uring, "on") || !strcmp(uring, "auto"));
        const fuse_transport *t = fuse_transport_find(named ? name : LFS_FUSE_DEFAULT_TRANSPORT);
        lfs_error *err = NULL;
        if (t && lfs_check_fuse_uring(&err) < 0) {
                /* sandbox create refuses these too: this one came some other way */
                log_line("cannot mount %s: %s", mountpoint, err ? err->message : "bad FUSE choices");
                lfs_error_free(err);
                return NULL;
        }
        /* Rings allowed: our own loop with them, the plain one when they are not there. */
        if (t && rings_wanted && t != &fuse_transport_uring)
                t = &fuse_transport_uring;
        if (!t) {
                /* sandbox create refuses such a value: this one came some other way. */
                char names[128];
                transport_names(names, sizeof(names));
                log_line("LAYERFS_FUSE_TRANSPORT=%s is no FUSE transport; give one of %s", name, names);
                return NULL;
        }
        fuse_conn *c = NULL;
        int r = t->mount(fs, mountpoint, fsname, &c);
        if (r < 0 && t == &fuse_transport_uring && !(named && !strcmp(name, "uring"))) {
                log_line("cannot serve %s over io_uring: %s; falling back to the dev loop", mountpoint,
                         strerror(-r));
                t = &fuse_transport_dev;
                r = t->mount(fs, mountpoint, fsname, &c);
        }
        if (r < 0 && t != FALLBACK_TRANSPORT && t != &fuse_transport_uring) {
                log_line("cannot mount %s over the %s transport: %s; falling back to %s", mountpoint,
                         t->name, strerror(-r), FALLBACK_TRANSPORT->name);
                t = FALLBACK_TRANSPORT;
                r = t->mount(fs, mountpoint, fsname, &c);
        }
        if (r < 0)
                return NULL;
        ws_session *s = xcalloc(1, sizeof(*s));
        s->t = t;
        s->c = c;
        return s;
}

const char *ws_session_transport(const ws_session *s) {
        return s->t->serving ? s->t->serving(s->c) : s->t->name;
}

bool ws_session_passthrough(const ws_session *s) {
        return s->t->passthrough && s->t->passthrough(s->c);
}

void ws_session_serve(ws_session *s) {
        s->t->serve(s->c);
}

void ws_session_exit(ws_session *s) {
        s->t->exit(s->c);
}

void ws_session_destroy(ws_session *s) {
        if (!s)
                return;
        s->t->destroy(s->c);
        free(s);
}

int ws_session_notify_delete(ws_session *s, uint64_t parent, uint64_t child, const char *name) {
        return s->t->notify_delete(s->c, parent, child, name);
}

int ws_session_notify_inval_entry(ws_session *s, uint64_t parent, const char *name) {
        return s->t->notify_inval_entry(s->c, parent, name);
}

int ws_session_notify_inval_inode(ws_session *s, uint64_t ino) {
        return s->t->notify_inval_inode(s->c, ino);
}
