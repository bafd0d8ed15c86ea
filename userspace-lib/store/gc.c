/* SPDX-License-Identifier: MIT */
/* Garbage collection: removes the commits, trees and blobs that no branch and no pin (a
 * mounted Workspace's bases) reaches, and the pack space they held (docs/architecture.md,
 * "Garbage collection").
 *
 * The race with a commit is closed by a lock, not by a guess at how long a commit takes:
 * a writing operation holds gc.lock shared from before it looks at what the Store has (an
 * object present is not written again, so a commit counts on objects it did not write)
 * until its transaction ended; gc holds it exclusive from its first read to its last
 * removal. A gc therefore sees each commit either not begun or committed, and removes
 * nothing a commit in progress wrote or counts on.
 *
 * Crash safety: nothing reachable is ever the only copy being changed. The live blobs of a
 * pack to rewrite are copied into a new pack, made durable, then one transaction deletes
 * the dead rows and points the moved blobs at the new pack; only after it committed are
 * files removed. A kill before the commit leaves an unrecorded pack (removed by the next
 * writer or gc); after it, files no row names (removed by the next gc). */
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "fault.h"
#include "store.h"

#define GC_LOCK_NAME "gc.lock"
#define PINS_DIR "pins"

/* ---- the gc lock ---- */

static int lock_file(lfs_store *s, lfs_error **err) {
        if (s->gc_lock_fd >= 0)
                return s->gc_lock_fd;
        int fd = openat(s->dirfd, GC_LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot open %s/" GC_LOCK_NAME ": %s", s->path,
                                strerror(errno));
        s->gc_lock_fd = fd;
        return fd;
}

static int lock_wait(int fd, int op) {
        while (flock(fd, op) < 0)
                if (errno != EINTR)
                        return -errno;
        return 0;
}

int lfs_store_hold(lfs_store *s, lfs_error **err) {
        if (s->gc_holds > 0) {
                s->gc_holds++;
                return 0;
        }
        int fd = lock_file(s, err);
        if (fd < 0)
                return fd;
        int r = lock_wait(fd, LOCK_SH);
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, r, "cannot lock %s/" GC_LOCK_NAME ": %s", s->path,
                                strerror(-r));
        s->gc_holds = 1;
        return 0;
}

void lfs_store_release(lfs_store *s) {
        if (s->gc_holds > 0 && --s->gc_holds == 0)
                (void)flock(s->gc_lock_fd, LOCK_UN);
}

int lfs_store_hold_scoped(lfs_store *s, lfs_store **ret_held, lfs_error **err) {
        int r = lfs_store_hold(s, err);
        if (r < 0)
                return r;
        *ret_held = s;
        return 0;
}

/* ---- branch deletions since the last gc ---- */

#define DELETES_KEY "'deleted_branches'"

int lfs_store_count_delete(lfs_store *s, lfs_error **err) {
        return lfs_db_exec(
                s,
                "CREATE TABLE IF NOT EXISTS gc_state(key TEXT PRIMARY KEY, value INTEGER NOT NULL)"
                " WITHOUT ROWID; INSERT INTO gc_state(key, value) VALUES(" DELETES_KEY ", 1)"
                " ON CONFLICT(key) DO UPDATE SET value = value + 1",
                err);
}

static bool have_gc_state(lfs_store *s) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name='gc_state'",
                               -1, &st, NULL) != SQLITE_OK)
                return false;
        bool found = sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
        return found;
}

int lfs_store_deleted_branches(lfs_store *s, uint64_t *ret, lfs_error **err) {
        if (!have_gc_state(s)) {
                *ret = 0;
                return 0;
        }
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "SELECT value FROM gc_state WHERE key=" DELETES_KEY, -1, &st, NULL) !=
            SQLITE_OK)
                return lfs_db_fail(s, err, "count the deleted branches");
        int rc = sqlite3_step(st);
        uint64_t n = rc == SQLITE_ROW ? (uint64_t)sqlite3_column_int64(st, 0) : 0;
        sqlite3_finalize(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
                return lfs_db_fail(s, err, "count the deleted branches");
        *ret = n;
        return 0;
}

/* Inside gc's transaction: the count starts again. */
static int reset_deletes(lfs_store *s, lfs_error **err) {
        return have_gc_state(s) ? lfs_db_exec(s, "DELETE FROM gc_state WHERE key=" DELETES_KEY, err) : 0;
}

/* ---- pins ---- */

struct lfs_pin {
        int dir_fd; /* <store>/pins */
        int fd; /* the pin file, flock'ed exclusive while it lives */
        char *name;
        uint64_t size;
};

