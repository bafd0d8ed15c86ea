/* SPDX-License-Identifier: MIT */
/* The Workspace's filesystem operations; see workspace.h for the shape. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <time.h>

#include "store.h"
#include "workspace.h"

/* FUSE_SET_ATTR_* values, kept here so that this file does not depend on libfuse. */
#define WS_SET_MODE (1 << 0)
#define WS_SET_UID (1 << 1)
#define WS_SET_GID (1 << 2)
#define WS_SET_SIZE (1 << 3)
#define WS_SET_ATIME (1 << 4)
#define WS_SET_MTIME (1 << 5)
#define WS_SET_ATIME_NOW (1 << 7)
#define WS_SET_MTIME_NOW (1 << 8)
#define WS_SET_CTIME (1 << 10)

typedef struct ws_dirent {
        char *name; /* NULL: removed (offsets of later entries stay put for readdir) */
        uint64_t ino;
} ws_dirent;

typedef struct ws_xattr {
        char *name;
        char *value;
        size_t size;
} ws_xattr;

typedef struct ws_inode {
        uint32_t mode;
        uid_t uid;
        gid_t gid;
        uint32_t nlink;
        uint64_t size;
        struct timespec atime, mtime, ctime;
        /* Content: in the upper file <upper>/<ino>, or the lower blob. */
        bool upper;
        bool has_blob;
        lfs_id blob;
        int upper_fd; /* open while the file is open or being written; -1 otherwise */
        blkcnt_t upper_blocks; /* the upper file's st_blocks when its fd was last closed */
        bool hashed; /* upper_hash is the upper file's id (reset by every change) */
        lfs_id upper_hash;
        char *link; /* a symlink's target, once read or made */
        /* Directories: children from the lower tree once loaded, then the live namespace. */
        bool loaded;
        bool has_tree;
        lfs_id tree;
        uint64_t parent;
        ws_dirent *ents;
        size_t n_ents, cap_ents, live_ents, subdirs;
        unsigned open_count;
        uint64_t nlookup; /* the kernel's references (entries replied less FORGETs) */
        bool reap_queued; /* its old upper file waits for the reaper */
        ws_xattr *xattrs;
        size_t n_xattrs;
} ws_inode;

/* (parent, name) -> index in the parent's ents; open addressing with tombstones. */
typedef struct ws_slot {
        uint64_t parent;
        uint32_t index;
        uint8_t state; /* 0 empty, 1 used, 2 removed */
} ws_slot;

typedef struct ws_handle {
        uint64_t ino;
        int lower_fd; /* for reads of a file not copied up: a pack (borrowed) or a loose object */
        bool lower_owned;
        uint64_t lower_offset;
        bool in_use;
} ws_handle;

struct ws_fs {
        pthread_mutex_t lock;
        lfs_store *store;
        char *branch;
        lfs_id base; /* the commit the view started from (or last committed) */
        lfs_id base_tree; /* its tree */
        char *upper;
        int upper_fd;
        uid_t owner;
        gid_t group;
        struct timespec base_time;
        ws_inode *inodes; /* inodes[ino - 1] */
        size_t n_inodes, cap_inodes;
        ws_slot *slots;
        size_t cap_slots, used_slots;
        ws_handle *handles; /* fh = index + 1 */
        size_t n_handles, cap_handles;
        unsigned open_files;
        /* Names the kernel may have cached that changed behind its back (merged commits);
         * told to the transport after the lock is released. */
        ws_invalidate_fn invalidate;
        void *invalidate_data;
        struct {
                uint64_t parent;
                uint64_t child; /* the inode the name had, or 0 */
                char *name;
        } * stale;
        size_t n_stale, cap_stale;
        /* Upper files whose last name and last open went away, unlinked by the reaper
         * thread: the caller's unlink() need not wait for the disk to free them. */
        pthread_t reaper;
        bool reaper_started, reaper_stop, reaping;
        pthread_mutex_t reap_lock;
        pthread_cond_t reap_wake, reap_idle;
        uint64_t *reap;
        size_t n_reap, cap_reap;
};

void ws_set_invalidator(ws_fs *fs, ws_invalidate_fn fn, void *userdata) {
        fs->invalidate = fn;
        fs->invalidate_data = userdata;
}

static void mark_stale(ws_fs *fs, uint64_t parent, const char *name, uint64_t child) {
        GROW(fs->stale, fs->cap_stale, fs->n_stale + 1);
        fs->stale[fs->n_stale].parent = parent;
        fs->stale[fs->n_stale].child = child;
        fs->stale[fs->n_stale++].name = xstrdup(name);
}

/* ---- the inode table and the name index ---- */

static ws_inode *inode_get(ws_fs *fs, uint64_t ino) {
        if (ino == 0 || ino > fs->n_inodes)
                return NULL;
        return &fs->inodes[ino - 1];
}

static uint64_t inode_new(ws_fs *fs, uint32_t mode, uid_t uid, gid_t gid) {
        GROW(fs->inodes, fs->cap_inodes, fs->n_inodes + 1);
        ws_inode *in = &fs->inodes[fs->n_inodes++];
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        *in = (ws_inode){ .mode = mode, .uid = uid, .gid = gid, .nlink = 1, .upper_fd = -1 };
        in->atime = in->mtime = in->ctime = now;
        return fs->n_inodes;
}

static uint64_t name_hash(uint64_t parent, const char *name) {
        uint64_t h = 1469598103934665603ull ^ (parent * 0x9E3779B97F4A7C15ull);
        for (const unsigned char *p = (const unsigned char *)name; *p; p++)
                h = (h ^ *p) * 1099511628211ull;
        return h;
}

static void index_grow(ws_fs *fs);

/* The slot of (parent, name), or of where it would go (with *found false). */
static size_t index_find(ws_fs *fs, uint64_t parent, const char *name, bool *found) {
        size_t mask = fs->cap_slots - 1, i = name_hash(parent, name) & mask, tomb = SIZE_MAX;
        for (;; i = (i + 1) & mask) {
                ws_slot *sl = &fs->slots[i];
                if (sl->state == 0) {
                        *found = false;
                        return tomb != SIZE_MAX ? tomb : i;
                }
                if (sl->state == 2) {
                        if (tomb == SIZE_MAX)
                                tomb = i;
                        continue;
                }
                if (sl->parent == parent && !strcmp(fs->inodes[parent - 1].ents[sl->index].name, name)) {
                        *found = true;
                        return i;
                }
        }
}

static void index_put(ws_fs *fs, uint64_t parent, const char *name, uint32_t index) {
        if ((fs->used_slots + 1) * 2 > fs->cap_slots)
                index_grow(fs);
        bool found;
        size_t i = index_find(fs, parent, name, &found);
        if (!found && fs->slots[i].state == 0)
                fs->used_slots++;
        fs->slots[i] = (ws_slot){ .parent = parent, .index = index, .state = 1 };
}

static void index_grow(ws_fs *fs) {
        ws_slot *old = fs->slots;
        size_t old_cap = fs->cap_slots;
        fs->cap_slots = old_cap ? old_cap * 2 : 1024;
        fs->slots = xcalloc(fs->cap_slots, sizeof(ws_slot));
        fs->used_slots = 0;
        for (size_t i = 0; i < old_cap; i++)
                if (old[i].state == 1) {
                        ws_dirent *d = &fs->inodes[old[i].parent - 1].ents[old[i].index];
                        index_put(fs, old[i].parent, d->name, old[i].index);
                }
        free(old);
}

/* The child's ino, or 0. Directories must be loaded. */
static uint64_t child_get(ws_fs *fs, uint64_t parent, const char *name, uint32_t *ret_index) {
        bool found;
        size_t i = index_find(fs, parent, name, &found);
        if (!found)
                return 0;
        if (ret_index)
                *ret_index = fs->slots[i].index;
        return fs->inodes[parent - 1].ents[fs->slots[i].index].ino;
}

