/* SPDX-License-Identifier: MIT */
/* Pack files: small blobs appended to one file per writing operation, with their
 * places (pack, offset, size) in the blobs table. Creating a file costs more than
 * writing 4 KiB on most filesystems, so packing small blobs is what makes an import of
 * thousands of small files cheap. The pack is fdatasync'ed before the transaction that
 * inserts its rows, so every row names bytes that are on disk; a pack without rows is
 * garbage from an interrupted writer. The writer holds flock on its pack until its rows
 * committed (leftover.h): a pack without rows and without a lock is a killed writer's,
 * removed by the next one. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "leftover.h"
#include "store.h"

typedef struct packed_blob {
        lfs_id id;
        uint64_t offset, size;
} packed_blob;

typedef struct pack_batch {
        struct iovec *iov; /* the write may advance these: bufs keeps what to free */
        char **bufs;
        size_t n, cap_iov, cap_bufs;
        lfs_io_at at;
} pack_batch;

static void pack_batch_clear(pack_batch *b) {
        for (size_t i = 0; i < b->n; i++)
                free(b->bufs[i]);
        b->n = 0;
}

static void pack_batch_done(pack_batch *b) {
        pack_batch_clear(b);
        free(b->iov);
        free(b->bufs);
}

struct lfs_pack_writer {
        lfs_store *s;
        int fd;
        char *name; /* below objects/packs/ */
        uint64_t size;
        packed_blob *blobs;
        size_t n_blobs, cap_blobs;
        /* Blobs not yet submitted, in pack order (buffers owned), and the batch before
         * them, being written in the background: one vectored write each. */
        pack_batch queue, flying;
        bool synced, committed;
};

lfs_pack_writer *lfs_pack_writer_new(lfs_store *s) {
        lfs_pack_writer *pw = xcalloc(1, sizeof(*pw));
        pw->s = s;
        pw->fd = -1;
        return pw;
}

void lfs_pack_writer_free(lfs_pack_writer *pw) {
        if (!pw)
                return;
        /* The kernel may still be reading the buffers in flight. */
        if (pw->flying.n)
                (void)lfs_io_wait_background(pw->s->io);
        pack_batch_done(&pw->queue);
        pack_batch_done(&pw->flying);
        /* Removed before its lock goes with the close: locked, it is never a leftover. */
        if (pw->name && !pw->committed)
                unlinkat(pw->s->packs_fd, pw->name, 0);
        if (pw->fd >= 0)
                close(pw->fd);
        free(pw->name);
        free(pw->blobs);
        free(pw);
}

static bool pack_is_recorded(lfs_store *s, const char *name) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM packs WHERE name=?", -1, &st, NULL) != SQLITE_OK)
                return true; /* when in doubt, keep it */
        sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        return rc != SQLITE_DONE;
}

/* The names the packs table held when the sweep began, sorted. */
typedef struct recorded_packs {
        lfs_store *s;
        char **names;
        size_t n;
        bool loaded; /* false: unread, every pack kept */
} recorded_packs;

static void recorded_packs_load(recorded_packs *rp) {
        sqlite3_stmt *st;
        size_t cap = 0;
        if (sqlite3_prepare_v2(rp->s->db, "SELECT name FROM packs", -1, &st, NULL) != SQLITE_OK)
                return;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                GROW(rp->names, cap, rp->n + 1);
                rp->names[rp->n++] = xstrdup((const char *)sqlite3_column_text(st, 0));
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) {
                /* When in doubt, keep every pack. */
                for (size_t i = 0; i < rp->n; i++)
                        free(rp->names[i]);
                free(TAKE_PTR(rp->names));
                rp->n = 0;
                return;
        }
        if (rp->n)
                qsort(rp->names, rp->n, sizeof(*rp->names), lfs_strcmp_ptrs);
        rp->loaded = true;
}

/* A pack no row names: looked up in the list read once (one query for the whole
 * directory, as one per pack would cost every writer's start), then again once its lock
 * is held (its writer may have committed and let go meanwhile). */
