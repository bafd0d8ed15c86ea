/* SPDX-License-Identifier: MIT */
/* fuse-floor: a FUSE filesystem that does no work, for bench/workspace_fs.sh.
 *
 * It keeps its files in memory and answers each request at once, served by the daemon's
 * own FUSE transports (fuse/: the mount setup, the loop LAYERFS_FUSE_TRANSPORT names,
 * passthrough as LAYERFS_FUSE_PASSTHROUGH says, the one dispatch) through a table of
 * operations as the Workspace's is (fuse_fs.h). What the workload costs on it is what
 * the kernel's FUSE requests cost by themselves over that transport: no FUSE filesystem
 * served so can be faster, so it is the floor under the Workspace's figures, per
 * transport, and the two cannot drift apart (read-ahead, INIT's flags, splice, cache
 * timeouts are the transport's, not each server's).
 *
 * usage: fuse-floor MOUNTPOINT   (prints one line once the mount answers, then serves
 *                                 until unmounted, SIGINT or SIGTERM)
 *
 * File data lives in memory (a memfd, tmpfs): the first DATA_MAX bytes of a file are
 * kept; past that the size grows and reads return zeros (a hole), so that the 1 GiB rows
 * measure the transport and not memory. Nothing is freed before the floor ends. With passthrough each file
 * has a memfd of its own, registered as its backing file by the same rule as the Workspace's upper files
 * (writers pass through, readers of files under WS_PASSTHROUGH_READ_MIN not registered yet are
 * served, a registration is kept until the file goes), and
 * the kernel writes it whole. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fuse_fs.h"
#include "fuse_mount.h"
#include "fuse_transport.h"
#include "util.h"

#define DATA_MAX (64 * 1024)
/* Without passthrough, file ino's data is at ino * FILE_SPAN in one sparse memfd. */
#define FILE_SPAN ((off_t)1 << 32)
#define DATA_SIZE ((off_t)1 << 60)

typedef struct child {
        char *name;
        uint64_t ino;
} child;

typedef struct node {
        struct stat st; /* st_nlink 0: unused, or unlinked and waiting for its last release */
        size_t data_size; /* bytes of data kept, at most DATA_MAX */
        int fd; /* its own memfd (passthrough), or -1: in the shared one */
        unsigned opens;
        int backing_id; /* registered with the kernel from its first open passed through; 0: none */
        child *children;
        size_t n_children, cap_children;
} node;

struct ws_fs {
        pthread_mutex_t lock; /* the rings' threads serve at once */
        node *nodes;
        size_t n_nodes, cap_nodes;
        int data; /* the shared memfd */
        const ws_backing_ops *backing; /* passthrough agreed at INIT */
        void *backing_data;
        /* The memfds of files gone, closed when the floor ends: an UNLINK frees nothing,
         * as the Workspace's leaves its upper file to a reaper thread. */
        int *gone;
        size_t n_gone, cap_gone;
};

static void unlockp(pthread_mutex_t **m) {
        pthread_mutex_unlock(*m);
}
/* Holds the floor's lock until the function returns. */
#define LOCK_GUARD(fs)                                                                                      \
        _cleanup_(unlockp) pthread_mutex_t *_guard = (pthread_mutex_lock(&(fs)->lock), &(fs)->lock)

static node *node_of(ws_fs *fs, uint64_t ino) {
        return ino >= 1 && ino < fs->n_nodes && fs->nodes[ino].st.st_mode ? &fs->nodes[ino] : NULL;
}

/* A file with passthrough is its memfd: the kernel's writes there moved its size. */
static void refresh(node *n) {
        struct stat st;
        if (n->fd >= 0 && fstat(n->fd, &st) == 0) {
                n->st.st_size = st.st_size;
                n->st.st_blocks = st.st_blocks;
        }
}

static int attr_of(node *n, struct stat *ret) {
        refresh(n);
        *ret = n->st;
        return 0;
}

