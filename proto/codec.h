/* SPDX-License-Identifier: MIT */
/*
 * What a frame means (docs/protocol.md): requests {"v", "token", "call", args...},
 * answers {"v", "ok": result} or {"v", "error": {"code", "message", "paths"?}}, and the
 * frames of a stream (an event, with "v"). Every frame carries "v": LFS_PROTO_VERSION; a
 * frame of another version, or none, is refused Unsupported on either side, naming both
 * versions: the two ends are from different builds, and a call of another version may
 * mean something else, so neither side guesses. The daemon checks before it does
 * anything; the library can only check the answer, after the daemon acted.
 */
#ifndef LFS_PROTO_CODEC_H
#define LFS_PROTO_CODEC_H

#include <jansson.h>
#include <stdbool.h>

#include "calls.h"
#include "error_json.h" /* the error object: lfs_error_to_json, lfs_error_from_json */
#include "util.h"

/* 1: the first version with "v". Before it (LayerFS 0.1.0 and earlier) frames had none. */
#define LFS_PROTO_VERSION 1

/* ---- answers ---- */

/* {"v", "ok": result}; takes result. NULL is a result that could not be made (json_pack
 * of a NULL string, no memory): answered Failed, not read as success. */
json_t *lfs_proto_ok(json_t *result);
/* {"v", "ok": {}}: a call that answers nothing but that it was done. */
json_t *lfs_proto_done(void);
/* {"v", "error": ...} of e (NULL: Failed). */
json_t *lfs_proto_error(const lfs_error *e);
/* The same, freeing e: for a handler that answers with the error it was given. */
json_t *lfs_proto_error_take(lfs_error *e);
/* The same of a new error. */
json_t *lfs_proto_errorf(lfs_code code, const char *fmt, ...) _printf_(2, 3);
/* A frame of a stream: takes item (an object) and adds "v". */
json_t *lfs_proto_stream_item(json_t *item);

/*
 * An answer as the library takes it: 0 and *ret_result (a new reference to "ok"'s value;
 * ret_result may be NULL); the daemon's refusal as *err (its code, message and paths) and
 * a negative errno; a frame of another version (Unsupported), or one with neither ok nor
 * error (Failed), refused the same way.
 */
int lfs_proto_parse_answer(const json_t *answer, json_t **ret_result, lfs_error **err);
/* A stream's frame: 0 and *ret_item (the frame without "v", a new reference); the same
 * refusals as lfs_proto_parse_answer (a stream may start with an error). */
int lfs_proto_parse_stream_item(const json_t *frame, json_t **ret_item, lfs_error **err);

/* ---- requests ---- */

/* {"v", "token", "call"}: the caller adds the call's arguments. */
json_t *lfs_proto_request(lfs_call call, const char *token);

/*
 * A request as the daemon takes it, checked in this order before anything is done:
 * its version (Unsupported), its token (PermissionDenied; token is the Sandbox's), its
 * call (InvalidInput naming an unknown one). 0 and *ret_call, or a negative errno and *err.
 */
int lfs_proto_parse_request(const json_t *request, const char *token, lfs_call *ret_call, lfs_error **err);

/* The version check alone; answer: frame is an answer (the message's words differ). */
int lfs_proto_check_version(const json_t *frame, bool answer, lfs_error **err);

/* ---- a request's arguments ---- */

/* "an object", "a string", ...: a JSON value's type, as a refusal names it. */
const char *lfs_proto_json_kind(const json_t *value);
/*
 * The argument name of call's request: a wrong JSON type is InvalidInput naming the
 * argument, the call, the type expected and the one given (a reader that took it as
 * absent or false would act on what the caller did not ask). An absent argument is
 * NULL (string) or fallback (bool): the call says whether it needs one.
 */
int lfs_proto_arg_string(const json_t *request, lfs_call call, const char *name, const char **ret,
                         lfs_error **err);
int lfs_proto_arg_bool(const json_t *request, lfs_call call, const char *name, bool fallback, bool *ret,
                       lfs_error **err);

#endif
