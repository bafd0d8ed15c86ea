/* SPDX-License-Identifier: MIT */
/* Trees: one per directory, entries sorted by name.
 * Serialized entry: "<mode octal> <size decimal> <name>\0" followed by the 32-byte id. */
#include "store.h"

bool lfs_mode_valid(uint32_t mode) {
        return mode == LFS_MODE_FILE || mode == LFS_MODE_EXEC || mode == LFS_MODE_LINK ||
               mode == LFS_MODE_DIR;
}

bool lfs_entry_name_valid(const char *name) {
        return *name && strcmp(name, ".") && strcmp(name, "..") && !strchr(name, '/');
}

char *lfs_path_excerpt(const char *path) {
        size_t len = strlen(path);
        if (len <= 120)
                return xstrdup(path);
        return xasprintf("%.60s...%s", path, path + len - 50);
}

void lfs_tree_done(lfs_tree *t) {
        for (size_t i = 0; i < t->n; i++)
                free(t->entries[i].name);
        free(t->entries);
        *t = (lfs_tree){ 0 };
}

void lfs_tree_add(lfs_tree *t, char *name, uint32_t mode, uint64_t size, const lfs_id *id) {
        GROW(t->entries, t->cap, t->n + 1);
        t->entries[t->n++] = (lfs_entry){ .name = name, .mode = mode, .size = size, .id = *id };
}

static int entry_cmp(const void *a, const void *b) {
        return strcmp(((const lfs_entry *)a)->name, ((const lfs_entry *)b)->name);
}

void lfs_tree_sort(lfs_tree *t) {
        if (t->n > 1)
                qsort(t->entries, t->n, sizeof(lfs_entry), entry_cmp);
}

const lfs_entry *lfs_tree_find(const lfs_tree *t, const char *name) {
        lfs_entry key = { .name = (char *)name };
        if (!t->n)
                return NULL;
        return bsearch(&key, t->entries, t->n, sizeof(lfs_entry), entry_cmp);
}

size_t lfs_tree_subdirs(const lfs_tree *t) {
        size_t n = 0;
        for (size_t i = 0; i < t->n; i++)
                n += lfs_mode_is_dir(t->entries[i].mode);
        return n;
}

void lfs_tree_serialize(const lfs_tree *t, char **ret_data, size_t *ret_len) {
        size_t cap = 64, len = 0;
        for (size_t i = 0; i < t->n; i++)
                cap += strlen(t->entries[i].name) + 64;
        char *data = xmalloc(cap);
        for (size_t i = 0; i < t->n; i++) {
                const lfs_entry *e = &t->entries[i];
                int w = snprintf(data + len, cap - len, "%o %llu %s", (unsigned)e->mode,
                                 (unsigned long long)e->size, e->name);
                len += (size_t)w + 1; /* keep the NUL */
                memcpy(data + len, e->id.bytes, LFS_ID_LEN);
                len += LFS_ID_LEN;
        }
        *ret_data = data;
        *ret_len = len;
}

/* The digits at p in base (8 or 10) up to the space after them: the position after that
 * space with *ret set, or NULL when there is no digit, something else ends them, or the
 * number passes max. The record's NUL ends the scan. */
static const char *parse_field(const char *p, unsigned base, uint64_t max, uint64_t *ret) {
        const char *start = p;
        uint64_t v = 0;
        for (; *p >= '0' && *p < (char)('0' + base); p++) {
                unsigned digit = (unsigned)(*p - '0');
                if (v > (max - digit) / base)
                        return NULL;
                v = v * base + digit;
        }
        if (p == start || *p != ' ')
                return NULL;
        *ret = v;
        return p + 1;
}

size_t lfs_tree_entry_end(const char *data, size_t len, size_t pos) {
        if (pos >= len)
                return 0;
        const char *nul = memchr(data + pos, 0, len - pos);
        if (!nul || (size_t)(data + len - nul - 1) < LFS_ID_LEN)
                return 0;
        return (size_t)(nul + 1 - data) + LFS_ID_LEN;
}