static void child_add(ws_fs *fs, uint64_t parent, const char *name, uint64_t ino) {
        ws_inode *dir = inode_get(fs, parent);
        GROW(dir->ents, dir->cap_ents, dir->n_ents + 1);
        dir->ents[dir->n_ents] = (ws_dirent){ .name = xstrdup(name), .ino = ino };
        index_put(fs, parent, name, (uint32_t)dir->n_ents);
        dir->n_ents++;
        dir->live_ents++;
        if (S_ISDIR(inode_get(fs, ino)->mode)) {
                dir->subdirs++;
                inode_get(fs, ino)->parent = parent;
        }
}

static void child_remove(ws_fs *fs, uint64_t parent, const char *name) {
        bool found;
        size_t i = index_find(fs, parent, name, &found);
        if (!found)
                return;
        ws_inode *dir = inode_get(fs, parent);
        ws_dirent *d = &dir->ents[fs->slots[i].index];
        if (S_ISDIR(inode_get(fs, d->ino)->mode))
                dir->subdirs--;
        free(d->name);
        d->name = NULL;
        dir->live_ents--;
        fs->slots[i].state = 2;
}

/* ---- loading from the Store ---- */

static void fill_from_entry(ws_fs *fs, ws_inode *in, const lfs_entry *e) {
        in->atime = in->mtime = in->ctime = fs->base_time;
        in->size = e->size;
        if (lfs_mode_is_dir(e->mode)) {
                in->mode = S_IFDIR | 0755;
                in->has_tree = true;
                in->tree = e->id;
                in->size = 4096;
        } else {
                in->mode = e->mode == LFS_MODE_LINK   ? S_IFLNK | 0777
                           : e->mode == LFS_MODE_EXEC ? S_IFREG | 0755
                                                      : S_IFREG | 0644;
                in->has_blob = true;
                in->blob = e->id;
        }
}

static int load_dir(ws_fs *fs, uint64_t ino) {
        ws_inode *dir = inode_get(fs, ino);
        if (dir->loaded)
                return 0;
        dir->loaded = true;
        if (!dir->has_tree)
                return 0;
        lfs_tree t = { 0 };
        int r = lfs_db_get_tree(fs->store, &dir->tree, &t, NULL);
        if (r < 0) {
                dir->loaded = false;
                return -EIO;
        }
        for (size_t i = 0; i < t.n; i++) {
                uint64_t child = inode_new(fs, 0, fs->owner, fs->group);
                fill_from_entry(fs, inode_get(fs, child), &t.entries[i]);
                child_add(fs, ino, t.entries[i].name, child);
        }
        lfs_tree_done(&t);
        return 0;
}

/* ---- attributes ---- */

/* ---- the upper directory ----
 * A copied-up or new file lives at upper/<xx>/<ino>, xx the inode number's low byte in
 * hex. One flat directory would put every new file's inode into the same ext4 block group,
 * and ext4 without a journal skips inodes freed in the last minute one by one: after a
 * mass delete, each create in that group scanned thousands of them (10,000 creates took
 * 1.1 s in one directory, 0.13 s spread over 64). The fan-out directories are made on
 * first use, and the upper directory is marked TOPDIR so that ext4 spreads them. */
enum { UPPER_NAME_MAX = 32 };

static void upper_name(uint64_t ino, char name[UPPER_NAME_MAX]) {
        snprintf(name, UPPER_NAME_MAX, "%02x/%llu", (unsigned)(ino & 0xff), (unsigned long long)ino);
}

static bool reap_drain(ws_fs *fs);
static bool reaped_for_space(ws_fs *fs, int err);

static int upper_create_once(ws_fs *fs, const char *name) {
        int fd = openat(fs->upper_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 && errno == ENOENT) {
                char dir[3] = { name[0], name[1], 0 };
                if (mkdirat(fs->upper_fd, dir, 0700) < 0 && errno != EEXIST)
                        return -errno;
                fd = openat(fs->upper_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        }
        return fd < 0 ? -errno : fd;
}

static int upper_create(ws_fs *fs, const char *name) {
        int fd = upper_create_once(fs, name);
        if (fd < 0 && reaped_for_space(fs, -fd))
                fd = upper_create_once(fs, name);
        return fd;
}

/* Best effort: only ext2/3/4 know the flag; elsewhere the layout works the same. */
static void mark_top_directory(int dir_fd) {
        int flags = 0;
        if (ioctl(dir_fd, FS_IOC_GETFLAGS, &flags) == 0 && !(flags & FS_TOPDIR_FL)) {
                flags |= FS_TOPDIR_FL;
                (void)ioctl(dir_fd, FS_IOC_SETFLAGS, &flags);
        }
}

static void stat_of(ws_fs *fs, uint64_t ino, struct stat *st) {
        ws_inode *in = inode_get(fs, ino);
        /* A directory's link count needs its subdirectories: load it (one tree read). */
        if (S_ISDIR(in->mode))
                (void)load_dir(fs, ino);
        in = inode_get(fs, ino);
        *st = (struct stat){ 0 };
        st->st_ino = ino;
        st->st_mode = in->mode;
        st->st_uid = in->uid;
        st->st_gid = in->gid;
        st->st_nlink = S_ISDIR(in->mode) ? 2 + in->subdirs : in->nlink;
        st->st_size = (off_t)in->size;
        st->st_blksize = 4096;
        st->st_blocks = (blkcnt_t)((in->size + 511) / 512);
        st->st_atim = in->atime;
        st->st_mtim = in->mtime;
        st->st_ctim = in->ctime;
        if (in->upper && S_ISREG(in->mode)) {
                /* Sparse files: report what the upper file really holds. */
                struct stat up;
                if (in->upper_fd < 0)
                        st->st_blocks = in->upper_blocks;
                else if (fstat(in->upper_fd, &up) == 0)
                        st->st_blocks = up.st_blocks;
        }
}

/* The attributes of an entry replied to the kernel, which counts one more reference. */
static void entry_of(ws_fs *fs, uint64_t ino, struct stat *st) {
        inode_get(fs, ino)->nlookup++;
        stat_of(fs, ino, st);
}

static void touch(ws_inode *in, bool modified) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        in->ctime = now;
        if (modified)
                in->mtime = now;
}

/* ---- opening ---- */

static void *reaper_main(void *arg);

