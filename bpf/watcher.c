/* SPDX-License-Identifier: MIT */
/*
 * The daemon's watcher: joins the programs of its Sandbox's cgroup root (watcher_set.c),
 * or loads and attaches them when the root has none (watcher_load.c, given the root's id
 * and level and the offsets of the kernel structs it reads, watcher_offsets.c), puts a
 * ring of its own in their map under its Sandbox's cgroup id, and hands the ring's events
 * to a callback from the daemon's poll loop (the ring's fd polls readable when a record
 * waits: no polling timer). All in plain bpf(2) and mmap: no libbpf.
 */
#include <errno.h>
#include <libgen.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bpf_watcher.h"
#include "cgroup.h"
#include "fault.h"
#include "util.h"
#include "watcher_load.h"
#include "watcher_set.h"

/* A ring buffer map's user-space view (the kernel's layout, kernel/bpf/ringbuf.c): a
 * page with the consumer position, which the reader writes, then, read-only, a page with
 * the producer position and the data pages mapped twice in a row, so that no record
 * wraps. Each record starts with an 8-byte header: its length, with a busy bit while the
 * program writes it and a discard bit when it threw it away. */
struct ring_view {
        unsigned long *consumer;
        const unsigned long *producer;
        const char *data;
        size_t page, mask;
};

struct lfs_watcher {
        watcher_set set; /* held: the root's programs stay attached while a daemon holds them */
        uint64_t sandbox_id, daemon_id;
        int ring; /* this Sandbox's ring, in set.rings under sandbox_id */
        bool loaded; /* this daemon loaded the set (else it joined one) */
        struct ring_view view;
        lfs_watch_fn fn;
        void *userdata;
};

/* A cgroup's depth below its cgroup2 mount: the mount's root is 0, "/layerfs/p-1" 2. */
static int cgroup_level(const char *path, __u32 *ret) {
        char *rel = lfs_cgroup_relative(path);
        if (!rel)
                return -ENOENT;
        __u32 level = 0;
        for (const char *p = rel; *p; p++)
                level += *p == '/' && p[1];
        free(rel);
        *ret = level;
        return 0;
}

/* A cgroup2 directory's inode number is its cgroup id. */
static int cgroup_id(const char *path, uint64_t *ret) {
        struct stat st;
        if (stat(path, &st) < 0)
                return -errno;
        *ret = (uint64_t)st.st_ino;
        return 0;
}

static int ring_map(int ring, struct ring_view *ret) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        void *consumer = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, ring, 0);
        if (consumer == MAP_FAILED)
                return -errno;
        void *producer =
                mmap(NULL, page + 2 * (size_t)WATCH_RING_BYTES, PROT_READ, MAP_SHARED, ring, (off_t)page);
        if (producer == MAP_FAILED) {
                int r = -errno;
                munmap(consumer, page);
                return r;
        }
        *ret = (struct ring_view){ .consumer = consumer,
                                   .producer = producer,
                                   .data = (const char *)producer + page,
                                   .page = page,
                                   .mask = WATCH_RING_BYTES - 1 };
        return 0;
}

static void ring_unmap(struct ring_view *v) {
        if (!v->consumer)
                return;
        munmap(v->consumer, v->page);
        munmap((void *)v->producer, v->page + 2 * (size_t)WATCH_RING_BYTES);
        *v = (struct ring_view){ 0 };
}

/* Loads and attaches the programs for the cgroup root at path: their links' and map's fds. */
static int load_set(const char *root, watcher_set *ret) {
        struct watch_offsets o = { 0 };
        uint64_t root_id = 0;
        __u32 level = 0;
        int r;
        if ((r = lfs_watch_offsets(&o)) < 0 || (r = cgroup_id(root, &root_id)) < 0 ||
            (r = cgroup_level(root, &level)) < 0)
                return r;
        return lfs_watcher_load(root_id, level, &o, ret);
}

