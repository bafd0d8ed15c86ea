/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * Process starts and ends in the Sandboxes of one cgroup root, each Sandbox's through a
 * ring buffer of its own. One pair of these programs serves every Sandbox below the root
 * (bpf/README.md): a task outside the root costs one helper call, one inside it a lookup
 * of its Sandbox's ring, whatever the number of Sandboxes. Raw tracepoints
 * sched_process_fork and sched_process_exit; kernel structs are read at offsets the
 * loader found in the kernel's BTF (no CO-RE: loading stays ~1 ms). A thread is not a
 * process: a fork is reported only when the child leads its own thread group, an exit
 * only when the last thread of the group ends (signal->live reached 0), so a process
 * whose main thread exits first is reported once, when its last thread ends.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "watcher.h"

/* GPL-compatible: bpf_probe_read_kernel is a GPL-only helper. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set by the loader before the program is loaded. */
const volatile __u64 root_cgroup_id = 0;
const volatile __u32 root_level = 0; /* a Sandbox's cgroup is one level below */
const volatile struct watch_offsets off = { 0 };

/* A daemon's ring: the daemon makes it and holds the only fd of it. */
struct sandbox_ring {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, WATCH_RING_BYTES);
};

/* Sandbox cgroup id -> its daemon's ring. */
struct {
        __uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
        __uint(max_entries, WATCH_MAX_SANDBOXES);
        __uint(map_flags, BPF_F_NO_PREALLOC);
        __type(key, __u64);
        __array(values, struct sandbox_ring);
} rings SEC(".maps");

static __always_inline int read_u32(const void *base, __u32 offset, __u32 *ret) {
        return bpf_probe_read_kernel(ret, sizeof(*ret), (const char *)base + offset);
}

static __always_inline const void *read_ptr(const void *base, __u32 offset) {
        const void *p = 0;
        bpf_probe_read_kernel(&p, sizeof(p), (const char *)base + offset);
        return p;
}

/* The ring of the Sandbox the current task is in, or NULL. (The daemon's own leaf is
 * reported too: its daemon leaves it out.) */
static __always_inline void *sandbox_ring(void) {
        if (bpf_get_current_ancestor_cgroup_id(root_level) != root_cgroup_id)
                return 0;
        __u64 sandbox = bpf_get_current_ancestor_cgroup_id(root_level + 1);
        return bpf_map_lookup_elem(&rings, &sandbox);
}

static __always_inline void emit(void *ring, __u32 kind, __u32 pid, __u32 ppid, __s32 status) {
        struct watch_event *e = bpf_ringbuf_reserve(ring, sizeof(*e), 0);
        if (!e)
                return;
        e->cgroup_id = bpf_get_current_cgroup_id();
        e->time_ns = bpf_ktime_get_ns();
        e->kind = kind;
        e->pid = pid;
        e->ppid = ppid;
        e->status = status;
        bpf_get_current_comm(e->comm, sizeof(e->comm));
        bpf_ringbuf_submit(e, 0);
}

SEC("raw_tp/sched_process_fork")
int watch_fork(struct bpf_raw_tracepoint_args *ctx) {
        const void *parent = (const void *)ctx->args[0], *child = (const void *)ctx->args[1];
        __u32 pid = 0, tgid = 0, ppid = 0;
        void *ring = sandbox_ring();
        if (!ring)
                return 0;
        read_u32(child, off.task_pid, &pid);
        read_u32(child, off.task_tgid, &tgid);
        if (pid != tgid) /* a new thread */
                return 0;
        read_u32(parent, off.task_tgid, &ppid);
        emit(ring, WATCH_FORK, tgid, ppid, 0);
        return 0;
}

SEC("raw_tp/sched_process_exit")
int watch_exit(struct bpf_raw_tracepoint_args *ctx) {
        const void *task = (const void *)ctx->args[0];
        __u32 tgid = 0, ppid = 0, live = 1, code = 0;
        void *ring = sandbox_ring();
        if (!ring)
                return 0;
        const void *signal = read_ptr(task, off.task_signal);
        if (!signal || read_u32(signal, off.signal_live, &live) < 0 || live != 0)
                return 0; /* other threads of the group live on */
        read_u32(task, off.task_tgid, &tgid);
        read_u32(task, off.task_exit_code, &code);
        const void *parent = read_ptr(task, off.task_real_parent);
        if (parent)
                read_u32(parent, off.task_tgid, &ppid);
        emit(ring, WATCH_EXIT, tgid, ppid, (__s32)code);
        return 0;
}