int ws_open(lfs_store *store, const char *branch, const char *upper_dir, uid_t owner, gid_t group,
            ws_fs **ret, lfs_error **err) {
        lfs_id head;
        lfs_commit_info c;
        int r = lfs_branch_head(store, branch, &head, err);
        if (r < 0 || (r = lfs_db_get_commit(store, &head, &c, err)) < 0)
                return r;
        int upper_fd = open(upper_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (upper_fd < 0) {
                lfs_commit_info_done(&c);
                return lfs_fail(err, LFS_FAILED, errno, "cannot open the Workspace's upper directory %s: %s",
                                upper_dir, strerror(errno));
        }
        ws_fs *fs = xcalloc(1, sizeof(*fs));
        pthread_mutex_init(&fs->lock, NULL);
        pthread_mutex_init(&fs->reap_lock, NULL);
        pthread_cond_init(&fs->reap_wake, NULL);
        pthread_cond_init(&fs->reap_idle, NULL);
        fs->store = store;
        fs->branch = xstrdup(branch);
        fs->base = head;
        fs->base_tree = c.tree;
        fs->upper = xstrdup(upper_dir);
        fs->upper_fd = upper_fd;
        mark_top_directory(upper_fd);
        fs->owner = owner;
        fs->group = group;
        fs->base_time = (struct timespec){ .tv_sec = (time_t)c.time };
        lfs_commit_info_done(&c);
        /* The command identity's alone: other local users reach none of the Workspace
         * (docs/security.md). */
        uint64_t root = inode_new(fs, S_IFDIR | 0700, owner, group);
        ws_inode *in = inode_get(fs, root);
        in->has_tree = true;
        in->tree = fs->base_tree;
        in->parent = root;
        in->atime = in->mtime = in->ctime = fs->base_time;
        in->size = 4096;
        index_grow(fs);
        fs->reaper_started = pthread_create(&fs->reaper, NULL, reaper_main, fs) == 0;
        if (!fs->reaper_started) {
                ws_close(fs);
                return lfs_fail(err, LFS_FAILED, EAGAIN, "cannot start the Workspace's reaper thread");
        }
        *ret = fs;
        return 0;
}

void ws_close(ws_fs *fs) {
        if (!fs)
                return;
        if (fs->reaper_started) {
                pthread_mutex_lock(&fs->reap_lock);
                fs->reaper_stop = true;
                pthread_cond_signal(&fs->reap_wake);
                pthread_mutex_unlock(&fs->reap_lock);
                pthread_join(fs->reaper, NULL); /* it empties the queue first */
        }
        free(fs->reap);
        pthread_cond_destroy(&fs->reap_wake);
        pthread_cond_destroy(&fs->reap_idle);
        pthread_mutex_destroy(&fs->reap_lock);
        for (size_t i = 0; i < fs->n_handles; i++)
                if (fs->handles[i].in_use && fs->handles[i].lower_owned)
                        close(fs->handles[i].lower_fd);
        for (size_t i = 0; i < fs->n_inodes; i++) {
                ws_inode *in = &fs->inodes[i];
                for (size_t j = 0; j < in->n_ents; j++)
                        free(in->ents[j].name);
                for (size_t j = 0; j < in->n_xattrs; j++) {
                        free(in->xattrs[j].name);
                        free(in->xattrs[j].value);
                }
                free(in->xattrs);
                free(in->ents);
                free(in->link);
                if (in->upper_fd >= 0)
                        close(in->upper_fd);
        }
        free(fs->stale);
        free(fs->inodes);
        free(fs->slots);
        free(fs->handles);
        close(fs->upper_fd);
        free(fs->upper);
        free(fs->branch);
        pthread_mutex_destroy(&fs->lock);
        free(fs);
}

const lfs_id *ws_base(const ws_fs *fs) {
        return &fs->base;
}

static inline void unlockp(pthread_mutex_t **m) {
        if (*m)
                pthread_mutex_unlock(*m);
}
/* Holds the workspace's lock until the function returns; the body runs in a
 * do { } while (0) so that `break` ends it early. */
#define LOCK_GUARD(fs)                                                                                      \
        _cleanup_(unlockp) pthread_mutex_t *_guard = (pthread_mutex_lock(&(fs)->lock), &(fs)->lock)

/* The directory inode, loaded; or a negative errno. */
static int dir_ready(ws_fs *fs, uint64_t ino, ws_inode **ret) {
        ws_inode *dir = inode_get(fs, ino);
        if (!dir)
                return -ENOENT;
        if (!S_ISDIR(dir->mode))
                return -ENOTDIR;
        int r = load_dir(fs, ino);
        if (r < 0)
                return r;
        *ret = inode_get(fs, ino);
        return 0;
}

static int check_name(const char *name) {
        if (strlen(name) > 255)
                return -ENAMETOOLONG;
        if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/'))
                return -EINVAL;
        return 0;
}

/* The inode named name in directory parent, or a negative errno. */
static int child_lookup(ws_fs *fs, uint64_t parent, const char *name, uint64_t *ret) {
        ws_inode *dir;
        int r = dir_ready(fs, parent, &dir);
        if (r < 0)
                return r;
        uint64_t ino = child_get(fs, parent, name, NULL);
        if (!ino)
                return -ENOENT;
        *ret = ino;
        return 0;
}

int ws_lookup(ws_fs *fs, uint64_t parent, const char *name, struct stat *ret) {
        int r;
        LOCK_GUARD(fs);
        do {
                uint64_t ino;
                if ((r = check_name(name)) < 0 || (r = child_lookup(fs, parent, name, &ino)) < 0)
                        break;
                entry_of(fs, ino, ret);
        } while (0);
        return r;
}

static void drop_if_gone(ws_fs *fs, uint64_t ino);

/* Inode numbers stay stable while mounted; what a FORGET can free is the data of a file
 * with no name left, once the kernel holds no reference that could still reach it. */
void ws_forget(ws_fs *fs, uint64_t ino, uint64_t n) {
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                if (!in)
                        break;
                in->nlookup = n < in->nlookup ? in->nlookup - n : 0;
                drop_if_gone(fs, ino);
        } while (0);
}

int ws_getattr(ws_fs *fs, uint64_t ino, struct stat *ret) {
        int r = 0;
        LOCK_GUARD(fs);
        do {
                if (!inode_get(fs, ino))
                        r = -ENOENT;
                else
                        stat_of(fs, ino, ret);
        } while (0);
        return r;
}

static int copy_up_data(ws_fs *fs, uint64_t ino, bool with_data);

/* Copies a file's lower data up, so that it can be changed; opens its upper fd. */
static int copy_up(ws_fs *fs, uint64_t ino) {
        return copy_up_data(fs, ino, true);
}

static int copy_up_once(ws_fs *fs, uint64_t ino, bool with_data) {
        ws_inode *in = inode_get(fs, ino);
        char name[UPPER_NAME_MAX];
        upper_name(ino, name);
        if (in->upper) {
                if (in->upper_fd < 0)
                        in->upper_fd = openat(fs->upper_fd, name, O_RDWR | O_CLOEXEC);
                return in->upper_fd < 0 ? -errno : 0;
        }
        /* An unlinked inode can still be used (O_PATH, /proc/PID/fd) and copied up again:
         * its old upper file, of the same name, must be gone before the new one exists. */
        if (in->reap_queued) {
                reap_drain(fs);
                in->reap_queued = false;
        }
        int fd = upper_create(fs, name);
        if (fd < 0)
                return fd;
        if (with_data && in->has_blob && in->size) {
                lfs_object_loc loc = { .fd = -1 };
                int src = -1;
                bool owned = false;
                if (lfs_object_locate(fs->store, &in->blob, &loc, NULL) < 0) {
                        close(fd);
                        return -EIO;
                }
                if (loc.fd >= 0) {
                        src = loc.fd;
                } else {
                        src = lfs_object_open(fs->store, &in->blob, NULL);
                        owned = true;
                }
                loff_t in_off = (loff_t)loc.offset, out_off = 0;
                uint64_t left = in->size;
                while (src >= 0 && left) {
                        ssize_t k = copy_file_range(src, &in_off, fd, &out_off, left, 0);
                        if (k <= 0)
                                break;
                        left -= (uint64_t)k;
                }
                if (owned && src >= 0)
                        close(src);
                if (src < 0 || left) {
                        int e = left && src >= 0 ? (errno ? errno : EIO) : EIO;
                        close(fd);
                        unlinkat(fs->upper_fd, name, 0);
                        return -e;
                }
        }
        in->upper = true;
        in->upper_fd = fd;
        in->hashed = false;
        return 0;
}

/* with_data false: the caller truncates it anyway (O_TRUNC), so nothing is copied. */
static int copy_up_data(ws_fs *fs, uint64_t ino, bool with_data) {
        int r = copy_up_once(fs, ino, with_data);
        if (r < 0 && reaped_for_space(fs, -r))
                r = copy_up_once(fs, ino, with_data);
        return r;
}

/* Every change of an upper file's data goes through its open fd, so the block count
 * taken here stays true until it is opened again: a stat needs no syscall. */
static void close_upper(ws_inode *in) {
        struct stat st;
        if (fstat(in->upper_fd, &st) == 0)
                in->upper_blocks = st.st_blocks;
        close(in->upper_fd);
        in->upper_fd = -1;
}

static bool may_close_upper(ws_inode *in) {
        return in->open_count == 0;
}

/* Inode numbers are never reused while mounted; an unlinked inode that is copied up
 * again (reap_queued) waits for the reaper first, so a queued name never meets a newer
 * file. */
