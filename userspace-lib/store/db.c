/* SPDX-License-Identifier: MIT */
/* The Store's metadata in SQLite: trees, commits and branches. */
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <time.h>

#include "json_path.h"
#include "store.h"

/* Each tree's count of subdirectories (the entries of mode LFS_MODE_DIR), a pure function
 * of its id, written with the tree: a Workspace's stat of a directory it never listed
 * needs only this (st_nlink), not the whole tree. A table of its own, not a column of
 * trees: a column added to the Stores made before it would come after data, and SQLite
 * reads a column past a blob that spills onto overflow pages by walking their chain, the
 * whole tree again (6 MB read, 132 ms, for a 6 MB row against 4 KB, 0.04 ms, here). A
 * tree without a row (written by a layerfs before the table) is counted from the tree
 * itself by whoever needs it (the Workspace loads the directory's names). */
#define TREE_SUBDIRS_TABLE                                                                                  \
        "CREATE TABLE tree_subdirs(id BLOB PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;"

/* Each commit's generation (generation.c): in a Store made before it, a column added at
 * the end of the rows (ALTER TABLE ADD COLUMN rewrites no row), NULL until filled; in a
 * new one, beside the parents, before the text, which may spill onto overflow pages that a
 * walk reading the parents and the generation then never reads. */
#define COMMIT_GENERATION_COLUMN "generation INTEGER"

static const char schema[] = LFS_TREES_TABLE("trees") TREE_SUBDIRS_TABLE
        "CREATE TABLE commits(id BLOB PRIMARY KEY, tree BLOB NOT NULL, parent1 BLOB,"
        " parent2 BLOB, " COMMIT_GENERATION_COLUMN ", author TEXT NOT NULL, time INTEGER NOT NULL,"
        " message TEXT NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE branches(name TEXT PRIMARY KEY, commit_id BLOB NOT NULL) WITHOUT ROWID;"
        "CREATE TABLE packs(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);"
        "CREATE TABLE blobs(id BLOB PRIMARY KEY, pack INTEGER NOT NULL REFERENCES packs(id),"
        " offset INTEGER NOT NULL, size INTEGER NOT NULL) WITHOUT ROWID;";

int lfs_db_fail(lfs_store *s, lfs_error **err, const char *what) {
        int rc = sqlite3_errcode(s->db);
        if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT)
                return lfs_fail(err, LFS_INVALID_INPUT, EINVAL,
                                "%s/store.db is not a LayerFS Store (%s); check --home and "
                                "--project, or move the file away",
                                s->path, sqlite3_errmsg(s->db));
        if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
                return lfs_fail(err, LFS_BUSY, EBUSY,
                                "the Store of project '%s' stayed locked by another process while "
                                "trying to %s; try again",
                                s->project, what);
        return lfs_fail(err, LFS_FAILED, EIO, "could not %s in the Store of project '%s': %s%s", what,
                        s->project, sqlite3_errmsg(s->db), lfs_fsize_hint(sqlite3_system_errno(s->db)));
}

int lfs_db_exec(lfs_store *s, const char *sql, lfs_error **err) {
        if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, sql);
        return 0;
}

int lfs_db_begin(lfs_store *s, lfs_error **err) {
        return lfs_db_exec(s, "BEGIN IMMEDIATE", err);
}

int lfs_db_commit(lfs_store *s, lfs_error **err) {
        int r = lfs_db_exec(s, "COMMIT", err);
        if (r < 0)
                lfs_db_rollback(s);
        return r;
}

void lfs_db_rollback(lfs_store *s) {
        if (!sqlite3_get_autocommit(s->db))
                sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

bool lfs_db_begin_read(lfs_store *s) {
        return sqlite3_get_autocommit(s->db) && lfs_db_exec(s, "BEGIN", NULL) == 0;
}

void lfs_db_end_read(lfs_store *s, bool *began) {
        if (*began)
                (void)lfs_db_exec(s, "COMMIT", NULL);
        *began = false;
}

int lfs_db_pragma_int(lfs_store *s, const char *sql, int *ret, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "read the Store's header");
        int rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) {
                sqlite3_finalize(st);
                return lfs_db_fail(s, err, "read the Store's header");
        }
        *ret = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        return 0;
}

static int prepare(lfs_store *s, sqlite3_stmt **slot, const char *sql, lfs_error **err) {
        if (!*slot && sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, slot, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "prepare a query");
        sqlite3_reset(*slot);
        sqlite3_clear_bindings(*slot);
        return 0;
}

