/* SPDX-License-Identifier: MIT */
/* Three-way merge per path. A side that left a path as it was in the base takes the
 * other side's version (so a file deleted on one side and left alone on the other is
 * deleted); a file whose executable bit changed on one side and whose contents changed
 * on the other takes both, as git does; both sides changing the contents differently,
 * or a change against a deletion, or a file against a directory, is a conflict. There is
 * no rename detection: a rename is a deletion and an addition. All conflicts are collected
 * before anything is reported, and nothing is written unless there are none. The walk
 * keeps its own stack of directories, so a tree's depth never costs the C stack. */
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

static bool regular_file(const lfs_entry *e) {
        return e && (e->mode == LFS_MODE_FILE || e->mode == LFS_MODE_EXEC);
}

/* A file on all three sides that the two sides changed differently: its contents and its
 * executable bit merge three-way each on their own. The bit has two values, so it never
 * conflicts; false when the contents do. *ret borrows the name of one side. */
static bool merge_file_parts(const lfs_entry *b, const lfs_entry *o, const lfs_entry *th, lfs_entry *ret) {
        if (!regular_file(b) || !regular_file(o) || !regular_file(th))
                return false;
        const lfs_entry *contents = NULL;
        if (lfs_id_eq(&o->id, &th->id) || lfs_id_eq(&b->id, &th->id))
                contents = o;
        else if (lfs_id_eq(&b->id, &o->id))
                contents = th;
        if (!contents)
                return false;
        *ret = *contents;
        ret->mode = o->mode == b->mode ? th->mode : o->mode;
        return true;
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

/* A directory being merged: the three sides, the result so far, and what its parent
 * needs once it is done. The merge keeps a stack of these instead of recursing. */
typedef struct merge_level {
        lfs_tree trees[3]; /* base, ours, theirs */
        size_t idx[3];
        lfs_tree result;
        char *name; /* in the parent's result */
        bool one_side_gone; /* ours or theirs deleted it */
        size_t conflicts_before, path_len;
} merge_level;

static int merge_level_open(lfs_store *s, merge_level *l, const lfs_id *ids[3], lfs_error **err) {
        int r = 0;
        for (int k = 0; k < 3 && r == 0; k++)
                r = lfs_db_get_tree(s, ids[k] ? ids[k] : lfs_empty_tree_id(), &l->trees[k], err);
        return r;
}

static void merge_level_done(merge_level *l) {
        for (int k = 0; k < 3; k++)
                lfs_tree_done(&l->trees[k]);
        lfs_tree_done(&l->result);
        free(l->name);
}

static int merge_dir(lfs_store *s, const lfs_id *base_id, const lfs_id *ours_id, const lfs_id *theirs_id,
                     lfs_tree_rows *rows, path_list *conflicts, lfs_id *ret_id, lfs_error **err) {
        merge_level *stack = NULL;
        size_t n = 0, cap = 0;
        path_buf path = { 0 };
        GROW(stack, cap, 1);
        const lfs_id *root[3] = { base_id, ours_id, theirs_id };
        stack[0] = (merge_level){ 0 };
        int r = merge_level_open(s, &stack[0], root, err);
        n = 1;
        while (n && r == 0) {
                merge_level *top = &stack[n - 1];
                const lfs_tree *t[3] = { &top->trees[0], &top->trees[1], &top->trees[2] };
                const char *name = smallest_name(t, top->idx);
                if (!name) {
                        lfs_id id;
                        lfs_tree_store(&top->result, rows, &id);
                        if (n == 1) {
                                *ret_id = id;
                                merge_level_done(top);
                                n--;
                                break;
                        }
                        merge_level *parent = &stack[n - 2];
                        /* A directory that one side deleted and that merged to nothing goes. */
                        bool gone = top->one_side_gone && lfs_id_eq(&id, lfs_empty_tree_id());
                        if (conflicts->n == top->conflicts_before && !gone)
                                lfs_tree_add(&parent->result, TAKE_PTR(top->name), LFS_MODE_DIR, 0, &id);
                        path_buf_cut(&path, parent->path_len);
                        merge_level_done(top);
                        n--;
                        continue;
                }
                _cleanup_free_ char *key = xstrdup(name);
                const lfs_entry *b = next_of(t[0], &top->idx[0], key);
                const lfs_entry *o = next_of(t[1], &top->idx[1], key);
                const lfs_entry *th = next_of(t[2], &top->idx[2], key);
                const lfs_entry *take = NULL;
                lfs_entry both;
                if (same_entry(o, th) || same_entry(b, th))
                        take = o;
                else if (same_entry(b, o))
                        take = th;
                else if (merge_file_parts(b, o, th, &both))
                        take = &both;
                else if (dir_or_absent(o) && dir_or_absent(th)) {
                        const lfs_id *sub[3] = { b && lfs_mode_is_dir(b->mode) ? &b->id : NULL,
                                                 o ? &o->id : NULL, th ? &th->id : NULL };
                        path_buf_cut(&path, top->path_len);
                        path_buf_push(&path, key);
                        GROW(stack, cap, n + 1);
                        merge_level *child = &stack[n++];
                        *child = (merge_level){ .name = TAKE_PTR(key),
                                                .one_side_gone = !o || !th,
                                                .conflicts_before = conflicts->n,
                                                .path_len = path.len };
                        r = merge_level_open(s, child, sub, err);
                        continue;
                } else {
                        path_buf_cut(&path, top->path_len);
                        path_buf_push(&path, key);
                        path_list_add(conflicts, xstrdup(path.s));
                        continue;
                }
                if (take)
                        lfs_tree_add(&top->result, xstrdup(take->name), take->mode, take->size, &take->id);
        }
        for (size_t k = 0; k < n; k++)
                merge_level_done(&stack[k]);
        free(stack);
        path_buf_done(&path);
        return r;
}

int lfs_merge_trees(lfs_store *s, const lfs_id *base, const lfs_id *ours, const lfs_id *theirs,
                    lfs_tree_rows *rows, lfs_id *ret_tree, lfs_error **err) {
        path_list conflicts = { 0 };
        lfs_tree_rows mine = { 0 };
        lfs_id tree;
        int r = merge_dir(s, base, ours, theirs, &mine, &conflicts, &tree, err);
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
                lfs_tree_rows_add(rows, &mine.items[i].id, TAKE_PTR(mine.items[i].data), mine.items[i].len,
                                  mine.items[i].subdirs);
        lfs_tree_rows_done(&mine);
        *ret_tree = tree;
        return 0;
}

/* Adds start and each of its ancestors not yet in seen to seen, calling visit for each:
 * the walks that need the whole history (verify, gc). Breadth first; the queue holds only
 * what is still to visit. */
static int walk_ancestors(lfs_store *s, const lfs_id *start, lfs_idset *seen, lfs_commit_visit_fn visit,
                          void *userdata, lfs_error **err) {
        lfs_id *queue = NULL;
        size_t head = 0, n = 0, cap = 0;
        int r = 0;
        GROW(queue, cap, 1);
        queue[n++] = *start;
        while (head < n && r == 0) {
                lfs_id id = queue[head++];
                if (head > 4096 && head * 2 > n) {
                        memmove(queue, queue + head, (n - head) * sizeof(*queue));
                        n -= head;
                        head = 0;
                }
                if (!lfs_idset_add(seen, &id))
                        continue;
                lfs_commit_info c;
                if ((r = lfs_db_get_commit(s, &id, &c, err)) < 0)
                        break;
                if (visit)
                        r = visit(userdata, &c, err);
                GROW(queue, cap, n + c.n_parents);
                for (size_t i = 0; i < c.n_parents; i++)
                        queue[n++] = c.parents[i];
                lfs_commit_info_done(&c);
        }
        free(queue);
        return r;
}

int lfs_for_each_ancestor(lfs_store *s, const lfs_id *start, lfs_idset *seen, lfs_commit_visit_fn visit,
                          void *userdata, lfs_error **err) {
        return walk_ancestors(s, start, seen, visit, userdata, err);
}

/* A commit the walk below has reached and not taken yet, read as it was queued: each
 * commit is read once. */
typedef struct gen_item {
        uint64_t generation;
        lfs_id id, parents[2];
        size_t n_parents;
} gen_item;

/* A binary heap of them: the highest generation on top, then the smallest id (bytewise),
 * so that the order of commits of one generation is the same in every run. */
typedef struct gen_queue {
        gen_item *items;
        size_t n, cap;
} gen_queue;

static bool gen_before(const gen_item *x, const gen_item *y) {
        if (x->generation != y->generation)
                return x->generation > y->generation;
        return memcmp(x->id.bytes, y->id.bytes, LFS_ID_LEN) < 0;
}

static void gen_swap(gen_queue *q, size_t i, size_t j) {
        gen_item t = q->items[i];
        q->items[i] = q->items[j];
        q->items[j] = t;
}

/* Reads id and queues it, unless its generation is below min_generation: no commit below
 * that can be what the walk looks for. */
static int gen_queue_add(lfs_store *s, gen_queue *q, const lfs_id *id, uint64_t min_generation,
                         lfs_error **err) {
        gen_item it = { .id = *id };
        int r = lfs_db_get_parents(s, id, it.parents, &it.n_parents, &it.generation, err);
        if (r < 0)
                return r;
        /* Filled before the walk for every ancestor of its two ends (lfs_generations_fill). */
        if (!it.generation) {
                char hex[LFS_HEX_LEN + 1];
                lfs_id_to_hex(id, hex);
                return lfs_fail(err, LFS_FAILED, EIO,
                                "commit %s of project '%s' lost its generation while a merge read its "
                                "history; try again",
                                hex, s->project);
        }
        if (it.generation < min_generation)
                return 0;
        GROW(q->items, q->cap, q->n + 1);
        size_t i = q->n++;
        q->items[i] = it;
        for (; i > 0 && gen_before(&q->items[i], &q->items[(i - 1) / 2]); i = (i - 1) / 2)
                gen_swap(q, i, (i - 1) / 2);
        return 0;
}

static gen_item gen_queue_pop(gen_queue *q) {
        gen_item top = q->items[0];
        q->items[0] = q->items[--q->n];
        for (size_t i = 0;;) {
                size_t best = i, l = 2 * i + 1, rt = l + 1;
                if (l < q->n && gen_before(&q->items[l], &q->items[best]))
                        best = l;
                if (rt < q->n && gen_before(&q->items[rt], &q->items[best]))
                        best = rt;
                if (best == i)
                        break;
                gen_swap(q, i, best);
                i = best;
        }
        return top;
}

/* The best common ancestor of a and b of generation min_generation or more ("paint down
 * to common", as git's merge bases with generation numbers): each commit reached is
 * marked reachable from a, from b, or both, and the walk takes the highest generation
 * first. Every descendant of a commit has a higher generation, so by the time the walk
 * takes a commit, every path from a or from b down to it has been walked and its marks
 * are whole: the first commit taken with both marks is a common ancestor of the highest
 * generation, and no other common ancestor descends from it (that one's generation would
 * be higher). The walk ends there, having read only the commits above it and their
 * parents, not the history below (the whole history only when a and b have no common
 * ancestor). With several best common ancestors (criss-cross merges): the one of the
 * highest generation, among those of one generation the smallest id, bytewise; git
 * would merge them all recursively, the Store merges against this one. */
static int best_common(lfs_store *s, const lfs_id *a, const lfs_id *b, uint64_t min_generation, lfs_id *ret,
                       bool *ret_found, lfs_error **err) {
        int r = 0;
        const lfs_id *ends[2] = { a, b };
        for (size_t k = 0; k < 2 && r == 0; k++)
                r = lfs_generations_fill(s, ends[k], LFS_GENERATIONS_CHUNK, err);
        if (r < 0)
                return r;
        lfs_idset of[2] = { { 0 } }; /* reachable from a, from b */
        gen_queue q = { 0 };
        bool found = false, reading = lfs_db_begin_read(s);
        for (size_t k = 0; k < 2 && r == 0; k++) {
                lfs_idset_add(&of[k], ends[k]);
                if (k == 0 || !lfs_id_eq(a, b))
                        r = gen_queue_add(s, &q, ends[k], 0, err);
        }
        while (r == 0 && q.n && !found) {
                gen_item it = gen_queue_pop(&q);
                bool in[2] = { lfs_idset_has(&of[0], &it.id), lfs_idset_has(&of[1], &it.id) };
                found = in[0] && in[1];
                for (size_t i = 0; i < it.n_parents && r == 0 && !found; i++) {
                        const lfs_id *p = &it.parents[i];
                        /* Queued when first marked; marked again while queued, it is not
                         * taken yet (its generation is below this commit's). */
                        bool queued = lfs_idset_has(&of[0], p) || lfs_idset_has(&of[1], p);
                        for (size_t k = 0; k < 2; k++)
                                if (in[k])
                                        lfs_idset_add(&of[k], p);
                        if (!queued)
                                r = gen_queue_add(s, &q, p, min_generation, err);
                }
                if (found)
                        *ret = it.id;
        }
        lfs_db_end_read(s, &reading);
        free(q.items);
        lfs_idset_done(&of[0]);
        lfs_idset_done(&of[1]);
        if (r == 0)
                *ret_found = found;
        return r;
}

int lfs_is_ancestor(lfs_store *s, const lfs_id *a, const lfs_id *b, bool *ret, lfs_error **err) {
        lfs_id parents[2], best;
        size_t n;
        uint64_t generation;
        bool found;
        /* a's generation read after the fill (in best_common, first) gave it one. Below it
         * no commit can be a, so the walk from b reads no further down than a. */
        int r = lfs_generations_fill(s, a, LFS_GENERATIONS_CHUNK, err);
        if (r < 0 || (r = lfs_db_get_parents(s, a, parents, &n, &generation, err)) < 0 ||
            (r = best_common(s, a, b, generation, &best, &found, err)) < 0)
                return r;
        /* Every common ancestor of a and b but a itself is a's ancestor, of a lower
         * generation. */
        *ret = found && lfs_id_eq(&best, a);
        return 0;
}

int lfs_merge_base(lfs_store *s, const lfs_id *a, const lfs_id *b, lfs_id *ret, bool *ret_found,
                   lfs_error **err) {
        return best_common(s, a, b, 0, ret, ret_found, err);
}