static void reap_later(ws_fs *fs, uint64_t ino) {
        pthread_mutex_lock(&fs->reap_lock);
        GROW(fs->reap, fs->cap_reap, fs->n_reap + 1);
        fs->reap[fs->n_reap++] = ino;
        pthread_cond_signal(&fs->reap_wake);
        pthread_mutex_unlock(&fs->reap_lock);
}

static void *reaper_main(void *arg) {
        ws_fs *fs = arg;
        uint64_t *batch = NULL;
        size_t cap_batch = 0;
        pthread_mutex_lock(&fs->reap_lock);
        for (;;) {
                while (fs->n_reap == 0 && !fs->reaper_stop)
                        pthread_cond_wait(&fs->reap_wake, &fs->reap_lock);
                if (fs->n_reap == 0)
                        break;
                size_t n = fs->n_reap;
                GROW(batch, cap_batch, n);
                memcpy(batch, fs->reap, n * sizeof(*batch));
                fs->n_reap = 0;
                fs->reaping = true;
                pthread_mutex_unlock(&fs->reap_lock);
                for (size_t i = 0; i < n; i++) {
                        char name[UPPER_NAME_MAX];
                        upper_name(batch[i], name);
                        unlinkat(fs->upper_fd, name, 0);
                }
                pthread_mutex_lock(&fs->reap_lock);
                fs->reaping = false;
                pthread_cond_broadcast(&fs->reap_idle);
        }
        pthread_mutex_unlock(&fs->reap_lock);
        free(batch);
        return NULL;
}

/* Waits until the reaper has unlinked every file queued. True if there was any. */
static bool reap_drain(ws_fs *fs) {
        if (!fs->reaper_started)
                return false;
        pthread_mutex_lock(&fs->reap_lock);
        bool pending = fs->n_reap > 0 || fs->reaping;
        while (fs->n_reap > 0 || fs->reaping)
                pthread_cond_wait(&fs->reap_idle, &fs->reap_lock);
        pthread_mutex_unlock(&fs->reap_lock);
        return pending;
}

/* After ENOSPC or EDQUOT: space freed by an unlink() that already returned must be
 * there for the retry, as on a local disk. True if the caller should retry once. */
static bool reaped_for_space(ws_fs *fs, int err) {
        return (err == ENOSPC || err == EDQUOT) && reap_drain(fs);
}

static void drop_if_gone(ws_fs *fs, uint64_t ino) {
        ws_inode *in = inode_get(fs, ino);
        if (in->nlink > 0 || in->open_count > 0 || in->nlookup > 0 || S_ISDIR(in->mode))
                return;
        if (in->upper_fd >= 0) {
                close(in->upper_fd);
                in->upper_fd = -1;
        }
        if (in->upper) {
                reap_later(fs, ino);
                in->reap_queued = true;
                in->upper = false;
        }
}

int ws_setattr(ws_fs *fs, uint64_t ino, const struct stat *attr, int to_set, struct stat *ret) {
        int r = 0;
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                if (!in) {
                        r = -ENOENT;
                        break;
                }
                if (to_set & WS_SET_SIZE) {
                        if (S_ISDIR(in->mode)) {
                                r = -EISDIR;
                                break;
                        }
                        if ((r = copy_up(fs, ino)) < 0)
                                break;
                        in = inode_get(fs, ino);
                        if (ftruncate(in->upper_fd, attr->st_size) < 0) {
                                r = -errno;
                                break;
                        }
                        in->size = (uint64_t)attr->st_size;
                        in->hashed = false;
                        if (may_close_upper(in))
                                close_upper(in);
                        touch(in, true);
                }
                if (to_set & WS_SET_MODE)
                        in->mode = (in->mode & S_IFMT) | (attr->st_mode & 07777);
                if (to_set & WS_SET_UID)
                        in->uid = attr->st_uid;
                if (to_set & WS_SET_GID)
                        in->gid = attr->st_gid;
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                if (to_set & WS_SET_ATIME)
                        in->atime = attr->st_atim;
                if (to_set & WS_SET_ATIME_NOW)
                        in->atime = now;
                if (to_set & WS_SET_MTIME)
                        in->mtime = attr->st_mtim;
                if (to_set & WS_SET_MTIME_NOW)
                        in->mtime = now;
                /* A SETATTR that sets nothing is chown(path, -1, -1): ext4 still moves ctime. */
                if (to_set == 0 || (to_set & (WS_SET_MODE | WS_SET_UID | WS_SET_GID | WS_SET_SIZE)))
                        in->ctime = now;
                if (to_set & WS_SET_CTIME)
                        in->ctime = attr->st_ctim;
                stat_of(fs, ino, ret);
        } while (0);
        return r;
}

static int read_link_target(ws_fs *fs, ws_inode *in) {
        if (in->link)
                return 0;
        char *data = NULL;
        if (lfs_object_read_whole(fs->store, &in->blob, in->size, &data, NULL) < 0)
                return -EIO;
        in->link = data;
        return 0;
}

int ws_readlink(ws_fs *fs, uint64_t ino, char **ret) {
        int r = 0;
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                if (!in)
                        r = -ENOENT;
                else if (!S_ISLNK(in->mode))
                        r = -EINVAL;
                else if ((r = read_link_target(fs, in)) == 0)
                        *ret = xstrdup(in->link);
        } while (0);
        return r;
}

/* A new entry in parent: checks the name and that it is free. */
static int new_entry_ok(ws_fs *fs, uint64_t parent, const char *name) {
        ws_inode *dir;
        int r = check_name(name);
        if (r < 0 || (r = dir_ready(fs, parent, &dir)) < 0)
                return r;
        return child_get(fs, parent, name, NULL) ? -EEXIST : 0;
}

/* Owner and group of a new inode: setgid directories pass their group (and, to new
 * directories, the setgid bit) on. */
static uint64_t make_inode(ws_fs *fs, const ws_caller *who, uint64_t parent, mode_t mode) {
        ws_inode *dir = inode_get(fs, parent);
        gid_t gid = who->gid;
        if (dir->mode & S_ISGID) {
                gid = dir->gid;
                if (S_ISDIR(mode))
                        mode |= S_ISGID;
        }
        uint64_t ino = inode_new(fs, mode, who->uid, gid);
        touch(inode_get(fs, parent), true);
        return ino;
}

int ws_mknod(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
             struct stat *ret) {
        int r;
        LOCK_GUARD(fs);
        do {
                if (!S_ISFIFO(mode) && !S_ISSOCK(mode) && !S_ISREG(mode)) {
                        r = -EPERM; /* device nodes are refused */
                        break;
                }
                if ((r = new_entry_ok(fs, parent, name)) < 0)
                        break;
                uint64_t ino = make_inode(fs, who, parent, mode);
                inode_get(fs, ino)->loaded = true;
                child_add(fs, parent, name, ino);
                entry_of(fs, ino, ret);
        } while (0);
        return r;
}

int ws_mkdir(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode,
             struct stat *ret) {
        int r;
        LOCK_GUARD(fs);
        do {
                if ((r = new_entry_ok(fs, parent, name)) < 0)
                        break;
                uint64_t ino = make_inode(fs, who, parent, S_IFDIR | (mode & 07777));
                ws_inode *in = inode_get(fs, ino);
                in->loaded = true;
                in->size = 4096;
                child_add(fs, parent, name, ino);
                entry_of(fs, ino, ret);
        } while (0);
        return r;
}

int ws_symlink(ws_fs *fs, const ws_caller *who, const char *target, uint64_t parent, const char *name,
               struct stat *ret) {
        int r;
        LOCK_GUARD(fs);
        do {
                if ((r = new_entry_ok(fs, parent, name)) < 0)
                        break;
                uint64_t ino = make_inode(fs, who, parent, S_IFLNK | 0777);
                ws_inode *in = inode_get(fs, ino);
                in->link = xstrdup(target);
                in->size = strlen(target);
                child_add(fs, parent, name, ino);
                entry_of(fs, ino, ret);
        } while (0);
        return r;
}