bool lfs_db_can_select(lfs_store *s, const char *what, const char *table) {
        _cleanup_free_ char *sql = xasprintf("SELECT %s FROM %s LIMIT 0", what, table);
        sqlite3_stmt *st = NULL;
        bool can = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) == SQLITE_OK;
        sqlite3_finalize(st);
        return can;
}

static int setup_schema(lfs_store *s, bool create, lfs_error **err) {
        sqlite3_busy_timeout(s->db, LFS_DB_BUSY_MS);
        int app_id = 0, version = 0, r;
        if ((r = lfs_db_pragma_int(s, "PRAGMA application_id", &app_id, err)) < 0 ||
            (r = lfs_db_pragma_int(s, "PRAGMA user_version", &version, err)) < 0)
                return r;
        if (create) {
                char sql[sizeof(schema) + 256];
                snprintf(sql, sizeof(sql),
                         "PRAGMA journal_mode=WAL; BEGIN IMMEDIATE; %s PRAGMA application_id=%d;"
                         " PRAGMA user_version=%d; COMMIT;",
                         schema, LFS_STORE_APPLICATION_ID, LFS_STORE_SCHEMA);
                if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK)
                        return lfs_db_fail(s, err, "make the Store's tables");
        } else if (app_id != LFS_STORE_APPLICATION_ID) {
                return lfs_fail(err, LFS_INVALID_INPUT, EINVAL,
                                "%s/store.db is not a LayerFS Store (application id %#x); check "
                                "--home and --project, or move the file away",
                                s->path, (unsigned)app_id);
        } else if (version != LFS_STORE_SCHEMA && version != LFS_STORE_SCHEMA_SPLIT) {
                return lfs_fail(err, LFS_UNSUPPORTED, 0,
                                "%s/store.db has schema version %d; this layerfs reads versions "
                                "%d and %d; use a matching layerfs",
                                s->path, version, LFS_STORE_SCHEMA, LFS_STORE_SCHEMA_SPLIT);
        }
        if ((r = lfs_db_exec(s, "PRAGMA synchronous=FULL", err)) < 0)
                return r;
        s->has_tree_subdirs = lfs_db_can_select(s, "1", "tree_subdirs");
        s->has_generations = lfs_db_can_select(s, "generation", "commits");
        /* A Store made before the table or the column: added (the schema's version stays,
         * since a layerfs without them reads and writes the Store as before, its trees then
         * counted from their data, its commits then without a generation until
         * generation.c fills them). Two opening at once may both try; a writer holding the
         * Store for longer than busy_timeout leaves it for the next open (or, for the
         * column, the first walk that needs it), counting from the trees meanwhile. */
        if (!s->has_tree_subdirs)
                (void)lfs_db_tree_subdirs_table(s);
        if (!s->has_generations)
                (void)lfs_db_generation_column(s, false);
        return 0;
}

/* Runs sql, which adds to the schema what can_select then finds; whether it is there. */
static bool schema_add(lfs_store *s, const char *sql, const char *what, const char *table, bool wait) {
        /* Not waited for at an open: a writer holding the Store (gc's VACUUM) made every
         * open of a Store without the table, read-only commands' too, wait out
         * busy_timeout. */
        if (!wait)
                sqlite3_busy_timeout(s->db, 0);
        (void)lfs_db_exec(s, sql, NULL);
        if (!wait)
                sqlite3_busy_timeout(s->db, LFS_DB_BUSY_MS);
        return lfs_db_can_select(s, what, table);
}

bool lfs_db_tree_subdirs_table(lfs_store *s) {
        if (!s->has_tree_subdirs)
                s->has_tree_subdirs = schema_add(s, TREE_SUBDIRS_TABLE, "1", "tree_subdirs", false);
        return s->has_tree_subdirs;
}

bool lfs_db_generation_column(lfs_store *s, bool wait) {
        /* Another process may have added it since this one looked. */
        if (!s->has_generations && !lfs_db_can_select(s, "generation", "commits"))
                (void)schema_add(s, "ALTER TABLE commits ADD COLUMN " COMMIT_GENERATION_COLUMN, "generation",
                                 "commits", wait);
        if (!s->has_generations && lfs_db_can_select(s, "generation", "commits")) {
                /* The statements that read or write none are made again. */
                sqlite3_finalize(s->get_parents_stmt);
                s->get_parents_stmt = NULL;
                s->has_generations = true;
        }
        return s->has_generations;
}

