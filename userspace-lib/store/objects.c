/* SPDX-License-Identifier: MIT */
/* Blob objects, named by the SHA-256 of their contents. Small ones go into the
 * operation's pack (pack.c); larger ones are loose files under objects/xx/, written under
 * objects/tmp first and renamed into place only after their data is durable, so a loose
 * object that exists under its name is always whole. A writer's temporary objects are in a
 * directory of its own, objects/tmp/<pid>-<n>/, made at its first and locked for as long as
 * it runs (leftover.h): the next writer removes those no writer holds. */
#include <fcntl.h>
#include <sys/stat.h>

#include "fault.h"
#include "leftover.h"
#include "store.h"

#define STREAM_CHUNK (1u << 20)

typedef struct queued_write {
        lfs_id id;
        char *tmp; /* "tmp/<writer>/<n>" below objects/ */
        char *buf;
        size_t len;
} queued_write;

struct lfs_blob_writer {
        lfs_store *s;
        lfs_idset scheduled; /* written (or queued) during this run */
        queued_write *queue; /* data not yet written */
        size_t n_queue, cap_queue;
        queued_write *pending; /* written under tmp/, not yet published */
        size_t n_pending, cap_pending;
        lfs_pack_writer *pack;
        char *tmp_dir; /* "tmp/<pid>-<n>" below objects/, once made */
        int tmp_dir_fd; /* holds its lock; -1 before */
        unsigned long tmp_files; /* named so far */
        uint64_t written;
        uint64_t files_done, files_total;
        bool lenient; /* a source that cannot be read is left out, not an error */
        bool (*cancelled)(void *userdata);
        void *cancel_data;
};

lfs_blob_writer *lfs_blob_writer_new(lfs_store *s) {
        lfs_blob_writer *w = xcalloc(1, sizeof(*w));
        w->s = s;
        /* Each writing operation sweeps what killed writers left, so garbage stays bounded. */
        lfs_store_remove_leftovers(s);
        w->pack = lfs_pack_writer_new(s);
        w->tmp_dir_fd = -1;
        return w;
}

void lfs_blob_writer_free(lfs_blob_writer *w) {
        if (!w)
                return;
        for (size_t i = 0; i < w->n_queue; i++) {
                free(w->queue[i].buf);
                free(w->queue[i].tmp);
        }
        for (size_t i = 0; i < w->n_pending; i++) {
                unlinkat(w->s->objects_fd, w->pending[i].tmp, 0);
                free(w->pending[i].tmp);
        }
        /* Removed while locked: then no other writer takes it for a leftover. */
        if (w->tmp_dir)
                (void)rm_rf_at(w->s->objects_fd, w->tmp_dir);
        if (w->tmp_dir_fd >= 0)
                close(w->tmp_dir_fd);
        free(w->tmp_dir);
        free(w->queue);
        free(w->pending);
        lfs_pack_writer_free(w->pack);
        lfs_idset_done(&w->scheduled);
        free(w);
}

uint64_t lfs_blob_writer_written(const lfs_blob_writer *w) {
        return w->written;
}

void lfs_blob_writer_set_cancel(lfs_blob_writer *w, bool (*cancelled)(void *userdata), void *userdata) {
        w->cancelled = cancelled;
        w->cancel_data = userdata;
}

static bool is_cancelled(const lfs_blob_writer *w) {
        return w->cancelled && w->cancelled(w->cancel_data);
}

