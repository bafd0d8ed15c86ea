/* SPDX-License-Identifier: MIT */
/* layerfs branch ... */
#include <time.h>

#include "cli.h"
#include "json_path.h"

static void short_id(const lfs_id *id, char ret[13]) {
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(id, hex);
        memcpy(ret, hex, 12);
        ret[12] = 0;
}

int cmd_branch_create(cli_ctx *ctx) {
        lfs_id commit;
        const char *name = ctx->args[0];
        int r = cli_open_store(ctx);
        if (r < 0 ||
            (r = lfs_branch_create(ctx->store, name, cli_option(ctx, "from"), &commit, &ctx->err)) < 0)
                return r;
        ctx->done = xasprintf("branch '%s' was created", name);
        if (ctx->json)
                cli_print_json(json_pack("{s:s, s:o}", "branch", name, "commit", cli_json_id(&commit)));
        else {
                char s[13];
                short_id(&commit, s);
                printf("branch %s at %s\n", name, s);
        }
        return 0;
}

int cmd_branch_list(cli_ctx *ctx) {
        lfs_branch_info *branches;
        size_t n;
        int r = cli_open_store(ctx);
        if (r < 0 || (r = lfs_branch_list(ctx->store, &branches, &n, &ctx->err)) < 0)
                return r;
        json_t *out = json_array();
        for (size_t i = 0; i < n; i++) {
                if (ctx->json) {
                        json_array_append_new(out, json_pack("{s:s, s:o}", "branch", branches[i].name,
                                                             "commit", cli_json_id(&branches[i].commit)));
                } else {
                        char s[13];
                        short_id(&branches[i].commit, s);
                        printf("%-12s %s\n", s, branches[i].name);
                }
        }
        if (ctx->json)
                cli_print_json(out);
        else
                json_decref(out);
        lfs_branch_list_free(branches, n);
        return 0;
}

int cmd_branch_delete(cli_ctx *ctx) {
        const char *name = ctx->args[0];
        lfs_id was;
        int r = cli_open_store(ctx);
        if (r < 0 || (r = lfs_branch_delete(ctx->store, name, cli_flag(ctx, "force"), &was, &ctx->err)) < 0)
                return r;
        if (ctx->json)
                cli_print_json(json_pack("{s:s, s:b, s:o}", "branch", name, "deleted", 1, "commit",
                                         cli_json_id(&was)));
        else {
                char s[13];
                short_id(&was, s);
                printf("deleted branch %s (was %s)\n", name, s);
        }
        return 0;
}

int cmd_branch_log(cli_ctx *ctx) {
        lfs_commit_info *commits;
        size_t n, limit;
        int r = cli_positive_option(ctx, "limit", 0, &limit);
        if (r < 0 || (r = cli_open_store(ctx)) < 0 ||
            (r = lfs_branch_log(ctx->store, ctx->args[0], limit, &commits, &n, &ctx->err)) < 0)
                return r;
        json_t *out = json_array();
        for (size_t i = 0; i < n; i++) {
                const lfs_commit_info *c = &commits[i];
                if (ctx->json) {
                        json_t *parents = json_array();
                        for (size_t p = 0; p < c->n_parents; p++)
                                json_array_append_new(parents, cli_json_id(&c->parents[p]));
                        json_array_append_new(out,
                                              json_pack("{s:o, s:o, s:o, s:s, s:I, s:s}", "commit",
                                                        cli_json_id(&c->id), "tree", cli_json_id(&c->tree),
                                                        "parents", parents, "author", c->author, "time",
                                                        (json_int_t)c->time, "message", c->message));
                        continue;
                }
                char hex[LFS_HEX_LEN + 1], when[64];
                time_t t = (time_t)c->time;
                struct tm tm;
                lfs_id_to_hex(&c->id, hex);
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %z", localtime_r(&t, &tm));
                printf("commit %s\n", hex);
                if (c->n_parents == 2) {
                        char a[13], b[13];
                        short_id(&c->parents[0], a);
                        short_id(&c->parents[1], b);
                        printf("Merge:  %s %s\n", a, b);
                }
                _cleanup_free_ char *author = lfs_quote(c->author, LFS_QUOTE_INLINE),
                                    *message = lfs_quote(c->message, LFS_QUOTE_LINES);
                printf("Author: %s\nDate:   %s\n\n", author, when);
                for (const char *line = message; *line;) {
                        size_t len = strcspn(line, "\n");
                        printf("    %.*s\n", (int)len, line);
                        line += len + (line[len] == '\n');
                }
                if (i + 1 < n)
                        putchar('\n');
        }
        if (ctx->json)
                cli_print_json(out);
        else
                json_decref(out);
        lfs_commit_info_free(commits, n);
        return 0;
}

