/* SPDX-License-Identifier: MIT */
/* The daemon's answers (reply.c): {"ok": result} or {"error": {code, message, paths}}. */
#ifndef LFS_DAEMON_REPLY_H
#define LFS_DAEMON_REPLY_H

#include <jansson.h>

#include "layerfs.h"

json_t *error_json(lfs_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
json_t *error_from(lfs_error *err); /* frees err */
json_t *ok_json(json_t *result);

#endif
