/* SPDX-License-Identifier: MIT */
/* The file size limit (RLIMIT_FSIZE, `ulimit -f`). A write or ftruncate past it raises
 * SIGXFSZ, whose default ends the process where it stands: a Store's pack, temporary
 * objects or database half written, and under about 32 KiB any open of a Store (SQLite
 * sizes its -shm file to 32 KiB). Held blocked, the signal stays pending and the call
 * fails EFBIG instead, reported as any other failure and cleaned up after. */
#pragma once

#include <stdbool.h>

/* Blocks SIGXFSZ in the calling thread until the matching lfs_fsize_release (holds nest,
 * counted per thread: the outermost lets go). Nothing is blocked where SIGXFSZ is ignored
 * (the daemon), as writes fail EFBIG there already, nor where the caller blocks it. Only
 * the thread's mask changes: a process forked meanwhile starts with SIGXFSZ blocked, so
 * what runs commands resets the mask (cgroup/spawn.c and the daemon do). */
void lfs_fsize_hold(void);
/* On the outermost release in the thread: takes back a SIGXFSZ the held writes raised (it
 * would end the process after all) and unblocks it. A release without a hold in this
 * thread does nothing. */
void lfs_fsize_release(void);

/* What to add to a message about a call that failed with errnum (positive): for EFBIG, the
 * limit and how to raise it; "" otherwise. The text lives until the thread's next call. */
const char *lfs_fsize_hint(int errnum);
