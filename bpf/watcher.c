/* SPDX-License-Identifier: MIT */
/*
 * The daemon's watcher: joins the programs of its Sandbox's cgroup root (watcher_set.c),
 * or loads and attaches them when the root has none (watcher.bpf.c, given the root's id
 * and level and the offsets of the kernel structs it reads), puts a ring of its own in
 * their map under its Sandbox's cgroup id, and hands the ring's events to a callback from
 * the daemon's poll loop (the ring buffer's epoll fd: no polling timer).
 *
 * The offsets come from the kernel's BTF (/sys/kernel/btf/vmlinux). Parsing it costs
 * ~15 ms, so the first Sandbox after a boot writes them to /run/layerfs/bpf-offsets
 * (keyed by boot id and kernel release) and every later one reads them back: a load
 * then costs about a millisecond (bench/runtime.sh measures it).
 */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "bpf_watcher.h"
#include "cgroup.h"
#include "util.h"
#include "watcher.skel.h"
#include "watcher_set.h"

#define OFFSETS_DIR "/run/layerfs"
#define OFFSETS_FILE OFFSETS_DIR "/bpf-offsets"

struct lfs_watcher {
        watcher_set set; /* held: the root's programs stay attached while a daemon holds them */
        uint64_t sandbox_id, daemon_id;
        int ring; /* this Sandbox's ring, in set.rings under sandbox_id */
        bool loaded; /* this daemon loaded the set (else it joined one) */
        struct ring_buffer *rb;
        lfs_watch_fn fn;
        void *userdata;
};

/* "<boot id> <kernel release>": what the cached offsets are valid for. */
static void kernel_key(char *buf, size_t cap) {
        char boot[64] = "";
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
        if (f) {
                if (!fgets(boot, sizeof(boot), f))
                        boot[0] = 0;
                fclose(f);
        }
        boot[strcspn(boot, "\n")] = 0;
        struct utsname u;
        if (uname(&u) < 0)
                u.release[0] = 0;
        snprintf(buf, cap, "%s %s", boot, u.release);
}

static int member_offset(const struct btf *btf, const char *type, const char *member, __u32 *ret) {
        int id = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
        if (id < 0)
                return -ENOENT;
        const struct btf_type *t = btf__type_by_id(btf, (__u32)id);
        const struct btf_member *m = btf_members(t);
        for (__u16 i = 0; i < btf_vlen(t); i++)
                if (!strcmp(btf__name_by_offset(btf, m[i].name_off), member)) {
                        *ret = btf_member_bit_offset(t, i) / 8;
                        return 0;
                }
        return -ENOENT;
}

static int offsets_from_btf(struct watch_offsets *o) {
        struct btf *btf = btf__load_vmlinux_btf();
        if (!btf)
                return errno ? -errno : -ENOENT;
        int r = 0;
        if (member_offset(btf, "task_struct", "pid", &o->task_pid) < 0 ||
            member_offset(btf, "task_struct", "tgid", &o->task_tgid) < 0 ||
            member_offset(btf, "task_struct", "exit_code", &o->task_exit_code) < 0 ||
            member_offset(btf, "task_struct", "real_parent", &o->task_real_parent) < 0 ||
            member_offset(btf, "task_struct", "signal", &o->task_signal) < 0 ||
            member_offset(btf, "signal_struct", "live", &o->signal_live) < 0)
                r = -ENOENT;
        btf__free(btf);
        return r;
}

static int offsets_from_cache(const char *key, struct watch_offsets *o) {
        FILE *f = fopen(OFFSETS_FILE, "re");
        if (!f)
                return -errno;
        char line[256] = "";
        int r = -ESTALE;
        if (fgets(line, sizeof(line), f) && !strncmp(line, key, strlen(key)) && line[strlen(key)] == '\n' &&
            fscanf(f, "%u %u %u %u %u %u", &o->task_pid, &o->task_tgid, &o->task_exit_code,
                   &o->task_real_parent, &o->task_signal, &o->signal_live) == 6)
                r = 0;
        fclose(f);
        return r;
}