int lfs_tree_entry_next(const char *data, size_t len, size_t *pos, const char *prev, lfs_entry_view *ret,
                        lfs_error **err) {
        if (*pos == len)
                return 0;
        size_t end = lfs_tree_entry_end(data, len, *pos);
        if (!end)
                goto corrupt;
        /* "<octal> <decimal> <name>": exactly one space each, since names may start with
         * spaces. */
        uint64_t mode, size;
        const char *p = parse_field(data + *pos, 8, UINT32_MAX, &mode);
        if (!p || !(p = parse_field(p, 10, UINT64_MAX, &size)))
                goto corrupt;
        if (!lfs_mode_valid((uint32_t)mode) || !lfs_entry_name_valid(p) || (prev && strcmp(prev, p) >= 0))
                goto corrupt;
        ret->name = p;
        ret->mode = (uint32_t)mode;
        ret->size = size;
        memcpy(ret->id.bytes, data + end - LFS_ID_LEN, LFS_ID_LEN);
        *pos = end;
        return 1;
corrupt:
        return lfs_fail(err, LFS_FAILED, EIO,
                        "a tree object in the Store is corrupt; run 'layerfs project verify'");
}

int lfs_tree_parse(const void *data, size_t len, lfs_tree *ret, lfs_error **err) {
        lfs_tree t = { 0 };
        lfs_entry_view e = { 0 };
        size_t pos = 0;
        int r;
        while ((r = lfs_tree_entry_next(data, len, &pos, t.n ? t.entries[t.n - 1].name : NULL, &e, err)) > 0)
                lfs_tree_add(&t, xstrdup(e.name), e.mode, e.size, &e.id);
        if (r < 0) {
                lfs_tree_done(&t);
                return r;
        }
        *ret = t;
        return 0;
}

const lfs_id *lfs_empty_tree_id(void) {
        static lfs_id id;
        static bool done;
        if (!done) {
                lfs_sha256("", 0, &id);
                done = true;
        }
        return &id;
}

void lfs_tree_rows_add(lfs_tree_rows *rows, const lfs_id *id, char *data, size_t len, size_t subdirs) {
        GROW(rows->items, rows->cap, rows->n + 1);
        rows->items[rows->n++] = (lfs_tree_row){ .id = *id, .data = data, .len = len, .subdirs = subdirs };
}

void lfs_tree_store(lfs_tree *t, lfs_tree_rows *rows, lfs_id *ret_id) {
        char *data;
        size_t len;
        lfs_tree_sort(t);
        lfs_tree_serialize(t, &data, &len);
        lfs_sha256(data, len, ret_id);
        lfs_tree_rows_add(rows, ret_id, data, len, lfs_tree_subdirs(t));
}

int lfs_tree_rows_insert(lfs_store *s, lfs_tree_rows *rows, lfs_error **err) {
        for (size_t i = 0; i < rows->n; i++) {
                lfs_tree_row *row = &rows->items[i];
                int r = lfs_db_put_tree(s, &row->id, row->data, row->len, row->subdirs, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

void lfs_tree_rows_done(lfs_tree_rows *rows) {
        for (size_t i = 0; i < rows->n; i++)
                free(rows->items[i].data);
        free(rows->items);
        *rows = (lfs_tree_rows){ 0 };
}

int lfs_for_each_tree(lfs_store *s, const lfs_id *root, lfs_idset *seen, lfs_tree_visit_fn visit,
                      void *userdata, lfs_error **err) {
        lfs_id *stack = NULL;
        size_t n = 0, cap = 0;
        int r = 0;
        GROW(stack, cap, 1);
        stack[n++] = *root;
        while (n && r == 0) {
                lfs_id id = stack[--n];
                if (!lfs_idset_add(seen, &id))
                        continue;
                lfs_tree t;
                if ((r = lfs_db_get_tree(s, &id, &t, err)) < 0)
                        break;
                r = visit(userdata, &id, &t, err);
                for (size_t i = 0; i < t.n && r == 0; i++)
                        if (lfs_mode_is_dir(t.entries[i].mode)) {
                                GROW(stack, cap, n + 1);
                                stack[n++] = t.entries[i].id;
                        }
                lfs_tree_done(&t);
        }
        free(stack);
        return r;
}
