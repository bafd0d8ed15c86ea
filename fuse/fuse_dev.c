/* SPDX-License-Identifier: MIT */
/*
 * Our FUSE loop (LAYERFS_FUSE_TRANSPORT=dev): each worker reads one request at a time
 * from /dev/fuse into its own buffer, checks its size, and dispatches it through
 * fuse_ops_table, one row per opcode, to the filesystem's table (fuse_fs.h); the answer is one writev. Only
 * this file and fuse_libfuse.c know FUSE; fuse_proto.h has the wire format.
 *
 * Compared with libfuse's loop it asks INIT for what the Workspace uses and nothing
 * more (no IOCTL on directories), names what later steps will ask for (passthrough,
 * io_uring, HANDLE_KILLPRIV_V2, READDIRPLUS), and leaves room for them.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fuse_mount.h"
#include "fuse_proto.h"
#include "fuse_server.h"
#include "fuse_transport.h"
#include "log.h"
#include "util.h"

/* What we ask of INIT when the kernel offers it: each is something the Workspace does
 * or the kernel can do for it (docs/workspace.md). Left out on purpose: POSIX and flock
 * locks (the kernel keeps them: this mount is the only view of its files),
 * AUTO_INVAL_DATA (only we change the data), WRITEBACK_CACHE (write-through with
 * FOPEN_NOFLUSH keeps close() one RELEASE), IOCTL_DIR (every ioctl gets ENOTTY anyway),
 * DONT_MASK (the kernel applies the umask). */
static const uint64_t fuse_dev_wanted = FUSE_F_ASYNC_READ | FUSE_F_ATOMIC_O_TRUNC | FUSE_F_EXPORT_SUPPORT |
                                        FUSE_F_BIG_WRITES | FUSE_F_ASYNC_DIO | FUSE_F_PARALLEL_DIROPS |
                                        FUSE_F_HANDLE_KILLPRIV_V2 | FUSE_F_MAX_PAGES | FUSE_F_INIT_EXT |
                                        FUSE_F_DO_READDIRPLUS | FUSE_F_READDIRPLUS_AUTO;
/* HANDLE_KILLPRIV_V2: the kernel tells us when a write, truncate or O_TRUNC comes from a
 * caller without CAP_FSETID, and we clear the set-id bits (ws_kill_setid); it no longer
 * sends a SETATTR of the mode, nor asks GETXATTR security.capability, before such a
 * write. Not the first HANDLE_KILLPRIV, which leaves the clearing to us without saying
 * who writes. On a kernel without V2 the kernel clears them itself by SETATTR.
 * READDIRPLUS with AUTO: a listing answers the lookups `ls -l` and `find` would send
 * after it (ws_readdirplus counts them), and the kernel asks for it only when it pays
 * (the first batch, or after lookups in the directory).
 * OVER_IO_URING only when rings wait to serve (fuse_uring.c): once agreed, the kernel
 * holds every request until they are registered. */
/* Backing files sit on the home's filesystem, not on another stacked one: one level of
 * stacking, which leaves room for an overlay mounted over the Workspace. */
#define FUSE_DEV_STACK_DEPTH 1

/* A request as the handlers see it: the header, arg_len bytes of arguments starting with
 * the opcode's fixed struct, then at rest (for some) NUL-terminated names, then (for
 * some) data at tail. */
typedef struct fuse_request {
        const struct fuse_in_hdr *hdr;
        const char *arg;
        size_t arg_len;
        const char *rest;
        size_t rest_len;
        const char *name, *name2;
        const char *tail;
        size_t tail_len;
} fuse_request;

/* Writes one message: the header and the body's pieces. The kernel refuses an answer
 * to a request it has given up on (interrupted, aborted) with ENOENT: nothing to do. */
static int send_message(fuse_dev_conn *c, uint64_t unique, int32_t error, const struct iovec *body,
                        size_t n_body) {
        struct iovec iov[4];
        struct fuse_out_hdr out = { .len = sizeof(out), .error = error, .unique = unique };
        iov[0] = (struct iovec){ .iov_base = &out, .iov_len = sizeof(out) };
        for (size_t i = 0; i < n_body && i + 1 < ELEMENTSOF(iov); i++) {
                iov[i + 1] = body[i];
                out.len += (uint32_t)body[i].iov_len;
        }
        ssize_t k = writev(c->fd, iov, (int)n_body + 1);
        if (k < 0) /* a notification's ENOENT means what it names is not cached: the caller's */
                return errno == ENOENT && unique ? 0 : -errno;
        return k == (ssize_t)out.len ? 0 : -EIO;
}

/* A request's answer, where the worker sends them. */
static int answer(fuse_worker *w, const fuse_request *r, int32_t error, const struct iovec *body,
                  size_t n_body) {
        if (w->answer)
                return w->answer(w, r->hdr->unique, error, body, n_body);
        return send_message(w->c, r->hdr->unique, error, body, n_body);
}

static int reply_buf(fuse_worker *w, const fuse_request *r, const void *buf, size_t len) {
        struct iovec body = { .iov_base = (void *)buf, .iov_len = len };
        return answer(w, r, 0, &body, len ? 1 : 0);
}

static void reply_error(fuse_worker *w, const fuse_request *r, int negative_errno) {
        (void)answer(w, r, negative_errno, NULL, 0);
}

static void attr_of(struct fuse_attr_wire *a, const struct stat *st) {
        *a = (struct fuse_attr_wire){
                .ino = st->st_ino,
                .size = (uint64_t)st->st_size,
                .blocks = (uint64_t)st->st_blocks,
                .atime = (uint64_t)st->st_atim.tv_sec,
                .mtime = (uint64_t)st->st_mtim.tv_sec,
                .ctime = (uint64_t)st->st_ctim.tv_sec,
                .atimensec = (uint32_t)st->st_atim.tv_nsec,
                .mtimensec = (uint32_t)st->st_mtim.tv_nsec,
                .ctimensec = (uint32_t)st->st_ctim.tv_nsec,
                .mode = st->st_mode,
                .nlink = (uint32_t)st->st_nlink,
                .uid = st->st_uid,
                .gid = st->st_gid,
                .rdev = (uint32_t)st->st_rdev,
                .blksize = (uint32_t)st->st_blksize,
        };
}

