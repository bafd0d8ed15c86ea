/* SPDX-License-Identifier: MIT */
/* Batched file I/O for the Store: each file is one hard-linked chain
 * openat(direct slot) -> read/write(fixed slot) -> close(slot), LFS_IO_BATCH chains per
 * submission, so a batch of small files costs one system call instead of three per file.
 * Where io_uring cannot be had (disabled by sysctl, seccomp, LAYERFS_NO_URING=1) the same
 * calls run as plain system calls. */
#include <fcntl.h>
#include <liburing.h>

#include "store.h"

enum { OP_OPEN, OP_XFER, OP_CLOSE, OP_RENAME };

struct lfs_io {
        bool uring;
        struct io_uring ring;
};

lfs_io *lfs_io_new(void) {
        lfs_io *io = xcalloc(1, sizeof(*io));
        const char *off = getenv("LAYERFS_NO_URING");
        if (off && *off && strcmp(off, "0"))
                return io;
        /* Completions need not interrupt us (5.19+): we always wait for them. Not
         * SINGLE_ISSUER: a daemon's store is used by more than one thread in turn.
         * Older kernels take the plain setup. */
        if (io_uring_queue_init(4 * LFS_IO_BATCH, &io->ring,
                                IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN) < 0 &&
            io_uring_queue_init(4 * LFS_IO_BATCH, &io->ring, 0) < 0)
                return io;
        if (io_uring_register_files_sparse(&io->ring, LFS_IO_BATCH) < 0) {
                io_uring_queue_exit(&io->ring);
                return io;
        }
        /* Opens and creates run in io-wq workers; more workers than CPUs only contend on
         * directory locks (measured: twice the system time with the default limit). */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned workers[2] = { (unsigned)(cpus > 0 ? cpus : 1), (unsigned)(cpus > 0 ? cpus : 1) };
        (void)io_uring_register_iowq_max_workers(&io->ring, workers);
        io->uring = true;
        return io;
}

void lfs_io_free(lfs_io *io) {
        if (!io)
                return;
        if (io->uring)
                io_uring_queue_exit(&io->ring);
        free(io);
}

bool lfs_io_uses_uring(const lfs_io *io) {
        return io->uring;
}

static uint64_t tag(size_t index, unsigned op) {
        return (uint64_t)index << 2 | op;
}

/* Completes `expected` CQEs, recording per item the first failure of its chain. */
static int reap(lfs_io *io, lfs_io_item *items, unsigned expected) {
        int r = io_uring_submit_and_wait(&io->ring, expected);
        if (r < 0)
                return r;
        for (unsigned seen = 0; seen < expected; seen++) {
                struct io_uring_cqe *cqe;
                r = io_uring_wait_cqe(&io->ring, &cqe);
                if (r < 0)
                        return r;
                lfs_io_item *it = &items[cqe->user_data >> 2];
                unsigned op = cqe->user_data & 3;
                int res = cqe->res;
                io_uring_cqe_seen(&io->ring, cqe);
                if (op == OP_XFER && res >= 0 && (size_t)res != it->len)
                        res = -EIO; /* short write, or a file that shrank or grew */
                if (op == OP_CLOSE && res == -EBADF)
                        res = 0; /* the open failed; that error is already recorded */
                /* A chain completes in order, so the first failure is its cause. */
                if (res < 0 && it->result == 0)
                        it->result = res;
        }
        return 0;
}

static int chain_batch(lfs_io *io, lfs_io_item *items, size_t n, bool write) {
        for (size_t i = 0; i < n; i++) {
                lfs_io_item *it = &items[i];
                int flags = write ? it->open_flags : O_RDONLY | O_NOFOLLOW;
                it->result = 0;
                struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
                /* Direct descriptors never reach the fd table, and O_CLOEXEC is EINVAL here. */
                io_uring_prep_openat_direct(sqe, it->dirfd, it->path, flags, it->mode, (unsigned)i);
                sqe->flags |= IOSQE_IO_HARDLINK;
                sqe->user_data = tag(i, OP_OPEN);

                sqe = io_uring_get_sqe(&io->ring);
                if (write)
                        io_uring_prep_write(sqe, (int)i, it->buf, (unsigned)it->len, 0);
                else
                        io_uring_prep_read(sqe, (int)i, it->buf, (unsigned)it->len + 1, 0);
                sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
                sqe->user_data = tag(i, OP_XFER);

                sqe = io_uring_get_sqe(&io->ring);
                io_uring_prep_close_direct(sqe, (unsigned)i);
                sqe->user_data = tag(i, OP_CLOSE);
        }
        return reap(io, items, (unsigned)(3 * n));
}

static int xfer_plain(lfs_io_item *it, bool write) {
        int flags = write ? it->open_flags : O_RDONLY | O_NOFOLLOW;
        _cleanup_close_ int fd = openat(it->dirfd, it->path, flags | O_CLOEXEC, it->mode);
        if (fd < 0)
                return -errno;
        /* A read asks one byte more than it expects: a file that grew shows. */
        ssize_t done = write ? lfs_pwrite_full(fd, it->buf, it->len, 0)
                             : lfs_pread_full(fd, it->buf, it->len + 1, 0);
        if (done < 0)
                return (int)done;
        if ((size_t)done != it->len)
                return -EIO;
        if (write && close(TAKE_FD(fd)) < 0)
                return -errno;
        return 0;
}

