/* SPDX-License-Identifier: MIT */
/* Three-way merge per path. A side that left a path as it was in the base takes the
 * other side's version; both sides changing it differently, or a change against a
 * deletion, or a file against a directory, is a conflict. All conflicts are collected
 * before anything is reported, and nothing is written unless there are none. */
#include "store.h"

typedef struct path_list {
        char **items;
        size_t n, cap;
} path_list;

static void path_list_add(path_list *l, char *path) {
        GROW(l->items, l->cap, l->n + 1);
        l->items[l->n++] = path;
}

static bool same_entry(const lfs_entry *a, const lfs_entry *b) {
        if (!a || !b)
                return a == b;
        return a->mode == b->mode && lfs_id_eq(&a->id, &b->id);
}

static bool dir_or_absent(const lfs_entry *e) {
        return !e || lfs_mode_is_dir(e->mode);
}

static const lfs_entry *next_of(const lfs_tree *t, size_t *i, const char *name) {
        if (*i < t->n && !strcmp(t->entries[*i].name, name))
                return &t->entries[(*i)++];
        return NULL;
}

static const char *smallest_name(const lfs_tree *t[3], const size_t idx[3]) {
        const char *min = NULL;
        for (int k = 0; k < 3; k++)
                if (idx[k] < t[k]->n && (!min || strcmp(t[k]->entries[idx[k]].name, min) < 0))
                        min = t[k]->entries[idx[k]].name;
        return min;
}

static int merge_dir(lfs_store *s, const lfs_id *base_id, const lfs_id *ours_id, const lfs_id *theirs_id,
                     const char *prefix, lfs_tree_rows *rows, path_list *conflicts, lfs_id *ret_id,
                     lfs_error **err) {
        const lfs_id *ids[3] = { base_id, ours_id, theirs_id };
        lfs_tree trees[3] = { { 0 } };
        lfs_tree result = { 0 };
        int r = 0;
        for (int k = 0; k < 3 && r == 0; k++)
                r = lfs_db_get_tree(s, ids[k] ? ids[k] : lfs_empty_tree_id(), &trees[k], err);
        const lfs_tree *t[3] = { &trees[0], &trees[1], &trees[2] };
        size_t idx[3] = { 0, 0, 0 };
        const char *name;
        while (r == 0 && (name = smallest_name(t, idx))) {
                _cleanup_free_ char *key = xstrdup(name);
                const lfs_entry *b = next_of(t[0], &idx[0], key);
                const lfs_entry *o = next_of(t[1], &idx[1], key);
                const lfs_entry *th = next_of(t[2], &idx[2], key);
                const lfs_entry *take = NULL;
                if (same_entry(o, th) || same_entry(b, th))
                        take = o;
                else if (same_entry(b, o))
                        take = th;
                else if (dir_or_absent(o) && dir_or_absent(th)) {
                        _cleanup_free_ char *path = path_join(prefix, key);
                        const lfs_id *bsub = b && lfs_mode_is_dir(b->mode) ? &b->id : NULL;
                        lfs_id sub;
                        size_t before = conflicts->n;
                        r = merge_dir(s, bsub, o ? &o->id : NULL, th ? &th->id : NULL, path, rows, conflicts,
                                      &sub, err);
                        /* A directory that one side deleted and that merged to nothing goes. */
                        bool gone = (!o || !th) && lfs_id_eq(&sub, lfs_empty_tree_id());
                        if (r == 0 && conflicts->n == before && !gone)
                                lfs_tree_add(&result, xstrdup(key), LFS_MODE_DIR, 0, &sub);
                        continue;
                } else {
                        path_list_add(conflicts, path_join(prefix, key));
                        continue;
                }
                if (take)
                        lfs_tree_add(&result, xstrdup(take->name), take->mode, take->size, &take->id);
        }
        if (r == 0)
                lfs_tree_store(&result, rows, ret_id);
        lfs_tree_done(&result);
        for (int k = 0; k < 3; k++)
                lfs_tree_done(&trees[k]);
        return r;
}

