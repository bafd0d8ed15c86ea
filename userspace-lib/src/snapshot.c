/* SPDX-License-Identifier: MIT */
/* A directory on disk recorded as trees and blobs. The walk first builds every tree in
 * memory, then reads and hashes all regular files in io_uring batches, then computes the
 * tree ids bottom-up. Only blobs the Store lacks are written. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "store.h"

typedef struct snap_node {
        lfs_tree tree;
        struct snap_node **children; /* per entry: the node of a directory entry */
} snap_node;

typedef struct snap_walk {
        lfs_store *s;
        lfs_blob_writer *w;
        int root_fd;
        const char *root;
        bool home_known; /* home_dev/home_ino: the home, never recorded */
        dev_t home_dev;
        ino_t home_ino;
        lfs_blob_source *sources;
        size_t n_sources, cap_sources;
        char **paths; /* owned relative paths of the sources */
        size_t n_paths, cap_paths;
} snap_walk;

static void node_free(snap_node *node) {
        if (!node)
                return;
        for (size_t i = 0; i < node->tree.n; i++)
                node_free(node->children[i]);
        free(node->children);
        lfs_tree_done(&node->tree);
        free(node);
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk_failed(snap_walk *sw, const char *rel, int r, lfs_error **err) {
        if (r == -ENOENT || r == -ENOTDIR)
                return lfs_fail(err, LFS_INVALID_INPUT, r,
                                "%s/%s vanished while it was being read; nothing was recorded; try "
                                "again when the directory is quiet",
                                sw->root, rel);
        if (r == -EACCES || r == -EPERM)
                return lfs_fail(err, LFS_PERMISSION_DENIED, r, "cannot read %s/%s: %s", sw->root, rel,
                                strerror(-r));
        return lfs_fail(err, LFS_FAILED, r, "cannot read %s/%s: %s", sw->root, rel, strerror(-r));
}

/* Sorted names in dirfd, without "." and "..". */
static int read_names(int dirfd, char ***ret, size_t *ret_n) {
        int fd = dup(dirfd);
        if (fd < 0)
                return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        char **names = NULL;
        size_t n = 0, cap = 0;
        struct dirent *de;
        errno = 0;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                GROW(names, cap, n + 1);
                names[n++] = xstrdup(de->d_name);
        }
        int r = errno ? -errno : 0;
        closedir(d);
        if (n > 1)
                qsort(names, n, sizeof(char *), cmp_str);
        *ret = names;
        *ret_n = n;
        return r;
}

static int read_link(int dirfd, const char *name, char **ret, size_t *ret_len) {
        for (size_t size = 256;; size *= 2) {
                char *buf = xmalloc(size);
                ssize_t k = readlinkat(dirfd, name, buf, size);
                if (k < 0) {
                        free(buf);
                        return -errno;
                }
                if ((size_t)k < size) {
                        *ret = buf;
                        *ret_len = (size_t)k;
                        return 0;
                }
                free(buf);
        }
}