static void entry_of(struct fuse_entry_wire *e, const struct stat *st) {
        *e = (struct fuse_entry_wire){
                .nodeid = st->st_ino,
                .generation = 1,
                .entry_valid = FUSE_CACHE_SECONDS,
                .attr_valid = FUSE_CACHE_SECONDS,
        };
        attr_of(&e->attr, st);
}

static int reply_entry(fuse_worker *w, const fuse_request *r, int result, const struct stat *st) {
        if (result < 0)
                return result;
        struct fuse_entry_wire e;
        entry_of(&e, st);
        return reply_buf(w, r, &e, sizeof(e));
}

static int reply_attr(fuse_worker *w, const fuse_request *r, int result, const struct stat *st) {
        if (result < 0)
                return result;
        struct fuse_attr_answer a = { .attr_valid = FUSE_CACHE_SECONDS };
        attr_of(&a.attr, st);
        return reply_buf(w, r, &a, sizeof(a));
}

static int reply_status(fuse_worker *w, const fuse_request *r, int result) {
        if (result < 0)
                return result;
        return reply_buf(w, r, NULL, 0);
}

/* The n names after the fixed arguments, each ending with its NUL inside the request,
 * and what follows them; false when one does not. */
static bool take_names(fuse_request *r, unsigned n) {
        size_t pos = 0;
        const char **names[] = { &r->name, &r->name2 };
        for (unsigned i = 0; i < n && i < ELEMENTSOF(names); i++) {
                const char *nul = pos < r->rest_len ? memchr(r->rest + pos, 0, r->rest_len - pos) : NULL;
                if (!nul)
                        return false;
                *names[i] = r->rest + pos;
                pos = (size_t)(nul - r->rest) + 1;
        }
        r->tail = r->rest + pos;
        r->tail_len = r->rest_len - pos;
        return true;
}

static ws_caller caller_of(const fuse_request *r, uint32_t umask) {
        return (ws_caller){ .uid = r->hdr->uid, .gid = r->hdr->gid, .umask = umask };
}

/* Each handler answers its request itself and returns 0, or returns a negative errno
 * for the loop to answer with. Its fixed arguments and names are there (fuse_op). */
typedef int (*fuse_handler)(fuse_worker *w, const fuse_request *r);

/* The credentials the kernel keeps with a backing file (it takes the caller's at
 * BACKING_OPEN) are the ones its reads and writes run under, and the ones it opens the
 * file with for each passed-through open. So they are made for that, on this thread
 * alone, around the ioctl: the Workspace owner's fsuid and fsgid (ext4 keeps its root
 * reserve from them, as from our own writes: space_for in workspace.c), CAP_SYS_ADMIN
 * (which BACKING_OPEN demands) and CAP_DAC_OVERRIDE (the upper file is ours, mode 0600)
 * and no other capability (no CAP_SYS_RESOURCE: the reserve again). Seven syscalls: the
 * thread's own capabilities are read once (nothing else here changes them, and this
 * gives them back), and setfsuid/setfsgid say what they replace. */
static __thread struct {
        bool known;
        struct __user_cap_data_struct caps[2];
} thread_caps;

static int backing_open_as(fuse_dev_conn *c, int fd, uid_t owner, gid_t group) {
        struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct narrow[2];
        if (!thread_caps.known) {
                if (syscall(SYS_capget, &head, thread_caps.caps) < 0)
                        return -errno;
                thread_caps.known = true;
        }
        memcpy(narrow, thread_caps.caps, sizeof(narrow));
        narrow[0].effective = (1u << CAP_SYS_ADMIN) | (1u << CAP_DAC_OVERRIDE);
        narrow[1].effective = 0;
        gid_t fsgid = (gid_t)setfsgid(group);
        uid_t fsuid = (uid_t)setfsuid(owner);
        int id = -EPERM;
        if (syscall(SYS_capset, &head, narrow) == 0) {
                struct fuse_backing_map_wire map = { .fd = fd };
                id = ioctl(c->fd, FUSE_DEV_IOC_BACKING_OPEN_CMD, &map);
                if (id < 0)
                        id = -errno;
        } else {
                id = -errno;
        }
        /* Back to the daemon's own: fsuid 0 gives back the file capabilities, capset the
         * rest. Failing that this thread could not go on serving as root. */
        (void)setfsuid(fsuid);
        (void)setfsgid(fsgid);
        if (syscall(SYS_capset, &head, thread_caps.caps) < 0)
                abort();
        return id;
}

static int fuse_dev_backing_open(void *userdata, int fd, uid_t owner, gid_t group) {
        fuse_dev_conn *c = userdata;
        int id = backing_open_as(c, fd, owner, group);
        if (id <= 0 && !atomic_exchange(&c->backing_failed, true))
                log_line("fuse: cannot register an upper file of %s with the kernel for passthrough: %s; "
                         "its data, and that of any other that fails so, goes through the daemon",
                         c->mountpoint, strerror(id < 0 ? -id : EIO));
        else if (id > 0 && c->debug) /* counted by tests/e2e/test_workspace_passthrough.sh */
                log_line("fuse: BACKING_OPEN %d", id);
        return id;
}

static void fuse_dev_backing_close(void *userdata, int id) {
        fuse_dev_conn *c = userdata;
        uint32_t backing = (uint32_t)id;
        if (ioctl(c->fd, FUSE_DEV_IOC_BACKING_CLOSE_CMD, &backing) < 0) {
                if (c->debug)
                        log_line("fuse: BACKING_CLOSE %d: %s", id, strerror(errno));
        } else if (c->debug) {
                log_line("fuse: BACKING_CLOSE %d", id);
        }
}

static const ws_backing_ops fuse_dev_backing_ops = {
        .open = fuse_dev_backing_open,
        .close = fuse_dev_backing_close,
};