static int node_new(ws_fs *fs, mode_t mode, uid_t uid, gid_t gid, uint64_t *ret) {
        int fd = -1;
        if (S_ISREG(mode) && fs->backing && (fd = memfd_create("fuse-floor-file", MFD_CLOEXEC)) < 0)
                return -errno;
        GROW(fs->nodes, fs->cap_nodes, fs->n_nodes + 1);
        uint64_t ino = fs->n_nodes++;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        fs->nodes[ino] = (node){
                .st = { .st_ino = ino,
                        .st_mode = mode,
                        .st_nlink = S_ISDIR(mode) ? 2 : 1,
                        .st_uid = uid,
                        .st_gid = gid,
                        .st_blksize = 4096,
                        .st_atim = now,
                        .st_mtim = now,
                        .st_ctim = now },
                .fd = fd,
        };
        *ret = ino;
        return 0;
}

/* Gone once it has no name and no open. Its data stays where it is until the floor ends
 * (at most DATA_MAX a file in the shared memfd, or its own memfd kept open). */
static void node_drop_if_gone(ws_fs *fs, node *n) {
        if (n->st.st_nlink || n->opens)
                return;
        if (n->backing_id > 0)
                fs->backing->close(fs->backing_data, n->backing_id);
        if (n->fd >= 0) {
                GROW(fs->gone, fs->cap_gone, fs->n_gone + 1);
                fs->gone[fs->n_gone++] = n->fd;
        }
        free(n->children);
        *n = (node){ .fd = -1 };
}

static child *child_find(node *dir, const char *name) {
        for (size_t i = 0; i < dir->n_children; i++)
                if (!strcmp(dir->children[i].name, name))
                        return &dir->children[i];
        return NULL;
}

static int floor_lookup(ws_fs *fs, uint64_t parent, const char *name, struct stat *ret) {
        LOCK_GUARD(fs);
        node *dir = node_of(fs, parent);
        child *c = dir ? child_find(dir, name) : NULL;
        return c ? attr_of(&fs->nodes[c->ino], ret) : -ENOENT;
}

static int floor_getattr(ws_fs *fs, uint64_t ino, struct stat *ret) {
        LOCK_GUARD(fs);
        node *n = node_of(fs, ino);
        return n ? attr_of(n, ret) : -ENOENT;
}

static void truncate_node(node *n, off_t size) {
        if (n->fd >= 0)
                (void)!ftruncate(n->fd, size);
        n->st.st_size = size;
        if ((size_t)size < n->data_size)
                n->data_size = (size_t)size;
}

static int floor_setattr(ws_fs *fs, uint64_t ino, const struct stat *attr, int to_set, struct stat *ret) {
        LOCK_GUARD(fs);
        node *n = node_of(fs, ino);
        if (!n)
                return -ENOENT;
        if (to_set & WS_SET_MODE)
                n->st.st_mode = (n->st.st_mode & S_IFMT) | (attr->st_mode & 07777);
        if (to_set & WS_SET_SIZE)
                truncate_node(n, attr->st_size);
        return attr_of(n, ret);
}

/* A name in parent for a new node of mode: its number in *ret. */
static int make_node(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
                     uint64_t *ret) {
        node *dir = node_of(fs, parent);
        if (!dir || !S_ISDIR(dir->st.st_mode))
                return -ENOENT;
        if (child_find(dir, name))
                return -EEXIST;
        uint64_t ino = 0;
        int r = node_new(fs, mode, who->uid, who->gid, &ino);
        if (r < 0)
                return r;
        dir = &fs->nodes[parent]; /* the table may have moved */
        GROW(dir->children, dir->cap_children, dir->n_children + 1);
        dir->children[dir->n_children++] = (child){ .name = xstrdup(name), .ino = ino };
        *ret = ino;
        return 0;
}

static int floor_mkdir(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
                       struct stat *ret) {
        LOCK_GUARD(fs);
        uint64_t ino;
        int r = make_node(fs, who, parent, name, S_IFDIR | (mode & 07777), &ino);
        return r < 0 ? r : attr_of(&fs->nodes[ino], ret);
}

