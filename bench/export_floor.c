/* SPDX-License-Identifier: MIT */
/*
 * The kernel's floor of an export (bench/export_floor.sh): DIRS directories of FILES files
 * of SIZE bytes created under a new directory, with nothing of the Store (no lookups, no
 * reads, no hashing), one way per run:
 *
 *   plain           mkdirat, then openat(O_CREAT|O_EXCL) + pwrite + close per file
 *   threads:N       the same split over N threads, each its own directories
 *   ring:B:D:W:O[:fn] one hard-linked chain openat(direct slot) -> write -> close per file,
 *                   B chains per submission, D submissions in flight, io-wq workers
 *                   capped at W (0: the kernel's default), files taken in directory
 *                   order (O = d) or round-robin across the directories (O = r); with
 *                   f, IORING_SETUP_DEFER_TASKRUN (else COOP_TASKRUN, as the Store);
 *                   with n, no close: the slot's next open replaces the file (closing it)
 *
 * Usage: export-floor TARGET WAY [DIRS FILES SIZE]. Prints "wall_us cpu_us ctxsw" for
 * the creates (the mkdirs included), CPU and context switches of the whole process, its
 * io-wq workers included. It measures and never judges.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "samples.h"

static int dirs = 100, files = 100;
static size_t size = 4096;
static char *data;
static int root_fd;

static void die(const char *what, int e) {
        fprintf(stderr, "export-floor: %s: %s\n", what, strerror(e));
        exit(1);
}

static void name_of(char *buf, size_t len, int d, int f) {
        snprintf(buf, len, "d%02d/f%02d", d, f);
}

static void make_dirs(void) {
        for (int d = 0; d < dirs; d++) {
                char name[32];
                snprintf(name, sizeof(name), "d%02d", d);
                if (mkdirat(root_fd, name, 0755) < 0)
                        die(name, errno);
        }
}

static void plain_range(int from, int to) {
        for (int d = from; d < to; d++)
                for (int f = 0; f < files; f++) {
                        char name[32];
                        name_of(name, sizeof(name), d, f);
                        int fd = openat(root_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                        if (fd < 0)
                                die(name, errno);
                        if (pwrite(fd, data, size, 0) != (ssize_t)size)
                                die("pwrite", errno);
                        if (close(fd) < 0)
                                die("close", errno);
                }
}

typedef struct {
        int from, to;
} range;

static void *thread_main(void *arg) {
        const range *r = arg;
        plain_range(r->from, r->to);
        return NULL;
}

static void run_threads(int n) {
        pthread_t t[64];
        range r[64];
        if (n < 1 || n > 64)
                die("threads", EINVAL);
        for (int i = 0; i < n; i++) {
                r[i] = (range){ .from = dirs * i / n, .to = dirs * (i + 1) / n };
                if (pthread_create(&t[i], NULL, thread_main, &r[i]))
                        die("pthread_create", EAGAIN);
        }
        for (int i = 0; i < n; i++)
                pthread_join(t[i], NULL);
}

/* Chains still open per group of slots: a close's user_data is its group. */
static unsigned open_chains[64];

/* Submits, waits for at least want completions and counts the closes per group. */
static void reap(struct io_uring *ring, unsigned want) {
        int r = io_uring_submit_and_wait(ring, want);
        if (r < 0 && r != -EINTR)
                die("io_uring_submit_and_wait", -r);
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(ring, head, cqe) {
                if (cqe->res < 0)
                        die("a chain", -cqe->res);
                open_chains[cqe->user_data]--;
                seen++;
        }
        io_uring_cq_advance(ring, seen);
}