static int do_init(fuse_worker *w, const fuse_request *r) {
        fuse_dev_conn *c = w->c;
        struct fuse_init_request in = { 0 };
        memcpy(&in, r->arg, r->arg_len < sizeof(in) ? r->arg_len : sizeof(in));
        struct fuse_init_answer out = { .major = FUSE_PROTO_MAJOR, .minor = FUSE_PROTO_MINOR };
        if (in.major > FUSE_PROTO_MAJOR) /* the kernel asks again in our major */
                return reply_buf(w, r, &out, sizeof(out));
        if (in.major < FUSE_PROTO_MAJOR || in.minor < FUSE_PROTO_MINOR_MIN) {
                log_line("fuse: the kernel speaks FUSE %u.%u, older than the %u.%u this loop needs; use "
                         "LAYERFS_FUSE_TRANSPORT=libfuse",
                         in.major, in.minor, FUSE_PROTO_MAJOR, FUSE_PROTO_MINOR_MIN);
                return -EPROTO;
        }
        uint64_t offered = in.flags;
        if ((in.flags & FUSE_F_INIT_EXT) && r->arg_len >= offsetof(struct fuse_init_request, unused))
                offered |= (uint64_t)in.flags2 << 32;
        uint64_t wanted = fuse_dev_wanted | (c->passthrough_asked != 0 ? FUSE_F_PASSTHROUGH : 0) |
                          (c->rings_ready ? FUSE_F_OVER_IO_URING : 0);
        uint64_t agreed = offered & wanted;
        c->minor = in.minor < FUSE_PROTO_MINOR ? in.minor : FUSE_PROTO_MINOR;
        out.max_readahead = in.max_readahead;
        out.flags = (uint32_t)agreed;
        if (agreed & FUSE_F_INIT_EXT)
                out.flags2 = (uint32_t)(agreed >> 32);
        out.max_write = FUSE_DEV_MAX_WRITE;
        out.time_gran = 1;
        if (agreed & FUSE_F_MAX_PAGES)
                out.max_pages = (uint16_t)(FUSE_DEV_MAX_WRITE / (size_t)sysconf(_SC_PAGESIZE));
        if (agreed & FUSE_F_PASSTHROUGH)
                out.max_stack_depth = FUSE_DEV_STACK_DEPTH;
        else if (c->passthrough_asked == 1)
                log_line(
                        "fuse: LAYERFS_FUSE_PASSTHROUGH=1 but the kernel (FUSE %u.%u) does not offer "
                        "passthrough (CONFIG_FUSE_PASSTHROUGH, Linux 6.9); file data goes through the daemon",
                        in.major, in.minor);
        c->flags = agreed; /* before the kernel can send the first OPEN */
        if (agreed & FUSE_F_PASSTHROUGH)
                WS_CALL_OR(c->fs, set_passthrough, (void)0, &fuse_dev_backing_ops, c);
        int ret = reply_buf(w, r, &out, sizeof(out));
        if (ret == 0)
                atomic_store(&c->initialized, true);
        if (c->debug)
                log_line("fuse: INIT %u.%u offered %#llx, agreed %#llx", in.major, in.minor,
                         (unsigned long long)offered, (unsigned long long)agreed);
        if (c->initialized_hook)
                c->initialized_hook(c);
        return ret;
}

static int do_destroy(fuse_worker *w, const fuse_request *r) {
        atomic_store(&w->c->exited, true);
        return reply_buf(w, r, NULL, 0);
}

static int do_lookup(fuse_worker *w, const fuse_request *r) {
        struct stat st;
        int ret = WS_CALL(w->c->fs, lookup, r->hdr->nodeid, r->name, &st);
        if (ret == -ENOENT) {
                /* A negative entry the kernel may cache, as long as only we change things. */
                struct fuse_entry_wire e = { .entry_valid = FUSE_CACHE_SECONDS };
                return reply_buf(w, r, &e, sizeof(e));
        }
        return reply_entry(w, r, ret, &st);
}

/* FORGET and BATCH_FORGET have no answer. */
static int do_forget(fuse_worker *w, const fuse_request *r) {
        const struct fuse_forget_request *in = (const void *)r->arg;
        WS_CALL_OR(w->c->fs, forget, (void)0, r->hdr->nodeid, in->nlookup);
        return 0;
}

static int do_batch_forget(fuse_worker *w, const fuse_request *r) {
        const struct fuse_batch_forget_request *in = (const void *)r->arg;
        size_t room = r->rest_len / sizeof(struct fuse_forget_one);
        size_t n = in->count < room ? in->count : room;
        for (size_t i = 0; i < n; i++) {
                struct fuse_forget_one one;
                memcpy(&one, r->rest + i * sizeof(one), sizeof(one));
                WS_CALL_OR(w->c->fs, forget, (void)0, one.nodeid, one.nlookup);
        }
        return 0;
}

/* INTERRUPT: every request here is answered as soon as it is served, so an interrupted
 * one gets its answer anyway; the kernel drops it. No answer. */
static int do_interrupt(fuse_worker *w, const fuse_request *r) {
        (void)w;
        (void)r;
        return 0;
}

static int do_getattr(fuse_worker *w, const fuse_request *r) {
        struct stat st;
        return reply_attr(w, r, WS_CALL(w->c->fs, getattr, r->hdr->nodeid, &st), &st);
}

static int do_setattr(fuse_worker *w, const fuse_request *r) {
        const struct fuse_setattr_request *in = (const void *)r->arg;
        const unsigned known = FUSE_ATTR_SET_MODE | FUSE_ATTR_SET_UID | FUSE_ATTR_SET_GID |
                               FUSE_ATTR_SET_SIZE | FUSE_ATTR_SET_ATIME | FUSE_ATTR_SET_MTIME |
                               FUSE_ATTR_SET_ATIME_NOW | FUSE_ATTR_SET_MTIME_NOW | FUSE_ATTR_SET_CTIME |
                               FUSE_ATTR_KILL_SUIDGID;
        struct stat attr = {
                .st_mode = in->mode,
                .st_uid = in->uid,
                .st_gid = in->gid,
                .st_size = (off_t)in->size,
                .st_atim = { .tv_sec = (time_t)in->atime, .tv_nsec = in->atimensec },
                .st_mtim = { .tv_sec = (time_t)in->mtime, .tv_nsec = in->mtimensec },
                .st_ctim = { .tv_sec = (time_t)in->ctime, .tv_nsec = in->ctimensec },
        };
        struct stat st;
        int ret = WS_CALL(w->c->fs, setattr, r->hdr->nodeid, &attr, (int)(in->valid & known), &st);
        return reply_attr(w, r, ret, &st);
}

