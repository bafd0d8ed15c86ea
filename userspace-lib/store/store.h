/* SPDX-License-Identifier: MIT */
/* The Store's internals: ids, trees, objects, the database. */
#ifndef LFS_STORE_H
#define LFS_STORE_H

#include <sqlite3.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fsize.h"
#include "hash.h"
#include "names.h"
#include "util.h"

/* ---- trees (tree.c) ---- */
#define LFS_MODE_FILE 0100644u
#define LFS_MODE_EXEC 0100755u
#define LFS_MODE_LINK 0120000u
#define LFS_MODE_DIR 0040000u

typedef struct lfs_entry {
        char *name;
        uint32_t mode;
        uint64_t size; /* bytes of the blob; 0 for directories */
        lfs_id id;
} lfs_entry;

typedef struct lfs_tree {
        lfs_entry *entries; /* sorted by name, bytewise */
        size_t n, cap;
} lfs_tree;

static inline bool lfs_mode_is_dir(uint32_t mode) {
        return mode == LFS_MODE_DIR;
}
bool lfs_mode_valid(uint32_t mode);
void lfs_tree_done(lfs_tree *t);
/* Appends (takes name); the caller sorts with lfs_tree_sort before serializing. */
void lfs_tree_add(lfs_tree *t, char *name, uint32_t mode, uint64_t size, const lfs_id *id);
void lfs_tree_sort(lfs_tree *t);
const lfs_entry *lfs_tree_find(const lfs_tree *t, const char *name);
/* Its entries that are directories. */
size_t lfs_tree_subdirs(const lfs_tree *t);
void lfs_tree_serialize(const lfs_tree *t, char **ret_data, size_t *ret_len);
int lfs_tree_parse(const void *data, size_t len, lfs_tree *ret, lfs_error **err);
/* A tree's data in a buffer of its reader's (lfs_db_get_tree_data); free(data) when done. */
typedef struct lfs_tree_data {
        char *data;
        size_t len, cap;
} lfs_tree_data;
/* One entry of a tree's data as it lies there: name points into the data (its NUL ends
 * it), nothing else is allocated. */
typedef struct lfs_entry_view {
        const char *name;
        uint32_t mode;
        uint64_t size;
        lfs_id id;
} lfs_entry_view;
/* The entry at data + *pos (len bytes in all), checked as lfs_tree_parse checks each:
 * 1 with *ret set and *pos past it, 0 at the end of the data, or -EIO with the error
 * set for a corrupt tree. prev: the name of the entry before it (NULL for the first),
 * which must sort before its. */
int lfs_tree_entry_next(const char *data, size_t len, size_t *pos, const char *prev, lfs_entry_view *ret,
                        lfs_error **err);
/* The end of the entry at data + pos (of len): pos + its length, or 0 when no whole entry
 * starts there. Nothing is checked but that the entry is whole. */
size_t lfs_tree_entry_end(const char *data, size_t len, size_t pos);
/* The id of the empty tree. */
const lfs_id *lfs_empty_tree_id(void);
/* A name may be stored in a tree: not empty, ".", "..", no '/' or NUL. */
bool lfs_entry_name_valid(const char *name);
/* The longest path the Store records below a tree's root, in bytes: what a path handed
 * to a system call may hold (PATH_MAX less its NUL), so that every recorded path can be
 * written out again. It also bounds a tree's depth (2,048 levels) and each walk's stack. */
#define LFS_PATH_MAX 4095
#define LFS_PATH_MAX_TEXT "4,095"
/* A path too long to quote whole, for a message: its start, "...", its end. */
char *lfs_path_excerpt(const char *path);