static bool pack_unrecorded(void *userdata, const char *name, bool locked) {
        recorded_packs *rp = userdata;
        if (locked)
                return !pack_is_recorded(rp->s, name);
        return rp->loaded &&
               (!rp->n || !bsearch(&name, rp->names, rp->n, sizeof(*rp->names), lfs_strcmp_ptrs));
}

void lfs_store_remove_leftovers(lfs_store *s) {
        _cleanup_close_ int tmp_fd = openat(s->objects_fd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (tmp_fd >= 0)
                (void)lfs_leftovers_remove(tmp_fd, "", NULL, NULL);
        recorded_packs rp = { .s = s };
        recorded_packs_load(&rp);
        (void)lfs_leftovers_remove(s->packs_fd, "", pack_unrecorded, &rp);
        for (size_t i = 0; i < rp.n; i++)
                free(rp.names[i]);
        free(rp.names);
}

static int pack_failed(lfs_pack_writer *pw, int r, lfs_error **err) {
        return lfs_fail(err, LFS_FAILED, r, "cannot write pack %s/objects/packs/%s: %s%s", pw->s->path,
                        pw->name ? pw->name : "(new)", strerror(-r), lfs_fsize_hint(-r));
}

/* The pack's file, locked while this writer may still record it (a name another writer
 * holds or is removing is passed by for the next). */
static int open_pack(lfs_pack_writer *pw, lfs_error **err) {
        static unsigned counter;
        int fd = -EEXIST;
        for (int attempt = 0; attempt < 8 && (fd == -EEXIST || fd == -EBUSY); attempt++) {
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                free(pw->name);
                pw->name = xasprintf("%d-%llx-%u.pack", (int)getpid(),
                                     (unsigned long long)now.tv_sec * 1000000000ull +
                                             (unsigned long long)now.tv_nsec,
                                     __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
                fd = lfs_leftover_make(pw->s->packs_fd, pw->name, O_WRONLY, 0444);
        }
        if (fd < 0) {
                free(TAKE_PTR(pw->name));
                return pack_failed(pw, fd, err);
        }
        pw->fd = fd;
        return 0;
}

/* Waits for the batch in flight, if any, and frees its buffers. */
static int land(lfs_pack_writer *pw, lfs_error **err) {
        if (!pw->flying.n)
                return 0;
        int r = lfs_io_wait_background(pw->s->io);
        if (r == 0)
                r = pw->flying.at.result;
        pack_batch_clear(&pw->flying);
        return r < 0 ? pack_failed(pw, r, err) : 0;
}

/* Starts the queued blobs' write, in the background where io_uring runs: the caller reads
 * and hashes the next files meanwhile. */
static int flush(lfs_pack_writer *pw, lfs_error **err) {
        int r = land(pw, err);
        if (r < 0 || !pw->queue.n)
                return r;
        pack_batch b = pw->queue;
        pw->queue = pw->flying;
        size_t len = 0;
        for (size_t i = 0; i < b.n; i++)
                len += b.iov[i].iov_len;
        b.at = (lfs_io_at){
                .fd = pw->fd, .offset = pw->size - len, .len = len, .iov = b.iov, .iovcnt = (int)b.n
        };
        pw->flying = b;
        r = lfs_io_start_pwritev(pw->s->io, &pw->flying.at);
        if (r < 0 && !lfs_io_uses_uring(pw->s->io))
                pack_batch_clear(&pw->flying); /* the plain write failed: nothing in flight */
        return r < 0 ? pack_failed(pw, r, err) : 0;
}

int lfs_pack_writer_add(lfs_pack_writer *pw, const lfs_id *id, char *buf, size_t len, lfs_error **err) {
        int r = 0;
        if (pw->fd < 0 && (r = open_pack(pw, err)) < 0) {
                free(buf);
                return r;
        }
        GROW(pw->blobs, pw->cap_blobs, pw->n_blobs + 1);
        pw->blobs[pw->n_blobs++] = (packed_blob){ .id = *id, .offset = pw->size, .size = len };
        pack_batch *q = &pw->queue;
        GROW(q->iov, q->cap_iov, q->n + 1);
        GROW(q->bufs, q->cap_bufs, q->n + 1);
        q->iov[q->n] = (struct iovec){ .iov_base = buf, .iov_len = len };
        q->bufs[q->n++] = buf;
        pw->size += len;
        pw->synced = false;
        if (q->n >= LFS_IO_BATCH)
                r = flush(pw, err);
        return r;
}

int lfs_pack_writer_sync(lfs_pack_writer *pw, lfs_error **err) {
        if (pw->fd < 0 || pw->synced)
                return 0;
        int r = flush(pw, err);
        if (r < 0 || (r = land(pw, err)) < 0)
                return r;
        /* The data, then the directory entry that names the new file. */
        if (fdatasync(pw->fd) < 0 || fsync(pw->s->packs_fd) < 0)
                return pack_failed(pw, -errno, err);
        pw->synced = true;
        return 0;
}

int lfs_pack_writer_insert_rows(lfs_pack_writer *pw, lfs_error **err) {
        if (!pw->n_blobs)
                return 0;
        lfs_store *s = pw->s;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "INSERT INTO packs(name) VALUES(?)", -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "record a pack");
        sqlite3_bind_text(st, 1, pw->name, -1, SQLITE_STATIC);
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
                return lfs_db_fail(s, err, "record a pack");
        sqlite3_int64 pack = sqlite3_last_insert_rowid(s->db);
        if (sqlite3_prepare_v2(s->db,
                               "INSERT OR IGNORE INTO blobs(id, pack, offset, size) VALUES(?, ?, ?, ?)", -1,
                               &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "record a blob");
        int r = 0;
        for (size_t i = 0; i < pw->n_blobs && r == 0; i++) {
                sqlite3_reset(st);
                sqlite3_bind_blob(st, 1, pw->blobs[i].id.bytes, LFS_ID_LEN, SQLITE_STATIC);
                sqlite3_bind_int64(st, 2, pack);
                sqlite3_bind_int64(st, 3, (sqlite3_int64)pw->blobs[i].offset);
                sqlite3_bind_int64(st, 4, (sqlite3_int64)pw->blobs[i].size);
                if (sqlite3_step(st) != SQLITE_DONE)
                        r = lfs_db_fail(s, err, "record a blob");
        }
        sqlite3_finalize(st);
        return r;
}

void lfs_pack_writer_committed(lfs_pack_writer *pw) {
        pw->committed = true;
}

/* ---- reading ---- */

/* The pack's fd, opened once per handle: an open pack stays readable after a gc rewrote it
 * and removed its file, so a read that located a blob before the gc still reads it. Known
 * by id and name: gc deletes pack rows, and SQLite may give a later pack a deleted id. */
static int pack_fd(lfs_store *s, sqlite3_int64 pack, const char *name, lfs_error **err) {
        for (size_t i = 0; i < s->n_pack_fds; i++)
                if (s->pack_fds[i].pack == pack && !strcmp(s->pack_fds[i].name, name))
                        return s->pack_fds[i].fd;
        int fd = openat(s->packs_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                int e = errno;
                return lfs_fail(err, LFS_FAILED, e,
                                "pack %s of project '%s' cannot be opened (%s); the Store is damaged", name,
                                s->project, strerror(e));
        }
        GROW(s->pack_fds, s->cap_pack_fds, s->n_pack_fds + 1);
        s->pack_fds[s->n_pack_fds++] = (lfs_pack_fd){ .pack = pack, .name = xstrdup(name), .fd = fd };
        return fd;
}

static int locate_once(lfs_store *s, const lfs_id *id, lfs_object_loc *ret, lfs_error **err) {
        if (!s->locate_stmt &&
            sqlite3_prepare_v3(s->db,
                               "SELECT b.pack, b.offset, p.name FROM blobs b JOIN packs p ON p.id = b.pack "
                               "WHERE b.id = ?",
                               -1, SQLITE_PREPARE_PERSISTENT, &s->locate_stmt, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "look up a blob");
        sqlite3_stmt *st = s->locate_stmt;
        sqlite3_reset(st);
        sqlite3_bind_blob(st, 1, id->bytes, LFS_ID_LEN, SQLITE_STATIC);
        int rc = sqlite3_step(st), r = 0;
        if (rc == SQLITE_ROW) {
                int fd = pack_fd(s, sqlite3_column_int64(st, 0), (const char *)sqlite3_column_text(st, 2),
                                 err);
                if (fd < 0)
                        r = fd;
                else
                        *ret = (lfs_object_loc){ .fd = fd, .offset = (uint64_t)sqlite3_column_int64(st, 1) };
        } else if (rc == SQLITE_DONE) {
                *ret = (lfs_object_loc){ .fd = -1 };
        } else {
                r = lfs_db_fail(s, err, "look up a blob");
        }
        sqlite3_reset(st);
        return r;
}

int lfs_object_locate(lfs_store *s, const lfs_id *id, lfs_object_loc *ret, lfs_error **err) {
        lfs_error *first = NULL;
        int r = locate_once(s, id, ret, &first);
        /* A gc that rewrote the pack between the row's read and the open: the row says
         * where the blob is now. */
        if (r == -ENOENT) {
                lfs_error_free(first);
                first = NULL;
                r = locate_once(s, id, ret, &first);
        }
        if (r < 0 && err && !*err)
                *err = TAKE_PTR(first);
        lfs_error_free(first);
        return r;
}

bool lfs_object_exists(lfs_store *s, const lfs_id *id) {
        lfs_object_loc loc = { .fd = -1 };
        if (lfs_object_locate(s, id, &loc, NULL) == 0 && loc.fd >= 0)
                return true;
        char path[LFS_HEX_LEN + 2];
        lfs_id_object_path(id, path);
        return faccessat(s->objects_fd, path, F_OK, AT_EACCESS) == 0;
}

int lfs_object_damaged(lfs_store *s, const lfs_id *id, lfs_error **err) {
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(id, hex);
        return lfs_fail(
                err, LFS_FAILED, EIO,
                "object %s of project '%s' is missing or does not match its id; the Store is damaged; "
                "'layerfs project verify' checks it",
                hex, s->project);
}

/* A lookup of a batch, in the batch's read transaction (lfs_db_begin_read): one that fails
 * ends it and runs again alone, since a gc may have moved the blob after the transaction's
 * snapshot. */
static int locate_in_batch(lfs_store *s, const lfs_id *id, bool *reading, lfs_object_loc *ret,
                           lfs_error **err) {
        if (*reading && locate_once(s, id, ret, NULL) == 0)
                return 0;
        lfs_db_end_read(s, reading);
        return lfs_object_locate(s, id, ret, err);
}

typedef struct packed_read {
        size_t item;
        lfs_object_loc loc;
} packed_read;

static int by_place(const void *a, const void *b) {
        const packed_read *x = a, *y = b;
        if (x->loc.fd != y->loc.fd)
                return x->loc.fd < y->loc.fd ? -1 : 1;
        return x->loc.offset < y->loc.offset ? -1 : x->loc.offset > y->loc.offset;
}

int lfs_object_read_batch(lfs_store *s, lfs_object_read *items, size_t n, lfs_error **err) {
        for (size_t off = 0; off < n; off += LFS_IO_BATCH) {
                size_t k = n - off < LFS_IO_BATCH ? n - off : LFS_IO_BATCH;
                lfs_object_read *batch = items + off;
                /* Zeroed: cppcheck cannot tell that qsort reads the first n_packed only. */
                packed_read packed[LFS_IO_BATCH] = { 0 };
                lfs_io_at runs[LFS_IO_BATCH];
                struct iovec iov[LFS_IO_BATCH];
                size_t run_first[LFS_IO_BATCH]; /* its first entry of packed */
                lfs_io_item loose[LFS_IO_BATCH];
                char names[LFS_IO_BATCH][LFS_HEX_LEN + 2];
                size_t loose_item[LFS_IO_BATCH];
                size_t n_packed = 0, n_runs = 0, n_loose = 0;
                bool reading = lfs_db_begin_read(s);
                int r = 0;
                for (size_t i = 0; i < k && r == 0; i++) {
                        lfs_object_loc loc = { .fd = -1 };
                        if ((r = locate_in_batch(s, &batch[i].id, &reading, &loc, err)) < 0)
                                break;
                        batch[i].buf = xmalloc(batch[i].size + 1);
                        if (loc.fd >= 0) {
                                packed[n_packed++] = (packed_read){ .item = i, .loc = loc };
                        } else {
                                loose_item[n_loose] = i;
                                lfs_id_object_path(&batch[i].id, names[n_loose]);
                                loose[n_loose] = (lfs_io_item){ .dirfd = s->objects_fd,
                                                                .path = names[n_loose],
                                                                .buf = batch[i].buf,
                                                                .len = batch[i].size };
                                n_loose++;
                        }
                }
                lfs_db_end_read(s, &reading);
                if (r < 0)
                        return r;
                /* Blobs side by side in a pack (an export reads them in the order an import
                 * wrote them) are one vectored read, into their own buffers. */
                qsort(packed, n_packed, sizeof(*packed), by_place);
                for (size_t j = 0; j < n_packed; j++) {
                        const packed_read *p = &packed[j];
                        lfs_io_at *run = n_runs ? &runs[n_runs - 1] : NULL;
                        uint64_t size = batch[p->item].size;
                        iov[j] = (struct iovec){ .iov_base = batch[p->item].buf, .iov_len = size };
                        if (run && run->fd == p->loc.fd && run->offset + run->len == p->loc.offset) {
                                run->iovcnt++;
                                run->len += size;
                                continue;
                        }
                        run_first[n_runs] = j;
                        runs[n_runs++] = (lfs_io_at){ .fd = p->loc.fd,
                                                      .offset = p->loc.offset,
                                                      .len = size,
                                                      .iov = &iov[j],
                                                      .iovcnt = 1 };
                }
                r = lfs_io_pread_batch(s->io, runs, n_runs);
                if (r == 0)
                        r = lfs_io_read_files(s->io, loose, n_loose);
                for (size_t i = 0; r < 0 && i < n_runs; i++)
                        if (runs[i].result < 0)
                                return lfs_object_damaged(s, &batch[packed[run_first[i]].item].id, err);
                for (size_t i = 0; r < 0 && i < n_loose; i++)
                        if (loose[i].result < 0)
                                return lfs_object_damaged(s, &batch[loose_item[i]].id, err);
                if (r < 0)
                        return lfs_fail(err, LFS_FAILED, r, "cannot read objects of project '%s': %s",
                                        s->project, strerror(-r));
                for (size_t i = 0; i < k; i++) {
                        lfs_id got;
                        lfs_sha256(batch[i].buf, batch[i].size, &got);
                        if (!lfs_id_eq(&got, &batch[i].id))
                                return lfs_object_damaged(s, &batch[i].id, err);
                        ((char *)batch[i].buf)[batch[i].size] = 0;
                }
        }
        return 0;
}

int lfs_object_read_whole(lfs_store *s, const lfs_id *id, uint64_t size, char **ret, lfs_error **err) {
        lfs_object_read item = { .id = *id, .size = size };
        int r = lfs_object_read_batch(s, &item, 1, err);
        if (r < 0) {
                free(item.buf);
                return r;
        }
        *ret = item.buf;
        return 0;
}