int lfs_store_open_dir(lfs_home *home, const char *project, const char *path, bool create, lfs_store **ret,
                       lfs_error **err) {
        _cleanup_free_ char *db_path = NULL;
        lfs_store *s = xcalloc(1, sizeof(*s));
        s->home = home;
        s->project = xstrdup(project);
        s->path = xstrdup(path);
        s->objects_fd = -1;
        s->packs_fd = -1;
        s->gc_lock_fd = -1;
        /* Until the close, in this thread: a write past ulimit -f fails EFBIG rather than
         * ending the process mid-write (fsize.h). */
        lfs_fsize_hold();
        s->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int r;
        if (s->dirfd < 0) {
                r = lfs_fail(err, LFS_NO_SUCH_PROJECT, errno,
                             "cannot open project '%s' at %s: %s; 'layerfs project list' shows "
                             "the projects",
                             project, path, strerror(errno));
                goto fail;
        }
        if (create) {
                if (mkdirat(s->dirfd, "objects", 0755) < 0 || mkdirat(s->dirfd, "objects/tmp", 0700) < 0 ||
                    mkdirat(s->dirfd, "objects/packs", 0755) < 0) {
                        r = lfs_fail(err, LFS_FAILED, errno, "cannot make %s/objects: %s", path,
                                     strerror(errno));
                        goto fail;
                }
                for (int i = 0; i < 256; i++) {
                        char name[16];
                        snprintf(name, sizeof(name), "objects/%02x", i);
                        if (mkdirat(s->dirfd, name, 0755) < 0) {
                                r = lfs_fail(err, LFS_FAILED, errno, "cannot make %s/%s: %s", path, name,
                                             strerror(errno));
                                goto fail;
                        }
                }
        } else if (faccessat(s->dirfd, "store.db", F_OK, 0) < 0) {
                r = lfs_fail(err, LFS_INVALID_INPUT, errno,
                             "%s is not a LayerFS Store: it has no store.db; check --home and "
                             "--project",
                             path);
                goto fail;
        }
        s->objects_fd = openat(s->dirfd, "objects", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->objects_fd >= 0)
                s->packs_fd = openat(s->objects_fd, "packs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->objects_fd < 0 || s->packs_fd < 0) {
                r = lfs_fail(err, LFS_INVALID_INPUT, errno,
                             "%s is not a LayerFS Store: its objects directory cannot be opened "
                             "(%s)",
                             path, strerror(errno));
                goto fail;
        }
        db_path = xasprintf("%s/store.db", path);
        int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
        if (sqlite3_open_v2(db_path, &s->db, flags, NULL) != SQLITE_OK) {
                r = lfs_fail(err, LFS_FAILED, EIO, "cannot open %s: %s", db_path,
                             s->db ? sqlite3_errmsg(s->db) : "out of memory");
                goto fail;
        }
        if ((r = setup_schema(s, create, err)) < 0)
                goto fail;
        s->io = lfs_io_new();
        *ret = s;
        return 0;
fail:
        lfs_store_close(s);
        return r;
}

void lfs_store_close(lfs_store *s) {
        if (!s)
                return;
        sqlite3_finalize(s->get_tree_stmt);
        sqlite3_finalize(s->get_old_tree_stmt);
        sqlite3_finalize(s->version_stmt);
        sqlite3_finalize(s->put_tree_stmt);
        sqlite3_finalize(s->get_subdirs_stmt);
        sqlite3_finalize(s->put_subdirs_stmt);
        sqlite3_finalize(s->get_commit_stmt);
        sqlite3_finalize(s->get_parents_stmt);
        sqlite3_finalize(s->set_generation_stmt);
        sqlite3_finalize(s->locate_stmt);
        for (size_t i = 0; i < s->n_pack_fds; i++) {
                close(s->pack_fds[i].fd);
                free(s->pack_fds[i].name);
        }
        free(s->pack_fds);
        if (s->gc_lock_fd >= 0)
                close(s->gc_lock_fd); /* lets go of its lock */
        if (s->db)
                sqlite3_close(s->db);
        lfs_io_free(s->io);
        if (s->packs_fd >= 0)
                close(s->packs_fd);
        if (s->objects_fd >= 0)
                close(s->objects_fd);
        if (s->dirfd >= 0)
                close(s->dirfd);
        lfs_fsize_release();
        free(s->project);
        free(s->path);
        free(s);
}

