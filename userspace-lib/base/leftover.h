/* SPDX-License-Identifier: MIT */
/* What a writer builds under a temporary name (a pack, a directory of temporary objects,
 * a project being made, an export) and a kill (SIGKILL, a power cut) leaves behind. The
 * writer holds flock on it for as long as it runs, so a later writer tells a dead one's
 * from a live one by the lock, not by a pid: a pid check took a live writer of another
 * pid namespace for dead (and removed what it was writing), and kept a dead one's for as
 * long as its pid was reused. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

/* Makes dirfd/name, a directory when flags has O_DIRECTORY (mode its mode), else a file
 * opened flags | O_CREAT | O_EXCL, and locks it: the descriptor returned holds the lock
 * (a file's is opened with flags, a directory's O_RDONLY). -EEXIST: the name is taken (a
 * live writer's, or a leftover); -EBUSY: another writer took it for a leftover in the
 * moment between the two (then nothing is ours); another -errno from the calls (what was
 * made is removed again). */
int lfs_leftover_make(int dirfd, const char *name, int flags, mode_t mode);

/* Asked of an entry of the right prefix before its lock is tried (locked false: a cheap
 * look, may be stale) and again with the lock held (locked true): is it garbage once its
 * writer is gone? */
typedef bool (*lfs_leftover_check)(void *userdata, const char *name, bool locked);

/* Removes dirfd's entries whose names start with prefix and that a dead writer left: files
 * or directories (not symlinks) of this user, whose lock can be taken, and which is_garbage
 * (when given) calls garbage both times. A directory is emptied through the descriptor
 * that holds its lock, then removed by name (at most an empty directory, if the name was
 * swapped meanwhile). dirfd may be O_PATH. Returns how many were removed. */
size_t lfs_leftovers_remove(int dirfd, const char *prefix, lfs_leftover_check is_garbage, void *userdata);

/* The same two in a directory that others may open (an export's parent, such as /tmp):
 * its own lock is not taken, since anyone who can open a directory can hold its flock for
 * ever (every export into /tmp waited for a user's `flock /tmp sleep infinity`). Each
 * entry's lock alone tells a live writer's from a dead one's; a sweep may then take a
 * make's entry in the moment between its make and its lock, and that make says -EBUSY. */
int lfs_leftover_make_shared(int dirfd, const char *name, int flags, mode_t mode);
size_t lfs_leftovers_remove_shared(int dirfd, const char *prefix, lfs_leftover_check is_garbage,
                                   void *userdata);

/* Removes dirfd/name, a directory its writer made and still holds open (fd, as
 * lfs_leftover_make returned it): emptied through fd, then removed by name, which is at
 * most an empty directory if the name was swapped meanwhile (a parent another user owns:
 * removed by name alone, whatever directory of root's they had moved there was emptied).
 * 0 or -errno. */
int lfs_leftover_remove_held(int dirfd, const char *name, int fd);
