/* SPDX-License-Identifier: MIT */
/* layerfs sandbox ... and layerfs workspace ... */
#include <fcntl.h>
#include <sys/wait.h>

#include "cli.h"
#include "json_path.h"
#include "numbers.h"

static const char *project_arg(const cli_ctx *ctx) {
        const char *project = ctx->project ? ctx->project : getenv("LAYERFS_PROJECT");
        return project && *project ? project : NULL;
}

/* Sandbox numbers are the smallest free ones: a million is far beyond any host. */
#define MAX_SANDBOX_NUMBER 1000000

static int sandbox_number(cli_ctx *ctx, const char *text, int *ret) {
        uint64_t v;
        int r = lfs_parse_whole("sandbox", text, 1, MAX_SANDBOX_NUMBER, &v, &ctx->err);
        if (r == 0)
                *ret = (int)v;
        return r;
}

/* A Sandbox's network: {mode, host_link, host_address, sandbox_address, prefix}, the last
 * four null but for private. */
static json_t *network_json(const lfs_sandbox_network *n) {
        bool private_net = n->prefix > 0;
        return json_pack("{s:o, s:o, s:o, s:o, s:o}", "mode", *n->mode ? json_string(n->mode) : json_null(),
                         "host_link", private_net ? json_string(n->host_link) : json_null(), "host_address",
                         private_net ? json_string(n->host_address) : json_null(), "sandbox_address",
                         private_net ? json_string(n->sandbox_address) : json_null(), "prefix",
                         private_net ? json_integer(n->prefix) : json_null());
}

/* "network none", or "network private 169.254.64.2/30 (host 169.254.64.1 on lfs0123...)". */
static char *network_text(const lfs_sandbox_network *n) {
        if (!*n->mode)
                return xstrdup("");
        if (n->prefix <= 0)
                return xasprintf("network %s", n->mode);
        return xasprintf("network %s %s/%d (host %s on %s)", n->mode, n->sandbox_address, n->prefix,
                         n->host_address, n->host_link);
}

/* LAYERFS_POOL: the pool of Sandboxes made ahead for creates like this one is filled by a
 * process of its own, detached: its own session, stdio on /dev/null, none of the caller's
 * other descriptors (a jobserver's pipe, a reader waiting for EOF) and / as its directory
 * (a file system the caller unmounts next), so that the create returns now and nothing
 * of the caller's waits for the fill. The create waits only until the filler holds the
 * pool's fill lock (or found another filler at work), so a caller that then takes the
 * lock (flock HOME/pool/KEY.lock) waits for the pool to be full. */
static void fill_pool_detached(cli_ctx *ctx, const lfs_sandbox_options *o) {
        uint64_t pool = 0;
        int ready[2];
        if (lfs_pool_size(&pool, NULL) < 0 || !pool || pipe2(ready, O_CLOEXEC) < 0)
                return;
        fflush(NULL);
        pid_t child = fork();
        if (child == 0) {
                (void)setsid();
                if (fork() != 0)
                        _exit(0);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
                    dup2(ready[1], 3) < 0)
                        _exit(1);
                close_range(4, ~0U, 0);
                lfs_home *home = NULL;
                if (lfs_home_open(ctx->home_dir, &home, NULL) < 0 || chdir("/") < 0)
                        _exit(1);
                (void)lfs_sandbox_pool_fill(home, project_arg(ctx), o, 3, NULL);
                _exit(0);
        }
        close(ready[1]);
        if (child > 0) {
                char byte;
                while (read(ready[0], &byte, 1) < 0 && errno == EINTR)
                        ;
                while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        close(ready[0]);
}

