/* SPDX-License-Identifier: MIT */
/* Background processes of a Sandbox: process.start, process.list, process.kill. */
#include <jansson.h>

#include "client.h"
#include "json_path.h"
#include "numbers.h"

int lfs_process_start(lfs_home *home, const char *project, int sandbox, const char *branch,
                      const char *const *argv, size_t n_argv, const lfs_exec_options *options, int *ret_pid,
                      char **ret_log, lfs_error **err) {
        int r = lfs_check_branch_name(branch, err);
        if (r < 0 || (r = lfs_check_exec_input(argv, n_argv, options, err)) < 0)
                return r;
        if (options && options->tty)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "a background process has no terminal: its output goes to its log");
        json_t *args = lfs_exec_request(branch, argv, n_argv, options);
        json_object_del(args, "timeout");
        json_t *result = NULL;
        if ((r = lfs_sandbox_call(home, project, sandbox, LFS_CALL_PROCESS_START, args, &result, err)) < 0)
                return r;
        long long pid;
        if (lfs_json_whole("pid", json_object_get(result, "pid"), 1, LFS_MAX_PID, &pid, NULL) < 0) {
                json_decref(result);
                return lfs_fail(err, LFS_FAILED, EIO, "sandbox %d's answer had no pid", sandbox);
        }
        *ret_pid = (int)pid;
        if (ret_log)
                *ret_log = xstrdup(json_string_value(json_object_get(result, "log")) ?: "");
        json_decref(result);
        return 0;
}

int lfs_process_list(lfs_home *home, const char *project, int sandbox, lfs_process_info **ret, size_t *ret_n,
                     lfs_error **err) {
        json_t *result = NULL;
        int r = lfs_sandbox_call(home, project, sandbox, LFS_CALL_PROCESS_LIST, json_object(), &result, err);
        if (r < 0)
                return r;
        size_t n = json_array_size(result);
        lfs_process_info *out = xcalloc(n ? n : 1, sizeof(*out));
        for (size_t i = 0; i < n; i++) {
                json_t *p = json_array_get(result, i);
                out[i] = (lfs_process_info){
                        .pid = (int)json_integer_value(json_object_get(p, "pid")),
                        .cgroup = xstrdup(json_string_value(json_object_get(p, "cgroup")) ?: ""),
                        .command = xstrdup(json_string_value(json_object_get(p, "command")) ?: ""),
                        .running = !strcmp(json_string_value(json_object_get(p, "state")) ?: "", "running"),
                        .exit = (int)json_integer_value(json_object_get(p, "exit")),
                };
        }
        json_decref(result);
        *ret = out;
        *ret_n = n;
        return 0;
}

void lfs_process_info_free(lfs_process_info *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].cgroup);
                free(items[i].command);
        }
        free(items);
}

int lfs_process_kill(lfs_home *home, const char *project, int sandbox, int pid, lfs_error **err) {
        if (pid <= 0)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "pid %d is out of range: give a whole number from 1 to %d", pid,
                                LFS_MAX_PID);
        return lfs_sandbox_call(home, project, sandbox, LFS_CALL_PROCESS_KILL,
                                json_pack("{s:i}", "pid", pid), NULL, err);
}