const char *lfs_store_project(const lfs_store *s) {
        return s->project;
}

static void bind_id(sqlite3_stmt *st, int col, const lfs_id *id) {
        if (id)
                sqlite3_bind_blob(st, col, id->bytes, LFS_ID_LEN, SQLITE_TRANSIENT);
        else
                sqlite3_bind_null(st, col);
}

static bool column_id(sqlite3_stmt *st, int col, lfs_id *ret) {
        if (sqlite3_column_type(st, col) != SQLITE_BLOB || sqlite3_column_bytes(st, col) != LFS_ID_LEN)
                return false;
        memcpy(ret->bytes, sqlite3_column_blob(st, col), LFS_ID_LEN);
        return true;
}

bool lfs_db_trees_split(lfs_store *s) {
        int version = LFS_STORE_SCHEMA;
        if (prepare(s, &s->version_stmt, "PRAGMA user_version", NULL) == 0 &&
            sqlite3_step(s->version_stmt) == SQLITE_ROW)
                version = sqlite3_column_int(s->version_stmt, 0);
        sqlite3_reset(s->version_stmt);
        return version == LFS_STORE_SCHEMA_SPLIT;
}

#define GET_TREE "SELECT data FROM trees WHERE id=?"

/* Steps the lookup of id in one table of trees: 1 with *st on its row, 0 without one. */
static int find_tree(lfs_store *s, sqlite3_stmt **st, const char *sql, const lfs_id *id, lfs_error **err) {
        int r = prepare(s, st, sql, err);
        if (r < 0)
                return r;
        bind_id(*st, 1, id);
        int rc = sqlite3_step(*st);
        if (rc == SQLITE_ROW)
                return 1;
        sqlite3_reset(*st);
        return rc == SQLITE_DONE ? 0 : lfs_db_fail(s, err, "read a tree");
}

/* Hands tree id's data to take while its row is current (the empty tree's, which has no
 * row, too): what take returned, or a negative errno with the error set, the row missing
 * being a damaged Store. */
typedef int (*tree_take_fn)(const void *data, size_t len, void *userdata, lfs_error **err);
static int read_tree(lfs_store *s, const lfs_id *id, tree_take_fn take, void *userdata, lfs_error **err) {
        if (lfs_id_eq(id, lfs_empty_tree_id()))
                return take("", 0, userdata, err);
        sqlite3_stmt **st = &s->get_tree_stmt;
        int r = find_tree(s, st, GET_TREE, id, err);
        bool began = false;
        if (r == 0) {
                /* Not in trees: in the old table while a conversion is under way. The
                 * state and both lookups in one snapshot: between two statements of their
                 * own, a chunk may have moved the row, or the conversion ended. */
                began = lfs_db_begin_read(s);
                r = find_tree(s, st, GET_TREE, id, err);
                if (r == 0 && lfs_db_trees_split(s)) {
                        st = &s->get_old_tree_stmt;
                        r = find_tree(s, st, "SELECT data FROM " LFS_TREES_OLD " WHERE id=?", id, err);
                }
        }
        if (r == 0) {
                char hex[LFS_HEX_LEN + 1];
                lfs_id_to_hex(id, hex);
                r = lfs_fail(err, LFS_FAILED, ENOENT,
                             "tree %s is missing from the Store of project '%s'; the Store is "
                             "damaged",
                             hex, s->project);
        } else if (r > 0) {
                r = take(sqlite3_column_blob(*st, 0), (size_t)sqlite3_column_bytes(*st, 0), userdata, err);
                sqlite3_reset(*st);
        }
        lfs_db_end_read(s, &began);
        return r;
}

static int take_parsed(const void *data, size_t len, void *userdata, lfs_error **err) {
        return lfs_tree_parse(data, len, userdata, err);
}

int lfs_db_get_tree(lfs_store *s, const lfs_id *id, lfs_tree *ret, lfs_error **err) {
        return read_tree(s, id, take_parsed, ret, err);
}

static int take_copy(const void *data, size_t len, void *userdata, lfs_error **err) {
        (void)err;
        lfs_tree_data *buf = userdata;
        if (len) {
                GROW(buf->data, buf->cap, len);
                memcpy(buf->data, data, len);
        }
        buf->len = len;
        return 0;
}

