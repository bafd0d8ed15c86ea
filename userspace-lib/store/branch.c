/* SPDX-License-Identifier: MIT */
/* The branch calls of the public API. */
#include <ctype.h>
#include <fcntl.h>

#include "store.h"

static bool looks_like_commit(const char *ref) {
        size_t len = strlen(ref);
        if (len < 4 || len > LFS_HEX_LEN)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!isxdigit((unsigned char)ref[i]))
                        return false;
        return true;
}

static int resolve_commit_prefix(lfs_store *s, const char *ref, lfs_id *ret, bool *ret_found,
                                 lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "SELECT id FROM commits WHERE hex(id) LIKE ? LIMIT 2", -1, &st,
                               NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "look up a commit");
        _cleanup_free_ char *pattern = xasprintf("%s%%", ref);
        for (char *p = pattern; *p; p++)
                *p = (char)toupper((unsigned char)*p);
        sqlite3_bind_text(st, 1, pattern, -1, SQLITE_STATIC);
        int found = 0, rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (sqlite3_column_bytes(st, 0) == LFS_ID_LEN)
                        memcpy(ret->bytes, sqlite3_column_blob(st, 0), LFS_ID_LEN);
                found++;
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
                return lfs_db_fail(s, err, "look up a commit");
        if (found > 1)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "commit id prefix '%s' is ambiguous; give more characters", ref);
        *ret_found = found == 1;
        return 0;
}

int lfs_store_resolve(lfs_store *s, const char *ref, lfs_id *ret_commit, lfs_error **err) {
        if (!ref || !*ref)
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "give a branch name or a commit id");
        int r;
        if (lfs_check_branch_name(ref, NULL) == 0) {
                r = lfs_db_get_branch(s, ref, ret_commit, err);
                if (r != -ENOENT)
                        return r;
        }
        if (looks_like_commit(ref)) {
                bool found = false;
                r = resolve_commit_prefix(s, ref, ret_commit, &found, err);
                if (r < 0 || found)
                        return r;
        }
        return lfs_fail(err, LFS_NO_SUCH_BRANCH, ENOENT,
                        "project '%s' has no branch or commit '%s'; 'layerfs branch list' shows its "
                        "branches",
                        s->project, ref);
}

int lfs_branch_create(lfs_store *s, const char *name, const char *from, lfs_id *ret_commit,
                      lfs_error **err) {
        /* Held: from may be a commit no branch reaches, which a gc would remove meanwhile. */
        _cleanup_store_hold_ lfs_store *held = NULL;
        lfs_id commit;
        int r = lfs_check_branch_name(name, err);
        if (r < 0 || (r = lfs_store_hold_scoped(s, &held, err)) < 0 ||
            (r = lfs_store_resolve(s, from ? from : "main", &commit, err)) < 0 ||
            (r = lfs_db_cas_branch(s, name, NULL, &commit, err)) < 0)
                return r;
        if (ret_commit)
                *ret_commit = commit;
        return 0;
}

void lfs_branch_list_free(lfs_branch_info *branches, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(branches[i].name);
        free(branches);
}

int lfs_branch_list(lfs_store *s, lfs_branch_info **ret_branches, size_t *ret_n, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "SELECT name, commit_id FROM branches ORDER BY name", -1, &st, NULL) !=
            SQLITE_OK)
                return lfs_db_fail(s, err, "list branches");
        lfs_branch_info *out = NULL;
        size_t n = 0, cap = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (sqlite3_column_bytes(st, 1) != LFS_ID_LEN)
                        continue;
                GROW(out, cap, n + 1);
                out[n].name = xstrdup((const char *)sqlite3_column_text(st, 0));
                memcpy(out[n].commit.bytes, sqlite3_column_blob(st, 1), LFS_ID_LEN);
                n++;
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) {
                lfs_branch_list_free(out, n);
                return lfs_db_fail(s, err, "list branches");
        }
        *ret_branches = out;
        *ret_n = n;
        return 0;
}

int lfs_store_delete_branch(lfs_store *s, const char *name, lfs_branch_guard_fn guard, void *userdata,
                            lfs_id *ret_commit, lfs_error **err) {
        lfs_id head;
        int r = lfs_check_branch_name(name, err);
        if (r < 0 || (r = lfs_db_begin(s, err)) < 0)
                return r;
        if ((r = lfs_branch_head(s, name, &head, err)) < 0 ||
            (guard && (r = guard(userdata, name, err)) < 0))
                goto fail;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "DELETE FROM branches WHERE name=?", -1, &st, NULL) != SQLITE_OK) {
                r = lfs_db_fail(s, err, "delete a branch");
                goto fail;
        }
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        r = sqlite3_step(st) == SQLITE_DONE ? 0 : lfs_db_fail(s, err, "delete a branch");
        sqlite3_finalize(st);
        if (r < 0 || (r = lfs_store_count_delete(s, err)) < 0 || (r = lfs_db_commit(s, err)) < 0)
                goto fail;
        if (ret_commit)
                *ret_commit = head;
        return 0;
fail:
        lfs_db_rollback(s);
        return r;
}