/* Written whole or not at all (a temporary file renamed), by root only. */
static void offsets_to_cache(const char *key, const struct watch_offsets *o) {
        char tmp[64];
        snprintf(tmp, sizeof(tmp), OFFSETS_FILE ".%d", (int)getpid());
        if (mkdir(OFFSETS_DIR, 0700) < 0 && errno != EEXIST)
                return;
        FILE *f = fopen(tmp, "we");
        if (!f)
                return;
        fprintf(f, "%s\n%u %u %u %u %u %u\n", key, o->task_pid, o->task_tgid, o->task_exit_code,
                o->task_real_parent, o->task_signal, o->signal_live);
        if (fclose(f) != 0 || rename(tmp, OFFSETS_FILE) < 0)
                unlink(tmp);
}

int lfs_watch_offsets(struct watch_offsets *ret) {
        char key[192];
        *ret = (struct watch_offsets){ 0 };
        kernel_key(key, sizeof(key));
        if (offsets_from_cache(key, ret) == 0)
                return 0;
        int r = offsets_from_btf(ret);
        if (r == 0)
                offsets_to_cache(key, ret);
        return r;
}

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

/* The daemon's own leaf is left out: the programs report every task of the Sandbox. */
static int on_event(void *ctx, void *data, size_t size) {
        lfs_watcher *w = ctx;
        if (size >= sizeof(struct watch_event) &&
            ((const struct watch_event *)data)->cgroup_id != w->daemon_id)
                w->fn(w->userdata, data);
        return 0;
}

static int silent(enum libbpf_print_level level, const char *fmt, va_list ap) {
        (void)level;
        (void)fmt;
        (void)ap;
        return 0;
}

/* Loads and attaches the programs for the cgroup root at path: their links' and map's fds
 * in ret, which outlive the skeleton. */
static int load_set(const char *root, watcher_set *ret) {
        struct watch_offsets o = { 0 };
        uint64_t root_id = 0;
        __u32 level = 0;
        int r;
        if ((r = lfs_watch_offsets(&o)) < 0 || (r = cgroup_id(root, &root_id)) < 0 ||
            (r = cgroup_level(root, &level)) < 0)
                return r;
        libbpf_set_print(getenv("LAYERFS_BPF_DEBUG") ? NULL : silent);
        struct watcher_bpf *skel = watcher_bpf__open();
        if (!skel)
                return errno ? -errno : -EINVAL;
        skel->rodata->root_cgroup_id = root_id;
        skel->rodata->root_level = level;
        skel->rodata->off = o;
        if ((r = watcher_bpf__load(skel)) < 0 || (r = watcher_bpf__attach(skel)) < 0) {
                watcher_bpf__destroy(skel);
                return r;
        }
        watcher_set set = { .fork_link = bpf_link__fd(skel->links.watch_fork),
                            .exit_link = bpf_link__fd(skel->links.watch_exit),
                            .rings = fcntl(bpf_map__fd(skel->maps.rings), F_DUPFD_CLOEXEC, 0) };
        /* The links' fds are ours now: destroying the skeleton closes neither. */
        bpf_link__disconnect(skel->links.watch_fork);
        bpf_link__disconnect(skel->links.watch_exit);
        watcher_bpf__destroy(skel);
        if (set.rings < 0) {
                r = -errno;
                lfs_watcher_set_close(&set);
                return r;
        }
        *ret = set;
        return 0;
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
        w->rb = ring_buffer__new(w->ring, on_event, w, NULL);
        if (!w->rb) {
                r = errno ? -errno : -ENOMEM;
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
        return ring_buffer__epoll_fd(w->rb);
}

int lfs_watcher_consume(lfs_watcher *w) {
        return ring_buffer__consume(w->rb);
}

void lfs_watcher_leave(lfs_watcher *w) {
        if (w && w->ring >= 0 && w->set.rings >= 0)
                lfs_watcher_set_remove(&w->set, w->sandbox_id);
}

void lfs_watcher_close(lfs_watcher *w) {
        if (!w)
                return;
        lfs_watcher_leave(w);
        ring_buffer__free(w->rb);
        if (w->ring >= 0)
                close(w->ring);
        lfs_watcher_set_close(&w->set);
        free(w);
}
