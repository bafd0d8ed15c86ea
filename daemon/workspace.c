/* SPDX-License-Identifier: MIT */
/* The Workspace's filesystem operations; see workspace.h for the shape. */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <time.h>

#include "fault.h"
#include "log.h"
#include "store.h"
#include "workspace.h"

typedef struct ws_dirent {
        char *name; /* NULL: removed (offsets of later entries stay put for readdir) */
        uint64_t ino;
} ws_dirent;

/* What evict_child keeps of an entry whose record it freed: what load_names reads of it
 * from the directory's tree (fill_from_entry), so that a lookup of its name makes its
 * record again alone, without reading the tree (restore_entry). */
typedef struct ws_evicted {
        lfs_id id;
        uint64_t size : 62; /* the blob's; a blob is far below 2^62 bytes */
        uint64_t kind : 2; /* ws_evicted_kind */
} ws_evicted;

typedef enum ws_evicted_kind { EVICTED_FILE, EVICTED_EXEC, EVICTED_LINK, EVICTED_DIR } ws_evicted_kind;

typedef struct ws_xattr {
        char *name;
        char *value;
        size_t size;
} ws_xattr;

typedef struct ws_inode {
        uint64_t ino;
        uint32_t mode;
        uid_t uid;
        gid_t gid;
        uint32_t nlink;
        uint64_t size;
        struct timespec atime, mtime, ctime;
        /* Content: in the upper file <upper>/<ino>, or the lower blob. */
        bool upper;
        bool has_blob;
        bool hashed; /* upper_hash is the upper file's id (reset by every change) */
        lfs_id blob;
        int upper_fd; /* open while the file is open or being written (unless the fd cache
                       * closed it: reopened on use); -1 otherwise */
        blkcnt_t upper_blocks; /* the upper file's st_blocks when its fd was last closed */
        lfs_id upper_hash;
        uint64_t data_gen; /* moves with every change of the data: a hash of another is stale */
        char *link; /* a symlink's target, once read or made */
        /* Directories: children from the lower tree once loaded, then the live namespace. */
        bool loaded;
        bool has_tree;
        lfs_id tree;
        /* Loaded from its tree at least once: its entries' numbers are first_child + their
         * index in it (n_numbered of them), given again when it is loaded again after
         * unload_dir with the same names (as_loaded: no name came or went since the load),
         * and subdirs stays true while it is unloaded. An entry still at the index of its
         * load keeps that number as its place (evict_child), whatever came or went since. */
        bool numbered;
        /* Not loaded yet, and subdirs is its tree's count, which the Store keeps beside
         * the tree (stat_of): its stat reads no tree. Moot once numbered. */
        bool counted;
        bool as_loaded;
        bool sweep_due; /* records were made since its last evict_idle */
        uint32_t n_numbered;
        uint32_t unload_from; /* where unload_dir's look for an entry it cannot free begins */
        uint64_t first_child;
        uint32_t n_evicted; /* entries whose records evict_child freed (names kept) */
        /* Status and commit look only below touched directories (the rest is as its tree
         * says): a directory is touched when a name in it or any directory below comes or
         * goes, or a file named in it changes (mark_touched), so a touched directory's
         * ancestors are all touched; a commit leaves untouched those whose tree it recorded
         * (commit_clean), but not one holding a name of a file that may change without
         * telling it (sticky_file). */
        bool touched;
        bool named_twice; /* files: has had two names at once (ws_link), so no one parent */
        bool free_awaited; /* nameless upper file a short disk once waited for (await_frees) */
        bool nameless_listed; /* in fs->nameless */
        ws_evicted *evicted; /* n_evicted's: n_numbered of them, by index in ents (kept once
                              * the last is made again, until the names go) */
        uint64_t parent; /* the directory of its name (of a file's latest, see named_twice) */
        ws_dirent *ents;
        size_t n_ents, cap_ents, live_ents, subdirs;
        unsigned open_count; /* handles, of files and of directories being listed */
        unsigned writers; /* handles open for writing: the kernel may hold dirty pages */
        uint64_t nlookup; /* the kernel's references (entries replied less FORGETs) */
        ws_xattr *xattrs;
        size_t n_xattrs;
        size_t xattr_block; /* what its xattrs would take of an ext4 block */
        /* Reads of a file not copied up: a pack's fd (borrowed from the Store) or a loose
         * object's (owned), found on first read while it is open. */
        int lower_fd;
        bool lower_owned;
        uint64_t lower_offset;
        /* A loose object's st_blocks (its holes: the Store keeps them), read on the first
         * stat; -1 until then (0 is a file of holes alone). */
        blkcnt_t lower_blocks;
        /* Inodes holding fds of ours (upper_fd, an owned lower_fd), most recently used
         * first: the fd cache (see fd_room). */
        struct ws_inode *lru_prev, *lru_next;
        unsigned fds_held;
        /* FUSE passthrough (ws_set_passthrough): while passed_opens, the kernel reads and
         * writes the upper file itself, registered under backing_id. The registration is
         * kept from the first open passed through until the kernel forgets the inode
         * (backing_let_go), so that later opens reuse it. Once opened so for writing
         * (passed_written), the upper file's ctime (passed_seen) tells when the kernel
         * changed it behind us (passthrough_refresh). */
        int backing_id;
        unsigned passed_opens;
        bool passed_written;
        struct timespec passed_seen;
} ws_inode;

/* The inode table: number -> record, open addressing (linear probing, deletion by
 * backward shift). Records are freed once nothing can reach them (inode_release), and
 * numbers are never reused while mounted. */
typedef struct ws_ino_slot {
        uint64_t ino; /* 0: empty */
        ws_inode *in;
} ws_ino_slot;

/* What a directory that was listed keeps once its record is freed (evict_child,
 * unload_dir): the numbers of its entries and its count of subdirectories, so that it is
 * loaded again with the same numbers and a stat of it reads no tree (24 bytes in the
 * listed table, against ~460 for the record). Its record is made again from its entry in
 * its directory's tree, and takes this back (listed_take). */
typedef struct ws_listed {
        uint64_t ino; /* 0: empty */
        uint64_t first_child;
        uint32_t n_numbered;
        uint32_t subdirs;
} ws_listed;

/* (parent, name) -> index in the parent's ents; open addressing with tombstones. */
typedef struct ws_slot {
        uint64_t parent;
        uint32_t index;
        uint8_t state; /* 0 empty, 1 used, 2 removed */
} ws_slot;

typedef struct ws_handle {
        uint64_t ino;
        bool in_use;
        bool writable;
        bool passed; /* answered with the inode's backing_id */
} ws_handle;