/* ---- the io_uring batch layer (uring_io.c) ---- */
typedef struct lfs_io lfs_io;
typedef struct lfs_io_item {
        int dirfd;
        const char *path; /* relative to dirfd */
        const char *new_path; /* renames: the new name, relative to dirfd */
        int open_flags; /* for writes: O_CREAT|O_EXCL|..., mode below */
        /* Reads: path is the caller's own (absolute, symlinks on the way followed). Left
         * false, it is resolved beneath dirfd and no symlink on the way is followed: a
         * tree someone else may change while it is read must not lead elsewhere. */
        bool follow;
        mode_t mode;
        void *buf;
        size_t len;
        int result; /* 0, or a negative errno; -EIO for a short read */
        bool in_flight; /* started and not yet reaped */
        bool write; /* set by the io layer */
        size_t moved; /* a write the ring left short: the bytes it wrote (the io layer's) */
} lfs_io_item;

/* Opens dirfd/path to be read as the items' reads are (lfs_io_item.follow): an fd, or
 * -errno. */
int lfs_io_open_read(int dirfd, const char *path, bool follow);
/* Falls back to plain syscalls when io_uring is unavailable or LAYERFS_NO_URING=1.
 * Not thread-safe: one thread at a time uses an lfs_io (and its lfs_store). */
lfs_io *lfs_io_new(void);
/* Waits for whatever is still in flight first. */
void lfs_io_free(lfs_io *io);
bool lfs_io_uses_uring(const lfs_io *io);
/* Open, read exactly len bytes (a file of another size is -EIO), close; for each item.
 * Each buf must hold len + 1 bytes: the extra byte detects a file that grew. */
int lfs_io_read_files(lfs_io *io, lfs_io_item *items, size_t n);
/* Open with open_flags/mode, write len bytes, close; for each item. */
int lfs_io_write_files(lfs_io *io, lfs_io_item *items, size_t n);
/* lfs_io_read_files (write false) or lfs_io_write_files in two halves, so that the caller
 * can work while the ring does: start returns once the files are on their way (io_uring)
 * or done (plain); the items and their buffers stay untouched until lfs_io_wait_files,
 * which waits for these items (others started may still be in flight) and returns the
 * first failure among them. Start returns a failure of the ring itself only. */
int lfs_io_start_files(lfs_io *io, lfs_io_item *items, size_t n, bool write);
int lfs_io_wait_files(lfs_io *io, lfs_io_item *items, size_t n);
/* Reads at an offset of an open file: many per submission. */
typedef struct lfs_io_at {
        int fd;
        uint64_t offset;
        void *buf;
        size_t len; /* for iov: the sum of its lengths */
        struct iovec *iov; /* lfs_io_start_pwritev: the buffers, instead of buf */
        int iovcnt;
        bool write; /* set by the call */
        int result; /* 0, or a negative errno; -EIO for a short transfer */
} lfs_io_at;
int lfs_io_pread_batch(lfs_io *io, lfs_io_at *items, size_t n);
/* Writes it->iov at it->offset in the background (io_uring) or now (plain): it, its iov
 * and buffers stay untouched until lfs_io_wait_background, after which it->result tells.
 * Returns a failure of the ring itself, or (plain) the write's. */
int lfs_io_start_pwritev(lfs_io *io, lfs_io_at *it);
int lfs_io_wait_background(lfs_io *io);
/* renameat(dirfd, path, dirfd, new_path) for each item. */
int lfs_io_rename_files(lfs_io *io, lfs_io_item *items, size_t n);
#define LFS_IO_BATCH 64

/* ---- the database and the store handle (db.c) ---- */
struct lfs_home {
        char *path; /* its real path, checked as StrictModes would (home.c) */
        int fd; /* the home directory (O_PATH), or -1 until it is made */
        lfs_progress_fn progress;
        void *progress_data;
};

typedef struct lfs_pack_fd {
        sqlite3_int64 pack;
        char *name; /* a pack's row id can be reused once gc deleted it: the name is unique */
        int fd;
} lfs_pack_fd;

