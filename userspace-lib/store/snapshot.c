/* SPDX-License-Identifier: MIT */
/* A directory on disk recorded as trees and blobs. The walk builds every tree in memory,
 * reading and hashing the regular files in io_uring batches as they queue up (a
 * directory's entries stay put once it is read), then computes the tree ids bottom-up.
 * Only blobs the Store lacks are written. No step recurses: each
 * keeps its own stack, and no directory stays open while another is read, so a tree's
 * depth costs neither stack nor fds (and its paths are bounded by LFS_PATH_MAX). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "store.h"

typedef struct snap_node {
        lfs_tree tree;
        struct snap_node **children; /* per entry: the node of a directory entry */
} snap_node;

/* A directory still to read: its node, its path below the root and what the walk saw. */
typedef struct snap_pending {
        snap_node *node;
        char *rel;
        bool has_old;
        lfs_id old; /* its tree in the previous commit */
        dev_t dev;
        ino_t ino;
} snap_pending;

/* Where a queued file's id goes, once every tree has stopped growing. */
typedef struct snap_binding {
        snap_node *node;
        size_t entry;
} snap_binding;

typedef struct snap_walk {
        lfs_store *s;
        lfs_blob_writer *w;
        int root_fd;
        const char *root;
        bool home_known; /* home_dev/home_ino: the home, never recorded */
        dev_t home_dev;
        ino_t home_ino;
        lfs_blob_source *sources;
        snap_binding *bindings; /* per source */
        size_t n_sources, cap_sources, cap_bindings;
        char **paths; /* owned relative paths of the sources */
        size_t n_paths, cap_paths;
        snap_pending *pending; /* a stack: the walk never recurses, whatever the depth */
        size_t n_pending, cap_pending;
} snap_walk;

