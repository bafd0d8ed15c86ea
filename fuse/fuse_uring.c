/* SPDX-License-Identifier: MIT */
/*
 * FUSE over io_uring (LAYERFS_FUSE_TRANSPORT=uring, or LAYERFS_FUSE_URING=on|auto with
 * our own loop): one ring per possible CPU, as the kernel keeps one queue per CPU and
 * hands a request to the queue of the CPU its caller runs on, each ring with a thread
 * of its own (pinned to that CPU where it may be) and one entry: a header buffer and a
 * payload buffer big enough for the largest request. The thread registers the entry,
 * then for each request the kernel completes it with, serves it through the dev loop's
 * dispatch (fuse_server.h) and answers with COMMIT_AND_FETCH, which also waits for the
 * next one: one system call per request where /dev/fuse takes a read and a write.
 *
 * /dev/fuse stays served by the dev loop (fuse_dev.c) for what the rings do not carry:
 * INIT and everything before the rings are registered, FORGET, INTERRUPT, and the
 * notifications we send. The rings are made before the mount, so that a host where
 * they cannot be (io_uring off, no memory) keeps a plain mount; INIT asks for
 * FUSE_OVER_IO_URING only then, and once it is agreed the kernel holds every request
 * until each queue has an entry. If a registration fails the kernel goes back to
 * /dev/fuse by itself, and so does the loop's name (serving()).
 *
 * The kernel offers io_uring only while /sys/module/fuse/parameters/enable_uring is
 * set, a switch for the whole host: the daemon sets it only when the operator said
 * LAYERFS_FUSE_URING=on, and says so in the log.
 *
 * A ring's thread ends when the connection does (unmount, abort: the kernel completes
 * the entry with ENOTCONN or ECONNABORTED) or when the session exits (an eventfd the
 * ring polls); a killed daemon's rings go with its files.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fuse_server.h"
#include "fuse_transport.h"
#include "log.h"
#include "probe.h"
#include "util.h"

#define FUSE_URING_POSSIBLE_CPUS "/sys/devices/system/cpu/possible"
/* SQEs a ring needs at once: the wake-up poll and the entry's command. */
#define FUSE_URING_SQES 4

/* What a cqe's user_data names. */
enum { RING_WAKE = 1, RING_ENTRY = 2 };

typedef enum ring_order {
        RINGS_WAIT, /* until INIT is answered */
        RINGS_REGISTER, /* INIT agreed to io_uring */
        RINGS_STOP, /* it did not, or the session ends */
} ring_order;

typedef enum queue_state {
        QUEUE_STARTING,
        QUEUE_MADE, /* its ring exists */
        QUEUE_FAILED, /* its ring could not be made (error) */
        QUEUE_REGISTERED, /* its entry waits for requests */
        QUEUE_REFUSED, /* the kernel refused the entry (error), or the ring stopped first */
} queue_state;

typedef struct fuse_uring_conn fuse_uring_conn;

typedef struct fuse_ring_queue {
        fuse_uring_conn *u;
        unsigned qid;
        pthread_t thread;
        bool started;
        struct io_uring ring;
        struct fuse_uring_header_wire *head;
        char *payload;
        struct iovec iov[2];
        fuse_worker w;
        bool answered;
        queue_state state; /* under u->lock */
        int error;
} fuse_ring_queue;

struct fuse_uring_conn {
        fuse_dev_conn *dev;
        unsigned n_queues;
        fuse_ring_queue *queues;
        int wake_fd; /* readable once the session ends */
        pthread_mutex_t lock;
        pthread_cond_t changed;
        ring_order order;
};

/* The answer to the entry's request: the body into the payload (where w->out already
 * is, for the handlers that build it there), the header into in_out. */
static int ring_answer(fuse_worker *w, uint64_t unique, int32_t error, const struct iovec *body,
                       size_t n_body) {
        fuse_ring_queue *q = w->answer_data;
        size_t used = 0;
        for (size_t i = 0; i < n_body; i++) {
                if (body[i].iov_len > FUSE_DEV_BUFFER - used)
                        return -EIO;
                if (body[i].iov_base != q->payload + used)
                        memmove(q->payload + used, body[i].iov_base, body[i].iov_len);
                used += body[i].iov_len;
        }
        struct fuse_out_hdr out = { .len = (uint32_t)(sizeof(out) + used),
                                    .error = error,
                                    .unique = unique };
        memcpy(q->head->in_out, &out, sizeof(out));
        q->head->ent.payload_sz = (uint32_t)used;
        q->answered = true;
        return 0;
}