int lfs_object_open(lfs_store *s, const lfs_id *id, lfs_error **err) {
        char path[LFS_HEX_LEN + 2];
        lfs_id_object_path(id, path);
        int fd = openat(s->objects_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return lfs_fail(err, LFS_FAILED, errno,
                                "object %s of project '%s' cannot be opened (%s); the Store is "
                                "damaged",
                                path, s->project, strerror(errno));
        return fd;
}

static int write_failed(lfs_blob_writer *w, int r, lfs_error **err) {
        return lfs_fail(err, LFS_FAILED, r, "cannot write objects into %s/objects: %s%s", w->s->path,
                        strerror(-r), lfs_fsize_hint(-r));
}

/* The writer's directory of temporary objects, made (and locked) at its first: its name
 * unique in the process, as a daemon runs the commits of several Workspaces at once, each
 * with a writer of its own, and a name another process holds (the same pid in another pid
 * namespace) passed by. */
static int make_tmp_dir(lfs_blob_writer *w, lfs_error **err) {
        static unsigned long counter;
        int fd = -EEXIST;
        for (int attempt = 0; w->tmp_dir_fd < 0 && attempt < 8 && (fd == -EEXIST || fd == -EBUSY);
             attempt++) {
                free(w->tmp_dir);
                w->tmp_dir = xasprintf("tmp/%d-%lu", (int)getpid(),
                                       __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
                fd = lfs_leftover_make(w->s->objects_fd, w->tmp_dir, O_DIRECTORY, 0700);
                if (fd >= 0)
                        w->tmp_dir_fd = fd;
        }
        if (w->tmp_dir_fd < 0) {
                free(TAKE_PTR(w->tmp_dir));
                return write_failed(w, fd, err);
        }
        return 0;
}

/* A new name in the writer's directory (make_tmp_dir made it). */
static char *new_tmp_name(lfs_blob_writer *w) {
        return xasprintf("%s/%lu", w->tmp_dir, w->tmp_files++);
}

/* Does the Store have this blob of size bytes? One a pack takes is looked for in the packs
 * only: looking for a loose copy too (one a Store from before packs may hold) cost every
 * new small file of an import a failing faccessat, about as much as its own read, to save
 * at most a second copy. */
static bool store_has(lfs_store *s, const lfs_id *id, uint64_t size) {
        if (size > LFS_PACK_MAX_BLOB)
                return lfs_object_exists(s, id);
        lfs_object_loc loc = { .fd = -1 };
        return lfs_object_locate(s, id, &loc, NULL) == 0 && loc.fd >= 0;
}

/* Should a blob with this id and size be written? The caller marks it scheduled once its
 * data is on its way (a large file's copy can still fail). */
static bool should_write(lfs_blob_writer *w, const lfs_id *id, uint64_t size, const lfs_blob_source *src) {
        if (src && src->has_known && lfs_id_eq(id, &src->known))
                return false;
        return !lfs_idset_has(&w->scheduled, id) && !store_has(w->s, id, size);
}

/* Should a blob with this id and size be written? Marks it as scheduled. */
static bool needs_write(lfs_blob_writer *w, const lfs_id *id, uint64_t size, const lfs_blob_source *src) {
        bool write = should_write(w, id, size, src);
        if (!src || !src->has_known || !lfs_id_eq(id, &src->known))
                lfs_idset_add(&w->scheduled, id);
        return write;
}

static int flush_queue(lfs_blob_writer *w, lfs_error **err) {
        if (!w->n_queue)
                return 0;
        lfs_io_item items[LFS_IO_BATCH];
        int r = 0;
        for (size_t off = 0; off < w->n_queue && r == 0; off += LFS_IO_BATCH) {
                size_t k = w->n_queue - off < LFS_IO_BATCH ? w->n_queue - off : LFS_IO_BATCH;
                for (size_t i = 0; i < k; i++) {
                        queued_write *q = &w->queue[off + i];
                        items[i] = (lfs_io_item){ .dirfd = w->s->objects_fd,
                                                  .path = q->tmp,
                                                  .open_flags = O_WRONLY | O_CREAT | O_EXCL,
                                                  .mode = 0444,
                                                  .buf = q->buf,
                                                  .len = q->len };
                }
                r = lfs_io_write_files(w->s->io, items, k);
                for (size_t i = 0; i < k; i++) {
                        queued_write *q = &w->queue[off + i];
                        /* A tmp file that may exist must be removed on failure, so track it. */
                        GROW(w->pending, w->cap_pending, w->n_pending + 1);
                        w->pending[w->n_pending++] = (queued_write){ .id = q->id, .tmp = q->tmp };
                        q->tmp = NULL;
                }
        }
        for (size_t i = 0; i < w->n_queue; i++) {
                free(w->queue[i].buf);
                free(w->queue[i].tmp);
        }
        w->n_queue = 0;
        return r < 0 ? write_failed(w, r, err) : 0;
}

static int queue_write(lfs_blob_writer *w, const lfs_id *id, char *buf, size_t len, lfs_error **err) {
        lfs_fault_point("object-write"); /* objects before it written, it and the rest not */
        w->written += len;
        if (len <= LFS_PACK_MAX_BLOB)
                return lfs_pack_writer_add(w->pack, id, buf, len, err);
        int r = make_tmp_dir(w, err);
        if (r < 0) {
                free(buf);
                return r;
        }
        char *tmp = new_tmp_name(w);
        GROW(w->queue, w->cap_queue, w->n_queue + 1);
        w->queue[w->n_queue++] = (queued_write){ .id = *id, .tmp = tmp, .buf = buf, .len = len };
        if (w->n_queue >= LFS_IO_BATCH)
                return flush_queue(w, err);
        return 0;
}

int lfs_blob_writer_add_data(lfs_blob_writer *w, const void *data, size_t len, lfs_id *ret_id,
                             lfs_error **err) {
        lfs_id id;
        lfs_sha256(data, len, &id);
        if (needs_write(w, &id, len, NULL)) {
                char *copy = xmalloc(len + 1);
                memcpy(copy, data, len);
                int r = queue_write(w, &id, copy, len, err);
                if (r < 0)
                        return r;
        }
        *ret_id = id;
        return 0;
}

static int source_failed(const lfs_blob_source *src, int r, lfs_error **err) {
        if (r == -ECANCELED)
                return lfs_fail(err, LFS_FAILED, ECANCELED, "reading %s was cancelled", src->path);
        /* A regular file was listed; now: EAGAIN, a fifo with a writer (READ_FLAGS);
         * EISDIR, a directory; ENXIO, a socket; EXDEV, ELOOP, ENOTDIR: a directory on the
         * way, or the file, swapped for a symlink or a file. */
        if (r == -ENOENT || r == -EIO || r == -ELOOP || r == -EXDEV || r == -EAGAIN || r == -ENOTDIR ||
            r == -EISDIR || r == -ENXIO)
                return lfs_fail(err, LFS_INVALID_INPUT, r,
                                "%s changed or vanished while it was being read; nothing was "
                                "recorded; try again when the directory is quiet",
                                src->path);
        if (r == -EACCES || r == -EPERM)
                return lfs_fail(err, LFS_PERMISSION_DENIED, r, "cannot read %s: %s; nothing was recorded",
                                src->path, strerror(-r));
        return lfs_fail(err, LFS_FAILED, r, "cannot read %s: %s; nothing was recorded", src->path,
                        strerror(-r));
}

static bool all_zero(const char *p, size_t n) {
        return n == 0 || (p[0] == 0 && !memcmp(p, p + 1, n - 1));
}

/* Hashes n zeros (a hole), asking cancelled (if any) every 64 MiB: a hole of terabytes
 * takes hours of hashing, which unmount --discard and close --force must be able to end
 * as they end a read. 0 or -ECANCELED. */
static int hash_zeros(lfs_hasher *h, uint64_t n, bool (*cancelled)(const void *userdata),
                      const void *userdata) {
        static const char zeros[1u << 16];
        for (uint64_t done = 0; n; done++) {
                if (cancelled && done % 1024 == 0 && cancelled(userdata))
                        return -ECANCELED;
                size_t k = n < sizeof(zeros) ? (size_t)n : sizeof(zeros);
                lfs_hasher_update(h, zeros, k);
                n -= k;
        }
        return 0;
}

/* Writes len bytes at off, all of them. */
static int pwrite_all(int fd, const char *buf, size_t len, uint64_t off) {
        ssize_t k = lfs_pwrite_full(fd, buf, len, (off_t)off);
        return k < 0 ? (int)k : (size_t)k == len ? 0 : -EIO;
}

int lfs_stream_sparse(int fd, uint64_t size, int out_fd, bool (*cancelled)(const void *userdata),
                      const void *userdata, lfs_id *ret) {
        _cleanup_free_ char *buf = xmalloc_io(STREAM_CHUNK);
        lfs_hasher *h = lfs_hasher_new();
        uint64_t off = 0;
        bool seek = true; /* the file system answers SEEK_DATA and SEEK_HOLE */
        int r = 0;
        while (r == 0 && off <= size) {
                if (cancelled && cancelled(userdata)) {
                        r = -ECANCELED;
                        break;
                }
                /* The next data at or after off, and where it ends; a hole before it is
                 * hashed as the zeros it reads as, neither read nor written. */
                uint64_t data_end = UINT64_MAX;
                if (seek) {
                        off_t data = lseek(fd, (off_t)off, SEEK_DATA);
                        if (data < 0 && errno == ENXIO) {
                                off_t end = lseek(fd, 0, SEEK_END);
                                if (end < 0) {
                                        r = -errno;
                                        break;
                                }
                                if ((uint64_t)end > off)
                                        r = hash_zeros(h, (uint64_t)end - off, cancelled, userdata);
                                off = (uint64_t)end > off ? (uint64_t)end : off;
                                break;
                        }
                        off_t hole = data < 0 ? -1 : lseek(fd, data, SEEK_HOLE);
                        if (data < 0 || hole < 0) {
                                seek = false; /* not offered here: every byte is read */
                        } else if ((r = hash_zeros(h, (uint64_t)data - off, cancelled, userdata)) < 0) {
                                break;
                        } else {
                                off = (uint64_t)data;
                                data_end = (uint64_t)hole;
                        }
                }
                size_t want = data_end - off < STREAM_CHUNK ? (size_t)(data_end - off) : STREAM_CHUNK;
                ssize_t k = pread(fd, buf, want, (off_t)off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0) {
                        r = k < 0 ? -errno : 0;
                        break;
                }
                lfs_hasher_update(h, buf, (size_t)k);
                /* Zeros written out would take blocks: left as a hole instead. */
                if (out_fd >= 0 && !all_zero(buf, (size_t)k))
                        r = pwrite_all(out_fd, buf, (size_t)k, off);
                off += (uint64_t)k;
        }
        lfs_hasher_finish(h, ret);
        /* The holes at the end are the file's length. */
        if (r == 0 && out_fd >= 0 && ftruncate(out_fd, (off_t)off) < 0)
                r = -errno;
        if (r == 0 && off != size)
                r = -EIO;
        return r;
}

static bool writer_cancelled(const void *userdata) {
        return is_cancelled(userdata);
}

/* Reads a large file into its id and, when out_fd >= 0, copies it there, holes kept. */
static int stream_file(const lfs_blob_writer *w, int fd, uint64_t size, int out_fd, lfs_id *ret) {
        return lfs_stream_sparse(fd, size, out_fd, writer_cancelled, w, ret);
}

/* A source that could not be read: an error, or (lenient) left out. */
static int source_skipped(lfs_blob_writer *w, lfs_blob_source *src, int r, lfs_error **err) {
        if (!w->lenient || r == -ECANCELED)
                return source_failed(src, r, err);
        src->result = r;
        return 0;
}

/* Copies fd under objects/tmp while it hashes it, into *ret: kept to be published unless
 * the Store has the blob already. expect (a first pass's id, or NULL) must match, or the
 * file changed meanwhile and the copy is dropped. A source left out (lenient) returns 0
 * with src->result set. */
static int copy_blob(lfs_blob_writer *w, lfs_blob_source *src, int fd, const lfs_id *expect, lfs_id *ret,
                     lfs_error **err) {
        int r = make_tmp_dir(w, err);
        if (r < 0)
                return r;
        char *tmp = new_tmp_name(w);
        GROW(w->pending, w->cap_pending, w->n_pending + 1);
        w->pending[w->n_pending++] = (queued_write){ .tmp = tmp };
        _cleanup_close_ int out =
                openat(w->s->objects_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
        if (out < 0)
                return write_failed(w, -errno, err);
        lfs_id copied;
        r = stream_file(w, fd, src->size, out, &copied);
        if (r < 0 && r != -EIO && r != -ECANCELED)
                return write_failed(w, r, err);
        bool changed = r == 0 && expect && !lfs_id_eq(expect, &copied);
        bool have = r == 0 && !expect && !should_write(w, &copied, src->size, src);
        if (r < 0 || changed || have) {
                /* A copy of a file that changed while it was read must never be published. */
                unlinkat(w->s->objects_fd, tmp, 0);
                free(tmp);
                w->n_pending--;
                if (!have)
                        return source_skipped(w, src, r < 0 ? r : -EIO, err);
        } else {
                w->pending[w->n_pending - 1].id = copied;
                w->written += src->size;
        }
        *ret = copied;
        return 0;
}

/* A file stored as a loose object (larger than a pack takes) is read once: copied as it is
 * hashed, holes kept (lfs_stream_sparse), the copy dropped if the Store has the blob. A
 * file that had an id before (a commit of a tree the Store holds) is hashed alone first:
 * mostly it has not changed, and copying gigabytes only to drop them costs more than
 * reading the few changed files twice. */
static int add_large_file(lfs_blob_writer *w, lfs_blob_source *src, lfs_error **err) {
        _cleanup_close_ int fd = lfs_io_open_read(src->dirfd, src->path, src->follow);
        struct stat st;
        if (fd < 0)
                return source_skipped(w, src, fd, err);
        /* No longer the regular file listed (a fifo, a directory put in its place). */
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return source_skipped(w, src, -EIO, err);
        lfs_fault_point("blob-large-opened"); /* its size listed, none of it read */
        lfs_id hashed, id;
        int r;
        if (src->has_known) {
                if ((r = stream_file(w, fd, src->size, -1, &hashed)) < 0)
                        return source_skipped(w, src, r, err);
                id = hashed;
        }
        if (!src->has_known || should_write(w, &hashed, src->size, src)) {
                r = copy_blob(w, src, fd, src->has_known ? &hashed : NULL, &id, err);
                if (r < 0 || src->result < 0)
                        return r;
        }
        lfs_idset_add(&w->scheduled, &id);
        *src->ret_id = id;
        return 0;
}

static void report_progress(lfs_blob_writer *w) {
        lfs_home *home = w->s->home;
        if (home && home->progress && (w->files_done % LFS_IO_BATCH == 0 || w->files_done == w->files_total))
                home->progress(home->progress_data, "reading files", w->files_done, w->files_total);
}

/* A batch of small files being read: LFS_IO_BATCH at most. */
typedef struct read_batch {
        lfs_blob_source *src[LFS_IO_BATCH];
        lfs_io_item items[LFS_IO_BATCH];
        size_t k;
        bool started;
} read_batch;

/* Starts reading the batch in one submission; a failure is the ring's own. */
static int start_small_files(lfs_blob_writer *w, read_batch *b, lfs_error **err) {
        for (size_t j = 0; j < b->k; j++)
                b->items[j] = (lfs_io_item){ .dirfd = b->src[j]->dirfd,
                                             .path = b->src[j]->path,
                                             .follow = b->src[j]->follow,
                                             .buf = xmalloc(b->src[j]->size + 1),
                                             .len = b->src[j]->size };
        b->started = true;
        int r = lfs_io_start_files(w->s->io, b->items, b->k, false);
        return r < 0 ? lfs_fail(err, LFS_FAILED, r, "io_uring failed: %s", strerror(-r)) : 0;
}

/* Waits for the batch's reads, then hashes the files and queues missing blobs; with
 * ok false (an earlier failure) only waits and frees. */
static int finish_small_files(lfs_blob_writer *w, read_batch *b, bool ok, lfs_error **err) {
        if (!b->started)
                return 0;
        size_t k = b->k;
        int r = lfs_io_wait_files(w->s->io, b->items, k);
        if (!ok) {
                r = 0;
        } else if (r < 0) {
                size_t bad = 0;
                while (bad < k && b->items[bad].result == 0)
                        bad++;
                r = bad == k ? lfs_fail(err, LFS_FAILED, r, "io_uring failed: %s", strerror(-r)) : 0;
                for (size_t j = bad; j < k && r == 0; j++)
                        if (b->items[j].result < 0)
                                r = source_skipped(w, b->src[j], b->items[j].result, err);
        }
        /* A blob the lookup misses in a stale snapshot is only written twice. */
        bool reading = ok && lfs_db_begin_read(w->s);
        for (size_t j = 0; j < k; j++) {
                lfs_id id;
                if (ok && r == 0 && b->items[j].result == 0) {
                        lfs_sha256(b->items[j].buf, b->items[j].len, &id);
                        *b->src[j]->ret_id = id;
                        if (needs_write(w, &id, b->items[j].len, b->src[j]))
                                r = queue_write(w, &id, TAKE_PTR(b->items[j].buf), b->items[j].len, err);
                }
                free(b->items[j].buf);
        }
        lfs_db_end_read(w->s, &reading);
        b->k = 0;
        b->started = false;
        return r;
}

/* Small files are read a batch ahead: while one batch is hashed (and its blobs written
 * in the background), the ring reads the next. */
int lfs_blob_writer_add_files(lfs_blob_writer *w, lfs_blob_source *src, size_t n, lfs_error **err) {
        read_batch batches[2];
        read_batch *filling = &batches[0], *reading = &batches[1];
        filling->k = reading->k = 0;
        filling->started = reading->started = false;
        int r = 0;
        w->files_total += n;
        for (size_t i = 0; i < n && r == 0; i++) {
                r = is_cancelled(w) ? source_failed(&src[i], -ECANCELED, err) : 0;
                src[i].result = 0;
                if (r < 0)
                        break;
                if (src[i].size > LFS_PACK_MAX_BLOB)
                        r = add_large_file(w, &src[i], err);
                else
                        filling->src[filling->k++] = &src[i];
                if (r == 0 && (filling->k == LFS_IO_BATCH || (i + 1 == n && filling->k))) {
                        r = start_small_files(w, filling, err);
                        if (r == 0)
                                r = finish_small_files(w, reading, true, err);
                        read_batch *t = reading;
                        reading = filling;
                        filling = t;
                }
                if (r < 0)
                        break;
                w->files_done++;
                report_progress(w);
        }
        if (r == 0)
                r = finish_small_files(w, reading, true, err);
        /* After a failure, nothing may still be read into buffers about to be freed. */
        (void)finish_small_files(w, reading, false, NULL);
        (void)finish_small_files(w, filling, false, NULL);
        return r;
}

int lfs_blob_writer_add_files_lenient(lfs_blob_writer *w, lfs_blob_source *src, size_t n, lfs_error **err) {
        w->lenient = true;
        int r = lfs_blob_writer_add_files(w, src, n, err);
        w->lenient = false;
        return r;
}

int lfs_blob_writer_publish(lfs_blob_writer *w, lfs_error **err) {
        int r = flush_queue(w, err);
        if (r < 0 || (r = lfs_pack_writer_sync(w->pack, err)) < 0)
                return r;
        if (!w->n_pending)
                return 0;
        /* Data first, then names: a name never points at data that is not on disk. */
        if (syncfs(w->s->objects_fd) < 0)
                return write_failed(w, -errno, err);
        _cleanup_free_ lfs_io_item *items = xcalloc(w->n_pending, sizeof(*items));
        _cleanup_free_ char(*names)[LFS_HEX_LEN + 2] = xcalloc(w->n_pending, sizeof(*names));
        for (size_t i = 0; i < w->n_pending; i++) {
                lfs_id_object_path(&w->pending[i].id, names[i]);
                items[i] = (lfs_io_item){ .dirfd = w->s->objects_fd,
                                          .path = w->pending[i].tmp,
                                          .new_path = names[i] };
        }
        r = lfs_io_rename_files(w->s->io, items, w->n_pending);
        if (r < 0)
                return write_failed(w, r, err);
        for (size_t i = 0; i < w->n_pending; i++)
                free(w->pending[i].tmp);
        w->n_pending = 0;
        if (syncfs(w->s->objects_fd) < 0)
                return write_failed(w, -errno, err);
        return 0;
}

int lfs_blob_writer_insert_rows(lfs_blob_writer *w, lfs_error **err) {
        return lfs_pack_writer_insert_rows(w->pack, err);
}

void lfs_blob_writer_committed(lfs_blob_writer *w) {
        lfs_pack_writer_committed(w->pack);
}
