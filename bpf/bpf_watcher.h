/* SPDX-License-Identifier: MIT */
/* The daemon's side of the BPF watcher (watcher.c). Negative errno on failure. */
#ifndef LFS_BPF_WATCHER_H
#define LFS_BPF_WATCHER_H

#include <stdbool.h>

#include "watcher.h"

typedef struct lfs_watcher lfs_watcher;
typedef void (*lfs_watch_fn)(void *userdata, const struct watch_event *e);

/* Watches the Sandbox whose cgroup is sandbox_cgroup (a child of its cgroup root), leaving
 * out the daemon's own leaf: joins the programs its root's daemons share, or loads them;
 * fn gets each event when lfs_watcher_consume runs. -E2BIG when the root already has
 * lfs_watcher_max_sandboxes() Sandboxes (watcher_set.h). */
int lfs_watcher_open(const char *sandbox_cgroup, const char *daemon_leaf, lfs_watch_fn fn, void *userdata,
                     lfs_watcher **ret);
/* Whether this daemon loaded its root's programs (else it joined those another loaded). */
bool lfs_watcher_loaded(lfs_watcher *w);
/* Readable when events wait: for the daemon's poll loop. */
int lfs_watcher_fd(lfs_watcher *w);
int lfs_watcher_consume(lfs_watcher *w);
/* Takes the Sandbox's ring out of the root's map: the programs route it nothing more. */
void lfs_watcher_leave(lfs_watcher *w);
/* Leaves, and lets go of the root's programs (the last daemon to let go ends them). */
void lfs_watcher_close(lfs_watcher *w);
/* The kernel struct offsets the program needs (cached per boot in /run/layerfs). */
int lfs_watch_offsets(struct watch_offsets *ret);

#endif
