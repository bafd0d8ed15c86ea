/* SPDX-License-Identifier: MIT */
#include "codec.h"

#include "config.h" /* LAYERFS_VERSION: named in a version refusal */
#include "json_path.h"

/* ---- answers ---- */

static json_t *versioned(const char *key, json_t *value) {
        return json_pack("{s:i, s:o}", "v", LFS_PROTO_VERSION, key, value);
}

json_t *lfs_proto_ok(json_t *result) {
        if (!result)
                return lfs_proto_errorf(LFS_FAILED, "the daemon could not encode its answer; the call "
                                                    "may have done its work (a defect: please report it)");
        return versioned("ok", result);
}

json_t *lfs_proto_done(void) {
        return versioned("ok", json_object());
}

json_t *lfs_proto_error(const lfs_error *e) {
        return versioned("error", lfs_error_to_json(e));
}

json_t *lfs_proto_error_take(lfs_error *e) {
        json_t *j = lfs_proto_error(e);
        lfs_error_free(e);
        return j;
}

json_t *lfs_proto_errorf(lfs_code code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *message = NULL;
        if (vasprintf(&message, fmt, ap) < 0)
                message = NULL;
        va_end(ap);
        lfs_error e = { .code = code, .message = message ? message : (char *)"(no message: out of memory)" };
        json_t *j = lfs_proto_error(&e);
        free(message);
        return j;
}

json_t *lfs_proto_stream_item(json_t *item) {
        json_t *frame = json_pack("{s:i}", "v", LFS_PROTO_VERSION);
        json_object_update(frame, item);
        json_decref(item);
        return frame;
}

int lfs_proto_check_version(const json_t *frame, bool answer, lfs_error **err) {
        const json_t *v = json_object_get(frame, "v");
        if (json_is_integer(v) && json_integer_value(v) == LFS_PROTO_VERSION)
                return 0;
        _cleanup_free_ char *shown = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        if (shown && strlen(shown) > 40) /* what the peer sent: shown, not echoed at any length */
                memcpy(shown + 37, "...", 4);
        const char *theirs = shown ? shown : "none (a build from before protocol versions)";
        if (!answer)
                return lfs_fail(
                        err, LFS_UNSUPPORTED, EPROTO,
                        "the request is of protocol version %s and this daemon (layerfs %s) speaks "
                        "version %d: the CLI or program and the daemon are from different builds; use "
                        "the layerfs of the daemon's build (or close the Sandbox with it and create a "
                        "new one with yours)",
                        theirs, LAYERFS_VERSION, LFS_PROTO_VERSION);
        return lfs_fail(
                err, LFS_UNSUPPORTED, EPROTO,
                "the daemon answered in protocol version %s and this library (layerfs %s) speaks "
                "version %d: the daemon and the CLI or program are from different builds (a daemon "
                "started before an upgrade?), and the call may have taken effect; use the layerfs of "
                "the daemon's build (or close the Sandbox with it and create a new one with this one)",
                theirs, LAYERFS_VERSION, LFS_PROTO_VERSION);
}

/* The daemon's refusal in an answer (or a stream's first frame) as the caller's error. */
static int refusal(const json_t *error, lfs_error **err) {
        lfs_error *e = NULL;
        int r = lfs_error_from_json(error, &e, err);
        if (r < 0)
                return r;
        if (err && !*err)
                *err = e;
        else
                lfs_error_free(e);
        return -EINVAL; /* as lfs_fail gives for an error without an errno */
}

int lfs_proto_parse_answer(const json_t *answer, json_t **ret_result, lfs_error **err) {
        int r = lfs_proto_check_version(answer, true, err);
        if (r < 0)
                return r;
        const json_t *ok = json_object_get(answer, "ok"), *error = json_object_get(answer, "error");
        if (error && !ok)
                return refusal(error, err);
        if (!ok || error)
                return lfs_fail(err, LFS_FAILED, EBADMSG,
                                "the daemon's answer has %s of \"ok\" and \"error\"; it should have one",
                                ok ? "both" : "neither");
        if (ret_result)
                *ret_result = json_incref((json_t *)ok);
        return 0;
}