static int do_readlink(fuse_worker *w, const fuse_request *r) {
        _cleanup_free_ char *target = NULL;
        int ret = WS_CALL(w->c->fs, readlink, r->hdr->nodeid, &target);
        if (ret < 0)
                return ret;
        return reply_buf(w, r, target, strlen(target));
}

static int do_mknod(fuse_worker *w, const fuse_request *r) {
        const struct fuse_mknod_request *in = (const void *)r->arg;
        ws_caller who = caller_of(r, in->umask);
        struct stat st;
        return reply_entry(w, r, WS_CALL(w->c->fs, mknod, &who, r->hdr->nodeid, r->name, in->mode, &st),
                           &st);
}

static int do_mkdir(fuse_worker *w, const fuse_request *r) {
        const struct fuse_mkdir_request *in = (const void *)r->arg;
        ws_caller who = caller_of(r, in->umask);
        struct stat st;
        return reply_entry(w, r, WS_CALL(w->c->fs, mkdir, &who, r->hdr->nodeid, r->name, in->mode, &st),
                           &st);
}

/* SYMLINK's arguments: the new name, then the target. */
static int do_symlink(fuse_worker *w, const fuse_request *r) {
        ws_caller who = caller_of(r, 0);
        struct stat st;
        return reply_entry(w, r, WS_CALL(w->c->fs, symlink, &who, r->name2, r->hdr->nodeid, r->name, &st),
                           &st);
}

static int do_link(fuse_worker *w, const fuse_request *r) {
        const struct fuse_link_request *in = (const void *)r->arg;
        struct stat st;
        return reply_entry(w, r, WS_CALL(w->c->fs, link, in->oldnodeid, r->hdr->nodeid, r->name, &st), &st);
}

static int do_unlink(fuse_worker *w, const fuse_request *r) {
        return reply_status(w, r, WS_CALL(w->c->fs, unlink, r->hdr->nodeid, r->name));
}

static int do_rmdir(fuse_worker *w, const fuse_request *r) {
        return reply_status(w, r, WS_CALL(w->c->fs, rmdir, r->hdr->nodeid, r->name));
}

static int do_rename(fuse_worker *w, const fuse_request *r) {
        const struct fuse_rename_request *in = (const void *)r->arg;
        return reply_status(w, r,
                            WS_CALL(w->c->fs, rename, r->hdr->nodeid, r->name, in->newdir, r->name2, 0));
}

static int do_rename2(fuse_worker *w, const fuse_request *r) {
        const struct fuse_rename2_request *in = (const void *)r->arg;
        return reply_status(
                w, r, WS_CALL(w->c->fs, rename, r->hdr->nodeid, r->name, in->newdir, r->name2, in->flags));
}

/* Nobody else changes the data under the kernel's page cache (keep it across opens),
 * writes are synchronous and locks are the kernel's (nothing to flush on close). */
static const uint32_t file_open_flags = FUSE_OPEN_KEEP_CACHE | FUSE_OPEN_NOFLUSH;

/* An open's answer: served by us, or passed through to backing file id. */
static struct fuse_open_answer open_answer(uint64_t fh, int backing) {
        if (backing > 0)
                return (struct fuse_open_answer){ .fh = fh,
                                                  .open_flags = FUSE_OPEN_PASSTHROUGH | FUSE_OPEN_NOFLUSH,
                                                  .backing_id = backing };
        return (struct fuse_open_answer){ .fh = fh, .open_flags = file_open_flags };
}

/* The set-id bits of nodeid go when the kernel says so: then the mode it caches is stale
 * (it refreshes size and times after a write, not the mode). */
static int kill_setid(fuse_worker *w, uint64_t nodeid) {
        int ret = WS_CALL_OR(w->c->fs, kill_setid, 0, nodeid);
        if (ret > 0) {
                struct fuse_note_inval_inode msg = { .ino = nodeid, .off = -1 }; /* the attributes alone */
                struct iovec body = { &msg, sizeof(msg) };
                (void)send_message(w->c, 0, FUSE_NOTE_INVAL_INODE, &body, 1);
        }
        return ret < 0 ? ret : 0;
}

static int do_open(fuse_worker *w, const fuse_request *r) {
        const struct fuse_open_request *in = (const void *)r->arg;
        int killed = (in->open_flags & FUSE_OPEN_KILL_SUIDGID) ? kill_setid(w, r->hdr->nodeid) : 0;
        if (killed < 0)
                return killed;
        uint64_t fh = 0;
        int backing = 0;
        int ret = WS_CALL(w->c->fs, open, r->hdr->nodeid, (int)in->flags, &fh, &backing);
        if (ret < 0)
                return ret;
        /* A write passed through clears no set-id bit (the kernel writes the upper file
         * without us), and an inode that already passes through for a reader passes this
         * writer through too: its open clears them, before any write, whoever the writer
         * (we cannot tell who has CAP_FSETID); ws_setattr refuses them while it lasts. */
        if (backing > 0 && (in->flags & O_ACCMODE) != O_RDONLY)
                (void)kill_setid(w, r->hdr->nodeid);
        struct fuse_open_answer out = open_answer(fh, backing);
        return reply_buf(w, r, &out, sizeof(out));
}

static int do_create(fuse_worker *w, const fuse_request *r) {
        const struct fuse_create_request *in = (const void *)r->arg;
        ws_caller who = caller_of(r, in->umask);
        struct stat st;
        uint64_t fh = 0;
        int backing = 0;
        int ret = WS_CALL(w->c->fs, create, &who, r->hdr->nodeid, r->name, in->mode, (int)in->flags, &st,
                          &fh, &backing);
        if (ret < 0)
                return ret;
        struct fuse_entry_wire e;
        entry_of(&e, &st);
        struct fuse_open_answer open = open_answer(fh, backing);
        struct iovec body[] = { { &e, sizeof(e) }, { &open, sizeof(open) } };
        return answer(w, r, 0, body, ELEMENTSOF(body));
}