int lfs_db_get_tree_data(lfs_store *s, const lfs_id *id, lfs_tree_data *buf, lfs_error **err) {
        return read_tree(s, id, take_copy, buf, err);
}

int lfs_db_put_tree(lfs_store *s, const lfs_id *id, const void *data, size_t len, size_t subdirs,
                    lfs_error **err) {
        int r = prepare(s, &s->put_tree_stmt, "INSERT OR IGNORE INTO trees(id, data) VALUES(?, ?)", err);
        if (r < 0)
                return r;
        sqlite3_stmt *st = s->put_tree_stmt;
        bind_id(st, 1, id);
        sqlite3_bind_blob(st, 2, len ? data : "", (int)len, SQLITE_STATIC);
        if (sqlite3_step(st) != SQLITE_DONE)
                r = lfs_db_fail(s, err, "write a tree");
        sqlite3_reset(st);
        if (r < 0 || !s->has_tree_subdirs)
                return r;
        /* Also for a tree already there without its count (written by a layerfs before
         * tree_subdirs): the count is the id's, whoever wrote the row. */
        if ((r = prepare(s, &s->put_subdirs_stmt, "INSERT OR IGNORE INTO tree_subdirs(id, n) VALUES(?, ?)",
                         err)) < 0)
                return r;
        st = s->put_subdirs_stmt;
        bind_id(st, 1, id);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)subdirs);
        if (sqlite3_step(st) != SQLITE_DONE)
                r = lfs_db_fail(s, err, "write a tree's count of subdirectories");
        sqlite3_reset(st);
        return r;
}

int lfs_db_stored_subdirs(lfs_store *s, const lfs_id *id, uint64_t *ret, lfs_error **err) {
        if (!s->has_tree_subdirs)
                return -ENOENT;
        int r = prepare(s, &s->get_subdirs_stmt, "SELECT n FROM tree_subdirs WHERE id=?", err);
        if (r < 0)
                return r;
        sqlite3_stmt *st = s->get_subdirs_stmt;
        bind_id(st, 1, id);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                r = -ENOENT;
        else if (rc != SQLITE_ROW)
                r = lfs_db_fail(s, err, "read a tree's count of subdirectories");
        else if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || sqlite3_column_int64(st, 0) < 0 ||
                 sqlite3_column_int64(st, 0) > LFS_MAX_SUBDIRS)
                r = -EBADMSG;
        else
                *ret = (uint64_t)sqlite3_column_int64(st, 0);
        sqlite3_reset(st);
        return r;
}

void lfs_commit_info_done(lfs_commit_info *c) {
        free(c->author);
        free(c->message);
        c->author = c->message = NULL;
}

void lfs_commit_info_free(lfs_commit_info *commits, size_t n) {
        for (size_t i = 0; i < n; i++)
                lfs_commit_info_done(&commits[i]);
        free(commits);
}

void lfs_commit_compute_id(lfs_commit_info *c) {
        char hex[LFS_HEX_LEN + 1];
        size_t cap = 256 + strlen(c->author) + strlen(c->message), len = 0;
        _cleanup_free_ char *text = xmalloc(cap);
        lfs_id_to_hex(&c->tree, hex);
        len += (size_t)snprintf(text + len, cap - len, "tree %s\n", hex);
        for (size_t i = 0; i < c->n_parents; i++) {
                lfs_id_to_hex(&c->parents[i], hex);
                len += (size_t)snprintf(text + len, cap - len, "parent %s\n", hex);
        }
        len += (size_t)snprintf(text + len, cap - len, "author %s\ntime %lld\n\n%s", c->author,
                                (long long)c->time, c->message);
        lfs_sha256(text, len, &c->id);
}

/* Steps the lookup of commit id in *st (prepared with sql), counted: 0 with *st on its
 * row, else negative with *st reset. */
static int find_commit(lfs_store *s, sqlite3_stmt **st, const char *sql, const lfs_id *id, lfs_error **err) {
        int r = prepare(s, st, sql, err);
        if (r < 0)
                return r;
        bind_id(*st, 1, id);
        s->commits_read++;
        int rc = sqlite3_step(*st);
        if (rc == SQLITE_ROW)
                return 0;
        if (rc == SQLITE_DONE) {
                char hex[LFS_HEX_LEN + 1];
                lfs_id_to_hex(id, hex);
                r = lfs_fail(err, LFS_NO_SUCH_BRANCH, ENOENT,
                             "commit %s is not in the Store of project '%s'; 'layerfs branch log' "
                             "lists commits",
                             hex, s->project);
        } else {
                r = lfs_db_fail(s, err, "read a commit");
        }
        sqlite3_reset(*st);
        return r;
}

