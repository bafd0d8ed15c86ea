/* SPDX-License-Identifier: MIT */
/* layerfs project ... */
#include "cli.h"
#include "numbers.h"

json_t *cli_json_id(const lfs_id *id) {
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(id, hex);
        return json_string(hex);
}

int cmd_project_init(cli_ctx *ctx) {
        lfs_id commit;
        const char *name = ctx->args[0];
        int r = cli_open_home(ctx);
        if (r < 0 ||
            (r = lfs_project_init(ctx->home, name, cli_option(ctx, "from"), &commit, &ctx->err)) < 0)
                return r;
        cli_end_progress(ctx);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&commit, hex);
        if (ctx->json)
                cli_print_json(
                        json_pack("{s:s, s:s, s:s}", "project", name, "branch", "main", "commit", hex));
        else
                printf("project %s: branch main at %s\n", name, hex);
        return 0;
}

int cmd_project_list(cli_ctx *ctx) {
        lfs_project_info *projects;
        size_t n;
        int r = cli_open_home(ctx);
        if (r < 0 || (r = lfs_project_list(ctx->home, &projects, &n, &ctx->err)) < 0)
                return r;
        json_t *out = json_array();
        for (size_t i = 0; i < n; i++) {
                json_t *branches = json_array();
                for (size_t j = 0; j < projects[i].n_branches; j++)
                        json_array_append_new(branches, json_string(projects[i].branches[j]));
                json_array_append_new(out, json_pack("{s:s, s:o, s:I}", "project", projects[i].project,
                                                     "branches", branches, "sandboxes",
                                                     (json_int_t)projects[i].sandboxes));
        }
        if (ctx->json) {
                cli_print_json(out);
        } else {
                _cleanup_free_ char *home = lfs_quote(lfs_home_path(ctx->home), LFS_QUOTE_ENTRY);
                if (n == 0)
                        printf("no projects in %s; make one with 'layerfs project init NAME'\n", home);
                else
                        printf("%-24s %-10s %s\n", "PROJECT", "SANDBOXES", "BRANCHES");
                for (size_t i = 0; i < n; i++) {
                        printf("%-24s %-10zu ", projects[i].project, projects[i].sandboxes);
                        for (size_t j = 0; j < projects[i].n_branches; j++)
                                printf("%s%s", j ? " " : "", projects[i].branches[j]);
                        putchar('\n');
                }
                json_decref(out);
        }
        lfs_project_list_free(projects, n);
        return 0;
}

int cmd_project_verify(cli_ctx *ctx) {
        uint64_t checked;
        int r = cli_open_store(ctx);
        if (r < 0 || (r = lfs_store_verify(ctx->store, &checked, &ctx->err)) < 0)
                return r;
        if (ctx->json)
                cli_print_json(json_pack("{s:s, s:b, s:I}", "project", lfs_store_project(ctx->store), "ok",
                                         1, "objects", (json_int_t)checked));
        else
                printf("project %s: ok, %llu objects checked\n", lfs_store_project(ctx->store),
                       (unsigned long long)checked);
        return 0;
}

static const char *plural(uint64_t n) {
        return n == 1 ? "" : "s";
}

int cmd_project_gc(cli_ctx *ctx) {
        lfs_gc_options options = { .dry_run = cli_flag(ctx, "dry-run") };
        const char *below = cli_option(ctx, "repack-below");
        uint64_t percent = 0;
        /* Checked before the Store is opened: a bad value changes nothing. */
        if (below && lfs_parse_whole("--repack-below", below, 1, 100, &percent, &ctx->err) < 0)
                return -EINVAL;
        options.repack_below = (unsigned)percent;
        lfs_gc_result res;
        int r = cli_open_store(ctx);
        if (r < 0 || (r = lfs_store_gc(ctx->store, &options, &res, &ctx->err)) < 0)
                return r;
        cli_end_progress(ctx);
        const char *project = lfs_store_project(ctx->store);
        unsigned threshold = options.repack_below ? options.repack_below : LFS_GC_REPACK_BELOW;
        if (ctx->json) {
                json_t *packs = json_array();
                for (size_t i = 0; i < res.n_packs; i++)
                        json_array_append_new(
                                packs, json_pack("{s:s, s:I, s:I, s:s}", "pack", res.packs[i].name, "size",
                                                 (json_int_t)res.packs[i].size, "live",
                                                 (json_int_t)res.packs[i].live, "action",
                                                 res.packs[i].action == LFS_GC_PACK_REMOVED ? "removed"
                                                                                            : "rewritten"));
                cli_print_json(json_pack(
                        "{s:s, s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:o}", "project",
                        project, "dry_run", options.dry_run, "commits", (json_int_t)res.commits, "trees",
                        (json_int_t)res.trees, "database_bytes", (json_int_t)res.database_bytes,
                        "packed_blobs", (json_int_t)res.packed_blobs, "loose_objects",
                        (json_int_t)res.loose_objects, "leftovers", (json_int_t)res.leftovers, "stale_pins",
                        (json_int_t)res.stale_pins, "pins", (json_int_t)res.pins, "bytes",
                        (json_int_t)res.bytes, "repack_below", (json_int_t)threshold, "vacuumed",
                        res.vacuumed, "packs", packs));
        } else {
                const char *verb = options.dry_run ? "would remove" : "removed";
                printf("project %s: %s %llu commit%s, %llu tree%s, %llu packed blob%s, %llu loose object%s, "
                       "%llu leftover%s of killed writers; %s %llu bytes on disk\n",
                       project, verb, (unsigned long long)res.commits, plural(res.commits),
                       (unsigned long long)res.trees, plural(res.trees),
                       (unsigned long long)res.packed_blobs, plural(res.packed_blobs),
                       (unsigned long long)res.loose_objects, plural(res.loose_objects),
                       (unsigned long long)res.leftovers, plural(res.leftovers),
                       options.dry_run ? "would free" : "freed", (unsigned long long)res.bytes);
                for (size_t i = 0; i < res.n_packs; i++) {
                        const lfs_gc_pack *p = &res.packs[i];
                        _cleanup_free_ char *name = lfs_quote(p->name, LFS_QUOTE_INLINE);
                        if (p->action == LFS_GC_PACK_REMOVED)
                                printf("  pack %s: nothing live, %s\n", name,
                                       options.dry_run ? "would go" : "removed");
                        else
                                printf("  pack %s: %llu of %llu bytes live (under %u%%), %s\n", name,
                                       (unsigned long long)p->live, (unsigned long long)p->size, threshold,
                                       options.dry_run ? "would be rewritten" : "rewritten");
                }
                if (res.pins)
                        printf("  kept what %llu mounted Workspace%s need%s (their base commits)\n",
                               (unsigned long long)res.pins, plural(res.pins), res.pins == 1 ? "s" : "");
        }
        lfs_gc_result_done(&res);
        return 0;
}
