/* SPDX-License-Identifier: MIT */
/* Batched file I/O for the Store: each file is one hard-linked chain
 * openat(direct slot) -> read/write(fixed slot) -> close(slot), LFS_IO_BATCH chains per
 * submission, so a batch of small files costs one system call instead of three per file.
 * Where io_uring cannot be had (disabled by sysctl, seccomp, LAYERFS_NO_URING=1) the same
 * calls run as plain system calls.
 *
 * On ext4 a create and a buffered write always run in an io-wq worker (the kernel cannot
 * do them without blocking): what the ring can win there is overlap, so batches are
 * started and reaped later (the caller reads and hashes the next batch while workers write
 * this one; two batches in flight, each in its own half of the registered file table),
 * and the waiting thread asks for every completion it knows is coming at once. Opens and
 * reads of cached files complete inside the submission. Where the time goes, per file,
 * against plain calls: docs/architecture.md ("io_uring"). */
#include <fcntl.h>
#include <liburing.h>
#include <linux/openat2.h>
#include <sys/uio.h>

#include "store.h"

/* How a file is opened to be read: never through a symlink as its last component; a fifo
 * put in a regular file's place opens without waiting for a writer (and then reads short,
 * -EIO, or -EAGAIN), which blocked an import for ever; a terminal never becomes the
 * caller's. */
#define READ_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)

/* A read's path beneath its dirfd, no symlink followed on the way (lfs_io_item.follow
 * false): a directory of an import swapped for a symlink to /etc after it was listed led
 * the read of a file listed in it to /etc's file of that name. Static, and never written:
 * the kernel reads it when it takes the SQE, which is later than start_chains' return
 * for an SQE that a failed submission left queued (the next submit_and_wait takes it). */
static struct open_how read_beneath = {
        .flags = READ_FLAGS,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
};

/* The low bits of a CQE's user_data: what completed; the rest points at its item. */
enum {
        OP_OPEN,
        OP_XFER,
        OP_CLOSE_GROUP0, /* a chain's last CQE, of a batch in slot group 0 */
        OP_CLOSE_GROUP1,
        OP_RENAME,
        OP_AT,
        OP_BACKGROUND,
        OP_MASK = 7,
};
_Static_assert(_Alignof(lfs_io_item) > OP_MASK && _Alignof(lfs_io_at) > OP_MASK,
               "items must leave user_data's low bits free");

struct lfs_io {
        bool uring;
        struct io_uring ring;
        unsigned chains[2]; /* chains in flight, per half of the file table */
        unsigned next_group;
        unsigned waited; /* OP_AT and OP_RENAME CQEs still to come */
        unsigned background; /* OP_BACKGROUND CQEs still to come */
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
        if (io_uring_register_files_sparse(&io->ring, 2 * LFS_IO_BATCH) < 0) {
                io_uring_queue_exit(&io->ring);
                return io;
        }
        /* Creates and buffered writes run in io-wq workers; more workers than CPUs only
         * contend on directory locks (measured: twice the system time with the default
         * limit). */
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned workers[2] = { (unsigned)(cpus > 0 ? cpus : 1), (unsigned)(cpus > 0 ? cpus : 1) };
        (void)io_uring_register_iowq_max_workers(&io->ring, workers);
        io->uring = true;
        return io;
}

static int wait_until_idle(lfs_io *io);

void lfs_io_free(lfs_io *io) {
        if (!io)
                return;
        if (io->uring) {
                /* Nothing may still write into or out of a caller's buffers. */
                (void)wait_until_idle(io);
                io_uring_queue_exit(&io->ring);
        }
        free(io);
}

bool lfs_io_uses_uring(const lfs_io *io) {
        return io->uring;
}

static uint64_t tag(const void *item, unsigned op) {
        return (uint64_t)(uintptr_t)item | op;
}

/* Skips the first done bytes of the iovecs (what a short transfer moved already). */
static void iov_skip(struct iovec **iov, int *iovcnt, size_t done) {
        while (*iovcnt > 0 && done >= (*iov)->iov_len) {
                done -= (*iov)->iov_len;
                (*iov)++;
                (*iovcnt)--;
        }
        if (*iovcnt > 0) {
                (*iov)->iov_base = (char *)(*iov)->iov_base + done;
                (*iov)->iov_len -= done;
        }
}

/* Moves the iovecs' bytes at off, all of them (adjusting iov past what moved): the plain
 * path's one loop for reads and writes, one buffer or several. */
