/* SPDX-License-Identifier: MIT */
/* The Sandbox records in <home>/home.db (records.h). */
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "cgroup.h"
#include "fsize.h"
#include "numbers.h"
#include "platforms.h"
#include "records.h"
#include "rtnetlink.h"

/* The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit). */
#define PID_LIMIT (4 * 1024 * 1024)

void lfs_record_done(sandbox_record *rec) {
        free(rec->project);
        free(rec->instance);
        free(rec->boot_id);
        free(rec->dir);
        free(rec->cgroup);
        free(rec->platform);
        free(rec->runtime);
        free(rec->state);
        if (rec->dir_fd >= 0)
                close(rec->dir_fd);
        *rec = (sandbox_record){ .dir_fd = -1 };
}

char *lfs_sandbox_dir(const lfs_home *home, const char *project, int number) {
        return xasprintf("%s/sandboxes/%s-%d", home->path, project, number);
}

/* Held by every opener from its try at making home.db until that descriptor is closed. */
static pthread_mutex_t db_create_lock = PTHREAD_MUTEX_INITIALIZER;

/* home.db and its WAL files are the home owner's alone (SPEC 3): the command identity
 * reads no other Sandbox's record. Homes from before keep nothing more open.
 *
 * No descriptor of home.db, its WAL or its index is opened here to be closed: on Linux
 * closing any descriptor of a file drops all the POSIX locks the process holds on it,
 * SQLite's too, while SQLite (which counts its locks per file within the process) goes on
 * as if it held them. Another thread's transaction then lost its write lock (in the WAL
 * index) to another process. The modes are checked and set through the home's directory
 * (trusted: the owner's or root's, writable by no one else, home.c), and home.db is made
 * only when missing: a new file that no connection can have locked yet, whose descriptor
 * is closed under db_create_lock, which any other opener of this process (of any home)
 * waits for before SQLite can lock it. */
