/* SPDX-License-Identifier: MIT */
/* Checks a Store: SQLite's integrity check, then every object reachable from a branch
 * hashes to its name (commits, trees and blobs, each visited once), and each commit's
 * generation, where it has one, is 1 + its parents' highest. */
#include <fcntl.h>

#include "store.h"

typedef struct verify_walk {
        lfs_store *s;
        lfs_idset seen;
        uint64_t checked;
} verify_walk;

static int bad_object(lfs_store *s, const char *kind, const lfs_id *id, const char *why, lfs_error **err) {
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(id, hex);
        return lfs_fail(err, LFS_FAILED, EIO, "%s %s of project '%s' %s", kind, hex, s->project, why);
}

static int verify_blob(verify_walk *vw, const lfs_entry *e, lfs_error **err) {
        if (e->size <= LFS_PACK_MAX_BLOB) {
                /* Packed (or a small loose one): the read checks the id. */
                _cleanup_free_ char *data = NULL;
                int r = lfs_object_read_whole(vw->s, &e->id, e->size, &data, err);
                if (r == 0)
                        vw->checked++;
                return r;
        }
        _cleanup_close_ int fd = lfs_object_open(vw->s, &e->id, err);
        if (fd < 0)
                return fd;
        /* Its holes are hashed as the zeros they read as, without reading them. */
        lfs_id got;
        int r = lfs_stream_sparse(fd, e->size, -1, NULL, NULL, &got);
        if (r < 0 && r != -EIO)
                return bad_object(vw->s, "blob", &e->id, "cannot be read", err);
        if (r == -EIO || !lfs_id_eq(&got, &e->id))
                return bad_object(vw->s, "blob", &e->id, "does not hash to its name", err);
        vw->checked++;
        return 0;
}

/* A tree hashes to its name, and its count of subdirectories stored beside it (if any)
 * is its own; each of its blobs not checked yet hashes to its name too. */
static int verify_tree(void *userdata, const lfs_id *id, const lfs_tree *t, lfs_error **err) {
        verify_walk *vw = userdata;
        char *data;
        size_t len;
        lfs_id got;
        lfs_tree_serialize(t, &data, &len);
        lfs_sha256(data, len, &got);
        free(data);
        if (!lfs_id_eq(&got, id))
                return bad_object(vw->s, "tree", id, "does not hash to its name", err);
        vw->checked++;
        uint64_t stored;
        int r = lfs_db_stored_subdirs(vw->s, id, &stored, err);
        if (r == 0 && stored != lfs_tree_subdirs(t)) {
                _cleanup_free_ char *why = xasprintf(
                        "has %llu subdirectories stored beside it but holds %zu: table tree_subdirs is "
                        "damaged; deleting the tree's row there makes the Store count from the tree",
                        (unsigned long long)stored, lfs_tree_subdirs(t));
                return bad_object(vw->s, "tree", id, why, err);
        }
        if (r == -EBADMSG)
                return bad_object(vw->s, "tree", id,
                                  "has a count of subdirectories stored beside it that no directory can "
                                  "have: table tree_subdirs is damaged; deleting the tree's row there makes "
                                  "the Store count from the tree",
                                  err);
        if (r < 0 && r != -ENOENT)
                return r;
        r = 0;
        for (size_t i = 0; i < t->n && r == 0; i++) {
                const lfs_entry *e = &t->entries[i];
                if (!lfs_mode_is_dir(e->mode) && lfs_idset_add(&vw->seen, &e->id))
                        r = verify_blob(vw, e, err);
        }
        return r;
}

static int verify_commit(void *userdata, const lfs_commit_info *c, lfs_error **err) {
        verify_walk *vw = userdata;
        lfs_commit_info copy = *c;
        lfs_commit_compute_id(&copy);
        vw->checked++;
        if (!lfs_id_eq(&copy.id, &c->id))
                return bad_object(vw->s, "commit", &c->id, "does not hash to its name", err);
        int r = lfs_generation_check(vw->s, c, err);
        if (r < 0)
                return r;
        return lfs_for_each_tree(vw->s, &c->tree, &vw->seen, verify_tree, vw, err);
}

static int integrity_check(lfs_store *s, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "PRAGMA integrity_check", -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "check the database");
        int r = 0;
        if (sqlite3_step(st) != SQLITE_ROW)
                r = lfs_db_fail(s, err, "check the database");
        else if (strcmp((const char *)sqlite3_column_text(st, 0), "ok"))
                r = lfs_fail(err, LFS_FAILED, EIO, "the database of project '%s' is damaged: %s", s->project,
                             (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        return r;
}

int lfs_store_verify(lfs_store *s, uint64_t *ret_objects_checked, lfs_error **err) {
        int r = integrity_check(s, err);
        if (r < 0)
                return r;
        lfs_branch_info *branches;
        size_t n;
        if ((r = lfs_branch_list(s, &branches, &n, err)) < 0)
                return r;
        verify_walk vw = { .s = s };
        for (size_t i = 0; i < n && r == 0; i++)
                r = lfs_for_each_ancestor(s, &branches[i].commit, &vw.seen, verify_commit, &vw, err);
        lfs_branch_list_free(branches, n);
        lfs_idset_done(&vw.seen);
        if (r == 0 && ret_objects_checked)
                *ret_objects_checked = vw.checked;
        return r;
}