static int pins_dir(lfs_store *s, bool create, lfs_error **err) {
        if (create && mkdirat(s->dirfd, PINS_DIR, 0700) < 0 && errno != EEXIST)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s/" PINS_DIR ": %s", s->path,
                                strerror(errno));
        int fd = openat(s->dirfd, PINS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && (create || errno != ENOENT))
                return lfs_fail(err, LFS_FAILED, errno, "cannot open %s/" PINS_DIR ": %s", s->path,
                                strerror(errno));
        return fd < 0 ? -ENOENT : fd;
}

int lfs_pin_add(lfs_pin *pin, const lfs_id *commit, lfs_error **err) {
        char line[LFS_HEX_LEN + 1];
        lfs_id_to_hex(commit, line);
        line[LFS_HEX_LEN] = '\n';
        ssize_t k = lfs_pwrite_full(pin->fd, line, sizeof(line), (off_t)pin->size);
        if (k != (ssize_t)sizeof(line))
                return lfs_fail(err, LFS_FAILED, k < 0 ? (int)k : EIO,
                                "cannot write the pin " PINS_DIR "/%s: %s", pin->name,
                                strerror(k < 0 ? (int)-k : EIO));
        pin->size += sizeof(line);
        return 0;
}

int lfs_pin_new(lfs_store *s, const lfs_id *commit, lfs_pin **ret, lfs_error **err) {
        static unsigned counter;
        int dir_fd = pins_dir(s, true, err);
        if (dir_fd < 0)
                return dir_fd;
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        lfs_pin *pin = xcalloc(1, sizeof(*pin));
        pin->dir_fd = dir_fd;
        pin->name =
                xasprintf("%d-%llx-%u", (int)getpid(),
                          (unsigned long long)now.tv_sec * 1000000000ull + (unsigned long long)now.tv_nsec,
                          __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
        pin->fd = openat(dir_fd, pin->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        int r = pin->fd < 0 ? -errno : lock_wait(pin->fd, LOCK_EX | LOCK_NB);
        if (r < 0) {
                r = lfs_fail(err, LFS_FAILED, r, "cannot make the pin %s/" PINS_DIR "/%s: %s", s->path,
                             pin->name, strerror(-r));
        } else if ((r = lfs_pin_add(pin, commit, err)) == 0) {
                *ret = pin;
                return 0;
        }
        lfs_pin_free(pin);
        return r;
}

void lfs_pin_free(lfs_pin *pin) {
        if (!pin)
                return;
        if (pin->fd >= 0) {
                unlinkat(pin->dir_fd, pin->name, 0);
                close(pin->fd);
        }
        close(pin->dir_fd);
        free(pin->name);
        free(pin);
}

/* ---- the collection ---- */

typedef struct id_list {
        lfs_id *items;
        size_t n, cap;
} id_list;

static void id_list_add(id_list *l, const lfs_id *id) {
        GROW(l->items, l->cap, l->n + 1);
        l->items[l->n++] = *id;
}

typedef struct gc_pack {
        sqlite3_int64 id;
        char *name;
        uint64_t size, disk, live;
        /* Its blobs that something reaches: an empty file's blob is live and takes no
         * bytes, so live (bytes) alone would call such a pack dead. */
        uint64_t live_blobs;
        lfs_gc_pack_action action; /* 0: kept */
} gc_pack;

/* A file to remove below objects/ (or pins/), and what it takes on disk. */
typedef struct gc_file {
        char *path;
        uint64_t disk;
} gc_file;

typedef struct gc_run {
        lfs_store *s;
        const lfs_gc_options *opt;
        unsigned repack_below;
        lfs_idset live; /* commits, trees and blobs reached */
        id_list dead_commits, dead_trees, dead_blobs; /* dead_blobs: rows in packs kept */
        gc_pack *packs;
        size_t n_packs, cap_packs, cap_result_packs;
        gc_file *files; /* below objects/: dead loose objects, leftovers, removed packs */
        size_t n_files, cap_files;
        char **stale_pins;
        size_t n_stale_pins, cap_stale_pins;
        lfs_gc_result result;
        uint64_t marked;
        bool split; /* table trees split by a conversion (trees_move.c), which waits for gc */
        const _Atomic bool *stop; /* lfs_gc_control's */
} gc_run;

/* The caller asked the gc to end (lfs_gc_control): -ECANCELED, while it only plans. */
static int stopped(const gc_run *g, lfs_error **err) {
        if (!g->stop || !*g->stop)
                return 0;
        return lfs_fail(err, LFS_FAILED, ECANCELED,
                        "the gc of project '%s' was stopped before it changed anything", g->s->project);
}

static void report(gc_run *g, const char *phase, uint64_t done, uint64_t total) {
        lfs_home *home = g->s->home;
        if (home && home->progress)
                home->progress(home->progress_data, phase, done, total);
}

static int mark_tree(void *userdata, const lfs_id *id, const lfs_tree *t, lfs_error **err) {
        (void)id;
        gc_run *g = userdata;
        for (size_t i = 0; i < t->n; i++)
                if (!lfs_mode_is_dir(t->entries[i].mode))
                        lfs_idset_add(&g->live, &t->entries[i].id);
        if (++g->marked % 1024 == 0) {
                report(g, "gc: marking trees", g->marked, 0);
                return stopped(g, err);
        }
        return 0;
}

static int mark_commit(void *userdata, const lfs_commit_info *c, lfs_error **err) {
        gc_run *g = userdata;
        return lfs_for_each_tree(g->s, &c->tree, &g->live, mark_tree, g, err);
}

static int mark_from(gc_run *g, const lfs_id *commit, lfs_error **err) {
        return lfs_for_each_ancestor(g->s, commit, &g->live, mark_commit, g, err);
}

/* A live pin's commits are roots; a pin whose owner is gone (its lock is free) is stale. */
static int mark_pin(gc_run *g, int dir_fd, const char *name, lfs_error **err) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
                return errno == ENOENT ? 0
                                       : lfs_fail(err, LFS_FAILED, errno,
                                                  "cannot open the pin %s/" PINS_DIR "/%s: %s", g->s->path,
                                                  name, strerror(errno));
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
                GROW(g->stale_pins, g->cap_stale_pins, g->n_stale_pins + 1);
                g->stale_pins[g->n_stale_pins++] = xstrdup(name);
                return 0;
        }
        if (errno != EWOULDBLOCK)
                return lfs_fail(err, LFS_FAILED, errno, "cannot check the pin %s/" PINS_DIR "/%s: %s",
                                g->s->path, name, strerror(errno));
        g->result.pins++;
        char line[LFS_HEX_LEN + 1];
        int r = 0;
        for (off_t off = 0; r == 0; off += (off_t)sizeof(line)) {
                ssize_t k = lfs_pread_full(fd, line, sizeof(line), off);
                if (k == 0)
                        break;
                lfs_id id;
                line[LFS_HEX_LEN] = 0;
                /* A pin held by a live owner that cannot be read: what it keeps is unknown,
                 * so nothing may go. */
                if (k != (ssize_t)sizeof(line) || lfs_id_from_hex(line, &id) < 0)
                        return lfs_fail(err, LFS_FAILED, EIO,
                                        "the pin %s/" PINS_DIR "/%s of a running Workspace is not a list of "
                                        "commits; nothing was removed; unmount its Workspace, or remove "
                                        "the file if no Workspace of the project is mounted",
                                        g->s->path, name);
                r = mark_from(g, &id, err);
        }
        return r;
}

