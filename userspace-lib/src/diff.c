/* SPDX-License-Identifier: MIT */
/* Changed paths between two trees: files, symlinks and empty directories. Subtrees with
 * the same id are skipped whole, so a diff costs O(changed paths x depth). */
#include "store.h"

const char *lfs_change_kind_name(lfs_change_kind kind) {
        switch (kind) {
        case LFS_ADDED:
                return "added";
        case LFS_MODIFIED:
                return "modified";
        case LFS_DELETED:
                return "deleted";
        }
        return "modified";
}

void lfs_change_list_free(lfs_change *changes, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(changes[i].path);
        free(changes);
}

static void push_change(lfs_change_list *out, char *path, lfs_change_kind kind) {
        GROW(out->items, out->cap, out->n + 1);
        out->items[out->n++] = (lfs_change){ .path = path, .kind = kind };
}

/* Every leaf below a directory (or the directory itself when it is empty). */
static int list_leaves(lfs_store *s, const lfs_id *tree_id, const char *path, lfs_change_kind kind,
                       lfs_change_list *out, lfs_error **err) {
        lfs_tree t;
        int r = lfs_db_get_tree(s, tree_id, &t, err);
        if (r < 0)
                return r;
        if (t.n == 0)
                push_change(out, xstrdup(path), kind);
        for (size_t i = 0; i < t.n && r == 0; i++) {
                lfs_entry *e = &t.entries[i];
                char *sub = path_join(path, e->name);
                if (lfs_mode_is_dir(e->mode)) {
                        r = list_leaves(s, &e->id, sub, kind, out, err);
                        free(sub);
                } else {
                        push_change(out, sub, kind);
                }
        }
        lfs_tree_done(&t);
        return r;
}

static int report_side(lfs_store *s, const lfs_entry *e, const char *path, lfs_change_kind kind,
                       lfs_change_list *out, lfs_error **err) {
        if (lfs_mode_is_dir(e->mode))
                return list_leaves(s, &e->id, path, kind, out, err);
        push_change(out, xstrdup(path), kind);
        return 0;
}

static int diff_dir(lfs_store *s, const lfs_id *a_id, const lfs_id *b_id, const char *prefix,
                    lfs_change_list *out, lfs_error **err) {
        lfs_tree a = { 0 }, b = { 0 };
        int r = lfs_db_get_tree(s, a_id, &a, err);
        if (r == 0)
                r = lfs_db_get_tree(s, b_id, &b, err);
        size_t i = 0, j = 0;
        while (r == 0 && (i < a.n || j < b.n)) {
                int c = i == a.n ? 1 : j == b.n ? -1 : strcmp(a.entries[i].name, b.entries[j].name);
                _cleanup_free_ char *path =
                        path_join(prefix, c <= 0 ? a.entries[i].name : b.entries[j].name);
                const lfs_entry *ea = c <= 0 ? &a.entries[i++] : NULL;
                const lfs_entry *eb = c >= 0 ? &b.entries[j++] : NULL;
                if (ea && eb && ea->mode == eb->mode && lfs_id_eq(&ea->id, &eb->id))
                        continue;
                if (ea && eb && lfs_mode_is_dir(ea->mode) && lfs_mode_is_dir(eb->mode)) {
                        r = diff_dir(s, &ea->id, &eb->id, path, out, err);
                } else if (ea && eb && !lfs_mode_is_dir(ea->mode) && !lfs_mode_is_dir(eb->mode)) {
                        push_change(out, TAKE_PTR(path), LFS_MODIFIED);
                } else {
                        if (ea)
                                r = report_side(s, ea, path, LFS_DELETED, out, err);
                        if (r == 0 && eb)
                                r = report_side(s, eb, path, LFS_ADDED, out, err);
                }
        }
        lfs_tree_done(&a);
        lfs_tree_done(&b);
        return r;
}

int lfs_tree_diff(lfs_store *s, const lfs_id *a, const lfs_id *b, lfs_change_list *ret, lfs_error **err) {
        lfs_change_list out = { 0 };
        int r = lfs_id_eq(a, b) ? 0 : diff_dir(s, a, b, "", &out, err);
        if (r < 0) {
                lfs_change_list_free(out.items, out.n);
                return r;
        }
        *ret = out;
        return 0;
}