int lfs_proto_parse_stream_item(const json_t *frame, json_t **ret_item, lfs_error **err) {
        int r = lfs_proto_check_version(frame, true, err);
        if (r < 0)
                return r;
        const json_t *error = json_object_get(frame, "error");
        if (error)
                return refusal(error, err);
        json_t *item = json_copy((json_t *)frame);
        json_object_del(item, "v");
        *ret_item = item;
        return 0;
}

/* ---- requests ---- */

json_t *lfs_proto_request(lfs_call call, const char *token) {
        return json_pack("{s:i, s:s, s:s}", "v", LFS_PROTO_VERSION, "token", token ? token : "", "call",
                         lfs_call_name(call));
}

/* In time that does not depend on where they differ. */
static bool same_token(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        unsigned char diff = la != lb;
        for (size_t i = 0; i < la && i < lb; i++)
                diff |= (unsigned char)(a[i] ^ b[i]);
        return !diff;
}

int lfs_proto_parse_request(const json_t *request, const char *token, lfs_call *ret_call, lfs_error **err) {
        int r = lfs_proto_check_version(request, false, err);
        if (r < 0)
                return r;
        const char *given = json_string_value(json_object_get(request, "token"));
        if (!given || !token || !same_token(given, token))
                return lfs_fail(err, LFS_PERMISSION_DENIED, EACCES,
                                "the request did not carry this Sandbox's token; send the one in the "
                                "Sandbox's directory (the file 'token', root's)");
        const json_t *call = json_object_get(request, "call");
        if (!json_is_string(call))
                return lfs_fail(err, LFS_INVALID_INPUT, EINVAL,
                                "the request names no call: give \"call\": \"group.method\" as a string");
        if (lfs_call_from_name(json_string_value(call), ret_call) == 0)
                return 0;
        _cleanup_free_ char *known = xstrdup("");
        for (unsigned i = 0; i < LFS_CALL_COUNT; i++) {
                char *more = xasprintf("%s%s%s", known, i ? ", " : "", lfs_call_name((lfs_call)i));
                free(known);
                known = more;
        }
        return lfs_fail(err, LFS_INVALID_INPUT, EINVAL, "unknown call '%.100s'; the calls are %s",
                        json_string_value(call), known);
}

/* ---- a request's arguments ---- */

const char *lfs_proto_json_kind(const json_t *j) {
        switch (json_typeof(j)) {
        case JSON_OBJECT:
                return "an object";
        case JSON_ARRAY:
                return "an array";
        case JSON_STRING:
                return "a string";
        case JSON_INTEGER:
        case JSON_REAL:
                return "a number";
        case JSON_TRUE:
        case JSON_FALSE:
                return "a boolean";
        case JSON_NULL:
                return "null";
        }
        return "not JSON";
}

/* InvalidInput: name of call is not what it must be. */
static int wrong_type(lfs_call call, const char *name, const char *expected, const json_t *given,
                      lfs_error **err) {
        _cleanup_free_ char *shown =
                json_is_null(given) ? NULL : json_dumps(given, JSON_ENCODE_ANY | JSON_COMPACT);
        if (shown && strlen(shown) > 60) /* what the caller sent: shown, not echoed at any length */
                memcpy(shown + 57, "...", 4);
        return lfs_fail(err, LFS_INVALID_INPUT, EINVAL, "argument '%s' of %s must be %s, not %s%s%s%s", name,
                        lfs_call_name(call), expected, lfs_proto_json_kind(given), shown ? " (" : "",
                        shown ? shown : "", shown ? ")" : "");
}

int lfs_proto_arg_string(const json_t *request, lfs_call call, const char *name, const char **ret,
                         lfs_error **err) {
        const json_t *v = json_object_get(request, name);
        if (v && !json_is_string(v))
                return wrong_type(call, name, "a string", v, err);
        *ret = json_string_value(v);
        return 0;
}

int lfs_proto_arg_bool(const json_t *request, lfs_call call, const char *name, bool fallback, bool *ret,
                       lfs_error **err) {
        const json_t *v = json_object_get(request, name);
        if (v && !json_is_boolean(v))
                return wrong_type(call, name, "a boolean (true or false)", v, err);
        *ret = v ? json_is_true(v) : fallback;
        return 0;
}
