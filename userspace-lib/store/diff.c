/* SPDX-License-Identifier: MIT */
/* Changed paths between two trees: files, symlinks and empty directories. Subtrees with
 * the same id are skipped whole, so a diff costs O(changed paths x depth) tree reads; in
 * the directories read, the entries both sides share byte for byte are passed over with a
 * comparison of bytes, nothing parsed or copied (skip_equal). The walks keep their own
 * stacks: a tree's depth costs heap, never the C stack. */
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

/* One side of a directory in a walk: its tree's data as the Store holds it, read once
 * into a buffer this depth keeps for the next directory, the position of the next entry
 * and the name of the one before (for the order check). Entries are looked at where they
 * lie: a name is never copied unless it is reported. */
typedef struct diff_side {
        lfs_tree_data t;
        size_t pos;
        const char *prev;
} diff_side;

/* One directory of a walk over trees: the walks below keep a stack of these, not the C
 * stack, and one path buffer cut back to path_len on the way up. */
typedef struct diff_level {
        diff_side a, b;
        size_t path_len;
} diff_level;

typedef struct diff_walk {
        diff_level *stack;
        size_t n, made, cap; /* in use; made (their buffers kept for reuse); allocated */
        path_buf path;
} diff_walk;

/* A new directory on top of the walk: its sides empty, the buffers of the last one at
 * this depth kept. May move the stack. */
static diff_level *walk_push(diff_walk *w, size_t path_len) {
        if (w->n == w->made) {
                GROW(w->stack, w->cap, w->made + 1);
                w->stack[w->made++] = (diff_level){ 0 };
        }
        diff_level *l = &w->stack[w->n++];
        l->a = (diff_side){ .t.data = l->a.t.data, .t.cap = l->a.t.cap };
        l->b = (diff_side){ .t.data = l->b.t.data, .t.cap = l->b.t.cap };
        l->path_len = path_len;
        return l;
}

static void walk_done(diff_walk *w) {
        for (size_t k = 0; k < w->made; k++) {
                free(w->stack[k].a.t.data);
                free(w->stack[k].b.t.data);
        }
        free(w->stack);
        path_buf_done(&w->path);
}

/* The side's next entry, checked (lfs_tree_entry_next), without moving past it: 1 with
 * *ret and *ret_pos (where the entry after it starts), 0 at the end, or -EIO. */
static int side_peek(const diff_side *side, lfs_entry_view *ret, size_t *ret_pos, lfs_error **err) {
        size_t pos = side->pos;
        int r = lfs_tree_entry_next(side->t.data, side->t.len, &pos, side->prev, ret, err);
        if (r > 0)
                *ret_pos = pos;
        return r;
}

static void side_take(diff_side *side, const lfs_entry_view *e, size_t pos) {
        side->pos = pos;
        side->prev = e->name;
}

/* The length of the prefix a and b (n bytes each) have in common. */
static size_t common_prefix(const char *a, const char *b, size_t n) {
        size_t i = 0;
        for (; i + sizeof(uint64_t) <= n; i += sizeof(uint64_t)) {
                uint64_t x, y;
                memcpy(&x, a + i, sizeof(x));
                memcpy(&y, b + i, sizeof(y));
                if (x != y)
                        break;
        }
        while (i < n && a[i] == b[i])
                i++;
        return i;
}

/* Moves both sides past the whole entries they share byte for byte from where they are:
 * the same name, mode, size and id, no change whatever they hold, so their fields are
 * neither parsed nor checked. Between two versions of a directory that differ in one
 * entry, that is all of them but one: the diff of a directory costs one comparison of its
 * two trees' bytes and a scan for where each entry ends. */
static void skip_equal(diff_side *a, diff_side *b) {
        size_t left_a = a->t.len - a->pos, left_b = b->t.len - b->pos;
        if (!left_a || !left_b)
                return; /* an empty tree's data may be NULL */
        const char *pa = a->t.data + a->pos, *pb = b->t.data + b->pos;
        size_t same = common_prefix(pa, pb, left_a < left_b ? left_a : left_b);
        size_t pos = 0, last = 0, end;
        while ((end = lfs_tree_entry_end(pa, same, pos))) {
                last = pos;
                pos = end;
        }
        if (!pos)
                return;
        /* The name of the last entry passed, for the next one's order check: after
         * "<mode> <size> " (lfs_tree_entry_next checks the entries it reads, not these). */
        const char *space = strchr(pa + last, ' ');
        if (space)
                space = strchr(space + 1, ' ');
        const char *name = space ? space + 1 : pa + last;
        a->prev = name;
        b->prev = pb + (name - pa);
        a->pos += pos;
        b->pos += pos;
}

