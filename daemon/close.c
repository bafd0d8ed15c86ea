/* SPDX-License-Identifier: MIT */
/* The Sandbox's end, from inside: sandbox.close and the idle close. */
#include <dirent.h>
#include <libgen.h>

#include "cgroup.h"
#include "daemon.h"
#include "log.h"
#include "records.h"
#include "reply.h"
#include "teardown.h"

/* Ends every process the Sandbox started, however it detached, also those that a FUSE
 * server of the Sandbox's own holds (lfs_sandbox_end_processes): the daemon steps out of
 * the Sandbox's cgroup into LayerFS's root and kills the Sandbox's whole subtree. Where
 * the daemon cannot step out (a delegated root with controllers), each command leaf is
 * killed instead and the library removes the rest after the daemon exits. */
static int end_commands(daemon_state *d, char **ret_why) {
        _cleanup_free_ char *root = xstrdup(d->cgroup);
        int r = lfs_cgroup_enter(dirname(root), 0);
        if (r == 0)
                return lfs_sandbox_end_processes(d->cgroup, 10000, ret_why);
        log_line("cannot leave %s (%s): ending each command's cgroup instead", d->cgroup, strerror(-r));
        DIR *dir = opendir(d->cgroup);
        struct dirent *de;
        r = 0;
        while (dir && (de = readdir(dir)))
                if (!strncmp(de->d_name, "cmd-", 4)) {
                        _cleanup_free_ char *leaf = xasprintf("%s/%s", d->cgroup, de->d_name), *why = NULL;
                        int k = lfs_sandbox_end_processes(leaf, 10000, &why);
                        if (k < 0 && r == 0) {
                                r = k;
                                *ret_why = TAKE_PTR(why);
                        }
                }
        if (dir)
                closedir(dir);
        return r;
}

/* Everything the Sandbox made goes: processes, mounts, cgroups, directory, and then its
 * record; the same for `sandbox close` and for the idle close. With d->lock held. When
 * something stays, the record stays too (left to whoever takes it over: the closing
 * library, or the next reclaim) and *ret_why says what stayed. */
int close_sandbox(daemon_state *d, const char *why, char **ret_why) {
        log_line("closing sandbox %d (%s)", d->number, why);
        d->closing = true;
        wake_followers(d); /* followers of sandbox events end */
        /* Whatever reads a Workspace stops now; then nothing holds them. */
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        ws_cancel(d->ws[i].fs);
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        wait_ws_released(d, &d->ws[i]);
        /* A command checked before closing began must be in its leaf before the leaves
         * are ended, or it could start after and outlive the Sandbox. */
        while (d->starting_commands)
                pthread_cond_wait(&d->started_cond, &d->lock);
        _cleanup_free_ char *left = NULL;
        int r = end_commands(d, &left);
        if (r == 0) {
                for (int i = 0; i < MAX_WORKSPACES; i++)
                        if (d->ws[i].active)
                                stop_mount(&d->ws[i], true);
                r = lfs_sandbox_remove(d->cgroup, d->dir, &left);
        }
        if (r == 0) {
                r = lfs_sandbox_record_delete(d->home, d->project, d->number, d->instance);
                if (r < 0)
                        left = xasprintf("cannot delete its record: %s", strerror(-r));
        } else {
                log_line("sandbox %d could not be removed completely: %s; its record stays", d->number,
                         left ? left : strerror(-r));
                lfs_sandbox_record_release(d->home, d->project, d->number, d->instance);
        }
        d->closed = true;
        wake_main_loop(d);
        if (r < 0 && ret_why)
                *ret_why = TAKE_PTR(left);
        return r;
}

/* Called with d->lock held (dispatch); without --force, releases it for the dirty checks.
 * With --force it cancels whatever reads a Workspace (teardown). */
json_t *call_close(daemon_state *d, bool force) {
        bool dirty[MAX_WORKSPACES];
        if (!force && !check_dirty(d, dirty))
                return error_json(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        for (int i = 0; i < MAX_WORKSPACES && !force; i++)
                if (d->ws[i].active && dirty[i])
                        return error_json(LFS_DIRTY,
                                          "the Workspace of '%s' in sandbox %d has uncommitted changes; "
                                          "commit them, or close with --force to drop them",
                                          d->ws[i].branch, d->number);
        _cleanup_free_ char *left = NULL;
        int r = close_sandbox(d, force ? "sandbox close --force" : "sandbox close", &left);
        if (r < 0)
                return error_json(LFS_FAILED,
                                  "sandbox %d could not be removed completely: %s; its record stays so that "
                                  "'layerfs runtime reclaim' can finish once that is fixed",
                                  d->number, left ? left : strerror(-r));
        return ok_json(NULL);
}
