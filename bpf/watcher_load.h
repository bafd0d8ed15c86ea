/* SPDX-License-Identifier: MIT */
/* Loading a cgroup root's watcher programs in plain bpf(2) (watcher_load.c). */
#ifndef LFS_WATCHER_LOAD_H
#define LFS_WATCHER_LOAD_H

#include <stdint.h>

#include "watcher.h"
#include "watcher_set.h"

/* Creates the map of rings and loads and attaches the programs for the cgroup root whose
 * id is root_id, level levels below the cgroup2 mount, reading kernel structs at o: the
 * links' and the map's fds. */
int lfs_watcher_load(uint64_t root_id, uint32_t level, const struct watch_offsets *o, watcher_set *ret);

#endif
