/* SPDX-License-Identifier: MIT */
/* sandbox.events: the starts and ends of the Sandbox's processes, kept or followed. */
#include <jansson.h>

#include "client.h"
#include "frame.h"

int lfs_sandbox_events(lfs_home *home, const char *project, int sandbox, int follow, lfs_event_fn fn,
                       void *userdata, char **ret_watcher, lfs_error **err) {
        json_t *args = json_pack("{s:b}", "follow", follow);
        if (!follow) {
                json_t *result = NULL;
                int r = lfs_sandbox_call(home, project, sandbox, LFS_CALL_SANDBOX_EVENTS, args, &result,
                                         err);
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
                json_decref(args);
                return r;
        }
        _cleanup_close_ int fd = lfs_rpc_send(&rec, LFS_CALL_SANDBOX_EVENTS, args, NULL, 0, err);
        if (fd < 0) {
                lfs_record_done(&rec);
                return fd;
        }
        /* A stream of frames, one event each (or a refusal first), until the daemon closes
         * the connection (the Sandbox closed) or fn says stop. */
        lfs_frame_reader reader;
        lfs_frame_reader_init(&reader, fd, LFS_FRAME_MAX_ANSWER, 0);
        for (;;) {
                json_t *frame = NULL, *item = NULL;
                lfs_error *read_err = NULL;
                int got = lfs_frame_read(&reader, &frame, &read_err);
                if (got <= 0) {
                        if (got < 0)
                                r = lfs_rpc_answer(&rec, got, NULL, read_err, NULL, err);
                        break;
                }
                r = lfs_proto_parse_stream_item(frame, &item, err);
                json_decref(frame);
                if (r < 0)
                        break;
                /* The event as the daemon made it, without the frame's "v". */
                char *text = json_dumps(item, JSON_COMPACT);
                json_decref(item);
                int stop = fn(userdata, text);
                free(text);
                if (stop)
                        break;
        }
        lfs_frame_reader_done(&reader);
        lfs_record_done(&rec);
        return r;
}
