/* SPDX-License-Identifier: MIT */
/* fuse-floor: a FUSE filesystem that does no work, for bench/workspace_fs.sh.
 *
 * It keeps its files in memory and answers each request at once, over the same
 * transport as layerfs-daemon (libfuse3's low-level API, /dev/fuse, one thread) and
 * with the same mount options and cache settings. What the workload costs on it is
 * what the kernel's FUSE requests cost by themselves: no FUSE filesystem served this
 * way can be faster, so it is the floor under the Workspace's figures.
 *
 * usage: fuse-floor MOUNTPOINT   (runs in the foreground until unmounted or signalled)
 *
 * File data is kept up to DATA_MAX bytes a file; past that the size grows and reads
 * return zeros, so that the 1 GiB rows measure the transport and not memory. */
#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DATA_MAX (64 * 1024)

/* As layerfs-daemon: only this mount changes what it shows. */
static const double cache_seconds = 3600.0;

typedef struct child {
        char *name;
        fuse_ino_t ino;
} child;

typedef struct node {
        struct stat st;
        char *data; /* the first DATA_MAX bytes of a file, data_size of them written */
        size_t data_size;
        child *children;
        size_t n_children, cap_children;
} node;

static node *nodes;
static size_t n_nodes, cap_nodes;

static node *node_of(fuse_ino_t ino) {
        return ino >= 1 && ino < n_nodes && nodes[ino].st.st_nlink ? &nodes[ino] : NULL;
}

static fuse_ino_t node_new(mode_t mode, const struct fuse_ctx *ctx) {
        if (n_nodes == cap_nodes) {
                size_t cap = cap_nodes ? cap_nodes * 2 : 1024;
                node *grown = realloc(nodes, cap * sizeof(*nodes));
                if (!grown)
                        return 0;
                nodes = grown;
                cap_nodes = cap;
        }
        fuse_ino_t ino = n_nodes++;
        node *n = &nodes[ino];
        memset(n, 0, sizeof(*n));
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        n->st = (struct stat){
                .st_ino = ino,
                .st_mode = mode,
                .st_nlink = S_ISDIR(mode) ? 2 : 1,
                .st_uid = ctx ? ctx->uid : 0,
                .st_gid = ctx ? ctx->gid : 0,
                .st_blksize = 4096,
                .st_atim = now,
                .st_mtim = now,
                .st_ctim = now,
        };
        return ino;
}

static child *child_find(node *dir, const char *name) {
        for (size_t i = 0; i < dir->n_children; i++)
                if (strcmp(dir->children[i].name, name) == 0)
                        return &dir->children[i];
        return NULL;
}

static int child_add(node *dir, const char *name, fuse_ino_t ino) {
        if (dir->n_children == dir->cap_children) {
                size_t cap = dir->cap_children ? dir->cap_children * 2 : 16;
                child *grown = realloc(dir->children, cap * sizeof(*grown));
                if (!grown)
                        return -ENOMEM;
                dir->children = grown;
                dir->cap_children = cap;
        }
        char *copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        dir->children[dir->n_children++] = (child){ .name = copy, .ino = ino };
        return 0;
}

static void truncate_node(node *n, off_t size) {
        n->st.st_size = size;
        if ((size_t)size < n->data_size)
                n->data_size = (size_t)size;
}

static struct fuse_entry_param entry_param(fuse_ino_t ino) {
        return (struct fuse_entry_param){
                .ino = ino,
                .generation = 1,
                .attr = nodes[ino].st,
                .attr_timeout = cache_seconds,
                .entry_timeout = cache_seconds,
        };
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino) {
        struct fuse_entry_param e = entry_param(ino);
        fuse_reply_entry(req, &e);
}

/* As layerfs-daemon opens files: the page cache kept, no FLUSH. */
static void set_open_flags(struct fuse_file_info *fi, fuse_ino_t ino) {
        fi->fh = ino;
        fi->keep_cache = 1;
        fi->noflush = 1;
}