struct lfs_store {
        lfs_home *home;
        char *project;
        char *path; /* <home>/projects/<name> */
        int dirfd;
        int objects_fd; /* objects/ */
        int packs_fd; /* objects/packs/ */
        lfs_pack_fd *pack_fds; /* packs opened for reading */
        size_t n_pack_fds, cap_pack_fds;
        sqlite3 *db;
        sqlite3_stmt *get_tree_stmt, *put_tree_stmt, *get_commit_stmt, *locate_stmt;
        sqlite3_stmt *get_old_tree_stmt, *version_stmt; /* while table trees is split (trees_move.c) */
        sqlite3_stmt *get_subdirs_stmt, *put_subdirs_stmt;
        sqlite3_stmt *get_parents_stmt, *set_generation_stmt;
        bool has_tree_subdirs; /* the table is there (see db.c) */
        bool has_generations; /* table commits has its column generation (see db.c) */
        uint64_t commits_read; /* rows of table commits looked up: what the unit tests count of a walk */
        lfs_io *io;
        int gc_lock_fd; /* gc.lock, or -1 until first held */
        unsigned gc_holds; /* lfs_store_hold's depth (gc's own hold counts one) */
};

/* Makes the home if it does not exist yet (0711; missing parents 0755), checked again
 * once made; opens home->fd. */
int lfs_home_make(lfs_home *home, lfs_error **err);
/* Opens the home's directory name (create: made with mode first, and narrowed to mode if
 * it is more open and ours) beneath home->fd without following any symlink; refused with
 * PermissionDenied when it is a symlink or others than the caller and root could change
 * it. -ENOENT (no error set) when it does not exist and create is false. */
int lfs_home_dir(lfs_home *home, const char *name, mode_t mode, bool create, int *ret_fd, lfs_error **err);

/* The home's projects, sorted, with their branches (lfs_project_list without the
 * Sandboxes, which the client counts). */
int lfs_store_project_list(lfs_home *home, lfs_project_info **ret_projects, size_t *ret_n, lfs_error **err);

#define LFS_STORE_APPLICATION_ID 0x4C465331 /* 'LFS1' */
/* How long a statement waits for another connection's lock before it fails. */
#define LFS_DB_BUSY_MS 10000
#define LFS_STORE_SCHEMA 1
/* Table trees split while a conversion to the rowid shape is under way: its rows are in
 * trees (the rowid shape) or in LFS_TREES_OLD (the WITHOUT ROWID shape). A layerfs that
 * reads only version 1 reads table trees alone, and so refuses such a Store at its open
 * rather than missing the rows of the old table (trees_move.c). */
#define LFS_STORE_SCHEMA_SPLIT 2

/* A rowid table, not WITHOUT ROWID: the latter is a B-tree of whole records, so a big tree
 * (100,000 entries: a 9.8 MB row on overflow pages) could be a divider key of an interior
 * page, and SQLite reads a divider's whole record, overflow chain and all, to compare
 * with it: every lookup passing it read the big tree (9.8 MB for another mount's load of
 * a 3-entry directory). A rowid table's interior pages hold only rowids, its index on id
 * only (id, rowid). NOT NULL: a rowid table's PRIMARY KEY takes NULL otherwise. */
#define LFS_TREES_TABLE(name) "CREATE TABLE " name "(id BLOB NOT NULL PRIMARY KEY, data BLOB NOT NULL);"
#define LFS_TREES_OLD "trees_old"

/* Opens (create: makes) the store in dirfd/path, which must be the project's directory. */
/* The project's name: project itself, or the home's only project when it is NULL,
 * checked (a project name, its directory there) without opening its Store: the Sandbox
 * calls need no more. */
int lfs_project_name(lfs_home *home, const char *project, char **ret_name, lfs_error **err);
int lfs_store_open_dir(lfs_home *home, const char *project, const char *path, bool create, lfs_store **ret,
                       lfs_error **err);