static int private_db_file(lfs_home *home, lfs_error **err) {
        int r = lfs_home_make(home, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&db_create_lock);
        int fd = openat(home->fd, "home.db", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int e = errno;
        if (fd >= 0)
                close(fd);
        pthread_mutex_unlock(&db_create_lock);
        if (fd < 0 && e != EEXIST)
                return lfs_fail(err, e == EACCES ? LFS_PERMISSION_DENIED : LFS_FAILED, e,
                                "cannot make %s/home.db: %s", home->path, strerror(e));
        /* What opening it read-write would have said, without a descriptor: SQLite's own
         * refusal names no cause ("unable to open database file"). */
        if (fd < 0 && faccessat(home->fd, "home.db", R_OK | W_OK, AT_EACCESS) < 0)
                return lfs_fail(err, errno == EACCES ? LFS_PERMISSION_DENIED : LFS_FAILED, errno,
                                "cannot open %s/home.db: %s", home->path, strerror(errno));
        static const char *const files[] = { "home.db", "home.db-wal", "home.db-shm" };
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                struct stat st;
                if (fstatat(home->fd, files[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                    (st.st_mode & 077) && st.st_uid == geteuid() &&
                    fchmodat(home->fd, files[i], 0600, 0) < 0)
                        return lfs_fail(err, LFS_FAILED, errno,
                                        "cannot make %s/%s readable by its owner alone (mode %o): %s",
                                        home->path, files[i], st.st_mode & 07777, strerror(errno));
        }
        return 0;
}

/* Space kept for home.db on the home's filesystem: a file of SPACE_RESERVE bytes,
 * allocated while there is room, given up when home.db cannot be used for lack of it.
 * Records and teardown must work on a full disk (exec, close --force, reclaim), and
 * SQLite needs new blocks for its WAL and index files whenever another opener (the
 * sqlite3 shell, an old layerfs) had them deleted. */
#define SPACE_RESERVE (512 << 10)
#define SPACE_RESERVE_NAME ".space-reserve"

static void keep_space_reserve(lfs_home *home) {
        struct statvfs sv;
        if (faccessat(home->fd, SPACE_RESERVE_NAME, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
            fstatvfs(home->fd, &sv) < 0 ||
            (uint64_t)sv.f_bavail * sv.f_frsize < 64 * (uint64_t)SPACE_RESERVE)
                return;
        _cleanup_close_ int fd = openat(home->fd, SPACE_RESERVE_NAME,
                                        O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0 && fallocate(fd, 0, 0, SPACE_RESERVE) < 0)
                unlinkat(home->fd, SPACE_RESERVE_NAME, 0);
}

static bool give_up_space_reserve(lfs_home *home) {
        return unlinkat(home->fd, SPACE_RESERVE_NAME, 0) == 0;
}

static int records_open_once(lfs_home *home, sqlite3 **ret, lfs_error **err);

/* The WAL's pages (4 KiB each) past which a commit checkpoints it: a record's change takes
 * two or three, and the first connection of every process reads the whole WAL. */
#define RECORDS_CHECKPOINT_PAGES "64"

/* No checkpoint as a connection closes. The first connection of each process rebuilds the
 * WAL's index, so the checkpoint of every CLI call's last connection copied the whole WAL
 * back with three fdatasyncs, and the next writer then restarted the WAL with two more:
 * five for an exec that only read its record, eight for a create. The WAL is checkpointed
 * when it passes RECORDS_CHECKPOINT_PAGES instead (by the commit that passes it), and then
 * restarted in place: it stays small, and its file is reused (written over, never grown
 * past that size), which a full disk needs (below). */
void lfs_records_close(sqlite3 *db) {
        if (!db)
                return;
        sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
        sqlite3_close(db);
        lfs_fsize_release();
}

static int records_open(lfs_home *home, sqlite3 **ret, lfs_error **err) {
        lfs_error *first = NULL;
        int r = records_open_once(home, ret, &first);
        if (r < 0 && give_up_space_reserve(home)) {
                lfs_error_free(first);
                return records_open_once(home, ret, err);
        }
        if (r < 0) {
                if (err)
                        *err = first;
                else
                        lfs_error_free(first);
                return r;
        }
        keep_space_reserve(home);
        return 0;
}

int lfs_records_open(lfs_home *home, sqlite3 **ret, lfs_error **err) {
        /* While the connection is open, in this thread: a write past ulimit -f (under
         * 32 KiB, the -shm file's) fails EFBIG rather than ending the CLI (fsize.h). */
        lfs_fsize_hold();
        int r = records_open(home, ret, err);
        if (r < 0)
                lfs_fsize_release();
        return r;
}

/* Whether db is in WAL mode already (false also when that cannot be read: the switch
 * then says why). */
static bool journal_is_wal(sqlite3 *db) {
        sqlite3_stmt *st = NULL;
        bool wal = sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK &&
                   sqlite3_step(st) == SQLITE_ROW &&
                   strcmp((const char *)sqlite3_column_text(st, 0) ?: "", "wal") == 0;
        sqlite3_finalize(st);
        return wal;
}

static int records_open_once(lfs_home *home, sqlite3 **ret, lfs_error **err) {
        int r = private_db_file(home, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        sqlite3 *db = NULL;
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_NOFOLLOW,
                            NULL) != SQLITE_OK) {
                r = lfs_fail(err, LFS_FAILED, EIO, "cannot open %s: %s", path,
                             db ? sqlite3_errmsg(db) : "out of memory");
                sqlite3_close(db);
                return r;
        }
        /* The WAL and its index stay when the last connection closes (emptied, not
         * deleted): making them again needs new blocks, and on a full disk every call
         * then failed with "disk I/O error" -- exec and close --force too. Kept, they are
         * written over in place (a record's change takes a few pages of them). */
        int persist = 1;
        sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
        sqlite3_busy_timeout(db, 10000);
        /* A new home.db is switched to WAL by its first openers. Two switching at once can
         * each hold the read lock the other's switch needs; SQLite then fails one at once
         * with "database is locked", without the busy wait (concurrent 'sandbox create's
         * on a new home failed so, tests/load). Whoever finds it not yet in WAL switches it
         * holding flock on the home's directory (nothing else flocks it), not on home.db:
         * closing a descriptor of home.db would drop this process's POSIX locks on it
         * (private_db_file). Once in WAL (kept in the file) nobody takes the flock. */
        _cleanup_close_ int switching = -1;
        if (!journal_is_wal(db)) {
                switching = openat(home->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                while (switching >= 0 && flock(switching, LOCK_EX) < 0 && errno == EINTR)
                        ;
        }
        char *msg = NULL;
        /* synchronous=NORMAL: a change is in the WAL when its transaction ends (atomic, and
         * durable against any crash of a process: every kill the tests and LAYERFS_FAULT
         * make), and the WAL reaches the disk at each checkpoint. FULL synced the WAL at
         * every commit, for records that only a power loss could lose, after which every
         * daemon they name is dead anyway (another boot id): a record lost that way leaves
         * a directory that the next create of its number removes, one that comes back is
         * reclaimed (docs/runtime.md, "Records and liveness"). The Stores stay FULL. */
        if (sqlite3_exec(
                    db,
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                    " PRAGMA wal_autocheckpoint=" RECORDS_CHECKPOINT_PAGES ";"
                    "CREATE TABLE IF NOT EXISTS sandboxes(project TEXT NOT NULL, number INTEGER NOT NULL,"
                    " platform TEXT NOT NULL, runtime TEXT NOT NULL, image TEXT, pid INTEGER,"
                    " start_time INTEGER, boot_id TEXT, dir TEXT NOT NULL, state TEXT NOT NULL,"
                    " cgroup TEXT, socket TEXT, instance TEXT, memory INTEGER, pids INTEGER, cpus REAL,"
                    " disk INTEGER, network TEXT, net_base INTEGER, PRIMARY KEY(project, number))"
                    " WITHOUT ROWID;",
                    NULL, NULL, &msg) != SQLITE_OK) {
                r = lfs_fail(err, LFS_FAILED, EIO, "cannot use %s: %s%s", path, msg ? msg : "?",
                             lfs_fsize_hint(sqlite3_system_errno(db)));
                sqlite3_free(msg);
                sqlite3_close(db);
                return r;
        }
        /* Columns added since the table was first made: platform (a row without one reads
         * as the platform its runtime implies), cgroup and socket, instance, the limits
         * (NULL: none), the network (NULL: its runtime's default) and its addresses, the
         * key of a pooled Sandbox (NULL for every other). */
        static const struct {
                const char *probe, *add;
        } columns[] = {
                { "SELECT platform FROM sandboxes LIMIT 0",
                  "ALTER TABLE sandboxes ADD COLUMN platform TEXT;" },
                { "SELECT cgroup, socket FROM sandboxes LIMIT 0",
                  "ALTER TABLE sandboxes ADD COLUMN cgroup TEXT; ALTER TABLE sandboxes ADD COLUMN socket TEXT;" },
                { "SELECT instance FROM sandboxes LIMIT 0",
                  "ALTER TABLE sandboxes ADD COLUMN instance TEXT;" },
                { "SELECT id_base FROM sandboxes LIMIT 0",
                  "ALTER TABLE sandboxes ADD COLUMN id_base INTEGER;" },
                { "SELECT memory, pids, cpus, disk FROM sandboxes LIMIT 0",
                  "ALTER TABLE sandboxes ADD COLUMN memory INTEGER; ALTER TABLE sandboxes ADD COLUMN pids "
                  "INTEGER; ALTER TABLE sandboxes ADD COLUMN cpus REAL; ALTER TABLE sandboxes ADD COLUMN disk "
                  "INTEGER;" },
                { "SELECT network, net_base FROM sandboxes LIMIT 0",
                  "ALTER TABLE sandboxes ADD COLUMN network TEXT; ALTER TABLE sandboxes ADD COLUMN net_base "
                  "INTEGER;" },
                { "SELECT pool FROM sandboxes LIMIT 0", "ALTER TABLE sandboxes ADD COLUMN pool TEXT;" },
        };
        for (size_t i = 0; i < ELEMENTSOF(columns); i++) {
                sqlite3_stmt *probe = NULL;
                if (sqlite3_prepare_v2(db, columns[i].probe, -1, &probe, NULL) != SQLITE_OK)
                        sqlite3_exec(db, columns[i].add, NULL, NULL, NULL);
                sqlite3_finalize(probe);
        }
        *ret = db;
        return 0;
}

static int db_fail(sqlite3 *db, lfs_error **err) {
        return lfs_fail(err, LFS_FAILED, EIO, "the home's records: %s%s", sqlite3_errmsg(db),
                        lfs_fsize_hint(sqlite3_system_errno(db)));
}

static int step_done(sqlite3 *db, sqlite3_stmt *st, lfs_error **err) {
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : db_fail(db, err);
}

/* ---- who is alive ---- */

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot.
 * -ESRCH for a process that has exited but is not reaped yet (a zombie): a daemon whose
 * parent is an init that reaps slowly must count as dead as soon as it is. */
int lfs_process_start_time(pid_t pid, unsigned long long *ret) {
        char path[64], buf[1024];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t k = read(fd, buf, sizeof(buf) - 1);
        if (k <= 0)
                return -EIO;
        buf[k] = 0;
        const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
        if (!p)
                return -EIO;
        if (p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'))
                return -ESRCH;
        unsigned long long v = 0;
        for (int field = 2; *p && field < 22; p++)
                if (*p == ' ')
                        field++;
        if (sscanf(p, "%llu", &v) != 1)
                return -EIO;
        *ret = v;
        return 0;
}

static char boot_id_text[64];
static pthread_once_t boot_id_once = PTHREAD_ONCE_INIT;

static void read_boot_id(void) {
        lfs_boot_id_read(boot_id_text, sizeof(boot_id_text));
}

/* This boot's id, read once per process: it changes only with a new boot, and every
 * record's liveness check asks for it. */
static char *boot_id(void) {
        pthread_once(&boot_id_once, read_boot_id);
        return xstrdup(boot_id_text);
}

bool lfs_record_alive(const sandbox_record *rec) {
        unsigned long long start = 0;
        _cleanup_free_ char *boot = boot_id();
        return rec->pid > 0 && rec->start_time > 0 && rec->boot_id && *boot && !strcmp(rec->boot_id, boot) &&
               lfs_process_start_time(rec->pid, &start) == 0 && start == rec->start_time;
}

/* ---- checking a record ---- */

#define RECORD_COLUMNS                                                                                         \
        "project, number, pid, start_time, boot_id, dir, cgroup, platform, state, runtime, instance, socket, " \
        "id_base, memory, pids, cpus, disk, network, net_base"
enum {
        COL_PROJECT,
        COL_NUMBER,
        COL_PID,
        COL_START,
        COL_BOOT,
        COL_DIR,
        COL_CGROUP,
        COL_PLATFORM,
        COL_STATE,
        COL_RUNTIME,
        COL_INSTANCE,
        COL_SOCKET,
        COL_ID_BASE,
        COL_MEMORY,
        COL_PIDS,
        COL_CPUS,
        COL_DISK,
        COL_NETWORK,
        COL_NET_BASE
};

static const char *text_or_null(sqlite3_stmt *st, int col) {
        return sqlite3_column_type(st, col) == SQLITE_TEXT ? (const char *)sqlite3_column_text(st, col)
                                                           : NULL;
}

static bool only_chars(const char *s, const char *set, size_t min, size_t max) {
        size_t len = strlen(s);
        return len >= min && len <= max && strspn(s, set) == len;
}

static bool one_of(const char *s, const char *const *names) {
        for (; s && *names; names++)
                if (!strcmp(s, *names))
                        return true;
        return false;
}

/* What a column holds, for messages: its text, its number, or its kind. */
static char *column_shown(sqlite3_stmt *st, int col) {
        switch (sqlite3_column_type(st, col)) {
        case SQLITE_NULL:
                return xstrdup("nothing");
        case SQLITE_INTEGER:
                return xasprintf("%lld", (long long)sqlite3_column_int64(st, col));
        case SQLITE_TEXT:
                return xasprintf("'%s'", (const char *)sqlite3_column_text(st, col));
        default:
                return xstrdup("a value of the wrong kind");
        }
}

static int refuse(lfs_home *home, sqlite3_stmt *st, int col, const char *rule, lfs_error **err) {
        static const char *const names[] = { "project",  "number", "pid",      "start_time", "boot_id",
                                             "dir",      "cgroup", "platform", "state",      "runtime",
                                             "instance", "socket", "id_base",  "memory",     "pids",
                                             "cpus",     "disk",   "network",  "net_base" };
        _cleanup_free_ char *value = column_shown(st, col), *project = column_shown(st, COL_PROJECT),
                            *number = column_shown(st, COL_NUMBER);
        return lfs_fail(
                err, LFS_INVALID_INPUT, 0,
                "the record of sandbox %s of project %s in %s/home.db has %s %s, but %s; nothing was "
                "touched; remove or fix the record",
                number, project, home->path, names[col], value, rule);
}

/* SPEC 4: a record is used, signalled or deleted only if every field is what a create
 * of this home writes: a project name, a number from 1, a known state, platform and
 * runtime, a pid the kernel could hand out, and the directory, cgroup and socket exactly
 * where this home puts them (the cgroup tagged by this home). A record that is not
 * is refused (InvalidInput naming the field and the value) and nothing it names is
 * touched. */
static char *cgroup_root_or_null(void) {
        char *root = NULL;
        lfs_error *why = NULL;
        if (lfs_cgroup_root(&root, &why) < 0)
                lfs_error_free(why);
        return root;
}

/* cgroup_root: this host's LayerFS cgroup root as lfs_cgroup_root finds it, NULL when it
 * has none (a scan of every record finds it once: from the mount table, that was a read
 * of the whole of /proc/self/mountinfo per record). */
static int record_check(lfs_home *home, sqlite3_stmt *st, const char *cgroup_root, sandbox_record *ret,
                        lfs_error **err) {
        static const char *const states[] = { "starting", "running", "removing", "pooled", NULL };
        const char *project = text_or_null(st, COL_PROJECT);
        if (!project || lfs_check_project_name(project, NULL) < 0)
                return refuse(home, st, COL_PROJECT, "that is not a project name", err);
        long long number = sqlite3_column_int64(st, COL_NUMBER);
        if (sqlite3_column_type(st, COL_NUMBER) != SQLITE_INTEGER || number < 1 || number > INT_MAX)
                return refuse(home, st, COL_NUMBER, "Sandboxes are numbered from 1 to 2147483647", err);
        const char *state = text_or_null(st, COL_STATE);
        if (!one_of(state, states))
                return refuse(home, st, COL_STATE, "a record is starting, running, pooled or removing", err);
        bool owned = sqlite3_column_type(st, COL_PID) != SQLITE_NULL;
        long long pid = sqlite3_column_int64(st, COL_PID);
        if ((owned && (sqlite3_column_type(st, COL_PID) != SQLITE_INTEGER || pid < 1 || pid > PID_LIMIT)) ||
            (!owned && strcmp(state, "removing")))
                return refuse(home, st, COL_PID, "an owner is a process id from 1 to 4194304", err);
        long long start = sqlite3_column_int64(st, COL_START);
        if (owned ? sqlite3_column_type(st, COL_START) != SQLITE_INTEGER || start < 0
                  : sqlite3_column_type(st, COL_START) != SQLITE_NULL)
                return refuse(home, st, COL_START, "it is the owner's start time in clock ticks", err);
        const char *boot = text_or_null(st, COL_BOOT);
        if (owned ? !boot || !only_chars(boot, "0123456789abcdef-", 0, 64)
                  : sqlite3_column_type(st, COL_BOOT) != SQLITE_NULL)
                return refuse(home, st, COL_BOOT, "it is the owner's boot id", err);
        const char *runtime = text_or_null(st, COL_RUNTIME);
        const lfs_runtime *rt = lfs_runtime_find(runtime);
        if (!rt)
                return refuse(home, st, COL_RUNTIME, "the runtimes are native, namespaces, docker and vm",
                              err);
        const char *platform = text_or_null(st, COL_PLATFORM);
        if (sqlite3_column_type(st, COL_PLATFORM) != SQLITE_NULL && !lfs_platform_find(platform))
                return refuse(home, st, COL_PLATFORM, "that is not one of the eight platforms", err);
        const char *instance = text_or_null(st, COL_INSTANCE);
        if (sqlite3_column_type(st, COL_INSTANCE) != SQLITE_NULL &&
            (!instance || !only_chars(instance, "0123456789abcdef", 32, 32)))
                return refuse(home, st, COL_INSTANCE, "an instance is 32 hex digits", err);
        _cleanup_free_ char *dir = lfs_sandbox_dir(home, project, (int)number);
        const char *rec_dir = text_or_null(st, COL_DIR);
        if (!rec_dir || strcmp(rec_dir, dir)) {
                _cleanup_free_ char *rule = xasprintf("this home puts that Sandbox in '%s'", dir);
                return refuse(home, st, COL_DIR, rule, err);
        }
        _cleanup_free_ char *socket = xasprintf("%s/control.sock", dir);
        if (sqlite3_column_type(st, COL_SOCKET) != SQLITE_NULL &&
            strcmp(text_or_null(st, COL_SOCKET) ?: "", socket)) {
                _cleanup_free_ char *rule = xasprintf("its socket is '%s'", socket);
                return refuse(home, st, COL_SOCKET, rule, err);
        }
        const char *cgroup = text_or_null(st, COL_CGROUP);
        if (sqlite3_column_type(st, COL_CGROUP) != SQLITE_NULL) {
                if (!cgroup_root)
                        return lfs_fail(
                                err, LFS_UNSUPPORTED, ENOTSUP,
                                "sandbox %lld of project '%s' has a cgroup (%s) but this host has no "
                                "cgroup2 to check it against; nothing was touched",
                                number, project, cgroup ? cgroup : "?");
                _cleanup_free_ char *want =
                        lfs_cgroup_sandbox_path(cgroup_root, home->path, project, (int)number);
                if (!cgroup || strcmp(cgroup, want)) {
                        _cleanup_free_ char *rule = xasprintf(
                                "this home puts its cgroup at '%s' (is LAYERFS_CGROUP_ROOT the one "
                                "it was made with?)",
                                want);
                        return refuse(home, st, COL_CGROUP, rule, err);
                }
        }
        /* Its ids: the range of a runtime that gives each Sandbox one (namespaces), 65536 ids
         * from a multiple of 65536 above 0; the others have none. */
        bool has_ids = rt->owns_id_range;
        long long id_base = sqlite3_column_int64(st, COL_ID_BASE);
        if (has_ids ? sqlite3_column_type(st, COL_ID_BASE) != SQLITE_INTEGER || id_base < 65536 ||
                              id_base > (long long)UINT32_MAX - 65535 || id_base % 65536
                    : sqlite3_column_type(st, COL_ID_BASE) != SQLITE_NULL)
                return refuse(home, st, COL_ID_BASE,
                              has_ids ? "a namespaces Sandbox's ids start at a multiple of 65536 below 2^32"
                                      : "only a namespaces Sandbox has ids of its own",
                              err);
        /* The limits: none (NULL), or what a create accepted (lfs_check_limits' ranges). */
        lfs_sandbox_limits limits = { 0 };
        const struct {
                int col;
                uint64_t max, *value;
        } whole[] = { { COL_MEMORY, LFS_MAX_MEMORY, &limits.memory },
                      { COL_PIDS, LFS_MAX_PIDS, &limits.pids },
                      { COL_DISK, LFS_MAX_DISK, &limits.disk } };
        for (size_t i = 0; i < ELEMENTSOF(whole); i++) {
                int col = whole[i].col;
                sqlite3_int64 v = sqlite3_column_int64(st, col);
                if (sqlite3_column_type(st, col) == SQLITE_NULL)
                        continue;
                if (sqlite3_column_type(st, col) != SQLITE_INTEGER || v < 1 || (uint64_t)v > whole[i].max)
                        return refuse(home, st, col, "a limit is nothing or a whole number a create accepts",
                                      err);
                *whole[i].value = (uint64_t)v;
        }
        if (sqlite3_column_type(st, COL_CPUS) != SQLITE_NULL) {
                double cpus = sqlite3_column_double(st, COL_CPUS);
                if ((sqlite3_column_type(st, COL_CPUS) != SQLITE_FLOAT &&
                     sqlite3_column_type(st, COL_CPUS) != SQLITE_INTEGER) ||
                    !(cpus >= LFS_MIN_CPUS && cpus <= LFS_MAX_CPUS))
                        return refuse(home, st, COL_CPUS,
                                      "a limit of CPUs is nothing or a number a create accepts", err);
                limits.cpus = cpus;
        }
        /* The network: its runtime's default (NULL, records from before networks: native's is
         * the host's, namespaces' none), or one it gives; a private one's /30 is where a
         * create puts it (lfs_net_base_valid), the others have none. */
        lfs_network network = rt->default_network;
        if (sqlite3_column_type(st, COL_NETWORK) != SQLITE_NULL &&
            (!lfs_network_from_name(text_or_null(st, COL_NETWORK), &network) ||
             !(rt->networks & LFS_NETWORK_BIT(network))))
                return refuse(home, st, COL_NETWORK, "that is not a network its runtime gives a Sandbox",
                              err);
        bool private_net = network == LFS_NETWORK_PRIVATE;
        long long net_base = sqlite3_column_int64(st, COL_NET_BASE);
        if (private_net ? sqlite3_column_type(st, COL_NET_BASE) != SQLITE_INTEGER ||
                                  !lfs_net_base_valid(net_base)
                        : sqlite3_column_type(st, COL_NET_BASE) != SQLITE_NULL)
                return refuse(home, st, COL_NET_BASE,
                              private_net
                                      ? "a private network's addresses are a /30 (the number of its first "
                                        "address, a multiple of 4) outside 0.0.0.0/8, 127.0.0.0/8 and "
                                        "224.0.0.0/3"
                                      : "only a private network has addresses",
                              err);
        const char *placement = "host";
        lfs_placement(&placement, NULL);
        *ret = (sandbox_record){
                .project = xstrdup(project),
                .number = (int)number,
                .instance = instance ? xstrdup(instance) : NULL,
                .pid = owned ? (pid_t)pid : 0,
                .start_time = owned ? (unsigned long long)start : 0,
                .boot_id = boot ? xstrdup(boot) : NULL,
                .dir = TAKE_PTR(dir),
                .cgroup = cgroup ? xstrdup(cgroup) : NULL,
                .platform = xstrdup(lfs_record_platform(platform, runtime, placement)),
                .runtime = xstrdup(runtime),
                .id_base = has_ids ? (uint32_t)id_base : 0,
                .state = xstrdup(state),
                .limits = limits,
                .network = network,
                .net_base = private_net ? (uint32_t)net_base : 0,
                .dir_fd = -1,
        };
        return 0;
}

int lfs_record_read(lfs_home *home, sqlite3 *db, const char *project, int number, sandbox_record *ret,
                    lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "SELECT " RECORD_COLUMNS " FROM sandboxes WHERE project=? AND number=?",
                               -1, &st, NULL) != SQLITE_OK)
                return db_fail(db, err);
        sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, number);
        _cleanup_free_ char *root = cgroup_root_or_null();
        int r = sqlite3_step(st) != SQLITE_ROW
                        ? lfs_fail(
                                  err, LFS_NO_SUCH_SANDBOX, ENOENT,
                                  "project '%s' has no sandbox %d; 'layerfs project list_sandboxes' shows them",
                                  project, number)
                        : record_check(home, st, root, ret, err);
        sqlite3_finalize(st);
        return r;
}

int lfs_records_each(lfs_home *home, sqlite3 *db, lfs_record_fn fn, void *userdata, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "SELECT " RECORD_COLUMNS " FROM sandboxes ORDER BY project, number", -1,
                               &st, NULL) != SQLITE_OK)
                return db_fail(db, err);
        /* Read first, acted on after: fn may write to the table. */
        typedef struct row {
                sandbox_record rec;
                lfs_error *why;
                char *project;
                long long number;
        } row;
        row *rows = NULL;
        size_t n = 0, cap = 0;
        _cleanup_free_ char *root = cgroup_root_or_null();
        while (sqlite3_step(st) == SQLITE_ROW) {
                GROW(rows, cap, n + 1);
                row *r = &rows[n++];
                r->rec.dir_fd = -1;
                if (record_check(home, st, root, &r->rec, &r->why) < 0)
                        r->rec.project = NULL;
                const char *project = (const char *)sqlite3_column_text(st, COL_PROJECT);
                r->project = xstrdup(project ? project : "");
                r->number = sqlite3_column_int64(st, COL_NUMBER);
        }
        sqlite3_finalize(st);
        for (size_t i = 0; i < n; i++) {
                fn(userdata, rows[i].why ? NULL : &rows[i].rec, rows[i].project, rows[i].number,
                   rows[i].why);
                lfs_error_free(rows[i].why);
                lfs_record_done(&rows[i].rec);
                free(rows[i].project);
        }
        free(rows);
        return 0;
}

