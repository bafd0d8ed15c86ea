/* SPDX-License-Identifier: MIT */
/* layerfs project ... */
#include "cli.h"

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