/* Under the root's lock: the root's set, joined or loaded, and this Sandbox's ring in it. */
static int join_root(lfs_watcher *w, const char *sandbox_cgroup) {
        _cleanup_free_ char *root = xstrdup(sandbox_cgroup);
        dirname(root);
        _cleanup_close_ int root_fd = lfs_watcher_root_lock(root);
        if (root_fd < 0)
                return root_fd;
        int r = lfs_watcher_set_find(root_fd, &w->set);
        if (r == -ENOENT) {
                if ((r = load_set(root, &w->set)) < 0)
                        return r;
                w->loaded = true;
                r = lfs_watcher_set_publish(root_fd, &w->set);
        }
        /* For the tests: the set held, its ring not added (the daemon falls back). */
        if (r == 0 && lfs_fault_fails("watcher-join"))
                r = -EPERM;
        return r < 0 ? r : lfs_watcher_set_add(&w->set, w->sandbox_id, &w->ring);
}

int lfs_watcher_open(const char *sandbox_cgroup, const char *daemon_leaf, lfs_watch_fn fn, void *userdata,
                     lfs_watcher **ret) {
        lfs_watcher *w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        *w = (lfs_watcher){ .set = WATCHER_SET_NONE, .ring = -1, .fn = fn, .userdata = userdata };
        int r;
        if ((r = cgroup_id(sandbox_cgroup, &w->sandbox_id)) < 0 ||
            (r = cgroup_id(daemon_leaf, &w->daemon_id)) < 0 || (r = join_root(w, sandbox_cgroup)) < 0) {
                lfs_watcher_close(w);
                return r;
        }
        if ((r = ring_map(w->ring, &w->view)) < 0) {
                lfs_watcher_close(w);
                return r;
        }
        *ret = w;
        return 0;
}

bool lfs_watcher_loaded(lfs_watcher *w) {
        return w->loaded;
}

int lfs_watcher_fd(lfs_watcher *w) {
        return w->ring;
}

/* Every record the programs have committed, in order; the daemon's own leaf's are left
 * out (the programs report every task of the Sandbox). The positions are shared with the
 * kernel: acquire loads, and a release store hands a record's space back. */
int lfs_watcher_consume(lfs_watcher *w) {
        const struct ring_view *v = &w->view;
        unsigned long pos = __atomic_load_n(v->consumer, __ATOMIC_ACQUIRE);
        int n = 0;
        while (pos < __atomic_load_n(v->producer, __ATOMIC_ACQUIRE)) {
                const uint32_t *header = (const uint32_t *)(v->data + (pos & v->mask));
                uint32_t len = __atomic_load_n(header, __ATOMIC_ACQUIRE);
                if (len & BPF_RINGBUF_BUSY_BIT)
                        break; /* still being written: the next wakeup brings it */
                uint32_t size = len & ~(uint32_t)BPF_RINGBUF_DISCARD_BIT;
                const struct watch_event *e = (const void *)(header + BPF_RINGBUF_HDR_SZ / sizeof(*header));
                if (!(len & BPF_RINGBUF_DISCARD_BIT) && size >= sizeof(*e) && e->cgroup_id != w->daemon_id) {
                        w->fn(w->userdata, e);
                        n++;
                }
                pos += (BPF_RINGBUF_HDR_SZ + size + 7) & ~7UL;
                __atomic_store_n(v->consumer, pos, __ATOMIC_RELEASE);
        }
        return n;
}

void lfs_watcher_leave(lfs_watcher *w) {
        if (w && w->ring >= 0 && w->set.rings >= 0)
                lfs_watcher_set_remove(&w->set, w->sandbox_id);
}

void lfs_watcher_close(lfs_watcher *w) {
        if (!w)
                return;
        lfs_watcher_leave(w);
        ring_unmap(&w->view);
        if (w->ring >= 0)
                close(w->ring);
        lfs_watcher_set_close(&w->set);
        free(w);
}