static int mark(gc_run *g, lfs_error **err) {
        lfs_branch_info *branches;
        size_t n;
        int r = lfs_branch_list(g->s, &branches, &n, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && r == 0; i++)
                r = mark_from(g, &branches[i].commit, err);
        lfs_branch_list_free(branches, n);
        if (r < 0)
                return r;
        int dir_fd = pins_dir(g->s, false, err);
        if (dir_fd == -ENOENT)
                return 0;
        if (dir_fd < 0)
                return dir_fd;
        DIR *d = fdopendir(dir_fd);
        if (!d) {
                close(dir_fd);
                return lfs_fail(err, LFS_FAILED, errno, "cannot read %s/" PINS_DIR, g->s->path);
        }
        struct dirent *de;
        while (r == 0 && (de = readdir(d)))
                if (de->d_name[0] != '.')
                        r = mark_pin(g, dirfd(d), de->d_name, err);
        closedir(d);
        return r;
}

/* Each row of table (commits or trees) no root reaches, with the bytes its data holds. */
static int find_dead_rows(gc_run *g, const char *sql, id_list *out, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(g->s->db, sql, -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(g->s, err, "list the Store's objects");
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (sqlite3_column_bytes(st, 0) != LFS_ID_LEN)
                        continue;
                lfs_id id;
                memcpy(id.bytes, sqlite3_column_blob(st, 0), LFS_ID_LEN);
                if (!lfs_idset_has(&g->live, &id)) {
                        id_list_add(out, &id);
                        g->result.database_bytes += (uint64_t)sqlite3_column_int64(st, 1);
                }
        }
        sqlite3_finalize(st);
        return rc == SQLITE_DONE ? 0 : lfs_db_fail(g->s, err, "list the Store's objects");
}

static void add_file(gc_run *g, char *path, uint64_t disk) {
        GROW(g->files, g->cap_files, g->n_files + 1);
        g->files[g->n_files++] = (gc_file){ .path = path, .disk = disk };
        g->result.bytes += disk;
}