/* Below this a read is copied through the answer buffer: splicing costs more calls than
 * it saves. */
#define FUSE_DEV_SPLICE_MIN (64 * 1024)

/* Empties the worker's pipe after an answer that did not take all of it. */
static void drain_pipe(fuse_worker *w) {
        while (read(w->pipe[0], w->out, FUSE_DEV_BUFFER) > 0)
                ;
}

/* A large read's answer goes from the upper file or the Store's object into the pipe
 * and from there to /dev/fuse by splice, never through our memory. The header goes in
 * first; when the file has less than asked (it shrank), what the pipe holds is read
 * back, the header corrected and the whole written. -EAGAIN: not answered, copy it. */
static int reply_spliced(fuse_worker *w, const fuse_request *r, const ws_extent *x) {
        struct fuse_out_hdr out = { .len = (uint32_t)(sizeof(out) + x->length), .unique = r->hdr->unique };
        if (write(w->pipe[1], &out, sizeof(out)) != (ssize_t)sizeof(out)) {
                drain_pipe(w);
                return -EAGAIN;
        }
        size_t moved = 0;
        loff_t off = x->offset;
        while (moved < x->length) {
                ssize_t k = splice(x->fd, &off, w->pipe[1], NULL, x->length - moved, SPLICE_F_MOVE);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                moved += (size_t)k;
        }
        if (moved < x->length) {
                ssize_t held = read(w->pipe[0], w->out, sizeof(out) + moved);
                drain_pipe(w);
                if (held != (ssize_t)(sizeof(out) + moved))
                        return -EAGAIN;
                return reply_buf(w, r, w->out + sizeof(out), moved);
        }
        ssize_t k = splice(w->pipe[0], NULL, w->c->fd, NULL, out.len, SPLICE_F_MOVE);
        if (k != (ssize_t)out.len) {
                int e = k < 0 ? errno : EIO;
                drain_pipe(w);
                return e == ENOENT ? 0 : -e; /* ENOENT: the kernel gave up on the request */
        }
        return 0;
}

static int do_read(fuse_worker *w, const fuse_request *r) {
        const struct fuse_read_request *in = (const void *)r->arg;
        size_t size = in->size < FUSE_DEV_MAX_WRITE ? in->size : FUSE_DEV_MAX_WRITE;
        ws_extent x;
        int ret = WS_CALL(w->c->fs, read_extent, in->fh, size, (off_t)in->offset, &x);
        if (ret < 0)
                return ret;
        if (x.length >= FUSE_DEV_SPLICE_MIN && sizeof(struct fuse_out_hdr) + x.length <= w->pipe_size &&
            (ret = reply_spliced(w, r, &x)) != -EAGAIN)
                return ret;
        /* Whole: a short answer is the end of the file to the kernel. */
        ssize_t done = lfs_pread_full(x.fd, w->out, x.length, x.offset);
        if (done < 0)
                return (int)done;
        return reply_buf(w, r, w->out, (size_t)done);
}

static int do_write(fuse_worker *w, const fuse_request *r) {
        const struct fuse_write_request *in = (const void *)r->arg;
        if (in->size > r->tail_len)
                return -EINVAL;
        int killed = (in->write_flags & FUSE_WRITE_KILL_SUIDGID) ? kill_setid(w, r->hdr->nodeid) : 0;
        if (killed < 0)
                return killed;
        ssize_t k = WS_CALL(w->c->fs, write, in->fh, r->tail, in->size, (off_t)in->offset);
        if (k < 0)
                return (int)k;
        struct fuse_write_answer out = { .size = (uint32_t)k };
        return reply_buf(w, r, &out, sizeof(out));
}

static int do_flush(fuse_worker *w, const fuse_request *r) {
        return reply_buf(w, r, NULL, 0);
}

static int do_release(fuse_worker *w, const fuse_request *r) {
        const struct fuse_release_request *in = (const void *)r->arg;
        return reply_status(w, r, WS_CALL(w->c->fs, release, in->fh));
}

static int do_fsync(fuse_worker *w, const fuse_request *r) {
        const struct fuse_fsync_request *in = (const void *)r->arg;
        return reply_status(w, r, WS_CALL(w->c->fs, fsync, in->fh, in->fsync_flags & FUSE_FSYNC_DATASYNC));
}

static int do_fallocate(fuse_worker *w, const fuse_request *r) {
        const struct fuse_fallocate_request *in = (const void *)r->arg;
        return reply_status(
                w, r,
                WS_CALL(w->c->fs, fallocate, in->fh, (int)in->mode, (off_t)in->offset, (off_t)in->length));
}

static int do_lseek(fuse_worker *w, const fuse_request *r) {
        const struct fuse_lseek_request *in = (const void *)r->arg;
        off_t at;
        int ret = WS_CALL(w->c->fs, lseek, in->fh, (off_t)in->offset, (int)in->whence, &at);
        if (ret < 0)
                return ret;
        struct fuse_lseek_answer out = { .offset = (uint64_t)at };
        return reply_buf(w, r, &out, sizeof(out));
}

static int do_opendir(fuse_worker *w, const fuse_request *r) {
        int ret = WS_CALL(w->c->fs, opendir, r->hdr->nodeid);
        if (ret < 0)
                return ret;
        struct fuse_open_answer out = { 0 };
        return reply_buf(w, r, &out, sizeof(out));
}

static int do_releasedir(fuse_worker *w, const fuse_request *r) {
        WS_CALL_OR(w->c->fs, releasedir, (void)0, r->hdr->nodeid);
        return reply_buf(w, r, NULL, 0);
}

typedef struct dir_fill {
        char *buf;
        size_t size, used;
} dir_fill;

/* One entry: its header, its name, zeros up to the next 8 bytes. */
static bool fill_entry(void *userdata, const char *name, const struct stat *st, off_t next) {
        dir_fill *df = userdata;
        size_t namelen = strlen(name);
        size_t len = (sizeof(struct fuse_dirent_wire) + namelen + 7) & ~(size_t)7;
        if (len > df->size - df->used)
                return false;
        struct fuse_dirent_wire d = {
                .ino = st->st_ino,
                .off = (uint64_t)next,
                .namelen = (uint32_t)namelen,
                .type = (st->st_mode & S_IFMT) >> 12,
        };
        char *p = df->buf + df->used;
        memcpy(p, &d, sizeof(d));
        memcpy(p + sizeof(d), name, namelen);
        memset(p + sizeof(d) + namelen, 0, len - sizeof(d) - namelen);
        df->used += len;
        return true;
}