static int remove_name(ws_fs *fs, uint64_t parent, const char *name, bool want_dir) {
        LOCK_GUARD(fs);
        node *dir = node_of(fs, parent);
        child *c = dir ? child_find(dir, name) : NULL;
        if (!c)
                return -ENOENT;
        node *n = &fs->nodes[c->ino];
        if (want_dir != S_ISDIR(n->st.st_mode))
                return want_dir ? -ENOTDIR : -EISDIR;
        if (want_dir && n->n_children)
                return -ENOTEMPTY;
        free(c->name);
        *c = dir->children[--dir->n_children];
        n->st.st_nlink = 0;
        node_drop_if_gone(fs, n);
        return 0;
}

static int floor_unlink(ws_fs *fs, uint64_t parent, const char *name) {
        return remove_name(fs, parent, name, false);
}

static int floor_rmdir(ws_fs *fs, uint64_t parent, const char *name) {
        return remove_name(fs, parent, name, true);
}

/* The Workspace's rule (workspace.c, backing_for): writers pass through, readers of
 * files under WS_PASSTHROUGH_READ_MIN are served unless a registration is kept, and an
 * open inode keeps the mode its first open got. A registration is kept until the file
 * goes (the floor has no FORGET to wait for: its files live until removed). */
static int backing_for(ws_fs *fs, node *n, bool writable) {
        if (!fs->backing || n->fd < 0)
                return 0;
        if (n->backing_id > 0)
                return n->backing_id;
        if ((!writable && n->st.st_size < WS_PASSTHROUGH_READ_MIN) || n->opens > 0)
                return 0;
        int id = fs->backing->open(fs->backing_data, n->fd, getuid(), getgid());
        n->backing_id = id > 0 ? id : 0;
        return n->backing_id;
}

/* A handle is the file's number. */
static int open_node(ws_fs *fs, node *n, int flags, uint64_t *ret_fh, int *ret_backing) {
        if (S_ISDIR(n->st.st_mode))
                return -EISDIR;
        if (flags & O_TRUNC)
                truncate_node(n, 0);
        int backing = ret_backing ? backing_for(fs, n, (flags & O_ACCMODE) != O_RDONLY) : 0;
        n->opens++;
        *ret_fh = n->st.st_ino;
        if (ret_backing)
                *ret_backing = backing;
        return 0;
}

static int floor_open(ws_fs *fs, uint64_t ino, int flags, uint64_t *ret_fh, int *ret_backing) {
        LOCK_GUARD(fs);
        node *n = node_of(fs, ino);
        return n ? open_node(fs, n, flags, ret_fh, ret_backing) : -ENOENT;
}

static int floor_create(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
                        int flags, struct stat *ret, uint64_t *ret_fh, int *ret_backing) {
        LOCK_GUARD(fs);
        uint64_t ino;
        int r = make_node(fs, who, parent, name, S_IFREG | (mode & 07777), &ino);
        if (r < 0 || (r = open_node(fs, &fs->nodes[ino], flags & ~O_TRUNC, ret_fh, ret_backing)) < 0)
                return r;
        return attr_of(&fs->nodes[ino], ret);
}

static int floor_read_extent(ws_fs *fs, uint64_t fh, size_t size, off_t off, ws_extent *ret) {
        LOCK_GUARD(fs);
        node *n = node_of(fs, fh);
        if (!n)
                return -EBADF;
        refresh(n);
        size_t left = off < n->st.st_size ? (size_t)(n->st.st_size - off) : 0;
        if (n->fd >= 0)
                *ret = (ws_extent){ .fd = n->fd, .offset = off, .length = left < size ? left : size };
        else
                *ret = (ws_extent){ .fd = fs->data,
                                    .offset = (off_t)fh * FILE_SPAN + off,
                                    .length = left < size ? left : size };
        return 0;
}