int lfs_db_fail(lfs_store *s, lfs_error **err, const char *what);
int lfs_db_exec(lfs_store *s, const char *sql, lfs_error **err);
int lfs_db_begin(lfs_store *s, lfs_error **err); /* BEGIN IMMEDIATE */
int lfs_db_commit(lfs_store *s, lfs_error **err);
void lfs_db_rollback(lfs_store *s);
/* A read transaction around many lookups, where none is open yet: alone, each lookup takes
 * and drops SQLite's WAL read lock (two fcntl and an fstat). Returns whether it began one,
 * for lfs_db_end_read. */
bool lfs_db_begin_read(lfs_store *s);
void lfs_db_end_read(lfs_store *s, bool *began);

/* Whether "SELECT what FROM table" makes sense in this Store: the table is there, and so is
 * the column (a WITHOUT ROWID table has no rowid to select). */
bool lfs_db_can_select(lfs_store *s, const char *what, const char *table);
int lfs_db_pragma_int(lfs_store *s, const char *sql, int *ret, lfs_error **err);
/* Whether table trees is split (LFS_STORE_SCHEMA_SPLIT), in the current transaction's
 * snapshot, or now. */
bool lfs_db_trees_split(lfs_store *s);

/* One short transaction of the conversion of table trees to the rowid shape (a Store made
 * before 2026-12-07): the split (the old table renamed LFS_TREES_OLD, a new trees), or the
 * move of about budget bytes of trees into the new table, or, the old table empty, its
 * drop. Holds gc.lock shared (as a writer) for that transaction only. 1: more to do (*moved
 * grows by the trees moved); 0: table trees has the rowid shape. */
int lfs_trees_convert_step(lfs_store *s, size_t budget, uint64_t *moved, lfs_error **err);
#define LFS_TREES_MOVE_BYTES (4u << 20)

int lfs_db_get_tree(lfs_store *s, const lfs_id *id, lfs_tree *ret, lfs_error **err);
/* Tree id's data as the Store holds it (lfs_tree_serialize's), copied into buf (grown as
 * needed, kept for the next read): for a walk that looks at the entries where they lie
 * (lfs_tree_entry_next) rather than parsing each into an lfs_tree of copied names. The
 * empty tree: len 0. */
int lfs_db_get_tree_data(lfs_store *s, const lfs_id *id, lfs_tree_data *buf, lfs_error **err);
/* subdirs: the tree's count of subdirectories (lfs_tree_subdirs), stored beside it. */
int lfs_db_put_tree(lfs_store *s, const lfs_id *id, const void *data, size_t len, size_t subdirs,
                    lfs_error **err);
/* A tree's count of subdirectories as stored beside it: 0; -ENOENT (no error set) when
 * none is (a tree written before the Store had the table, or by an older layerfs);
 * -EBADMSG (no error set) when the row holds no count a directory can have (negative, not
 * a number, or past LFS_MAX_SUBDIRS: a link count of 2 + it would not fit st_nlink's 32
 * bits in a FUSE reply). */
#define LFS_MAX_SUBDIRS (UINT32_MAX - 2)
int lfs_db_stored_subdirs(lfs_store *s, const lfs_id *id, uint64_t *ret, lfs_error **err);
/* Whether the Store has table tree_subdirs, adding it if it can at once (never waiting for
 * another writer): a Store made before it, or an open that found a writer. */
bool lfs_db_tree_subdirs_table(lfs_store *s);
/* Whether table commits has its column generation, adding it if it can (wait: as long as
 * any writer would, else not at all): a Store made before it, or an open that found a
 * writer. */
bool lfs_db_generation_column(lfs_store *s, bool wait);
int lfs_db_get_commit(lfs_store *s, const lfs_id *id, lfs_commit_info *ret, lfs_error **err);
/* A commit's parents and generation (0: not known yet), without its text: what the walks
 * that need no more read. NoSuchBranch when the commit is not in the Store. */
int lfs_db_get_parents(lfs_store *s, const lfs_id *id, lfs_id ret_parents[2], size_t *ret_n,
                       uint64_t *ret_generation, lfs_error **err);