static int run_files(lfs_io *io, lfs_io_item *items, size_t n, bool write) {
        for (size_t off = 0; off < n; off += LFS_IO_BATCH) {
                size_t k = n - off < LFS_IO_BATCH ? n - off : LFS_IO_BATCH;
                if (io->uring) {
                        int r = chain_batch(io, items + off, k, write);
                        if (r < 0)
                                return r;
                } else {
                        for (size_t i = 0; i < k; i++)
                                items[off + i].result = xfer_plain(&items[off + i], write);
                }
        }
        for (size_t i = 0; i < n; i++)
                if (items[i].result < 0)
                        return items[i].result;
        return 0;
}

int lfs_io_read_files(lfs_io *io, lfs_io_item *items, size_t n) {
        return run_files(io, items, n, false);
}

int lfs_io_write_files(lfs_io *io, lfs_io_item *items, size_t n) {
        return run_files(io, items, n, true);
}

int lfs_io_rename_files(lfs_io *io, lfs_io_item *items, size_t n) {
        for (size_t off = 0; off < n; off += LFS_IO_BATCH) {
                size_t k = n - off < LFS_IO_BATCH ? n - off : LFS_IO_BATCH;
                for (size_t i = 0; i < k; i++) {
                        lfs_io_item *it = &items[off + i];
                        it->result = 0;
                        if (!io->uring) {
                                if (renameat(it->dirfd, it->path, it->dirfd, it->new_path) < 0)
                                        it->result = -errno;
                                continue;
                        }
                        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
                        io_uring_prep_renameat(sqe, it->dirfd, it->path, it->dirfd, it->new_path, 0);
                        sqe->user_data = tag(i, OP_RENAME);
                }
                if (io->uring) {
                        int r = reap(io, items + off, (unsigned)k);
                        if (r < 0)
                                return r;
                }
        }
        for (size_t i = 0; i < n; i++)
                if (items[i].result < 0)
                        return items[i].result;
        return 0;
}

static int xfer_at_plain(lfs_io_at *it, bool write) {
        for (size_t done = 0; done < it->len;) {
                ssize_t k = write ? pwrite(it->fd, (char *)it->buf + done, it->len - done,
                                           (off_t)(it->offset + done))
                                  : pread(it->fd, (char *)it->buf + done, it->len - done,
                                          (off_t)(it->offset + done));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -EIO;
                done += (size_t)k;
        }
        return 0;
}

static int run_at(lfs_io *io, lfs_io_at *items, size_t n, bool write) {
        for (size_t off = 0; off < n; off += LFS_IO_BATCH) {
                size_t k = n - off < LFS_IO_BATCH ? n - off : LFS_IO_BATCH;
                lfs_io_at *batch = items + off;
                if (!io->uring) {
                        for (size_t i = 0; i < k; i++)
                                batch[i].result = xfer_at_plain(&batch[i], write);
                        continue;
                }
                for (size_t i = 0; i < k; i++) {
                        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
                        if (write)
                                io_uring_prep_write(sqe, batch[i].fd, batch[i].buf, (unsigned)batch[i].len,
                                                    batch[i].offset);
                        else
                                io_uring_prep_read(sqe, batch[i].fd, batch[i].buf, (unsigned)batch[i].len,
                                                   batch[i].offset);
                        sqe->user_data = i;
                        batch[i].result = 0;
                }
                int r = io_uring_submit_and_wait(&io->ring, (unsigned)k);
                if (r < 0)
                        return r;
                for (size_t seen = 0; seen < k; seen++) {
                        struct io_uring_cqe *cqe;
                        if ((r = io_uring_wait_cqe(&io->ring, &cqe)) < 0)
                                return r;
                        lfs_io_at *it = &batch[cqe->user_data];
                        int res = cqe->res;
                        io_uring_cqe_seen(&io->ring, cqe);
                        if (res >= 0 && (size_t)res != it->len)
                                /* Rare on regular files; finish the rest the plain way. */
                                res = xfer_at_plain(&(lfs_io_at){ .fd = it->fd,
                                                                  .offset = it->offset + (uint64_t)res,
                                                                  .buf = (char *)it->buf + res,
                                                                  .len = it->len - (size_t)res },
                                                    write);
                        it->result = res < 0 ? res : 0;
                }
        }
        for (size_t i = 0; i < n; i++)
                if (items[i].result < 0)
                        return items[i].result;
        return 0;
}

int lfs_io_pread_batch(lfs_io *io, lfs_io_at *items, size_t n) {
        return run_at(io, items, n, false);
}

int lfs_io_pwrite_batch(lfs_io *io, lfs_io_at *items, size_t n) {
        return run_at(io, items, n, true);
}