int ws_link(ws_fs *fs, uint64_t ino, uint64_t parent, const char *name, struct stat *ret) {
        int r;
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                if (!in) {
                        r = -ENOENT;
                        break;
                }
                if (S_ISDIR(in->mode)) {
                        r = -EPERM;
                        break;
                }
                if ((r = new_entry_ok(fs, parent, name)) < 0)
                        break;
                in = inode_get(fs, ino);
                in->nlink++;
                touch(in, false);
                touch(inode_get(fs, parent), true);
                child_add(fs, parent, name, ino);
                entry_of(fs, ino, ret);
        } while (0);
        return r;
}

int ws_unlink(ws_fs *fs, uint64_t parent, const char *name) {
        int r;
        LOCK_GUARD(fs);
        do {
                uint64_t ino;
                if ((r = child_lookup(fs, parent, name, &ino)) < 0)
                        break;
                ws_inode *in = inode_get(fs, ino);
                if (S_ISDIR(in->mode)) {
                        r = -EISDIR;
                        break;
                }
                child_remove(fs, parent, name);
                in->nlink--;
                touch(in, false);
                touch(inode_get(fs, parent), true);
                drop_if_gone(fs, ino);
        } while (0);
        return r;
}

static int dir_is_empty(ws_fs *fs, uint64_t ino) {
        ws_inode *dir;
        int r = dir_ready(fs, ino, &dir);
        if (r < 0)
                return r;
        return dir->live_ents ? -ENOTEMPTY : 0;
}

int ws_rmdir(ws_fs *fs, uint64_t parent, const char *name) {
        int r;
        LOCK_GUARD(fs);
        do {
                uint64_t ino;
                if ((r = child_lookup(fs, parent, name, &ino)) < 0)
                        break;
                if (!S_ISDIR(inode_get(fs, ino)->mode)) {
                        r = -ENOTDIR;
                        break;
                }
                if ((r = dir_is_empty(fs, ino)) < 0)
                        break;
                child_remove(fs, parent, name);
                inode_get(fs, ino)->nlink = 0;
                touch(inode_get(fs, parent), true);
        } while (0);
        return r;
}

/* Is a (a directory) ino itself or an ancestor of b? */
static bool is_ancestor(ws_fs *fs, uint64_t a, uint64_t b) {
        for (uint64_t cur = b;; cur = inode_get(fs, cur)->parent) {
                if (cur == a)
                        return true;
                if (cur == WS_ROOT_INO)
                        return false;
        }
}

int ws_rename(ws_fs *fs, uint64_t parent, const char *name, uint64_t new_parent, const char *new_name,
              unsigned flags) {
        int r;
        LOCK_GUARD(fs);
        do {
                ws_inode *a, *b;
                if ((r = check_name(new_name)) < 0 || (r = dir_ready(fs, parent, &a)) < 0 ||
                    (r = dir_ready(fs, new_parent, &b)) < 0)
                        break;
                if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
                        r = -EINVAL;
                        break;
                }
                uint64_t src = child_get(fs, parent, name, NULL);
                uint64_t dst = child_get(fs, new_parent, new_name, NULL);
                if (!src) {
                        r = -ENOENT;
                        break;
                }
                bool src_dir = S_ISDIR(inode_get(fs, src)->mode);
                if (src_dir && is_ancestor(fs, src, new_parent)) {
                        r = -EINVAL;
                        break;
                }
                if (flags & RENAME_EXCHANGE) {
                        if (!dst) {
                                r = -ENOENT;
                                break;
                        }
                        bool dst_dir = S_ISDIR(inode_get(fs, dst)->mode);
                        if (dst_dir && is_ancestor(fs, dst, parent)) {
                                r = -EINVAL;
                                break;
                        }
                        child_remove(fs, parent, name);
                        child_remove(fs, new_parent, new_name);
                        child_add(fs, parent, name, dst);
                        child_add(fs, new_parent, new_name, src);
                        touch(inode_get(fs, src), false);
                        touch(inode_get(fs, dst), false);
                        touch(inode_get(fs, parent), true);
                        touch(inode_get(fs, new_parent), true);
                        break;
                }
                if (dst == src)
                        break; /* the same inode under both names: nothing to do */
                if (dst) {
                        if (flags & RENAME_NOREPLACE) {
                                r = -EEXIST;
                                break;
                        }
                        bool dst_dir = S_ISDIR(inode_get(fs, dst)->mode);
                        if (src_dir && !dst_dir) {
                                r = -ENOTDIR;
                                break;
                        }
                        if (!src_dir && dst_dir) {
                                r = -EISDIR;
                                break;
                        }
                        if (dst_dir && (r = dir_is_empty(fs, dst)) < 0)
                                break;
                        child_remove(fs, new_parent, new_name);
                        ws_inode *gone = inode_get(fs, dst);
                        gone->nlink = dst_dir ? 0 : gone->nlink - 1;
                        touch(gone, false);
                        drop_if_gone(fs, dst);
                }
                child_remove(fs, parent, name);
                child_add(fs, new_parent, new_name, src);
                touch(inode_get(fs, src), false);
                touch(inode_get(fs, parent), true);
                touch(inode_get(fs, new_parent), true);
        } while (0);
        return r;
}

/* ---- open files ---- */

static uint64_t handle_new(ws_fs *fs, uint64_t ino) {
        size_t i = 0;
        while (i < fs->n_handles && fs->handles[i].in_use)
                i++;
        if (i == fs->n_handles) {
                GROW(fs->handles, fs->cap_handles, fs->n_handles + 1);
                fs->n_handles++;
        }
        fs->handles[i] = (ws_handle){ .ino = ino, .lower_fd = -1, .in_use = true };
        inode_get(fs, ino)->open_count++;
        fs->open_files++;
        return i + 1;
}

static ws_handle *handle_get(ws_fs *fs, uint64_t fh) {
        if (fh == 0 || fh > fs->n_handles || !fs->handles[fh - 1].in_use)
                return NULL;
        return &fs->handles[fh - 1];
}

/* The open handle fh, or -EBADF. */
static int handle_of(ws_fs *fs, uint64_t fh, ws_handle **ret) {
        ws_handle *h = handle_get(fs, fh);
        if (!h)
                return -EBADF;
        *ret = h;
        return 0;
}

static int open_inode(ws_fs *fs, uint64_t ino, int flags, uint64_t *ret_fh) {
        ws_inode *in = inode_get(fs, ino);
        if (!in)
                return -ENOENT;
        if (S_ISDIR(in->mode))
                return -EISDIR;
        int acc = flags & O_ACCMODE;
        if (acc != O_RDONLY || (flags & O_TRUNC)) {
                int r = copy_up_data(fs, ino, !(flags & O_TRUNC));
                if (r < 0)
                        return r;
                in = inode_get(fs, ino);
                if ((flags & O_TRUNC) && in->size) {
                        if (ftruncate(in->upper_fd, 0) < 0)
                                return -errno;
                        in->size = 0;
                        in->hashed = false;
                        touch(in, true);
                }
        }
        *ret_fh = handle_new(fs, ino);
        return 0;
}

int ws_open_file(ws_fs *fs, uint64_t ino, int flags, uint64_t *ret_fh) {
        int r;
        LOCK_GUARD(fs);
        do {
                r = open_inode(fs, ino, flags, ret_fh);
        } while (0);
        return r;
}

int ws_create(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode, int flags,
              struct stat *ret, uint64_t *ret_fh) {
        int r;
        LOCK_GUARD(fs);
        do {
                if ((r = new_entry_ok(fs, parent, name)) < 0)
                        break;
                uint64_t ino = make_inode(fs, who, parent, S_IFREG | (mode & 07777));
                if ((r = copy_up(fs, ino)) < 0)
                        break;
                child_add(fs, parent, name, ino);
                if ((r = open_inode(fs, ino, flags & ~O_TRUNC, ret_fh)) < 0)
                        break;
                entry_of(fs, ino, ret);
        } while (0);
        return r;
}