static void run_ring(unsigned batch, unsigned depth, unsigned workers, bool round_robin, bool defer,
                     bool no_close) {
        struct io_uring ring;
        int r = io_uring_queue_init(4 * batch * depth, &ring,
                                    IORING_SETUP_SUBMIT_ALL |
                                            (defer ? IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SINGLE_ISSUER
                                                   : IORING_SETUP_COOP_TASKRUN));
        if (r < 0)
                die("io_uring_queue_init", -r);
        if ((r = io_uring_register_files_sparse(&ring, batch * depth)) < 0)
                die("io_uring_register_files_sparse", -r);
        if (workers) {
                unsigned w[2] = { workers, workers };
                if ((r = io_uring_register_iowq_max_workers(&ring, w)) < 0)
                        die("io_uring_register_iowq_max_workers", -r);
        }
        int total = dirs * files;
        char(*names)[32] = calloc((size_t)total, 32);
        for (int i = 0; i < total; i++) {
                int d = round_robin ? i % dirs : i / files, f = round_robin ? i / dirs : i % files;
                name_of(names[i], 32, d, f);
        }
        /* Each of depth groups of slots holds one batch, reused once that batch has
         * closed every file. Only closes post a CQE on success. */
        if (depth > 64)
                die("depth", EINVAL);
        unsigned group = 0;
        for (int off = 0; off < total; off += (int)batch, group = (group + 1) % depth) {
                unsigned k = (unsigned)(total - off) < batch ? (unsigned)(total - off) : batch;
                while (open_chains[group])
                        reap(&ring, open_chains[group]);
                for (unsigned i = 0; i < k; i++) {
                        unsigned slot = group * batch + i;
                        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
                        io_uring_prep_openat_direct(sqe, root_fd, names[off + (int)i],
                                                    O_WRONLY | O_CREAT | O_EXCL, 0644, slot);
                        sqe->flags |= IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS;
                        sqe->user_data = group;
                        sqe = io_uring_get_sqe(&ring);
                        io_uring_prep_write(sqe, (int)slot, data, (unsigned)size, 0);
                        sqe->flags |= IOSQE_FIXED_FILE;
                        sqe->user_data = group;
                        if (no_close)
                                continue; /* the slot's next open replaces (and closes) it */
                        sqe->flags |= IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS;
                        sqe = io_uring_get_sqe(&ring);
                        io_uring_prep_close_direct(sqe, slot);
                        sqe->user_data = group;
                }
                open_chains[group] += k;
                if ((r = io_uring_submit(&ring)) < 0)
                        die("io_uring_submit", -r);
        }
        for (unsigned g = 0; g < depth; g++)
                while (open_chains[g])
                        reap(&ring, 1);
        free(names);
        io_uring_queue_exit(&ring); /* closes what is still in the table */
}

int main(int argc, char **argv) {
        if (argc != 3 && argc != 6) {
                fprintf(stderr,
                        "usage: export-floor TARGET plain|threads:N|ring:B:D:W:d|r [DIRS FILES SIZE]\n");
                return 2;
        }
        if (argc == 6) {
                dirs = atoi(argv[3]);
                files = atoi(argv[4]);
                size = (size_t)atol(argv[5]);
        }
        data = malloc(size ? size : 1);
        memset(data, 'x', size);
        if (mkdir(argv[1], 0755) < 0)
                die(argv[1], errno);
        root_fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                die(argv[1], errno);
        const char *way = argv[2];
        struct rusage before, after;
        getrusage(RUSAGE_SELF, &before);
        int64_t start = now_us();
        make_dirs();
        unsigned b, d, w;
        char order, opts[8] = "";
        int n;
        if (!strcmp(way, "plain"))
                plain_range(0, dirs);
        else if (sscanf(way, "threads:%d", &n) == 1)
                run_threads(n);
        else if (sscanf(way, "ring:%u:%u:%u:%c:%7s", &b, &d, &w, &order, opts) >= 4 && b && d)
                run_ring(b, d, w, order == 'r', strchr(opts, 'f'), strchr(opts, 'n'));
        else
                die(way, EINVAL);
        int64_t wall = now_us() - start;
        getrusage(RUSAGE_SELF, &after);
        int64_t cpu = (after.ru_utime.tv_sec - before.ru_utime.tv_sec) * 1000000 +
                      (after.ru_utime.tv_usec - before.ru_utime.tv_usec) +
                      (after.ru_stime.tv_sec - before.ru_stime.tv_sec) * 1000000 +
                      (after.ru_stime.tv_usec - before.ru_stime.tv_usec);
        long cs = (after.ru_nvcsw - before.ru_nvcsw) + (after.ru_nivcsw - before.ru_nivcsw);
        printf("%lld %lld %ld\n", (long long)wall, (long long)cpu, cs);
        return 0;
}