static ssize_t floor_write(ws_fs *fs, uint64_t fh, const char *buf, size_t size, off_t off) {
        LOCK_GUARD(fs);
        node *n = node_of(fs, fh);
        if (!n)
                return -EBADF;
        size_t end = (size_t)off + size;
        if (n->fd >= 0 || end <= DATA_MAX) {
                int fd = n->fd >= 0 ? n->fd : fs->data;
                off_t at = n->fd >= 0 ? off : (off_t)fh * FILE_SPAN + off;
                if (pwrite(fd, buf, size, at) != (ssize_t)size)
                        return -EIO;
                if (end > n->data_size && end <= DATA_MAX)
                        n->data_size = end;
        }
        if ((off_t)end > n->st.st_size)
                n->st.st_size = (off_t)end;
        n->st.st_blocks = (n->st.st_size + 511) / 512;
        return (ssize_t)size;
}

static int floor_fsync(ws_fs *fs, uint64_t fh, bool datasync) {
        (void)fs;
        (void)fh;
        (void)datasync;
        return 0;
}

static int floor_release(ws_fs *fs, uint64_t fh) {
        LOCK_GUARD(fs);
        node *n = fh < fs->n_nodes ? &fs->nodes[fh] : NULL;
        if (!n || !n->opens)
                return -EBADF;
        n->opens--;
        node_drop_if_gone(fs, n);
        return 0;
}

static int floor_opendir(ws_fs *fs, uint64_t ino) {
        LOCK_GUARD(fs);
        node *n = node_of(fs, ino);
        return !n ? -ENOENT : S_ISDIR(n->st.st_mode) ? 0 : -ENOTDIR;
}

/* Entries are numbered by their place in the directory (no listing runs while the bench
 * deletes); readdirplus gives each with its attributes. */
static int list_dir(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_plus_fn fill, void *userdata) {
        LOCK_GUARD(fs);
        node *dir = node_of(fs, ino);
        if (!dir || !S_ISDIR(dir->st.st_mode))
                return dir ? -ENOTDIR : -ENOENT;
        for (size_t i = (size_t)offset; i < dir->n_children; i++) {
                struct stat st;
                (void)attr_of(&fs->nodes[dir->children[i].ino], &st);
                const char *name = dir->children[i].name;
                if (!fill(userdata, name, &st, (off_t)i + 1, true))
                        break;
        }
        return 0;
}

/* READDIR's fill, called as READDIRPLUS's is. */
typedef struct plain_fill {
        ws_fill_fn fill;
        void *userdata;
} plain_fill;

static bool fill_plain(void *userdata, const char *name, const struct stat *st, off_t next,
                       bool with_entry) {
        const plain_fill *p = userdata;
        (void)with_entry;
        return p->fill(p->userdata, name, st, next);
}

static int floor_readdir(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_fn fill, void *userdata) {
        plain_fill p = { fill, userdata };
        return list_dir(fs, ino, offset, fill_plain, &p);
}

static int floor_readdirplus(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_plus_fn fill, void *userdata) {
        return list_dir(fs, ino, offset, fill, userdata);
}

/* As a Workspace file without xattrs answers (the libfuse loop's kernel asks
 * security.capability before a first write). */
static ssize_t floor_getxattr(ws_fs *fs, uint64_t ino, const char *name, char *value, size_t size) {
        (void)fs;
        (void)ino;
        (void)name;
        (void)value;
        (void)size;
        return -ENODATA;
}

/* The bench's delete row ends with a statfs (bench/workspace_fs.sh, freed): answered at
 * once, as ext4's is, since the floor has nothing left to free. */
static int floor_statfs(ws_fs *fs, struct statvfs *ret) {
        (void)fs;
        *ret = (struct statvfs){ .f_bsize = 4096, .f_frsize = 4096, .f_namemax = 255 };
        return 0;
}

static void floor_set_passthrough(ws_fs *fs, const ws_backing_ops *ops, void *userdata) {
        LOCK_GUARD(fs);
        fs->backing = ops;
        fs->backing_data = userdata;
}

