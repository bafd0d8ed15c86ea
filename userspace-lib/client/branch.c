/* SPDX-License-Identifier: MIT */
/*
 * The branch call that must know the Sandboxes: delete. The Store deletes the row; this
 * file refuses to while a running Sandbox has the branch mounted as a Workspace.
 *
 * The race with a mount is closed by the Store's write lock. The delete holds it (BEGIN
 * IMMEDIATE) from before it looks for mount points to after the row is gone. A daemon's
 * mount makes its mount point <sandbox dir>/mnt/<branch> first and only then reads the
 * branch's head, under the same lock (lfs_branch_head_serial); it removes the mount
 * point only once unmounted. So either the mount read the head before the delete took
 * the lock, and then its mount point was there for the delete to see (Busy), or it reads
 * after the delete ended, and finds no branch (NoSuchBranch). A Sandbox whose daemon is
 * dead is not asked (its Workspaces died with it), nor one being closed (they are being
 * unmounted): only those 'project list_sandboxes' lists.
 */
#include <fcntl.h>

#include "client.h"
#include "names.h"

/* Whether the Sandbox's directory holds the branch's mount point: a Workspace mounted
 * there, or being mounted. Opened O_PATH: nothing asks the Workspace's FUSE server. */
static bool has_mount_point(const sandbox_record *rec, const char *key) {
        if (rec->dir_fd < 0)
                return false;
        _cleanup_close_ int mnt = lfs_open_beneath(rec->dir_fd, "mnt", O_PATH | O_DIRECTORY);
        if (mnt < 0)
                return false;
        _cleanup_close_ int fd = lfs_open_beneath(mnt, key, O_PATH);
        return fd >= 0;
}

/* Under the Store's write lock: Busy naming every running Sandbox that has the branch
 * mounted, with its Workspace's path. */
static int refuse_if_mounted(void *userdata, const char *name, lfs_error **err) {
        lfs_store *store = userdata;
        lfs_sandbox_info *live = NULL;
        size_t n_live = 0;
        int r = lfs_live_sandboxes(store->home, store->project, &live, &n_live, err);
        _cleanup_free_ char *key = lfs_branch_dir_name(name);
        char *where = NULL;
        size_t n_mounted = 0;
        int first = 0;
        for (size_t i = 0; i < n_live && r == 0; i++) {
                sandbox_record rec = { .dir_fd = -1 };
                if (lfs_sandbox_open(store->home, store->project, live[i].sandbox, &rec, NULL) < 0)
                        continue;
                if (lfs_record_alive(&rec) && has_mount_point(&rec, key)) {
                        char *more = xasprintf("%s%ssandbox %d (at %s/mnt/%s)", where ? where : "",
                                               where ? ", " : "", rec.number, rec.dir, key);
                        free(where);
                        where = more;
                        if (!n_mounted++)
                                first = rec.number;
                }
                lfs_record_done(&rec);
        }
        lfs_sandbox_info_free(live, n_live);
        if (r == 0 && n_mounted)
                r = lfs_fail(err, LFS_BUSY, EBUSY,
                             "branch '%s' is mounted as a Workspace in %s; unmount it there first "
                             "('layerfs workspace unmount %d %s'), or give --force to delete it anyway "
                             "(that Workspace's next commit is then refused until the branch is made "
                             "again)",
                             name, where, first, name);
        free(where);
        return r;
}

int lfs_branch_delete(lfs_store *store, const char *name, int force, lfs_id *ret_commit, lfs_error **err) {
        int r = lfs_check_branch_name(name, err);
        if (r < 0)
                return r;
        if (!force && !strcmp(name, "main"))
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "branch 'main' is project '%s''s main branch (new branches start from it); "
                                "give --force to delete it anyway",
                                store->project);
        return lfs_store_delete_branch(store, name, force ? NULL : refuse_if_mounted, store, ret_commit,
                                       err);
}
