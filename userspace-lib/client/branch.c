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
 * dead is not asked: its Workspaces died with it.
 */
#include <fcntl.h>

#include "client.h"
#include "names.h"

typedef struct mounted_in {
        const char *project;
        int *numbers;
        size_t n, cap;
} mounted_in;

static void live_of_project(void *userdata, sandbox_record *rec, const char *project, long long number,
                            lfs_error *why) {
        (void)project, (void)number, (void)why;
        mounted_in *m = userdata;
        if (!rec || strcmp(rec->project, m->project) || !lfs_record_alive(rec))
                return;
        GROW(m->numbers, m->cap, m->n + 1);
        m->numbers[m->n++] = rec->number;
}

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
        lfs_home *home = store->home;
        _cleanup_free_ char *records = xasprintf("%s/home.db", home->path);
        if (access(records, F_OK) < 0)
                return 0; /* no Sandbox was ever made in this home */
        mounted_in m = { .project = store->project };
        sqlite3 *db = NULL;
        int r = lfs_records_open(home, &db, err);
        if (r == 0)
                r = lfs_records_each(home, db, live_of_project, &m, err);
        sqlite3_close(db);
        _cleanup_free_ char *key = lfs_branch_dir_name(name);
        char *where = NULL;
        size_t n_mounted = 0;
        int first = 0;
        for (size_t i = 0; i < m.n && r == 0; i++) {
                sandbox_record rec = { .dir_fd = -1 };
                if (lfs_sandbox_open(home, m.project, m.numbers[i], &rec, NULL) < 0)
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
        free(m.numbers);
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
