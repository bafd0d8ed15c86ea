/* SPDX-License-Identifier: MIT */
/*
 * watcher.bpf.o as data: what bpf/watcher_gen.c takes out of the object at build time
 * (into $(BUILD)/bpf/watcher_obj.gen.h) and the daemon's loader (watcher_load.c) gives
 * bpf(2), with no ELF reading and no libbpf at run time.
 */
#ifndef LFS_WATCHER_OBJ_H
#define LFS_WATCHER_OBJ_H

#include <linux/bpf.h>
#include <stdint.h>

/* The maps an instruction refers to: the root's map of rings, and the .rodata array that
 * holds the constants the loader sets (root_cgroup_id, root_level, off). */
enum { WATCHER_MAP_RINGS, WATCHER_MAP_RODATA, WATCHER_MAPS };

/* A 16-byte ld_imm64 at insn that loads a map: its fd (rings), or the address of byte
 * offset of the map's value (.rodata), which the loader writes in before loading. */
struct watcher_reloc {
        uint32_t insn, map, offset;
};

struct watcher_prog {
        const char *name; /* the function's name, cut to the kernel's 15 characters */
        const char *tracepoint; /* of its section, raw_tp/<tracepoint> */
        const struct bpf_insn *insns;
        uint32_t insn_count;
        const struct watcher_reloc *relocs;
        uint32_t reloc_count;
};

#endif