/* READDIRPLUS's entry: the entry's answer as LOOKUP gives it (nodeid 0: none, the kernel
 * looks the name up itself if it needs it), then the entry as READDIR gives it. */
static bool fill_entry_plus(void *userdata, const char *name, const struct stat *st, off_t next,
                            bool with_entry) {
        dir_fill *df = userdata;
        size_t namelen = strlen(name);
        size_t len = (sizeof(struct fuse_entry_wire) + sizeof(struct fuse_dirent_wire) + namelen + 7) &
                     ~(size_t)7;
        if (len > df->size - df->used)
                return false;
        struct fuse_entry_wire e = { 0 };
        if (with_entry)
                entry_of(&e, st);
        memcpy(df->buf + df->used, &e, sizeof(e));
        df->used += sizeof(e);
        dir_fill rest = { .buf = df->buf + df->used, .size = len - sizeof(e) };
        (void)fill_entry(&rest, name, st, next);
        df->used += rest.used;
        return true;
}

static int do_readdirplus(fuse_worker *w, const fuse_request *r) {
        const struct fuse_read_request *in = (const void *)r->arg;
        dir_fill df = { .buf = w->out, .size = in->size < FUSE_DEV_BUFFER ? in->size : FUSE_DEV_BUFFER };
        int ret = WS_CALL(w->c->fs, readdirplus, r->hdr->nodeid, (off_t)in->offset, fill_entry_plus, &df);
        if (ret < 0)
                return ret;
        return reply_buf(w, r, df.buf, df.used);
}

static int do_readdir(fuse_worker *w, const fuse_request *r) {
        const struct fuse_read_request *in = (const void *)r->arg;
        dir_fill df = { .buf = w->out, .size = in->size < FUSE_DEV_BUFFER ? in->size : FUSE_DEV_BUFFER };
        int ret = WS_CALL(w->c->fs, readdir, r->hdr->nodeid, (off_t)in->offset, fill_entry, &df);
        if (ret < 0)
                return ret;
        return reply_buf(w, r, df.buf, df.used);
}

static int do_statfs(fuse_worker *w, const fuse_request *r) {
        struct statvfs st;
        int ret = WS_CALL(w->c->fs, statfs, &st);
        if (ret < 0)
                return ret;
        struct fuse_statfs_answer out = {
                .blocks = st.f_blocks,
                .bfree = st.f_bfree,
                .bavail = st.f_bavail,
                .files = st.f_files,
                .ffree = st.f_ffree,
                .bsize = (uint32_t)st.f_bsize,
                .namelen = (uint32_t)st.f_namemax,
                .frsize = (uint32_t)st.f_frsize,
        };
        return reply_buf(w, r, &out, sizeof(out));
}

static int do_setxattr(fuse_worker *w, const fuse_request *r) {
        const struct fuse_setxattr_request *in = (const void *)r->arg;
        if (in->size > r->tail_len)
                return -EINVAL;
        return reply_status(
                w, r,
                WS_CALL(w->c->fs, setxattr, r->hdr->nodeid, r->name, r->tail, in->size, (int)in->flags));
}

/* size 0 asks how much room the value needs; otherwise the value itself. */
static int reply_xattr(fuse_worker *w, const fuse_request *r, ssize_t k, size_t size) {
        if (k < 0)
                return (int)k;
        if (size == 0) {
                struct fuse_getxattr_answer out = { .size = (uint32_t)k };
                return reply_buf(w, r, &out, sizeof(out));
        }
        return reply_buf(w, r, w->out, (size_t)k);
}

/* The name is copied out first: a ring's w->out, where the value goes, holds it. */
static int do_getxattr(fuse_worker *w, const fuse_request *r) {
        const struct fuse_getxattr_request *in = (const void *)r->arg;
        size_t size = in->size < FUSE_DEV_BUFFER ? in->size : FUSE_DEV_BUFFER;
        char name[XATTR_NAME_MAX + 1];
        size_t len = strnlen(r->name, sizeof(name));
        if (len == sizeof(name))
                return -ERANGE;
        memcpy(name, r->name, len + 1);
        return reply_xattr(
                w, r, WS_CALL(w->c->fs, getxattr, r->hdr->nodeid, name, size ? w->out : NULL, size), size);
}

static int do_listxattr(fuse_worker *w, const fuse_request *r) {
        const struct fuse_getxattr_request *in = (const void *)r->arg;
        size_t size = in->size < FUSE_DEV_BUFFER ? in->size : FUSE_DEV_BUFFER;
        return reply_xattr(w, r, WS_CALL(w->c->fs, listxattr, r->hdr->nodeid, size ? w->out : NULL, size),
                           size);
}

static int do_removexattr(fuse_worker *w, const fuse_request *r) {
        return reply_status(w, r, WS_CALL(w->c->fs, removexattr, r->hdr->nodeid, r->name));
}

/* A request kind: its handler, the size of its fixed arguments and how many names
 * follow them, all checked before the handler runs. An opcode without a row (or a
 * handler) gets ENOSYS, which the kernel remembers for most of them (FSYNCDIR,
 * COPY_FILE_RANGE, STATX, POLL...) and stops sending. */
typedef struct fuse_op {
        fuse_handler handler;
        size_t arg_size;
        unsigned names;
} fuse_op;