/* ---- claiming, owning, deleting ---- */

static char *new_instance(void) {
        unsigned char raw[16];
        size_t got = 0;
        while (got < sizeof(raw)) {
                ssize_t k = getrandom(raw + got, sizeof(raw) - got, 0);
                if (k < 0 && errno != EINTR)
                        abort(); /* the kernel has no randomness for us: nothing sensible to do */
                if (k > 0)
                        got += (size_t)k;
        }
        char *hex = xmalloc(2 * sizeof(raw) + 1);
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(hex + 2 * i, 3, "%02x", raw[i]);
        return hex;
}

/* ---- a namespaces Sandbox's ids ---- */

#define SANDBOX_IDS 65536u

int lfs_id_range(uint32_t *ret_first, uint32_t *ret_count, lfs_error **err) {
        const char *v = getenv("LAYERFS_ID_RANGE");
        if (!v) {
                *ret_first = 1u << 30;
                *ret_count = 1u << 30;
                return 0;
        }
        const char *colon = strchr(v, ':');
        _cleanup_free_ char *first_text = colon ? xasprintf("%.*s", (int)(colon - v), v) : NULL;
        uint64_t first, count;
        if (!colon ||
            lfs_parse_whole("the first id of LAYERFS_ID_RANGE", first_text, SANDBOX_IDS,
                            UINT32_MAX - SANDBOX_IDS + 1, &first, NULL) < 0 ||
            lfs_parse_whole("the count of LAYERFS_ID_RANGE", colon + 1, SANDBOX_IDS, UINT32_MAX, &count,
                            NULL) < 0 ||
            first % SANDBOX_IDS || count % SANDBOX_IDS || first + count > (uint64_t)UINT32_MAX)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "LAYERFS_ID_RANGE='%s' is not FIRST:COUNT with both multiples of 65536, "
                                "FIRST from 65536 and FIRST+COUNT below 4294967295 (the default is "
                                "1073741824:1073741824)",
                                v);
        *ret_first = (uint32_t)first;
        *ret_count = (uint32_t)count;
        return 0;
}

