/* SPDX-License-Identifier: MIT */
/*
 * The daemon's answers are proto/'s frames (codec.h: lfs_proto_ok, lfs_proto_error,
 * lfs_proto_errorf; docs/protocol.md). These are the names the call handlers have used
 * since before proto/ (kept so that the handlers' bodies did not churn while the linux
 * runtime moved out of them, issue 14); they encode nothing themselves.
 */
#ifndef LFS_DAEMON_REPLY_H
#define LFS_DAEMON_REPLY_H

#include "codec.h"

#define error_json(...) lfs_proto_errorf(__VA_ARGS__)
#define ok_json(result) lfs_proto_ok(result)

/* The answer of err, which it frees. */
static inline json_t *error_from(lfs_error *err) {
        json_t *j = lfs_proto_error(err);
        lfs_error_free(err);
        return j;
}

#endif