/* Where a read of a lower file goes: found once per handle. */
static int lower_source(ws_fs *fs, ws_handle *h, ws_inode *in) {
        if (h->lower_fd >= 0)
                return 0;
        lfs_object_loc loc = { .fd = -1 };
        if (lfs_object_locate(fs->store, &in->blob, &loc, NULL) < 0)
                return -EIO;
        if (loc.fd >= 0) {
                h->lower_fd = loc.fd;
                h->lower_offset = loc.offset;
                return 0;
        }
        int fd = lfs_object_open(fs->store, &in->blob, NULL);
        if (fd < 0)
                return -EIO;
        h->lower_fd = fd;
        h->lower_owned = true;
        return 0;
}

int ws_read_extent(ws_fs *fs, uint64_t fh, size_t size, off_t off, ws_extent *ret) {
        int r = 0;
        LOCK_GUARD(fs);
        do {
                ws_handle *h;
                if ((r = handle_of(fs, fh, &h)) < 0)
                        break;
                ws_inode *in = inode_get(fs, h->ino);
                if (in->upper) {
                        if (in->upper_fd < 0 && (r = copy_up(fs, h->ino)) < 0)
                                break;
                        *ret = (ws_extent){ .fd = in->upper_fd, .offset = off, .length = size };
                        break;
                }
                if ((uint64_t)off >= in->size || !in->has_blob) {
                        *ret = (ws_extent){ .fd = -1 };
                        break;
                }
                if (size > in->size - (uint64_t)off)
                        size = in->size - (uint64_t)off;
                if ((r = lower_source(fs, h, in)) < 0)
                        break;
                *ret = (ws_extent){ .fd = h->lower_fd,
                                    .offset = (off_t)h->lower_offset + off,
                                    .length = size };
        } while (0);
        return r;
}

/* The inode behind handle fh, copied up so that it can be changed. */
static int writable_inode(ws_fs *fs, uint64_t fh, ws_inode **ret) {
        ws_handle *h;
        int r = handle_of(fs, fh, &h);
        if (r < 0)
                return r;
        r = copy_up(fs, h->ino);
        if (r < 0)
                return r;
        *ret = inode_get(fs, h->ino);
        return 0;
}

/* A large file written in order goes to disk while it is being written, not all at its
 * fsync or when the kernel's dirty limits are reached: each time a write completes an
 * 8 MiB window, the window's writeback starts (asynchronously). Small files never
 * complete a window, so they are left to the kernel as on a local disk. */
#define WRITEBACK_WINDOW (8 << 20)
static void start_writeback(ws_inode *in, off_t off, size_t written) {
        off_t end = off + (off_t)written;
        if (end / WRITEBACK_WINDOW == off / WRITEBACK_WINDOW)
                return;
        off_t window = (end / WRITEBACK_WINDOW - 1) * WRITEBACK_WINDOW;
        sync_file_range(in->upper_fd, window, WRITEBACK_WINDOW, SYNC_FILE_RANGE_WRITE);
}

ssize_t ws_write(ws_fs *fs, uint64_t fh, const char *buf, size_t size, off_t off) {
        ssize_t r = 0;
        LOCK_GUARD(fs);
        do {
                ws_inode *in;
                if ((r = writable_inode(fs, fh, &in)) < 0)
                        break;
                r = pwrite(in->upper_fd, buf, size, off);
                if (r < 0 && reaped_for_space(fs, errno))
                        r = pwrite(in->upper_fd, buf, size, off);
                if (r < 0) {
                        r = -errno;
                        break;
                }
                if ((uint64_t)off + (uint64_t)r > in->size)
                        in->size = (uint64_t)off + (uint64_t)r;
                start_writeback(in, off, (size_t)r);
                in->hashed = false;
                touch(in, true);
        } while (0);
        return r;
}

int ws_fsync(ws_fs *fs, uint64_t fh, bool datasync) {
        int r = 0;
        LOCK_GUARD(fs);
        do {
                ws_handle *h;
                if ((r = handle_of(fs, fh, &h)) < 0)
                        break;
                ws_inode *in = inode_get(fs, h->ino);
                if (in->upper_fd >= 0 && (datasync ? fdatasync(in->upper_fd) : fsync(in->upper_fd)) < 0)
                        r = -errno;
        } while (0);
        return r;
}

int ws_fallocate(ws_fs *fs, uint64_t fh, int mode, off_t off, off_t len) {
        int r = 0;
        LOCK_GUARD(fs);
        do {
                ws_inode *in;
                if ((r = writable_inode(fs, fh, &in)) < 0)
                        break;
                r = fallocate(in->upper_fd, mode, off, len);
                if (r < 0 && reaped_for_space(fs, errno))
                        r = fallocate(in->upper_fd, mode, off, len);
                if (r < 0) {
                        r = -errno;
                        break;
                }
                struct stat st;
                if (fstat(in->upper_fd, &st) == 0)
                        in->size = (uint64_t)st.st_size;
                in->hashed = false;
                touch(in, true);
        } while (0);
        return r;
}

int ws_release(ws_fs *fs, uint64_t fh) {
        int r = 0;
        LOCK_GUARD(fs);
        do {
                ws_handle *h;
                if ((r = handle_of(fs, fh, &h)) < 0)
                        break;
                uint64_t ino = h->ino;
                if (h->lower_owned)
                        close(h->lower_fd);
                h->in_use = false;
                fs->open_files--;
                ws_inode *in = inode_get(fs, ino);
                in->open_count--;
                if (in->open_count == 0 && in->upper_fd >= 0)
                        close_upper(in);
                drop_if_gone(fs, ino);
        } while (0);
        return r;
}

unsigned ws_open_files(ws_fs *fs) {
        unsigned n;
        LOCK_GUARD(fs);
        do {
                n = fs->open_files;
        } while (0);
        return n;
}

/* ---- directories ---- */

int ws_readdir(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_fn fill, void *userdata) {
        int r;
        LOCK_GUARD(fs);
        do {
                ws_inode *dir;
                if ((r = dir_ready(fs, ino, &dir)) < 0)
                        break;
                struct stat st = { 0 };
                /* Offsets: 1 ".", 2 "..", then 3 + index in ents (stable across removals). */
                if (offset < 1) {
                        st.st_ino = ino;
                        st.st_mode = S_IFDIR;
                        if (!fill(userdata, ".", &st, 1))
                                break;
                        offset = 1;
                }
                if (offset < 2) {
                        st.st_ino = dir->parent;
                        st.st_mode = S_IFDIR;
                        if (!fill(userdata, "..", &st, 2))
                                break;
                        offset = 2;
                }
                for (size_t i = (size_t)offset - 2; i < dir->n_ents; i++) {
                        ws_dirent *d = &dir->ents[i];
                        if (!d->name)
                                continue;
                        st.st_ino = d->ino;
                        st.st_mode = inode_get(fs, d->ino)->mode & S_IFMT;
                        if (!fill(userdata, d->name, &st, (off_t)i + 3))
                                break;
                }
        } while (0);
        return r;
}

int ws_statfs(ws_fs *fs, struct statvfs *ret) {
        reap_drain(fs); /* df right after rm shows the space freed, as on a local disk */
        return fstatvfs(fs->upper_fd, ret) < 0 ? -errno : 0;
}

/* ---- extended attributes: the user namespace, in memory ---- */

static ws_xattr *xattr_find(ws_inode *in, const char *name) {
        for (size_t i = 0; i < in->n_xattrs; i++)
                if (!strcmp(in->xattrs[i].name, name))
                        return &in->xattrs[i];
        return NULL;
}