int cmd_sandbox_create(cli_ctx *ctx) {
        int n, r = cli_open_home(ctx);
        lfs_sandbox_options o = { .image = cli_option(ctx, "image"),
                                  .platform = cli_option(ctx, "platform"),
                                  .memory = cli_option(ctx, "memory"),
                                  .pids = cli_option(ctx, "pids"),
                                  .cpus = cli_option(ctx, "cpus"),
                                  .disk = cli_option(ctx, "disk"),
                                  .network = cli_option(ctx, "network") };
        if (r < 0 || (r = lfs_sandbox_create_with(ctx->home, project_arg(ctx), &o, &n, &ctx->err)) < 0)
                return r;
        /* Only --json shows the network: its reading (the Store and the records opened
         * again) is no part of a plain create. A Sandbox that closed at once (its idle
         * close) has none to show. */
        lfs_sandbox_network net = { .mode = "" };
        if (ctx->json)
                lfs_sandbox_get_network(ctx->home, project_arg(ctx), n, &net, NULL);
        if (ctx->json)
                cli_print_json(json_pack("{s:i, s:n, s:s, s:o}", "sandbox", n, "image", "platform", "linux",
                                         "network", network_json(&net)));
        else
                printf("%d\n", n);
        /* Its number is how its caller reaches it: a Sandbox whose number could not be
         * written is closed again at once rather than left open until its idle close. */
        if (cli_flush_output(ctx, true) < 0) {
                _cleanup_error_ lfs_error *closing = NULL;
                if (lfs_sandbox_close(ctx->home, project_arg(ctx), n, true, &closing) < 0)
                        return lfs_error_append(
                                &ctx->err,
                                "; sandbox %d, made for this create, could not be closed (%s): "
                                "close it with 'layerfs sandbox close %d --force'",
                                n, closing ? closing->message : "no reason given", n);
                return lfs_error_append(&ctx->err, "; sandbox %d, made for this create, was closed again",
                                        n);
        }
        fill_pool_detached(ctx, &o);
        return 0;
}

int cmd_sandbox_close(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        bool force = cli_flag(ctx, "force");
        if (r < 0 || (r = cli_open_home(ctx)) < 0 ||
            (r = lfs_sandbox_close(ctx->home, project_arg(ctx), n, force, &ctx->err)) < 0)
                return r;
        if (ctx->json)
                cli_print_json(json_pack("{s:i, s:b}", "sandbox", n, "closed", 1));
        else
                printf("closed sandbox %d\n", n);
        return 0;
}

int cmd_sandbox_list_workspaces(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        lfs_workspace_info *ws = NULL;
        size_t k = 0;
        if (r < 0 || (r = cli_open_home(ctx)) < 0 ||
            (r = lfs_sandbox_list_workspaces(ctx->home, project_arg(ctx), n, &ws, &k, &ctx->err)) < 0)
                return r;
        json_t *out = json_array();
        for (size_t i = 0; i < k; i++) {
                if (ctx->json)
                        json_array_append_new(out,
                                              json_pack("{s:s, s:s, s:b, s:s, s:s, s:b, s:I, s:I}", "branch",
                                                        ws[i].branch, "path", ws[i].path, "dirty",
                                                        ws[i].dirty, "platform", ws[i].platform, "transport",
                                                        ws[i].transport, "passthrough", ws[i].passthrough,
                                                        "metadata_bytes", (json_int_t)ws[i].metadata_bytes,
                                                        "inodes", (json_int_t)ws[i].inodes));
                else {
                        _cleanup_free_ char *branch = lfs_quote(ws[i].branch, LFS_QUOTE_ENTRY),
                                            *path = lfs_quote(ws[i].path, LFS_QUOTE_ENTRY);
                        printf("%-24s %-6s %s\n", branch, ws[i].dirty ? "dirty" : "clean", path);
                }
        }
        if (ctx->json)
                cli_print_json(out);
        else
                json_decref(out);
        lfs_workspace_info_free(ws, k);
        return 0;
}