int lfs_tree_leaves(lfs_store *s, const lfs_id *tree, const char *path, lfs_change_kind kind,
                    lfs_change_list *out, lfs_error **err) {
        diff_walk w = { 0 };
        if (*path)
                path_buf_push(&w.path, path);
        diff_level *top = walk_push(&w, w.path.len);
        int r = lfs_db_get_tree_data(s, tree, &top->a.t, err);
        if (r == 0 && top->a.t.len == 0)
                push_change(out, xstrdup(w.path.s ? w.path.s : ""), kind);
        while (w.n && r == 0) {
                top = &w.stack[w.n - 1];
                lfs_entry_view e = { 0 };
                size_t next;
                int more = side_peek(&top->a, &e, &next, err);
                if (more <= 0) {
                        r = more;
                        w.n--;
                        continue;
                }
                side_take(&top->a, &e, next);
                path_buf_cut(&w.path, top->path_len);
                path_buf_push(&w.path, e.name);
                if (!lfs_mode_is_dir(e.mode)) {
                        push_change(out, xstrdup(w.path.s), kind);
                        continue;
                }
                top = walk_push(&w, w.path.len);
                if ((r = lfs_db_get_tree_data(s, &e.id, &top->a.t, err)) == 0 && top->a.t.len == 0)
                        push_change(out, xstrdup(w.path.s), kind);
        }
        walk_done(&w);
        return r;
}

static int report_side(lfs_store *s, const lfs_entry_view *e, const char *path, lfs_change_kind kind,
                       lfs_change_list *out, lfs_error **err) {
        if (lfs_mode_is_dir(e->mode))
                return lfs_tree_leaves(s, &e->id, path, kind, out, err);
        push_change(out, xstrdup(path), kind);
        return 0;
}

/* Both trees side by side in name order, into the subtrees that differ; the entries the
 * two share byte for byte passed over unread (skip_equal). */
static int diff_trees(lfs_store *s, const lfs_id *a_id, const lfs_id *b_id, lfs_change_list *out,
                      lfs_error **err) {
        diff_walk w = { 0 };
        diff_level *top = walk_push(&w, 0);
        int r = lfs_db_get_tree_data(s, a_id, &top->a.t, err);
        if (r == 0)
                r = lfs_db_get_tree_data(s, b_id, &top->b.t, err);
        while (w.n && r == 0) {
                top = &w.stack[w.n - 1];
                skip_equal(&top->a, &top->b);
                lfs_entry_view ea = { 0 }, eb = { 0 };
                size_t next_a = 0, next_b = 0;
                int has_a = side_peek(&top->a, &ea, &next_a, err);
                int has_b = has_a < 0 ? 0 : side_peek(&top->b, &eb, &next_b, err);
                if (has_a < 0 || has_b < 0) {
                        r = has_a < 0 ? has_a : has_b;
                        break;
                }
                if (!has_a && !has_b) {
                        w.n--;
                        continue;
                }
                int c = !has_a ? 1 : !has_b ? -1 : strcmp(ea.name, eb.name);
                const lfs_entry_view *pa = NULL, *pb = NULL;
                if (c <= 0) {
                        side_take(&top->a, &ea, next_a);
                        pa = &ea;
                }
                if (c >= 0) {
                        side_take(&top->b, &eb, next_b);
                        pb = &eb;
                }
                if (pa && pb && pa->mode == pb->mode && lfs_id_eq(&pa->id, &pb->id))
                        continue;
                path_buf_cut(&w.path, top->path_len);
                path_buf_push(&w.path, c <= 0 ? ea.name : eb.name);
                if (pa && pb && lfs_mode_is_dir(pa->mode) && lfs_mode_is_dir(pb->mode)) {
                        top = walk_push(&w, w.path.len);
                        r = lfs_db_get_tree_data(s, &pa->id, &top->a.t, err);
                        if (r == 0)
                                r = lfs_db_get_tree_data(s, &pb->id, &top->b.t, err);
                } else if (pa && pb && !lfs_mode_is_dir(pa->mode) && !lfs_mode_is_dir(pb->mode)) {
                        push_change(out, xstrdup(w.path.s), LFS_MODIFIED);
                } else {
                        if (pa)
                                r = report_side(s, pa, w.path.s, LFS_DELETED, out, err);
                        if (r == 0 && pb)
                                r = report_side(s, pb, w.path.s, LFS_ADDED, out, err);
                }
        }
        walk_done(&w);
        return r;
}

int lfs_tree_diff(lfs_store *s, const lfs_id *a, const lfs_id *b, lfs_change_list *ret, lfs_error **err) {
        lfs_change_list out = { 0 };
        /* Every tree of both sides read in one snapshot, and its locks taken once (a read
         * transaction per tree took two fcntl and an fstat each: 6,000 calls for a diff
         * of 1,000 directories). */
        bool reading = lfs_db_begin_read(s);
        int r = lfs_id_eq(a, b) ? 0 : diff_trees(s, a, b, &out, err);
        lfs_db_end_read(s, &reading);
        if (r < 0) {
                lfs_change_list_free(out.items, out.n);
                return r;
        }
        *ret = out;
        return 0;
}