/* Records a commit's generation where it has none (the column is there). */
int lfs_db_set_generation(lfs_store *s, const lfs_id *id, uint64_t generation, lfs_error **err);
/* Writes the commit with its generation (1 + its parents' highest; 1 for a first commit;
 * none while a parent has none). */
int lfs_db_put_commit(lfs_store *s, const lfs_commit_info *c, lfs_error **err);
/* 0 and *ret set, or -ENOENT (no error set) when the branch does not exist. */
int lfs_db_get_branch(lfs_store *s, const char *name, lfs_id *ret, lfs_error **err);
/* Moves name from expected (NULL: create) to to; -ESTALE with Busy if it moved. */
int lfs_db_cas_branch(lfs_store *s, const char *name, const lfs_id *expected, const lfs_id *to,
                      lfs_error **err);

/* Fills id from the other fields (the canonical text form). */
void lfs_commit_compute_id(lfs_commit_info *c);
void lfs_commit_info_done(lfs_commit_info *c);
/* The branch's head commit; NoSuchBranch when it does not exist. */
int lfs_branch_head(lfs_store *s, const char *name, lfs_id *ret, lfs_error **err);
/* The same, read under the Store's write lock (BEGIN IMMEDIATE, then let go): it waits
 * for a branch delete that is running, which holds that lock from its guard to its end.
 * A Workspace's mount reads its head so, after making its mount point, which closes the
 * race with a delete (userspace-lib/client/branch.c). */
int lfs_branch_head_serial(lfs_store *s, const char *name, lfs_id *ret, lfs_error **err);
/* Asked by lfs_store_delete_branch under the Store's write lock, once the branch is
 * known to exist and before its row goes: a refusal (negative, *err set) deletes nothing. */
typedef int (*lfs_branch_guard_fn)(void *userdata, const char *name, lfs_error **err);
/* Deletes branch name in one write transaction, if guard (when not NULL) allows it;
 * *ret_commit (if not NULL) the head it had. The public lfs_branch_delete (the client's,
 * which knows the Sandboxes) guards it with the Workspaces mounted. */
int lfs_store_delete_branch(lfs_store *s, const char *name, lfs_branch_guard_fn guard, void *userdata,
                            lfs_id *ret_commit, lfs_error **err);
char *lfs_default_author(void);

/* ---- objects (objects.c) ---- */
/* Hashes the size bytes of fd into *ret and, when out_fd >= 0, copies them there with
 * the holes kept: fd's holes (SEEK_DATA/SEEK_HOLE) are hashed as zeros without being read,
 * and neither they nor data chunks of zeros are written (out_fd is truncated to the
 * length at the end, so they read back as zeros and take no blocks). -EIO when fd does not
 * hold exactly size bytes; -ECANCELED once cancelled (if not NULL) says so. */
int lfs_stream_sparse(int fd, uint64_t size, int out_fd, bool (*cancelled)(const void *userdata),
                      const void *userdata, lfs_id *ret);
/* Collects blobs to store: hashes them and writes those the Store lacks under
 * objects/tmp, then publishes them durably (syncfs, rename, syncfs). */
typedef struct lfs_blob_writer lfs_blob_writer;
typedef struct lfs_blob_source {
        int dirfd;
        const char *path; /* a regular file below dirfd */
        bool follow; /* path is the caller's own: lfs_io_item.follow */
        uint64_t size; /* as stat saw it; a file of another size fails */
        bool has_known;
        lfs_id known; /* an id the file had before: no need to write it again */
        lfs_id *ret_id; /* filled once hashed */
        int result; /* lfs_blob_writer_add_files_lenient: 0, or why it was left out */
} lfs_blob_source;

lfs_blob_writer *lfs_blob_writer_new(lfs_store *s);
void lfs_blob_writer_free(lfs_blob_writer *w); /* removes unpublished tmp files */
/* Reads, hashes and (when missing) writes the files; fills each ret_id. */
int lfs_blob_writer_add_files(lfs_blob_writer *w, lfs_blob_source *src, size_t n, lfs_error **err);
/* The same, but a file that cannot be read or changes while it is read is left out (its
 * result set to a negative errno, ret_id untouched, nothing of it kept) rather than
 * failing the call; failing to write the Store still fails it. */