void cli_print_changes(cli_ctx *ctx, const lfs_change *changes, size_t n) {
        json_t *out = json_array();
        for (size_t i = 0; i < n; i++) {
                const char *kind = lfs_change_kind_name(changes[i].kind);
                if (ctx->json) {
                        json_t *c = json_pack("{s:s}", "change", kind);
                        lfs_json_set_path(c, "path", changes[i].path);
                        json_array_append_new(out, c);
                } else {
                        _cleanup_free_ char *path = lfs_quote(changes[i].path, LFS_QUOTE_ENTRY);
                        printf("%c %s\n", kind[0] - 'a' + 'A', path);
                }
        }
        if (ctx->json)
                cli_print_json(out);
        else
                json_decref(out);
}

int cmd_branch_diff(cli_ctx *ctx) {
        lfs_change *changes;
        size_t n;
        int r = cli_open_store(ctx);
        if (r < 0 ||
            (r = lfs_branch_diff(ctx->store, ctx->args[0], ctx->args[1], &changes, &n, &ctx->err)) < 0)
                return r;
        cli_print_changes(ctx, changes, n);
        lfs_change_list_free(changes, n);
        return 0;
}

int cmd_branch_merge(cli_ctx *ctx) {
        lfs_merge_result m;
        const char *from = ctx->args[0], *into = ctx->args[1];
        int r = cli_open_store(ctx);
        if (r < 0 || (r = lfs_branch_merge(ctx->store, from, into, &m, &ctx->err)) < 0)
                return r;
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&m.commit, hex);
        if (ctx->json)
                cli_print_json(json_pack("{s:s, s:b, s:b}", "commit", hex, "fast_forward", m.fast_forward,
                                         "up_to_date", m.up_to_date));
        else if (m.up_to_date)
                printf("%s already contains %s; nothing to merge (at %s)\n", into, from, hex);
        else if (m.fast_forward)
                printf("fast-forward: %s now at %s\n", into, hex);
        else
                printf("merged %s into %s: %s\n", from, into, hex);
        return 0;
}

int cmd_branch_export(cli_ctx *ctx) {
        const char *ref = ctx->args[0], *dir = ctx->args[1];
        lfs_id commit;
        int r = cli_open_store(ctx);
        if (r < 0 || (r = lfs_store_resolve(ctx->store, ref, &commit, &ctx->err)) < 0)
                return r;
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&commit, hex);
        /* Export the resolved commit, so that a branch moving meanwhile cannot mix two. */
        if ((r = lfs_branch_export(ctx->store, hex, dir, &ctx->err)) < 0)
                return r;
        cli_end_progress(ctx);
        if (ctx->json)
                cli_print_json(json_pack("{s:s, s:s}", "commit", hex, "dir", dir));
        else {
                _cleanup_free_ char *shown = lfs_quote(dir, LFS_QUOTE_ENTRY);
                printf("exported %s to %s\n", hex, shown);
        }
        return 0;
}

int cmd_branch_commit(cli_ctx *ctx) {
        const char *branch = ctx->args[0], *from = cli_option(ctx, "from"), *message = cli_option(ctx, "m");
        lfs_id before, commit;
        if (!from)
                return lfs_fail(&ctx->err, LFS_INVALID_INPUT, 0,
                                "'layerfs branch commit' needs --from DIR, the directory to record");
        if (!message)
                return lfs_fail(&ctx->err, LFS_INVALID_INPUT, 0,
                                "'layerfs branch commit' needs -m MESSAGE, the commit message");
        int r = cli_open_store(ctx);
        if (r < 0 || (r = lfs_store_resolve(ctx->store, branch, &before, &ctx->err)) < 0 ||
            (r = lfs_branch_commit(ctx->store, branch, from, message, &commit, &ctx->err)) < 0)
                return r;
        cli_end_progress(ctx);
        bool changed = !!memcmp(before.bytes, commit.bytes, LFS_ID_LEN);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&commit, hex);
        if (ctx->json)
                cli_print_json(
                        json_pack("{s:s, s:s, s:b}", "branch", branch, "commit", hex, "changed", changed));
        else if (changed)
                printf("committed %s on %s\n", hex, branch);
        else
                printf("nothing changed; %s stays at %s\n", branch, hex);
        return 0;
}