/* A Sandbox's limits: {memory, pids, cpus, disk}, null where there is none. */
static json_t *limits_json(const lfs_sandbox_limits *l) {
        return json_pack("{s:o, s:o, s:o, s:o}", "memory",
                         l->memory ? json_integer((json_int_t)l->memory) : json_null(), "pids",
                         l->pids ? json_integer((json_int_t)l->pids) : json_null(), "cpus",
                         l->cpus > 0 ? json_real(l->cpus) : json_null(), "disk",
                         l->disk ? json_integer((json_int_t)l->disk) : json_null());
}

/* "2G" for 2147483648: a size in the largest unit that shows it whole. */
static char *size_text(uint64_t bytes) {
        static const char units[] = "KMGT";
        int unit = -1;
        while (unit < 3 && bytes && bytes % 1024 == 0) {
                bytes /= 1024;
                unit++;
        }
        return unit < 0 ? xasprintf("%llu", (unsigned long long)bytes)
                        : xasprintf("%llu%c", (unsigned long long)bytes, units[unit]);
}

/* "memory 2G, pids 512, cpus 1.5, disk 10G", or "" without limits. */
static char *limits_text(const lfs_sandbox_limits *l) {
        char *values[] = { l->memory ? size_text(l->memory) : NULL,
                           l->pids ? xasprintf("%llu", (unsigned long long)l->pids) : NULL,
                           l->cpus > 0 ? xasprintf("%g", l->cpus) : NULL,
                           l->disk ? size_text(l->disk) : NULL };
        static const char *const names[] = { "memory", "pids", "cpus", "disk" };
        char *out = xstrdup("");
        for (size_t i = 0; i < ELEMENTSOF(values); i++) {
                if (!values[i])
                        continue;
                char *next = xasprintf("%s%s%s %s", out, *out ? ", " : "", names[i], values[i]);
                free(out);
                free(values[i]);
                out = next;
        }
        return out;
}

int cmd_project_list_sandboxes(cli_ctx *ctx) {
        lfs_sandbox_details *sb = NULL;
        size_t n = 0, page_size, page;
        int r = cli_positive_option(ctx, "page-size", SIZE_MAX, &page_size);
        if (r < 0 || (r = cli_positive_option(ctx, "page", 1, &page)) < 0 || (r = cli_open_home(ctx)) < 0 ||
            (r = lfs_sandbox_list_details(ctx->home, &sb, &n, &ctx->err)) < 0)
                return r;
        /* Page K (from 1) of page_size Sandboxes, in the list's order; past the end: none. */
        size_t first = n;
        if (page - 1 <= SIZE_MAX / page_size && (page - 1) * page_size < n)
                first = (page - 1) * page_size;
        size_t end = first + (n - first < page_size ? n - first : page_size);
        json_t *out = json_array();
        for (size_t i = first; i < end; i++) {
                if (ctx->json)
                        json_array_append_new(
                                out, json_pack("{s:i, s:s, s:n, s:s, s:I, s:o, s:o, s:b}", "sandbox",
                                               sb[i].sandbox, "name", sb[i].project, "image", "platform",
                                               sb[i].platform, "workspaces", (json_int_t)sb[i].workspaces,
                                               "limits", limits_json(&sb[i].limits), "network",
                                               network_json(&sb[i].network), "answered", sb[i].answered));
                else {
                        /* A record's text: the home's, but checked nowhere on its way here. */
                        _cleanup_free_ char *project = lfs_quote(sb[i].project, LFS_QUOTE_ENTRY),
                                            *platform = lfs_quote(sb[i].platform, LFS_QUOTE_ENTRY),
                                            *shown = limits_text(&sb[i].limits),
                                            *network = network_text(&sb[i].network);
                        printf("%-4d %-24s %-8s %zu workspaces%s%s%s%s%s\n", sb[i].sandbox, project,
                               platform, sb[i].workspaces, *shown ? "; " : "", shown, *network ? "; " : "",
                               network, sb[i].answered ? "" : "; its daemon did not answer within 2 s");
                }
        }
        if (ctx->json)
                cli_print_json(out);
        else
                json_decref(out);
        lfs_sandbox_details_free(sb, n);
        return 0;
}

