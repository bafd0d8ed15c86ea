/* SPDX-License-Identifier: MIT */
/* The daemon's side of the BPF watcher (watcher.c). Negative errno on failure. */
#ifndef LFS_BPF_WATCHER_H
#define LFS_BPF_WATCHER_H

#include "watcher.h"

typedef struct lfs_watcher lfs_watcher;
typedef void (*lfs_watch_fn)(void *userdata, const struct watch_event *e);

/* Loads and attaches the program for the Sandbox whose cgroup is sandbox_cgroup, leaving
 * out the daemon's own leaf; fn gets each event when lfs_watcher_consume runs. */
int lfs_watcher_open(const char *sandbox_cgroup, const char *daemon_leaf, lfs_watch_fn fn, void *userdata,
                     lfs_watcher **ret);
/* Readable when events wait: for the daemon's poll loop. */
int lfs_watcher_fd(lfs_watcher *w);
int lfs_watcher_consume(lfs_watcher *w);
void lfs_watcher_close(lfs_watcher *w);
/* The kernel struct offsets the program needs (cached per boot in /run/layerfs). */
int lfs_watch_offsets(struct watch_offsets *ret);

#endif