static uint64_t disk_bytes(const struct stat *st) {
        return (uint64_t)st->st_blocks * 512u;
}

/* g->packs is in id order (the query sorts it). */
static gc_pack *find_pack(gc_run *g, sqlite3_int64 id) {
        size_t lo = 0, hi = g->n_packs;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (g->packs[mid].id == id)
                        return &g->packs[mid];
                if (g->packs[mid].id < id)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return NULL;
}

static bool pack_name_valid(const char *name) {
        return name && *name && *name != '.' && !strchr(name, '/');
}

/* The packs, their live bytes, and what becomes of each. */
static int plan_packs(gc_run *g, lfs_error **err) {
        lfs_store *s = g->s;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "SELECT id, name FROM packs ORDER BY id", -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "list the packs");
        int rc, r = 0;
        while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                const char *name = (const char *)sqlite3_column_text(st, 1);
                if (!pack_name_valid(name)) {
                        r = lfs_fail(err, LFS_FAILED, EINVAL,
                                     "a pack row of project '%s' names '%s', not a pack file; the Store "
                                     "is damaged; nothing was removed",
                                     s->project, name ? name : "");
                        break;
                }
                struct stat stt = { 0 };
                (void)fstatat(s->packs_fd, name, &stt, AT_SYMLINK_NOFOLLOW); /* missing: size 0 */
                GROW(g->packs, g->cap_packs, g->n_packs + 1);
                g->packs[g->n_packs++] = (gc_pack){ .id = sqlite3_column_int64(st, 0),
                                                    .name = xstrdup(name),
                                                    .size = (uint64_t)stt.st_size,
                                                    .disk = disk_bytes(&stt) };
        }
        sqlite3_finalize(st);
        if (r < 0)
                return r;
        if (rc != SQLITE_DONE)
                return lfs_db_fail(s, err, "list the packs");
        if (sqlite3_prepare_v2(s->db, "SELECT id, pack, size FROM blobs", -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "list the packed blobs");
        id_list dead_all = { 0 };
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                if (sqlite3_column_bytes(st, 0) != LFS_ID_LEN)
                        continue;
                lfs_id id;
                memcpy(id.bytes, sqlite3_column_blob(st, 0), LFS_ID_LEN);
                gc_pack *p = find_pack(g, sqlite3_column_int64(st, 1));
                if (lfs_idset_has(&g->live, &id)) {
                        if (p) {
                                p->live += (uint64_t)sqlite3_column_int64(st, 2);
                                p->live_blobs++;
                        }
                } else {
                        id_list_add(&dead_all, &id);
                }
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE) {
                free(dead_all.items);
                return lfs_db_fail(s, err, "list the packed blobs");
        }
        g->result.packed_blobs = dead_all.n;
        for (size_t i = 0; i < g->n_packs; i++) {
                gc_pack *p = &g->packs[i];
                if (p->live_blobs == 0)
                        p->action = LFS_GC_PACK_REMOVED;
                else if (p->live * 100 < (uint64_t)g->repack_below * p->size)
                        p->action = LFS_GC_PACK_REWRITTEN;
        }
        g->dead_blobs = dead_all;
        return 0;
}

/* tmp/name, a killed writer's directory of temporary objects (objects.c): its files, then
 * itself (remove_files takes a directory once emptied). */