/* What the bench's workload asks; the rest is answered ENOSYS by the transport. */
static const ws_ops floor_ops = {
        .lookup = floor_lookup,
        .getattr = floor_getattr,
        .setattr = floor_setattr,
        .mkdir = floor_mkdir,
        .unlink = floor_unlink,
        .rmdir = floor_rmdir,
        .open = floor_open,
        .create = floor_create,
        .read_extent = floor_read_extent,
        .write = floor_write,
        .fsync = floor_fsync,
        .release = floor_release,
        .opendir = floor_opendir,
        .readdir = floor_readdir,
        .readdirplus = floor_readdirplus,
        .getxattr = floor_getxattr,
        .statfs = floor_statfs,
        .set_passthrough = floor_set_passthrough,
};

static const char *mountpoint;

static void *serve(void *arg) {
        ws_session_serve(arg);
        return NULL;
}

/* SIGINT, SIGTERM: the mount goes, and with it the connection the loop serves. */
static void *await_signal(void *arg) {
        sigset_t *set = arg;
        int sig;
        if (sigwait(set, &sig) == 0)
                (void)umount2(mountpoint, MNT_DETACH);
        return NULL;
}

int main(int argc, char **argv) {
        if (argc != 2 || argv[1][0] == '-') {
                fprintf(stderr,
                        "usage: fuse-floor MOUNTPOINT\n"
                        "An in-memory FUSE filesystem that answers every request at once, served by\n"
                        "layerfs-daemon's transports (LAYERFS_FUSE_TRANSPORT, LAYERFS_FUSE_PASSTHROUGH,\n"
                        "LAYERFS_FUSE_URING): the floor under the Workspace's figures (bench/workspace_fs.sh).\n");
                return 2;
        }
        mountpoint = argv[1];
        /* A memfd per file with passthrough: as many fds as the hard limit allows. */
        struct rlimit lim;
        if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
                lim.rlim_cur = lim.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &lim);
        }
        ws_fs *fs = xcalloc(1, sizeof(*fs)); /* lives as long as the process */
        pthread_mutex_init(&fs->lock, NULL);
        uint64_t root = 0;
        fs->data = memfd_create("fuse-floor", MFD_CLOEXEC);
        if (fs->data < 0 || ftruncate(fs->data, DATA_SIZE) < 0 || node_new(fs, 0, 0, 0, &root) < 0 ||
            node_new(fs, S_IFDIR | 0755, getuid(), getgid(), &root) < 0 || root != WS_ROOT_INO) {
                perror("fuse-floor: memfd");
                return 1;
        }
        /* Signals wait for their thread: every other (the loops') has them blocked. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
        ws_session *s = ws_session_mount((fuse_fs){ &floor_ops, fs }, mountpoint, "fuse-floor");
        if (!s)
                return 1; /* the transport said why on stderr */
        pthread_t server, waiter;
        if (pthread_create(&server, NULL, serve, s) != 0 ||
            pthread_create(&waiter, NULL, await_signal, &set) != 0) {
                fprintf(stderr, "fuse-floor: cannot start its threads\n");
                ws_session_destroy(s);
                return 1;
        }
        dev_t dev;
        int r = lfs_fuse_mount_answered(mountpoint, &dev);
        if (r < 0) {
                fprintf(stderr, "fuse-floor: the mount at %s does not answer: %s\n", mountpoint,
                        strerror(-r));
                (void)umount2(mountpoint, MNT_DETACH);
        } else {
                printf("ready (FUSE loop: %s, passthrough: %s)\n", ws_session_transport(s),
                       ws_session_passthrough(s) ? "on" : "off");
                fflush(stdout);
        }
        pthread_join(server, NULL);
        ws_session_destroy(s);
        for (size_t i = 0; i < fs->n_gone; i++)
                close(fs->gone[i]);
        return r < 0 ? 1 : 0;
}