int lfs_blob_writer_add_files_lenient(lfs_blob_writer *w, lfs_blob_source *src, size_t n, lfs_error **err);
/* Long reads ask cancelled(userdata) between chunks and stop with -ECANCELED when it says so. */
void lfs_blob_writer_set_cancel(lfs_blob_writer *w, bool (*cancelled)(void *userdata), void *userdata);
/* A blob from memory (symlink targets). */
int lfs_blob_writer_add_data(lfs_blob_writer *w, const void *data, size_t len, lfs_id *ret_id,
                             lfs_error **err);
/* Makes every written object durable (before the transaction that names them). */
int lfs_blob_writer_publish(lfs_blob_writer *w, lfs_error **err);
/* Inside that transaction: records the packed blobs. */
int lfs_blob_writer_insert_rows(lfs_blob_writer *w, lfs_error **err);
/* After the transaction committed: the objects are the Store's now. */
void lfs_blob_writer_committed(lfs_blob_writer *w);
uint64_t lfs_blob_writer_written(const lfs_blob_writer *w);

/* Blobs up to this size go into pack files; larger ones are loose files of their own. */
#define LFS_PACK_MAX_BLOB (64u << 10)

bool lfs_object_exists(lfs_store *s, const lfs_id *id);
/* Opens a loose object read-only. */
int lfs_object_open(lfs_store *s, const lfs_id *id, lfs_error **err);
int lfs_object_damaged(lfs_store *s, const lfs_id *id, lfs_error **err);

/* ---- packs (pack.c) ---- */
typedef struct lfs_pack_writer lfs_pack_writer;
lfs_pack_writer *lfs_pack_writer_new(lfs_store *s);
void lfs_pack_writer_free(lfs_pack_writer *pw); /* removes the pack unless committed */
int lfs_pack_writer_add(lfs_pack_writer *pw, const lfs_id *id, char *buf, size_t len, lfs_error **err);
int lfs_pack_writer_sync(lfs_pack_writer *pw, lfs_error **err);
/* Inside the commit's transaction. */
int lfs_pack_writer_insert_rows(lfs_pack_writer *pw, lfs_error **err);
void lfs_pack_writer_committed(lfs_pack_writer *pw);
/* Removes packs and tmp objects of writers whose process is gone. */
void lfs_store_remove_leftovers(lfs_store *s);

typedef struct lfs_object_loc {
        int fd; /* the pack (owned by the store), or -1 for a loose object */
        uint64_t offset;
} lfs_object_loc;
int lfs_object_locate(lfs_store *s, const lfs_id *id, lfs_object_loc *ret, lfs_error **err);

typedef struct lfs_object_read {
        lfs_id id;
        uint64_t size;
        char *buf; /* allocated (size + 1, NUL-terminated) by the read; the caller frees it */
} lfs_object_read;
/* Reads objects in batches and checks each against its id. Items start with buf NULL. */
int lfs_object_read_batch(lfs_store *s, lfs_object_read *items, size_t n, lfs_error **err);
int lfs_object_read_whole(lfs_store *s, const lfs_id *id, uint64_t size, char **ret, lfs_error **err);

/* ---- snapshots of a directory (snapshot.c) and the tree builder ---- */
/* Builds the tree of dir (a path) reusing old_tree's ids for unchanged files; trees go
 * to rows (to insert in the commit's transaction) and blobs through w. */
