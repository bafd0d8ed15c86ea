/* SPDX-License-Identifier: MIT */
/* sandbox.events: the starts and ends of the Sandbox's processes, kept or followed. */
#include <jansson.h>

#include "client.h"

int lfs_sandbox_events(lfs_home *home, const char *project, int sandbox, int follow, lfs_event_fn fn,
                       void *userdata, char **ret_watcher, lfs_error **err) {
        json_t *req = json_pack("{s:s, s:b}", "call", "sandbox.events", "follow", follow);
        if (!follow) {
                json_t *result = NULL;
                int r = lfs_sandbox_call(home, project, sandbox, req, &result, err);
                if (r < 0)
                        return r;
                if (ret_watcher)
                        *ret_watcher = xstrdup(json_string_value(json_object_get(result, "watcher")) ?: "");
                size_t i;
                json_t *e;
                json_array_foreach(json_object_get(result, "events"), i, e) {
                        char *text = json_dumps(e, JSON_COMPACT);
                        int stop = fn(userdata, text);
                        free(text);
                        if (stop)
                                break;
                }
                json_decref(result);
                return 0;
        }
        sandbox_record rec = { .dir_fd = -1 };
        int r = lfs_sandbox_open_live(home, project, sandbox, &rec, err);
        if (r < 0) {
                json_decref(req);
                return r;
        }
        int fd = lfs_rpc_send(&rec, req, NULL, 0, err);
        if (fd < 0) {
                lfs_record_done(&rec);
                return fd;
        }
        FILE *in = fdopen(fd, "r");
        char *line = NULL;
        size_t cap = 0;
        while (in && getline(&line, &cap, in) > 0) {
                line[strcspn(line, "\n")] = 0;
                if (!strncmp(line, "{\"error\"", 8)) { /* refused */
                        r = lfs_rpc_answer(&rec, line, NULL, err);
                        break;
                }
                if (fn(userdata, line))
                        break;
        }
        free(line);
        if (in)
                fclose(in);
        else
                close(fd);
        lfs_record_done(&rec);
        return r;
}
