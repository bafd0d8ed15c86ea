/* SPDX-License-Identifier: MIT */
/* The conversion of table trees from the WITHOUT ROWID shape (Stores made before
 * 2026-12-07) to the rowid shape (LFS_TREES_TABLE in store.h says why), in short
 * transactions, never one long one: a copy of the whole table in one transaction held the
 * Store's write lock for 21 s on 1 GB of trees (other writers gave up Busy after their
 * 10 s), and its rolled-back WAL filled a disk without twice the trees free.
 *
 * The states, each a committed transaction away from the next:
 * - whole: one table trees, of either shape, schema version LFS_STORE_SCHEMA;
 * - split: the old table renamed LFS_TREES_OLD, a new rowid table trees beside it, schema
 *   version LFS_STORE_SCHEMA_SPLIT. Every tree written goes to trees; a lookup reads
 *   trees, then the old table. Each step moves the first rows of the old table (in id
 *   order) up to a budget of bytes into trees and deletes them there, in one
 *   transaction;
 * - whole again once the old table is empty: it is dropped and the version goes back, so
 *   a layerfs that reads only the first version reads the converted Store too.
 * A crash between steps leaves a state above, all of whose trees read right; one inside
 * a step leaves the state before it. Two processes converting at once take turns: each
 * step looks at the state again once it holds the write lock. A step holds gc.lock
 * shared, as a writer does: a gc's view of the state (which tables to list, which to
 * delete from) does not change under it. */
#include "fault.h"
#include "store.h"

static void value_freep(sqlite3_value **v) {
        sqlite3_value_free(*v);
}

/* The first rows of the old table, in id order, up to about budget bytes (at least one):
 * their number, 0 if none, and the id of the last, which every id of them is at most. */
static int pick_chunk(lfs_store *s, size_t budget, sqlite3_value **ret_last, lfs_error **err) {
        sqlite3_stmt *st;
        /* length() of a blob reads its size from the record's header, not its overflow
         * pages. */
        if (sqlite3_prepare_v2(s->db, "SELECT id, length(data) FROM " LFS_TREES_OLD " ORDER BY id", -1, &st,
                               NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "list the trees to move");
        _cleanup_(value_freep) sqlite3_value *last = NULL;
        size_t bytes = 0;
        int n = 0, rc = SQLITE_DONE;
        while (bytes < budget && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                bytes += (size_t)sqlite3_column_int64(st, 1) + LFS_ID_LEN;
                n++;
                sqlite3_value_free(last);
                last = sqlite3_value_dup(sqlite3_column_value(st, 0));
                if (!last)
                        rc = SQLITE_NOMEM;
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return lfs_db_fail(s, err, "list the trees to move");
        *ret_last = TAKE_PTR(last);
        return n;
}

/* Inside the step's transaction: the chunk copied into trees (a tree written there
 * meanwhile is one already: the same id, the same data) and deleted from the old table. */
static int move_chunk(lfs_store *s, size_t budget, uint64_t *moved, lfs_error **err) {
        _cleanup_(value_freep) sqlite3_value *last = NULL;
        int n = pick_chunk(s, budget, &last, err);
        if (n <= 0)
                return n;
        static const char *const moves[] = {
                "INSERT OR IGNORE INTO trees(id, data) SELECT id, data FROM " LFS_TREES_OLD " WHERE id <= ?",
                "DELETE FROM " LFS_TREES_OLD " WHERE id <= ?",
        };
        for (size_t i = 0; i < ELEMENTSOF(moves); i++) {
                sqlite3_stmt *st;
                if (sqlite3_prepare_v2(s->db, moves[i], -1, &st, NULL) != SQLITE_OK)
                        return lfs_db_fail(s, err, "move trees");
                sqlite3_bind_value(st, 1, last);
                int rc = sqlite3_step(st);
                sqlite3_finalize(st);
                if (rc != SQLITE_DONE)
                        return lfs_db_fail(s, err, "move trees");
        }
        *moved += (uint64_t)n;
        return 1;
}

/* Inside the step's transaction, the state looked at again: 1 when a step was made. */
static int step(lfs_store *s, size_t budget, uint64_t *moved, lfs_error **err) {
        if (!lfs_db_trees_split(s)) {
                if (lfs_db_can_select(s, "rowid", "trees"))
                        return 0;
                /* The rename takes the old table's index along (sqlite_autoindex_trees_1). */
                _cleanup_free_ char *sql = xasprintf("ALTER TABLE trees RENAME TO " LFS_TREES_OLD
                                                     ";" LFS_TREES_TABLE("trees") " PRAGMA user_version=%d",
                                                     LFS_STORE_SCHEMA_SPLIT);
                int r = lfs_db_exec(s, sql, err);
                if (r < 0)
                        return r;
                lfs_fault_point("store-trees-split");
                return 1;
        }
        int r = move_chunk(s, budget, moved, err);
        if (r != 0)
                return r;
        /* The old table empty: the Store whole again, of the rowid shape. */
        _cleanup_free_ char *sql =
                xasprintf("DROP TABLE " LFS_TREES_OLD "; PRAGMA user_version=%d", LFS_STORE_SCHEMA);
        r = lfs_db_exec(s, sql, err);
        return r < 0 ? r : 1;
}

int lfs_trees_convert_step(lfs_store *s, size_t budget, uint64_t *moved, lfs_error **err) {
        /* Nothing to do, looked at without the write lock (in one snapshot: a split
         * between the two looks would pass for the end): the common case waits for no one. */
        bool began = lfs_db_begin_read(s);
        bool done = !lfs_db_trees_split(s) && lfs_db_can_select(s, "rowid", "trees");
        lfs_db_end_read(s, &began);
        if (done)
                return 0;
        _cleanup_store_hold_ lfs_store *held = NULL;
        int r = lfs_store_hold_scoped(s, &held, err), secure_delete = 0;
        if (r < 0)
                return r;
        /* The rows move, nothing is deleted for good: no page freed needs zeros, which
         * would double what each step writes. */
        if ((r = lfs_db_pragma_int(s, "PRAGMA secure_delete", &secure_delete, err)) < 0 ||
            (r = lfs_db_exec(s, "PRAGMA secure_delete=0", err)) < 0)
                return r;
        if ((r = lfs_db_begin(s, err)) == 0) {
                r = step(s, budget, moved, err);
                if (r > 0) {
                        lfs_fault_point("store-trees-step"); /* the step made, not committed */
                        r = lfs_db_commit(s, err) ?: 1;
                } else {
                        lfs_db_rollback(s);
                }
        }
        _cleanup_free_ char *restore = xasprintf("PRAGMA secure_delete=%d", secure_delete);
        (void)lfs_db_exec(s, restore, NULL);
        /* What the step wrote goes from the WAL into the database and the WAL is cut back,
         * so that it stays about one step long, not as long as the steps since a writer
         * last found it unread. Without waiting: a writer or a reader in the way makes it
         * a passive checkpoint (as much as the readers let, the WAL kept), and holds up no
         * one. */
        if (r > 0) {
                sqlite3_busy_timeout(s->db, 0);
                (void)sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
                sqlite3_busy_timeout(s->db, LFS_DB_BUSY_MS);
        }
        return r;
}