/* The parents in columns col and col + 1 of st's row; the count of them. */
static size_t column_parents(sqlite3_stmt *st, int col, lfs_id parents[2]) {
        size_t n = 0;
        if (column_id(st, col, &parents[0]))
                n = 1;
        if (n == 1 && column_id(st, col + 1, &parents[1]))
                n = 2;
        return n;
}

int lfs_db_get_parents(lfs_store *s, const lfs_id *id, lfs_id ret_parents[2], size_t *ret_n,
                       uint64_t *ret_generation, lfs_error **err) {
        sqlite3_stmt **st = &s->get_parents_stmt;
        int r = find_commit(s, st,
                            s->has_generations
                                    ? "SELECT parent1, parent2, generation FROM commits WHERE id=?"
                                    : "SELECT parent1, parent2, NULL FROM commits WHERE id=?",
                            id, err);
        if (r < 0)
                return r;
        lfs_id parents[2];
        size_t n = column_parents(*st, 0, parents);
        /* NULL, or anything no generation is, reads as not known: a fill makes it right. */
        sqlite3_int64 generation =
                sqlite3_column_type(*st, 2) == SQLITE_INTEGER ? sqlite3_column_int64(*st, 2) : 0;
        sqlite3_reset(*st);
        ret_parents[0] = parents[0];
        ret_parents[1] = parents[1];
        *ret_n = n;
        *ret_generation = generation > 0 ? (uint64_t)generation : 0;
        return 0;
}

int lfs_db_set_generation(lfs_store *s, const lfs_id *id, uint64_t generation, lfs_error **err) {
        /* Only where none is: a generation is the commit's own (its id names its
         * parents), so whoever wrote one first wrote this one. One that is not a positive
         * whole number (a damaged row) is read as none (lfs_db_get_parents) and replaced
         * here: kept, the fill would push the same commit again for ever. */
        int r = prepare(s, &s->set_generation_stmt,
                        "UPDATE commits SET generation=? WHERE id=? AND (generation IS NULL OR "
                        "typeof(generation)<>'integer' OR generation<1)",
                        err);
        if (r < 0)
                return r;
        sqlite3_stmt *st = s->set_generation_stmt;
        sqlite3_bind_int64(st, 1, (sqlite3_int64)generation);
        bind_id(st, 2, id);
        if (sqlite3_step(st) != SQLITE_DONE)
                r = lfs_db_fail(s, err, "record a commit's generation");
        sqlite3_reset(st);
        return r;
}

int lfs_db_get_commit(lfs_store *s, const lfs_id *id, lfs_commit_info *ret, lfs_error **err) {
        sqlite3_stmt **slot = &s->get_commit_stmt;
        int r = find_commit(s, slot,
                            "SELECT tree, parent1, parent2, author, time, message FROM commits WHERE id=?",
                            id, err);
        if (r == 0) {
                sqlite3_stmt *st = *slot;
                lfs_commit_info c = { .id = *id };
                bool ok = column_id(st, 0, &c.tree);
                c.n_parents = column_parents(st, 1, c.parents);
                c.author = xstrdup((const char *)sqlite3_column_text(st, 3) ?: "");
                c.time = sqlite3_column_int64(st, 4);
                c.message = xstrdup((const char *)sqlite3_column_text(st, 5) ?: "");
                if (!ok) {
                        lfs_commit_info_done(&c);
                        r = lfs_fail(err, LFS_FAILED, EIO, "a commit row of project '%s' is damaged",
                                     s->project);
                } else {
                        *ret = c;
                }
                sqlite3_reset(st);
        }
        return r;
}

