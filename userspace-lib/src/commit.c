/* SPDX-License-Identifier: MIT */
/* Recording commits: a directory (branch commit), or a set of changed paths against a
 * base (the Workspace's commit). Objects are made durable first; then one transaction
 * inserts the trees and the commit and moves the head by compare-and-swap. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "json_path.h"
#include "store.h"

void lfs_commit_prepare(lfs_commit_info *c, const lfs_id *tree, const lfs_id *parents, size_t n_parents,
                        const char *message) {
        *c = (lfs_commit_info){
                .tree = *tree,
                .n_parents = n_parents,
                .author = lfs_default_author(),
                .time = (int64_t)time(NULL),
                .message = xstrdup(message),
        };
        for (size_t i = 0; i < n_parents; i++)
                c->parents[i] = parents[i];
        lfs_commit_compute_id(c);
}

int lfs_record_commits(lfs_store *s, lfs_blob_writer *w, lfs_tree_rows *rows, const char *branch,
                       const lfs_id *expected, const lfs_commit_info *commits, size_t n, lfs_error **err) {
        int r = lfs_blob_writer_publish(w, err);
        if (r < 0 || (r = lfs_db_begin(s, err)) < 0)
                return r;
        r = lfs_blob_writer_insert_rows(w, err);
        if (r == 0)
                r = lfs_tree_rows_insert(s, rows, err);
        for (size_t i = 0; i < n && r == 0; i++)
                r = lfs_db_put_commit(s, &commits[i], err);
        if (r == 0)
                r = lfs_db_cas_branch(s, branch, expected, &commits[n - 1].id, err);
        if (r < 0) {
                lfs_db_rollback(s);
                return r;
        }
        if ((r = lfs_db_commit(s, err)) == 0)
                lfs_blob_writer_committed(w);
        return r;
}

int lfs_record_commit(lfs_store *s, lfs_blob_writer *w, lfs_tree_rows *rows, const char *branch,
                      const lfs_id *expected, const lfs_id *tree, const lfs_id *parents, size_t n_parents,
                      const char *message, lfs_id *ret_commit, lfs_error **err) {
        lfs_commit_info c;
        lfs_commit_prepare(&c, tree, parents, n_parents, message);
        int r = lfs_record_commits(s, w, rows, branch, expected, &c, 1, err);
        if (r == 0)
                *ret_commit = c.id;
        lfs_commit_info_done(&c);
        return r;
}

static int check_message(const char *message, lfs_error **err) {
        if (!message || !*message)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "a commit needs a message; give one with -m MESSAGE");
        /* Commits are shown as JSON (log --json), which carries only UTF-8 text. */
        if (!lfs_is_utf8(message))
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the commit message is not UTF-8 text");
        return 0;
}

int lfs_branch_commit(lfs_store *s, const char *branch, const char *from_dir, const char *message,
                      lfs_id *ret_commit, lfs_error **err) {
        lfs_id head;
        lfs_commit_info parent;
        int r = check_message(message, err);
        if (r < 0 || (r = lfs_branch_head(s, branch, &head, err)) < 0)
                return r;
        if (!from_dir)
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "give the directory to record with --from DIR");
        if ((r = lfs_db_get_commit(s, &head, &parent, err)) < 0)
                return r;
        lfs_blob_writer *w = lfs_blob_writer_new(s);
        lfs_tree_rows rows = { 0 };
        lfs_id tree;
        r = lfs_snapshot_dir(s, w, from_dir, &parent.tree, &rows, &tree, err);
        if (r == 0 && lfs_id_eq(&tree, &parent.tree))
                *ret_commit = head; /* nothing changed: no empty commit */
        else if (r == 0)
                r = lfs_record_commit(s, w, &rows, branch, &head, &tree, &head, 1, message, ret_commit, err);
        lfs_tree_rows_done(&rows);
        lfs_blob_writer_free(w);
        lfs_commit_info_done(&parent);
        return r;
}

/* ---- a set of changed paths applied to a tree ---- */

/* Orders paths so that everything below "a" directly follows "a": '/' sorts first. */
static int path_cmp(const char *a, const char *b) {
        for (;; a++, b++) {
                unsigned ca = *a == '/' ? 1 : (unsigned char)*a;
                unsigned cb = *b == '/' ? 1 : (unsigned char)*b;
                if (ca != cb || !ca)
                        return (int)ca - (int)cb;
        }
}

typedef struct prepared_change {
        const lfs_path_change *change;
        lfs_id id;
        uint64_t size;
} prepared_change;

static int prepared_cmp(const void *a, const void *b) {
        const prepared_change *x = a, *y = b;
        int c = path_cmp(x->change->path, y->change->path);
        /* Equal paths keep their given order: the later change wins. */
        return c ? c : (x->change < y->change ? -1 : x->change > y->change);
}

