/* SPDX-License-Identifier: MIT OR GPL-2.0 */
/*
 * Process starts and ends in one Sandbox's cgroup subtree, through a ring buffer.
 * Raw tracepoints sched_process_fork and sched_process_exit; kernel structs are read at
 * offsets the loader found in the kernel's BTF (no CO-RE: loading stays ~1 ms). A thread
 * is not a process: a fork is reported only when the child leads its own thread group,
 * an exit only when the last thread of the group ends (signal->live reached 0), so a
 * process whose main thread exits first is reported once, when its last thread ends.
 */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "watcher.h"

/* GPL-compatible: bpf_probe_read_kernel is a GPL-only helper. */
char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set by the loader before the program is loaded. */
const volatile __u64 sandbox_cgroup_id = 0;
const volatile __u32 sandbox_level = 0;
const volatile __u64 daemon_cgroup_id = 0; /* the daemon's own leaf: not reported */
const volatile struct watch_offsets off = { 0 };

struct {
        __uint(type, BPF_MAP_TYPE_RINGBUF);
        __uint(max_entries, 256 * 1024);
} events SEC(".maps");

static __always_inline int read_u32(const void *base, __u32 offset, __u32 *ret) {
        return bpf_probe_read_kernel(ret, sizeof(*ret), (const char *)base + offset);
}

static __always_inline const void *read_ptr(const void *base, __u32 offset) {
        const void *p = 0;
        bpf_probe_read_kernel(&p, sizeof(p), (const char *)base + offset);
        return p;
}

static __always_inline int in_sandbox(void) {
        if (bpf_get_current_ancestor_cgroup_id(sandbox_level) != sandbox_cgroup_id)
                return 0;
        return bpf_get_current_cgroup_id() != daemon_cgroup_id;
}

static __always_inline void emit(__u32 kind, __u32 pid, __u32 ppid, __s32 status) {
        struct watch_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
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
        if (!in_sandbox())
                return 0;
        read_u32(child, off.task_pid, &pid);
        read_u32(child, off.task_tgid, &tgid);
        if (pid != tgid) /* a new thread */
                return 0;
        read_u32(parent, off.task_tgid, &ppid);
        emit(WATCH_FORK, tgid, ppid, 0);
        return 0;
}

SEC("raw_tp/sched_process_exit")
int watch_exit(struct bpf_raw_tracepoint_args *ctx) {
        const void *task = (const void *)ctx->args[0];
        __u32 tgid = 0, ppid = 0, live = 1, code = 0;
        if (!in_sandbox())
                return 0;
        const void *signal = read_ptr(task, off.task_signal);
        if (!signal || read_u32(signal, off.signal_live, &live) < 0 || live != 0)
                return 0; /* other threads of the group live on */
        read_u32(task, off.task_tgid, &tgid);
        read_u32(task, off.task_exit_code, &code);
        const void *parent = read_ptr(task, off.task_real_parent);
        if (parent)
                read_u32(parent, off.task_tgid, &ppid);
        emit(WATCH_EXIT, tgid, ppid, (__s32)code);
        return 0;
}