/* The /etc/subuid or /etc/subgid entry (user:first:count) that overlaps [base, base+65536),
 * for messages; NULL if none. */
static char *subid_overlap(const char *file, uint32_t base) {
        _cleanup_fclose_ FILE *f = fopen(file, "re");
        char line[512];
        while (f && fgets(line, sizeof(line), f)) {
                char user[256];
                unsigned long long first, count;
                if (sscanf(line, "%255[^:]:%llu:%llu", user, &first, &count) != 3)
                        continue;
                if (first < (unsigned long long)base + SANDBOX_IDS && base < first + count)
                        return xasprintf("%s entry %s:%llu:%llu", file, user, first, count);
        }
        return NULL;
}

/* Which ranges of 65536 ids in [first, first+count) a process of the host runs in: in_use[i]
 * for the range at first + i*65536. Every home has the same default LAYERFS_ID_RANGE, and
 * every process of a running namespaces Sandbox of any home (its init first of all) runs
 * with ids of its range: a range claimed by another home (or by another user namespace
 * runtime) shows here, which this home's records do not say.
 * A process's ids are read from the owner of its /proc/<pid> directory, which is its
 * effective uid and gid whether it is dumpable or not (fs/proc/base.c, task_dump_owner:
 * the rule for non-dumpable tasks spares the directory). A stat costs 2.5 us here where
 * reading /proc/<pid>/status cost 16 us, and create looks at every process of the host;
 * only a process in the range is read further, for its state: a zombie (a closed
 * Sandbox's init until the host's init reaps it) holds nothing any more. The other ids
 * (real, saved, filesystem) of a process in a user namespace that maps only a Sandbox's
 * range are in that range too. */