static void plan_writer_dir(gc_run *g, int tmp_fd, const char *name) {
        int fd = openat(tmp_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        DIR *d = fd < 0 ? NULL : fdopendir(fd);
        if (!d) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        struct dirent *de;
        while ((de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                add_file(g, xasprintf("tmp/%s/%s", name, de->d_name), disk_bytes(&st));
                g->result.leftovers++;
        }
        closedir(d);
        add_file(g, xasprintf("tmp/%s", name), 0);
}

/* Loose objects no root reaches, and what killed writers left: every tmp object and every
 * pack file no row names (no writer runs while gc holds the lock). */
static int plan_files(gc_run *g, lfs_error **err) {
        lfs_store *s = g->s;
        for (int i = 0; i < 256; i++) {
                char sub[3];
                snprintf(sub, sizeof(sub), "%02x", i);
                int fd = openat(s->objects_fd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
                DIR *d = fd < 0 ? NULL : fdopendir(fd);
                if (!d) {
                        if (fd >= 0)
                                close(fd);
                        if (errno == ENOENT)
                                continue;
                        return lfs_fail(err, LFS_FAILED, errno, "cannot read %s/objects/%s: %s", s->path,
                                        sub, strerror(errno));
                }
                struct dirent *de;
                while ((de = readdir(d))) {
                        char hex[LFS_HEX_LEN + 1];
                        lfs_id id;
                        if (strlen(de->d_name) != LFS_HEX_LEN - 2)
                                continue; /* not an object's name: not ours to remove */
                        memcpy(hex, sub, 2);
                        memcpy(hex + 2, de->d_name, LFS_HEX_LEN - 2 + 1);
                        if (lfs_id_from_hex(hex, &id) < 0 || lfs_idset_has(&g->live, &id))
                                continue;
                        struct stat st;
                        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                            !S_ISREG(st.st_mode))
                                continue;
                        add_file(g, xasprintf("%s/%s", sub, de->d_name), disk_bytes(&st));
                        g->result.loose_objects++;
                }
                closedir(d);
                if (i % 16 == 15)
                        report(g, "gc: listing loose objects", (uint64_t)i + 1, 256);
        }
        int tmp_fd = openat(s->objects_fd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        DIR *d = tmp_fd < 0 ? NULL : fdopendir(tmp_fd);
        if (!d && tmp_fd >= 0)
                close(tmp_fd);
        struct dirent *de;
        while (d && (de = readdir(d))) {
                struct stat st;
                if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode)) {
                        plan_writer_dir(g, dirfd(d), de->d_name);
                } else if (S_ISREG(st.st_mode)) {
                        /* A writer's from before the writers' own directories. */
                        add_file(g, xasprintf("tmp/%s", de->d_name), disk_bytes(&st));
                        g->result.leftovers++;
                }
        }
        if (d)
                closedir(d);
        int packs_fd = fcntl(s->packs_fd, F_DUPFD_CLOEXEC, 3);
        d = packs_fd < 0 ? NULL : fdopendir(packs_fd);
        if (!d) {
                if (packs_fd >= 0)
                        close(packs_fd);
                return lfs_fail(err, LFS_FAILED, errno, "cannot read %s/objects/packs", s->path);
        }
        rewinddir(d);
        _cleanup_free_ char **recorded = xcalloc(g->n_packs + 1, sizeof(*recorded));
        for (size_t i = 0; i < g->n_packs; i++)
                recorded[i] = g->packs[i].name;
        qsort(recorded, g->n_packs, sizeof(*recorded), lfs_strcmp_ptrs);
        while ((de = readdir(d))) {
                struct stat st;
                const char *name = de->d_name;
                if (name[0] == '.' ||
                    bsearch(&name, recorded, g->n_packs, sizeof(*recorded), lfs_strcmp_ptrs) ||
                    fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                add_file(g, xasprintf("packs/%s", name), disk_bytes(&st));
                g->result.leftovers++;
        }
        closedir(d);
        return 0;
}

static uint64_t round_up_block(uint64_t n) {
        return (n + 4095u) & ~(uint64_t)4095u;
}

/* The live blobs of the packs to rewrite, copied into one new pack and made durable. */
static int repack(gc_run *g, lfs_pack_writer *pw, lfs_error **err) {
        lfs_store *s = g->s;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, "SELECT id, size FROM blobs WHERE pack=?", -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "list a pack's blobs");
        lfs_object_read *items = NULL;
        size_t n = 0, cap = 0;
        int r = 0, rc = SQLITE_DONE;
        for (size_t i = 0; i < g->n_packs && rc == SQLITE_DONE; i++) {
                if (g->packs[i].action != LFS_GC_PACK_REWRITTEN)
                        continue;
                sqlite3_reset(st);
                sqlite3_bind_int64(st, 1, g->packs[i].id);
                while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                        lfs_id id;
                        if (sqlite3_column_bytes(st, 0) != LFS_ID_LEN)
                                continue;
                        memcpy(id.bytes, sqlite3_column_blob(st, 0), LFS_ID_LEN);
                        if (!lfs_idset_has(&g->live, &id))
                                continue;
                        GROW(items, cap, n + 1);
                        items[n++] =
                                (lfs_object_read){ .id = id, .size = (uint64_t)sqlite3_column_int64(st, 1) };
                }
        }
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE)
                r = lfs_db_fail(s, err, "list a pack's blobs");
        for (size_t off = 0; off < n && r == 0; off += LFS_IO_BATCH) {
                size_t k = n - off < LFS_IO_BATCH ? n - off : LFS_IO_BATCH;
                r = lfs_object_read_batch(s, items + off, k, err); /* checks each against its id */
                for (size_t i = off; i < off + k; i++) {
                        char *buf = TAKE_PTR(items[i].buf);
                        if (r == 0)
                                r = lfs_pack_writer_add(pw, &items[i].id, buf, items[i].size, err);
                        else
                                free(buf);
                }
                report(g, "gc: rewriting packs (blobs)", off + k, n);
        }
        free(items);
        if (r == 0)
                r = lfs_pack_writer_sync(pw, err);
        return r;
}