static int walk_dir(snap_walk *sw, int dirfd, const char *rel, const lfs_id *old_id, snap_node **ret,
                    lfs_error **err) {
        char **names = NULL;
        size_t n_names = 0;
        lfs_tree old = { 0 };
        snap_node *node = xcalloc(1, sizeof(*node));
        int r = read_names(dirfd, &names, &n_names);
        if (r < 0) {
                r = walk_failed(sw, *rel ? rel : ".", r, err);
                goto out;
        }
        if (old_id && (r = lfs_db_get_tree(sw->s, old_id, &old, err)) < 0)
                goto out;
        node->children = xcalloc(n_names, sizeof(snap_node *));
        for (size_t i = 0; i < n_names && r == 0; i++) {
                const char *name = names[i];
                _cleanup_free_ char *path = path_join(rel, name);
                const lfs_entry *was = lfs_tree_find(&old, name);
                struct stat st;
                if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                        r = walk_failed(sw, path, -errno, err);
                        break;
                }
                lfs_id id = { { 0 } };
                /* A tree that holds the home would record the Store being written (as git
                 * never records .git): the home is left out wherever it is found. */
                if (S_ISDIR(st.st_mode) && sw->home_known && st.st_dev == sw->home_dev &&
                    st.st_ino == sw->home_ino)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int fd =
                                openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd < 0) {
                                r = walk_failed(sw, path, -errno, err);
                                break;
                        }
                        const lfs_id *old_sub = was && lfs_mode_is_dir(was->mode) ? &was->id : NULL;
                        snap_node *child = NULL;
                        r = walk_dir(sw, fd, path, old_sub, &child, err);
                        if (r < 0)
                                break;
                        node->children[node->tree.n] = child;
                        lfs_tree_add(&node->tree, xstrdup(name), LFS_MODE_DIR, 0, &id);
                } else if (S_ISLNK(st.st_mode)) {
                        _cleanup_free_ char *target = NULL;
                        size_t len = 0;
                        r = read_link(dirfd, name, &target, &len);
                        if (r < 0) {
                                r = walk_failed(sw, path, r, err);
                                break;
                        }
                        r = lfs_blob_writer_add_data(sw->w, target, len, &id, err);
                        lfs_tree_add(&node->tree, xstrdup(name), LFS_MODE_LINK, len, &id);
                } else if (S_ISREG(st.st_mode)) {
                        uint32_t mode = st.st_mode & S_IXUSR ? LFS_MODE_EXEC : LFS_MODE_FILE;
                        lfs_tree_add(&node->tree, xstrdup(name), mode, (uint64_t)st.st_size, &id);
                        GROW(sw->sources, sw->cap_sources, sw->n_sources + 1);
                        GROW(sw->paths, sw->cap_paths, sw->n_paths + 1);
                        sw->paths[sw->n_paths++] = TAKE_PTR(path);
                        bool same_kind = was && !lfs_mode_is_dir(was->mode) && was->mode != LFS_MODE_LINK;
                        /* ret_id is pointed into the tree after the walk: entries may move. */
                        sw->sources[sw->n_sources++] = (lfs_blob_source){
                                .dirfd = sw->root_fd,
                                .path = sw->paths[sw->n_paths - 1],
                                .size = (uint64_t)st.st_size,
                                .has_known = same_kind,
                                .known = same_kind ? was->id : id,
                        };
                }
                /* Fifos, sockets and devices are not recorded (SPEC 1). */
        }
out:
        for (size_t i = 0; i < n_names; i++)
                free(names[i]);
        free(names);
        if (r < 0) {
                lfs_tree_done(&old);
                node_free(node);
                return r;
        }
        lfs_tree_done(&old);
        *ret = node;
        return 0;
}

/* Points each source at its entry, visiting files in the order walk_dir queued them. */
static void bind_sources(snap_walk *sw, snap_node *node, size_t *next) {
        for (size_t i = 0; i < node->tree.n; i++) {
                lfs_entry *e = &node->tree.entries[i];
                if (lfs_mode_is_dir(e->mode))
                        bind_sources(sw, node->children[i], next);
                else if (e->mode != LFS_MODE_LINK && *next < sw->n_sources)
                        sw->sources[(*next)++].ret_id = &e->id;
        }
}

/* Computes tree ids bottom-up and queues their rows. */
static void store_trees(snap_node *node, lfs_tree_rows *rows, lfs_id *ret_id) {
        for (size_t i = 0; i < node->tree.n; i++)
                if (lfs_mode_is_dir(node->tree.entries[i].mode))
                        store_trees(node->children[i], rows, &node->tree.entries[i].id);
        lfs_tree_store(&node->tree, rows, ret_id);
}

int lfs_snapshot_dir(lfs_store *s, lfs_blob_writer *w, const char *dir, const lfs_id *old_tree,
                     lfs_tree_rows *rows, lfs_id *ret_tree, lfs_error **err) {
        snap_walk sw = { .s = s, .w = w, .root = dir };
        struct stat home;
        if (s->home && stat(s->home->path, &home) == 0)
                sw = (snap_walk){ .s = s,
                                  .w = w,
                                  .root = dir,
                                  .home_known = true,
                                  .home_dev = home.st_dev,
                                  .home_ino = home.st_ino };
        snap_node *root = NULL;
        sw.root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (sw.root_fd < 0) {
                int e = errno;
                if (e == ENOENT || e == ENOTDIR)
                        return lfs_fail(err, LFS_INVALID_INPUT, e,
                                        "directory '%s' does not exist (%s); give an existing "
                                        "directory",
                                        dir, strerror(e));
                return lfs_fail(err, e == EACCES ? LFS_PERMISSION_DENIED : LFS_FAILED, e,
                                "cannot open directory '%s': %s", dir, strerror(e));
        }
        int r = walk_dir(&sw, sw.root_fd, "", old_tree, &root, err);
        if (r == 0) {
                size_t next = 0;
                bind_sources(&sw, root, &next);
                r = lfs_blob_writer_add_files(w, sw.sources, sw.n_sources, err);
        }
        if (r == 0)
                store_trees(root, rows, ret_tree);
        node_free(root);
        for (size_t i = 0; i < sw.n_paths; i++)
                free(sw.paths[i]);
        free(sw.paths);
        free(sw.sources);
        close(sw.root_fd);
        return r;
}