static int xferv_all(int fd, struct iovec *iov, int iovcnt, uint64_t off, bool write) {
        iov_skip(&iov, &iovcnt, 0); /* empty iovecs first */
        while (iovcnt > 0) {
                ssize_t k =
                        write ? pwritev(fd, iov, iovcnt, (off_t)off) : preadv(fd, iov, iovcnt, (off_t)off);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -EIO;
                off += (uint64_t)k;
                iov_skip(&iov, &iovcnt, (size_t)k);
        }
        return 0;
}

static int xfer_at_plain(lfs_io_at *it, bool write) {
        if (it->iov)
                return xferv_all(it->fd, it->iov, it->iovcnt, it->offset, write);
        struct iovec one = { .iov_base = it->buf, .iov_len = it->len };
        return xferv_all(it->fd, &one, 1, it->offset, write);
}

/* An OP_AT or OP_BACKGROUND completion: a short transfer is finished the plain way (rare
 * on regular files). */
static void complete_at(lfs_io_at *it, int res, bool write) {
        if (res >= 0 && (size_t)res != it->len) {
                if (it->iov) {
                        iov_skip(&it->iov, &it->iovcnt, (size_t)res);
                        res = xferv_all(it->fd, it->iov, it->iovcnt, it->offset + (uint64_t)res, write);
                } else {
                        res = xfer_at_plain(&(lfs_io_at){ .fd = it->fd,
                                                          .offset = it->offset + (uint64_t)res,
                                                          .buf = (char *)it->buf + res,
                                                          .len = it->len - (size_t)res },
                                            write);
                }
        }
        it->result = res < 0 ? res : 0;
}

static void dispatch(lfs_io *io, uint64_t user_data, int res) {
        unsigned op = user_data & OP_MASK;
        void *item = (void *)(uintptr_t)(user_data & ~(uint64_t)OP_MASK);
        if (op == OP_AT || op == OP_BACKGROUND) {
                lfs_io_at *at = item;
                complete_at(at, res, at->write);
                if (op == OP_AT)
                        io->waited--;
                else
                        io->background--;
                return;
        }
        lfs_io_item *it = item;
        if (op == OP_RENAME)
                io->waited--;
        if (op == OP_XFER && res >= 0 && (size_t)res != it->len) {
                if (it->write && (size_t)res < it->len) {
                        it->moved = (size_t)res; /* finished by finish_short_write */
                        res = 0;
                } else {
                        res = -EIO; /* a file that shrank or grew */
                }
        }
        if (op == OP_CLOSE_GROUP0 || op == OP_CLOSE_GROUP1) {
                io->chains[op - OP_CLOSE_GROUP0]--;
                it->in_flight = false;
                if (res == -EBADF)
                        res = 0; /* the open failed; that error is already recorded */
        }
        /* A chain completes in order, so the first failure is its cause. */
        if (res < 0 && it->result == 0)
                it->result = res;
}

/* Submits what is queued and handles one round of completions: at least want (more than
 * are still to come would never return). Each wake-up of the waiting thread costs a
 * context switch, so callers ask for what they know is coming, not for one at a time. */
static int reap_some(lfs_io *io, unsigned want) {
        struct io_uring_cqe *cqe;
        int r = io_uring_submit_and_wait(&io->ring, want ? want : 1);
        if (r < 0 && r != -EINTR)
                return r;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&io->ring, head, cqe) {
                dispatch(io, cqe->user_data, cqe->res);
                seen++;
        }
        io_uring_cq_advance(&io->ring, seen);
        return 0;
}

/* Submits what is queued and handles completions until left(io), the completions still
 * to come before what the caller waits for holds (at least), is 0. */