static int delete_ids(lfs_store *s, const char *sql, const id_list *ids, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(s, err, "remove unreachable objects");
        int r = 0;
        for (size_t i = 0; i < ids->n && r == 0; i++) {
                sqlite3_reset(st);
                sqlite3_bind_blob(st, 1, ids->items[i].bytes, LFS_ID_LEN, SQLITE_STATIC);
                if (sqlite3_step(st) != SQLITE_DONE)
                        r = lfs_db_fail(s, err, "remove unreachable objects");
        }
        sqlite3_finalize(st);
        return r;
}

static int delete_pack_rows(gc_run *g, const char *sql, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(g->s->db, sql, -1, &st, NULL) != SQLITE_OK)
                return lfs_db_fail(g->s, err, "remove packs");
        int r = 0;
        for (size_t i = 0; i < g->n_packs && r == 0; i++) {
                if (!g->packs[i].action)
                        continue;
                sqlite3_reset(st);
                sqlite3_bind_int64(st, 1, g->packs[i].id);
                if (sqlite3_step(st) != SQLITE_DONE)
                        r = lfs_db_fail(g->s, err, "remove packs");
        }
        sqlite3_finalize(st);
        return r;
}

/* The counts of the trees gone: this gc's, and those an older layerfs's gc (or one whose
 * connection found no table) deleted without theirs. */
#define ORPHAN_COUNTS(trees) "DELETE FROM tree_subdirs WHERE id NOT IN (SELECT id FROM " trees ")"
#define ALL_TREES "trees UNION ALL SELECT id FROM " LFS_TREES_OLD

/* Whether such counts are left: work for a gc that finds nothing else dead. */
static bool has_orphan_counts(gc_run *g) {
        if (!lfs_db_tree_subdirs_table(g->s))
                return false;
        sqlite3_stmt *st = NULL;
        bool has = sqlite3_prepare_v2(
                           g->s->db,
                           g->split ? "SELECT 1 FROM tree_subdirs WHERE id NOT IN (SELECT id FROM " ALL_TREES
                                      ") LIMIT 1"
                                    : "SELECT 1 FROM tree_subdirs WHERE id NOT IN (SELECT id FROM "
                                      "trees) LIMIT 1",
                           -1, &st, NULL) == SQLITE_OK &&
                   sqlite3_step(st) == SQLITE_ROW;
        sqlite3_finalize(st);
        return has;
}

/* One transaction: the dead rows go, the moved blobs point at the new pack. */
static int delete_rows(gc_run *g, lfs_pack_writer *pw, lfs_error **err) {
        lfs_store *s = g->s;
        int r = lfs_db_begin(s, err);
        if (r < 0)
                return r;
        if ((r = delete_ids(s, "DELETE FROM commits WHERE id=?", &g->dead_commits, err)) == 0 &&
            (r = delete_ids(s, "DELETE FROM trees WHERE id=?", &g->dead_trees, err)) == 0 &&
            (!g->split ||
             (r = delete_ids(s, "DELETE FROM " LFS_TREES_OLD " WHERE id=?", &g->dead_trees, err)) == 0) &&
            (!lfs_db_tree_subdirs_table(s) ||
             (r = lfs_db_exec(s, g->split ? ORPHAN_COUNTS(ALL_TREES) : ORPHAN_COUNTS("trees"), err)) == 0) &&
            (r = delete_ids(s, "DELETE FROM blobs WHERE id=?", &g->dead_blobs, err)) == 0 &&
            (r = delete_pack_rows(g, "DELETE FROM blobs WHERE pack=?", err)) == 0 &&
            (r = lfs_pack_writer_insert_rows(pw, err)) == 0 &&
            (r = delete_pack_rows(g, "DELETE FROM packs WHERE id=?", err)) == 0)
                r = reset_deletes(s, err);
        if (r < 0) {
                lfs_db_rollback(s);
                return r;
        }
        lfs_fault_point("gc-transaction"); /* rows deleted in a transaction not committed yet */
        if ((r = lfs_db_commit(s, err)) == 0)
                lfs_pack_writer_committed(pw);
        return r;
}

/* Compacts the database when at least a quarter of it (and 1 MiB) is free pages; a failure
 * (another connection in the way) leaves it as it is. */