static const fuse_op fuse_ops_table[FUSE_OP_LIMIT] = {
        [FUSE_OP_INIT] = { do_init, 16, 0 }, /* 7.36 added flags2 and the rest */
        [FUSE_OP_DESTROY] = { do_destroy, 0, 0 },
        [FUSE_OP_LOOKUP] = { do_lookup, 0, 1 },
        [FUSE_OP_FORGET] = { do_forget, sizeof(struct fuse_forget_request), 0 },
        [FUSE_OP_BATCH_FORGET] = { do_batch_forget, sizeof(struct fuse_batch_forget_request), 0 },
        [FUSE_OP_INTERRUPT] = { do_interrupt, sizeof(struct fuse_interrupt_request), 0 },
        [FUSE_OP_GETATTR] = { do_getattr, 0, 0 },
        [FUSE_OP_SETATTR] = { do_setattr, sizeof(struct fuse_setattr_request), 0 },
        [FUSE_OP_READLINK] = { do_readlink, 0, 0 },
        [FUSE_OP_SYMLINK] = { do_symlink, 0, 2 }, /* the new name, then the target */
        [FUSE_OP_MKNOD] = { do_mknod, sizeof(struct fuse_mknod_request), 1 },
        [FUSE_OP_MKDIR] = { do_mkdir, sizeof(struct fuse_mkdir_request), 1 },
        [FUSE_OP_UNLINK] = { do_unlink, 0, 1 },
        [FUSE_OP_RMDIR] = { do_rmdir, 0, 1 },
        [FUSE_OP_RENAME] = { do_rename, sizeof(struct fuse_rename_request), 2 },
        [FUSE_OP_RENAME2] = { do_rename2, sizeof(struct fuse_rename2_request), 2 },
        [FUSE_OP_LINK] = { do_link, sizeof(struct fuse_link_request), 1 },
        [FUSE_OP_OPEN] = { do_open, sizeof(struct fuse_open_request), 0 },
        [FUSE_OP_CREATE] = { do_create, sizeof(struct fuse_create_request), 1 },
        [FUSE_OP_READ] = { do_read, sizeof(struct fuse_read_request), 0 },
        [FUSE_OP_WRITE] = { do_write, sizeof(struct fuse_write_request), 0 }, /* the data at tail */
        [FUSE_OP_FLUSH] = { do_flush, sizeof(struct fuse_flush_request), 0 },
        [FUSE_OP_RELEASE] = { do_release, sizeof(struct fuse_release_request), 0 },
        [FUSE_OP_FSYNC] = { do_fsync, sizeof(struct fuse_fsync_request), 0 },
        [FUSE_OP_FALLOCATE] = { do_fallocate, sizeof(struct fuse_fallocate_request), 0 },
        [FUSE_OP_LSEEK] = { do_lseek, sizeof(struct fuse_lseek_request), 0 },
        [FUSE_OP_OPENDIR] = { do_opendir, sizeof(struct fuse_open_request), 0 },
        [FUSE_OP_READDIR] = { do_readdir, sizeof(struct fuse_read_request), 0 },
        [FUSE_OP_READDIRPLUS] = { do_readdirplus, sizeof(struct fuse_read_request), 0 },
        [FUSE_OP_RELEASEDIR] = { do_releasedir, sizeof(struct fuse_release_request), 0 },
        [FUSE_OP_STATFS] = { do_statfs, 0, 0 },
        [FUSE_OP_SETXATTR] = { do_setxattr, sizeof(struct fuse_setxattr_request),
                               1 }, /* the value at tail */
        [FUSE_OP_GETXATTR] = { do_getxattr, sizeof(struct fuse_getxattr_request), 1 },
        [FUSE_OP_LISTXATTR] = { do_listxattr, sizeof(struct fuse_getxattr_request), 0 },
        [FUSE_OP_REMOVEXATTR] = { do_removexattr, 0, 1 },
};

static const char *fuse_opcode_name(uint32_t opcode) {
        switch (opcode) {
#define FUSE_OPCODE_NAME(name, number)                                                                      \
        case number:                                                                                        \
                return #name;
                FUSE_OPCODES(FUSE_OPCODE_NAME)
#undef FUSE_OPCODE_NAME
        default:
                return "UNKNOWN";
        }
}

/* Requests that never get an answer, whatever happens to them. */
static bool has_no_answer(uint32_t opcode) {
        return opcode == FUSE_OP_FORGET || opcode == FUSE_OP_BATCH_FORGET || opcode == FUSE_OP_INTERRUPT;
}

void fuse_serve_request(fuse_worker *w, const struct fuse_in_hdr *hdr, const char *arg, size_t arg_len,
                        const char *rest, size_t rest_len) {
        fuse_dev_conn *c = w->c;
        fuse_request r = { .hdr = hdr, .arg = arg, .arg_len = arg_len, .rest = rest, .rest_len = rest_len };
        if (c->debug) {
                char via[32] = "/dev/fuse";
                if (w->ring >= 0)
                        snprintf(via, sizeof(via), "ring %d", w->ring);
                log_line("fuse: %s unique %llu node %llu, %zu bytes, on %s", fuse_opcode_name(hdr->opcode),
                         (unsigned long long)hdr->unique, (unsigned long long)hdr->nodeid,
                         rest ? arg_len + rest_len : arg_len, via);
        }
        const fuse_op *op = hdr->opcode < FUSE_OP_LIMIT ? &fuse_ops_table[hdr->opcode] : NULL;
        int ret;
        if (op && op->handler && !rest && arg_len >= op->arg_size) {
                r.rest = arg + op->arg_size;
                r.rest_len = arg_len - op->arg_size;
        }
        if (!op || !op->handler)
                ret = -ENOSYS;
        else if (r.arg_len < op->arg_size || !take_names(&r, op->names))
                ret = -EINVAL;
        else if (!atomic_load(&c->initialized) && hdr->opcode != FUSE_OP_INIT)
                ret = -EIO; /* the kernel sends nothing before INIT is answered */
        else
                ret = op->handler(w, &r);
        if (ret < 0 && !has_no_answer(hdr->opcode))
                reply_error(w, &r, ret);
}

/* The worker's pipe for spliced reads, made big enough for the largest answer if the
 * kernel lets us: the daemon has no CAP_SYS_RESOURCE, so past /proc/sys/fs/pipe-max-size
 * (1 MiB by default) it does not, and a whole 1 MiB read (header included) is copied
 * instead, as libfuse's loop does. */