static int wait_for(lfs_io *io, unsigned (*left)(const lfs_io *io)) {
        unsigned n;
        while ((n = left(io)) > 0) {
                int r = reap_some(io, n);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* What each wait is for, as the completions still to come before it holds: at least one
 * per chain in flight (its close), per rename and per positional transfer. */
static unsigned no_waited(const lfs_io *io) {
        return io->waited + io->chains[0] + io->chains[1];
}

/* Only the caller's own renames and positional reads: the chains a caller started stay
 * in flight behind them (an export reads the next batch's objects while the workers
 * create and write the batch before). */
static unsigned own_waited(const lfs_io *io) {
        return io->waited;
}

static unsigned group0_free(const lfs_io *io) {
        return io->chains[0];
}

static unsigned group1_free(const lfs_io *io) {
        return io->chains[1];
}

static unsigned no_background(const lfs_io *io) {
        return io->background;
}

static unsigned idle(const lfs_io *io) {
        return no_waited(io) + no_background(io);
}

static int wait_until_idle(lfs_io *io) {
        return wait_for(io, idle);
}

/* Starts k <= LFS_IO_BATCH chains in the next half of the file table, once the batch
 * that used it before is done. */
static int start_chains(lfs_io *io, lfs_io_item *items, size_t k, bool write) {
        unsigned group = io->next_group;
        io->next_group ^= 1;
        int r = wait_for(io, group ? group1_free : group0_free);
        if (r < 0)
                return r;
        for (size_t i = 0; i < k; i++) {
                lfs_io_item *it = &items[i];
                int flags = write ? it->open_flags : READ_FLAGS;
                unsigned slot = group * LFS_IO_BATCH + (unsigned)i;
                it->result = 0;
                it->in_flight = true;
                it->write = write;
                it->moved = it->len;
                struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
                /* Direct descriptors never reach the fd table, and O_CLOEXEC is EINVAL here. */
                if (write || it->follow)
                        io_uring_prep_openat_direct(sqe, it->dirfd, it->path, flags, it->mode, slot);
                else
                        io_uring_prep_openat2_direct(sqe, it->dirfd, it->path, &read_beneath, slot);
                /* Not IOSQE_ASYNC: a read of a cached file then completes inside the
                 * submission, with no worker's wake-up and no context switch (measured on a
                 * loaded 2-CPU machine: 15-25% less CPU than forced to a worker, and as fast
                 * or faster). Creates go to a worker anyway. */
                sqe->flags |= IOSQE_IO_HARDLINK;
                sqe->user_data = tag(it, OP_OPEN);

                sqe = io_uring_get_sqe(&io->ring);
                if (write)
                        io_uring_prep_write(sqe, (int)slot, it->buf, (unsigned)it->len, 0);
                else
                        io_uring_prep_read(sqe, (int)slot, it->buf, (unsigned)it->len + 1, 0);
                sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
                sqe->user_data = tag(it, OP_XFER);

                sqe = io_uring_get_sqe(&io->ring);
                io_uring_prep_close_direct(sqe, slot);
                sqe->user_data = tag(it, group ? OP_CLOSE_GROUP1 : OP_CLOSE_GROUP0);
        }
        io->chains[group] += (unsigned)k;
        r = io_uring_submit(&io->ring);
        return r < 0 ? r : 0;
}

int lfs_io_open_read(int dirfd, const char *path, bool follow) {
        if (!follow)
                return lfs_open_beneath(dirfd, path, READ_FLAGS);
        int fd = openat(dirfd, path, READ_FLAGS | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Reads a file of len bytes into buf (len + 1 bytes) with one pread where it has that
 * size: it asks one byte more than it expects, so a file that grew shows, and a read that
 * stops exactly at len is the file's end (a regular file reads short only there). Reading
 * on until a read returned 0 cost every small file of an import a second pread. */
static ssize_t read_expected(int fd, char *buf, size_t len) {
        ssize_t k;
        do
                k = pread(fd, buf, len + 1, 0);
        while (k < 0 && errno == EINTR);
        if (k < 0)
                return -errno;
        if ((size_t)k >= len || k == 0)
                return k;
        ssize_t rest = lfs_pread_full(fd, buf + k, len + 1 - (size_t)k, k);
        return rest < 0 ? rest : k + rest;
}

static int xfer_plain(lfs_io_item *it, bool write) {
        _cleanup_close_ int fd = write ? openat(it->dirfd, it->path, it->open_flags | O_CLOEXEC, it->mode)
                                       : lfs_io_open_read(it->dirfd, it->path, it->follow);
        if (fd < 0)
                return write ? -errno : fd;
        ssize_t done =
                write ? lfs_pwrite_full(fd, it->buf, it->len, 0) : read_expected(fd, it->buf, it->len);
        if (done < 0)
                return (int)done;
        if ((size_t)done != it->len)
                return -EIO;
        if (write && close(TAKE_FD(fd)) < 0)
                return -errno;
        return 0;
}

/* A write the ring left short (a full disk, a quota, the file size limit) goes on the
 * plain way once its chain is closed: the ring's answer was only a count, and the next
 * write says why (ENOSPC rather than a bare EIO), or completes when space came back. */
static int finish_short_write(lfs_io_item *it) {
        _cleanup_close_ int fd = openat(it->dirfd, it->path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t k = lfs_pwrite_full(fd, (const char *)it->buf + it->moved, it->len - it->moved,
                                    (off_t)it->moved);
        if (k < 0)
                return (int)k;
        if ((size_t)k != it->len - it->moved)
                return -EIO;
        if (close(TAKE_FD(fd)) < 0)
                return -errno;
        return 0;
}

/* The items' first failure, once every short write is finished. */
static int first_failure(lfs_io_item *items, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (items[i].write && items[i].result == 0 && items[i].moved < items[i].len)
                        items[i].result = finish_short_write(&items[i]);
        for (size_t i = 0; i < n; i++)
                if (items[i].result < 0)
                        return items[i].result;
        return 0;
}

int lfs_io_start_files(lfs_io *io, lfs_io_item *items, size_t n, bool write) {
        for (size_t off = 0; off < n; off += LFS_IO_BATCH) {
                size_t k = n - off < LFS_IO_BATCH ? n - off : LFS_IO_BATCH;
                if (io->uring) {
                        int r = start_chains(io, items + off, k, write);
                        if (r < 0)
                                return r;
                } else {
                        for (size_t i = 0; i < k; i++)
                                items[off + i].result = xfer_plain(&items[off + i], write);
                }
        }
        return 0;
}

int lfs_io_wait_files(lfs_io *io, lfs_io_item *items, size_t n) {
        for (size_t i = 0; io->uring && i < n; i++)
                while (items[i].in_flight) {
                        unsigned left = 0; /* these items' chains in flight: a close each */
                        for (size_t j = i; j < n; j++)
                                left += items[j].in_flight;
                        int r = reap_some(io, left);
                        if (r < 0)
                                return r;
                }
        return first_failure(items, n);
}

static int run_files(lfs_io *io, lfs_io_item *items, size_t n, bool write) {
        int r = lfs_io_start_files(io, items, n, write);
        int w = io->uring ? wait_for(io, no_waited) : 0;
        if (r < 0 || w < 0)
                return r < 0 ? r : w;
        return first_failure(items, n);
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
                        sqe->user_data = tag(it, OP_RENAME);
                        io->waited++;
                }
                if (io->uring) {
                        int r = wait_for(io, no_waited);
                        if (r < 0)
                                return r;
                }
        }
        return first_failure(items, n);
}

static void prep_at(struct io_uring_sqe *sqe, lfs_io_at *it) {
        if (it->iov && it->write)
                io_uring_prep_writev(sqe, it->fd, it->iov, (unsigned)it->iovcnt, it->offset);
        else if (it->iov)
                io_uring_prep_readv(sqe, it->fd, it->iov, (unsigned)it->iovcnt, it->offset);
        else if (it->write)
                io_uring_prep_write(sqe, it->fd, it->buf, (unsigned)it->len, it->offset);
        else
                io_uring_prep_read(sqe, it->fd, it->buf, (unsigned)it->len, it->offset);
}

int lfs_io_pread_batch(lfs_io *io, lfs_io_at *items, size_t n) {
        for (size_t off = 0; off < n; off += LFS_IO_BATCH) {
                size_t k = n - off < LFS_IO_BATCH ? n - off : LFS_IO_BATCH;
                lfs_io_at *batch = items + off;
                for (size_t i = 0; i < k; i++) {
                        batch[i].write = false;
                        batch[i].result = 0;
                        if (!io->uring) {
                                batch[i].result = xfer_at_plain(&batch[i], false);
                                continue;
                        }
                        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
                        prep_at(sqe, &batch[i]);
                        sqe->user_data = tag(&batch[i], OP_AT);
                        io->waited++;
                }
                if (io->uring) {
                        int r = wait_for(io, own_waited);
                        if (r < 0)
                                return r;
                }
        }
        for (size_t i = 0; i < n; i++)
                if (items[i].result < 0)
                        return items[i].result;
        return 0;
}

int lfs_io_start_pwritev(lfs_io *io, lfs_io_at *it) {
        it->write = true;
        it->result = 0;
        if (!io->uring)
                return it->result = xferv_all(it->fd, it->iov, it->iovcnt, it->offset, true);
        struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
        prep_at(sqe, it);
        sqe->user_data = tag(it, OP_BACKGROUND);
        io->background++;
        int r = io_uring_submit(&io->ring);
        return r < 0 ? r : 0;
}

int lfs_io_wait_background(lfs_io *io) {
        return io->uring ? wait_for(io, no_background) : 0;
}
