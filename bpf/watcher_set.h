/* SPDX-License-Identifier: MIT */
/*
 * The watcher's programs of one cgroup root, shared by the daemons of every Sandbox below
 * it (watcher_set.c). Plain bpf(2), no libbpf: the library's reclaim uses it too.
 * Negative errno on failure.
 */
#ifndef LFS_WATCHER_SET_H
#define LFS_WATCHER_SET_H

#include <stdint.h>

union bpf_attr;

/* The name of a root's map of rings, which a daemon checks before joining it. */
#define WATCHER_RINGS_NAME "rings"

/* bpf(2): its result, or a negative errno. */
int lfs_bpf(int cmd, union bpf_attr *attr);

/* The bound on the Sandboxes of one cgroup root, the map of rings' size:
 * WATCH_MAX_SANDBOXES, or for the tests a smaller one from
 * LAYERFS_TEST_MAX_SANDBOXES_PER_ROOT (read when a daemon makes a root's map, as numbers.h
 * parses it). */
uint32_t lfs_watcher_max_sandboxes(void);

/* Held fds of a root's set: while any daemon holds its links, the programs stay attached;
 * when the last one closes them (or dies), the kernel detaches and frees everything. */
typedef struct watcher_set {
        int fork_link, exit_link, rings;
} watcher_set;

#define WATCHER_SET_NONE ((watcher_set){ .fork_link = -1, .exit_link = -1, .rings = -1 })

/* Opens the root's directory and takes its lock (flock, exclusive), which every change
 * of the root's set holds: the fd, to close when done. */
int lfs_watcher_root_lock(const char *root);
/* The set that the root's xattr names, if its objects still exist and are what it says;
 * -ENOENT when there is none (never loaded, or its last holder has gone). */
int lfs_watcher_set_find(int root_fd, watcher_set *ret);
/* Names set in the root's xattr, for the daemons that come next. */
int lfs_watcher_set_publish(int root_fd, const watcher_set *set);
/* A new ring for the Sandbox whose cgroup id is sandbox, in set's map: its fd. -E2BIG
 * when the map is full: its root has lfs_watcher_max_sandboxes() Sandboxes. */
int lfs_watcher_set_add(const watcher_set *set, uint64_t sandbox, int *ret_ring);
/* Takes the Sandbox's ring out of set's map (nothing to do when it is not there). */
int lfs_watcher_set_remove(const watcher_set *set, uint64_t sandbox);
void lfs_watcher_set_close(watcher_set *set);
/* For reclaim: takes the ring of the Sandbox whose cgroup id is sandbox out of root's set
 * (a daemon that was killed could not). 0 when root has no set or the set no such ring. */
int lfs_watcher_forget(const char *root, uint64_t sandbox);

#endif
