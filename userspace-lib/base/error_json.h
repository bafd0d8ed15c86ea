/* SPDX-License-Identifier: MIT */
/* An lfs_error as the JSON object {"code", "message", "paths"?, "paths_bytes"?}: what the
 * daemon's error answers carry (proto/codec.c wraps it in a frame) and what `layerfs
 * --json` prints. One encoder and one decoder, so that the two are the same text. */
#pragma once
#include <jansson.h>

#include "util.h"

/* The error object of e (NULL: Failed). A message or path that is not UTF-8 is shown
 * lossy; a path's exact bytes go in "paths_bytes" (hex, null for a path that is UTF-8)
 * when any path needs it. */
json_t *lfs_error_to_json(const lfs_error *e);
/* The error object back as an lfs_error (the decoder of lfs_error_to_json): 0 and
 * *ret_error; -EBADMSG (with *err) when obj is not one. An unknown code reads as Failed,
 * its name kept in the message. */
int lfs_error_from_json(const json_t *obj, lfs_error **ret_error, lfs_error **err);
