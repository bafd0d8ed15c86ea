/* SPDX-License-Identifier: MIT */
/* Recording commits: a directory (branch commit), or a set of changed paths against a
 * base (the Workspace's commit). Objects are made durable first; then one transaction
 * inserts the trees and the commit and moves the head by compare-and-swap. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "json_path.h"
#include "fault.h"
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
        lfs_fault_point("record-start"); /* every object written, none published */
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
        lfs_fault_point("record-transaction"); /* the head moved in a transaction not committed */
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

int lfs_check_commit_message(const char *message, lfs_error **err) {
        if (!message || !*message)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "a commit needs a message; give one with -m MESSAGE");
        /* Commits are shown as JSON (log --json), which carries only UTF-8 text. */
        if (!lfs_is_utf8(message))
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the commit message is not UTF-8 text");
        return 0;
}

static int branch_commit_held(lfs_store *s, const char *branch, const char *from_dir, const char *message,
                              lfs_id *ret_commit, lfs_error **err) {
        lfs_id head;
        lfs_commit_info parent;
        int r = lfs_branch_head(s, branch, &head, err);
        if (r < 0)
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

int lfs_branch_commit(lfs_store *s, const char *branch, const char *from_dir, const char *message,
                      lfs_id *ret_commit, lfs_error **err) {
        /* Held from the first look at what the Store has: gc.c. */
        _cleanup_store_hold_ lfs_store *held = NULL;
        int r = lfs_check_commit_message(message, err);
        if (r < 0 || (r = lfs_store_hold_scoped(s, &held, err)) < 0)
                return r;
        return branch_commit_held(s, branch, from_dir, message, ret_commit, err);
}

/* ---- a set of changed paths applied to a tree ---- */

/* Orders paths so that everything below "a" directly follows "a", and the names of one
 * directory come in bytewise order: the end of a path sorts first, then '/', then each
 * byte by its value. */
static int path_cmp(const char *a, const char *b) {
        for (;; a++, b++) {
                unsigned ca = *a == '/' ? 1 : *a ? (unsigned char)*a + 1u : 0;
                unsigned cb = *b == '/' ? 1 : *b ? (unsigned char)*b + 1u : 0;
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

/* A directory the changes reach, while they are applied: its tree as it was, and what
 * the changes set in it, in name order (mode 0: the name goes). The changes are sorted
 * so that each directory's come together, below its own (path_cmp), so the directories
 * on the way down to the current change are a stack, and each one's tree is built once,
 * when the changes leave it: no re-sort per change. */
typedef struct apply_level {
        lfs_tree base;
        lfs_tree updates;
        const char *prefix; /* a change path that starts with this directory's path and '/' */
        size_t prefix_len; /* that path's length with its '/' (0: the root) */
} apply_level;

/* What name is in the directory now: its last update, or else its entry in the base. */
static const lfs_entry *current_entry(const apply_level *l, const char *name) {
        if (l->updates.n && !strcmp(l->updates.entries[l->updates.n - 1].name, name))
                return l->updates.entries[l->updates.n - 1].mode ? &l->updates.entries[l->updates.n - 1]
                                                                 : NULL;
        return lfs_tree_find(&l->base, name);
}

/* Names come in order, so an update of the name updated last replaces that one. */
static void set_entry(apply_level *l, const char *name, uint32_t mode, uint64_t size, const lfs_id *id) {
        lfs_tree *u = &l->updates;
        if (u->n && !strcmp(u->entries[u->n - 1].name, name)) {
                u->entries[u->n - 1].mode = mode;
                u->entries[u->n - 1].size = size;
                u->entries[u->n - 1].id = *id;
                return;
        }
        lfs_tree_add(u, xstrdup(name), mode, size, id);
}

/* The directory's tree: its base and its updates merged, both in name order. */
static void close_level(apply_level *l, lfs_tree_rows *rows, lfs_id *ret_id) {
        lfs_tree out = { 0 };
        size_t i = 0, j = 0;
        while (i < l->base.n || j < l->updates.n) {
                int c = i == l->base.n      ? 1
                        : j == l->updates.n ? -1
                                            : strcmp(l->base.entries[i].name, l->updates.entries[j].name);
                const lfs_entry *e = c < 0 ? &l->base.entries[i] : &l->updates.entries[j];
                i += c <= 0;
                j += c >= 0;
                if (e->mode)
                        lfs_tree_add(&out, xstrdup(e->name), e->mode, e->size, &e->id);
        }
        lfs_tree_store(&out, rows, ret_id);
        lfs_tree_done(&out);
        lfs_tree_done(&l->base);
        lfs_tree_done(&l->updates);
}

/* The changes left the directory on top: its tree goes into its parent's updates. */
static void leave_level(apply_level *stack, size_t *depth, lfs_tree_rows *rows) {
        apply_level *done = &stack[--*depth], *parent = &stack[*depth - 1];
        _cleanup_free_ char *name =
                strndup(done->prefix + parent->prefix_len, done->prefix_len - parent->prefix_len - 1);
        lfs_id id;
        close_level(done, rows, &id);
        set_entry(parent, name, LFS_MODE_DIR, 0, &id);
}

static int apply_changes(lfs_store *s, const lfs_id *tree_id, const prepared_change *pc, size_t n,
                         lfs_tree_rows *rows, lfs_id *ret_id, lfs_error **err) {
        apply_level *stack = NULL;
        size_t depth = 0, cap = 0;
        GROW(stack, cap, 1);
        stack[0] = (apply_level){ 0 };
        int r = lfs_db_get_tree(s, tree_id ? tree_id : lfs_empty_tree_id(), &stack[0].base, err);
        depth = 1;
        for (size_t i = 0; i < n && r == 0; i++) {
                const lfs_path_change *c = pc[i].change;
                const char *path = c->path;
                /* Leave the directories this change is not in. */
                while (depth > 1 && strncmp(path, stack[depth - 1].prefix, stack[depth - 1].prefix_len))
                        leave_level(stack, &depth, rows);
                /* Go down to its directory. */
                const char *rest = path + stack[depth - 1].prefix_len, *slash;
                while (r == 0 && (slash = strchr(rest, '/'))) {
                        _cleanup_free_ char *name = strndup(rest, (size_t)(slash - rest));
                        const lfs_entry *e = current_entry(&stack[depth - 1], name);
                        const lfs_id *sub = e && lfs_mode_is_dir(e->mode) ? &e->id : lfs_empty_tree_id();
                        GROW(stack, cap, depth + 1);
                        stack[depth] =
                                (apply_level){ .prefix = path, .prefix_len = (size_t)(slash - path) + 1 };
                        r = lfs_db_get_tree(s, sub, &stack[depth].base, err);
                        depth++;
                        rest = slash + 1;
                }
                apply_level *dir = &stack[depth - 1];
                if (r < 0)
                        break;
                if (c->type == LFS_ENTRY_NONE) {
                        if (current_entry(dir, rest))
                                set_entry(dir, rest, 0, 0, lfs_empty_tree_id());
                } else if (c->type == LFS_ENTRY_DIR) {
                        const lfs_entry *e = current_entry(dir, rest);
                        if (!e || !lfs_mode_is_dir(e->mode))
                                set_entry(dir, rest, LFS_MODE_DIR, 0, lfs_empty_tree_id());
                } else {
                        uint32_t mode = c->type == LFS_ENTRY_EXEC      ? LFS_MODE_EXEC
                                        : c->type == LFS_ENTRY_SYMLINK ? LFS_MODE_LINK
                                                                       : LFS_MODE_FILE;
                        set_entry(dir, rest, mode, pc[i].size, &pc[i].id);
                }
        }
        while (r == 0 && depth > 1)
                leave_level(stack, &depth, rows);
        if (r == 0)
                close_level(&stack[0], rows, ret_id);
        for (size_t k = r == 0 ? 1 : 0; k < depth; k++) {
                lfs_tree_done(&stack[k].base);
                lfs_tree_done(&stack[k].updates);
        }
        free(stack);
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
                if (strlen(c->path) > LFS_PATH_MAX) {
                        _cleanup_free_ char *shown = lfs_path_excerpt(c->path);
                        return lfs_fail(
                                err, LFS_INVALID_INPUT, ENAMETOOLONG,
                                "change path '%s' has %zu bytes; the Store records paths of at most " LFS_PATH_MAX_TEXT
                                " bytes (PATH_MAX)",
                                shown, strlen(c->path));
                }
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
                        sources[n_sources++] = (lfs_blob_source){ .dirfd = AT_FDCWD,
                                                                  .path = c->source,
                                                                  .follow = true, /* the caller's own path */
                                                                  .size = pc[i].size,
                                                                  .ret_id = &pc[i].id };
                }
        }
        return lfs_blob_writer_add_files(w, sources, n_sources, err);
}

/* One try of lfs_store_commit_tree against the head as it is now: -ESTALE if another
 * commit moved the branch before this one could. */
static int commit_tree_at_head(lfs_store *s, lfs_blob_writer *w, lfs_tree_rows *rows, const char *branch,
                               const lfs_id *base, const lfs_id *tree, const char *message,
                               lfs_id *ret_commit, int *ret_merged, lfs_error **err) {
        lfs_id head, result;
        _cleanup_free_ char *merge_message = NULL;
        lfs_commit_info base_commit = { 0 }, head_commit = { 0 };
        int merged = 0;
        int r = lfs_check_commit_message(message, err);
        if (r < 0 || (r = lfs_branch_head(s, branch, &head, err)) < 0 ||
            (r = lfs_db_get_commit(s, base, &base_commit, err)) < 0)
                return r;
        if (lfs_id_eq(tree, &base_commit.tree)) {
                result = head; /* nothing to record, whether or not the branch moved */
                goto done;
        }
        if (lfs_id_eq(&head, base)) {
                r = lfs_record_commit(s, w, rows, branch, &head, tree, base, 1, message, &result, err);
                goto done;
        }
        /* The branch moved since base: record our commit, then merge it into the head.
         * The merge reads our trees from the database, so they go in first (durable
         * blobs, then trees; unreachable until a commit names them). */
        lfs_id merged_tree;
        if ((r = lfs_blob_writer_publish(w, err)) < 0 || (r = lfs_db_begin(s, err)) < 0)
                goto out;
        if ((r = lfs_tree_rows_insert(s, rows, err)) < 0) {
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
        if ((r = lfs_merge_trees(s, &ancestor_tree, &head_commit.tree, tree, rows, &merged_tree, err)) < 0)
                goto out;
        merge_message = xasprintf("Merge workspace commit into %s\n\n%s", branch, message);
        lfs_commit_info pair[2];
        lfs_commit_prepare(&pair[0], tree, base, 1, message);
        lfs_id parents[2] = { head, pair[0].id };
        lfs_commit_prepare(&pair[1], &merged_tree, parents, 2, merge_message);
        r = lfs_record_commits(s, w, rows, branch, &head, pair, 2, err);
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
        lfs_commit_info_done(&base_commit);
        lfs_commit_info_done(&head_commit);
        return r;
}

int lfs_store_commit_tree(lfs_store *s, lfs_blob_writer *w, lfs_tree_rows *rows, const char *branch,
                          const lfs_id *base, const lfs_id *tree, const char *message, lfs_id *ret_commit,
                          int *ret_merged, lfs_error **err) {
        /* A commit that lands between reading the head and moving it (a compare-and-swap,
         * lfs_db_cas_branch) is merged with, as one that landed before: the writer never sees
         * the race. Each retry follows another writer's commit, so together they progress.
         * What the failed try wrote is rolled back or ignored when written again. */
        int r;
        while ((r = commit_tree_at_head(s, w, rows, branch, base, tree, message, ret_commit, ret_merged,
                                        err)) == -ESTALE) {
                if (err) {
                        lfs_error_free(*err);
                        *err = NULL;
                }
        }
        return r;
}

static int commit_changes_held(lfs_store *s, const char *branch, const lfs_id *base,
                               const lfs_path_change *changes, size_t n, const char *message,
                               lfs_id *ret_commit, int *ret_merged, lfs_error **err) {
        lfs_id head, tree;
        lfs_commit_info base_commit = { 0 };
        int r;
        if ((r = lfs_branch_head(s, branch, &head, err)) < 0 ||
            (r = lfs_db_get_commit(s, base, &base_commit, err)) < 0)
                return r;
        lfs_blob_writer *w = lfs_blob_writer_new(s);
        lfs_tree_rows rows = { 0 };
        prepared_change *pc = xcalloc(n, sizeof(*pc));
        r = prepare_changes(s, w, changes, n, pc, err);
        if (r == 0) {
                qsort(pc, n, sizeof(*pc), prepared_cmp);
                r = apply_changes(s, &base_commit.tree, pc, n, &rows, &tree, err);
        }
        if (r == 0)
                r = lfs_store_commit_tree(s, w, &rows, branch, base, &tree, message, ret_commit, ret_merged,
                                          err);
        free(pc);
        lfs_tree_rows_done(&rows);
        lfs_blob_writer_free(w);
        lfs_commit_info_done(&base_commit);
        return r;
}

int lfs_store_commit_changes(lfs_store *s, const char *branch, const lfs_id *base,
                             const lfs_path_change *changes, size_t n, const char *message,
                             lfs_id *ret_commit, int *ret_merged, lfs_error **err) {
        /* Held from the first look at what the Store has: gc.c. */
        _cleanup_store_hold_ lfs_store *held = NULL;
        int r = lfs_check_commit_message(message, err);
        if (r < 0 || (r = lfs_store_hold_scoped(s, &held, err)) < 0)
                return r;
        return commit_changes_held(s, branch, base, changes, n, message, ret_commit, ret_merged, err);
}