/* The entry's command: REGISTER, or COMMIT_AND_FETCH of the request commit_id. Room
 * for it is always there: at most the poll and this command are ever queued at once. */
static void queue_command(fuse_ring_queue *q, uint32_t op, uint64_t commit_id) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
        if (!sqe)
                abort();
        memset(sqe, 0, 2 * sizeof(*sqe)); /* SQE128: the command area follows */
        sqe->opcode = IORING_OP_URING_CMD;
        sqe->fd = q->u->dev->fd;
        sqe->cmd_op = op;
        sqe->addr = (uint64_t)(uintptr_t)q->iov;
        sqe->len = ELEMENTSOF(q->iov);
        sqe->user_data = RING_ENTRY;
        struct fuse_uring_cmd_wire cmd = { .commit_id = commit_id, .qid = (uint16_t)q->qid };
        memcpy(sqe->cmd, &cmd, sizeof(cmd));
}

/* Serves the request the kernel put in the entry and queues its answer. */
static void serve_entry(fuse_ring_queue *q) {
        struct fuse_in_hdr hdr; /* in_out gets the answer's header */
        memcpy(&hdr, q->head->in_out, sizeof(hdr));
        uint64_t commit_id = q->head->ent.commit_id;
        size_t payload_sz = q->head->ent.payload_sz;
        q->answered = false;
        if (payload_sz > FUSE_DEV_BUFFER)
                log_line("fuse: a ring request says it has %zu bytes, more than its %d; refused", payload_sz,
                         FUSE_DEV_BUFFER);
        else
                fuse_serve_request(&q->w, &hdr, q->head->op_in, sizeof(q->head->op_in), q->payload,
                                   payload_sz);
        /* A request without an answer (none come on a ring) would still hold the entry. */
        if (!q->answered)
                (void)ring_answer(&q->w, hdr.unique, -EIO, NULL, 0);
        queue_command(q, FUSE_URING_CMD_COMMIT_AND_FETCH, commit_id);
}

static void set_state(fuse_ring_queue *q, queue_state state, int error) {
        fuse_uring_conn *u = q->u;
        pthread_mutex_lock(&u->lock);
        q->state = state;
        q->error = error;
        pthread_cond_broadcast(&u->changed);
        pthread_mutex_unlock(&u->lock);
}

/* SQE128 for the command area; one issuer with its completions run when it waits,
 * where the kernel allows it (6.1). */
static int make_ring(struct io_uring *ring) {
        struct io_uring_params p = { .flags = IORING_SETUP_SQE128 | IORING_SETUP_SINGLE_ISSUER |
                                              IORING_SETUP_DEFER_TASKRUN };
        int r = io_uring_queue_init_params(FUSE_URING_SQES, ring, &p);
        if (r == -EINVAL) {
                p = (struct io_uring_params){ .flags = IORING_SETUP_SQE128 };
                r = io_uring_queue_init_params(FUSE_URING_SQES, ring, &p);
        }
        return r;
}

/* Registers the entry and says how it went: a refusal comes back at once. */
static bool register_entry(fuse_ring_queue *q) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
        if (!sqe)
                abort();
        io_uring_prep_poll_add(sqe, q->u->wake_fd, POLLIN);
        sqe->user_data = RING_WAKE;
        queue_command(q, FUSE_URING_CMD_REGISTER, 0);
        int r = io_uring_submit(&q->ring);
        struct io_uring_cqe *cqe = NULL;
        if (r >= 0 && io_uring_peek_cqe(&q->ring, &cqe) == 0 && cqe->user_data == RING_ENTRY &&
            cqe->res < 0) {
                r = cqe->res;
                io_uring_cqe_seen(&q->ring, cqe);
        }
        if (r < 0) {
                set_state(q, QUEUE_REFUSED, -r);
                return false;
        }
        set_state(q, QUEUE_REGISTERED, 0);
        return true;
}