static bool vacuum(lfs_store *s) {
        int64_t free_pages = 0, pages = 0;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(
                    s->db, "SELECT freelist_count, page_count FROM pragma_freelist_count, pragma_page_count",
                    -1, &st, NULL) != SQLITE_OK)
                return false;
        if (sqlite3_step(st) == SQLITE_ROW) {
                free_pages = sqlite3_column_int64(st, 0);
                pages = sqlite3_column_int64(st, 1);
        }
        sqlite3_finalize(st);
        if (free_pages < 256 || free_pages * 4 < pages ||
            sqlite3_exec(s->db, "VACUUM", NULL, NULL, NULL) != SQLITE_OK)
                return false;
        /* The rewritten pages went through the WAL: give its space back too. */
        (void)sqlite3_exec(s->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
        return true;
}

/* Removes the files no row names any more. A failure leaves the file for the next gc (it
 * holds nothing reachable); the first is reported. */
static int remove_files(gc_run *g, lfs_error **err) {
        int r = 0;
        for (size_t i = 0; i < g->n_files; i++) {
                lfs_fault_point("gc-remove"); /* the rows gone, this file and the rest not yet */
                int gone = unlinkat(g->s->objects_fd, g->files[i].path, 0);
                if (gone < 0 && errno == EISDIR)
                        gone = unlinkat(g->s->objects_fd, g->files[i].path, AT_REMOVEDIR);
                if (gone < 0 && errno != ENOENT && r == 0)
                        r = lfs_fail(err, LFS_FAILED, errno,
                                     "cannot remove %s/objects/%s: %s; it holds nothing reachable; run "
                                     "gc again once fixed",
                                     g->s->path, g->files[i].path, strerror(errno));
                if (i % 256 == 255 || i + 1 == g->n_files)
                        report(g, "gc: removing files", i + 1, g->n_files);
        }
        if (g->n_stale_pins) {
                _cleanup_close_ int dir_fd = pins_dir(g->s, false, NULL);
                for (size_t i = 0; dir_fd >= 0 && i < g->n_stale_pins; i++)
                        unlinkat(dir_fd, g->stale_pins[i], 0);
        }
        return r;
}

static int sweep(gc_run *g, lfs_error **err) {
        lfs_pack_writer *pw = lfs_pack_writer_new(g->s);
        int r = repack(g, pw, err);
        if (r == 0) {
                lfs_fault_point("gc-repacked"); /* the new pack durable, no row names it yet */
                r = delete_rows(g, pw, err);
        }
        lfs_pack_writer_free(pw); /* removes the new pack unless its rows committed */
        if (r < 0)
                return r;
        r = remove_files(g, err);
        g->result.vacuumed = vacuum(g->s);
        return r;
}

static int plan(gc_run *g, lfs_error **err) {
        int r = mark(g, err);
        if (r == 0)
                r = stopped(g, err);
        if (r == 0)
                r = find_dead_rows(g, "SELECT id, length(author) + length(message) + 104 FROM commits",
                                   &g->dead_commits, err);
        /* A tree in both tables (written again while split) is listed once. */
        g->split = lfs_db_trees_split(g->s);
        if (r == 0)
                r = find_dead_rows(
                        g,
                        g->split ? "SELECT id, length(data) FROM trees UNION SELECT id, length(data) "
                                   "FROM " LFS_TREES_OLD
                                 : "SELECT id, length(data) FROM trees",
                        &g->dead_trees, err);
        if (r == 0)
                r = plan_packs(g, err);
        if (r == 0)
                r = plan_files(g, err);
        if (r == 0) {
                lfs_fault_point("gc-planned"); /* all planned, nothing changed yet */
                r = stopped(g, err); /* the last look: what follows changes the Store */
        }
        if (r < 0)
                return r;
        g->result.commits = g->dead_commits.n;
        g->result.trees = g->dead_trees.n;
        g->result.stale_pins = g->n_stale_pins;
        for (size_t i = 0; i < g->n_packs; i++) {
                gc_pack *p = &g->packs[i];
                if (!p->action)
                        continue;
                uint64_t kept = round_up_block(p->live);
                g->result.bytes += p->disk > kept ? p->disk - kept : 0;
                /* Its file goes once no row names it (bytes counted above). */
                GROW(g->files, g->cap_files, g->n_files + 1);
                g->files[g->n_files++] = (gc_file){ .path = xasprintf("packs/%s", p->name) };
                GROW(g->result.packs, g->cap_result_packs, g->result.n_packs + 1);
                g->result.packs[g->result.n_packs++] = (lfs_gc_pack){
                        .name = xstrdup(p->name), .size = p->size, .live = p->live, .action = p->action
                };
        }
        return 0;
}

/* Table trees of a Store made before 2026-12-07 converted to the rowid shape, step by step
 * after the gc let go of gc.lock: a step holds the Store as long as a commit does, so
 * writers in between wait for one step, not for the whole conversion. Another writer
 * holding the Store past busy_timeout leaves the rest for the next gc (every state reads
 * and writes right). */