static void host_ranges_in_use(uint32_t first, uint32_t count, bool *in_use) {
        DIR *proc = opendir("/proc");
        struct dirent *de;
        while (proc && (de = readdir(proc))) {
                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                struct stat st;
                unsigned long long start;
                if (fstatat(dirfd(proc), de->d_name, &st, 0) < 0)
                        continue; /* gone meanwhile */
                const unsigned long ids[] = { st.st_uid, st.st_gid };
                for (size_t i = 0; i < ELEMENTSOF(ids); i++)
                        if (ids[i] >= first && ids[i] - first < count &&
                            lfs_process_start_time((pid_t)atoi(de->d_name), &start) == 0)
                                in_use[(ids[i] - first) / SANDBOX_IDS] = true;
        }
        if (proc)
                closedir(proc);
}

/* Where the host-wide locks of the ranges are: one file per range, <base>, in root's
 * directory (the BPF watcher keeps its offsets in /run/layerfs too): the id ranges' in
 * ids/, the private networks' /30s in net/. */
#define RANGE_LOCKS "/run/layerfs"
#define ID_LOCKS RANGE_LOCKS "/ids"
#define NET_LOCKS RANGE_LOCKS "/net"

/* The lock of the range at base in the directory locks_fd (named dir), taken without
 * waiting: 0 and *ret_fd, or 1 when another create or a running Sandbox (of any home)
 * holds it. A home's records are its own, and what a range is used for shows among the
 * host's processes or addresses only once the Sandbox is made: two homes' creates at one
 * instant would take one range but for this lock, which the claim takes and keeps until
 * the range's use shows (an id range's, by the Sandbox's init for its life,
 * LFS_INIT_HOLD_FD; a /30's, by the create until the host's end has its address). */