int lfs_merge_trees(lfs_store *s, const lfs_id *base, const lfs_id *ours, const lfs_id *theirs,
                    lfs_tree_rows *rows, lfs_id *ret_tree, lfs_error **err) {
        path_list conflicts = { 0 };
        lfs_tree_rows mine = { 0 };
        lfs_id tree;
        int r = merge_dir(s, base, ours, theirs, "", &mine, &conflicts, &tree, err);
        if (r == 0 && conflicts.n) {
                size_t n = conflicts.n;
                r = lfs_fail_conflict(err, conflicts.items, n,
                                      "%zu path%s changed on both sides: %s%s; nothing was changed; "
                                      "resolve them on one branch and merge again",
                                      n, n == 1 ? "" : "s", conflicts.items[0],
                                      n > 1 ? " and more (see the list)" : "");
                conflicts = (path_list){ 0 };
        }
        for (size_t i = 0; i < conflicts.n; i++)
                free(conflicts.items[i]);
        free(conflicts.items);
        if (r < 0) {
                lfs_tree_rows_done(&mine);
                return r;
        }
        for (size_t i = 0; i < mine.n; i++)
                lfs_tree_rows_add(rows, &mine.items[i].id, TAKE_PTR(mine.items[i].data), mine.items[i].len);
        lfs_tree_rows_done(&mine);
        *ret_tree = tree;
        return 0;
}

int lfs_for_each_ancestor(lfs_store *s, const lfs_id *start, lfs_idset *seen, lfs_commit_visit_fn visit,
                          void *userdata, lfs_error **err) {
        lfs_id *stack = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        GROW(stack, cap, 1);
        stack[n++] = *start;
        while (n && r == 0) {
                lfs_id id = stack[--n];
                if (!lfs_idset_add(seen, &id))
                        continue;
                lfs_commit_info c;
                if ((r = lfs_db_get_commit(s, &id, &c, err)) < 0)
                        break;
                if (visit)
                        r = visit(userdata, &c, err);
                GROW(stack, cap, n + 2);
                for (size_t i = 0; i < c.n_parents; i++)
                        stack[n++] = c.parents[i];
                lfs_commit_info_done(&c);
        }
        free(stack);
        return r;
}

static int mark_ancestors(lfs_store *s, const lfs_id *start, lfs_idset *set, lfs_error **err) {
        return lfs_for_each_ancestor(s, start, set, NULL, NULL, err);
}

int lfs_is_ancestor(lfs_store *s, const lfs_id *a, const lfs_id *b, bool *ret, lfs_error **err) {
        lfs_idset set = { 0 };
        int r = mark_ancestors(s, b, &set, err);
        if (r == 0)
                *ret = lfs_idset_has(&set, a);
        lfs_idset_done(&set);
        return r;
}

int lfs_merge_base(lfs_store *s, const lfs_id *a, const lfs_id *b, lfs_id *ret, bool *ret_found,
                   lfs_error **err) {
        lfs_idset of_a = { 0 }, seen = { 0 };
        int r = mark_ancestors(s, a, &of_a, err);
        /* Breadth first from b: the first ancestor of a met is the nearest common one. */
        lfs_id *queue = NULL;
        size_t head = 0, n = 0, cap = 0;
        bool found = false;
        GROW(queue, cap, 1);
        queue[n++] = *b;
        while (r == 0 && head < n && !found) {
                lfs_id id = queue[head++];
                if (!lfs_idset_add(&seen, &id))
                        continue;
                if (lfs_idset_has(&of_a, &id)) {
                        *ret = id;
                        found = true;
                        break;
                }
                lfs_commit_info c;
                r = lfs_db_get_commit(s, &id, &c, err);
                if (r < 0)
                        break;
                GROW(queue, cap, n + 2);
                for (size_t i = 0; i < c.n_parents; i++)
                        queue[n++] = c.parents[i];
                lfs_commit_info_done(&c);
        }
        free(queue);
        lfs_idset_done(&of_a);
        lfs_idset_done(&seen);
        if (r == 0)
                *ret_found = found;
        return r;
}