int cmd_workspace_mount(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        char *path = NULL;
        if (r < 0 || (r = cli_open_home(ctx)) < 0 ||
            (r = lfs_workspace_mount(ctx->home, project_arg(ctx), n, ctx->args[1], &path, &ctx->err)) < 0)
                return r;
        ctx->done = xasprintf("branch '%s' was mounted in sandbox %d", ctx->args[1], n);
        if (ctx->json)
                cli_print_json(json_pack("{s:i, s:s, s:n, s:s}", "sandbox", n, "path", path, "image",
                                         "platform", "linux"));
        else {
                _cleanup_free_ char *shown = lfs_quote(path, LFS_QUOTE_ENTRY);
                printf("%s\n", shown);
        }
        free(path);
        return 0;
}

int cmd_workspace_status(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        lfs_change *changes = NULL;
        size_t k = 0;
        if (r < 0 || (r = cli_open_home(ctx)) < 0 ||
            (r = lfs_workspace_status(ctx->home, project_arg(ctx), n, ctx->args[1], &changes, &k,
                                      &ctx->err)) < 0)
                return r;
        cli_print_changes(ctx, changes, k);
        lfs_change_list_free(changes, k);
        return 0;
}

/* The branch's head as it is now (false if it cannot be read: then it is not used). */
static bool branch_head_now(cli_ctx *ctx, const char *branch, lfs_id *ret) {
        lfs_store *store = NULL;
        bool ok = lfs_store_open(ctx->home, project_arg(ctx), &store, NULL) == 0 &&
                  lfs_store_resolve(store, branch, ret, NULL) == 0;
        lfs_store_close(store);
        return ok;
}

int cmd_workspace_commit(cli_ctx *ctx) {
        int n = 0, merged = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        const char *message = cli_option(ctx, "m");
        lfs_id commit, before;
        bool known = false;
        if (r == 0 && !message)
                r = lfs_fail(&ctx->err, LFS_INVALID_INPUT, 0, "'layerfs workspace commit' needs -m MESSAGE");
        if (r == 0 && (r = cli_open_home(ctx)) == 0)
                known = branch_head_now(ctx, ctx->args[1], &before);
        if (r < 0 || (r = lfs_workspace_commit(ctx->home, project_arg(ctx), n, ctx->args[1], message,
                                               &commit, &merged, &ctx->err)) < 0)
                return r;
        /* A Workspace without changes records no empty commit: its commit is the head. */
        bool changed = !known || merged || memcmp(before.bytes, commit.bytes, LFS_ID_LEN);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&commit, hex);
        if (ctx->json)
                cli_print_json(
                        json_pack("{s:s, s:b, s:b}", "commit", hex, "merged", merged, "changed", changed));
        else if (!changed)
                printf("nothing changed; %s stays at %s\n", ctx->args[1], hex);
        else
                printf("committed %s on %s%s\n", hex, ctx->args[1],
                       merged ? " (merged with newer commits)" : "");
        return 0;
}

int cmd_workspace_unmount(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        if (r < 0 || (r = cli_open_home(ctx)) < 0 ||
            (r = lfs_workspace_unmount(ctx->home, project_arg(ctx), n, ctx->args[1],
                                       cli_flag(ctx, "discard"), &ctx->err)) < 0)
                return r;
        if (ctx->json)
                cli_print_json(
                        json_pack("{s:i, s:s, s:b}", "sandbox", n, "branch", ctx->args[1], "unmounted", 1));
        else
                printf("unmounted %s from sandbox %d\n", ctx->args[1], n);
        return 0;
}

