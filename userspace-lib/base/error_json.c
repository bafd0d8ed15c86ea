/* SPDX-License-Identifier: MIT */
/* The error object of the wire and of the CLI's --json, both ways (error_json.h). */
#include "error_json.h"

#include "json_path.h"

json_t *lfs_error_to_json(const lfs_error *e) {
        json_t *obj = json_object();
        json_object_set_new(obj, "code", json_string(lfs_code_name(e ? e->code : LFS_FAILED)));
        /* A message may quote a path that is not UTF-8: lfs_json_path keeps it text. */
        json_object_set_new(obj, "message", lfs_json_path(e && e->message ? e->message : "failed"));
        if (!e || !e->n_paths)
                return obj;
        json_t *paths = json_array(), *bytes = json_array();
        bool lossy = false;
        for (size_t i = 0; i < e->n_paths; i++) {
                /* lfs_json_set_path's "<key>_bytes", one path at a time. */
                json_t *one = json_object();
                lfs_json_set_path(one, "p", e->paths[i]);
                json_t *exact = json_object_get(one, "p_bytes");
                json_array_append(paths, json_object_get(one, "p"));
                json_array_append(bytes, exact ? exact : json_null());
                lossy = lossy || exact;
                json_decref(one);
        }
        json_object_set_new(obj, "paths", paths);
        if (lossy)
                json_object_set_new(obj, "paths_bytes", bytes);
        else
                json_decref(bytes);
        return obj;
}

/* Entry i of paths, exact when paths_bytes has its bytes. */
static char *path_from_json(const json_t *paths, const json_t *bytes, size_t i) {
        json_t *one = json_object();
        json_t *text = json_array_get(paths, i), *exact = json_array_get(bytes, i);
        if (json_is_string(text))
                json_object_set(one, "p", text);
        if (json_is_string(exact))
                json_object_set(one, "p_bytes", exact);
        char *path = lfs_json_get_path(one, "p");
        json_decref(one);
        return path ? path : xstrdup("");
}

int lfs_error_from_json(const json_t *obj, lfs_error **ret_error, lfs_error **err) {
        if (!json_is_object(obj))
                return lfs_fail(err, LFS_FAILED, EBADMSG, "the error is not a JSON object");
        const char *name = json_string_value(json_object_get(obj, "code"));
        const char *message = json_string_value(json_object_get(obj, "message"));
        lfs_error *e = xcalloc(1, sizeof(*e));
        e->code = lfs_code_from_name(name);
        if (name && !strcmp(lfs_code_name(e->code), name)) {
                e->message = xstrdup(message ? message : "failed");
        } else {
                e->code = LFS_FAILED;
                e->message = xasprintf("%s (code '%.40s', which this build does not know)",
                                       message ? message : "failed", name ? name : "none");
        }
        const json_t *paths = json_object_get(obj, "paths"), *bytes = json_object_get(obj, "paths_bytes");
        if (json_is_array(paths) && json_array_size(paths)) {
                e->n_paths = json_array_size(paths);
                e->paths = xcalloc(e->n_paths, sizeof(char *));
                for (size_t i = 0; i < e->n_paths; i++)
                        e->paths[i] = path_from_json(paths, bytes, i);
        }
        *ret_error = e;
        return 0;
}