int ws_setxattr(ws_fs *fs, uint64_t ino, const char *name, const char *value, size_t size, int flags) {
        int r = 0;
        if (strncmp(name, "user.", 5))
                return -ENOTSUP;
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                if (!in) {
                        r = -ENOENT;
                        break;
                }
                ws_xattr *x = xattr_find(in, name);
                if ((flags & XATTR_CREATE) && x) {
                        r = -EEXIST;
                        break;
                }
                if ((flags & XATTR_REPLACE) && !x) {
                        r = -ENODATA;
                        break;
                }
                if (!x) {
                        in->xattrs = xrealloc(in->xattrs, (in->n_xattrs + 1) * sizeof(ws_xattr));
                        x = &in->xattrs[in->n_xattrs++];
                        x->name = xstrdup(name);
                        x->value = NULL;
                }
                free(x->value);
                x->value = xmalloc(size);
                memcpy(x->value, value, size);
                x->size = size;
                touch(in, false);
        } while (0);
        return r;
}

ssize_t ws_getxattr(ws_fs *fs, uint64_t ino, const char *name, char *value, size_t size) {
        ssize_t r = 0;
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                ws_xattr *x = in ? xattr_find(in, name) : NULL;
                if (!in)
                        r = -ENOENT;
                else if (!x)
                        r = -ENODATA;
                else if (size == 0)
                        r = (ssize_t)x->size;
                else if (size < x->size)
                        r = -ERANGE;
                else {
                        memcpy(value, x->value, x->size);
                        r = (ssize_t)x->size;
                }
        } while (0);
        return r;
}

ssize_t ws_listxattr(ws_fs *fs, uint64_t ino, char *list, size_t size) {
        ssize_t r = 0;
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                if (!in) {
                        r = -ENOENT;
                        break;
                }
                size_t need = 0;
                for (size_t i = 0; i < in->n_xattrs; i++)
                        need += strlen(in->xattrs[i].name) + 1;
                if (size == 0) {
                        r = (ssize_t)need;
                        break;
                }
                if (size < need) {
                        r = -ERANGE;
                        break;
                }
                for (size_t i = 0, off = 0; i < in->n_xattrs; i++) {
                        size_t len = strlen(in->xattrs[i].name) + 1;
                        memcpy(list + off, in->xattrs[i].name, len);
                        off += len;
                }
                r = (ssize_t)need;
        } while (0);
        return r;
}

int ws_removexattr(ws_fs *fs, uint64_t ino, const char *name) {
        int r = 0;
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                ws_xattr *x = in ? xattr_find(in, name) : NULL;
                if (!in) {
                        r = -ENOENT;
                        break;
                }
                if (!x) {
                        r = -ENODATA;
                        break;
                }
                free(x->name);
                free(x->value);
                *x = in->xattrs[--in->n_xattrs];
                touch(in, false);
        } while (0);
        return r;
}

/* ---- status and commit: the namespace against the base tree ---- */

typedef struct change_walk {
        ws_fs *fs;
        bool for_commit;
        lfs_change_list status;
        lfs_path_change *changes;
        size_t n_changes, cap_changes;
        char **owned; /* strings the changes point at */
        size_t n_owned, cap_owned;
        lfs_error **err;
} change_walk;

static const char *keep(change_walk *cw, char *s) {
        GROW(cw->owned, cw->cap_owned, cw->n_owned + 1);
        cw->owned[cw->n_owned++] = s;
        return s;
}

static void report(change_walk *cw, const char *path, lfs_change_kind kind) {
        GROW(cw->status.items, cw->status.cap, cw->status.n + 1);
        cw->status.items[cw->status.n++] = (lfs_change){ .path = xstrdup(path), .kind = kind };
}

static void change(change_walk *cw, const char *path, lfs_entry_type type, const char *source) {
        GROW(cw->changes, cw->cap_changes, cw->n_changes + 1);
        cw->changes[cw->n_changes++] =
                (lfs_path_change){ .path = keep(cw, xstrdup(path)), .type = type, .source = source };
}

/* Every leaf of a base subtree, as deleted. */
static int report_deleted_tree(change_walk *cw, const lfs_id *tree_id, const char *path) {
        lfs_tree t = { 0 };
        int r = lfs_db_get_tree(cw->fs->store, tree_id, &t, cw->err);
        if (r < 0)
                return r;
        if (!t.n)
                report(cw, path, LFS_DELETED);
        for (size_t i = 0; i < t.n && r == 0; i++) {
                _cleanup_free_ char *sub = path_join(path, t.entries[i].name);
                if (lfs_mode_is_dir(t.entries[i].mode))
                        r = report_deleted_tree(cw, &t.entries[i].id, sub);
                else
                        report(cw, sub, LFS_DELETED);
        }
        lfs_tree_done(&t);
        return r;
}

static int base_gone(change_walk *cw, const lfs_entry *b, const char *path) {
        if (cw->for_commit) {
                change(cw, path, LFS_ENTRY_NONE, NULL);
                return 0;
        }
        if (lfs_mode_is_dir(b->mode))
                return report_deleted_tree(cw, &b->id, path);
        report(cw, path, LFS_DELETED);
        return 0;
}

