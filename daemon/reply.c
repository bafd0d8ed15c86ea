/* SPDX-License-Identifier: MIT */
/* The daemon's answers: {"ok": result} or {"error": {"code", "message", "paths"}}. */
#include "json_path.h"
#include "reply.h"
#include "util.h"

json_t *error_json(lfs_code code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *msg = NULL;
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        /* A message may quote a path that is not UTF-8: lfs_json_path keeps it text. */
        json_t *e = json_pack("{s:s, s:o}", "code", lfs_code_name(code), "message",
                              lfs_json_path(msg ? msg : "out of memory"));
        free(msg);
        return json_pack("{s:o}", "error", e);
}

json_t *error_from(lfs_error *err) {
        json_t *e = json_pack("{s:s, s:o}", "code", lfs_code_name(err ? err->code : LFS_FAILED), "message",
                              lfs_json_path(err && err->message ? err->message : "failed"));
        if (err && err->n_paths) {
                json_t *paths = json_array();
                for (size_t i = 0; i < err->n_paths; i++)
                        json_array_append_new(paths, lfs_json_path(err->paths[i]));
                json_object_set_new(e, "paths", paths);
        }
        lfs_error_free(err);
        return json_pack("{s:o}", "error", e);
}

json_t *ok_json(json_t *result) {
        return json_pack("{s:o}", "ok", result ? result : json_object());
}