static void node_free(snap_node *root) {
        snap_node **stack = NULL;
        size_t n = 0, cap = 0;
        GROW(stack, cap, 1);
        stack[n++] = root;
        while (n) {
                snap_node *node = stack[--n];
                if (!node)
                        continue;
                GROW(stack, cap, n + node->tree.n);
                for (size_t i = 0; i < node->tree.n; i++)
                        stack[n++] = node->children ? node->children[i] : NULL;
                free(node->children);
                lfs_tree_done(&node->tree);
                free(node);
        }
        free(stack);
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
                qsort(names, n, sizeof(char *), lfs_strcmp_ptrs);
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

static int too_long(snap_walk *sw, const char *rel, lfs_error **err) {
        _cleanup_free_ char *shown = lfs_path_excerpt(rel);
        return lfs_fail(err, LFS_INVALID_INPUT, ENAMETOOLONG,
                        "%s/%s is a path of %zu bytes; the Store records paths of at most " LFS_PATH_MAX_TEXT
                        " bytes (PATH_MAX): move it higher, or record a directory below it; nothing "
                        "was recorded",
                        sw->root, shown, strlen(rel));
}

/* Reads one directory into its node: entries for files, symlinks and directories (each
 * directory queued to be read in turn), the files queued to be hashed. */
static int read_dir(snap_walk *sw, snap_pending *p, lfs_error **err) {
        const char *rel = p->rel;
        snap_node *node = p->node;
        _cleanup_close_ int dirfd = *rel ? lfs_open_beneath(sw->root_fd, rel, O_RDONLY | O_DIRECTORY)
                                         : fcntl(sw->root_fd, F_DUPFD_CLOEXEC, 0);
        if (dirfd < 0)
                return walk_failed(sw, *rel ? rel : ".", *rel ? dirfd : -errno, err);
        struct stat self;
        if (fstat(dirfd, &self) < 0)
                return walk_failed(sw, *rel ? rel : ".", -errno, err);
        if (self.st_dev != p->dev || self.st_ino != p->ino)
                return walk_failed(sw, rel, -ENOENT, err); /* replaced since its parent was read */
        char **names = NULL;
        size_t n_names = 0;
        lfs_tree old = { 0 };
        int r = read_names(dirfd, &names, &n_names);
        if (r < 0)
                r = walk_failed(sw, *rel ? rel : ".", r, err);
        else if (p->has_old)
                r = lfs_db_get_tree(sw->s, &p->old, &old, err);
        if (r == 0)
                node->children = xcalloc(n_names, sizeof(snap_node *));
        for (size_t i = 0; i < n_names && r == 0; i++) {
                const char *name = names[i];
                _cleanup_free_ char *path = path_join(rel, name);
                if (strlen(path) > LFS_PATH_MAX) {
                        r = too_long(sw, path, err);
                        break;
                }
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
                        snap_node *child = xcalloc(1, sizeof(*child));
                        node->children[node->tree.n] = child;
                        lfs_tree_add(&node->tree, xstrdup(name), LFS_MODE_DIR, 0, &id);
                        GROW(sw->pending, sw->cap_pending, sw->n_pending + 1);
                        snap_pending *sub = &sw->pending[sw->n_pending++];
                        *sub = (snap_pending){ .node = child,
                                               .rel = TAKE_PTR(path),
                                               .has_old = was && lfs_mode_is_dir(was->mode),
                                               .dev = st.st_dev,
                                               .ino = st.st_ino };
                        if (sub->has_old)
                                sub->old = was->id;
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
                        GROW(sw->bindings, sw->cap_bindings, sw->n_sources + 1);
                        GROW(sw->paths, sw->cap_paths, sw->n_paths + 1);
                        sw->paths[sw->n_paths++] = TAKE_PTR(path);
                        bool same_kind = was && !lfs_mode_is_dir(was->mode) && was->mode != LFS_MODE_LINK;
                        sw->bindings[sw->n_sources] =
                                (snap_binding){ .node = node, .entry = node->tree.n - 1 };
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
        for (size_t i = 0; i < n_names; i++)
                free(names[i]);
        free(names);
        lfs_tree_done(&old);
        return r;
}

/* Files queued before they are hashed: what a queue of the whole tree held (a source, its
 * binding and its path, about 130 bytes a file) made an import of 1,000,000 files take
 * 130 MB more. Enough for the io_uring batches (64) to stay full. */
enum { SOURCES_AT_ONCE = 4096 };

/* Hashes (and stores) the files queued, pointing each at its entry: their directories
 * were read whole, so their entries stay put; then forgets them. */
static int flush_sources(snap_walk *sw, lfs_error **err) {
        for (size_t i = 0; i < sw->n_sources; i++)
                sw->sources[i].ret_id = &sw->bindings[i].node->tree.entries[sw->bindings[i].entry].id;
        int r = lfs_blob_writer_add_files(sw->w, sw->sources, sw->n_sources, err);
        for (size_t i = 0; i < sw->n_paths; i++)
                free(sw->paths[i]);
        sw->n_sources = sw->n_paths = 0;
        return r;
}

/* Reads the whole tree, one directory at a time, from the stack of those still to read. */
static int walk_tree(snap_walk *sw, const lfs_id *old_tree, snap_node *root, lfs_error **err) {
        struct stat st;
        if (fstat(sw->root_fd, &st) < 0)
                return walk_failed(sw, ".", -errno, err);
        GROW(sw->pending, sw->cap_pending, 1);
        sw->pending[sw->n_pending++] = (snap_pending){ .node = root,
                                                       .rel = xstrdup(""),
                                                       .has_old = old_tree != NULL,
                                                       .dev = st.st_dev,
                                                       .ino = st.st_ino };
        if (old_tree)
                sw->pending[0].old = *old_tree;
        int r = 0;
        while (sw->n_pending && r == 0) {
                snap_pending p = sw->pending[--sw->n_pending];
                r = read_dir(sw, &p, err);
                free(p.rel);
                if (r == 0 && sw->n_sources >= SOURCES_AT_ONCE)
                        r = flush_sources(sw, err);
        }
        return r == 0 ? flush_sources(sw, err) : r;
}

/* Computes tree ids bottom-up (each directory after its subdirectories) and queues their
 * rows; a stack of the directories on the way down instead of recursion. */
static void store_trees(snap_node *root, lfs_tree_rows *rows, lfs_id *ret_id) {
        typedef struct {
                snap_node *node;
                size_t next;
                lfs_id *ret;
        } level;
        level *stack = NULL;
        size_t n = 0, cap = 0;
        GROW(stack, cap, 1);
        stack[n++] = (level){ .node = root, .ret = ret_id };
        while (n) {
                level *top = &stack[n - 1];
                lfs_tree *t = &top->node->tree;
                while (top->next < t->n && !lfs_mode_is_dir(t->entries[top->next].mode))
                        top->next++;
                if (top->next < t->n) {
                        size_t i = top->next++;
                        snap_node *child = top->node->children[i];
                        lfs_id *ret = &t->entries[i].id;
                        GROW(stack, cap, n + 1);
                        stack[n++] = (level){ .node = child, .ret = ret };
                        continue;
                }
                lfs_tree_store(t, rows, top->ret);
                n--;
        }
        free(stack);
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
        snap_node *root = xcalloc(1, sizeof(*root));
        int r = walk_tree(&sw, old_tree, root, err);
        if (r == 0)
                store_trees(root, rows, ret_tree);
        else if (err && *err && !strstr((*err)->message, dir))
                lfs_error_append(err, " (in '%s')", dir); /* the walk names paths below dir */
        node_free(root);
        for (size_t i = 0; i < sw.n_paths; i++)
                free(sw.paths[i]);
        for (size_t i = 0; i < sw.n_pending; i++)
                free(sw.pending[i].rel);
        free(sw.pending);
        free(sw.paths);
        free(sw.sources);
        free(sw.bindings);
        close(sw.root_fd);
        return r;
}
