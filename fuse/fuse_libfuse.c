/* SPDX-License-Identifier: MIT */
/* The libfuse transport (fuse_transport.h's default row): libfuse3's low-level API and
 * its loop mapped onto the filesystem's table (fuse_fs.h). */
#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fuse_mount.h"
#include "fuse_transport.h"
#include "log.h"
#include "util.h"

_Static_assert(FUSE_SET_ATTR_CTIME == (1 << 10), "workspace.c mirrors the FUSE_SET_ATTR_* values");

/* Only this mount changes what it shows, so the kernel may cache for long. */
static const double cache_seconds = FUSE_CACHE_SECONDS;

/* The libfuse row's fuse_conn: the session, and the filesystem its requests go to. */
typedef struct libfuse_conn {
        struct fuse_session *se;
        fuse_fs fs;
} libfuse_conn;

static fuse_fs fs_of(fuse_req_t req) {
        return ((libfuse_conn *)fuse_req_userdata(req))->fs;
}

static ws_caller caller_of(fuse_req_t req) {
        const struct fuse_ctx *ctx = fuse_req_ctx(req);
        return (ws_caller){ .uid = ctx->uid, .gid = ctx->gid, .umask = ctx->umask };
}

static struct fuse_entry_param entry_param(const struct stat *st) {
        return (struct fuse_entry_param){
                .ino = st->st_ino,
                .generation = 1,
                .attr = *st,
                .attr_timeout = cache_seconds,
                .entry_timeout = cache_seconds,
        };
}

static void reply_entry(fuse_req_t req, int r, const struct stat *st) {
        if (r < 0) {
                fuse_reply_err(req, -r);
                return;
        }
        struct fuse_entry_param e = entry_param(st);
        fuse_reply_entry(req, &e);
}

static void reply_attr(fuse_req_t req, int r, const struct stat *st) {
        if (r < 0)
                fuse_reply_err(req, -r);
        else
                fuse_reply_attr(req, st, cache_seconds);
}