static int convert_trees(gc_run *g, lfs_error **err) {
        _cleanup_error_ lfs_error *e = NULL;
        uint64_t moved = 0;
        int r;
        while ((r = lfs_trees_convert_step(g->s, LFS_TREES_MOVE_BYTES, &moved, &e)) > 0) {
                report(g, "gc: converting table trees (trees moved)", moved, 0);
                lfs_fault_point("gc-trees-stepped"); /* a step committed, no lock held */
        }
        if (r == -EBUSY)
                return 0;
        if (r < 0 && err)
                *err = TAKE_PTR(e);
        return r;
}

static void gc_run_done(gc_run *g) {
        lfs_idset_done(&g->live);
        free(g->dead_commits.items);
        free(g->dead_trees.items);
        free(g->dead_blobs.items);
        for (size_t i = 0; i < g->n_packs; i++)
                free(g->packs[i].name);
        free(g->packs);
        for (size_t i = 0; i < g->n_files; i++)
                free(g->files[i].path);
        free(g->files);
        for (size_t i = 0; i < g->n_stale_pins; i++)
                free(g->stale_pins[i]);
        free(g->stale_pins);
        lfs_gc_result_done(&g->result);
}

void lfs_gc_result_done(lfs_gc_result *result) {
        if (!result)
                return;
        for (size_t i = 0; i < result->n_packs; i++)
                free(result->packs[i].name);
        free(result->packs);
        result->packs = NULL;
        result->n_packs = 0;
}

int lfs_store_gc(lfs_store *s, const lfs_gc_options *options, lfs_gc_result *ret, lfs_error **err) {
        return lfs_store_gc_controlled(s, options, NULL, ret, err);
}

int lfs_store_gc_controlled(lfs_store *s, const lfs_gc_options *options, const lfs_gc_control *control,
                            lfs_gc_result *ret, lfs_error **err) {
        static const lfs_gc_options defaults = { 0 };
        const lfs_gc_options *opt = options ? options : &defaults;
        if (opt->repack_below > 100)
                return lfs_fail(err, LFS_INVALID_INPUT, EINVAL,
                                "the repack threshold %u%% is out of range; give a percentage from 1 to 100 "
                                "(default %d)",
                                opt->repack_below, LFS_GC_REPACK_BELOW);
        if (s->gc_holds)
                return lfs_fail(err, LFS_BUSY, EBUSY,
                                "this handle of project '%s' is inside a writing operation, which a gc "
                                "waits for; run the gc on a handle of its own",
                                s->project);
        int fd = lock_file(s, err);
        if (fd < 0)
                return fd;
        gc_run g = { .s = s,
                     .opt = opt,
                     .repack_below = opt->repack_below ? opt->repack_below : LFS_GC_REPACK_BELOW,
                     .stop = control ? control->stop : NULL };
        /* Writers in progress end first; new ones wait for the gc. */
        int r = lock_wait(fd, LOCK_EX | LOCK_NB);
        if (r == -EWOULDBLOCK && control && control->no_wait)
                return lfs_fail(err, LFS_BUSY, EWOULDBLOCK,
                                "a writing operation of project '%s' is at work; the gc did not wait for it",
                                s->project);
        if (r == -EWOULDBLOCK) {
                report(&g, "gc: waiting for writing operations to end", 0, 0);
                r = lock_wait(fd, LOCK_EX);
        }
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, r, "cannot lock %s/" GC_LOCK_NAME ": %s", s->path,
                                strerror(-r));
        s->gc_holds = 1;
        r = plan(&g, err);
        bool work = g.dead_commits.n || g.dead_trees.n || g.dead_blobs.n || g.n_files || g.n_stale_pins ||
                    (r == 0 && has_orphan_counts(&g));
        uint64_t deletes = 0;
        if (r == 0 && !opt->dry_run && work)
                r = sweep(&g, err);
        else if (r == 0 && !opt->dry_run && (r = lfs_store_deleted_branches(s, &deletes, err)) == 0 &&
                 deletes && (r = lfs_db_begin(s, err)) == 0) {
                /* Nothing to remove: still, the deletions are counted from this gc on. */
                if ((r = reset_deletes(s, err)) == 0)
                        r = lfs_db_commit(s, err);
                else
                        lfs_db_rollback(s);
        }
        s->gc_holds = 0;
        (void)flock(fd, LOCK_UN);
        if (r == 0 && !opt->dry_run)
                r = convert_trees(&g, err);
        if (r == 0) {
                *ret = g.result;
                g.result = (lfs_gc_result){ 0 };
        }
        gc_run_done(&g);
        return r;
}