static bool change_path_valid(const char *path) {
        if (!path || !*path || *path == '/')
                return false;
        for (const char *p = path; *p;) {
                const char *slash = strchr(p, '/');
                size_t len = slash ? (size_t)(slash - p) : strlen(p);
                if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                if (!slash)
                        break;
                p = slash + 1;
                if (!*p)
                        return false;
        }
        return true;
}

static void tree_remove(lfs_tree *t, const char *name) {
        for (size_t i = 0; i < t->n; i++)
                if (!strcmp(t->entries[i].name, name)) {
                        free(t->entries[i].name);
                        memmove(&t->entries[i], &t->entries[i + 1], (t->n - i - 1) * sizeof(lfs_entry));
                        t->n--;
                        return;
                }
}

static void tree_set(lfs_tree *t, const char *name, uint32_t mode, uint64_t size, const lfs_id *id) {
        tree_remove(t, name);
        lfs_tree_add(t, xstrdup(name), mode, size, id);
        lfs_tree_sort(t);
}

static int apply_dir(lfs_store *s, const lfs_id *tree_id, prepared_change *pc, size_t n, size_t prefix_len,
                     lfs_tree_rows *rows, lfs_id *ret_id, lfs_error **err) {
        lfs_tree t = { 0 };
        int r = lfs_db_get_tree(s, tree_id ? tree_id : lfs_empty_tree_id(), &t, err);
        size_t i = 0;
        while (r == 0 && i < n) {
                const char *rest = pc[i].change->path + prefix_len;
                size_t len = strcspn(rest, "/");
                _cleanup_free_ char *name = strndup(rest, len);
                size_t j = i;
                /* The changes of this name itself come first (path_cmp), then those below it. */
                for (; j < n; j++) {
                        const char *other = pc[j].change->path + prefix_len;
                        if (strncmp(other, rest, len) || (other[len] && other[len] != '/'))
                                break;
                }
                size_t below = i;
                for (; below < j && !pc[below].change->path[prefix_len + len]; below++) {
                        const lfs_path_change *c = pc[below].change;
                        const lfs_entry *e = lfs_tree_find(&t, name);
                        if (c->type == LFS_ENTRY_NONE)
                                tree_remove(&t, name);
                        else if (c->type == LFS_ENTRY_DIR) {
                                if (!e || !lfs_mode_is_dir(e->mode))
                                        tree_set(&t, name, LFS_MODE_DIR, 0, lfs_empty_tree_id());
                        } else {
                                uint32_t mode = c->type == LFS_ENTRY_EXEC      ? LFS_MODE_EXEC
                                                : c->type == LFS_ENTRY_SYMLINK ? LFS_MODE_LINK
                                                                               : LFS_MODE_FILE;
                                tree_set(&t, name, mode, pc[below].size, &pc[below].id);
                        }
                }
                if (below < j) {
                        const lfs_entry *e = lfs_tree_find(&t, name);
                        const lfs_id *sub = e && lfs_mode_is_dir(e->mode) ? &e->id : NULL;
                        lfs_id sub_id;
                        r = apply_dir(s, sub, pc + below, j - below, prefix_len + len + 1, rows, &sub_id,
                                      err);
                        if (r == 0)
                                tree_set(&t, name, LFS_MODE_DIR, 0, &sub_id);
                }
                i = j;
        }
        if (r == 0)
                lfs_tree_store(&t, rows, ret_id);
        lfs_tree_done(&t);
        return r;
}

/* Hashes and stores the contents that the changes name. */
static int prepare_changes(lfs_store *s, lfs_blob_writer *w, const lfs_path_change *changes, size_t n,
                           prepared_change *pc, lfs_error **err) {
        _cleanup_free_ lfs_blob_source *sources = xcalloc(n, sizeof(*sources));
        size_t n_sources = 0;
        for (size_t i = 0; i < n; i++) {
                const lfs_path_change *c = &changes[i];
                pc[i] = (prepared_change){ .change = c };
                if (!change_path_valid(c->path) || c->type > LFS_ENTRY_DIR)
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "change path '%s' is not valid: give a relative path without "
                                        "empty, '.' or '..' parts",
                                        c->path ? c->path : "");
                if (c->blob && c->type != LFS_ENTRY_DIR && c->type != LFS_ENTRY_NONE) {
                        if (!lfs_object_exists(s, c->blob))
                                return lfs_fail(err, LFS_INVALID_INPUT, ENOENT,
                                                "the blob given for %s is not in the Store", c->path);
                        pc[i].id = *c->blob;
                        pc[i].size = c->blob_size;
                } else if (c->type == LFS_ENTRY_SYMLINK) {
                        if (!c->source)
                                return lfs_fail(err, LFS_INVALID_INPUT, 0, "symlink %s has no target",
                                                c->path);
                        pc[i].size = strlen(c->source);
                        int r = lfs_blob_writer_add_data(w, c->source, pc[i].size, &pc[i].id, err);
                        if (r < 0)
                                return r;
                } else if (c->type == LFS_ENTRY_FILE || c->type == LFS_ENTRY_EXEC) {
                        struct stat st;
                        if (!c->source || lstat(c->source, &st) < 0 || !S_ISREG(st.st_mode))
                                return lfs_fail(err, LFS_INVALID_INPUT, c->source ? errno : 0,
                                                "the contents for %s must come from a regular file; "
                                                "'%s' is not one",
                                                c->path, c->source ? c->source : "(none)");
                        pc[i].size = (uint64_t)st.st_size;
                        sources[n_sources++] = (lfs_blob_source){
                                .dirfd = AT_FDCWD, .path = c->source, .size = pc[i].size, .ret_id = &pc[i].id
                        };
                }
        }
        return lfs_blob_writer_add_files(w, sources, n_sources, err);
}

