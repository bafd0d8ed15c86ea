/* SPDX-License-Identifier: MIT */
/* What the watcher's BPF program and its loader share: one event per process start or end. */
#ifndef LFS_WATCHER_H
#define LFS_WATCHER_H

#ifndef __bpf__
#include <linux/types.h>
#endif

enum { WATCH_FORK = 1, WATCH_EXIT = 2 };

/* One program pair per cgroup root serves every Sandbox below it: each Sandbox's daemon
 * puts a ring of its own in the root's map, keyed by its Sandbox's cgroup id. */
#define WATCH_RING_BYTES (256 * 1024) /* a power of 2 pages, as a ring buffer must be */
/* The Sandboxes of one cgroup root, each with its ring in the root's map: the 4,097th
 * Sandbox's create is refused (LimitReached). The map is not preallocated, but the kernel
 * allocates its buckets at its creation, 0.24 ms for 4,096 against 4 ms for 65,536. */
#define WATCH_MAX_SANDBOXES 4096

/* Offsets in the running kernel's structs, read from its BTF by the loader and given to
 * the program as constants: the program itself has no CO-RE relocations, so loading it
 * never makes libbpf parse the kernel's BTF. */
struct watch_offsets {
        __u32 task_pid, task_tgid, task_exit_code, task_real_parent, task_signal, signal_live;
};

struct watch_event {
        __u64 cgroup_id; /* the current task's own cgroup (for a fork, the parent's) */
        __u64 time_ns; /* CLOCK_MONOTONIC */
        __u32 kind; /* WATCH_FORK or WATCH_EXIT */
        __u32 pid; /* the process (thread group) */
        __u32 ppid; /* its parent process */
        __s32 status; /* exit: the wait status (exit code << 8, or the signal) */
        char comm[16];
};

#endif