static void open_pipe(fuse_worker *w) {
        w->pipe[0] = w->pipe[1] = -1;
        w->pipe_size = 0;
        if (pipe2(w->pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
                w->pipe[0] = w->pipe[1] = -1;
                return;
        }
        int size = fcntl(w->pipe[1], F_SETPIPE_SZ, FUSE_DEV_BUFFER);
        if (size < 0)
                size = fcntl(w->pipe[1], F_SETPIPE_SZ, FUSE_DEV_MAX_WRITE);
        if (size < 0)
                size = fcntl(w->pipe[1], F_GETPIPE_SZ);
        w->pipe_size = size > 0 ? (size_t)size : 0;
}

static void fuse_dev_serve(fuse_conn *conn) {
        fuse_dev_conn *c = (fuse_dev_conn *)conn;
        fuse_worker w = {
                .c = c, .in = xmalloc_io(FUSE_DEV_BUFFER), .out = xmalloc_io(FUSE_DEV_BUFFER), .ring = -1
        };
        open_pipe(&w);
        while (!atomic_load(&c->exited)) {
                ssize_t k = read(c->fd, w.in, FUSE_DEV_BUFFER);
                if (k < 0) {
                        /* ENOENT: the request was interrupted before we read it. */
                        if (errno == EINTR || errno == EAGAIN || errno == ENOENT)
                                continue;
                        if (errno != ENODEV) /* ENODEV: unmounted, or the connection aborted */
                                log_line(
                                        "fuse: cannot read /dev/fuse: %s; the Workspace at %s stops answering",
                                        strerror(errno), c->mountpoint);
                        break;
                }
                const struct fuse_in_hdr *hdr = (const void *)w.in;
                if ((size_t)k < sizeof(*hdr) || hdr->len != (size_t)k) {
                        log_line("fuse: a request of %zd bytes says it has %u; dropped", k,
                                 (size_t)k >= sizeof(*hdr) ? hdr->len : 0);
                        continue;
                }
                fuse_serve_request(&w, hdr, w.in + sizeof(*hdr), (size_t)k - sizeof(*hdr), NULL, 0);
        }
        if (w.pipe[0] >= 0) {
                close(w.pipe[0]);
                close(w.pipe[1]);
        }
        free(w.in);
        free(w.out);
}

int fuse_dev_conn_open(fuse_fs fs, const char *mountpoint, const char *fsname, fuse_dev_conn *c) {
        int fd = lfs_fuse_mount_fd(mountpoint, fsname);
        if (fd < 0)
                return fd;
        c->fs = fs;
        c->fd = fd;
        c->mountpoint = xstrdup(mountpoint);
        const char *debug = getenv("LAYERFS_FUSE_DEBUG");
        c->debug = debug && *debug == '1';
        const char *passthrough = getenv("LAYERFS_FUSE_PASSTHROUGH");
        c->passthrough_asked = !passthrough || !*passthrough ? -1 : !strcmp(passthrough, "0") ? 0 : 1;
        return 0;
}

static int fuse_dev_mount(fuse_fs fs, const char *mountpoint, const char *fsname, fuse_conn **ret) {
        fuse_dev_conn *c = xcalloc(1, sizeof(*c));
        int r = fuse_dev_conn_open(fs, mountpoint, fsname, c);
        if (r < 0) {
                free(c);
                return r;
        }
        *ret = (fuse_conn *)c;
        return 0;
}

static void fuse_dev_exit(fuse_conn *conn) {
        fuse_dev_conn *c = (fuse_dev_conn *)conn;
        atomic_store(&c->exited, true);
}

static void fuse_dev_destroy(fuse_conn *conn) {
        fuse_dev_conn *c = (fuse_dev_conn *)conn;
        if (!c)
                return;
        /* A connection still alive means the mount is still there (an unmount or an
         * abort raises POLLERR on the fd): detach it, as libfuse does. */
        struct pollfd p = { .fd = c->fd, .events = 0 };
        if (poll(&p, 1, 0) == 0 || !(p.revents & POLLERR))
                (void)umount2(c->mountpoint, MNT_DETACH);
        close(c->fd);
        free(c->mountpoint);
        free(c);
}

static int notify(fuse_dev_conn *c, int code, const void *msg, size_t msg_len, const char *name) {
        if (!atomic_load(&c->initialized))
                return -ENOTCONN;
        struct iovec body[] = {
                { (void *)msg, msg_len },
                { (void *)name, name ? strlen(name) + 1 : 0 },
        };
        return send_message(c, 0, code, body, name ? 2 : 1);
}

static int fuse_dev_notify_delete(fuse_conn *conn, uint64_t parent, uint64_t child, const char *name) {
        fuse_dev_conn *c = (fuse_dev_conn *)conn;
        struct fuse_note_delete msg = { .parent = parent,
                                        .child = child,
                                        .namelen = (uint32_t)strlen(name) };
        return notify(c, FUSE_NOTE_DELETE, &msg, sizeof(msg), name);
}

static int fuse_dev_notify_inval_entry(fuse_conn *conn, uint64_t parent, const char *name) {
        fuse_dev_conn *c = (fuse_dev_conn *)conn;
        struct fuse_note_inval_entry msg = { .parent = parent, .namelen = (uint32_t)strlen(name) };
        return notify(c, FUSE_NOTE_INVAL_ENTRY, &msg, sizeof(msg), name);
}

static int fuse_dev_notify_inval_inode(fuse_conn *conn, uint64_t ino) {
        fuse_dev_conn *c = (fuse_dev_conn *)conn;
        struct fuse_note_inval_inode msg = { .ino = ino, .off = 0, .len = 0 };
        return notify(c, FUSE_NOTE_INVAL_INODE, &msg, sizeof(msg), NULL);
}

static bool fuse_dev_passthrough(const fuse_conn *conn) {
        const fuse_dev_conn *c = (const fuse_dev_conn *)conn;
        return atomic_load(&c->initialized) && (c->flags & FUSE_F_PASSTHROUGH);
}

const fuse_transport fuse_transport_dev = {
        .name = "dev",
        .mount = fuse_dev_mount,
        .serve = fuse_dev_serve,
        .exit = fuse_dev_exit,
        .destroy = fuse_dev_destroy,
        .notify_delete = fuse_dev_notify_delete,
        .notify_inval_entry = fuse_dev_notify_inval_entry,
        .notify_inval_inode = fuse_dev_notify_inval_inode,
        .passthrough = fuse_dev_passthrough,
};