static void *ring_thread(void *arg) {
        fuse_ring_queue *q = arg;
        fuse_uring_conn *u = q->u;
        char name[16];
        snprintf(name, sizeof(name), "fuse-ring%u", q->qid);
        (void)pthread_setname_np(pthread_self(), name); /* /proc/PID/task/TID/comm */
        cpu_set_t cpus;
        CPU_ZERO(&cpus);
        CPU_SET(q->qid, &cpus);
        /* Near the callers it serves; a cpuset without this CPU keeps it anywhere. */
        (void)pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
        int r = make_ring(&q->ring);
        set_state(q, r < 0 ? QUEUE_FAILED : QUEUE_MADE, -r);
        if (r < 0)
                return NULL;
        pthread_mutex_lock(&u->lock);
        while (u->order == RINGS_WAIT)
                pthread_cond_wait(&u->changed, &u->lock);
        ring_order order = u->order;
        pthread_mutex_unlock(&u->lock);
        if (order == RINGS_STOP) {
                set_state(q, QUEUE_REFUSED, 0);
        } else if (register_entry(q)) {
                for (;;) {
                        struct io_uring_cqe *cqe;
                        r = io_uring_wait_cqe(&q->ring, &cqe);
                        if (r == -EINTR)
                                continue;
                        if (r < 0)
                                break;
                        uint64_t what = cqe->user_data;
                        int res = cqe->res;
                        io_uring_cqe_seen(&q->ring, cqe);
                        if (what == RING_WAKE)
                                break;
                        if (res < 0) {
                                /* The connection ended (unmount, abort) or the ring goes. */
                                if (res != -ENOTCONN && res != -ECONNABORTED && res != -ECANCELED)
                                        log_line("fuse: ring %u of %s failed: %s; the dev loop serves what "
                                                 "is left",
                                                 q->qid, u->dev->mountpoint, strerror(-res));
                                break;
                        }
                        serve_entry(q);
                        r = io_uring_submit(&q->ring);
                        if (r < 0) {
                                log_line("fuse: cannot answer on ring %u of %s: %s", q->qid,
                                         u->dev->mountpoint, strerror(-r));
                                break;
                        }
                }
        }
        io_uring_queue_exit(&q->ring);
        return NULL;
}

/* INIT is answered, on the /dev/fuse loop's thread: register the entries if it agreed. */
static void rings_initialized(fuse_dev_conn *c) {
        fuse_uring_conn *u = c->rings;
        bool agreed = atomic_load(&c->initialized) && (c->flags & FUSE_F_OVER_IO_URING);
        pthread_mutex_lock(&u->lock);
        if (u->order == RINGS_WAIT)
                u->order = agreed ? RINGS_REGISTER : RINGS_STOP;
        pthread_cond_broadcast(&u->changed);
        pthread_mutex_unlock(&u->lock);
        if (!agreed)
                log_line(
                        "fuse: the kernel did not take FUSE over io_uring at INIT (is %s still 1?); the dev "
                        "loop serves %s",
                        LFS_FUSE_URING_SWITCH, c->mountpoint);
}

/* The number of CPUs the kernel may ever run (its queues, one per CPU id): the highest
 * id in /sys/devices/system/cpu/possible ("0-1", "0,2-5") plus one, or -errno. */
static int possible_cpus(void) {
        char buf[256];
        int fd = open(FUSE_URING_POSSIBLE_CPUS, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (k <= 0)
                return -EIO;
        buf[k] = 0;
        long highest = -1;
        for (char *p = buf; *p && *p != '\n';) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 0 || v > 4095)
                        return -EIO;
                highest = v > highest ? v : highest;
                p = *end == ',' || *end == '-' ? end + 1 : end;
                if (*end != ',' && *end != '-' && *end != '\n' && *end)
                        return -EIO;
        }
        return highest < 0 ? -EIO : (int)(highest + 1);
}

/* Whether the kernel offers FUSE over io_uring, turning it on when the operator said
 * LAYERFS_FUSE_URING=on: 0, or -errno and the log says why and what to do. */