typedef struct lfs_tree_row {
        lfs_id id;
        char *data;
        size_t len;
        size_t subdirs; /* lfs_tree_subdirs */
} lfs_tree_row;
typedef struct lfs_tree_rows {
        lfs_tree_row *items;
        size_t n, cap;
} lfs_tree_rows;
void lfs_tree_rows_add(lfs_tree_rows *rows, const lfs_id *id, char *data, size_t len, size_t subdirs);
int lfs_tree_rows_insert(lfs_store *s, lfs_tree_rows *rows, lfs_error **err);
void lfs_tree_rows_done(lfs_tree_rows *rows);
/* Serializes t, queues the row and returns its id. */
void lfs_tree_store(lfs_tree *t, lfs_tree_rows *rows, lfs_id *ret_id);

int lfs_snapshot_dir(lfs_store *s, lfs_blob_writer *w, const char *dir, const lfs_id *old_tree,
                     lfs_tree_rows *rows, lfs_id *ret_tree, lfs_error **err);

/* Fills author, time and id. */
void lfs_commit_prepare(lfs_commit_info *c, const lfs_id *tree, const lfs_id *parents, size_t n_parents,
                        const char *message);
/* Publishes w's blobs, then in one transaction inserts rows and commits and moves branch
 * from expected (NULL: creates it) to the last commit. */
int lfs_record_commits(lfs_store *s, lfs_blob_writer *w, lfs_tree_rows *rows, const char *branch,
                       const lfs_id *expected, const lfs_commit_info *commits, size_t n, lfs_error **err);
/* A commit message must be given and be UTF-8 text. */
int lfs_check_commit_message(const char *message, lfs_error **err);
/* Records tree (built on base's tree: its new rows in rows, its blobs in w) as branch's
 * next commit after base: nothing when tree is base's tree (*ret_commit: the head); a
 * commit when the branch is still at base; else that commit merged three-way into the
 * head (*ret_merged 1; a conflict changes nothing), again against any commit that lands
 * while it runs (never Busy for the race). */
int lfs_store_commit_tree(lfs_store *s, lfs_blob_writer *w, lfs_tree_rows *rows, const char *branch,
                          const lfs_id *base, const lfs_id *tree, const char *message, lfs_id *ret_commit,
                          int *ret_merged, lfs_error **err);
/* Records tree as a commit on branch (moving it from expected, NULL to create). */
int lfs_record_commit(lfs_store *s, lfs_blob_writer *w, lfs_tree_rows *rows, const char *branch,
                      const lfs_id *expected, const lfs_id *tree, const lfs_id *parents, size_t n_parents,
                      const char *message, lfs_id *ret_commit, lfs_error **err);

/* ---- the gc lock and Workspace pins (gc.c) ---- */
/* Holds the Store's gc lock (<store>/gc.lock, flock) shared, waiting while a gc runs; nested
 * holds of one handle count. Every writing operation holds it from before its first look at
 * what the Store has (an object found present is not written again) until its transaction
 * ended, and gc holds it exclusive from its mark to its last removal: so no gc ever sees an
 * object written, or counted on, by a commit whose rows are not committed yet. */
int lfs_store_hold(lfs_store *s, lfs_error **err);
void lfs_store_release(lfs_store *s);
/* lfs_store_hold until the end of the caller's scope: on success *ret_held is s, which
 * _cleanup_store_hold_ releases (NULL, after a failed hold, releases nothing). */
int lfs_store_hold_scoped(lfs_store *s, lfs_store **ret_held, lfs_error **err);
static inline void lfs_store_releasep(lfs_store **held) {
        if (*held)
                lfs_store_release(*held);
}
#define _cleanup_store_hold_ _cleanup_(lfs_store_releasep)
/* Branch deletions since the last gc, for the idle close's gc (LAYERFS_GC_AFTER_DELETES):
 * counted in table gc_state, made by the first delete (older Stores lack it: 0). */
int lfs_store_count_delete(lfs_store *s, lfs_error **err); /* inside the delete's transaction */
int lfs_store_deleted_branches(lfs_store *s, uint64_t *ret, lfs_error **err);

