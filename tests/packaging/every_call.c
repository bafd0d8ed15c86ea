/* SPDX-License-Identifier: MIT */
/* every_call SRC WORK: calls every function of layerfs.h (tests/packaging/test_install.sh
 * checks that none is missing here), built with nothing but `pkg-config --cflags --libs
 * layerfs` against the installed shared library. As root, with the home of
 * $LAYERFS_HOME or the default one: imports SRC as project "every", branches, commits,
 * merges, then runs a Sandbox (create, mount, exec, a background process, events,
 * commit, unmount, close), which starts the installed layerfs-daemon. WORK must be a new
 * directory for its scratch files. Prints "every_call: ok" or why it stopped. */
#include <layerfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lfs_error *err;

static void check(int r, const char *what) {
        if (r >= 0)
                return;
        fprintf(stderr, "every_call: %s failed (%d): %s: %s\n", what, r,
                err ? lfs_code_name(err->code) : "?", err ? err->message : "no error");
        exit(1);
}

static void expect(int ok, const char *what) {
        if (!ok) {
                fprintf(stderr, "every_call: expected %s\n", what);
                exit(1);
        }
}

static void progress(void *userdata, const char *phase, uint64_t done, uint64_t total) {
        (void)phase, (void)done, (void)total;
        ++*(int *)userdata;
}

static int on_event(void *userdata, const char *json) {
        expect(strstr(json, "\"event\"") != NULL, "an event object");
        ++*(int *)userdata;
        return 0;
}

static int same(const lfs_id *a, const lfs_id *b) {
        return memcmp(a->bytes, b->bytes, LFS_ID_LEN) == 0;
}

