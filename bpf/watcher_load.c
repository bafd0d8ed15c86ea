/* SPDX-License-Identifier: MIT */
/*
 * Loads and attaches the watcher's programs for one cgroup root in plain bpf(2): the
 * maps (the root's map of rings, and the .rodata array of the constants the programs
 * read), then each program of watcher.bpf.o, whose instructions, map loads and .rodata
 * layout bpf/watcher_gen.c compiled in at build time (watcher_obj.gen.h), with the maps'
 * fds written into its map loads, then a raw tracepoint link per program.
 *
 * libbpf's skeleton did the same after reading the object's ELF and BTF and probing the
 * kernel's features (each probe a program or BTF load of its own): most of the 48-152 ms
 * a first daemon of a root spent loading at load 8. Here the loader makes five bpf(2)
 * objects and nothing else. The verifier's log is read only when a load fails (then it
 * goes to the daemon's log), or always with LAYERFS_BPF_DEBUG=1.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpf_watcher.h"
#include "log.h"
#include "util.h"
#include "watcher_load.h"
#include "watcher_obj.gen.h"
#include "watcher_set.h"

#define VERIFIER_LOG_BYTES (256 * 1024)

/* A set is one program on sched_process_fork and one on sched_process_exit. */
_Static_assert(ELEMENTSOF(watcher_progs) == 2, "watcher.bpf.c has two programs");

static void close_fds(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0) {
                        close(fds[i]);
                        fds[i] = -1;
                }
}

static int map_create(const char *name, uint32_t type, uint32_t key_size, uint32_t value_size,
                      uint32_t max_entries, uint32_t flags, int inner) {
        union bpf_attr attr = { .map_type = type,
                                .key_size = key_size,
                                .value_size = value_size,
                                .max_entries = max_entries,
                                .map_flags = flags,
                                .inner_map_fd = inner >= 0 ? (uint32_t)inner : 0 };
        snprintf(attr.map_name, sizeof(attr.map_name), "%s", name);
        return lfs_bpf(BPF_MAP_CREATE, &attr);
}

/* The root's map of rings: cgroup id -> ring. A hash of maps takes the shape of its
 * values from a map given at its creation, a ring like the ones the daemons add. */
static int rings_create(void) {
        _cleanup_close_ int inner =
                map_create("sandbox_ring", BPF_MAP_TYPE_RINGBUF, 0, 0, WATCH_RING_BYTES, 0, -1);
        if (inner < 0)
                return inner;
        return map_create(WATCHER_RINGS_NAME, BPF_MAP_TYPE_HASH_OF_MAPS, sizeof(uint64_t), sizeof(uint32_t),
                          lfs_watcher_max_sandboxes(), BPF_F_NO_PREALLOC, inner);
}

/* The programs' constants, in a one-element array the programs may only read, frozen so
 * that user space cannot change it either: the verifier then knows its values. */
static int rodata_create(uint64_t root_id, uint32_t level, const struct watch_offsets *o) {
        _cleanup_close_ int fd = map_create("watcher.rodata", BPF_MAP_TYPE_ARRAY, sizeof(uint32_t),
                                            WATCHER_RODATA_SIZE, 1, BPF_F_RDONLY_PROG, -1);
        if (fd < 0)
                return fd;
        unsigned char value[WATCHER_RODATA_SIZE] = { 0 };
        memcpy(value + WATCHER_RODATA_ROOT_CGROUP_ID, &root_id, sizeof(root_id));
        memcpy(value + WATCHER_RODATA_ROOT_LEVEL, &level, sizeof(level));
        memcpy(value + WATCHER_RODATA_OFF, o, sizeof(*o));
        uint32_t key = 0;
        union bpf_attr attr = { .map_fd = (uint32_t)fd, .key = (uintptr_t)&key, .value = (uintptr_t)value };
        int r = lfs_bpf(BPF_MAP_UPDATE_ELEM, &attr);
        if (r < 0)
                return r;
        attr = (union bpf_attr){ .map_fd = (uint32_t)fd };
        if ((r = lfs_bpf(BPF_MAP_FREEZE, &attr)) < 0)
                return r;
        return TAKE_FD(fd);
}