int lfs_branch_move(lfs_store *s, const char *branch, const lfs_id *expected, const lfs_id *to,
                    lfs_error **err) {
        _cleanup_store_hold_ lfs_store *held = NULL; /* to may be a commit no branch reaches */
        lfs_id head;
        lfs_commit_info c;
        int r = lfs_store_hold_scoped(s, &held, err);
        if (r < 0 || (r = lfs_branch_head(s, branch, &head, err)) < 0 ||
            (r = lfs_db_get_commit(s, to, &c, err)) < 0)
                return r;
        lfs_commit_info_done(&c);
        return lfs_db_cas_branch(s, branch, expected, to, err);
}

int lfs_branch_log(lfs_store *s, const char *name, size_t limit, lfs_commit_info **ret_commits,
                   size_t *ret_n, lfs_error **err) {
        lfs_id id;
        int r = lfs_store_resolve(s, name, &id, err);
        if (r < 0)
                return r;
        lfs_commit_info *out = NULL;
        size_t n = 0, cap = 0;
        for (;;) {
                if (limit && n >= limit)
                        break;
                GROW(out, cap, n + 1);
                if ((r = lfs_db_get_commit(s, &id, &out[n], err)) < 0)
                        break;
                n++;
                if (!out[n - 1].n_parents)
                        break;
                id = out[n - 1].parents[0];
        }
        if (r < 0) {
                lfs_commit_info_free(out, n);
                return r;
        }
        *ret_commits = out;
        *ret_n = n;
        return 0;
}

static int tree_of(lfs_store *s, const char *ref, lfs_id *ret, lfs_error **err) {
        lfs_id id;
        lfs_commit_info c;
        int r = lfs_store_resolve(s, ref, &id, err);
        if (r < 0 || (r = lfs_db_get_commit(s, &id, &c, err)) < 0)
                return r;
        *ret = c.tree;
        lfs_commit_info_done(&c);
        return 0;
}

int lfs_branch_diff(lfs_store *s, const char *a, const char *b, lfs_change **ret_changes, size_t *ret_n,
                    lfs_error **err) {
        lfs_id ta, tb;
        lfs_change_list out;
        int r = tree_of(s, a, &ta, err);
        if (r < 0 || (r = tree_of(s, b, &tb, err)) < 0 || (r = lfs_tree_diff(s, &ta, &tb, &out, err)) < 0)
                return r;
        *ret_changes = out.items;
        *ret_n = out.n;
        return 0;
}

static int merge_held(lfs_store *s, const char *from, const char *into, lfs_merge_result *ret,
                      lfs_error **err) {
        lfs_id theirs, ours;
        int r = lfs_store_resolve(s, from, &theirs, err);
        if (r < 0 || (r = lfs_branch_head(s, into, &ours, err)) < 0)
                return r;
        if (!strcmp(from, into))
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "cannot merge branch '%s' into itself; name two different branches", into);
        lfs_merge_result result = { .commit = ours };
        /* The fast forward is asked first, the more common case. Either walk reads no
         * further down than the generation of the commit asked about (merge.c). Two
         * different commits cannot each be the other's ancestor, so the order changes no
         * answer. */
        bool ff = false, contained = lfs_id_eq(&theirs, &ours);
        if (!contained && (r = lfs_is_ancestor(s, &ours, &theirs, &ff, err)) < 0)
                return r;
        if (!contained && !ff && (r = lfs_is_ancestor(s, &theirs, &ours, &contained, err)) < 0)
                return r;
        if (contained) {
                result.up_to_date = 1;
                *ret = result;
                return 0;
        }
        if (ff) {
                if ((r = lfs_db_cas_branch(s, into, &ours, &theirs, err)) < 0)
                        return r;
                result.commit = theirs;
                result.fast_forward = 1;
                *ret = result;
                return 0;
        }
        lfs_id base_commit, base_tree = *lfs_empty_tree_id(), merged;
        bool have_base;
        lfs_commit_info co = { 0 }, ct = { 0 }, cb = { 0 };
        if ((r = lfs_merge_base(s, &ours, &theirs, &base_commit, &have_base, err)) < 0)
                return r;
        if ((r = lfs_db_get_commit(s, &ours, &co, err)) < 0 ||
            (r = lfs_db_get_commit(s, &theirs, &ct, err)) < 0)
                goto out;
        if (have_base) {
                if ((r = lfs_db_get_commit(s, &base_commit, &cb, err)) < 0)
                        goto out;
                base_tree = cb.tree;
        }
        lfs_tree_rows rows = { 0 };
        lfs_blob_writer *w = lfs_blob_writer_new(s);
        r = lfs_merge_trees(s, &base_tree, &co.tree, &ct.tree, &rows, &merged, err);
        if (r == 0) {
                lfs_id parents[2] = { ours, theirs };
                _cleanup_free_ char *message = xasprintf("Merge %s into %s", from, into);
                r = lfs_record_commit(s, w, &rows, into, &ours, &merged, parents, 2, message, &result.commit,
                                      err);
        }
        lfs_blob_writer_free(w);
        lfs_tree_rows_done(&rows);
        if (r == 0)
                *ret = result;
out:
        lfs_commit_info_done(&co);
        lfs_commit_info_done(&ct);
        lfs_commit_info_done(&cb);
        return r;
}

int lfs_branch_merge(lfs_store *s, const char *from, const char *into, lfs_merge_result *ret,
                     lfs_error **err) {
        _cleanup_store_hold_ lfs_store *held = NULL; /* from may be a commit no branch reaches */
        int r = lfs_store_hold_scoped(s, &held, err);
        return r < 0 ? r : merge_held(s, from, into, ret, err);
}