static void op_init(void *userdata, struct fuse_conn_info *conn) {
        (void)userdata;
        /* The settings layerfs-daemon asks for (daemon/fuse_libfuse.c). */
        conn->want &= ~(unsigned)(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS | FUSE_CAP_AUTO_INVAL_DATA |
                                  FUSE_CAP_WRITEBACK_CACHE);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
        node *dir = node_of(parent);
        child *c = dir ? child_find(dir, name) : NULL;
        if (!c) {
                struct fuse_entry_param e = { .ino = 0, .entry_timeout = cache_seconds };
                fuse_reply_entry(req, &e);
                return;
        }
        reply_entry(req, c->ino);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        (void)fi;
        node *n = node_of(ino);
        if (!n)
                fuse_reply_err(req, ENOENT);
        else
                fuse_reply_attr(req, &n->st, cache_seconds);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi) {
        (void)fi;
        node *n = node_of(ino);
        if (!n) {
                fuse_reply_err(req, ENOENT);
                return;
        }
        if (to_set & FUSE_SET_ATTR_MODE)
                n->st.st_mode = (n->st.st_mode & S_IFMT) | (attr->st_mode & 07777);
        if (to_set & FUSE_SET_ATTR_SIZE)
                truncate_node(n, attr->st_size);
        fuse_reply_attr(req, &n->st, cache_seconds);
}

static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi) {
        node *dir = node_of(parent);
        if (!dir) {
                fuse_reply_err(req, ENOENT);
                return;
        }
        if (child_find(dir, name)) {
                fuse_reply_err(req, EEXIST);
                return;
        }
        fuse_ino_t ino = node_new(mode, fuse_req_ctx(req));
        if (!ino || child_add(&nodes[parent], name, ino) < 0) {
                fuse_reply_err(req, ENOMEM);
                return;
        }
        if (!fi) {
                reply_entry(req, ino);
                return;
        }
        set_open_flags(fi, ino);
        struct fuse_entry_param e = entry_param(ino);
        fuse_reply_create(req, &e, fi);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
        make_node(req, parent, name, S_IFDIR | (mode & 07777), NULL);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi) {
        make_node(req, parent, name, S_IFREG | (mode & 07777), fi);
}