static int uring_switch(void) {
        const char *mode = getenv("LAYERFS_FUSE_URING");
        int on = lfs_probe_fuse_uring();
        if (on < 0) {
                log_line("fuse: this kernel has no FUSE over io_uring (%s: %s); it needs Linux 6.14 with "
                         "CONFIG_FUSE_IO_URING",
                         LFS_FUSE_URING_SWITCH, strerror(-on));
                return on == -ENOENT ? -EOPNOTSUPP : on;
        }
        if (on)
                return 0;
        if (!mode || strcmp(mode, "on")) {
                log_line("fuse: FUSE over io_uring is off on this host (%s is N); turn it on with 'echo 1 > "
                         "%s', or let the daemon do it with LAYERFS_FUSE_URING=on",
                         LFS_FUSE_URING_SWITCH, LFS_FUSE_URING_SWITCH);
                return -EOPNOTSUPP;
        }
        _cleanup_close_ int fd = open(LFS_FUSE_URING_SWITCH, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "1", 1) != 1) {
                int e = errno;
                log_line("fuse: LAYERFS_FUSE_URING=on but %s cannot be set: %s", LFS_FUSE_URING_SWITCH,
                         strerror(e));
                return -e;
        }
        log_line("fuse: LAYERFS_FUSE_URING=on: turned FUSE over io_uring on for the whole host (%s was N, "
                 "now 1)",
                 LFS_FUSE_URING_SWITCH);
        return 0;
}

/* Ends the rings' threads (they exit at once if waiting for INIT or a request) and
 * frees u; /dev/fuse stays. */