static int hold_range(int locks_fd, const char *dir, uint64_t base, int *ret_fd, lfs_error **err) {
        char name[32];
        snprintf(name, sizeof(name), "%" PRIu64, base);
        _cleanup_close_ int fd = openat(locks_fd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot open the range's lock %s/%s: %s", dir, name,
                                strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        return 1;
                return lfs_fail(err, LFS_FAILED, errno, "cannot lock %s/%s: %s", dir, name, strerror(errno));
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The directory of range locks dir (RANGE_LOCKS/NAME), made if missing: root's alone, or
 * refused (a lock anyone could take or hold would let them keep a range from every home,
 * or give one to two). */
static int open_range_locks(const char *dir, int *ret_fd, lfs_error **err) {
        if ((mkdir(RANGE_LOCKS, 0700) < 0 && errno != EEXIST) || (mkdir(dir, 0700) < 0 && errno != EEXIST))
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s: %s", dir, strerror(errno));
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot open %s: %s", dir, strerror(errno));
        if (st.st_uid != 0 || (st.st_mode & 0077))
                return lfs_fail(err, LFS_FAILED, EPERM,
                                "%s is not root's alone (owner %u, mode %04o); remove it, and a create "
                                "makes it again",
                                dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* The lowest range of the home's that no record holds, no process of the host runs in,
 * no subordinate id entry overlaps and no other create or Sandbox holds the lock of,
 * inside the claim's transaction; *ret_hold is that lock. */
static int claim_ids(sqlite3 *db, uint32_t *ret, int *ret_hold, lfs_error **err) {
        uint32_t first = 0, count = 0;
        int r = lfs_id_range(&first, &count, err);
        if (r < 0)
                return r;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(
                    db, "SELECT 1 FROM sandboxes WHERE typeof(id_base)='integer' AND id_base=? LIMIT 1", -1,
                    &st, NULL) != SQLITE_OK)
                return lfs_fail(err, LFS_FAILED, EIO, "the home's records: %s%s", sqlite3_errmsg(db),
                                lfs_fsize_hint(sqlite3_system_errno(db)));
        _cleanup_free_ char *skipped = NULL;
        _cleanup_free_ bool *in_use = xcalloc(count / SANDBOX_IDS, sizeof(bool));
        _cleanup_close_ int locks_fd = -1;
        if ((r = open_range_locks(ID_LOCKS, &locks_fd, err)) < 0) {
                sqlite3_finalize(st);
                return r;
        }
        host_ranges_in_use(first, count, in_use);
        r = -ENOSPC;
        for (uint64_t base = first; base + SANDBOX_IDS <= (uint64_t)first + count; base += SANDBOX_IDS) {
                if (in_use[(base - first) / SANDBOX_IDS])
                        continue;
                sqlite3_reset(st);
                sqlite3_bind_int64(st, 1, (sqlite3_int64)base);
                if (sqlite3_step(st) == SQLITE_ROW)
                        continue;
                char *overlap = subid_overlap("/etc/subuid", (uint32_t)base);
                if (!overlap)
                        overlap = subid_overlap("/etc/subgid", (uint32_t)base);
                if (overlap) {
                        if (!skipped)
                                skipped = overlap;
                        else
                                free(overlap);
                        continue;
                }
                int held = hold_range(locks_fd, ID_LOCKS, base, ret_hold, err);
                if (held == 1)
                        continue;
                r = held < 0 ? held : 0;
                if (r == 0)
                        *ret = (uint32_t)base;
                break;
        }
        sqlite3_finalize(st);
        if (r < 0 && r != -ENOSPC)
                return r;
        if (r < 0)
                return lfs_fail(
                        err, LFS_LIMIT_REACHED, ENOSPC,
                        "no range of 65536 host ids is free for a namespaces Sandbox in this home's "
                        "LAYERFS_ID_RANGE %u:%u (every one is another Sandbox's, another create's, a host process's%s%s); close a Sandbox "
                        "or give LAYERFS_ID_RANGE a wider range that no /etc/subuid entry overlaps",
                        first, count, skipped ? ", or overlaps the " : "", skipped ? skipped : "");
        return 0;
}

/* ---- a private network's addresses ---- */

/* The default LAYERFS_NET_RANGE: 169.254.64.0/18, link-local addresses (which routers do
 * not forward), away from 169.254.169.254 and 169.254.170.2 (the clouds' metadata
 * services): 4096 Sandboxes' /30s. */
#define NET_RANGE_DEFAULT "169.254.64.0/18"

bool lfs_net_base_valid(long long base) {
        return base > 0 && base <= (long long)UINT32_MAX - 3 && base % LFS_NETWORK_SIZE == 0 &&
               (base >> 24) != 0 && (base >> 24) != 127 && (base >> 29) != 7;
}

int lfs_net_range(uint32_t *ret_first, uint32_t *ret_count, lfs_error **err) {
        const char *v = getenv("LAYERFS_NET_RANGE");
        const char *text = v ? v : NET_RANGE_DEFAULT;
        unsigned a, b, c, d, prefix;
        char end;
        if (sscanf(text, "%3u.%3u.%3u.%3u/%2u%c", &a, &b, &c, &d, &prefix, &end) == 5 && a < 256 &&
            b < 256 && c < 256 && d < 256 && prefix >= 8 && prefix <= LFS_NETWORK_PREFIX &&
            strspn(text, "0123456789./") == strlen(text)) {
                uint32_t first = a << 24 | b << 16 | c << 8 | d;
                uint32_t count = 1u << (32 - prefix);
                if (first % count == 0 && lfs_net_base_valid(first) &&
                    lfs_net_base_valid(first + count - 4)) {
                        *ret_first = first;
                        *ret_count = count;
                        return 0;
                }
        }
        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                        "LAYERFS_NET_RANGE='%s' is not an IPv4 network A.B.C.D/N with N from 8 to 30, its "
                        "address the network's first, outside 0.0.0.0/8, 127.0.0.0/8 and 224.0.0.0/3 (the "
                        "default is " NET_RANGE_DEFAULT ")",
                        text);
}

/* The lowest /30 of the home's LAYERFS_NET_RANGE that no record holds, that holds no
 * address of the host's (another home's Sandbox, a link of the host's own) and whose lock
 * no other create holds, inside the claim's transaction; *ret_hold is that lock. */
static int claim_net(sqlite3 *db, uint32_t *ret, int *ret_hold, lfs_error **err) {
        uint32_t first = 0, count = 0;
        int r = lfs_net_range(&first, &count, err);
        if (r < 0)
                return r;
        _cleanup_free_ uint32_t *host = NULL;
        size_t n_host = 0;
        lfs_rtnl *nl = NULL;
        if ((r = lfs_rtnl_open(&nl)) == 0)
                r = lfs_rtnl_ipv4_addresses(nl, &host, &n_host);
        lfs_rtnl_close(nl);
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, -r, "cannot read the host's IPv4 addresses: %s",
                                strerror(-r));
        _cleanup_close_ int locks_fd = -1;
        if ((r = open_range_locks(NET_LOCKS, &locks_fd, err)) < 0)
                return r;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(
                    db, "SELECT 1 FROM sandboxes WHERE typeof(net_base)='integer' AND net_base=? LIMIT 1",
                    -1, &st, NULL) != SQLITE_OK)
                return db_fail(db, err);
        r = -ENOSPC;
        uint32_t taken_by_host = 0;
        for (uint64_t base = first; base + LFS_NETWORK_SIZE <= (uint64_t)first + count;
             base += LFS_NETWORK_SIZE) {
                sqlite3_reset(st);
                sqlite3_bind_int64(st, 1, (sqlite3_int64)base);
                if (sqlite3_step(st) == SQLITE_ROW)
                        continue;
                bool used = false;
                for (size_t i = 0; i < n_host && !used; i++)
                        used = host[i] >= base && host[i] < base + LFS_NETWORK_SIZE;
                if (used) {
                        taken_by_host++;
                        continue;
                }
                int held = hold_range(locks_fd, NET_LOCKS, base, ret_hold, err);
                if (held == 1)
                        continue;
                r = held < 0 ? held : 0;
                if (r == 0)
                        *ret = (uint32_t)base;
                break;
        }
        sqlite3_finalize(st);
        if (r < 0 && r != -ENOSPC)
                return r;
        if (r < 0) {
                char text[16];
                return lfs_fail(
                        err, LFS_LIMIT_REACHED, ENOSPC,
                        "no /30 is free for a private network in this home's LAYERFS_NET_RANGE %s/%d "
                        "(%u of them; %u hold an address of the host's, the others are other "
                        "Sandboxes' or other creates'); close a Sandbox or give LAYERFS_NET_RANGE a "
                        "wider range",
                        lfs_ipv4_text(first, text), 32 - __builtin_ctz(count), count / LFS_NETWORK_SIZE,
                        taken_by_host);
        }
        return 0;
}

/* The other record (project and number) whose instance starts with the same 12 digits,
 * which name a private network's link on the host; false when there is none. */