static void remove_node(fuse_req_t req, fuse_ino_t parent, const char *name, bool want_dir) {
        node *dir = node_of(parent);
        child *c = dir ? child_find(dir, name) : NULL;
        if (!c) {
                fuse_reply_err(req, ENOENT);
                return;
        }
        node *n = &nodes[c->ino];
        if (want_dir != S_ISDIR(n->st.st_mode)) {
                fuse_reply_err(req, want_dir ? ENOTDIR : EISDIR);
                return;
        }
        if (want_dir && n->n_children) {
                fuse_reply_err(req, ENOTEMPTY);
                return;
        }
        /* Freed at once: the kernel's FORGET needs nothing from us here. */
        free(n->data);
        free(n->children);
        memset(n, 0, sizeof(*n));
        free(c->name);
        *c = dir->children[--dir->n_children];
        fuse_reply_err(req, 0);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) {
        remove_node(req, parent, name, false);
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) {
        remove_node(req, parent, name, true);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        node *n = node_of(ino);
        if (!n) {
                fuse_reply_err(req, ENOENT);
                return;
        }
        if (fi->flags & O_TRUNC)
                truncate_node(n, 0);
        set_open_flags(fi, ino);
        fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
        (void)fi;
        node *n = node_of(ino);
        if (!n) {
                fuse_reply_err(req, ENOENT);
                return;
        }
        if (off >= n->st.st_size) {
                fuse_reply_buf(req, NULL, 0);
                return;
        }
        size_t len = (size_t)(n->st.st_size - off) < size ? (size_t)(n->st.st_size - off) : size;
        if ((size_t)off + len <= n->data_size) {
                fuse_reply_buf(req, n->data + off, len);
                return;
        }
        char *zeros = calloc(1, len ? len : 1);
        if (!zeros) {
                fuse_reply_err(req, ENOMEM);
                return;
        }
        fuse_reply_buf(req, zeros, len);
        free(zeros);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi) {
        (void)fi;
        node *n = node_of(ino);
        if (!n) {
                fuse_reply_err(req, ENOENT);
                return;
        }
        size_t end = (size_t)off + size;
        if (end <= DATA_MAX) {
                if (end > n->data_size) {
                        char *grown = realloc(n->data, end);
                        if (!grown) {
                                fuse_reply_err(req, ENOMEM);
                                return;
                        }
                        memset(grown + n->data_size, 0, end - n->data_size);
                        n->data = grown;
                        n->data_size = end;
                }
                memcpy(n->data + off, buf, size);
        }
        if (off + (off_t)size > n->st.st_size)
                n->st.st_size = off + (off_t)size;
        n->st.st_blocks = (n->st.st_size + 511) / 512;
        fuse_reply_write(req, size);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
        (void)ino;
        (void)fi;
        fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi) {
        (void)ino;
        (void)datasync;
        (void)fi;
        fuse_reply_err(req, 0);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
        (void)ino;
        (void)name;
        (void)size;
        fuse_reply_err(req, ENODATA); /* as a Workspace file without xattrs answers */
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
        (void)fi;
        node *dir = node_of(ino);
        char *buf = malloc(size ? size : 1);
        if (!dir || !buf) {
                free(buf);
                fuse_reply_err(req, dir ? ENOMEM : ENOENT);
                return;
        }
        size_t used = 0;
        for (size_t i = (size_t)off; i < dir->n_children; i++) {
                struct stat st = { .st_ino = dir->children[i].ino,
                                   .st_mode = nodes[dir->children[i].ino].st.st_mode };
                size_t need = fuse_add_direntry(req, buf + used, size - used, dir->children[i].name, &st,
                                                (off_t)i + 1);
                if (need > size - used)
                        break;
                used += need;
        }
        fuse_reply_buf(req, buf, used);
        free(buf);
}

static const struct fuse_lowlevel_ops ops = {
        .init = op_init,
        .lookup = op_lookup,
        .getattr = op_getattr,
        .setattr = op_setattr,
        .mkdir = op_mkdir,
        .unlink = op_unlink,
        .rmdir = op_rmdir,
        .open = op_open,
        .read = op_read,
        .write = op_write,
        .release = op_release,
        .fsync = op_fsync,
        .readdir = op_readdir,
        .getxattr = op_getxattr,
        .create = op_create,
};

int main(int argc, char **argv) {
        if (argc != 2 || argv[1][0] == '-') {
                fprintf(stderr,
                        "usage: fuse-floor MOUNTPOINT\n"
                        "An in-memory FUSE filesystem that answers every request at once: the floor\n"
                        "under any FUSE filesystem's figures (bench/workspace_fs.sh).\n");
                return 2;
        }
        if (node_new(0, NULL) != 0 || node_new(S_IFDIR | 0755, NULL) != FUSE_ROOT_ID) {
                fprintf(stderr, "fuse-floor: out of memory\n");
                return 1;
        }
        char *fargv[] = { argv[0], "-o", "allow_other,default_permissions,fsname=fuse-floor,subtype=floor",
                          NULL };
        struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
        struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
        fuse_opt_free_args(&args);
        if (!se)
                return 1;
        int rc = 1;
        if (fuse_set_signal_handlers(se) == 0) {
                if (fuse_session_mount(se, argv[1]) == 0) {
                        rc = fuse_session_loop(se) == 0 ? 0 : 1;
                        fuse_session_unmount(se);
                }
                fuse_remove_signal_handlers(se);
        }
        fuse_session_destroy(se);
        return rc;
}