int lfs_store_commit_changes(lfs_store *s, const char *branch, const lfs_id *base,
                             const lfs_path_change *changes, size_t n, const char *message,
                             lfs_id *ret_commit, int *ret_merged, lfs_error **err) {
        lfs_id head, tree, result;
        _cleanup_free_ char *merge_message = NULL;
        lfs_commit_info base_commit = { 0 }, head_commit = { 0 };
        int merged = 0;
        int r = check_message(message, err);
        if (r < 0 || (r = lfs_branch_head(s, branch, &head, err)) < 0 ||
            (r = lfs_db_get_commit(s, base, &base_commit, err)) < 0)
                return r;
        lfs_blob_writer *w = lfs_blob_writer_new(s);
        lfs_tree_rows rows = { 0 };
        prepared_change *pc = xcalloc(n, sizeof(*pc));
        r = prepare_changes(s, w, changes, n, pc, err);
        if (r == 0) {
                qsort(pc, n, sizeof(*pc), prepared_cmp);
                r = apply_dir(s, &base_commit.tree, pc, n, 0, &rows, &tree, err);
        }
        if (r < 0)
                goto out;
        if (lfs_id_eq(&tree, &base_commit.tree)) {
                result = head; /* nothing to record, whether or not the branch moved */
                goto done;
        }
        if (lfs_id_eq(&head, base)) {
                r = lfs_record_commit(s, w, &rows, branch, &head, &tree, base, 1, message, &result, err);
                goto done;
        }
        /* The branch moved since base: record our commit, then merge it into the head.
         * The merge reads our trees from the database, so they go in first (durable
         * blobs, then trees; unreachable until a commit names them). */
        lfs_id merged_tree;
        if ((r = lfs_blob_writer_publish(w, err)) < 0 || (r = lfs_db_begin(s, err)) < 0)
                goto out;
        if ((r = lfs_tree_rows_insert(s, &rows, err)) < 0) {
                lfs_db_rollback(s);
                goto out;
        }
        if ((r = lfs_db_commit(s, err)) < 0)
                goto out;
        /* Three-way against the nearest common ancestor of the head and our base: that is
         * the base itself while the branch only moved forward, but a branch deleted and
         * made again elsewhere no longer descends from it, and merging against the base
         * would drop what the Workspace committed before (unrelated: the empty tree). */
        lfs_id ancestor, ancestor_tree = *lfs_empty_tree_id();
        bool have_ancestor = false;
        if ((r = lfs_db_get_commit(s, &head, &head_commit, err)) < 0 ||
            (r = lfs_merge_base(s, &head, base, &ancestor, &have_ancestor, err)) < 0)
                goto out;
        if (have_ancestor) {
                lfs_commit_info a = { 0 };
                if ((r = lfs_db_get_commit(s, &ancestor, &a, err)) < 0)
                        goto out;
                ancestor_tree = a.tree;
                lfs_commit_info_done(&a);
        }
        if ((r = lfs_merge_trees(s, &ancestor_tree, &head_commit.tree, &tree, &rows, &merged_tree, err)) < 0)
                goto out;
        merge_message = xasprintf("Merge workspace commit into %s\n\n%s", branch, message);
        lfs_commit_info pair[2];
        lfs_commit_prepare(&pair[0], &tree, base, 1, message);
        lfs_id parents[2] = { head, pair[0].id };
        lfs_commit_prepare(&pair[1], &merged_tree, parents, 2, merge_message);
        r = lfs_record_commits(s, w, &rows, branch, &head, pair, 2, err);
        result = pair[1].id;
        lfs_commit_info_done(&pair[0]);
        lfs_commit_info_done(&pair[1]);
        merged = 1;
done:
        if (r == 0) {
                *ret_commit = result;
                if (ret_merged)
                        *ret_merged = merged;
        }
out:
        free(pc);
        lfs_tree_rows_done(&rows);
        lfs_blob_writer_free(w);
        lfs_commit_info_done(&base_commit);
        lfs_commit_info_done(&head_commit);
        return r;
}
