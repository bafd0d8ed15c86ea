/* SPDX-License-Identifier: MIT */
/* The Workspace calls (workspace.mount, status, commit, unmount) and
 * sandbox.list_workspaces: checked here, done by the Sandbox's daemon. */
#include <jansson.h>

#include "client.h"
#include "json_path.h"

void lfs_workspace_info_free(lfs_workspace_info *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].branch);
                free(items[i].path);
                free(items[i].platform);
                free(items[i].transport);
        }
        free(items);
}

int lfs_sandbox_list_workspaces(lfs_home *home, const char *project, int sandbox, lfs_workspace_info **ret,
                                size_t *ret_n, lfs_error **err) {
        json_t *result = NULL;
        int r = lfs_sandbox_call(home, project, sandbox, LFS_CALL_SANDBOX_LIST_WORKSPACES, json_object(),
                                 &result, err);
        if (r < 0)
                return r;
        size_t n = json_array_size(result);
        lfs_workspace_info *out = xcalloc(n, sizeof(*out));
        for (size_t i = 0; i < n; i++) {
                json_t *w = json_array_get(result, i);
                out[i].branch = xstrdup(json_string_value(json_object_get(w, "branch")) ?: "");
                out[i].path = xstrdup(json_string_value(json_object_get(w, "path")) ?: "");
                out[i].dirty = json_is_true(json_object_get(w, "dirty"));
                out[i].platform = xstrdup(json_string_value(json_object_get(w, "platform")) ?: "linux");
                out[i].transport = xstrdup(json_string_value(json_object_get(w, "transport")) ?: "libfuse");
                out[i].passthrough = json_is_true(json_object_get(w, "passthrough"));
                out[i].metadata_bytes = (uint64_t)json_integer_value(json_object_get(w, "metadata_bytes"));
                out[i].inodes = (uint64_t)json_integer_value(json_object_get(w, "inodes"));
        }
        json_decref(result);
        *ret = out;
        *ret_n = n;
        return 0;
}

int lfs_workspace_mount(lfs_home *home, const char *project, int sandbox, const char *branch,
                        char **ret_path, lfs_error **err) {
        json_t *result = NULL;
        int r = lfs_check_branch_name(branch, err);
        if (r < 0 || (r = lfs_sandbox_call(home, project, sandbox, LFS_CALL_WORKSPACE_MOUNT,
                                           json_pack("{s:s}", "branch", branch), &result, err)) < 0)
                return r;
        *ret_path = xstrdup(json_string_value(json_object_get(result, "path")) ?: "");
        json_decref(result);
        return 0;
}

int lfs_workspace_status(lfs_home *home, const char *project, int sandbox, const char *branch,
                         lfs_change **ret_changes, size_t *ret_n, lfs_error **err) {
        json_t *result = NULL;
        int r = lfs_sandbox_call(home, project, sandbox, LFS_CALL_WORKSPACE_STATUS,
                                 json_pack("{s:s}", "branch", branch), &result, err);
        if (r < 0)
                return r;
        size_t n = json_array_size(result);
        lfs_change *out = xcalloc(n, sizeof(*out));
        for (size_t i = 0; i < n; i++) {
                json_t *c = json_array_get(result, i);
                const char *kind = json_string_value(json_object_get(c, "change")) ?: "";
                out[i].path = lfs_json_get_path(c, "path") ?: xstrdup("");
                out[i].kind = !strcmp(kind, "added")     ? LFS_ADDED
                              : !strcmp(kind, "deleted") ? LFS_DELETED
                                                         : LFS_MODIFIED;
        }
        json_decref(result);
        *ret_changes = out;
        *ret_n = n;
        return 0;
}

int lfs_workspace_commit(lfs_home *home, const char *project, int sandbox, const char *branch,
                         const char *message, lfs_id *ret_commit, int *ret_merged, lfs_error **err) {
        if (!message || !*message)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "a commit needs a message; give one with -m MESSAGE");
        if (!lfs_is_utf8(message))
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the commit message is not UTF-8 text");
        json_t *result = NULL;
        int r = lfs_sandbox_call(home, project, sandbox, LFS_CALL_WORKSPACE_COMMIT,
                                 json_pack("{s:s, s:s}", "branch", branch, "message", message), &result,
                                 err);
        if (r < 0)
                return r;
        r = lfs_id_from_hex(json_string_value(json_object_get(result, "commit")) ?: "", ret_commit);
        if (ret_merged)
                *ret_merged = json_is_true(json_object_get(result, "merged"));
        json_decref(result);
        return r < 0 ? lfs_fail(err, LFS_FAILED, EIO, "the daemon's answer had no commit") : 0;
}

int lfs_workspace_unmount(lfs_home *home, const char *project, int sandbox, const char *branch, int discard,
                          lfs_error **err) {
        return lfs_sandbox_call(home, project, sandbox, LFS_CALL_WORKSPACE_UNMOUNT,
                                json_pack("{s:s, s:b}", "branch", branch, "discard", discard), NULL, err);
}