int cmd_sandbox_log(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        size_t lines = 100;
        if (r == 0)
                r = cli_positive_option(ctx, "lines", 100, &lines);
        char *text = NULL;
        if (r < 0 || (r = cli_open_home(ctx)) < 0 ||
            (r = lfs_sandbox_log(ctx->home, project_arg(ctx), n, lines, &text, &ctx->err)) < 0)
                return r;
        if (ctx->json) {
                json_t *out = json_array();
                for (char *line = text; *line;) {
                        size_t len = strcspn(line, "\n");
                        json_array_append_new(out, json_stringn(line, len));
                        line += len + (line[len] == '\n');
                }
                cli_print_json(json_pack("{s:i, s:o}", "sandbox", n, "lines", out));
        } else {
                /* Its entries name commands and paths that commands chose. */
                _cleanup_free_ char *shown = lfs_quote(text, LFS_QUOTE_LINES);
                fputs(shown, stdout);
        }
        free(text);
        return 0;
}

int cmd_workspace_exec(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        if (r < 0)
                return r;
        lfs_exec_options o = { .cwd = cli_option(ctx, "cwd"),
                               .stdin_fd = 0,
                               .stdout_fd = 1,
                               .stderr_fd = 2,
                               .tty = cli_flag(ctx, "tty") };
        _cleanup_free_ const char **env = xcalloc(ctx->n_opts + 1, sizeof(char *));
        for (size_t i = 0; i < ctx->n_opts; i++)
                if (!strcmp(ctx->opts[i].name, "env"))
                        env[o.n_env++] = ctx->opts[i].value;
        o.env = env;
        const char *timeout = cli_option(ctx, "timeout");
        if (timeout && (r = lfs_parse_seconds("--timeout", timeout, 0, LFS_MAX_TIMEOUT_SECONDS, &o.timeout,
                                              &ctx->err)) < 0)
                return r;
        int status = 0;
        if ((r = cli_open_home(ctx)) < 0 ||
            (r = lfs_workspace_exec(ctx->home, project_arg(ctx), n, ctx->args[1],
                                    (const char *const *)ctx->args + 2, ctx->n_args - 2, &o, &status,
                                    &ctx->err)) < 0)
                return r;
        ctx->exit_status = status;
        ctx->command_ran = true;
        ctx->done = xasprintf("the command ran and exited %d", status);
        if (ctx->json)
                cli_print_json(
                        json_pack("{s:i, s:s, s:i}", "sandbox", n, "branch", ctx->args[1], "exit", status));
        return 0;
}

int cmd_runtime_reclaim(cli_ctx *ctx) {
        lfs_reclaimed *gone = NULL;
        size_t k = 0;
        int r = cli_open_home(ctx);
        if (r < 0 || (r = lfs_runtime_reclaim(ctx->home, &gone, &k, &ctx->err)) < 0)
                return r;
        json_t *out = json_array();
        for (size_t i = 0; i < k; i++) {
                if (ctx->json) {
                        json_t *item =
                                json_pack("{s:o, s:i, s:o}", "project", lfs_json_path(gone[i].project),
                                          "sandbox", gone[i].sandbox, "dir", lfs_json_path(gone[i].dir));
                        if (gone[i].left_alone)
                                json_object_set_new(item, "left_alone", lfs_json_path(gone[i].left_alone));
                        json_array_append_new(out, item);
                } else if (gone[i].left_alone) {
                        _cleanup_free_ char *why = lfs_quote(gone[i].left_alone, LFS_QUOTE_INLINE);
                        printf("left alone: %s\n", why);
                } else {
                        _cleanup_free_ char *project = lfs_quote(gone[i].project, LFS_QUOTE_ENTRY),
                                            *dir = lfs_quote(gone[i].dir, LFS_QUOTE_ENTRY);
                        printf("reclaimed sandbox %d of %s (%s)\n", gone[i].sandbox, project, dir);
                }
        }
        if (ctx->json)
                cli_print_json(out);
        else {
                json_decref(out);
                if (!k)
                        printf("nothing to reclaim\n");
        }
        lfs_reclaimed_free(gone, k);
        return 0;
}

