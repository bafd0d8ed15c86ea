/* SPDX-License-Identifier: MIT */
#include "calls.h"

#include <errno.h>
#include <string.h>

static const struct call_row {
        const char *name;
        size_t fds;
        unsigned flags;
} rows[LFS_CALL_COUNT] = {
#define LFS_CALL_ROW(id, wire_name, n_fds, call_flags)                                                      \
        [LFS_CALL_##id] = { .name = (wire_name), .fds = (n_fds), .flags = (call_flags) },
        LFS_CALLS(LFS_CALL_ROW)
#undef LFS_CALL_ROW
};

const char *lfs_call_name(lfs_call call) {
        return (unsigned)call < LFS_CALL_COUNT ? rows[call].name : NULL;
}

int lfs_call_from_name(const char *name, lfs_call *ret_call) {
        for (unsigned i = 0; name && i < LFS_CALL_COUNT; i++)
                if (!strcmp(rows[i].name, name)) {
                        *ret_call = (lfs_call)i;
                        return 0;
                }
        return -ENOENT;
}

size_t lfs_call_fds(lfs_call call) {
        return (unsigned)call < LFS_CALL_COUNT ? rows[call].fds : 0;
}

unsigned lfs_call_flags(lfs_call call) {
        return (unsigned)call < LFS_CALL_COUNT ? rows[call].flags : 0;
}