/* A gc that its caller may want to end early (the daemon's at its idle close). */
typedef struct lfs_gc_control {
        bool no_wait; /* writers at work: -EWOULDBLOCK at once, nothing done (no wait for them) */
        const _Atomic bool *stop; /* set meanwhile: -ECANCELED before the gc changes anything */
} lfs_gc_control;
/* lfs_store_gc under control (NULL: lfs_store_gc's own behaviour). Once its changes have
 * begun it goes on to their end: stop is looked at only while it plans. */
int lfs_store_gc_controlled(lfs_store *s, const lfs_gc_options *options, const lfs_gc_control *control,
                            lfs_gc_result *ret, lfs_error **err);
/* A pin keeps commits (and all they reach) from gc while its owner lives: a file under
 * <store>/pins/ naming them, flock'ed by its owner; gc takes a pin whose lock is free for
 * the remains of a dead owner and removes it. A Workspace pins every base it has had.
 * lfs_pin_new and lfs_pin_add are called with the Store held (lfs_store_hold). */
typedef struct lfs_pin lfs_pin;
int lfs_pin_new(lfs_store *s, const lfs_id *commit, lfs_pin **ret, lfs_error **err);
int lfs_pin_add(lfs_pin *pin, const lfs_id *commit, lfs_error **err);
void lfs_pin_free(lfs_pin *pin);

/* Calls visit for root and every tree below it not yet in seen (adding each), with the
 * tree's entries; each tree once. */
typedef int (*lfs_tree_visit_fn)(void *userdata, const lfs_id *id, const lfs_tree *t, lfs_error **err);
int lfs_for_each_tree(lfs_store *s, const lfs_id *root, lfs_idset *seen, lfs_tree_visit_fn visit,
                      void *userdata, lfs_error **err);

/* ---- diff and merge (diff.c, merge.c) ---- */
typedef struct lfs_change_list {
        lfs_change *items;
        size_t n, cap;
} lfs_change_list;
int lfs_tree_diff(lfs_store *s, const lfs_id *a, const lfs_id *b, lfs_change_list *ret, lfs_error **err);
/* Appends every leaf below tree (files, symlinks, empty directories; path itself when the
 * tree is empty), as kind, to out. */
int lfs_tree_leaves(lfs_store *s, const lfs_id *tree, const char *path, lfs_change_kind kind,
                    lfs_change_list *out, lfs_error **err);
int lfs_merge_base(lfs_store *s, const lfs_id *a, const lfs_id *b, lfs_id *ret, bool *ret_found,
                   lfs_error **err);
/* 3-way merge of trees; conflicts end as LFS_CONFLICT listing every path. */
int lfs_merge_trees(lfs_store *s, const lfs_id *base, const lfs_id *ours, const lfs_id *theirs,
                    lfs_tree_rows *rows, lfs_id *ret_tree, lfs_error **err);
/* Calls visit once for start and each of its ancestors not yet in seen (adding them). */
typedef int (*lfs_commit_visit_fn)(void *userdata, const lfs_commit_info *c, lfs_error **err);
int lfs_for_each_ancestor(lfs_store *s, const lfs_id *start, lfs_idset *seen, lfs_commit_visit_fn visit,
                          void *userdata, lfs_error **err);
/* Is a an ancestor of (or equal to) b? */
int lfs_is_ancestor(lfs_store *s, const lfs_id *a, const lfs_id *b, bool *ret, lfs_error **err);

/* ---- commits' generations (generation.c) ---- */
/* Gives start and each of its ancestors without a generation theirs, in transactions of at
 * most chunk commits each (the column added first if it is missing). 0 once start has one
 * (at once when it had: one row read); Busy as a commit would be when another writer held
 * the Store past busy_timeout, what it filled kept. */
int lfs_generations_fill(lfs_store *s, const lfs_id *start, size_t chunk, lfs_error **err);
#define LFS_GENERATIONS_CHUNK 4096
/* The right generation of commit c (its parents' read): 0, or Failed naming the commit and
 * the fix when the one stored is wrong (project verify). */
int lfs_generation_check(lfs_store *s, const lfs_commit_info *c, lfs_error **err);

#endif