struct ws_fs {
        pthread_mutex_t lock;
        lfs_store *store;
        lfs_store *work_store; /* the commit's, used without lock while committing */
        lfs_pin *pin; /* every base the view has had, kept from gc while it is mounted */
        bool committing;
        _Atomic unsigned cancel_gen; /* ws_cancel: the walks that began before it stop */
        uint64_t data_gen; /* the last inode data_gen given */
        char *branch;
        lfs_id base; /* the commit the view started from (or last committed) */
        lfs_id base_tree; /* its tree */
        char *upper;
        int upper_fd;
        uid_t owner;
        gid_t group;
        struct timespec base_time;
        ws_ino_slot *itab;
        size_t cap_itab, n_live; /* n_live: records in itab */
        ws_listed *listed; /* by number, the directories listed whose records were freed */
        size_t cap_listed, n_listed;
        /* The inodes copied up (or made) since the mount, some since freed: what a commit
         * stores, found without a look at every record of a large namespace. */
        uint64_t *uppers;
        size_t n_uppers, cap_uppers;
        uint64_t last_ino;
        /* What the namespace's records take (meta_cost), against the budget meta_max:
         * past it, new names and xattrs get ENOSPC. Freed bytes are handed back to the
         * system (malloc_trim) every TRIM_EVERY. */
        uint64_t meta_used, meta_max, freed_since_trim;
        unsigned fd_shares; /* this Workspace's share of the daemon's fds: 1/fd_shares */
        ws_inode lru; /* the fd cache's list head */
        size_t n_fds;
        ws_slot *slots;
        size_t cap_slots, used_slots, live_slots; /* used: live and removed */
        ws_handle *handles; /* fh = index + 1 */
        size_t n_handles, cap_handles;
        unsigned open_files;
        /* Names the kernel may have cached that changed behind its back (merged commits);
         * told to the transport after the lock is released. */
        ws_invalidate_fn invalidate;
        void *invalidate_data;
        /* The transport's backing file registry, when it passes data through. */
        const ws_backing_ops *backing;
        void *backing_data;
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
        /* Another thread serves requests while one waits (ws_set_concurrent_requests); a
         * nameless upper file's record, going to the reaper, broadcasts freed. */
        bool concurrent_requests;
        pthread_cond_t freed;
        /* Upper files whose last name went while their record stayed (the kernel or a
         * handle held it), some since freed or waited for: what await_frees waits for,
         * found without a look at every file copied up since the mount. */
        uint64_t *nameless;
        size_t n_nameless, cap_nameless;
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

/* ---- what the namespace costs ----
 * Bytes counted against the Workspace's budget: a record with its table slots, a name
 * with its entry and index slots, a symlink's target, an xattr. Close to what malloc
 * hands out, so that the budget bounds the daemon's memory. */
#define INODE_COST (sizeof(ws_inode) + 2 * sizeof(ws_ino_slot) + 16)
#define NAME_COST(len) (sizeof(ws_dirent) + 2 * sizeof(ws_slot) + (len) + 1 + 16)
#define LISTED_COST (2 * sizeof(ws_listed))
#define XATTR_COST(name_len, size) (sizeof(ws_xattr) + (name_len) + 1 + (size) + 32)
/* Past this many bytes freed, the allocator gives free pages back to the system. */
#define TRIM_EVERY (4u << 20)

static void meta_add(ws_fs *fs, uint64_t bytes) {
        fs->meta_used += bytes;
}

static void meta_sub(ws_fs *fs, uint64_t bytes) {
        fs->meta_used = bytes < fs->meta_used ? fs->meta_used - bytes : 0;
        fs->freed_since_trim += bytes;
        if (fs->freed_since_trim >= TRIM_EVERY) {
                fs->freed_since_trim = 0;
                malloc_trim(0);
        }
}

/* 0 if bytes more fit in the budget, else -ENOSPC: what a full inode table answers. */
static int meta_room(ws_fs *fs, uint64_t bytes) {
        return fs->meta_used + bytes > fs->meta_max ? -ENOSPC : 0;
}

/* ---- tables by inode number ----
 * Open addressing with linear probing, each slot beginning with its number (0: empty),
 * deletion by backward shift (no tombstones: churn cannot fill a table), rehashed at a
 * quarter full: grown at half full, shrunk at an eighth, so that what is made and freed
 * gives the table's memory back too. The inode table (ws_ino_slot) and the listed table
 * (ws_listed) are such tables. */
static size_t ino_home(uint64_t ino, size_t cap) {
        return (size_t)((ino * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

static uint64_t slot_ino(const void *slots, size_t size, size_t i) {
        uint64_t ino;
        memcpy(&ino, (const char *)slots + i * size, sizeof(ino));
        return ino;
}

/* The slot holding ino, or the empty one where it would go. */
static size_t ino_probe(const void *slots, size_t size, size_t cap, uint64_t ino) {
        size_t i = ino_home(ino, cap);
        for (uint64_t k; (k = slot_ino(slots, size, i)) != ino && k != 0;)
                i = (i + 1) & (cap - 1);
        return i;
}

/* Empties slot i, moving back the entries of its probe run that would otherwise be cut
 * off from their home slot. */
static void ino_unslot(void *slots, size_t size, size_t cap, size_t i) {
        size_t mask = cap - 1;
        char *base = slots;
        for (size_t j = (i + 1) & mask; slot_ino(slots, size, j); j = (j + 1) & mask) {
                size_t home = ino_home(slot_ino(slots, size, j), cap);
                /* j's entry may move to i unless its home lies cyclically in (i, j]. */
                if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
                        memcpy(base + i * size, base + j * size, size);
                        i = j;
                }
        }
        memset(base + i * size, 0, size);
}

/* The n slots of old (old_cap of them, NULL for none) in a new table of at least
 * min_cap for n (a quarter full); old is freed. */
static void *ino_rehash(void *old, size_t old_cap, size_t size, size_t n, size_t min_cap, size_t *ret_cap) {
        size_t cap = min_cap;
        while (cap < 4 * (n + 1))
                cap *= 2;
        char *slots = xcalloc(cap, size);
        for (size_t i = 0; i < old_cap; i++) {
                uint64_t ino = slot_ino(old, size, i);
                if (ino)
                        memcpy(slots + ino_probe(slots, size, cap, ino) * size, (char *)old + i * size,
                               size);
        }
        free(old);
        *ret_cap = cap;
        return slots;
}

/* ---- the inode table and the name index ---- */

static ws_inode *inode_get(ws_fs *fs, uint64_t ino) {
        if (ino == 0 || !fs->cap_itab)
                return NULL;
        const ws_ino_slot *sl = &fs->itab[ino_probe(fs->itab, sizeof(ws_ino_slot), fs->cap_itab, ino)];
        return sl->ino ? sl->in : NULL;
}

static void itab_resize(ws_fs *fs) {
        fs->itab = ino_rehash(fs->itab, fs->cap_itab, sizeof(ws_ino_slot), fs->n_live, 1024, &fs->cap_itab);
}

static void itab_remove(ws_fs *fs, uint64_t ino) {
        size_t i = ino_probe(fs->itab, sizeof(ws_ino_slot), fs->cap_itab, ino);
        if (!fs->itab[i].ino)
                return;
        ino_unslot(fs->itab, sizeof(ws_ino_slot), fs->cap_itab, i);
        fs->n_live--;
        if (fs->cap_itab > 1024 && fs->n_live * 8 < fs->cap_itab)
                itab_resize(fs);
}

/* ---- directories listed, their records freed (ws_listed) ---- */

static void listed_resize(ws_fs *fs) {
        fs->listed =
                ino_rehash(fs->listed, fs->cap_listed, sizeof(ws_listed), fs->n_listed, 64, &fs->cap_listed);
}

/* Keeps what dir's record says of its entries' numbers, before the record is freed. */
static void listed_keep(ws_fs *fs, const ws_inode *dir) {
        if ((fs->n_listed + 1) * 2 > fs->cap_listed)
                listed_resize(fs);
        fs->listed[ino_probe(fs->listed, sizeof(ws_listed), fs->cap_listed, dir->ino)] = (ws_listed){
                .ino = dir->ino,
                .first_child = dir->first_child,
                .n_numbered = dir->n_numbered,
                .subdirs = (uint32_t)dir->subdirs,
        };
        fs->n_listed++;
        meta_add(fs, LISTED_COST);
}

/* The listed table's slot of ino, or NULL. */
static const ws_listed *listed_find(const ws_fs *fs, uint64_t ino) {
        if (!fs->cap_listed)
                return NULL;
        const ws_listed *l = &fs->listed[ino_probe(fs->listed, sizeof(ws_listed), fs->cap_listed, ino)];
        return l->ino ? l : NULL;
}

/* Empties ino's slot in the listed table, if it has one. */
static void listed_drop(ws_fs *fs, uint64_t ino) {
        const ws_listed *l = listed_find(fs, ino);
        if (!l)
                return;
        ino_unslot(fs->listed, sizeof(ws_listed), fs->cap_listed, (size_t)(l - fs->listed));
        fs->n_listed--;
        meta_sub(fs, LISTED_COST);
        if (fs->cap_listed > 64 && fs->n_listed * 8 < fs->cap_listed)
                listed_resize(fs);
}

/* A directory's record made again from its tree entry: the numbers listed_keep kept of
 * it, if it was listed. */
static void listed_take(ws_fs *fs, ws_inode *dir) {
        const ws_listed *l = listed_find(fs, dir->ino);
        if (!l)
                return;
        dir->numbered = true;
        dir->first_child = l->first_child;
        dir->n_numbered = l->n_numbered;
        dir->subdirs = l->subdirs;
        listed_drop(fs, dir->ino);
}

/* A record under number ino (one given before: load_names, or new: inode_new). */
static void inode_make(ws_fs *fs, uint64_t ino, uint32_t mode, uid_t uid, gid_t gid) {
        if ((fs->n_live + 1) * 2 > fs->cap_itab)
                itab_resize(fs);
        ws_inode *in = xmalloc(sizeof(*in));
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        *in = (ws_inode){
                .ino = ino, .mode = mode, .uid = uid, .gid = gid, .nlink = 1, .upper_fd = -1, .lower_fd = -1
        };
        in->atime = in->mtime = in->ctime = now;
        fs->itab[ino_probe(fs->itab, sizeof(ws_ino_slot), fs->cap_itab, ino)] =
                (ws_ino_slot){ .ino = ino, .in = in };
        fs->n_live++;
        meta_add(fs, INODE_COST);
}

static uint64_t inode_new(ws_fs *fs, uint32_t mode, uid_t uid, gid_t gid) {
        inode_make(fs, ++fs->last_ino, mode, uid, gid);
        return fs->last_ino;
}

/* ---- the fd cache ----
 * Every open file would otherwise hold a daemon fd (its upper file, or a loose object it
 * reads), and a command holding 20,000 files open took the daemon to its limit: accept
 * failed and nothing answered. Instead each Workspace keeps at most its share of the
 * daemon's fds, less a reserve for the control socket and the commands; past it the
 * least recently used are closed (an upper file's block count is kept) and reopened on
 * use. Only the mount's thread opens through the cache, so the fd of a read in flight
 * (ws_read_extent) is not closed under it. */
static size_t fd_cap(const ws_fs *fs) {
        struct rlimit rl;
        size_t limit =
                getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 4096;
        size_t reserve = limit / 4 < 1024 ? limit / 4 : 1024;
        size_t share = (limit - reserve) / (fs->fd_shares ? fs->fd_shares : 1);
        return share > 4 ? share : 4;
}

static void lru_unlink(ws_inode *in) {
        in->lru_prev->lru_next = in->lru_next;
        in->lru_next->lru_prev = in->lru_prev;
        in->lru_prev = in->lru_next = NULL;
}

static void lru_push(ws_fs *fs, ws_inode *in) {
        in->lru_next = fs->lru.lru_next;
        in->lru_prev = &fs->lru;
        fs->lru.lru_next->lru_prev = in;
        fs->lru.lru_next = in;
}

/* After in's fds changed: counts them, keeps it in the cache's list while it holds any,
 * most recently used first. */
static void fd_account(ws_fs *fs, ws_inode *in) {
        unsigned held = (in->upper_fd >= 0) + (in->lower_owned && in->lower_fd >= 0);
        fs->n_fds = fs->n_fds + held - in->fds_held;
        in->fds_held = held;
        if (in->lru_next)
                lru_unlink(in);
        if (held)
                lru_push(fs, in);
}

static void close_upper(ws_inode *in);

/* Closes in's fds (they are reopened on use). */
static void fd_evict(ws_fs *fs, ws_inode *in) {
        if (in->upper_fd >= 0)
                close_upper(in);
        if (in->lower_owned && in->lower_fd >= 0) {
                close(in->lower_fd);
                in->lower_fd = -1;
                in->lower_owned = false;
        }
        fd_account(fs, in);
}

/* Makes room for one more fd of keep's: closes the least recently used others' until
 * the Workspace is under cap. */
static void fd_room(ws_fs *fs, const ws_inode *keep, size_t cap) {
        while (fs->n_fds + 1 > cap && fs->lru.lru_prev != &fs->lru) {
                ws_inode *victim = fs->lru.lru_prev;
                if (victim == keep) {
                        if (victim->lru_prev == &fs->lru)
                                return;
                        victim = victim->lru_prev;
                }
                fd_evict(fs, victim);
        }
}

/* Opens a backing fd for in through open_fn, within the cache: when the daemon is out
 * of fds anyway (EMFILE, ENFILE), half the cache is closed and it tries once more; then
 * the error goes to the caller, as a local filesystem's open would. */
static int fd_open(ws_fs *fs, ws_inode *in, int (*open_fn)(ws_fs *fs, ws_inode *in, void *arg), void *arg) {
        fd_room(fs, in, fd_cap(fs));
        int fd = open_fn(fs, in, arg);
        if (fd == -EMFILE || fd == -ENFILE) {
                fd_room(fs, in, fs->n_fds / 2 + 1);
                fd = open_fn(fs, in, arg);
        }
        return fd;
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
        const ws_inode *dir = inode_get(fs, parent);
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
                if (sl->parent == parent && !strcmp(dir->ents[sl->index].name, name)) {
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
        if (!found)
                fs->live_slots++;
        fs->slots[i] = (ws_slot){ .parent = parent, .index = index, .state = 1 };
}

/* Rehashes without the removed slots, at a size for the live ones (a quarter full):
 * names made and removed leave nothing behind. */
static void index_grow(ws_fs *fs) {
        ws_slot *old = fs->slots;
        size_t old_cap = fs->cap_slots;
        fs->cap_slots = 1024;
        while (fs->cap_slots < 4 * (fs->live_slots + 1))
                fs->cap_slots *= 2;
        fs->slots = xcalloc(fs->cap_slots, sizeof(ws_slot));
        fs->used_slots = fs->live_slots = 0;
        for (size_t i = 0; i < old_cap; i++)
                if (old[i].state == 1) {
                        ws_dirent *d = &inode_get(fs, old[i].parent)->ents[old[i].index];
                        index_put(fs, old[i].parent, d->name, old[i].index);
                }
        free(old);
}

/* Frees slot i of the index; once the live slots fill under an eighth of it, a smaller
 * one is made (names removed leave nothing behind). */
static void index_remove(ws_fs *fs, size_t i) {
        fs->slots[i].state = 2;
        fs->live_slots--;
        if (fs->cap_slots > 1024 && fs->live_slots * 8 < fs->cap_slots)
                index_grow(fs);
}

/* The child's ino, or 0. Directories must be loaded. */
static uint64_t child_get(ws_fs *fs, uint64_t parent, const char *name, uint32_t *ret_index) {
        bool found;
        size_t i = index_find(fs, parent, name, &found);
        if (!found)
                return 0;
        if (ret_index)
                *ret_index = fs->slots[i].index;
        return inode_get(fs, parent)->ents[fs->slots[i].index].ino;
}

/* The directory dir_ino and its ancestors differ (or may) from their trees now. Stops at
 * the first one touched already: its ancestors are. */
static void mark_touched(ws_fs *fs, uint64_t dir_ino) {
        for (ws_inode *d = inode_get(fs, dir_ino); d && !d->touched;
             d = d->parent == d->ino ? NULL : inode_get(fs, d->parent))
                d->touched = true;
}

/* A file's data or mode changed, or may change without us from now on. */
static void file_touched(ws_fs *fs, const ws_inode *in) {
        if (!in->named_twice) /* else each directory of its names stays touched: sticky_file */
                mark_touched(fs, in->parent);
}

/* A file whose change would touch no directory of its names: one with two names (parent
 * knows only the latest), one the kernel writes through passthrough (even after its last
 * close, through a shared mapping), one open for writing. The directories of its names
 * stay touched through commits. */
static bool sticky_file(const ws_inode *in) {
        return in->named_twice || in->passed_written || in->writers;
}

/* A name in parent, loaded from its tree (load_names) or new (child_add). */
static void name_insert(ws_fs *fs, uint64_t parent, const char *name, uint64_t ino) {
        ws_inode *dir = inode_get(fs, parent);
        GROW(dir->ents, dir->cap_ents, dir->n_ents + 1);
        dir->ents[dir->n_ents] = (ws_dirent){ .name = xstrdup(name), .ino = ino };
        meta_add(fs, NAME_COST(strlen(name)));
        index_put(fs, parent, name, (uint32_t)dir->n_ents);
        dir->n_ents++;
        dir->live_ents++;
}

static void child_insert(ws_fs *fs, uint64_t parent, const char *name, uint64_t ino) {
        name_insert(fs, parent, name, ino);
        ws_inode *dir = inode_get(fs, parent);
        ws_inode *in = inode_get(fs, ino);
        in->parent = parent;
        if (S_ISDIR(in->mode))
                dir->subdirs++;
}

static void child_add(ws_fs *fs, uint64_t parent, const char *name, uint64_t ino) {
        ws_inode *in = inode_get(fs, ino);
        /* Its second name (ws_link counted it): from now on a change of it touches no
         * directory, so the first name's (parent, until now) is touched here and stays so. */
        if (!S_ISDIR(in->mode) && in->nlink > 1 && !in->named_twice) {
                in->named_twice = true;
                mark_touched(fs, in->parent);
        }
        child_insert(fs, parent, name, ino);
        inode_get(fs, parent)->as_loaded = false;
        mark_touched(fs, parent);
}

/* ---- entries without a record (ws_evicted) ---- */

static ws_evicted evicted_of(const lfs_entry *e) {
        return (ws_evicted){
                .id = e->id,
                .size = lfs_mode_is_dir(e->mode) ? 0 : e->size,
                .kind = e->mode == LFS_MODE_DIR    ? EVICTED_DIR
                        : e->mode == LFS_MODE_LINK ? EVICTED_LINK
                        : e->mode == LFS_MODE_EXEC ? EVICTED_EXEC
                                                   : EVICTED_FILE,
        };
}

/* The tree entry (but its name) that ev was made from. */
static lfs_entry evicted_entry(const ws_evicted *ev) {
        static const uint32_t tree_mode[] = {
                [EVICTED_FILE] = LFS_MODE_FILE,
                [EVICTED_EXEC] = LFS_MODE_EXEC,
                [EVICTED_LINK] = LFS_MODE_LINK,
                [EVICTED_DIR] = LFS_MODE_DIR,
        };
        return (lfs_entry){ .mode = tree_mode[ev->kind], .size = ev->size, .id = ev->id };
}

/* The array is sized by n_numbered, which only a load or the loss of all names moves:
 * only entries below it are evicted (evict_entry). */
static void evicted_free(ws_fs *fs, ws_inode *dir) {
        if (!dir->evicted)
                return;
        meta_sub(fs, dir->n_numbered * sizeof(ws_evicted));
        free(dir->evicted);
        dir->evicted = NULL;
}

/* The mode (its kind alone) of entry i of dir, with or without a record. */
static uint32_t entry_kind(ws_fs *fs, const ws_inode *dir, size_t i) {
        static const uint32_t kind_mode[] = {
                [EVICTED_FILE] = S_IFREG,
                [EVICTED_EXEC] = S_IFREG,
                [EVICTED_LINK] = S_IFLNK,
                [EVICTED_DIR] = S_IFDIR,
        };
        const ws_inode *in = inode_get(fs, dir->ents[i].ino);
        if (in)
                return in->mode & S_IFMT;
        assert(dir->evicted); /* as in restore_entry: a name without a record was evicted */
        return kind_mode[dir->evicted[i].kind];
}

/* Removed entries keep their place so that the offsets of a listing in progress stay
 * true; once they outnumber the live ones and no listing is open, the live entries move
 * down (their index slots follow) and the array shrinks. */
static void dir_compact(ws_fs *fs, uint64_t ino) {
        ws_inode *dir = inode_get(fs, ino);
        size_t dead = dir->n_ents - dir->live_ents;
        if (dir->open_count || dead < 64 || dead < dir->live_ents)
                return;
        size_t k = 0;
        for (size_t i = 0; i < dir->n_ents; i++) {
                if (!dir->ents[i].name)
                        continue;
                if (k != i) {
                        bool found;
                        dir->ents[k] = dir->ents[i];
                        fs->slots[index_find(fs, ino, dir->ents[k].name, &found)].index = (uint32_t)k;
                        /* An entry without a record takes what restores it along (k < i, so
                         * both are below n_numbered); once restored, it is no longer at the
                         * index its number gives, and only its directory's sweep lets its
                         * record go again (evict_idle). */
                        if (dir->evicted && i < dir->n_numbered)
                                dir->evicted[k] = dir->evicted[i];
                }
                k++;
        }
        dir->n_ents = k;
        dir->cap_ents = k ? k : 1;
        dir->ents = xrealloc(dir->ents, dir->cap_ents * sizeof(ws_dirent));
}

static void child_remove(ws_fs *fs, uint64_t parent, const char *name) {
        bool found;
        size_t i = index_find(fs, parent, name, &found);
        if (!found)
                return;
        ws_inode *dir = inode_get(fs, parent);
        ws_dirent *d = &dir->ents[fs->slots[i].index];
        if (S_ISDIR(entry_kind(fs, dir, fs->slots[i].index)))
                dir->subdirs--;
        if (!inode_get(fs, d->ino))
                dir->n_evicted--; /* its record was freed, and so is what restores it now */
        mark_touched(fs, parent);
        meta_sub(fs, NAME_COST(strlen(d->name)));
        free(d->name);
        d->name = NULL;
        dir->live_ents--;
        dir->as_loaded = false;
        index_remove(fs, i);
        dir_compact(fs, parent);
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
                in->lower_blocks = -1; /* read on the first stat (lower_blocks) */
        }
}

/* The record of entry i of dir, which evict_child freed, made again from what it kept:
 * the same number (the entry's), and what load_names would read from the tree. */
static void restore_entry(ws_fs *fs, ws_inode *dir, size_t i) {
        /* Only an entry evict_child freed lacks a record, and it kept its kind there. */
        assert(dir->evicted && i < dir->n_numbered);
        const ws_evicted *ev = &dir->evicted[i];
        lfs_entry e = evicted_entry(ev);
        uint64_t ino = dir->ents[i].ino;
        inode_make(fs, ino, 0, fs->owner, fs->group);
        ws_inode *in = inode_get(fs, ino);
        fill_from_entry(fs, in, &e);
        in->parent = dir->ino;
        if (ev->kind == EVICTED_DIR)
                listed_take(fs, in);
        /* The array stays when the last is made again: freed here, one name looked up and
         * forgotten in turn made and freed n_numbered of them each time. It goes with the
         * names (unload_dir, inode_free, subtree_gone). */
        dir->n_evicted--;
}

/* The inode named name in the loaded directory parent, with its record (made again if
 * evict_child freed it: the name's alone), or 0. */
static uint64_t child_made(ws_fs *fs, uint64_t parent, const char *name) {
        uint32_t index;
        uint64_t ino = child_get(fs, parent, name, &index);
        if (ino && !inode_get(fs, ino))
                restore_entry(fs, inode_get(fs, parent), index);
        return ino;
}

/* The directory's names, read from its tree the first time and again after unload_dir,
 * each with a record but those evict_child freed since (a lookup makes its own again:
 * ws_lookup). */
static int load_names(ws_fs *fs, uint64_t ino) {
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
        /* Loaded again after unload_dir: its names are those it had (their records went
         * only while none came or went), so each gets the number it had, and a record
         * still there is taken as it is. A tree sorts its names: the same names come in
         * the same order. Each entry without a record is as evict_child leaves one (40
         * bytes, against ~460 for a record): a lookup of its name makes its record, and
         * so does whatever needs that entry's (a change of its name, a walk that finds it
         * differs from the base: child_made, walk_entry), that entry's alone. */
        bool again = dir->numbered && dir->n_numbered == t.n;
        uint64_t first = again ? dir->first_child : fs->last_ino + 1;
        if (!again)
                fs->last_ino += t.n;
        dir->subdirs = 0; /* kept while unloaded; counted again below */
        if (t.n) {
                dir->evicted = xcalloc(t.n, sizeof(ws_evicted));
                meta_add(fs, t.n * sizeof(ws_evicted));
        }
        for (size_t i = 0; i < t.n; i++) {
                uint64_t child = first + i;
                ws_inode *in = again ? inode_get(fs, child) : NULL;
                if (in) {
                        child_insert(fs, ino, t.entries[i].name, child);
                        continue;
                }
                name_insert(fs, ino, t.entries[i].name, child);
                dir->evicted[i] = evicted_of(&t.entries[i]);
                dir->n_evicted++;
                dir->subdirs += lfs_mode_is_dir(t.entries[i].mode);
        }
        if (!dir->n_evicted)
                evicted_free(fs, dir);
        dir->numbered = dir->as_loaded = dir->sweep_due = true;
        dir->first_child = first;
        dir->n_numbered = (uint32_t)t.n;
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
static int space_for(ws_fs *fs, uint64_t bytes);

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

static int upper_create_fd(ws_fs *fs, ws_inode *in, void *arg) {
        (void)in;
        int fd = upper_create_once(fs, arg);
        if (fd < 0 && reaped_for_space(fs, -fd))
                fd = upper_create_once(fs, arg);
        return fd;
}

static int upper_create(ws_fs *fs, ws_inode *in, const char *name) {
        return fd_open(fs, in, upper_create_fd, (void *)name);
}

static int upper_reopen_fd(ws_fs *fs, ws_inode *in, void *arg) {
        (void)in;
        int fd = openat(fs->upper_fd, arg, O_RDWR | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Best effort: only ext2/3/4 know the flag; elsewhere the layout works the same. */
static void mark_top_directory(int dir_fd) {
        int flags = 0;
        if (ioctl(dir_fd, FS_IOC_GETFLAGS, &flags) == 0 && !(flags & FS_TOPDIR_FL)) {
                flags |= FS_TOPDIR_FL;
                (void)ioctl(dir_fd, FS_IOC_SETFLAGS, &flags);
        }
}

/* The inode's data changed: its hash, and any taken before, are stale. */
static void data_changed(ws_fs *fs, ws_inode *in) {
        in->hashed = false;
        in->data_gen = ++fs->data_gen;
        file_touched(fs, in);
}

static bool timespec_eq(struct timespec a, struct timespec b) {
        return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* A file opened for writing with passthrough is written by the kernel straight into its
 * upper file (write, truncate by O_TRUNC aside, a shared mapping's pages even after the
 * last close): its size, times and hash are taken from that file whenever they are
 * needed, when its ctime moved since they were last taken. */
static int upper_stat(ws_fs *fs, const ws_inode *in, struct stat *ret) {
        if (in->upper_fd >= 0)
                return fstat(in->upper_fd, ret) < 0 ? -errno : 0;
        char name[UPPER_NAME_MAX];
        upper_name(in->ino, name);
        return fstatat(fs->upper_fd, name, ret, 0) < 0 ? -errno : 0;
}

/* From the first open for writing with passthrough on, changes of the upper file are
 * looked for (passthrough_refresh); what it was before is the Workspace's already. */
static void passthrough_watch(ws_fs *fs, ws_inode *in) {
        struct stat st;
        if (in->passed_written)
                return;
        in->passed_written = true;
        file_touched(fs, in); /* and kept touched: commit_clean */
        if (upper_stat(fs, in, &st) == 0) /* else the first look takes the file as changed */
                in->passed_seen = st.st_ctim;
}

/* A file open for writing with passthrough: a write() of the kernel's may be under way in
 * it (ext4 moved the ctime when it began, and moves nothing when it ends), so no hash of
 * it is kept until its last writer is released (ws_release). */
static bool passed_writers(const ws_inode *in) {
        return in->backing_id > 0 && in->writers > 0;
}

/* Before an upper file written with passthrough is read for a hash or a commit: its dirty
 * pages are written back, which write-protects them in every shared mapping, so a write
 * through one after the read faults again and moves the ctime (a page written again
 * while still dirty would not: test_passthrough_mmap_rewrite.sh). Bounded by that file's
 * dirty pages; neither writeback nor read waits for a write() in flight (its inode lock). */
static void upper_writeback(int fd) {
        (void)sync_file_range(
                fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
}

/* The same by the upper file's name (one that goes meanwhile needs none). */
static void upper_writeback_at(ws_fs *fs, const char *name) {
        _cleanup_close_ int fd = openat(fs->upper_fd, name, O_RDONLY | O_CLOEXEC);
        if (fd >= 0)
                upper_writeback(fd);
}

static void passthrough_refresh(ws_fs *fs, ws_inode *in) {
        struct stat st;
        if (!in->passed_written || upper_stat(fs, in, &st) < 0 || timespec_eq(st.st_ctim, in->passed_seen))
                return;
        in->passed_seen = st.st_ctim;
        in->size = (uint64_t)st.st_size;
        in->mtime = st.st_mtim;
        in->ctime = st.st_ctim;
        in->upper_blocks = st.st_blocks;
        data_changed(fs, in);
}

/* What a file still in the Store takes on disk: a loose object's own blocks (holes and
 * all), else what its length takes in ext4's whole 4 KiB blocks, as its copy up would (a
 * packed blob's zeros are bytes in its pack). */
static blkcnt_t lower_blocks(ws_fs *fs, ws_inode *in) {
        blkcnt_t blocks = (blkcnt_t)((in->size + 4095) / 4096 * 8);
        if (!in->has_blob || in->size <= LFS_PACK_MAX_BLOB)
                return blocks;
        if (in->lower_blocks < 0) {
                struct stat obj;
                _cleanup_close_ int fd = lfs_object_open(fs->store, &in->blob, NULL);
                if (fd < 0 || fstat(fd, &obj) < 0)
                        return blocks;
                in->lower_blocks = obj.st_blocks;
        }
        return in->lower_blocks;
}

/* Whether directory in has its count of subdirectories from its tree's count in the Store
 * (one indexed lookup, no name loaded; taken now if it is stored): not for a directory
 * loaded (its names count), nor one whose tree has no stored count (a tree an older
 * layerfs wrote). */
static bool count_stored(ws_fs *fs, ws_inode *in) {
        uint64_t n;
        if (in->counted)
                return true;
        if (in->loaded || !in->has_tree || lfs_db_stored_subdirs(fs->store, &in->tree, &n, NULL) < 0)
                return false;
        in->subdirs = n;
        in->counted = true;
        return true;
}

static void stat_of(ws_fs *fs, uint64_t ino, struct stat *st) {
        ws_inode *in = inode_get(fs, ino);
        passthrough_refresh(fs, in);
        /* A directory's link count needs its subdirectories: kept up to date from its load
         * on (unload_dir and the listed table keep it); before that its tree's, which the
         * Store keeps beside the tree (one indexed lookup, whatever the directory's size:
         * loading its names to count them read and indexed a 100,000-entry directory for
         * its first stat). Without a stored count (a tree an older layerfs wrote), its
         * names (one tree read, no record of an entry), which also numbers it: the listed
         * table then keeps the count past a FORGET (a count from the tree alone went with
         * the record, and every stat after a FORGET read the tree again). */
        if (S_ISDIR(in->mode) && !in->numbered && !count_stored(fs, in))
                (void)load_names(fs, ino);
        in = inode_get(fs, ino);
        *st = (struct stat){ 0 };
        st->st_ino = ino;
        st->st_mode = in->mode;
        st->st_uid = in->uid;
        st->st_gid = in->gid;
        st->st_nlink = S_ISDIR(in->mode) && in->nlink ? 2 + in->subdirs : in->nlink; /* 0: removed */
        st->st_size = (off_t)in->size;
        st->st_blksize = 4096;
        st->st_blocks =
                S_ISREG(in->mode) && !in->upper ? lower_blocks(fs, in) : (blkcnt_t)((in->size + 511) / 512);
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

/* The set-id bits a write or truncate clears: S_ISGID only with group execute (without
 * it the bit marks mandatory locking, not a set-group-ID program). */
static uint32_t setid_bits(uint32_t mode) {
        return (mode & S_ISUID) | ((mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) ? S_ISGID : 0);
}

/* Clears them: whether any was set. */
static bool kill_setid(ws_inode *in) {
        uint32_t bits = S_ISREG(in->mode) ? setid_bits(in->mode) : 0;
        if (!bits)
                return false;
        in->mode &= ~bits;
        touch(in, false);
        return true;
}

/* ---- opening ---- */

static void *reaper_main(void *arg);
static void inode_free(ws_fs *fs, ws_inode *in);

int ws_open(lfs_store *store, const char *branch, const char *upper_dir, uid_t owner, gid_t group,
            ws_fs **ret, lfs_error **err) {
        lfs_id head;
        lfs_commit_info c;
        lfs_pin *pin = NULL;
        /* The head read and pinned with no gc between: the view reads its objects for as
         * long as it is mounted, whatever becomes of the branch. */
        int r = lfs_store_hold(store, err);
        if (r < 0)
                return r;
        if ((r = lfs_branch_head(store, branch, &head, err)) == 0 &&
            (r = lfs_db_get_commit(store, &head, &c, err)) == 0 &&
            (r = lfs_pin_new(store, &head, &pin, err)) < 0)
                lfs_commit_info_done(&c);
        lfs_store_release(store);
        if (r < 0)
                return r;
        int upper_fd = open(upper_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (upper_fd < 0) {
                lfs_commit_info_done(&c);
                lfs_pin_free(pin);
                return lfs_fail(err, LFS_FAILED, errno, "cannot open the Workspace's upper directory %s: %s",
                                upper_dir, strerror(errno));
        }
        ws_fs *fs = xcalloc(1, sizeof(*fs));
        pthread_mutex_init(&fs->lock, NULL);
        pthread_mutex_init(&fs->reap_lock, NULL);
        pthread_cond_init(&fs->reap_wake, NULL);
        pthread_cond_init(&fs->reap_idle, NULL);
        pthread_condattr_t monotonic;
        pthread_condattr_init(&monotonic);
        pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
        pthread_cond_init(&fs->freed, &monotonic);
        pthread_condattr_destroy(&monotonic);
        fs->store = store;
        fs->branch = xstrdup(branch);
        fs->base = head;
        fs->base_tree = c.tree;
        fs->pin = pin;
        fs->upper = xstrdup(upper_dir);
        fs->upper_fd = upper_fd;
        mark_top_directory(upper_fd);
        fs->owner = owner;
        fs->group = group;
        fs->meta_max = UINT64_MAX;
        fs->fd_shares = 1;
        fs->lru.lru_next = fs->lru.lru_prev = &fs->lru;
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
        pthread_cond_destroy(&fs->freed);
        pthread_mutex_destroy(&fs->reap_lock);
        /* The connection that held the registrations is gone, and they with it. */
        fs->backing = NULL;
        for (size_t i = 0; i < fs->cap_itab; i++)
                if (fs->itab[i].ino) {
                        ws_inode *in = fs->itab[i].in;
                        fs->itab[i].ino = 0; /* inode_free's removal finds nothing */
                        inode_free(fs, in);
                }
        free(fs->stale);
        lfs_pin_free(fs->pin);
        lfs_store_close(fs->work_store);
        free(fs->itab);
        free(fs->listed);
        free(fs->uppers);
        free(fs->nameless);
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

/* The directory inode with its names loaded (load_names; an entry's record is made
 * again by what needs it: child_made); or a negative errno. Making every record of the
 * directory for a change of one name kept them all until the unmount: one file made
 * among 100,000 held ~52 MB of records (bench/changed_dirs.sh). */
static int dir_ready(ws_fs *fs, uint64_t ino, ws_inode **ret) {
        ws_inode *dir = inode_get(fs, ino);
        if (!dir)
                return -ENOENT;
        if (!S_ISDIR(dir->mode))
                return -ENOTDIR;
        int r = load_names(fs, ino);
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

/* The inode named name in directory parent, with its record, or a negative errno. */
static int child_lookup(ws_fs *fs, uint64_t parent, const char *name, uint64_t *ret) {
        ws_inode *dir;
        int r = dir_ready(fs, parent, &dir);
        if (r < 0)
                return r;
        uint64_t ino = child_made(fs, parent, name);
        if (!ino)
                return -ENOENT;
        *ret = ino;
        return 0;
}

/* A lookup makes again only the record of its own name, if evict_child freed it: making
 * every freed record of the directory made lookups in a large directory under memory
 * pressure quadratic (each FORGET freed one, the next LOOKUP made them all again). */
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
static void let_go(ws_fs *fs, uint64_t ino);
static void backing_let_go(ws_fs *fs, ws_inode *in);

/* Inode numbers stay stable while mounted. A FORGET that leaves no reference of the
 * kernel's frees a file with no name left (its data too), and the records of what can
 * be loaded again from the Store as it is (let_go). */
void ws_forget(ws_fs *fs, uint64_t ino, uint64_t n) {
        lfs_fault_point("ws-forget"); /* the kernel let go of an inode; not yet counted */
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                if (!in)
                        break;
                in->nlookup = n < in->nlookup ? in->nlookup - n : 0;
                if (in->nlookup)
                        break;
                /* No open can come before a LOOKUP makes the inode again. */
                backing_let_go(fs, in);
                drop_if_gone(fs, ino);
                let_go(fs, ino);
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
static void list_nameless(ws_fs *fs, ws_inode *in);

/* Copies a file's lower data up, so that it can be changed; opens its upper fd. */
static int copy_up(ws_fs *fs, uint64_t ino) {
        return copy_up_data(fs, ino, true);
}

/* Copies len bytes of src from base to fd (new, empty) with copy_file_range; with sparse,
 * only src's data (SEEK_DATA/SEEK_HOLE), its holes left as holes of fd, whose length is
 * set at the end. Returns how many bytes were not copied: 0 once all are. */
static uint64_t copy_extents(int src, loff_t base, int fd, uint64_t len, bool sparse) {
        uint64_t pos = 0;
        errno = 0;
        while (pos < len) {
                uint64_t end = len;
                if (sparse) {
                        off_t data = lseek(src, base + (loff_t)pos, SEEK_DATA);
                        off_t hole = data < 0 ? -1 : lseek(src, data, SEEK_HOLE);
                        if (data < 0 && errno == ENXIO)
                                break; /* a hole to the end */
                        if (data < 0 || hole < 0) {
                                sparse = false; /* not offered: all of it is copied */
                        } else {
                                pos = (uint64_t)(data - base);
                                end = (uint64_t)(hole - base) < len ? (uint64_t)(hole - base) : len;
                        }
                }
                loff_t in_off = base + (loff_t)pos, out_off = (loff_t)pos;
                while (pos < end) {
                        ssize_t k = copy_file_range(src, &in_off, fd, &out_off, end - pos, 0);
                        if (k <= 0)
                                return len - pos;
                        pos += (uint64_t)k;
                }
        }
        return ftruncate(fd, (off_t)len) < 0 ? len : 0;
}

static int copy_up_once(ws_fs *fs, uint64_t ino, bool with_data) {
        ws_inode *in = inode_get(fs, ino);
        char name[UPPER_NAME_MAX];
        upper_name(ino, name);
        if (in->upper) {
                if (in->upper_fd >= 0) {
                        fd_account(fs, in); /* most recently used */
                        return 0;
                }
                int fd = fd_open(fs, in, upper_reopen_fd, name);
                if (fd < 0)
                        return fd;
                in->upper_fd = fd;
                fd_account(fs, in);
                return 0;
        }
        int r = space_for(fs, with_data && in->has_blob ? in->size : 0);
        if (r < 0)
                return r;
        int fd = upper_create(fs, in, name);
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
                /* A loose object keeps its holes in the upper file; a packed blob is small. */
                uint64_t left =
                        src < 0 ? in->size : copy_extents(src, (loff_t)loc.offset, fd, in->size, owned);
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
        GROW(fs->uppers, fs->cap_uppers, fs->n_uppers + 1);
        fs->uppers[fs->n_uppers++] = in->ino;
        list_nameless(fs, in); /* a removed file written through a handle */
        data_changed(fs, in);
        if (in->lower_owned) { /* reads go to the upper file from now on */
                close(in->lower_fd);
                in->lower_owned = false;
        }
        in->lower_fd = -1;
        fd_account(fs, in);
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

/* Inode numbers are never reused while mounted, and a file goes to the reaper only
 * with its record: a queued name never meets a newer file. */
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

/* ---- disk space ----
 * Upper files are written by root, whom ext4 lets into its reserved blocks; the command
 * would not be let in. A change that may take bytes more of the upper filesystem is
 * refused with ENOSPC unless they fit in its available blocks (f_bavail, one block
 * spare for the file's own metadata), so the reserve stays for root's records and
 * teardown. Space that unlinks freed and the reaper has not yet given back counts, as
 * on a local disk. One statfs per change that may allocate: ext4 answers it from
 * per-CPU counters, well below a FUSE round trip. */
static int space_for(ws_fs *fs, uint64_t bytes) {
        if (bytes == 0)
                return 0;
        for (bool drained = false;; drained = true) {
                struct statvfs sv;
                if (fstatvfs(fs->upper_fd, &sv) < 0)
                        return 0; /* cannot tell: the write itself decides */
                uint64_t block = sv.f_frsize ? sv.f_frsize : 4096;
                if ((uint64_t)sv.f_bavail > bytes / block + 1)
                        return 0;
                if (drained || !reap_drain(fs))
                        return -ENOSPC;
        }
}

/* Whether the upper filesystem has less than 1/16 of it, or 64 MiB, available. */
static bool space_short(ws_fs *fs) {
        struct statvfs sv;
        if (fstatvfs(fs->upper_fd, &sv) < 0)
                return true;
        uint64_t block = sv.f_frsize ? sv.f_frsize : 4096;
        uint64_t floor = sv.f_blocks / 16 > (64 << 20) / block ? sv.f_blocks / 16 : (64 << 20) / block;
        return (uint64_t)sv.f_bavail < floor;
}

void ws_set_concurrent_requests(ws_fs *fs, bool concurrent) {
        LOCK_GUARD(fs);
        fs->concurrent_requests = concurrent;
}

/* Upper files with no name left whose records are still there, not yet waited for: the
 * kernel's RELEASE or FORGET of each may be on its way. The list keeps only those. */
static size_t frees_pending(ws_fs *fs) {
        size_t kept = 0;
        for (size_t i = 0; i < fs->n_nameless; i++) {
                const ws_inode *in = inode_get(fs, fs->nameless[i]);
                if (in && in->nlink == 0 && !in->free_awaited)
                        fs->nameless[kept++] = fs->nameless[i];
        }
        fs->n_nameless = kept;
        return kept;
}

/* in is an upper file with no name left whose record stays: listed once for await_frees
 * (a scan of every upper file on each write-open made n creates on a short disk cost n^2
 * steps: 20,000 of them 12.7 s against 4.5). The list is cut to what is pending when
 * full, so it stays as long as what the kernel and the handles hold. */
static void list_nameless(ws_fs *fs, ws_inode *in) {
        if (in->nlink || !in->upper || in->nameless_listed)
                return;
        in->nameless_listed = true;
        if (fs->n_nameless == fs->cap_nameless)
                (void)frees_pending(fs);
        GROW(fs->nameless, fs->cap_nameless, fs->n_nameless + 1);
        fs->nameless[fs->n_nameless++] = in->ino;
}

#define AWAIT_FREES_MS 1000
/* On ext4 the space of a file is free once the close and the unlink that ended it
 * returned. Here the kernel sends the RELEASE of its last open and the FORGET of its
 * inode after those calls return, and the rings (one queue per CPU, each with its
 * thread, and FORGET on /dev/fuse) may serve a later open first. So a write-open on a
 * short disk first waits, at most AWAIT_FREES_MS, for those of nameless upper files,
 * then for the reaper. A file still held open by a command keeps its space, as on
 * ext4; it is waited for once (free_awaited). Called with fs->lock held and no record
 * in hand: the wait lets go of the lock. */
static void await_frees(ws_fs *fs) {
        if (!fs->concurrent_requests || !space_short(fs))
                return;
        struct timespec deadline = lfs_monotonic_deadline(AWAIT_FREES_MS);
        size_t pending = frees_pending(fs);
        if (pending > 0)
                log_line("a write-open on a short disk waits up to %d ms for the space of %zu removed "
                         "file(s), until the kernel lets go of them",
                         AWAIT_FREES_MS, pending);
        while (frees_pending(fs) > 0)
                if (pthread_cond_timedwait(&fs->freed, &fs->lock, &deadline) == ETIMEDOUT) {
                        log_line("removed files still held after %d ms: taken as open by a command",
                                 AWAIT_FREES_MS);
                        for (size_t i = 0; i < fs->n_nameless; i++) {
                                ws_inode *in = inode_get(fs, fs->nameless[i]);
                                if (in && in->nlink == 0)
                                        in->free_awaited = true;
                        }
                        break;
                }
        (void)reap_drain(fs);
}

typedef struct ws_range {
        off_t off, len;
} ws_range;
#define MAX_HOLES 64

/* The holes of fd in [off, end), past its end included: up to MAX_HOLES of them in ret
 * (-E2BIG if there are more), their total in *ret_bytes. */
static int holes_in(int fd, off_t off, off_t end, ws_range ret[MAX_HOLES], size_t *ret_n,
                    uint64_t *ret_bytes) {
        size_t n = 0;
        uint64_t bytes = 0;
        while (off < end) {
                off_t hole = lseek(fd, off, SEEK_HOLE);
                if (hole < 0 && errno != ENXIO)
                        return -errno;
                if (hole < 0)
                        hole = off; /* past the end: all hole */
                if (hole >= end)
                        break;
                off_t data = lseek(fd, hole, SEEK_DATA);
                if (data < 0 && errno != ENXIO)
                        return -errno;
                if (data < 0 || data > end)
                        data = end;
                if (n == MAX_HOLES)
                        return -E2BIG;
                ret[n++] = (ws_range){ .off = hole, .len = data - hole };
                bytes += (uint64_t)(data - hole);
                off = data;
        }
        *ret_n = n;
        *ret_bytes = bytes;
        return 0;
}

/* A write of size bytes at off: near a full disk, one over blocks the file already has
 * takes nothing more and goes ahead, as on ext4. */
static int space_for_write(ws_fs *fs, ws_inode *in, off_t off, size_t size) {
        int r = space_for(fs, size);
        if (r == 0 || (uint64_t)off + size > in->size)
                return r;
        ws_range holes[MAX_HOLES];
        size_t n;
        uint64_t bytes;
        if (holes_in(in->upper_fd, off, off + (off_t)size, holes, &n, &bytes) == 0)
                return space_for(fs, bytes);
        return r;
}

/* The registration of in's upper file goes, unless an open passed through still uses it
 * (the kernel keeps one backing file per inode while such an open lasts). */
static void backing_let_go(ws_fs *fs, ws_inode *in) {
        if (in->backing_id <= 0 || in->passed_opens > 0)
                return;
        if (fs->backing)
                fs->backing->close(fs->backing_data, in->backing_id);
        in->backing_id = 0;
}

/* Everything a record holds, then the record itself. */
static void inode_free(ws_fs *fs, ws_inode *in) {
        backing_let_go(fs, in);
        if (in->upper_fd >= 0)
                close(in->upper_fd);
        if (in->lower_owned && in->lower_fd >= 0)
                close(in->lower_fd);
        if (in->lru_next)
                lru_unlink(in);
        fs->n_fds -= in->fds_held;
        for (size_t j = 0; j < in->n_ents; j++)
                if (in->ents[j].name) {
                        meta_sub(fs, NAME_COST(strlen(in->ents[j].name)));
                        free(in->ents[j].name);
                }
        evicted_free(fs, in);
        free(in->ents);
        for (size_t j = 0; j < in->n_xattrs; j++) {
                meta_sub(fs, XATTR_COST(strlen(in->xattrs[j].name), in->xattrs[j].size));
                free(in->xattrs[j].name);
                free(in->xattrs[j].value);
        }
        free(in->xattrs);
        if (in->link) {
                meta_sub(fs, strlen(in->link) + 1);
                free(in->link);
        }
        itab_remove(fs, in->ino);
        meta_sub(fs, INODE_COST);
        free(in);
}

/* An inode with no name, no open handle and no reference of the kernel's can never be
 * reached again (numbers are not reused): its upper file goes to the reaper and its
 * record is freed, with its target and xattrs. */
static void drop_if_gone(ws_fs *fs, uint64_t ino) {
        ws_inode *in = inode_get(fs, ino);
        if (!in || in->nlink > 0 || ino == WS_ROOT_INO)
                return;
        if (in->open_count > 0 || in->nlookup > 0) {
                list_nameless(fs, in);
                return;
        }
        if (in->upper) {
                reap_later(fs, ino);
                pthread_cond_broadcast(&fs->freed);
        }
        inode_free(fs, in);
}

/* Whether in's record is what load_names would make again from its entry in its
 * directory's tree, with nothing the kernel or a handle holds: a file or symlink still
 * the Store's blob with its one name and the attributes of the load (any setattr, write
 * or xattr moves its ctime), never opened for writing or passed through; a directory
 * unloaded or never loaded, untouched since its tree. */
static bool rebuildable(const ws_fs *fs, const ws_inode *in) {
        if (in->nlookup || in->open_count || in->n_xattrs || in->named_twice || in->writers ||
            in->backing_id > 0 || in->passed_opens || in->passed_written || in->uid != fs->owner ||
            in->gid != fs->group || !timespec_eq(in->atime, fs->base_time) ||
            !timespec_eq(in->mtime, fs->base_time) || !timespec_eq(in->ctime, fs->base_time))
                return false;
        uint32_t perm = in->mode & 07777;
        if (S_ISDIR(in->mode))
                return !in->loaded && !in->touched && in->has_tree && perm == 0755;
        if (S_ISLNK(in->mode))
                return !in->upper && in->has_blob && in->nlink == 1 && perm == 0777;
        return S_ISREG(in->mode) && !in->upper && in->has_blob && in->nlink == 1 &&
               (perm == 0644 || perm == 0755);
}

/* Entry i of dir, if its record can go. The daemon's memory follows the kernel's cache.
 * The record of an entry the kernel let go of goes when it is what restore_entry would
 * make again from its blob or tree id, kind and size (rebuildable: the attributes of
 * the load), whatever else came or went in its directory since: its name and number
 * stay in the directory (n_evicted), with what its tree entry says (40 bytes in the
 * directory's evicted, by the entry's index, against ~460 for the record). A lookup of
 * its name makes it again alone (restore_entry), and so does a change of its name
 * (child_made) or a status that finds it differs from the base (walk_entry). A
 * directory that was listed keeps its record (the numbers of its entries: unload_dir).
 * Until 2026-12-07 the directory had to have the names of its load (as_loaded), and a
 * change of one name made every record of it again (load_dir): a change in each of many
 * big directories held a record for every entry of each until the unmount. The array
 * covers the indexes of the load: the names made since are never rebuildable (new, or
 * renamed in: their ctime moved), and dir_compact only moves names down. */
static void evict_entry(ws_fs *fs, ws_inode *dir, size_t i) {
        ws_inode *in = i < dir->n_ents && dir->ents[i].name ? inode_get(fs, dir->ents[i].ino) : NULL;
        if (!in || in->parent != dir->ino || i >= dir->n_numbered || !rebuildable(fs, in))
                return;
        if (!dir->evicted) {
                dir->evicted = xcalloc(dir->n_numbered, sizeof(ws_evicted));
                meta_add(fs, dir->n_numbered * sizeof(ws_evicted));
        }
        lfs_entry e = {
                .mode = S_ISDIR(in->mode)   ? LFS_MODE_DIR
                        : S_ISLNK(in->mode) ? LFS_MODE_LINK
                        : in->mode & 0100   ? LFS_MODE_EXEC
                                            : LFS_MODE_FILE,
                .size = in->size,
                .id = S_ISDIR(in->mode) ? in->tree : in->blob,
        };
        dir->evicted[i] = evicted_of(&e);
        dir->n_evicted++;
        if (in->numbered)
                listed_keep(fs, in);
        inode_free(fs, in);
}

/* The record in, whose entry the kernel let go of: found in its directory by its number
 * (first_child + the index of its load: a record does not know its name), where it
 * still is unless dir_compact moved it (the directory's sweep finds those: evict_idle). */
static void evict_child(ws_fs *fs, ws_inode *in) {
        /* parent may be gone: a file with two names keeps the directory of its latest,
         * which that name and then the directory may leave (named_twice). */
        ws_inode *dir = inode_get(fs, in->parent);
        if (!dir || in->parent == in->ino || !dir->loaded || in->ino < dir->first_child ||
            in->ino - dir->first_child >= dir->n_ents ||
            dir->ents[in->ino - dir->first_child].ino != in->ino)
                return;
        evict_entry(fs, dir, in->ino - dir->first_child);
}

/* Every entry of directory ino the kernel does not hold, after records were made of
 * many of them (a listing, a walk of status or commit). */
static void evict_idle(ws_fs *fs, uint64_t ino) {
        ws_inode *dir = inode_get(fs, ino);
        if (!dir || !dir->loaded)
                return;
        for (size_t i = 0; i < dir->n_ents; i++)
                evict_entry(fs, dir, i);
        dir->sweep_due = false;
}

/* Once the kernel holds none of a directory's entries and each record left can be made
 * again as it is, the directory goes back to unloaded, as before its first listing: its
 * names and index slots go too. Its record stays (with the numbers of its entries and
 * its count of subdirectories), and so do those of its subdirectories that were listed
 * (they keep their own entries' numbers): a lookup loads it again with the same inode
 * numbers. Only a directory untouched and with the names of its tree (as_loaded) goes:
 * status and commit compare it by its tree id, as one never listed. The look for an
 * entry that keeps it starts where the last one stopped and goes both ways from there
 * (the kernel forgets a directory's entries in either order; looking upwards alone, a
 * window of names looked up and forgotten in descending order cost the directory's size
 * once a window), so forgetting a directory's entries one by one costs each about one
 * step. */
static bool unload_dir(ws_fs *fs, uint64_t ino) {
        ws_inode *dir = inode_get(fs, ino);
        if (!dir || !dir->loaded || !dir->as_loaded || dir->touched || dir->open_count)
                return false;
        size_t n = dir->n_ents, from = dir->unload_from < n ? dir->unload_from : 0;
        for (size_t k = 0; k < n; k++) {
                /* from, from - 1, from + 1, from - 2, ...: each index once */
                size_t i = k & 1 ? (from + n - (k + 1) / 2) % n : (from + k / 2) % n;
                const ws_inode *in = inode_get(fs, dir->ents[i].ino);
                if (in && !rebuildable(fs, in)) {
                        dir->unload_from = (uint32_t)i;
                        return false;
                }
        }
        for (size_t i = 0; i < n; i++) {
                ws_dirent *d = &dir->ents[i];
                bool found;
                size_t slot = index_find(fs, ino, d->name, &found);
                if (found)
                        index_remove(fs, slot);
                ws_inode *child = inode_get(fs, d->ino);
                if (child && child->numbered)
                        listed_keep(fs, child);
                if (child)
                        inode_free(fs, child);
                meta_sub(fs, NAME_COST(strlen(d->name)));
                free(d->name);
        }
        evicted_free(fs, dir);
        free(dir->ents);
        dir->ents = NULL;
        dir->n_ents = dir->cap_ents = dir->live_ents = 0;
        dir->unload_from = dir->n_evicted = 0;
        dir->loaded = dir->sweep_due = false;
        return true;
}

/* The kernel let go of ino (FORGET): its record if the Store can give it again, a
 * directory's entries, and its directory (and theirs up the tree) once nothing in it is
 * held, unless the kernel holds that directory itself: its next LOOKUP would load its
 * names again from the tree (its own FORGET unloads it). */
static void let_go(ws_fs *fs, uint64_t ino) {
        ws_inode *in = inode_get(fs, ino);
        if (!in)
                return;
        uint64_t parent = in->parent;
        if (S_ISDIR(in->mode) && !unload_dir(fs, ino))
                evict_idle(fs, ino);
        if (parent == ino)
                return;
        evict_child(fs, in); /* in may be gone */
        const ws_inode *up = inode_get(fs, parent); /* may be gone too: evict_child */
        if (up && up->sweep_due)
                evict_idle(fs, parent);
        for (const ws_inode *d = inode_get(fs, parent); d && !d->nlookup && unload_dir(fs, d->ino);
             d = inode_get(fs, d->parent))
                if (d->parent == d->ino)
                        break;
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
                passthrough_refresh(fs, in);
                /* A write passed through clears no set-id bit (the kernel writes the upper
                 * file without us): a file open so for writing cannot become set-id (and
                 * the open of such a writer cleared them: do_open). */
                if ((to_set & WS_SET_MODE) && setid_bits(attr->st_mode) && in->backing_id > 0 &&
                    in->writers > 0) {
                        r = -ETXTBSY;
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
                        data_changed(fs, in);
                        if (may_close_upper(in)) {
                                close_upper(in);
                                fd_account(fs, in);
                        }
                        touch(in, true);
                        passthrough_refresh(fs, in); /* our ftruncate: the times set below stay */
                }
                if ((to_set & WS_SET_KILL_SUIDGID) ||
                    ((to_set & (WS_SET_UID | WS_SET_GID)) && !(to_set & WS_SET_MODE)))
                        kill_setid(in);
                if (to_set & WS_SET_MODE) {
                        in->mode = (in->mode & S_IFMT) | (attr->st_mode & 07777);
                        if (!S_ISDIR(in->mode))
                                file_touched(fs, in);
                }
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

int ws_kill_setid(ws_fs *fs, uint64_t ino) {
        int r;
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                r = !in ? -ENOENT : kill_setid(in) ? 1 : 0;
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
        meta_add(fs, strlen(data) + 1);
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

/* A new entry in parent: checks the name, that it is free, and that the Workspace's
 * budget has room for it and extra bytes more (its record, a symlink's target). */
static int new_entry_ok(ws_fs *fs, uint64_t parent, const char *name, uint64_t extra) {
        ws_inode *dir;
        int r = check_name(name);
        if (r < 0 || (r = dir_ready(fs, parent, &dir)) < 0)
                return r;
        /* Removed (rmdir, or a merged commit: subtree_gone) while a cwd or an open holds
         * it: nothing below could be reached or committed. The kernel refuses it after an
         * rmdir, not after a merge it only heard of as a name gone. */
        if (!dir->nlink)
                return -ENOENT;
        if (child_get(fs, parent, name, NULL))
                return -EEXIST;
        return meta_room(fs, NAME_COST(strlen(name)) + extra);
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
                if ((r = new_entry_ok(fs, parent, name, INODE_COST)) < 0)
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
                if ((r = new_entry_ok(fs, parent, name, INODE_COST)) < 0)
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
                size_t len = strlen(target);
                if ((r = new_entry_ok(fs, parent, name, INODE_COST + len + 1)) < 0)
                        break;
                uint64_t ino = make_inode(fs, who, parent, S_IFLNK | 0777);
                ws_inode *in = inode_get(fs, ino);
                in->link = xstrdup(target);
                in->size = len;
                meta_add(fs, len + 1);
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
                /* A file without a name (unlinked, or below a directory a merged commit
                 * removed) stays without one, as on ext4: the kernel, which may still count
                 * a name it was not told is gone, asks. */
                if (!in->nlink) {
                        r = -ENOENT;
                        break;
                }
                if ((r = new_entry_ok(fs, parent, name, 0)) < 0)
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
                drop_if_gone(fs, ino);
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
                /* Into or out of a removed directory (new_entry_ok says why). */
                if (!a->nlink || !b->nlink) {
                        r = -ENOENT;
                        break;
                }
                if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
                        r = -EINVAL;
                        break;
                }
                uint64_t src = child_made(fs, parent, name);
                uint64_t dst = child_made(fs, new_parent, new_name);
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

static uint64_t handle_new(ws_fs *fs, uint64_t ino, bool writable) {
        size_t i = 0;
        while (i < fs->n_handles && fs->handles[i].in_use)
                i++;
        if (i == fs->n_handles) {
                GROW(fs->handles, fs->cap_handles, fs->n_handles + 1);
                fs->n_handles++;
        }
        fs->handles[i] = (ws_handle){ .ino = ino, .in_use = true, .writable = writable };
        inode_get(fs, ino)->open_count++;
        inode_get(fs, ino)->writers += writable;
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

/* Whether the new open of in passes through to its upper file, and under which id: 0
 * (served by us) or the id. The kernel keeps one mode per inode while any open lasts (a
 * second backing file or an open served by us next to passed ones fails with EIO), so
 * an inode already open keeps the mode its first open got. Only upper files pass: a
 * backing file is opened by the kernel with the open's own flags and our credentials, so
 * a Store object given for a read could be opened for writing by a later open of the
 * same inode (docs/workspace.md). Nor do set-id files, nor small files opened only for
 * reading (WS_PASSTHROUGH_READ_MIN) unless a registration of theirs is kept (then the
 * open costs us nothing). */
static int backing_for(ws_fs *fs, ws_inode *in, bool writable) {
        if (!fs->backing || !S_ISREG(in->mode) || !in->upper)
                return 0;
        /* The kernel's passed-through write clears no set-id bit: such a file's writes
         * come to us (ws_kill_setid), so a registration kept from before it became set-id
         * goes while no open uses it. */
        if (setid_bits(in->mode))
                backing_let_go(fs, in);
        if (in->backing_id > 0) /* kept, or in use: no registration to pay */
                return in->backing_id;
        if (!writable && in->size < WS_PASSTHROUGH_READ_MIN)
                return 0;
        if (setid_bits(in->mode))
                return 0;
        if (in->open_count > 0 || copy_up(fs, in->ino) < 0)
                return 0;
        in = inode_get(fs, in->ino);
        int id = fs->backing->open(fs->backing_data, in->upper_fd, fs->owner, fs->group);
        if (id <= 0) /* the transport said why in the log: this open is served by us */
                return 0;
        in->backing_id = id;
        return id;
}

/* Whether an open with flags may write. */
static bool open_writes(int flags) {
        return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
}

static int open_inode(ws_fs *fs, uint64_t ino, int flags, uint64_t *ret_fh, int *ret_backing) {
        ws_inode *in = inode_get(fs, ino);
        if (!in)
                return -ENOENT;
        if (S_ISDIR(in->mode))
                return -EISDIR;
        int acc = flags & O_ACCMODE;
        if (open_writes(flags)) {
                int r = copy_up_data(fs, ino, !(flags & O_TRUNC));
                if (r < 0)
                        return r;
                in = inode_get(fs, ino);
                if ((flags & O_TRUNC) && in->size) {
                        if (ftruncate(in->upper_fd, 0) < 0)
                                return -errno;
                        in->size = 0;
                        data_changed(fs, in);
                        touch(in, true);
                }
        }
        int backing = ret_backing ? backing_for(fs, in, acc != O_RDONLY) : 0;
        in = inode_get(fs, ino);
        /* The kernel's writes to the upper file cannot wait for the reaper on ENOSPC as
         * ours do (reaped_for_space): on a disk short of space, what unlinks freed is
         * given back first. */
        if (backing > 0 && acc != O_RDONLY && space_short(fs))
                (void)reap_drain(fs);
        if (backing > 0 && acc != O_RDONLY)
                passthrough_watch(fs, in);
        *ret_fh = handle_new(fs, ino, acc != O_RDONLY);
        if (backing > 0) {
                fs->handles[*ret_fh - 1].passed = true;
                in->passed_opens++;
        }
        if (ret_backing)
                *ret_backing = backing;
        return 0;
}

int ws_open_file(ws_fs *fs, uint64_t ino, int flags, uint64_t *ret_fh, int *ret_backing) {
        int r;
        LOCK_GUARD(fs);
        do {
                if (open_writes(flags))
                        await_frees(fs);
                r = open_inode(fs, ino, flags, ret_fh, ret_backing);
        } while (0);
        return r;
}

int ws_create(ws_fs *fs, const ws_caller *who, uint64_t parent, const char *name, mode_t mode, int flags,
              struct stat *ret, uint64_t *ret_fh, int *ret_backing) {
        int r;
        LOCK_GUARD(fs);
        do {
                if (open_writes(flags))
                        await_frees(fs);
                if ((r = new_entry_ok(fs, parent, name, INODE_COST)) < 0)
                        break;
                uint64_t ino = make_inode(fs, who, parent, S_IFREG | (mode & 07777));
                if ((r = copy_up(fs, ino)) < 0) {
                        inode_get(fs, ino)->nlink = 0; /* never named: freed */
                        drop_if_gone(fs, ino);
                        break;
                }
                child_add(fs, parent, name, ino);
                if ((r = open_inode(fs, ino, flags & ~O_TRUNC, ret_fh, ret_backing)) < 0)
                        break;
                entry_of(fs, ino, ret);
        } while (0);
        return r;
}

static int lower_open_fd(ws_fs *fs, ws_inode *in, void *arg) {
        (void)arg;
        errno = 0;
        int fd = lfs_object_open(fs->store, &in->blob, NULL);
        return fd >= 0 ? fd : errno == EMFILE || errno == ENFILE ? -errno : -EIO;
}

/* Where a read of a lower file goes: found on the first read while it is open. */
static int lower_source(ws_fs *fs, ws_inode *in) {
        if (in->lower_fd >= 0) {
                fd_account(fs, in); /* most recently used */
                return 0;
        }
        lfs_object_loc loc = { .fd = -1 };
        if (lfs_object_locate(fs->store, &in->blob, &loc, NULL) < 0)
                return -EIO;
        if (loc.fd >= 0) {
                in->lower_fd = loc.fd;
                in->lower_offset = loc.offset;
                return 0;
        }
        int fd = fd_open(fs, in, lower_open_fd, NULL);
        if (fd < 0)
                return fd;
        in->lower_fd = fd;
        in->lower_offset = 0;
        in->lower_owned = true;
        fd_account(fs, in);
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
                        if ((r = copy_up(fs, h->ino)) < 0) /* reopened if the cache closed it */
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
                if ((r = lower_source(fs, in)) < 0)
                        break;
                *ret = (ws_extent){ .fd = in->lower_fd,
                                    .offset = (off_t)in->lower_offset + off,
                                    .length = size };
        } while (0);
        return r;
}

int ws_lseek(ws_fs *fs, uint64_t fh, off_t off, int whence, off_t *ret) {
        if (whence != SEEK_DATA && whence != SEEK_HOLE)
                return -EINVAL; /* the kernel answers the others itself */
        /* The fd is duplicated under the lock and asked without it: ext4's SEEK_DATA waits
         * for the file's inode lock, which a write stalled in the kernel holds (passthrough:
         * test_passthrough_stalled_write.sh), and must not stall the Workspace with it. */
        _cleanup_close_ int fd = -1;
        uint64_t base = 0, size = UINT64_MAX; /* an upper file: its own length bounds it */
        {
                LOCK_GUARD(fs);
                ws_handle *h;
                int r = handle_of(fs, fh, &h);
                if (r < 0)
                        return r;
                if (off < 0)
                        return -ENXIO;
                ws_inode *in = inode_get(fs, h->ino);
                /* An upper file is asked itself, not bounded by in->size: a write with
                 * passthrough lengthens it behind us (test_workspace_lseek.sh). */
                if (in->upper) {
                        if ((r = copy_up(fs, h->ino)) < 0) /* reopened if the cache closed it */
                                return r;
                        fd = fcntl(in->upper_fd, F_DUPFD_CLOEXEC, 3);
                } else if ((size = in->size) <= (uint64_t)off) {
                        return -ENXIO;
                } else if (in->has_blob) {
                        if ((r = lower_source(fs, in)) < 0)
                                return r;
                        fd = fcntl(in->lower_fd, F_DUPFD_CLOEXEC, 3);
                        base = in->lower_offset;
                } else if (whence == SEEK_DATA) {
                        return -ENXIO; /* no content: all hole */
                } else {
                        *ret = off;
                        return 0;
                }
                if (fd < 0)
                        return -errno;
        }
        /* A blob in a pack is bytes between others': no hole of its own, and the next one
         * found past its end is its end. */
        off_t at = lseek(fd, (off_t)base + off, whence);
        if (at < 0)
                return -errno;
        uint64_t found = (uint64_t)at - base;
        if (whence == SEEK_DATA && found >= size)
                return -ENXIO;
        *ret = (off_t)(found > size ? size : found);
        return 0;
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
                if ((r = space_for_write(fs, in, off, size)) < 0)
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
                data_changed(fs, in);
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
                if (!in->upper)
                        break;
                if ((r = copy_up(fs, h->ino)) < 0) /* reopened if the cache closed it */
                        break;
                if ((datasync ? fdatasync(in->upper_fd) : fsync(in->upper_fd)) < 0)
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
                /* What may be allocated: the holes of the range. ext4 keeps what it
                 * allocated before it failed, so on failure they are punched again (holes
                 * before, they hold no data) and the size put back. */
                bool allocates = !(mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_COLLAPSE_RANGE));
                ws_range holes[MAX_HOLES];
                size_t n_holes = 0;
                uint64_t hole_bytes = (uint64_t)len;
                off_t end;
                bool undo = allocates && off >= 0 && len > 0 && !__builtin_add_overflow(off, len, &end) &&
                            holes_in(in->upper_fd, off, end, holes, &n_holes, &hole_bytes) == 0;
                if (allocates && (r = space_for(fs, hole_bytes)) < 0)
                        break;
                uint64_t size_before = in->size;
                r = fallocate(in->upper_fd, mode, off, len);
                if (r < 0 && reaped_for_space(fs, errno))
                        r = fallocate(in->upper_fd, mode, off, len);
                if (r < 0) {
                        r = -errno;
                        for (size_t i = 0; undo && i < n_holes; i++)
                                (void)fallocate(in->upper_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                                holes[i].off, holes[i].len);
                        struct stat st;
                        if (undo && fstat(in->upper_fd, &st) == 0 && (uint64_t)st.st_size > size_before)
                                (void)!ftruncate(in->upper_fd, (off_t)size_before);
                        break;
                }
                struct stat st;
                if (fstat(in->upper_fd, &st) == 0)
                        in->size = (uint64_t)st.st_size;
                data_changed(fs, in);
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
                h->in_use = false;
                fs->open_files--;
                ws_inode *in = inode_get(fs, ino);
                in->open_count--;
                in->writers -= h->writable;
                /* A write() through it ended before this RELEASE, maybe after the last look
                 * (which then saw the ctime it moved when it began): looked at again. */
                if (h->passed && h->writable && in->writers == 0)
                        data_changed(fs, in);
                /* The kernel let go of the inode's backing file with its last open (before
                 * this RELEASE was sent); the id stays for the next open until the kernel
                 * forgets the inode (ws_forget), unless it did already. */
                if (h->passed && --in->passed_opens == 0 && in->nlookup == 0)
                        backing_let_go(fs, in);
                /* A reader changed nothing: whatever a mapping writes is looked for when it
                 * is needed (stat, setattr, status, commit), and a look here would cost a
                 * reader of a small file passed through one fstatat of its own. */
                if (h->writable)
                        passthrough_refresh(fs, in);
                if (in->open_count == 0) {
                        fd_evict(fs, in);
                        in->lower_fd = -1; /* a pack's, borrowed */
                }
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

/* A listing holds its directory: removed entries keep their offsets until it ends. */
int ws_opendir(ws_fs *fs, uint64_t ino) {
        int r = 0;
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                if (!in)
                        r = -ENOENT;
                else if (!S_ISDIR(in->mode))
                        r = -ENOTDIR;
                else
                        in->open_count++;
        } while (0);
        return r;
}

void ws_releasedir(ws_fs *fs, uint64_t ino) {
        LOCK_GUARD(fs);
        do {
                ws_inode *in = inode_get(fs, ino);
                if (!in || !in->open_count)
                        break;
                in->open_count--;
                dir_compact(fs, ino);
                drop_if_gone(fs, ino);
        } while (0);
}

/* Whether READDIRPLUS answers entry i of dir (its record in, or NULL) as a lookup: a file,
 * or a directory whose link count needs none of its names (loaded already, numbered by
 * the listed table, or counted in the Store; an entry without a record is made again for
 * the Store's count, and freed again if there is none). Others (a tree an older layerfs
 * wrote) are left to a LOOKUP of their own, so that a listing loads no subdirectory. */
static bool plus_with_entry(ws_fs *fs, ws_inode *dir, size_t i, ws_inode *in, uint32_t kind) {
        if (in)
                return !S_ISDIR(in->mode) || in->loaded || in->numbered || count_stored(fs, in);
        if (!S_ISDIR(kind) || listed_find(fs, dir->ents[i].ino))
                return true;
        restore_entry(fs, dir, i);
        in = inode_get(fs, dir->ents[i].ino);
        if (count_stored(fs, in))
                return true;
        evict_entry(fs, dir, i);
        return false;
}

/* The listing of ino from offset, to fill (plain) or fill_plus (with attributes and
 * lookups counted). Only the entries given make their records again, and only those
 * READDIRPLUS answers as lookups (plus_with_entry): making every record evict_child freed
 * on each chunk made listing a big directory under memory pressure quadratic (each
 * FORGET between chunks freed some). */
static int readdir_walk(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_fn fill, ws_fill_plus_fn fill_plus,
                        void *userdata) {
        ws_inode *dir;
        int r = dir_ready(fs, ino, &dir);
        if (r < 0)
                return r;
        struct stat st = { 0 };
        /* Offsets: 1 ".", 2 "..", then 3 + index in ents (stable across removals). */
        for (offset = offset < 0 ? 0 : offset; offset < 2; offset++) {
                st = (struct stat){ .st_ino = offset == 0 ? ino : dir->parent, .st_mode = S_IFDIR };
                const char *name = offset == 0 ? "." : "..";
                if (!(fill ? fill(userdata, name, &st, offset + 1)
                           : fill_plus(userdata, name, &st, offset + 1, false)))
                        return 0;
        }
        for (size_t i = (size_t)offset - 2; i < dir->n_ents; i++) {
                ws_dirent *d = &dir->ents[i];
                if (!d->name)
                        continue;
                st = (struct stat){ .st_ino = d->ino, .st_mode = entry_kind(fs, dir, i) };
                if (fill) {
                        if (!fill(userdata, d->name, &st, (off_t)i + 3))
                                break;
                        continue;
                }
                ws_inode *in = inode_get(fs, d->ino);
                bool with_entry = plus_with_entry(fs, dir, i, in, st.st_mode);
                if (with_entry) {
                        if (!inode_get(fs, d->ino))
                                restore_entry(fs, dir, i);
                        stat_of(fs, d->ino, &st);
                }
                if (!fill_plus(userdata, d->name, &st, (off_t)i + 3, with_entry)) {
                        if (with_entry && !in) /* not given: freed again, as it was */
                                evict_entry(fs, dir, i);
                        break;
                }
                if (with_entry)
                        inode_get(fs, d->ino)->nlookup++;
                dir = inode_get(fs, ino); /* the same record: stat_of loads no names here */
        }
        return 0;
}

int ws_readdir(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_fn fill, void *userdata) {
        int r;
        LOCK_GUARD(fs);
        do {
                r = readdir_walk(fs, ino, offset, fill, NULL, userdata);
        } while (0);
        return r;
}

int ws_readdirplus(ws_fs *fs, uint64_t ino, off_t offset, ws_fill_plus_fn fill, void *userdata) {
        int r;
        LOCK_GUARD(fs);
        do {
                r = readdir_walk(fs, ino, offset, NULL, fill, userdata);
        } while (0);
        return r;
}

/* What the Workspace's writer can use: the upper filesystem less its root reserve
 * (space_for keeps the writer out of it), and as many inodes as the budget has room for
 * (counted as records with a 32-byte name). */
int ws_statfs(ws_fs *fs, struct statvfs *ret) {
        reap_drain(fs); /* df right after rm shows the space freed, as on a local disk */
        struct statvfs sv;
        if (fstatvfs(fs->upper_fd, &sv) < 0)
                return -errno;
        sv.f_blocks -= sv.f_bfree - sv.f_bavail;
        sv.f_bfree = sv.f_bavail;
        LOCK_GUARD(fs);
        if (fs->meta_max != UINT64_MAX) {
                uint64_t unit = INODE_COST + NAME_COST(32);
                uint64_t files = fs->meta_max / unit;
                uint64_t left = fs->meta_used < fs->meta_max ? (fs->meta_max - fs->meta_used) / unit : 0;
                if (files < sv.f_files)
                        sv.f_files = (fsfilcnt_t)files;
                if (left < sv.f_ffree)
                        sv.f_ffree = (fsfilcnt_t)left;
                if (left < sv.f_favail)
                        sv.f_favail = (fsfilcnt_t)left;
        }
        *ret = sv;
        return 0;
}

void ws_set_limits(ws_fs *fs, uint64_t memory, unsigned fd_shares) {
        LOCK_GUARD(fs);
        fs->meta_max = memory ? memory : UINT64_MAX;
        fs->fd_shares = fd_shares ? fd_shares : 1;
}

void ws_set_passthrough(ws_fs *fs, const ws_backing_ops *ops, void *userdata) {
        LOCK_GUARD(fs);
        fs->backing = ops;
        fs->backing_data = userdata;
}

void ws_get_usage(ws_fs *fs, ws_usage *ret) {
        LOCK_GUARD(fs);
        *ret = (ws_usage){ .metadata_bytes = fs->meta_used, .inodes = fs->n_live };
}

int ws_open_writers(ws_fs *fs, uint64_t **ret, size_t *ret_n) {
        LOCK_GUARD(fs);
        uint64_t *inos = xmalloc((fs->n_handles + 1) * sizeof(uint64_t));
        size_t n = 0;
        for (size_t i = 0; i < fs->n_handles; i++) {
                const ws_handle *h = &fs->handles[i];
                if (!h->in_use || !h->writable)
                        continue;
                bool seen = false; /* usually a few: a linear look is enough */
                for (size_t j = n; j-- > 0 && !seen && n - j <= 64;)
                        seen = inos[j] == h->ino;
                if (!seen)
                        inos[n++] = h->ino;
        }
        *ret = inos;
        *ret_n = n;
        return 0;
}

/* ---- extended attributes: the user namespace, in memory ----
 * A file's xattrs fit in what ext4 gives them, one 4 KiB block: a 32-byte header, then
 * per xattr a 16-byte entry, the name without its "user." prefix and the value, each
 * padded to 4 bytes, and a 4-byte end. Past it, ENOSPC, as ext4 answers; a value past
 * 64 KiB the kernel refuses itself (E2BIG). They count against the budget too. */
#define XATTR_BLOCK (4096 - 32 - 4)
#define PAD4(n) (((n) + 3) & ~(size_t)3)

static size_t xattr_block_cost(const char *name, size_t size) {
        return 16 + PAD4(strlen(name) - 5) + PAD4(size);
}

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
                size_t old_block = x ? xattr_block_cost(x->name, x->size) : 0;
                size_t old_cost = x ? XATTR_COST(strlen(x->name), x->size) : 0;
                size_t new_cost = XATTR_COST(strlen(name), size);
                if (in->xattr_block - old_block + xattr_block_cost(name, size) > XATTR_BLOCK) {
                        r = -ENOSPC;
                        break;
                }
                if (new_cost > old_cost && (r = meta_room(fs, new_cost - old_cost)) < 0)
                        break;
                in->xattr_block += xattr_block_cost(name, size) - old_block;
                meta_add(fs, new_cost);
                if (x)
                        meta_sub(fs, old_cost);
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
                in->xattr_block -= xattr_block_cost(x->name, x->size);
                meta_sub(fs, XATTR_COST(strlen(x->name), x->size));
                free(x->name);
                free(x->value);
                *x = in->xattrs[--in->n_xattrs];
                touch(in, false);
        } while (0);
        return r;
}

/* ---- status and commit: the namespace against the base tree ----
 * One walk serves status, the dirty check and commit. It never recurses: it keeps a
 * stack of the directories on the way down and one path buffer, so a tree's depth costs
 * a little heap per level, and it refuses a change at a path longer than the Store
 * records (LFS_PATH_MAX) as soon as it meets one. It runs under fs->lock, which the
 * mount's thread needs for every request, so what can take long (reading the data of
 * changed files) runs before it without the lock: a status hashes, a commit stores, then
 * the walk takes what was found for each inode whose data has not changed since
 * (data_gen) and does the little that remains under the lock. */

typedef enum walk_purpose {
        WALK_STATUS,
        WALK_DIRTY, /* stops at the first change */
        WALK_COMMIT,
} walk_purpose;

/* The content id of an upper file, found without the lock. */
typedef struct walk_file {
        uint64_t ino;
        uint64_t data_gen; /* the inode's data_gen when it was listed */
        uint64_t size;
        bool hashed; /* id known when it was listed (commit: only its object may be missing) */
        bool have; /* id is the content of that data_gen */
        bool passed; /* written with passthrough: written back before it is read */
        bool snapshot; /* open for writing with passthrough: a copy of it is stored */
        lfs_id id;
} walk_file;

/* A directory on the walk's stack. */
typedef struct walk_level {
        uint64_t ino;
        lfs_tree base; /* its tree in the base (empty for a new directory) */
        const lfs_entry *in_base; /* its entry in the parent's base tree, if any */
        bool is_new; /* no directory at its path in the base */
        size_t next; /* the next of its entries to look at */
        size_t path_len;
        size_t reported; /* status: changes reported before it */
        size_t named_in_base; /* its names that its base tree has too: when all of them are, none left */
        bool entered; /* its entries loaded and its base tree read */
        const char *name; /* commit: its name in the parent */
        lfs_tree out; /* commit: its entries as they will be recorded */
        bool changed; /* commit: out differs from base */
        size_t matched; /* commit: base entries found unchanged */
        bool keep; /* commit: stays touched after it (names a sticky_file, or holds such a directory) */
} walk_level;

/* Commit: a directory whose namespace is the tree id records, untouched once committed. */
typedef struct walk_clean {
        uint64_t ino;
        lfs_id tree;
} walk_clean;

typedef struct change_walk {
        ws_fs *fs;
        walk_purpose purpose;
        unsigned cancel_gen; /* fs->cancel_gen when the operation began */
        bool final; /* status: an upper file still unhashed counts as modified */
        lfs_change_list status;
        bool dirty;
        walk_file *need; /* status: upper files to hash before the result is known */
        size_t n_need, cap_need;
        /* commit */
        lfs_store *store;
        lfs_blob_writer *w;
        lfs_tree_rows rows;
        const walk_file *stored; /* by ino */
        size_t n_stored;
        lfs_id root; /* the tree recorded */
        walk_clean *clean;
        size_t n_clean, cap_clean;
        path_buf path;
        walk_level *stack;
        size_t depth, cap_stack;
        lfs_error **err;
} change_walk;

static bool walk_cancelled(const change_walk *cw) {
        return atomic_load(&cw->fs->cancel_gen) != cw->cancel_gen;
}

static bool writer_cancelled(void *userdata) {
        return walk_cancelled(userdata);
}

static int cancelled_error(lfs_error **err) {
        return lfs_fail(err, LFS_FAILED, ECANCELED, "cancelled");
}

static int path_too_long(change_walk *cw) {
        _cleanup_free_ char *shown = lfs_path_excerpt(cw->path.s);
        return lfs_fail(cw->err, LFS_INVALID_INPUT, ENAMETOOLONG,
                        "the Workspace of '%s' has a path of %zu bytes (%s); the Store records paths of at "
                        "most " LFS_PATH_MAX_TEXT " bytes (PATH_MAX): move or remove it, or unmount with "
                        "--discard",
                        cw->fs->branch, cw->path.len, shown);
}

/* A change at the walk's current path. Those of the namespace (added, modified) must
 * fit in what the Store records; deleted ones come from the Store. */
static int report(change_walk *cw, lfs_change_kind kind) {
        if (kind != LFS_DELETED && cw->path.len > LFS_PATH_MAX && cw->purpose != WALK_DIRTY)
                return path_too_long(cw);
        cw->dirty = true;
        if (cw->purpose == WALK_STATUS) {
                GROW(cw->status.items, cw->status.cap, cw->status.n + 1);
                cw->status.items[cw->status.n++] = (lfs_change){ .path = xstrdup(cw->path.s), .kind = kind };
        }
        return 0;
}

/* The base entry b at the current path is gone from the namespace. */
static int base_gone(change_walk *cw, const lfs_entry *b) {
        if (cw->purpose != WALK_STATUS || !lfs_mode_is_dir(b->mode))
                return report(cw, LFS_DELETED);
        return lfs_tree_leaves(cw->fs->store, &b->id, cw->path.s, LFS_DELETED, &cw->status, cw->err);
}

static uint32_t store_mode(uint32_t mode) {
        if (S_ISLNK(mode))
                return LFS_MODE_LINK;
        return mode & S_IXUSR ? LFS_MODE_EXEC : LFS_MODE_FILE;
}

static int cmp_walk_file(const void *a, const void *b) {
        uint64_t x = ((const walk_file *)a)->ino, y = ((const walk_file *)b)->ino;
        return x < y ? -1 : x > y;
}

static const walk_file *stored_file(const change_walk *cw, uint64_t ino) {
        walk_file key = { .ino = ino };
        return cw->n_stored ? bsearch(&key, cw->stored, cw->n_stored, sizeof(key), cmp_walk_file) : NULL;
}

/* Copies src (len bytes) to fd, new and empty, by read and write: a run of 1 MiB of zeros
 * is left a hole. Not copy_extents: its lseek(SEEK_DATA) waits for the inode lock, which
 * a write() in flight into src holds as long as its source stalls (a page fault on a
 * FUSE file of the writer's own: test_passthrough_stalled_write.sh). 0 or -errno. */
static int copy_by_read(const change_walk *cw, int src, int fd, uint64_t len) {
        enum { CHUNK = 1 << 20 };
        _cleanup_free_ char *buf = xmalloc_io(CHUNK);
        static const char zeros[4096];
        for (uint64_t pos = 0; pos < len;) {
                if (walk_cancelled(cw))
                        return -ECANCELED;
                ssize_t k = pread(src, buf, CHUNK, (off_t)pos);
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break; /* shorter now: the length set below keeps len */
                bool zero = true;
                for (ssize_t i = 0; i < k && zero; i += (ssize_t)sizeof(zeros))
                        zero = memcmp(buf + i, zeros,
                                      (size_t)(k - i) < sizeof(zeros) ? (size_t)(k - i) : sizeof(zeros)) ==
                               0;
                for (ssize_t done = 0; !zero && done < k;) {
                        ssize_t w = pwrite(fd, buf + done, (size_t)(k - done), (off_t)pos + done);
                        if (w < 0)
                                return -errno;
                        done += w;
                }
                pos += (uint64_t)k;
        }
        return ftruncate(fd, (off_t)len) < 0 ? -errno : 0;
}

/* A file open for writing with passthrough changes without our lock (the kernel writes it
 * without us), and the Store refuses a file that changes while it reads it: the commit
 * records a copy instead, as "snap.<ino>" beside the upper files (names the upper files
 * never take), taken without the lock (store_files) or, failing that, under it. Its name
 * in ret (removed by the caller), 0; or -errno. With locked, room is made first. */
static int snapshot_upper(const change_walk *cw, uint64_t ino, bool locked, char ret[UPPER_NAME_MAX]) {
        ws_fs *fs = cw->fs;
        char name[UPPER_NAME_MAX];
        upper_name(ino, name);
        snprintf(ret, UPPER_NAME_MAX, "snap.%llu", (unsigned long long)ino);
        _cleanup_close_ int src = openat(fs->upper_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (src < 0)
                return -errno;
        upper_writeback(src);
        if (fstat(src, &st) < 0)
                return -errno;
        int r = locked ? space_for(fs, (uint64_t)st.st_blocks * 512) : 0;
        if (r < 0)
                return r;
        _cleanup_close_ int fd =
                openat(fs->upper_fd, ret, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if ((r = copy_by_read(cw, src, fd, (uint64_t)st.st_size)) < 0) {
                unlinkat(fs->upper_fd, ret, 0);
                return r;
        }
        return 0;
}

/* Commit: stores an upper file now, under the lock (its data changed since it was
 * stored without the lock, or it is new since). */
static int store_upper_now(change_walk *cw, uint64_t ino, lfs_id *ret, uint64_t *ret_size) {
        ws_fs *fs = cw->fs;
        const ws_inode *in = inode_get(fs, ino);
        char name[UPPER_NAME_MAX];
        bool snapshot = passed_writers(in);
        if (!snapshot) {
                upper_name(ino, name);
                if (in->passed_written)
                        upper_writeback_at(fs, name);
        } else {
                int r = snapshot_upper(cw, ino, true, name);
                if (r < 0)
                        return lfs_fail(cw->err, LFS_FAILED, -r, "cannot copy %s, open for writing: %s",
                                        cw->path.s, strerror(-r));
        }
        struct stat st;
        int r = fstatat(fs->upper_fd, name, &st, AT_SYMLINK_NOFOLLOW);
        if (r < 0)
                r = lfs_fail(cw->err, LFS_FAILED, errno, "cannot read the Workspace's copy of %s: %s",
                             cw->path.s, strerror(errno));
        lfs_blob_source src = { .dirfd = fs->upper_fd, .path = name, .ret_id = ret };
        if (r == 0) {
                src.size = (uint64_t)st.st_size;
                r = lfs_blob_writer_add_files(cw->w, &src, 1, cw->err);
        }
        if (snapshot)
                unlinkat(fs->upper_fd, name, 0);
        if (r < 0)
                return r;
        *ret_size = (uint64_t)st.st_size;
        return 0;
}

/* A file's or symlink's mode and content id as it would be recorded. known is false
 * (status, dirty check) when the file is copied up and not hashed since its last change. */
static int leaf_id(change_walk *cw, uint64_t ino, uint32_t *ret_mode, lfs_id *ret_id, uint64_t *ret_size,
                   bool *known) {
        ws_fs *fs = cw->fs;
        ws_inode *in = inode_get(fs, ino);
        passthrough_refresh(fs, in);
        *ret_mode = store_mode(in->mode);
        *ret_size = in->size;
        *known = true;
        if (S_ISLNK(in->mode)) {
                if (!in->link) {
                        *ret_id = in->blob; /* from the Store, never changed */
                        return 0;
                }
                if (cw->purpose == WALK_COMMIT)
                        return lfs_blob_writer_add_data(cw->w, in->link, strlen(in->link), ret_id, cw->err);
                lfs_sha256(in->link, strlen(in->link), ret_id);
                return 0;
        }
        if (!in->upper) {
                if (in->has_blob)
                        *ret_id = in->blob;
                else if (cw->purpose == WALK_COMMIT)
                        return lfs_blob_writer_add_data(cw->w, "", 0, ret_id, cw->err);
                else
                        lfs_sha256("", 0, ret_id);
                return 0;
        }
        const walk_file *f = stored_file(cw, ino);
        if (cw->purpose != WALK_COMMIT) {
                /* A hash of this look's (hash_needed) not kept: the file is open for writing
                 * with passthrough. */
                bool now = !in->hashed && f && f->have && f->data_gen == in->data_gen;
                *known = in->hashed || now;
                *ret_id = now ? f->id : in->upper_hash;
                return 0;
        }
        bool current = f && f->have && f->data_gen == in->data_gen;
        if (current || (f && f->have && f->snapshot)) {
                /* A copy taken during this commit of a file the kernel writes without us:
                 * what it held then is recorded, even if it changed since (as a write
                 * racing the commit would), but not kept as its hash. */
                *ret_id = f->id;
                *ret_size = f->size;
        } else {
                int r = store_upper_now(cw, ino, ret_id, ret_size);
                if (r < 0)
                        return r;
                in = inode_get(fs, ino);
                current = true;
        }
        /* Under the lock the data cannot change but through the kernel: the id is the
         * file's until its next change, unless a write passed through may be under way. */
        if (current && !passed_writers(in)) {
                in->hashed = true;
                in->upper_hash = *ret_id;
        }
        return 0;
}

static void push_level(change_walk *cw, uint64_t ino, const lfs_entry *in_base, const char *name) {
        GROW(cw->stack, cw->cap_stack, cw->depth + 1);
        cw->stack[cw->depth++] = (walk_level){ .ino = ino,
                                               .in_base = in_base,
                                               .is_new = !in_base || !lfs_mode_is_dir(in_base->mode),
                                               .path_len = cw->path.len,
                                               .reported = cw->status.n,
                                               .name = name };
}

static void level_done(walk_level *l) {
        lfs_tree_done(&l->base);
        lfs_tree_done(&l->out);
}

/* Commit: what the entry at the current path records, against its base entry b. */
static int record(change_walk *cw, walk_level *top, const char *name, uint32_t mode, uint64_t size,
                  const lfs_id *id, const lfs_entry *b) {
        if (b && b->mode == mode && lfs_id_eq(&b->id, id)) {
                top->matched++;
        } else {
                if (cw->path.len > LFS_PATH_MAX)
                        return path_too_long(cw);
                top->changed = true;
        }
        lfs_tree_add(&top->out, xstrdup(name), mode, size, id);
        return 0;
}

/* One entry of the directory on top of the stack, entry i of its ents. */
static int walk_entry(change_walk *cw, walk_level *top, size_t i) {
        ws_fs *fs = cw->fs;
        ws_inode *dir = inode_get(fs, top->ino);
        const ws_dirent entry = dir->ents[i], *d = &entry;
        ws_inode *child = inode_get(fs, d->ino);
        const lfs_entry *b = lfs_tree_find(&top->base, d->name);
        int r = 0;
        if (b)
                top->named_in_base++;
        if (!child) {
                /* Freed by evict_child: what it kept is the record's whole state (an
                 * untouched directory's tree, a blob with the attributes of the load). As
                 * its base entry, it is unchanged, and its record is not made again;
                 * otherwise it is, and walked as any other. */
                lfs_entry e = evicted_entry(&dir->evicted[i]);
                if (b && b->mode == e.mode && lfs_id_eq(&b->id, &e.id))
                        return cw->purpose == WALK_COMMIT
                                       ? record(cw, top, d->name, e.mode, e.size, &e.id, b)
                                       : 0;
                restore_entry(fs, dir, i);
                child = inode_get(fs, d->ino);
        }
        if (S_ISDIR(child->mode)) {
                if (b && lfs_mode_is_dir(b->mode)) {
                        /* A directory untouched (never listed, or nothing changed in it since it
                         * was loaded or committed) is its tree: compare ids only. */
                        if (!child->touched && child->has_tree && lfs_id_eq(&child->tree, &b->id))
                                return cw->purpose == WALK_COMMIT
                                               ? record(cw, top, d->name, LFS_MODE_DIR, 0, &b->id, b)
                                               : 0;
                } else {
                        /* A directory where the base had none: a change, whatever is below. */
                        if (cw->purpose == WALK_DIRTY) {
                                cw->dirty = true;
                                return 0;
                        }
                        if (cw->path.len > LFS_PATH_MAX)
                                return path_too_long(cw);
                        if (b && cw->purpose == WALK_STATUS && (r = report(cw, LFS_DELETED)) < 0)
                                return r;
                        if (b)
                                top->changed = true;
                }
                push_level(cw, d->ino, b, d->name);
                return 0;
        }
        if (!S_ISREG(child->mode) && !S_ISLNK(child->mode)) {
                /* Fifos and sockets are not recorded. */
                if (b)
                        top->changed = true;
                return b ? base_gone(cw, b) : 0;
        }
        uint32_t mode;
        uint64_t size;
        lfs_id id;
        bool known;
        if ((r = leaf_id(cw, d->ino, &mode, &id, &size, &known)) < 0)
                return r;
        if (cw->purpose == WALK_COMMIT) {
                if (sticky_file(inode_get(fs, d->ino)))
                        top->keep = true;
                return record(cw, top, d->name, mode, size, &id, b);
        }
        if (!known) {
                /* Only a file as large as its base entry can be unchanged: hash it first. */
                if (b && b->mode == mode && b->size == size && !cw->final) {
                        GROW(cw->need, cw->cap_need, cw->n_need + 1);
                        cw->need[cw->n_need++] = (walk_file){ .ino = d->ino,
                                                              .data_gen = child->data_gen,
                                                              .passed = child->passed_written };
                        return 0;
                }
        } else if (b && b->mode == mode && lfs_id_eq(&b->id, &id)) {
                return 0;
        }
        if (b && lfs_mode_is_dir(b->mode)) {
                if ((r = base_gone(cw, b)) < 0)
                        return r;
                return report(cw, LFS_ADDED);
        }
        return report(cw, b ? LFS_MODIFIED : LFS_ADDED);
}

/* The directory on top of the stack is done: what left it, then its own record. */
static int leave_dir(change_walk *cw) {
        ws_fs *fs = cw->fs;
        walk_level *top = &cw->stack[cw->depth - 1];
        int r = 0;
        evict_idle(fs, top->ino); /* what entering it made again and the kernel does not hold */
        /* Names of the base gone: none when every one of them was met (names are unique). */
        for (size_t i = 0; top->named_in_base < top->base.n && i < top->base.n && r == 0 &&
                           !(cw->purpose == WALK_DIRTY && cw->dirty);
             i++)
                if (!child_get(fs, top->ino, top->base.entries[i].name, NULL)) {
                        path_buf_cut(&cw->path, top->path_len);
                        path_buf_push(&cw->path, top->base.entries[i].name);
                        r = base_gone(cw, &top->base.entries[i]);
                }
        path_buf_cut(&cw->path, top->path_len);
        /* A new directory with nothing recorded below is itself the change. */
        if (r == 0 && top->is_new && cw->depth > 1 && cw->status.n == top->reported &&
            cw->purpose != WALK_COMMIT)
                r = report(cw, LFS_ADDED);
        if (r < 0 || cw->purpose != WALK_COMMIT) {
                level_done(top);
                cw->depth--;
                return r;
        }
        lfs_id id;
        if (!top->is_new && !top->changed && top->matched == top->base.n)
                id = top->in_base ? top->in_base->id : fs->base_tree;
        else
                lfs_tree_store(&top->out, &cw->rows, &id);
        bool keep = top->keep;
        if (!keep) {
                GROW(cw->clean, cw->cap_clean, cw->n_clean + 1);
                cw->clean[cw->n_clean++] = (walk_clean){ .ino = top->ino, .tree = id };
        }
        const char *name = top->name;
        const lfs_entry *in_base = top->in_base;
        level_done(top);
        if (--cw->depth == 0) {
                cw->root = id;
                return 0;
        }
        walk_level *parent = &cw->stack[cw->depth - 1];
        parent->keep |= keep;
        path_buf_cut(&cw->path, parent->path_len);
        path_buf_push(&cw->path, name);
        r = record(cw, parent, name, LFS_MODE_DIR, 0, &id, in_base);
        path_buf_cut(&cw->path, parent->path_len);
        return r;
}

/* Entering a directory: its entries, and its tree in the base. */
static int enter_dir(change_walk *cw, walk_level *top) {
        ws_fs *fs = cw->fs;
        top->entered = true;
        int r = load_names(fs, top->ino);
        if (r < 0)
                return lfs_fail(cw->err, LFS_FAILED, -r, "cannot read directory '%s' from the Store",
                                cw->path.s ? cw->path.s : "");
        const lfs_id *base = cw->depth == 1 ? &fs->base_tree : top->is_new ? NULL : &top->in_base->id;
        return base ? lfs_db_get_tree(fs->store, base, &top->base, cw->err) : 0;
}

static int walk_changes(change_walk *cw) {
        ws_fs *fs = cw->fs;
        const ws_inode *root = inode_get(fs, WS_ROOT_INO);
        if (!root->touched && root->has_tree && lfs_id_eq(&root->tree, &fs->base_tree)) {
                cw->root = fs->base_tree; /* nothing changed since the mount or the last commit */
                return 0;
        }
        path_buf_cut(&cw->path, 0);
        push_level(cw, WS_ROOT_INO, NULL, NULL);
        cw->stack[0].is_new = false;
        int r = 0;
        while (cw->depth && r == 0) {
                if (cw->purpose == WALK_DIRTY && cw->dirty)
                        break;
                if (walk_cancelled(cw)) {
                        r = cancelled_error(cw->err);
                        break;
                }
                walk_level *top = &cw->stack[cw->depth - 1];
                if (!top->entered && (r = enter_dir(cw, top)) < 0)
                        break;
                ws_inode *dir = inode_get(fs, top->ino);
                if (top->next == dir->n_ents) {
                        r = leave_dir(cw);
                        continue;
                }
                size_t i = top->next++;
                if (!dir->ents[i].name)
                        continue;
                path_buf_cut(&cw->path, top->path_len);
                path_buf_push(&cw->path, dir->ents[i].name);
                r = walk_entry(cw, top, i); /* may push: top is stale after it */
        }
        while (cw->depth) { /* a dirty check's early end, an error */
                walk_level *l = &cw->stack[--cw->depth];
                evict_idle(fs, l->ino);
                level_done(l);
        }
        return r;
}

static void walk_done(change_walk *cw) {
        lfs_change_list_free(cw->status.items, cw->status.n);
        cw->status = (lfs_change_list){ 0 };
        free(cw->need);
        free(cw->clean);
        free(cw->stack);
        path_buf_done(&cw->path);
        lfs_tree_rows_done(&cw->rows);
}

/* The id of an upper file's contents, read without the lock (its file stays put: its
 * name is its inode's; -ENOENT when it went meanwhile). */
static int hash_upper(change_walk *cw, uint64_t ino, bool passed, lfs_id *ret) {
        char name[UPPER_NAME_MAX];
        upper_name(ino, name);
        _cleanup_close_ int fd = openat(cw->fs->upper_fd, name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT
                               ? -ENOENT
                               : lfs_fail(cw->err, LFS_FAILED, errno,
                                          "cannot read the Workspace's copy of a file: %s", strerror(errno));
        if (passed)
                upper_writeback(fd);
        _cleanup_free_ char *buf = xmalloc_io(1u << 20);
        lfs_hasher *h = lfs_hasher_new();
        ssize_t k = 0;
        while (!walk_cancelled(cw) && (k = read(fd, buf, 1u << 20)) > 0)
                lfs_hasher_update(h, buf, (size_t)k);
        int e = errno;
        lfs_hasher_finish(h, ret);
        if (walk_cancelled(cw))
                return cancelled_error(cw->err);
        if (k < 0)
                return lfs_fail(cw->err, LFS_FAILED, e, "cannot read the Workspace's copy of a file: %s",
                                strerror(e));
        return 0;
}

/* Status: hashes the files the walk asked for, with fs->lock released meanwhile; keeps
 * each hash whose file has not changed since it was asked for. */
static int hash_needed(change_walk *cw) {
        ws_fs *fs = cw->fs;
        qsort(cw->need, cw->n_need, sizeof(walk_file), cmp_walk_file);
        size_t n = 0;
        for (size_t i = 0; i < cw->n_need; i++) /* a file under several names is hashed once */
                if (!n || cw->need[n - 1].ino != cw->need[i].ino)
                        cw->need[n++] = cw->need[i];
        cw->n_need = n;
        pthread_mutex_unlock(&fs->lock);
        int r = 0;
        for (size_t i = 0; i < n && r == 0; i++) {
                r = hash_upper(cw, cw->need[i].ino, cw->need[i].passed, &cw->need[i].id);
                cw->need[i].have = r == 0;
                if (r == -ENOENT)
                        r = 0;
        }
        pthread_mutex_lock(&fs->lock);
        for (size_t i = 0; i < n; i++) {
                ws_inode *in = inode_get(fs, cw->need[i].ino);
                if (cw->need[i].have && in && in->upper && in->data_gen == cw->need[i].data_gen &&
                    !passed_writers(in)) {
                        in->hashed = true;
                        in->upper_hash = cw->need[i].id;
                }
        }
        /* The final walk asks for none: it finds these (leaf_id), kept or not. */
        cw->stored = cw->need;
        cw->n_stored = n;
        cw->n_need = 0;
        return r;
}

/* A status or dirty check: one walk; another, after hashing, if it met copied-up files
 * that may be unchanged. With fs->lock held (released while hashing). */
static int look(change_walk *cw) {
        int r = walk_changes(cw);
        if (r < 0 || !cw->n_need || (cw->purpose == WALK_DIRTY && cw->dirty))
                return r;
        if ((r = hash_needed(cw)) < 0)
                return r;
        lfs_change_list_free(cw->status.items, cw->status.n);
        cw->status = (lfs_change_list){ 0 };
        cw->dirty = false;
        cw->final = true;
        return walk_changes(cw);
}

static int cmp_change(const void *a, const void *b) {
        return strcmp(((const lfs_change *)a)->path, ((const lfs_change *)b)->path);
}

int ws_status(ws_fs *fs, lfs_change **ret, size_t *ret_n, lfs_error **err) {
        change_walk cw = {
                .fs = fs, .purpose = WALK_STATUS, .cancel_gen = atomic_load(&fs->cancel_gen), .err = err
        };
        pthread_mutex_lock(&fs->lock);
        int r = look(&cw);
        pthread_mutex_unlock(&fs->lock);
        if (r == 0) {
                if (cw.status.n > 1)
                        qsort(cw.status.items, cw.status.n, sizeof(lfs_change), cmp_change);
                *ret = cw.status.items;
                *ret_n = cw.status.n;
                cw.status = (lfs_change_list){ 0 };
        }
        walk_done(&cw);
        return r;
}

bool ws_is_dirty(ws_fs *fs, lfs_error **err) {
        change_walk cw = {
                .fs = fs, .purpose = WALK_DIRTY, .cancel_gen = atomic_load(&fs->cancel_gen), .err = err
        };
        pthread_mutex_lock(&fs->lock);
        int r = look(&cw);
        pthread_mutex_unlock(&fs->lock);
        walk_done(&cw);
        return r < 0 || cw.dirty; /* when in doubt, do not drop anything */
}

void ws_cancel(ws_fs *fs) {
        atomic_fetch_add(&fs->cancel_gen, 1);
}

/* ino's slot in the listed table and those of the directories below it, which nothing
 * reaches any more (a merged commit removed ino). */
static void listed_gone(ws_fs *fs, uint64_t ino) {
        const ws_listed *l = listed_find(fs, ino);
        if (!l)
                return;
        uint64_t first = l->first_child;
        uint32_t n = l->n_numbered;
        listed_drop(fs, ino);
        for (uint32_t k = 0; k < n; k++)
                listed_gone(fs, first + k);
}

/* Directory ino left the view with all below it (a merged commit removed or replaced
 * it): it is left empty, as an rmdir leaves one, and each record below goes as an unlink
 * or rmdir of it would free it (kept while the kernel or a handle holds it), with the
 * names and the listed table's slots below. Freeing only its name left all this until
 * the unmount. */
static void subtree_gone(ws_fs *fs, uint64_t ino) {
        ws_inode *dir = inode_get(fs, ino);
        if (!dir) {
                listed_gone(fs, ino);
                return;
        }
        for (size_t i = 0; dir->loaded && i < dir->n_ents; i++) {
                ws_dirent *d = &dir->ents[i];
                if (!d->name)
                        continue;
                bool found;
                size_t slot = index_find(fs, ino, d->name, &found);
                if (found)
                        index_remove(fs, slot);
                meta_sub(fs, NAME_COST(strlen(d->name)));
                free(d->name);
                d->name = NULL;
                ws_inode *child = inode_get(fs, d->ino);
                if (!child || S_ISDIR(child->mode)) {
                        subtree_gone(fs, d->ino);
                        continue;
                }
                child->nlink--;
                drop_if_gone(fs, d->ino);
        }
        for (uint32_t k = 0; !dir->loaded && dir->numbered && k < dir->n_numbered; k++)
                listed_gone(fs, dir->first_child + k); /* unloaded: no record below */
        evicted_free(fs, dir);
        free(dir->ents);
        dir->ents = NULL;
        dir->n_ents = dir->cap_ents = dir->live_ents = dir->subdirs = 0;
        dir->n_evicted = dir->n_numbered = 0;
        dir->loaded = true;
        dir->has_tree = dir->numbered = dir->counted = false;
        dir->nlink = 0;
        drop_if_gone(fs, ino);
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
                if (lfs_db_get_tree(fs->store, &cur, &t, NULL) < 0 || load_names(fs, dir) < 0)
                        break;
                const lfs_entry *e = lfs_tree_find(&t, part);
                uint64_t child = child_made(fs, dir, part);
                if (!last && e && lfs_mode_is_dir(e->mode) && child && S_ISDIR(inode_get(fs, child)->mode)) {
                        cur = e->id;
                        dir = child;
                        continue;
                }
                mark_stale(fs, dir, part, child);
                if (child) {
                        ws_inode *old = inode_get(fs, child);
                        child_remove(fs, dir, part);
                        if (S_ISDIR(old->mode)) {
                                subtree_gone(fs, child);
                        } else {
                                old->nlink--;
                                drop_if_gone(fs, child);
                        }
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

/* The commit's first step, under the lock: every copied-up file with a name, in inode
 * order (each inode once, whatever its number of names), from the list of copied-up
 * inodes (those freed since leave it here). */
static walk_file *list_upper_files(ws_fs *fs, size_t *ret_n) {
        walk_file *files = NULL;
        size_t n = 0, cap = 0, kept = 0;
        for (size_t i = 0; i < fs->n_uppers; i++) {
                ws_inode *in = inode_get(fs, fs->uppers[i]);
                if (!in)
                        continue;
                fs->uppers[kept++] = fs->uppers[i];
                if (!S_ISREG(in->mode) || in->nlink == 0)
                        continue;
                passthrough_refresh(fs, in);
                GROW(files, cap, n + 1);
                files[n++] = (walk_file){ .ino = in->ino,
                                          .data_gen = in->data_gen,
                                          .size = in->size,
                                          .hashed = in->hashed,
                                          .passed = in->passed_written,
                                          .snapshot = passed_writers(in),
                                          .id = in->upper_hash };
        }
        fs->n_uppers = kept;
        if (n > 1)
                qsort(files, n, sizeof(*files), cmp_walk_file);
        *ret_n = n;
        return files;
}

/* The commit's long step, without the lock: stores the contents of those files (a file
 * hashed before whose object the Store has is not read again). A file that changes or
 * goes meanwhile is left for the walk, which stores it under the lock. */
static int store_files(change_walk *cw, walk_file *files, size_t n) {
        ws_fs *fs = cw->fs;
        _cleanup_free_ lfs_blob_source *src = xcalloc(n, sizeof(*src));
        _cleanup_free_ char(*names)[UPPER_NAME_MAX] = xcalloc(n, sizeof(*names));
        _cleanup_free_ walk_file **of = xcalloc(n, sizeof(*of));
        size_t k = 0;
        int r = 0;
        for (size_t i = 0; i < n && r == 0; i++) {
                walk_file *f = &files[i];
                if (f->hashed && lfs_object_exists(cw->store, &f->id)) {
                        f->have = true;
                        continue;
                }
                struct stat st;
                if (f->snapshot) {
                        r = snapshot_upper(cw, f->ino, false, names[k]);
                        if (r == -ECANCELED)
                                break;
                        if (r < 0) { /* left for the walk */
                                r = 0;
                                continue;
                        }
                } else {
                        upper_name(f->ino, names[k]);
                        if (f->passed)
                                upper_writeback_at(fs, names[k]);
                }
                if (fstatat(fs->upper_fd, names[k], &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                f->size = (uint64_t)st.st_size;
                of[k] = f;
                src[k] = (lfs_blob_source){
                        .dirfd = fs->upper_fd, .path = names[k], .size = f->size, .ret_id = &f->id
                };
                k++;
        }
        if (r == 0)
                r = lfs_blob_writer_add_files_lenient(cw->w, src, k, cw->err);
        else
                r = cancelled_error(cw->err);
        for (size_t i = 0; i < k; i++) {
                if (r == 0)
                        of[i]->have = src[i].result == 0;
                if (of[i]->snapshot)
                        unlinkat(fs->upper_fd, names[i], 0);
        }
        return r;
}

/* The view after a commit: its base is the new commit; after a merge it takes the other
 * side's changes (and tells the kernel to forget the names it cached). */
static int take_commit(change_walk *cw, const lfs_id *commit, int merged) {
        ws_fs *fs = cw->fs;
        lfs_id tree = cw->root;
        if (merged) {
                lfs_commit_info c = { 0 };
                lfs_change_list theirs = { 0 };
                int r = lfs_db_get_commit(cw->store, commit, &c, cw->err);
                if (r == 0)
                        r = lfs_tree_diff(cw->store, &cw->root, &c.tree, &theirs, cw->err);
                tree = c.tree;
                lfs_commit_info_done(&c);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < theirs.n; i++)
                        view_take(fs, theirs.items[i].path, &tree);
                lfs_change_list_free(theirs.items, theirs.n);
        }
        /* Pinned before the commit's hold ends (ws_commit): a branch deleted with --force and
         * a gc after it leave the view its objects. The old bases stay pinned too: a file
         * open since then may still read from them. The commit is recorded whatever the pin
         * does: should its 65 bytes fail to be written, the new base is still the branch's
         * head, which only a forced delete followed by a gc before the next commit takes. */
        (void)lfs_pin_add(fs->pin, commit, NULL);
        fs->base = *commit;
        fs->base_tree = tree;
        return 0;
}

/* The commit recorded: the directories it walked whose trees it recorded are untouched
 * again, so the next status and commit look only where something changes from now on.
 * Before take_commit, whose view_take touches what a merge brought in. */
static void commit_clean(change_walk *cw) {
        for (size_t i = 0; i < cw->n_clean; i++) {
                ws_inode *dir = inode_get(cw->fs, cw->clean[i].ino);
                if (!dir)
                        continue;
                dir->touched = false;
                dir->has_tree = true;
                dir->tree = cw->clean[i].tree;
                dir->counted = false; /* a count of another tree (the dir is loaded anyway) */
        }
}

/* The Workspace's Branch was deleted (branch delete --force) after it was mounted: the
 * commit is refused, saying how to keep what the Workspace holds. */
static int branch_gone(const ws_fs *fs, lfs_error **err) {
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&fs->base, hex);
        hex[12] = 0;
        lfs_error_free(*err);
        *err = NULL;
        return lfs_fail(err, LFS_NO_SUCH_BRANCH, ENOENT,
                        "branch '%s' of this Workspace was deleted after it was mounted; nothing was "
                        "committed and the Workspace keeps its changes: make the branch again where the "
                        "Workspace started ('layerfs branch create %s --from %s') and commit again, or "
                        "unmount it with --discard to drop them",
                        fs->branch, fs->branch, hex);
}

/* A commit the Branch's history names is not in the Store, while the Branch is there: the
 * Store is damaged (not a deleted Branch, which branch_gone tells). */
static int history_damaged(const ws_fs *fs, lfs_error **err) {
        _cleanup_free_ char *what = xstrdup((*err)->message);
        lfs_error_free(*err);
        *err = NULL;
        return lfs_fail(err, LFS_FAILED, EIO,
                        "the Store of this Workspace's project lacks a commit of branch '%s''s history "
                        "(%s); nothing was committed and the Workspace keeps its changes; 'layerfs project "
                        "verify' says what else is damaged",
                        fs->branch, what);
}

int ws_commit(ws_fs *fs, const char *message, lfs_id *ret_commit, int *ret_merged, lfs_error **err) {
        int r = lfs_check_commit_message(message, err);
        if (r < 0)
                return r;
        change_walk cw = {
                .fs = fs, .purpose = WALK_COMMIT, .cancel_gen = atomic_load(&fs->cancel_gen), .err = err
        };
        pthread_mutex_lock(&fs->lock);
        if (fs->committing) {
                pthread_mutex_unlock(&fs->lock);
                return lfs_fail(
                        err, LFS_BUSY, EBUSY,
                        "a commit of the Workspace of '%s' is already running; try again when it has "
                        "ended",
                        fs->branch);
        }
        fs->committing = true;
        size_t n_files = 0;
        _cleanup_free_ walk_file *files = list_upper_files(fs, &n_files);
        pthread_mutex_unlock(&fs->lock);

        /* The Workspace's own Store handle serves its mount's thread; the commit has another. */
        if (!fs->work_store)
                r = lfs_store_open(fs->store->home, fs->store->project, &fs->work_store, err);
        cw.store = fs->work_store;
        /* Held from the first look at what the Store has to the new base's pin: gc.c. */
        bool held = r == 0 && (r = lfs_store_hold(cw.store, err)) == 0;
        if (r == 0) {
                cw.w = lfs_blob_writer_new(cw.store);
                lfs_blob_writer_set_cancel(cw.w, writer_cancelled, &cw);
                r = store_files(&cw, files, n_files);
        }
        /* Durable now, while nothing waits: the objects' syncfs flushes what the Workspace wrote. */
        if (r == 0)
                r = lfs_blob_writer_publish(cw.w, err);

        lfs_id commit;
        int merged = 0;
        pthread_mutex_lock(&fs->lock);
        cw.stored = files;
        cw.n_stored = n_files;
        if (r == 0)
                r = walk_changes(&cw);
        if (r == 0)
                r = lfs_store_commit_tree(cw.store, cw.w, &cw.rows, fs->branch, &fs->base, &cw.root, message,
                                          &commit, &merged, err);
        if (r < 0 && err && *err && (*err)->code == LFS_NO_SUCH_BRANCH) {
                lfs_id head;
                r = lfs_branch_head(cw.store, fs->branch, &head, NULL) < 0 ? branch_gone(fs, err)
                                                                           : history_damaged(fs, err);
        }
        if (r == 0)
                commit_clean(&cw);
        /* Nothing to record: the view stays on its base, even if the Branch moved. */
        if (r == 0 && !lfs_id_eq(&cw.root, &fs->base_tree))
                r = take_commit(&cw, &commit, merged);
        fs->committing = false;
        /* The names the kernel must forget, told outside the lock: the kernel may need a
         * request of ours to finish first. */
        size_t n_stale = fs->n_stale;
        __typeof__(fs->stale) stale = TAKE_PTR(fs->stale);
        fs->n_stale = fs->cap_stale = 0;
        pthread_mutex_unlock(&fs->lock);
        for (size_t i = 0; i < n_stale; i++) {
                if (fs->invalidate)
                        fs->invalidate(fs->invalidate_data, stale[i].parent, stale[i].child, stale[i].name);
                free(stale[i].name);
        }
        free(stale);
        lfs_blob_writer_free(cw.w);
        if (held)
                lfs_store_release(cw.store);
        walk_done(&cw);
        if (r == 0) {
                *ret_commit = commit;
                if (ret_merged)
                        *ret_merged = merged;
        }
        return r;
}

const ws_ops ws_workspace_ops = {
        .lookup = ws_lookup,
        .forget = ws_forget,
        .getattr = ws_getattr,
        .setattr = ws_setattr,
        .kill_setid = ws_kill_setid,
        .readlink = ws_readlink,
        .mknod = ws_mknod,
        .mkdir = ws_mkdir,
        .symlink = ws_symlink,
        .link = ws_link,
        .unlink = ws_unlink,
        .rmdir = ws_rmdir,
        .rename = ws_rename,
        .open = ws_open_file,
        .create = ws_create,
        .read_extent = ws_read_extent,
        .write = ws_write,
        .fsync = ws_fsync,
        .fallocate = ws_fallocate,
        .lseek = ws_lseek,
        .release = ws_release,
        .opendir = ws_opendir,
        .releasedir = ws_releasedir,
        .readdir = ws_readdir,
        .readdirplus = ws_readdirplus,
        .statfs = ws_statfs,
        .setxattr = ws_setxattr,
        .getxattr = ws_getxattr,
        .listxattr = ws_listxattr,
        .removexattr = ws_removexattr,
        .set_passthrough = ws_set_passthrough,
};