static void op_init(void *userdata, struct fuse_conn_info *conn) {
        (void)userdata;
        /* Locks stay in the kernel: this mount is the only view of its files. For the
         * same reason the kernel need not drop cached pages when mtime changes (it made
         * the change). */
        conn->want &= ~(unsigned)(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_AUTO_INVAL_DATA);
        /* Write-through, not the writeback cache: with it every close() writes the dirty
         * pages back, sends FLUSH and forgets the cached st_blocks, so that the next
         * stat or fstat is a GETATTR. Write-through with FOPEN_NOFLUSH makes close()
         * a RELEASE alone and keeps the attributes cached (bench/workspace_fs.sh). */
        conn->want &= ~(unsigned)FUSE_CAP_WRITEBACK_CACHE;
        if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
                conn->want |= FUSE_CAP_EXPORT_SUPPORT;
        /* Large reads go from the upper file or the Store's object to the kernel by
         * splice, not copied through a buffer here (op_read). */
        if (conn->capable & FUSE_CAP_SPLICE_WRITE)
                conn->want |= FUSE_CAP_SPLICE_WRITE;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
        struct stat st;
        int r = WS_CALL(fs_of(req), lookup, parent, name, &st);
        if (r == -ENOENT) {
                /* A negative entry the kernel may cache, as long as only we change things. */
                struct fuse_entry_param e = { .ino = 0, .entry_timeout = cache_seconds };
                fuse_reply_entry(req, &e);
                return;
        }
        reply_entry(req, r, &st);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
        WS_CALL_OR(fs_of(req), forget, (void)0, ino, nlookup);
        fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        (void)fi;
        struct stat st;
        int r = WS_CALL(fs_of(req), getattr, ino, &st);
        reply_attr(req, r, &st);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi) {
        (void)fi;
        struct stat st;
        int r = WS_CALL(fs_of(req), setattr, ino, attr, to_set, &st);
        reply_attr(req, r, &st);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino) {
        char *target = NULL;
        int r = WS_CALL(fs_of(req), readlink, ino, &target);
        if (r < 0)
                fuse_reply_err(req, -r);
        else
                fuse_reply_readlink(req, target);
        free(target);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) {
        (void)rdev;
        struct stat st;
        ws_caller who = caller_of(req);
        int r = WS_CALL(fs_of(req), mknod, &who, parent, name, mode, &st);
        reply_entry(req, r, &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
        struct stat st;
        ws_caller who = caller_of(req);
        int r = WS_CALL(fs_of(req), mkdir, &who, parent, name, mode, &st);
        reply_entry(req, r, &st);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name) {
        struct stat st;
        ws_caller who = caller_of(req);
        int r = WS_CALL(fs_of(req), symlink, &who, target, parent, name, &st);
        reply_entry(req, r, &st);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name) {
        struct stat st;
        int r = WS_CALL(fs_of(req), link, ino, parent, name, &st);
        reply_entry(req, r, &st);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
        fuse_reply_err(req, -WS_CALL(fs_of(req), unlink, parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
        fuse_reply_err(req, -WS_CALL(fs_of(req), rmdir, parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t new_parent,
                      const char *new_name, unsigned int flags) {
        fuse_reply_err(req, -WS_CALL(fs_of(req), rename, parent, name, new_parent, new_name, flags));
}

static void set_open_flags(struct fuse_file_info *fi, uint64_t fh) {
        fi->fh = fh;
        fi->keep_cache = 1; /* nobody else changes the data under the kernel's page cache */
        fi->noflush = 1; /* writes are synchronous and locks are the kernel's: nothing to flush */
}

static void reply_open(fuse_req_t req, int r, uint64_t fh, struct fuse_file_info *fi) {
        if (r < 0) {
                fuse_reply_err(req, -r);
                return;
        }
        set_open_flags(fi, fh);
        fuse_reply_open(req, fi);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        /* The kernel truncates by O_TRUNC here (atomic_o_trunc) without clearing set-id
         * bits, and libfuse 3.14 cannot say whether the caller has CAP_FSETID
         * (HANDLE_KILLPRIV_V2): anyone but root is taken to lack it. */
        if ((fi->flags & O_TRUNC) && fuse_req_ctx(req)->uid != 0 &&
            WS_CALL_OR(fs_of(req), kill_setid, 0, ino) > 0)
                (void)fuse_lowlevel_notify_inval_inode(((libfuse_conn *)fuse_req_userdata(req))->se, ino, -1,
                                                       0);
        uint64_t fh = 0;
        int r = WS_CALL(fs_of(req), open, ino, fi->flags, &fh, NULL);
        reply_open(req, r, fh, fi);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi) {
        struct stat st;
        uint64_t fh = 0;
        ws_caller who = caller_of(req);
        int r = WS_CALL(fs_of(req), create, &who, parent, name, mode, fi->flags, &st, &fh, NULL);
        if (r < 0) {
                fuse_reply_err(req, -r);
                return;
        }
        set_open_flags(fi, fh);
        struct fuse_entry_param e = entry_param(&st);
        fuse_reply_create(req, &e, fi);
}

/* Below this a read is copied through a buffer: splicing costs more calls than it saves. */
static const size_t splice_min = 64 * 1024;

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
        (void)ino;
        ws_extent x;
        int r = WS_CALL(fs_of(req), read_extent, fi->fh, size, off, &x);
        if (r < 0) {
                fuse_reply_err(req, -r);
                return;
        }
        if (x.length == 0) {
                fuse_reply_buf(req, NULL, 0);
                return;
        }
        struct fuse_bufvec data = FUSE_BUFVEC_INIT(x.length);
        data.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
        data.buf[0].fd = x.fd;
        data.buf[0].pos = x.offset;
        fuse_reply_data(req, &data, x.length < splice_min ? FUSE_BUF_NO_SPLICE : FUSE_BUF_SPLICE_MOVE);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi) {
        (void)ino;
        ssize_t k = WS_CALL(fs_of(req), write, fi->fh, buf, size, off);
        if (k < 0)
                fuse_reply_err(req, (int)-k);
        else
                fuse_reply_write(req, (size_t)k);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        (void)ino;
        (void)fi;
        fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        (void)ino;
        fuse_reply_err(req, -WS_CALL(fs_of(req), release, fi->fh));
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
        (void)ino;
        fuse_reply_err(req, -WS_CALL(fs_of(req), fsync, fi->fh, datasync));
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi) {
        (void)ino;
        off_t at;
        int r = WS_CALL(fs_of(req), lseek, fi->fh, off, whence, &at);
        if (r < 0)
                fuse_reply_err(req, -r);
        else
                fuse_reply_lseek(req, at);
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi) {
        (void)ino;
        fuse_reply_err(req, -WS_CALL(fs_of(req), fallocate, fi->fh, mode, off, len));
}

typedef struct dir_fill {
        fuse_req_t req;
        char *buf;
        size_t size, used;
} dir_fill;

static bool fill_entry(void *userdata, const char *name, const struct stat *st, off_t next) {
        dir_fill *df = userdata;
        size_t need = fuse_add_direntry(df->req, df->buf + df->used, df->size - df->used, name, st, next);
        if (need > df->size - df->used)
                return false;
        df->used += need;
        return true;
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        int r = WS_CALL(fs_of(req), opendir, ino);
        if (r < 0)
                fuse_reply_err(req, -r);
        else
                fuse_reply_open(req, fi);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        (void)fi;
        WS_CALL_OR(fs_of(req), releasedir, (void)0, ino);
        fuse_reply_err(req, 0);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
        (void)fi;
        dir_fill df = { .req = req, .buf = malloc(size ? size : 1), .size = size };
        if (!df.buf) {
                fuse_reply_err(req, ENOMEM);
                return;
        }
        int r = WS_CALL(fs_of(req), readdir, ino, off, fill_entry, &df);
        if (r < 0)
                fuse_reply_err(req, -r);
        else
                fuse_reply_buf(req, df.buf, df.used);
        free(df.buf);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino) {
        (void)ino;
        struct statvfs st;
        int r = WS_CALL(fs_of(req), statfs, &st);
        if (r < 0)
                fuse_reply_err(req, -r);
        else
                fuse_reply_statfs(req, &st);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                        int flags) {
        fuse_reply_err(req, -WS_CALL(fs_of(req), setxattr, ino, name, value, size, flags));
}

/* size 0 asks how much room the value needs; otherwise the value itself. */
static void reply_xattr(fuse_req_t req, ssize_t k, size_t size, const char *buf) {
        if (k < 0)
                fuse_reply_err(req, (int)-k);
        else if (size == 0)
                fuse_reply_xattr(req, (size_t)k);
        else
                fuse_reply_buf(req, buf, (size_t)k);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
        char *buf = size ? malloc(size) : NULL;
        ssize_t k = WS_CALL(fs_of(req), getxattr, ino, name, buf, size);
        reply_xattr(req, k, size, buf);
        free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
        char *buf = size ? malloc(size) : NULL;
        ssize_t k = WS_CALL(fs_of(req), listxattr, ino, buf, size);
        reply_xattr(req, k, size, buf);
        free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) {
        fuse_reply_err(req, -WS_CALL(fs_of(req), removexattr, ino, name));
}

static const struct fuse_lowlevel_ops ops = {
        .init = op_init,
        .lookup = op_lookup,
        .forget = op_forget,
        .getattr = op_getattr,
        .setattr = op_setattr,
        .readlink = op_readlink,
        .mknod = op_mknod,
        .mkdir = op_mkdir,
        .unlink = op_unlink,
        .rmdir = op_rmdir,
        .symlink = op_symlink,
        .rename = op_rename,
        .link = op_link,
        .open = op_open,
        .read = op_read,
        .write = op_write,
        .flush = op_flush,
        .release = op_release,
        .fsync = op_fsync,
        .opendir = op_opendir,
        .readdir = op_readdir,
        .releasedir = op_releasedir,
        .statfs = op_statfs,
        .setxattr = op_setxattr,
        .getxattr = op_getxattr,
        .listxattr = op_listxattr,
        .removexattr = op_removexattr,
        .create = op_create,
        .fallocate = op_fallocate,
        .lseek = op_lseek,
};

/* The libfuse row: its connection is libfuse's session. */
static int libfuse_mount(fuse_fs fs, const char *mountpoint, const char *fsname, fuse_conn **ret) {
        char *opts = NULL;
        if (asprintf(&opts, FUSE_MOUNT_OPTIONS ",fsname=%s,subtype=" FUSE_MOUNT_SUBTYPE, fsname) < 0)
                return -ENOMEM;
        /* LAYERFS_FUSE_DEBUG=1 logs every request to the daemon's log. */
        const char *debug = getenv("LAYERFS_FUSE_DEBUG");
        char *argv[] = { "layerfs-daemon", "-o", opts, "-d", NULL };
        struct fuse_args args = FUSE_ARGS_INIT(debug && *debug == '1' ? 4 : 3, argv);
        libfuse_conn *c = xcalloc(1, sizeof(*c));
        c->fs = fs;
        c->se = fuse_session_new(&args, &ops, sizeof(ops), c);
        fuse_opt_free_args(&args); /* libfuse may have copied them */
        free(opts);
        if (!c->se) {
                free(c);
                return -EINVAL; /* libfuse said why on stderr, the log */
        }
        if (fuse_session_mount(c->se, mountpoint) != 0) {
                fuse_session_destroy(c->se);
                free(c);
                return -EIO;
        }
        *ret = (fuse_conn *)c;
        return 0;
}

static struct fuse_session *session_of(fuse_conn *c) {
        return ((libfuse_conn *)c)->se;
}

static void libfuse_serve(fuse_conn *c) {
        fuse_session_loop(session_of(c));
}

static void libfuse_exit(fuse_conn *c) {
        fuse_session_exit(session_of(c));
}

static void libfuse_destroy(fuse_conn *c) {
        fuse_session_unmount(session_of(c));
        fuse_session_destroy(session_of(c));
        free(c);
}

static int libfuse_notify_delete(fuse_conn *c, uint64_t parent, uint64_t child, const char *name) {
        return fuse_lowlevel_notify_delete(session_of(c), parent, child, name, strlen(name));
}

static int libfuse_notify_inval_entry(fuse_conn *c, uint64_t parent, const char *name) {
        return fuse_lowlevel_notify_inval_entry(session_of(c), parent, name, strlen(name));
}

static int libfuse_notify_inval_inode(fuse_conn *c, uint64_t ino) {
        return fuse_lowlevel_notify_inval_inode(session_of(c), ino, 0, 0);
}

const fuse_transport fuse_transport_libfuse = {
        .name = "libfuse",
        .mount = libfuse_mount,
        .serve = libfuse_serve,
        .exit = libfuse_exit,
        .destroy = libfuse_destroy,
        .notify_delete = libfuse_notify_delete,
        .notify_inval_entry = libfuse_notify_inval_entry,
        .notify_inval_inode = libfuse_notify_inval_inode,
};
