/* SPDX-License-Identifier: MIT */
#ifndef LFS_CLI_H
#define LFS_CLI_H

#include <jansson.h>
#include <stdbool.h>

#include "config.h" /* LAYERFS_VERSION, LAYERFS_DAEMON_PATH: made by the Makefile */
#include "layerfs.h"
#include "quote.h"
#include "util.h"

#define _cli_printf_(a, b) __attribute__((format(printf, a, b)))

typedef struct cli_opt {
        char *name;
        const char *value;
} cli_opt;

typedef struct cli_ctx {
        const char *home_dir, *project;
        bool json, version;
        char **args; /* positional arguments after GROUP METHOD */
        size_t n_args, cap_args;
        cli_opt *opts;
        size_t n_opts, cap_opts;
        lfs_home *home;
        lfs_store *store;
        lfs_error *err;
        uint64_t last_progress_ms;
        bool progress_shown;
        int exit_status; /* of a successful run: 0, or an exec'd command's own */
        bool command_ran; /* exit_status is a command's: kept even when its report is lost */
        char *done; /* what the command made, said when its report cannot be written */
} cli_ctx;

int cli_open_home(cli_ctx *ctx);
int cli_open_store(cli_ctx *ctx);
const char *cli_option(const cli_ctx *ctx, const char *name);
/* --NAME as a positive whole number into *ret; fallback when it is not given. */
int cli_positive_option(cli_ctx *ctx, const char *name, size_t fallback, size_t *ret);
bool cli_flag(const cli_ctx *ctx, const char *name);
/* "A path" lines, or [{path, change}] with --json. */
void cli_print_changes(cli_ctx *ctx, const lfs_change *changes, size_t n);
/* Prints and frees value. */
void cli_print_json(json_t *value);
void cli_end_progress(cli_ctx *ctx);
int cli_report(cli_ctx *ctx, int r);
/* Flushes stdout: 0, or a Failed error (in ctx->err) naming why the output was not
 * written, and what was done all the same (ctx->done). With broken_pipe_fails, a reader
 * gone (EPIPE) is such an error instead of SIGPIPE's end of the process. */
int cli_flush_output(cli_ctx *ctx, bool broken_pipe_fails);
/* A commit id as text; short for people, whole for --json. */
json_t *cli_json_id(const lfs_id *id);

int cmd_project_init(cli_ctx *ctx);
int cmd_project_list(cli_ctx *ctx);
int cmd_project_verify(cli_ctx *ctx);
int cmd_project_gc(cli_ctx *ctx);
int cmd_branch_create(cli_ctx *ctx);
int cmd_branch_list(cli_ctx *ctx);
int cmd_branch_delete(cli_ctx *ctx);
int cmd_branch_log(cli_ctx *ctx);
int cmd_branch_diff(cli_ctx *ctx);
int cmd_branch_merge(cli_ctx *ctx);
int cmd_branch_export(cli_ctx *ctx);
int cmd_branch_commit(cli_ctx *ctx);
int cmd_project_list_sandboxes(cli_ctx *ctx);
int cmd_sandbox_create(cli_ctx *ctx);
int cmd_sandbox_close(cli_ctx *ctx);
int cmd_sandbox_list_workspaces(cli_ctx *ctx);
int cmd_sandbox_log(cli_ctx *ctx);
int cmd_workspace_mount(cli_ctx *ctx);
int cmd_workspace_status(cli_ctx *ctx);
int cmd_workspace_commit(cli_ctx *ctx);
int cmd_workspace_unmount(cli_ctx *ctx);
int cmd_workspace_exec(cli_ctx *ctx);
int cmd_runtime_reclaim(cli_ctx *ctx);
int cmd_sandbox_events(cli_ctx *ctx);
int cmd_runtime_status(cli_ctx *ctx);
int cmd_process_start(cli_ctx *ctx);
int cmd_process_list(cli_ctx *ctx);
int cmd_process_kill(cli_ctx *ctx);

#endif
