/* SPDX-License-Identifier: MIT */
/* workspace.exec: the command checked here, run by the Sandbox's daemon with our stdin,
 * stdout and stderr (or a terminal) relayed (exec_streams.c). */
#include <jansson.h>

#include "client.h"
#include "exec_streams.h"
#include "json_path.h"
#include "numbers.h"

json_t *lfs_exec_request(const char *branch, const char *const *argv, size_t n_argv,
                         const lfs_exec_options *o) {
        json_t *command = json_array(), *env = json_array();
        for (size_t i = 0; i < n_argv; i++)
                json_array_append_new(command, json_string(argv[i]));
        for (size_t i = 0; o && i < o->n_env; i++)
                json_array_append_new(env, json_string(o->env[i]));
        json_t *req = json_pack("{s:s, s:o, s:o}", "branch", branch, "command", command, "env", env);
        if (o && o->tty) {
                /* The command's terminal is like ours; a --env TERM=... given after it wins. */
                const char *term = getenv("TERM");
                if (term && *term && lfs_is_utf8(term))
                        json_array_insert_new(env, 0, json_sprintf("TERM=%s", term));
                json_object_set_new(req, "tty", json_true());
        }
        if (o && o->cwd)
                json_object_set_new(req, "cwd", json_string(o->cwd));
        if (o && o->timeout > 0)
                json_object_set_new(req, "timeout", json_real(o->timeout));
        return req;
}

int lfs_check_exec_input(const char *const *argv, size_t n_argv, const lfs_exec_options *o,
                         lfs_error **err) {
        if (!n_argv || !argv[0] || !*argv[0])
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "give the command to run after '--'");
        for (size_t i = 0; i < n_argv; i++)
                if (!argv[i] || !lfs_is_utf8(argv[i]))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "word %zu of the command is not UTF-8 text", i + 1);
        for (size_t i = 0; o && i < o->n_env; i++) {
                const char *e = o->env[i];
                if (!e || !*e || *e == '=' || !strchr(e, '='))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "environment entry '%s' is not KEY=VALUE; give --env KEY=VALUE",
                                        e ? e : "");
                if (!lfs_is_utf8(e))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0, "environment entry %zu is not UTF-8 text",
                                        i + 1);
        }
        if (o && o->cwd && !lfs_is_utf8(o->cwd))
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the cwd is not UTF-8 text");
        /* Also NaN and infinity, which JSON cannot carry. */
        if (o && !(o->timeout >= 0 && o->timeout <= LFS_MAX_TIMEOUT_SECONDS))
                return lfs_fail(
                        err, LFS_INVALID_INPUT, 0,
                        "timeout %g is out of range: give a number of seconds from 0 to %.0f (0: none)",
                        o->timeout, LFS_MAX_TIMEOUT_SECONDS);
        return 0;
}

int lfs_workspace_exec(lfs_home *home, const char *project, int sandbox, const char *branch,
                       const char *const *argv, size_t n_argv, const lfs_exec_options *options,
                       int *ret_exit, lfs_error **err) {
        int r = lfs_check_branch_name(branch, err);
        if (r < 0 || (r = lfs_check_exec_input(argv, n_argv, options, err)) < 0)
                return r;
        sandbox_record rec = { .dir_fd = -1 };
        if ((r = lfs_sandbox_open_live(home, project, sandbox, &rec, err)) < 0)
                return r;
        /* The command writes into pipes of ours (or its terminal); we copy while it runs.
         * When it ends we take what it wrote and stop: processes it left in the background
         * may hold them for as long as the Sandbox lives, and must not keep the caller
         * waiting, nor read what the caller's terminal gets afterwards. */
        exec_streams streams;
        int in = options ? options->stdin_fd : -1, out = options ? options->stdout_fd : -1,
            errfd = options ? options->stderr_fd : -1;
        bool tty = options && options->tty;
        if ((r = exec_streams_open(&streams, in, out, errfd, tty, err)) < 0)
                goto done;
        json_t *req = lfs_exec_request(branch, argv, n_argv, options);
        struct winsize window;
        if (req && exec_streams_window(&streams, &window)) {
                json_object_set_new(req, "rows", json_integer(window.ws_row));
                json_object_set_new(req, "cols", json_integer(window.ws_col));
        }
        /* With tty, no fds: the daemon makes the terminal and sends its master back. */
        int sock = lfs_rpc_send(&rec, LFS_CALL_WORKSPACE_EXEC, req, streams.passed, tty ? 0 : 3, err);
        exec_streams_sent(&streams);
        if (sock < 0) {
                r = sock;
                goto done;
        }
        json_t *answer = NULL, *result = NULL;
        lfs_error *read_err = NULL;
        int got = exec_streams_relay(&streams, sock, &answer, &read_err);
        close(sock);
        r = lfs_rpc_answer(&rec, got, answer, read_err, &result, err);
        if (r == 0) {
                long long code;
                if (lfs_json_whole("exit status", json_object_get(result, "exit"), 0, 255, &code, NULL) < 0)
                        r = lfs_fail(err, LFS_FAILED, EIO, "sandbox %d's answer had no exit status",
                                     sandbox);
                else
                        *ret_exit = (int)code;
        }
        json_decref(result);
done:
        exec_streams_close(&streams);
        lfs_record_done(&rec);
        return r;
}