int main(int argc, char **argv) {
        if (argc != 3) {
                fprintf(stderr, "usage: every_call SRC WORK\n");
                return 2;
        }
        const char *src = argv[1], *work = argv[2];
        char exported[4096], file[4096];
        snprintf(exported, sizeof(exported), "%s/export", work);
        snprintf(file, sizeof(file), "%s/export/every.txt", work);
        lfs_home *home = NULL;
        lfs_store *store = NULL;
        int progressed = 0;

        /* ---- the Store ---- */
        check(lfs_home_open(NULL, &home, &err), "lfs_home_open");
        expect(lfs_home_path(home)[0] == '/', "an absolute home path");
        lfs_home_set_progress(home, progress, &progressed);
        lfs_id first, side, resolved, more, moved;
        check(lfs_project_init(home, "every", src, &first, &err), "lfs_project_init");
        lfs_project_info *projects;
        size_t n;
        check(lfs_project_list(home, &projects, &n, &err), "lfs_project_list");
        int found = 0;
        for (size_t i = 0; i < n; i++)
                found |= !strcmp(projects[i].project, "every");
        expect(found, "project every in the list");
        lfs_project_list_free(projects, n);
        check(lfs_store_open(home, "every", &store, &err), "lfs_store_open");
        expect(!strcmp(lfs_store_project(store), "every"), "the store of project every");

        check(lfs_branch_create(store, "side", "main", NULL, &err), "lfs_branch_create");
        lfs_branch_info *branches;
        check(lfs_branch_list(store, &branches, &n, &err), "lfs_branch_list");
        expect(n == 2, "two branches");
        lfs_branch_list_free(branches, n);
        check(lfs_branch_export(store, "main", exported, &err), "lfs_branch_export");
        FILE *f = fopen(file, "w");
        expect(f && fputs("every call\n", f) >= 0 && fclose(f) == 0, "every.txt written");
        check(lfs_branch_commit(store, "side", exported, "Add every.txt", &side, &err), "lfs_branch_commit");
        lfs_change *changes;
        check(lfs_branch_diff(store, "main", "side", &changes, &n, &err), "lfs_branch_diff");
        expect(n == 1 && !strcmp(changes[0].path, "every.txt") &&
                       !strcmp(lfs_change_kind_name(changes[0].kind), "added"),
               "every.txt added from main to side");
        lfs_change_list_free(changes, n);
        check(lfs_store_resolve(store, "side", &resolved, &err), "lfs_store_resolve");
        expect(same(&resolved, &side), "side resolved to its commit");
        lfs_path_change change = { .path = "more.txt", .type = LFS_ENTRY_FILE, .source = file };
        int merged = -1;
        check(lfs_store_commit_changes(store, "side", &side, &change, 1, "Add more.txt", &more, &merged,
                                       &err),
              "lfs_store_commit_changes");
        expect(merged == 0, "a commit on side's head, no merge");
        lfs_commit_info *log;
        check(lfs_branch_log(store, "side", 0, &log, &n, &err), "lfs_branch_log");
        expect(n == 3 && same(&log[0].id, &more) && log[0].n_parents == 1, "side's three commits");
        lfs_commit_info_free(log, n);
        lfs_merge_result result;
        check(lfs_branch_merge(store, "side", "main", &result, &err), "lfs_branch_merge");
        expect(result.fast_forward && same(&result.commit, &more), "main fast-forwarded to side");
        check(lfs_branch_create(store, "old", NULL, &moved, &err), "lfs_branch_create old");
        check(lfs_branch_move(store, "old", &moved, &first, &err), "lfs_branch_move");
        check(lfs_branch_delete(store, "old", 0, NULL, &err), "lfs_branch_delete");
        uint64_t objects = 0;
        check(lfs_store_verify(store, &objects, &err), "lfs_store_verify");
        expect(objects > 0, "objects checked");
        /* Everything is reachable from main or side: gc removes nothing. */
        lfs_gc_options gc_options = { .dry_run = 1, .repack_below = LFS_GC_REPACK_BELOW };
        lfs_gc_result gc;
        check(lfs_store_gc(store, &gc_options, &gc, &err), "lfs_store_gc");
        expect(gc.commits == 0 && gc.n_packs == 0, "nothing unreachable");
        lfs_gc_result_done(&gc);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&more, hex);
        expect(strlen(hex) == LFS_HEX_LEN, "a whole hex id");

        /* ---- the runtime ---- */
        lfs_runtime_info *info;
        check(lfs_runtime_status(home, &info, &err), "lfs_runtime_status");
        expect(info->n_platforms == 8, "eight platforms");
        lfs_runtime_info_free(info);
        lfs_reclaimed *reclaimed;
        check(lfs_runtime_reclaim(home, &reclaimed, &n, &err), "lfs_runtime_reclaim");
        lfs_reclaimed_free(reclaimed, n);

        /* ---- a Sandbox: this starts the installed layerfs-daemon ---- */
        int sandbox = 0;
        check(lfs_sandbox_create(home, "every", NULL, NULL, &sandbox, &err), "lfs_sandbox_create");
        lfs_sandbox_info *sandboxes;
        check(lfs_sandbox_list(home, &sandboxes, &n, &err), "lfs_sandbox_list");
        found = 0;
        for (size_t i = 0; i < n; i++)
                found |= sandboxes[i].sandbox == sandbox && !strcmp(sandboxes[i].project, "every");
        expect(found, "the Sandbox in the list");
        lfs_sandbox_info_free(sandboxes, n);
        lfs_sandbox_details *details;
        check(lfs_sandbox_list_details(home, &details, &n, &err), "lfs_sandbox_list_details");
        found = 0;
        for (size_t i = 0; i < n; i++)
                found |= details[i].sandbox == sandbox && details[i].answered &&
                         !strcmp(details[i].project, "every");
        expect(found, "the Sandbox in the detailed list, its daemon answering");
        lfs_sandbox_details_free(details, n);
        char *path = NULL;
        check(lfs_workspace_mount(home, "every", sandbox, "main", &path, &err), "lfs_workspace_mount");
        free(path);
        lfs_workspace_info *workspaces;
        check(lfs_sandbox_list_workspaces(home, "every", sandbox, &workspaces, &n, &err),
              "lfs_sandbox_list_workspaces");
        expect(n == 1 && !strcmp(workspaces[0].branch, "main") && !workspaces[0].dirty,
               "main mounted, clean");
        lfs_workspace_info_free(workspaces, n);
        const char *const make[] = { "sh", "-c", "echo made > made.txt" };
        lfs_exec_options options = { .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = 2 };
        int status = -1;
        check(lfs_workspace_exec(home, "every", sandbox, "main", make, 3, &options, &status, &err),
              "lfs_workspace_exec");
        expect(status == 0, "the command exited 0");
        check(lfs_workspace_status(home, "every", sandbox, "main", &changes, &n, &err),
              "lfs_workspace_status");
        expect(n == 1 && !strcmp(changes[0].path, "made.txt"), "made.txt changed in the Workspace");
        lfs_change_list_free(changes, n);
        const char *const sleeper[] = { "sleep", "600" };
        int pid = 0;
        char *process_log = NULL;
        check(lfs_process_start(home, "every", sandbox, "main", sleeper, 2, &options, &pid, &process_log,
                                &err),
              "lfs_process_start");
        free(process_log);
        lfs_process_info *processes;
        check(lfs_process_list(home, "every", sandbox, &processes, &n, &err), "lfs_process_list");
        found = 0;
        for (size_t i = 0; i < n; i++)
                found |= processes[i].pid == pid && processes[i].running;
        expect(found, "the background process running");
        lfs_process_info_free(processes, n);
        check(lfs_process_kill(home, "every", sandbox, pid, &err), "lfs_process_kill");
        int events = 0;
        char *watcher = NULL;
        check(lfs_sandbox_events(home, "every", sandbox, 0, on_event, &events, &watcher, &err),
              "lfs_sandbox_events");
        expect(events > 0 && watcher && *watcher, "events and the watcher's name");
        free(watcher);
        lfs_id recorded;
        check(lfs_workspace_commit(home, "every", sandbox, "main", "Made in a Sandbox", &recorded, &merged,
                                   &err),
              "lfs_workspace_commit");
        check(lfs_workspace_unmount(home, "every", sandbox, "main", 0, &err), "lfs_workspace_unmount");
        char *text = NULL;
        check(lfs_sandbox_log(home, "every", sandbox, 10, &text, &err), "lfs_sandbox_log");
        expect(text && *text, "the daemon's log");
        free(text);
        check(lfs_sandbox_close(home, "every", sandbox, 0, &err), "lfs_sandbox_close");
        /* With limits: a disk budget every host can keep; made ahead in a pool of one, which
         * the create takes (and leaves empty: nothing fills it again). */
        lfs_sandbox_options create_options = { .disk = "16M" };
        setenv("LAYERFS_POOL", "1", 1);
        check(lfs_sandbox_pool_fill(home, "every", &create_options, -1, &err), "lfs_sandbox_pool_fill");
        check(lfs_sandbox_create_with(home, "every", &create_options, &sandbox, &err),
              "lfs_sandbox_create_with");
        unsetenv("LAYERFS_POOL");
        lfs_sandbox_limits limits;
        check(lfs_sandbox_get_limits(home, "every", sandbox, &limits, &err), "lfs_sandbox_get_limits");
        expect(limits.disk == 16u << 20 && limits.memory == 0, "the Sandbox's limits");
        /* Its network: the runtime's default (native: host; namespaces: none). */
        lfs_sandbox_network network;
        check(lfs_sandbox_get_network(home, "every", sandbox, &network, &err), "lfs_sandbox_get_network");
        expect((!strcmp(network.mode, "host") || !strcmp(network.mode, "none")) && network.prefix == 0,
               "the Sandbox's network");
        check(lfs_sandbox_close(home, "every", sandbox, 0, &err), "lfs_sandbox_close");

        /* ---- a refusal ---- */
        lfs_store *none = NULL;
        expect(lfs_store_open(home, "no-such-project", &none, &err) < 0 && err &&
                       !strcmp(lfs_code_name(err->code), "NoSuchProject"),
               "NoSuchProject for a missing project");
        lfs_error_free(err);
        err = NULL;

        lfs_store_close(store);
        lfs_home_close(home);
        printf("every_call: ok (%d progress reports, %d events, main at %s)\n", progressed, events, hex);
        return 0;
}