int cmd_process_start(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        if (r < 0)
                return r;
        lfs_exec_options o = {
                .cwd = cli_option(ctx, "cwd"), .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1
        };
        _cleanup_free_ const char **env = xcalloc(ctx->n_opts + 1, sizeof(char *));
        for (size_t i = 0; i < ctx->n_opts; i++)
                if (!strcmp(ctx->opts[i].name, "env"))
                        env[o.n_env++] = ctx->opts[i].value;
        o.env = env;
        int pid = 0;
        _cleanup_free_ char *log = NULL;
        if ((r = cli_open_home(ctx)) < 0 ||
            (r = lfs_process_start(ctx->home, project_arg(ctx), n, ctx->args[1],
                                   (const char *const *)ctx->args + 2, ctx->n_args - 2, &o, &pid, &log,
                                   &ctx->err)) < 0)
                return r;
        ctx->done = xasprintf("process %d was started in sandbox %d ('layerfs process list %d')", pid, n, n);
        if (ctx->json)
                cli_print_json(json_pack("{s:i, s:i, s:s}", "sandbox", n, "pid", pid, "log", log));
        else
                printf("%d\n", pid);
        return 0;
}

int cmd_process_list(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        lfs_process_info *ps = NULL;
        size_t k = 0;
        if (r < 0 || (r = cli_open_home(ctx)) < 0 ||
            (r = lfs_process_list(ctx->home, project_arg(ctx), n, &ps, &k, &ctx->err)) < 0)
                return r;
        json_t *out = json_array();
        for (size_t i = 0; i < k; i++) {
                if (ctx->json) {
                        json_t *p = json_pack("{s:i, s:s, s:s, s:s}", "pid", ps[i].pid, "cgroup",
                                              ps[i].cgroup, "state", ps[i].running ? "running" : "exited",
                                              "command", ps[i].command);
                        if (!ps[i].running)
                                json_object_set_new(p, "exit", json_integer(ps[i].exit));
                        json_array_append_new(out, p);
                        continue;
                }
                /* A command line is whatever the command made it. */
                _cleanup_free_ char *cgroup = lfs_quote(ps[i].cgroup, LFS_QUOTE_ENTRY),
                                    *command = lfs_quote(ps[i].command, LFS_QUOTE_ENTRY);
                if (ps[i].running)
                        printf("%-8d %-10s running    %s\n", ps[i].pid, cgroup, command);
                else
                        printf("%-8d %-10s exited %-3d %s\n", ps[i].pid, cgroup, ps[i].exit, command);
        }
        if (ctx->json)
                cli_print_json(out);
        else
                json_decref(out);
        lfs_process_info_free(ps, k);
        return 0;
}

int cmd_process_kill(cli_ctx *ctx) {
        int n = 0, pid = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        if (r < 0)
                return r;
        uint64_t v;
        if ((r = lfs_parse_whole("pid", ctx->args[1], 1, LFS_MAX_PID, &v, &ctx->err)) < 0)
                return r;
        pid = (int)v;
        if ((r = cli_open_home(ctx)) < 0 ||
            (r = lfs_process_kill(ctx->home, project_arg(ctx), n, pid, &ctx->err)) < 0)
                return r;
        if (ctx->json)
                cli_print_json(json_pack("{s:i, s:i, s:b}", "sandbox", n, "pid", pid, "killed", 1));
        else
                printf("killed %d\n", pid);
        return 0;
}

static int print_event(void *userdata, const char *json) {
        (void)userdata;
        /* JSON escapes control characters but leaves C1 controls and overrides raw. */
        _cleanup_free_ char *shown = lfs_quote(json, LFS_QUOTE_JSON);
        puts(shown);
        /* A reader that went away (| head) ends the stream. */
        return fflush(stdout) != 0 || ferror(stdout);
}