int lfs_db_put_commit(lfs_store *s, const lfs_commit_info *c, lfs_error **err) {
        /* The generation from the parents' rows (those of earlier commits of the same
         * transaction too): 1 + the highest of theirs, 1 without a parent; NULL (filled
         * later, generation.c) when a parent's is not known yet, since SQLite's max() of a
         * NULL is NULL. */
        static const char with_generation[] =
                "INSERT OR IGNORE INTO commits(id, tree, parent1, parent2, author, time, message, generation)"
                " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 1 + max("
                "coalesce((SELECT generation FROM commits WHERE id=?3), CASE WHEN ?3 IS NULL THEN 0 END),"
                " coalesce((SELECT generation FROM commits WHERE id=?4), CASE WHEN ?4 IS NULL THEN 0 END)))";
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db,
                               s->has_generations
                                       ? with_generation
                                       : "INSERT OR IGNORE INTO commits(id, tree, parent1, parent2, "
                                         "author, time, message) VALUES(?, ?, ?, ?, ?, ?, ?)",
                               -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "write a commit");
        bind_id(st, 1, &c->id);
        bind_id(st, 2, &c->tree);
        bind_id(st, 3, c->n_parents > 0 ? &c->parents[0] : NULL);
        bind_id(st, 4, c->n_parents > 1 ? &c->parents[1] : NULL);
        sqlite3_bind_text(st, 5, c->author, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 6, c->time);
        sqlite3_bind_text(st, 7, c->message, -1, SQLITE_STATIC);
        int r = sqlite3_step(st) == SQLITE_DONE ? 0 : lfs_db_fail(s, err, "write a commit");
        sqlite3_finalize(st);
        return r;
}

int lfs_db_get_branch(lfs_store *s, const char *name, lfs_id *ret, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "SELECT commit_id FROM branches WHERE name=?", -1, &st, NULL) !=
            SQLITE_OK)
                return lfs_db_fail(s, err, "read a branch");
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st), r = 0;
        if (rc == SQLITE_DONE)
                r = -ENOENT;
        else if (rc != SQLITE_ROW || !column_id(st, 0, ret))
                r = lfs_db_fail(s, err, "read a branch");
        sqlite3_finalize(st);
        return r;
}

int lfs_db_cas_branch(lfs_store *s, const char *name, const lfs_id *expected, const lfs_id *to,
                      lfs_error **err) {
        sqlite3_stmt *st;
        const char *sql = expected ? "UPDATE branches SET commit_id=?1 WHERE name=?2 AND commit_id=?3"
                                   : "INSERT OR IGNORE INTO branches(commit_id, name) VALUES(?1, ?2)";
        if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "move a branch");
        bind_id(st, 1, to);
        sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
        if (expected)
                bind_id(st, 3, expected);
        int r = 0;
        if (sqlite3_step(st) != SQLITE_DONE)
                r = lfs_db_fail(s, err, "move a branch");
        else if (sqlite3_changes(s->db) != 1)
                r = expected ? lfs_fail(err, LFS_BUSY, ESTALE,
                                        "branch '%s' moved while this operation ran; try again", name)
                             : lfs_fail(err, LFS_INVALID_INPUT, EEXIST,
                                        "branch '%s' already exists; choose another name or "
                                        "delete it first",
                                        name);
        sqlite3_finalize(st);
        return r;
}

int lfs_branch_head(lfs_store *s, const char *name, lfs_id *ret, lfs_error **err) {
        int r = lfs_check_branch_name(name, err);
        if (r < 0)
                return r;
        r = lfs_db_get_branch(s, name, ret, err);
        if (r == -ENOENT)
                return lfs_fail(err, LFS_NO_SUCH_BRANCH, ENOENT,
                                "project '%s' has no branch '%s'; 'layerfs branch list' shows its "
                                "branches",
                                s->project, name);
        return r;
}

int lfs_branch_head_serial(lfs_store *s, const char *name, lfs_id *ret, lfs_error **err) {
        int r = lfs_db_begin(s, err);
        if (r < 0)
                return r;
        r = lfs_branch_head(s, name, ret, err);
        lfs_db_rollback(s);
        return r;
}

char *lfs_default_author(void) {
        const char *env = getenv("LAYERFS_AUTHOR");
        char *author;
        if (env && *env) {
                author = xstrdup(env);
        } else {
                struct passwd *pw = getpwuid(geteuid());
                char host[256] = "localhost";
                gethostname(host, sizeof(host) - 1);
                author = xasprintf("%s@%s", pw ? pw->pw_name : "unknown", host);
        }
        /* The author is one line of the commit's text form, and UTF-8 like all of it. */
        bool text = lfs_is_utf8(author);
        for (char *p = author; *p; p++)
                if (*p == '\n' || *p == '\r')
                        *p = ' ';
                else if (!text && (unsigned char)*p >= 0x80)
                        *p = '?';
        return author;
}