static void stop_rings(fuse_uring_conn *u) {
        pthread_mutex_lock(&u->lock);
        u->order = RINGS_STOP;
        pthread_cond_broadcast(&u->changed);
        pthread_mutex_unlock(&u->lock);
        uint64_t one = 1;
        if (write(u->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
                log_line("fuse: cannot wake the rings: %s", strerror(errno));
        for (unsigned i = 0; i < u->n_queues; i++) {
                fuse_ring_queue *q = &u->queues[i];
                if (q->started)
                        pthread_join(q->thread, NULL);
                free(q->head);
                free(q->payload);
        }
        free(u->queues);
        close(u->wake_fd);
        pthread_mutex_destroy(&u->lock);
        pthread_cond_destroy(&u->changed);
}

/* The rings, one per possible CPU, each made by its thread: 0 once all are, or -errno. */
static int start_rings(fuse_uring_conn *u) {
        int n = possible_cpus();
        if (n < 0) {
                log_line("fuse: cannot tell how many CPUs the kernel has queues for (%s): %s",
                         FUSE_URING_POSSIBLE_CPUS, strerror(-n));
                return n;
        }
        u->n_queues = (unsigned)n;
        u->queues = xcalloc(u->n_queues, sizeof(*u->queues));
        int r = 0;
        for (unsigned i = 0; i < u->n_queues && r == 0; i++) {
                fuse_ring_queue *q = &u->queues[i];
                q->u = u;
                q->qid = i;
                q->head = xmalloc_io(sizeof(*q->head));
                q->payload = xmalloc_io(FUSE_DEV_BUFFER);
                q->iov[0] = (struct iovec){ q->head, sizeof(*q->head) };
                q->iov[1] = (struct iovec){ q->payload, FUSE_DEV_BUFFER };
                q->w = (fuse_worker){ .c = u->dev,
                                      .out = q->payload,
                                      .pipe = { -1, -1 },
                                      .answer = ring_answer,
                                      .answer_data = q,
                                      .ring = (int)i };
                r = -pthread_create(&q->thread, NULL, ring_thread, q);
                q->started = r == 0;
        }
        pthread_mutex_lock(&u->lock);
        for (unsigned i = 0; i < u->n_queues; i++) {
                fuse_ring_queue *q = &u->queues[i];
                while (q->started && q->state == QUEUE_STARTING)
                        pthread_cond_wait(&u->changed, &u->lock);
                if (r == 0 && q->state == QUEUE_FAILED)
                        r = -q->error;
        }
        pthread_mutex_unlock(&u->lock);
        if (r < 0)
                log_line("fuse: cannot make the io_uring rings: %s%s", strerror(-r),
                         r == -EPERM ? " (is /proc/sys/kernel/io_uring_disabled set?)" : "");
        return r;
}

static int fuse_uring_mount(fuse_fs fs, const char *mountpoint, const char *fsname, fuse_conn **ret) {
        int r = uring_switch();
        if (r < 0)
                return r;
        fuse_uring_conn *u = xcalloc(1, sizeof(*u));
        pthread_mutex_init(&u->lock, NULL);
        pthread_cond_init(&u->changed, NULL);
        u->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (u->wake_fd < 0) {
                r = -errno;
                pthread_mutex_destroy(&u->lock);
                pthread_cond_destroy(&u->changed);
                free(u);
                return r;
        }
        /* The rings first: the mount only once they are made. */
        u->dev = xcalloc(1, sizeof(*u->dev));
        r = start_rings(u);
        if (r == 0)
                r = fuse_dev_conn_open(fs, mountpoint, fsname, u->dev);
        if (r < 0) {
                stop_rings(u);
                free(u->dev);
                free(u);
                return r;
        }
        u->dev->rings_ready = true;
        u->dev->rings = u;
        u->dev->initialized_hook = rings_initialized;
        *ret = (fuse_conn *)u;
        return 0;
}

static fuse_conn *dev_of(fuse_conn *conn) {
        return (fuse_conn *)((fuse_uring_conn *)conn)->dev;
}

static void fuse_uring_serve(fuse_conn *conn) {
        fuse_transport_dev.serve(dev_of(conn));
}

static void fuse_uring_exit(fuse_conn *conn) {
        fuse_uring_conn *u = (fuse_uring_conn *)conn;
        fuse_transport_dev.exit(dev_of(conn));
        uint64_t one = 1;
        (void)!write(u->wake_fd, &one, sizeof(one));
}

/* The rings go before /dev/fuse: their commands hold it open. */
static void fuse_uring_destroy(fuse_conn *conn) {
        fuse_uring_conn *u = (fuse_uring_conn *)conn;
        if (!u)
                return;
        stop_rings(u);
        fuse_transport_dev.destroy(dev_of(conn));
        free(u);
}

static int fuse_uring_notify_delete(fuse_conn *conn, uint64_t parent, uint64_t child, const char *name) {
        return fuse_transport_dev.notify_delete(dev_of(conn), parent, child, name);
}

static int fuse_uring_notify_inval_entry(fuse_conn *conn, uint64_t parent, const char *name) {
        return fuse_transport_dev.notify_inval_entry(dev_of(conn), parent, name);
}

static int fuse_uring_notify_inval_inode(fuse_conn *conn, uint64_t ino) {
        return fuse_transport_dev.notify_inval_inode(dev_of(conn), ino);
}

static bool fuse_uring_passthrough(const fuse_conn *conn) {
        return fuse_transport_dev.passthrough(dev_of((fuse_conn *)conn));
}

/* "uring" once every queue's entry is registered; "dev" when INIT did not agree or the
 * kernel refused an entry (it then serves every request over /dev/fuse). Waits for the
 * rings to say, which they do as soon as INIT is answered: the mount has been stat()ed
 * by then. */
static const char *fuse_uring_serving(const fuse_conn *conn) {
        fuse_uring_conn *u = (fuse_uring_conn *)conn;
        bool all = true;
        pthread_mutex_lock(&u->lock);
        for (unsigned i = 0; i < u->n_queues; i++) {
                fuse_ring_queue *q = &u->queues[i];
                while (atomic_load(&u->dev->initialized) && u->order != RINGS_WAIT &&
                       (q->state == QUEUE_STARTING || q->state == QUEUE_MADE) && q->started)
                        pthread_cond_wait(&u->changed, &u->lock);
                all = all && q->state == QUEUE_REGISTERED;
        }
        pthread_mutex_unlock(&u->lock);
        return all ? "uring" : "dev";
}

const fuse_transport fuse_transport_uring = {
        .name = "uring",
        .mount = fuse_uring_mount,
        .serve = fuse_uring_serve,
        .exit = fuse_uring_exit,
        .destroy = fuse_uring_destroy,
        .notify_delete = fuse_uring_notify_delete,
        .notify_inval_entry = fuse_uring_notify_inval_entry,
        .notify_inval_inode = fuse_uring_notify_inval_inode,
        .passthrough = fuse_uring_passthrough,
        .serving = fuse_uring_serving,
};