/* The content id a file or symlink inode would be stored under. */
static int current_id(ws_fs *fs, uint64_t ino, lfs_id *ret, lfs_error **err) {
        ws_inode *in = inode_get(fs, ino);
        if (S_ISLNK(in->mode)) {
                if (in->link)
                        lfs_sha256(in->link, strlen(in->link), ret);
                else
                        *ret = in->blob; /* from the Store, never changed */
                return 0;
        }
        if (!in->upper) {
                if (in->has_blob)
                        *ret = in->blob;
                else
                        lfs_sha256("", 0, ret);
                return 0;
        }
        if (in->hashed) {
                *ret = in->upper_hash;
                return 0;
        }
        char name[UPPER_NAME_MAX];
        upper_name(ino, name);
        _cleanup_close_ int fd = openat(fs->upper_fd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot read the Workspace's copy of a file: %s",
                                strerror(errno));
        _cleanup_free_ char *buf = xmalloc(1u << 20);
        lfs_hasher *h = lfs_hasher_new();
        ssize_t k;
        while ((k = read(fd, buf, 1u << 20)) > 0)
                lfs_hasher_update(h, buf, (size_t)k);
        lfs_hasher_finish(h, ret);
        if (k < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot read the Workspace's copy of a file");
        /* Hashed once until the next change: status stays cheap for large files. */
        in->hashed = true;
        in->upper_hash = *ret;
        return 0;
}

static uint32_t store_mode(uint32_t mode) {
        if (S_ISLNK(mode))
                return LFS_MODE_LINK;
        return mode & S_IXUSR ? LFS_MODE_EXEC : LFS_MODE_FILE;
}

static int walk_changes(change_walk *cw, uint64_t dir_ino, const lfs_id *base_id, const char *prefix);

static int leaf_changes(change_walk *cw, uint64_t ino, const lfs_entry *b, const char *path) {
        ws_fs *fs = cw->fs;
        ws_inode *in = inode_get(fs, ino);
        if (!S_ISREG(in->mode) && !S_ISLNK(in->mode))
                return b ? base_gone(cw, b, path) : 0; /* fifos and sockets are not recorded */
        lfs_id id;
        int r = current_id(fs, ino, &id, cw->err);
        if (r < 0)
                return r;
        uint32_t mode = store_mode(in->mode);
        if (b && b->mode == mode && lfs_id_eq(&b->id, &id))
                return 0;
        if (!cw->for_commit) {
                if (b && lfs_mode_is_dir(b->mode)) {
                        r = report_deleted_tree(cw, &b->id, path);
                        report(cw, path, LFS_ADDED);
                } else {
                        report(cw, path, b ? LFS_MODIFIED : LFS_ADDED);
                }
                return r;
        }
        if (S_ISLNK(in->mode)) {
                if ((r = read_link_target(fs, in)) < 0)
                        return lfs_fail(cw->err, LFS_FAILED, -r, "cannot read symlink %s", path);
                change(cw, path, LFS_ENTRY_SYMLINK, keep(cw, xstrdup(inode_get(fs, ino)->link)));
                return 0;
        }
        GROW(cw->changes, cw->cap_changes, cw->n_changes + 1);
        lfs_path_change *c = &cw->changes[cw->n_changes++];
        *c = (lfs_path_change){ .path = keep(cw, xstrdup(path)),
                                .type = mode == LFS_MODE_EXEC ? LFS_ENTRY_EXEC : LFS_ENTRY_FILE };
        if (in->upper) {
                char name[UPPER_NAME_MAX];
                upper_name(ino, name);
                c->source = keep(cw, xasprintf("%s/%s", fs->upper, name));
        } else {
                lfs_id *blob = xmalloc(sizeof(*blob));
                *blob = id;
                c->blob = (const lfs_id *)keep(cw, (char *)blob);
                c->blob_size = in->size;
        }
        return 0;
}

static int walk_changes(change_walk *cw, uint64_t dir_ino, const lfs_id *base_id, const char *prefix) {
        ws_fs *fs = cw->fs;
        ws_inode *dir = inode_get(fs, dir_ino);
        /* A directory never listed is as it was loaded: compare ids only. */
        if (!dir->loaded && base_id && dir->has_tree && lfs_id_eq(&dir->tree, base_id))
                return 0;
        int r = load_dir(fs, dir_ino);
        if (r < 0)
                return lfs_fail(cw->err, LFS_FAILED, -r, "cannot read directory '%s' from the Store",
                                prefix);
        lfs_tree base = { 0 };
        if (base_id && (r = lfs_db_get_tree(fs->store, base_id, &base, cw->err)) < 0)
                return r;
        dir = inode_get(fs, dir_ino);
        if (!base_id && dir->live_ents == 0 && *prefix && !cw->for_commit)
                report(cw, prefix, LFS_ADDED);
        for (size_t i = 0; i < inode_get(fs, dir_ino)->n_ents && r == 0; i++) {
                ws_dirent d = inode_get(fs, dir_ino)->ents[i];
                if (!d.name)
                        continue;
                _cleanup_free_ char *path = path_join(prefix, d.name);
                const lfs_entry *b = lfs_tree_find(&base, d.name);
                if (S_ISDIR(inode_get(fs, d.ino)->mode)) {
                        if (b && lfs_mode_is_dir(b->mode)) {
                                r = walk_changes(cw, d.ino, &b->id, path);
                                continue;
                        }
                        if (b && !cw->for_commit)
                                report(cw, path, LFS_DELETED);
                        if (cw->for_commit)
                                change(cw, path, LFS_ENTRY_DIR, NULL);
                        r = walk_changes(cw, d.ino, NULL, path);
                } else {
                        r = leaf_changes(cw, d.ino, b, path);
                }
        }
        for (size_t i = 0; i < base.n && r == 0; i++)
                if (!child_get(fs, dir_ino, base.entries[i].name, NULL)) {
                        _cleanup_free_ char *path = path_join(prefix, base.entries[i].name);
                        r = base_gone(cw, &base.entries[i], path);
                }
        lfs_tree_done(&base);
        return r;
}

static void change_walk_done(change_walk *cw) {
        lfs_change_list_free(cw->status.items, cw->status.n);
        free(cw->changes);
        for (size_t i = 0; i < cw->n_owned; i++)
                free(cw->owned[i]);
        free(cw->owned);
}

static int cmp_change(const void *a, const void *b) {
        return strcmp(((const lfs_change *)a)->path, ((const lfs_change *)b)->path);
}

int ws_status(ws_fs *fs, lfs_change **ret, size_t *ret_n, lfs_error **err) {
        change_walk cw = { .fs = fs, .err = err };
        int r;
        LOCK_GUARD(fs);
        r = walk_changes(&cw, WS_ROOT_INO, &fs->base_tree, "");
        if (r == 0) {
                if (cw.status.n > 1)
                        qsort(cw.status.items, cw.status.n, sizeof(lfs_change), cmp_change);
                *ret = cw.status.items;
                *ret_n = cw.status.n;
                cw.status = (lfs_change_list){ 0 };
        }
        change_walk_done(&cw);
        return r;
}

bool ws_is_dirty(ws_fs *fs, lfs_error **err) {
        lfs_change *changes = NULL;
        size_t n = 0;
        if (ws_status(fs, &changes, &n, err) < 0)
                return true; /* when in doubt, do not drop anything */
        lfs_change_list_free(changes, n);
        return n > 0;
}

/* After a merged commit, the view takes what the others changed: path set as in tree. */
static void view_take(ws_fs *fs, const char *path, const lfs_id *tree) {
        lfs_tree t = { 0 };
        lfs_id cur = *tree;
        uint64_t dir = WS_ROOT_INO;
        _cleanup_free_ char *copy = xstrdup(path);
        char *save = NULL;
        for (char *part = strtok_r(copy, "/", &save); part; part = strtok_r(NULL, "/", &save)) {
                bool last = !save || !*save;
                lfs_tree_done(&t);
                if (lfs_db_get_tree(fs->store, &cur, &t, NULL) < 0 || load_dir(fs, dir) < 0)
                        break;
                const lfs_entry *e = lfs_tree_find(&t, part);
                uint64_t child = child_get(fs, dir, part, NULL);
                if (!last && e && lfs_mode_is_dir(e->mode) && child && S_ISDIR(inode_get(fs, child)->mode)) {
                        cur = e->id;
                        dir = child;
                        continue;
                }
                mark_stale(fs, dir, part, child);
                if (child) {
                        ws_inode *old = inode_get(fs, child);
                        child_remove(fs, dir, part);
                        if (!S_ISDIR(old->mode))
                                old->nlink--;
                        drop_if_gone(fs, child);
                }
                if (e) {
                        uint64_t ino = inode_new(fs, 0, fs->owner, fs->group);
                        fill_from_entry(fs, inode_get(fs, ino), e);
                        child_add(fs, dir, part, ino);
                }
                break;
        }
        lfs_tree_done(&t);
}

static int commit_locked(ws_fs *fs, const char *message, lfs_id *ret_commit, int *ret_merged,
                         lfs_error **err) {
        change_walk cw = { .fs = fs, .for_commit = true, .err = err };
        lfs_id commit, own_tree = { { 0 } };
        int merged = 0;
        lfs_commit_info c = { 0 };
        LOCK_GUARD(fs);
        int r = walk_changes(&cw, WS_ROOT_INO, &fs->base_tree, "");
        if (r == 0)
                r = lfs_store_commit_changes(fs->store, fs->branch, &fs->base, cw.changes, cw.n_changes,
                                             message, &commit, &merged, err);
        if (r == 0)
                r = lfs_db_get_commit(fs->store, &commit, &c, err);
        if (r == 0 && merged) {
                /* Parents: the head we merged into, then our own commit. */
                lfs_commit_info mine = { 0 };
                if ((r = lfs_db_get_commit(fs->store, &c.parents[1], &mine, err)) == 0) {
                        own_tree = mine.tree;
                        lfs_commit_info_done(&mine);
                        lfs_change_list theirs = { 0 };
                        if ((r = lfs_tree_diff(fs->store, &own_tree, &c.tree, &theirs, err)) == 0) {
                                for (size_t i = 0; i < theirs.n; i++)
                                        view_take(fs, theirs.items[i].path, &c.tree);
                                lfs_change_list_free(theirs.items, theirs.n);
                        }
                }
        }
        if (r == 0) {
                fs->base = commit;
                fs->base_tree = c.tree;
                *ret_commit = commit;
                if (ret_merged)
                        *ret_merged = merged;
        }
        lfs_commit_info_done(&c);
        change_walk_done(&cw);
        return r;
}

int ws_commit(ws_fs *fs, const char *message, lfs_id *ret_commit, int *ret_merged, lfs_error **err) {
        int r = commit_locked(fs, message, ret_commit, ret_merged, err);
        /* Outside the lock: the kernel may need a request of ours to finish first. */
        for (size_t i = 0; i < fs->n_stale; i++) {
                if (fs->invalidate)
                        fs->invalidate(fs->invalidate_data, fs->stale[i].parent, fs->stale[i].child,
                                       fs->stale[i].name);
                free(fs->stale[i].name);
        }
        fs->n_stale = 0;
        return r;
}