int cmd_sandbox_events(cli_ctx *ctx) {
        int n = 0, r = sandbox_number(ctx, ctx->args[0], &n);
        if (r < 0 || (r = cli_open_home(ctx)) < 0)
                return r;
        return lfs_sandbox_events(ctx->home, project_arg(ctx), n, cli_flag(ctx, "follow"), print_event, NULL,
                                  NULL, &ctx->err);
}

/* runtime status's rows of platforms or of runtimes: id, allowed, ready, missing. */
static json_t *status_rows_json(const lfs_platform_status *rows, size_t n) {
        json_t *out = json_array();
        for (size_t i = 0; i < n; i++) {
                json_t *m = json_array();
                for (size_t k = 0; k < rows[i].n_missing; k++)
                        json_array_append_new(m, json_string(rows[i].missing[k]));
                json_array_append_new(out, json_pack("{s:s, s:b, s:b, s:o}", "id", rows[i].id, "allowed",
                                                     rows[i].allowed, "ready", rows[i].ready, "missing", m));
        }
        return out;
}

static void print_status_rows(const char *title, const lfs_platform_status *rows, size_t n) {
        printf("\n%-12s %-8s %-6s %s\n", title, "allowed", "ready", "missing");
        for (size_t i = 0; i < n; i++) {
                printf("%-12s %-8s %-6s", rows[i].id, rows[i].allowed ? "yes" : "no",
                       rows[i].ready ? "yes" : "no");
                for (size_t k = 0; k < rows[i].n_missing; k++)
                        printf(" %s", rows[i].missing[k]);
                printf("\n");
        }
}

int cmd_runtime_status(cli_ctx *ctx) {
        lfs_runtime_info *s = NULL;
        int r = cli_open_home(ctx);
        if (r < 0 || (r = lfs_runtime_status(ctx->home, &s, &ctx->err)) < 0)
                return r;
        if (ctx->json) {
                json_t *kernel = json_object(), *missing = json_array();
                for (size_t i = 0; i < s->n_features; i++)
                        json_object_set_new(kernel, s->features[i].name,
                                            json_boolean(s->features[i].present));
                for (size_t i = 0; i < s->n_missing; i++)
                        json_array_append_new(missing, json_string(s->missing[i]));
                cli_print_json(json_pack("{s:s, s:s, s:s, s:s?, s:s, s:{s:s, s:b}, s:o, s:o, s:o, s:o}",
                                         "home", s->home, "placement", s->placement, "default",
                                         s->default_runtime, "default_why", s->default_why, "watcher",
                                         s->watcher, "fuse", "transport", s->fuse_transport, "passthrough",
                                         s->fuse_passthrough, "kernel", kernel, "missing", missing,
                                         "platforms", status_rows_json(s->platforms, s->n_platforms),
                                         "runtimes", status_rows_json(s->runtimes, s->n_runtimes)));
        } else {
                _cleanup_free_ char *home = lfs_quote(s->home, LFS_QUOTE_ENTRY);
                printf("home        %s\nplacement   %s\ndefault     %s%s%s%s\nwatcher     %s\nfuse        %s, "
                       "passthrough %s\n\n",
                       home, s->placement, s->default_runtime, s->default_why ? " (" : "",
                       s->default_why ? s->default_why : "", s->default_why ? ")" : "", s->watcher,
                       s->fuse_transport, s->fuse_passthrough ? "on" : "off");
                for (size_t i = 0; i < s->n_features; i++)
                        printf("%-28s %s%s%s\n", s->features[i].name, s->features[i].present ? "yes" : "no ",
                               s->features[i].note ? "   " : "",
                               s->features[i].note ? s->features[i].note : "");
                print_status_rows("platform", s->platforms, s->n_platforms);
                print_status_rows("runtime", s->runtimes, s->n_runtimes);
                printf("\nmissing     ");
                for (size_t i = 0; i < s->n_missing; i++)
                        printf("%s%s", i ? " " : "", s->missing[i]);
                printf("%s\n", s->n_missing ? "" : "nothing");
        }
        lfs_runtime_info_free(s);
        return 0;
}
