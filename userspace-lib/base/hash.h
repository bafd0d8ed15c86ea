/* SPDX-License-Identifier: MIT */
/* Ids (sha256 of content) and sets of them: what the Store names objects by, and what
 * the cgroup layer and the daemon hash long names with. */
#ifndef LFS_HASH_H
#define LFS_HASH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "layerfs.h"

void lfs_sha256(const void *data, size_t len, lfs_id *ret);
typedef struct lfs_hasher lfs_hasher;
lfs_hasher *lfs_hasher_new(void);
/* A hasher that never loads libcrypto (SHORT_INPUT in hash.c), for a few kilobytes hashed
 * by a process that has no other digest to make: loading it cost 5 ms of a call. */
lfs_hasher *lfs_hasher_new_plain(void);
void lfs_hasher_update(lfs_hasher *h, const void *data, size_t len);
void lfs_hasher_finish(lfs_hasher *h, lfs_id *ret); /* frees h */
int lfs_id_from_hex(const char *hex, lfs_id *ret);
static inline bool lfs_id_eq(const lfs_id *a, const lfs_id *b) {
        return memcmp(a->bytes, b->bytes, LFS_ID_LEN) == 0;
}
/* "ab/cdef…": the object's path below objects/. */
void lfs_id_object_path(const lfs_id *id, char ret[LFS_HEX_LEN + 2]);

/* A set of ids (open addressing), for walks that must visit each object once. */
typedef struct lfs_idset {
        lfs_id *slots;
        uint8_t *used;
        size_t cap, n;
} lfs_idset;
bool lfs_idset_add(lfs_idset *s, const lfs_id *id); /* true if it was new */
bool lfs_idset_has(const lfs_idset *s, const lfs_id *id);
void lfs_idset_done(lfs_idset *s);

#endif