/* The verifier's log, one entry of the daemon's log per line. */
static void log_verifier(const char *prog, int result, const char *text) {
        log_line("BPF program %s: %s; the verifier says:", prog, result < 0 ? strerror(-result) : "loaded");
        _cleanup_free_ char *copy = xstrdup(text);
        char *save = NULL;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                log_line("  %s", line);
}

static int prog_load_once(const struct watcher_prog *p, const struct bpf_insn *insns, char *log,
                          uint32_t log_size) {
        union bpf_attr attr = { .prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT,
                                .insns = (uintptr_t)insns,
                                .insn_cnt = p->insn_count,
                                .license = (uintptr_t)watcher_license,
                                .log_level = log ? 1 | 4 : 0, /* its checks, then its counts */
                                .log_buf = (uintptr_t)log,
                                .log_size = log ? log_size : 0 };
        snprintf(attr.prog_name, sizeof(attr.prog_name), "%s", p->name);
        if (log)
                log[0] = 0;
        return lfs_bpf(BPF_PROG_LOAD, &attr);
}

/* Loads p with its map loads pointing at maps: its fd. On a failure, loads it again to
 * read why (a load with the log on costs the verifier's printing) into the daemon's log. */
static int prog_load(const struct watcher_prog *p, const int *maps) {
        _cleanup_free_ struct bpf_insn *insns = xmalloc(p->insn_count * sizeof(*insns));
        memcpy(insns, p->insns, p->insn_count * sizeof(*insns));
        for (uint32_t i = 0; i < p->reloc_count; i++) {
                const struct watcher_reloc *rel = &p->relocs[i];
                struct bpf_insn *ld = &insns[rel->insn];
                ld[0].imm = maps[rel->map];
                if (rel->map == WATCHER_MAP_RINGS)
                        ld[0].src_reg = BPF_PSEUDO_MAP_FD;
                else {
                        ld[0].src_reg = BPF_PSEUDO_MAP_VALUE;
                        ld[1].imm = (int32_t)rel->offset;
                }
        }
        bool debug = getenv("LAYERFS_BPF_DEBUG") != NULL;
        _cleanup_free_ char *log = NULL;
        int fd = prog_load_once(p, insns, NULL, 0);
        if (fd < 0 || debug) {
                log = xmalloc(VERIFIER_LOG_BYTES);
                if (fd >= 0)
                        close(fd);
                fd = prog_load_once(p, insns, log, VERIFIER_LOG_BYTES);
                log_verifier(p->name, fd, log);
        }
        return fd;
}

/* A raw tracepoint link: the program runs on tracepoint until the link's last fd closes. */
static int prog_attach(int prog, const char *tracepoint) {
        union bpf_attr attr = { .raw_tracepoint = { .name = (uintptr_t)tracepoint,
                                                    .prog_fd = (uint32_t)prog } };
        return lfs_bpf(BPF_RAW_TRACEPOINT_OPEN, &attr);
}

int lfs_watcher_load(uint64_t root_id, uint32_t level, const struct watch_offsets *o, watcher_set *ret) {
        int maps[WATCHER_MAPS] = { -1, -1 }, links[ELEMENTSOF(watcher_progs)];
        memset(links, -1, sizeof(links));
        int r = maps[WATCHER_MAP_RINGS] = rings_create();
        if (r >= 0)
                r = maps[WATCHER_MAP_RODATA] = rodata_create(root_id, level, o);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(watcher_progs); i++) {
                _cleanup_close_ int prog = r = prog_load(watcher_progs[i], maps);
                if (prog >= 0)
                        r = links[i] = prog_attach(prog, watcher_progs[i]->tracepoint);
        }
        if (r < 0) {
                close_fds(links, ELEMENTSOF(links));
                close_fds(maps, ELEMENTSOF(maps));
                return r;
        }
        /* The programs hold .rodata; the links hold the programs. */
        close(maps[WATCHER_MAP_RODATA]);
        bool fork_first = !strcmp(watcher_progs[0]->tracepoint, "sched_process_fork");
        *ret = (watcher_set){ .fork_link = links[fork_first ? 0 : 1],
                              .exit_link = links[fork_first ? 1 : 0],
                              .rings = maps[WATCHER_MAP_RINGS] };
        return 0;
}