static bool link_name_taken(sqlite3 *db, const char *instance, const char *project, int number,
                            char **ret_other) {
        sqlite3_stmt *st;
        if (!instance ||
            sqlite3_prepare_v2(db,
                               "SELECT project, number FROM sandboxes WHERE substr(instance, 1, 12) = "
                               "substr(?, 1, 12) AND NOT (project IS ? AND number IS ?) LIMIT 1",
                               -1, &st, NULL) != SQLITE_OK)
                return false;
        sqlite3_bind_text(st, 1, instance, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, project, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 3, number);
        bool taken = sqlite3_step(st) == SQLITE_ROW;
        if (taken && ret_other)
                *ret_other =
                        xasprintf("sandbox %lld of project '%s'", (long long)sqlite3_column_int64(st, 1),
                                  (const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        return taken;
}

int lfs_record_check_link(lfs_home *home, sqlite3 *db, const sandbox_record *rec, lfs_error **err) {
        _cleanup_free_ char *other = NULL;
        if (rec->network != LFS_NETWORK_PRIVATE ||
            !link_name_taken(db, rec->instance, rec->project, rec->number, &other))
                return 0;
        char link[LFS_NETWORK_LINK_SIZE];
        lfs_network_link_name(rec->instance, link);
        return lfs_fail(
                err, LFS_INVALID_INPUT, 0,
                "the record of sandbox %d of project '%s' in %s/home.db names the link %s of its private "
                "network, but so does the record of %s (their instances start alike), which no create "
                "writes; nothing was touched; remove or fix the record",
                rec->number, rec->project, home->path, link, other);
}

int lfs_record_claim(lfs_home *home, sqlite3 *db, const char *project, const char *cgroup_root,
                     const lfs_runtime *rt, const lfs_sandbox_limits *limits, lfs_network network,
                     sandbox_record *ret, int *ret_id_hold, int *ret_net_hold, lfs_error **err) {
        unsigned long long start = 0;
        if (lfs_process_start_time(getpid(), &start) < 0)
                return lfs_fail(err, LFS_FAILED, ESRCH, "cannot read this process's start time");
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
                return lfs_fail(err, LFS_BUSY, EBUSY, "the home's records are locked; try again");
        /* The smallest free number from 1; rows of other shapes (refused when read) do
         * not shift it. */
        sqlite3_stmt *st;
        long long number = 1;
        if (sqlite3_prepare_v2(db,
                               "SELECT number FROM sandboxes WHERE project=? AND typeof(number)='integer' "
                               "AND number >= 1 ORDER BY number",
                               -1, &st, NULL) == SQLITE_OK) {
                sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
                while (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int64(st, 0) == number)
                        number++;
                sqlite3_finalize(st);
        }
        sandbox_record rec = { .project = xstrdup(project),
                               .number = (int)number,
                               .instance = new_instance(),
                               .pid = getpid(),
                               .start_time = start,
                               .boot_id = boot_id(),
                               .dir = lfs_sandbox_dir(home, project, (int)number),
                               .cgroup = lfs_cgroup_sandbox_path(cgroup_root, home->path, project,
                                                                 (int)number),
                               .platform = xstrdup("linux"),
                               .runtime = xstrdup(rt->name),
                               .state = xstrdup("starting"),
                               .limits = *limits,
                               .network = network,
                               .dir_fd = -1 };
        _cleanup_free_ char *socket = xasprintf("%s/control.sock", rec.dir);
        _cleanup_close_ int id_hold = -1, net_hold = -1;
        int r = 0;
        if (number > INT_MAX)
                r = lfs_fail(err, LFS_LIMIT_REACHED, 0, "project '%s' has no free sandbox number", project);
        else if (rt->owns_id_range)
                r = claim_ids(db, &rec.id_base, &id_hold, err);
        if (r == 0 && network == LFS_NETWORK_PRIVATE)
                r = claim_net(db, &rec.net_base, &net_hold, err);
        /* No two records name one link (lfs_record_check_link). */
        while (r == 0 && link_name_taken(db, rec.instance, project, rec.number, NULL)) {
                free(rec.instance);
                rec.instance = new_instance();
        }
        if (r == 0 &&
            sqlite3_prepare_v2(
                    db,
                    "INSERT INTO sandboxes(project, number, platform, runtime, pid, start_time, "
                    "boot_id, dir, cgroup, socket, state, instance, id_base, memory, pids, cpus, "
                    "disk, network, net_base) VALUES(?, ?, 'linux', ?, ?, ?, ?, ?, ?, ?, 'starting', ?, ?, "
                    "?, ?, ?, ?, ?, ?)",
                    -1, &st, NULL) != SQLITE_OK)
                r = db_fail(db, err);
        else if (r == 0) {
                sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
                sqlite3_bind_int(st, 2, rec.number);
                sqlite3_bind_text(st, 3, rt->name, -1, SQLITE_STATIC);
                sqlite3_bind_int(st, 4, (int)rec.pid);
                sqlite3_bind_int64(st, 5, (sqlite3_int64)rec.start_time);
                sqlite3_bind_text(st, 6, rec.boot_id, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 7, rec.dir, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 8, rec.cgroup, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 9, socket, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 10, rec.instance, -1, SQLITE_STATIC);
                /* No id range or limit is NULL (an unbound parameter). */
                if (rec.id_base)
                        sqlite3_bind_int64(st, 11, rec.id_base);
                if (limits->memory)
                        sqlite3_bind_int64(st, 12, (sqlite3_int64)limits->memory);
                if (limits->pids)
                        sqlite3_bind_int64(st, 13, (sqlite3_int64)limits->pids);
                if (limits->cpus > 0)
                        sqlite3_bind_double(st, 14, limits->cpus);
                if (limits->disk)
                        sqlite3_bind_int64(st, 15, (sqlite3_int64)limits->disk);
                sqlite3_bind_text(st, 16, lfs_network_name(network), -1, SQLITE_STATIC);
                if (rec.net_base)
                        sqlite3_bind_int64(st, 17, rec.net_base);
                r = step_done(db, st, err);
        }
        if (r == 0 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
                r = db_fail(db, err);
        if (r < 0) {
                sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
                lfs_record_done(&rec);
                return r;
        }
        *ret = rec;
        *ret_id_hold = TAKE_FD(id_hold);
        *ret_net_hold = TAKE_FD(net_hold);
        return 0;
}

/* Binds "this instance, with the owner it was read with" from column `at` on: project,
 * number, instance, pid, start_time, boot_id (NULL where the record has none). */
static void bind_identity(sqlite3_stmt *st, int at, const sandbox_record *rec) {
        sqlite3_bind_text(st, at, rec->project, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, at + 1, rec->number);
        if (rec->instance)
                sqlite3_bind_text(st, at + 2, rec->instance, -1, SQLITE_STATIC);
        if (rec->pid > 0) {
                sqlite3_bind_int(st, at + 3, (int)rec->pid);
                sqlite3_bind_int64(st, at + 4, (sqlite3_int64)rec->start_time);
                sqlite3_bind_text(st, at + 5, rec->boot_id, -1, SQLITE_STATIC);
        }
}

#define SAME_OWNER                                                                                          \
        "project=? AND number=? AND instance IS ? AND pid IS ? AND start_time IS ? AND boot_id IS ?"

int lfs_record_set_owner(sqlite3 *db, sandbox_record *rec, pid_t pid, const char *state, lfs_error **err) {
        unsigned long long start = 0;
        if (pid > 0 && lfs_process_start_time(pid, &start) < 0)
                return lfs_fail(err, LFS_FAILED, ESRCH, "process %d is gone", (int)pid);
        _cleanup_free_ char *boot = pid > 0 ? boot_id() : NULL;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(
                    db, "UPDATE sandboxes SET pid=?, start_time=?, boot_id=?, state=? WHERE " SAME_OWNER, -1,
                    &st, NULL) != SQLITE_OK)
                return db_fail(db, err);
        if (pid > 0) {
                sqlite3_bind_int(st, 1, (int)pid);
                sqlite3_bind_int64(st, 2, (sqlite3_int64)start);
                sqlite3_bind_text(st, 3, boot, -1, SQLITE_STATIC);
        }
        sqlite3_bind_text(st, 4, state, -1, SQLITE_STATIC);
        bind_identity(st, 5, rec);
        int r = step_done(db, st, err);
        if (r < 0)
                return r;
        if (sqlite3_changes(db) != 1)
                return -ESTALE;
        rec->pid = pid > 0 ? pid : 0;
        rec->start_time = start;
        free(rec->boot_id);
        rec->boot_id = TAKE_PTR(boot);
        free(rec->state);
        rec->state = xstrdup(state);
        return 0;
}

int lfs_record_delete(sqlite3 *db, const sandbox_record *rec, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "DELETE FROM sandboxes WHERE project=? AND number=? AND instance IS ?",
                               -1, &st, NULL) != SQLITE_OK)
                return db_fail(db, err);
        sqlite3_bind_text(st, 1, rec->project, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, rec->number);
        if (rec->instance)
                sqlite3_bind_text(st, 3, rec->instance, -1, SQLITE_STATIC);
        return step_done(db, st, err);
}

/* ---- the pool (pool.c) ---- */

int lfs_record_pool_offer(sqlite3 *db, sandbox_record *rec, pid_t daemon, const char *key, lfs_error **err) {
        int r = lfs_record_set_owner(db, rec, daemon, "pooled", err);
        sqlite3_stmt *st;
        if (r < 0)
                return r;
        if (sqlite3_prepare_v2(db, "UPDATE sandboxes SET pool=? WHERE " SAME_OWNER, -1, &st, NULL) !=
            SQLITE_OK)
                return db_fail(db, err);
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        bind_identity(st, 2, rec);
        return step_done(db, st, err);
}

/* The pooled records of project with key, checked, whose daemon is alive; fn stops the
 * walk by returning true. */
static int pooled_each(lfs_home *home, sqlite3 *db, const char *project, const char *key,
                       bool (*fn)(void *userdata, sandbox_record *rec), void *userdata, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db,
                               "SELECT " RECORD_COLUMNS " FROM sandboxes WHERE (project=?1 OR ?1 IS NULL) "
                               "AND state='pooled' AND (pool=?2 OR ?2 IS NULL) ORDER BY number",
                               -1, &st, NULL) != SQLITE_OK)
                return db_fail(db, err);
        if (project)
                sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
        if (key)
                sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        _cleanup_free_ char *root = cgroup_root_or_null();
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                sandbox_record rec = { .dir_fd = -1 };
                /* A record of another shape is never handed out: the reclaims report it. */
                if (record_check(home, st, root, &rec, NULL) < 0)
                        continue;
                bool stop = lfs_record_alive(&rec) && fn(userdata, &rec);
                lfs_record_done(&rec);
                if (stop)
                        break;
        }
        sqlite3_finalize(st);
        return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : db_fail(db, err);
}

static bool count_one(void *userdata, sandbox_record *rec) {
        (void)rec;
        (*(size_t *)userdata)++;
        return false;
}

int lfs_record_pool_count(lfs_home *home, sqlite3 *db, const char *project, const char *key, size_t *ret,
                          lfs_error **err) {
        size_t n = 0;
        int r = pooled_each(home, db, project, key, count_one, &n, err);
        if (r == 0)
                *ret = n;
        return r;
}

typedef struct pool_take {
        sqlite3 *db;
        sandbox_record taken;
        int r;
} pool_take;

static bool take_one(void *userdata, sandbox_record *rec) {
        pool_take *t = userdata;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(
                    t->db,
                    "UPDATE sandboxes SET state='running', pool=NULL WHERE state='pooled' AND " SAME_OWNER,
                    -1, &st, NULL) != SQLITE_OK) {
                t->r = -EIO;
                return true;
        }
        bind_identity(st, 1, rec);
        if (step_done(t->db, st, NULL) < 0) {
                t->r = -EIO;
                return true;
        }
        if (sqlite3_changes(t->db) != 1)
                return false;
        t->taken = *rec;
        *rec = (sandbox_record){ .dir_fd = -1 }; /* moved to t->taken */
        free(t->taken.state);
        t->taken.state = xstrdup("running");
        return true;
}

int lfs_record_pool_take(lfs_home *home, sqlite3 *db, const char *project, const char *key,
                         sandbox_record *ret, lfs_error **err) {
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
                return lfs_fail(err, LFS_BUSY, EBUSY, "the home's records are locked; try again");
        pool_take t = { .db = db, .taken = { .dir_fd = -1 } };
        int r = pooled_each(home, db, project, key, take_one, &t, err);
        if (r == 0 && t.r < 0)
                r = db_fail(db, err);
        if (r == 0 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
                r = db_fail(db, err);
        if (r < 0) {
                sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
                lfs_record_done(&t.taken);
                return r;
        }
        if (!t.taken.project)
                return -ENOENT;
        *ret = t.taken;
        return 0;
}

/* The daemon's end of its record (records.h): deleted once its teardown finished (done),
 * or left to owner (0: whoever takes it over). */
static int daemon_record(lfs_home *home, const char *project, int number, const char *instance, bool done,
                         pid_t owner) {
        sqlite3 *db = NULL;
        if (lfs_records_open(home, &db, NULL) < 0)
                return -EIO;
        sandbox_record rec = { .project = xstrdup(project),
                               .number = number,
                               .instance = xstrdup(instance),
                               .pid = getpid(),
                               .boot_id = boot_id(),
                               .dir_fd = -1 };
        int r = lfs_process_start_time(rec.pid, &rec.start_time);
        if (r == 0)
                r = done ? lfs_record_delete(db, &rec, NULL)
                         : lfs_record_set_owner(db, &rec, owner, "removing", NULL);
        lfs_record_done(&rec);
        /* No checkpoint of its own: the daemon's exit, which its closer waits for, came
         * after three fdatasyncs. Lost to a power loss, the change leaves the record naming
         * this daemon, dead after the boot, which the next reclaim takes over. */
        lfs_records_close(db);
        return r;
}

int lfs_sandbox_record_delete(lfs_home *home, const char *project, int number, const char *instance) {
        return daemon_record(home, project, number, instance, true, 0);
}

int lfs_sandbox_record_release(lfs_home *home, const char *project, int number, const char *instance) {
        return daemon_record(home, project, number, instance, false, 0);
}

int lfs_sandbox_record_hand_over(lfs_home *home, const char *project, int number, const char *instance,
                                 pid_t closer) {
        return daemon_record(home, project, number, instance, false, closer);
}
