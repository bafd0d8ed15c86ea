/* SPDX-License-Identifier: MIT */
/*
 * Sandboxes: numbered per project, one layerfs-daemon each, recorded in <home>/home.db.
 * The library claims the number in one transaction, makes the Sandbox's cgroup, starts
 * the daemon in its leaf, waits until its control socket answers, and then records the
 * daemon's pid, start time and boot id. Every later call goes to the daemon over its
 * socket with the Sandbox's token. A Sandbox whose daemon is gone is reclaimed: its
 * cgroup killed and removed, its mounts detached, its directory and record removed.
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "cgroup.h"
#include "config.h" /* LAYERFS_DAEMON_PATH: where make install puts the daemon */
#include "exec_streams.h"
#include "json_path.h"
#include "numbers.h"
#include "platforms.h"
#include "store.h"

typedef struct sandbox_record {
        char *project;
        int number;
        pid_t pid; /* the daemon; while 'starting', the process creating the Sandbox */
        unsigned long long start_time;
        char *boot_id;
        char *dir;
        char *cgroup;
        char *platform;
        char *state;
} sandbox_record;

static void record_done(sandbox_record *rec) {
        free(rec->project);
        free(rec->boot_id);
        free(rec->dir);
        free(rec->cgroup);
        free(rec->platform);
        free(rec->state);
        *rec = (sandbox_record){ 0 };
}

/* ---- home.db ---- */

static int home_db_open(lfs_home *home, sqlite3 **ret, lfs_error **err) {
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        sqlite3 *db = NULL;
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                            NULL) != SQLITE_OK) {
                int r = lfs_fail(err, LFS_FAILED, EIO, "cannot open %s: %s", path,
                                 db ? sqlite3_errmsg(db) : "out of memory");
                sqlite3_close(db);
                return r;
        }
        char *msg = NULL;
        if (sqlite3_exec(
                    db,
                    "PRAGMA busy_timeout=10000; PRAGMA journal_mode=WAL;"
                    "CREATE TABLE IF NOT EXISTS sandboxes(project TEXT NOT NULL, number INTEGER NOT NULL,"
                    " platform TEXT NOT NULL, runtime TEXT NOT NULL, image TEXT, pid INTEGER,"
                    " start_time INTEGER, boot_id TEXT, dir TEXT NOT NULL, state TEXT NOT NULL,"
                    " cgroup TEXT, socket TEXT, PRIMARY KEY(project, number)) WITHOUT ROWID;",
                    NULL, NULL, &msg) != SQLITE_OK) {
                int r = lfs_fail(err, LFS_FAILED, EIO, "cannot use %s: %s", path, msg ? msg : "?");
                sqlite3_free(msg);
                sqlite3_close(db);
                return r;
        }
        /* Records from before platforms were recorded: the column is added, empty; such a
         * row reads as the platform its runtime implies. */
        sqlite3_stmt *probe_platform = NULL;
        if (sqlite3_prepare_v2(db, "SELECT platform FROM sandboxes LIMIT 0", -1, &probe_platform, NULL) !=
            SQLITE_OK)
                sqlite3_exec(db, "ALTER TABLE sandboxes ADD COLUMN platform TEXT;", NULL, NULL, NULL);
        sqlite3_finalize(probe_platform);
        /* Homes made before Sandboxes had cgroups lack the last two columns. */
        sqlite3_stmt *probe = NULL;
        if (sqlite3_prepare_v2(db, "SELECT cgroup, socket FROM sandboxes LIMIT 0", -1, &probe, NULL) !=
            SQLITE_OK)
                sqlite3_exec(db,
                             "ALTER TABLE sandboxes ADD COLUMN cgroup TEXT;"
                             "ALTER TABLE sandboxes ADD COLUMN socket TEXT;",
                             NULL, NULL, NULL);
        sqlite3_finalize(probe);
        *ret = db;
        return 0;
}

static int db_step_done(sqlite3 *db, sqlite3_stmt *st, lfs_error **err) {
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW)
                return lfs_fail(err, LFS_FAILED, EIO, "the home's records: %s", sqlite3_errmsg(db));
        return 0;
}

static char *sandboxes_dir(const lfs_home *home) {
        return xasprintf("%s/sandboxes", home->path);
}

static char *sandbox_dir(const lfs_home *home, const char *project, int number) {
        return xasprintf("%s/sandboxes/%s-%d", home->path, project, number);
}

/* ---- who is alive ---- */

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot.
 * -ESRCH for a process that has exited but is not reaped yet (a zombie): a daemon whose
 * parent is an init that reaps slowly must count as dead as soon as it is. */
static int process_start_time(pid_t pid, unsigned long long *ret) {
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

static char *boot_id(void) {
        char buf[64] = "";
        FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
        if (f) {
                if (!fgets(buf, sizeof(buf), f))
                        buf[0] = 0;
                fclose(f);
        }
        buf[strcspn(buf, "\n")] = 0;
        return xstrdup(buf);
}

/* A record's process is alive only if pid, start time and boot id all match: a pid
 * reused by another process, or one from before a reboot, is not it (SPEC 4). */
static bool record_alive(const sandbox_record *rec) {
        unsigned long long start = 0;
        _cleanup_free_ char *boot = boot_id();
        return rec->pid > 0 && rec->start_time > 0 && rec->boot_id && *boot && !strcmp(rec->boot_id, boot) &&
               process_start_time(rec->pid, &start) == 0 && start == rec->start_time;
}

/* ---- records ---- */

/* Writes who owns the row now: pid with its start time and boot id. */
static int record_owner(sqlite3 *db, const char *project, int number, pid_t pid, const char *state,
                        lfs_error **err) {
        unsigned long long start = 0;
        _cleanup_free_ char *boot = boot_id();
        sqlite3_stmt *st;
        if (process_start_time(pid, &start) < 0)
                return lfs_fail(err, LFS_FAILED, ESRCH, "process %d is gone", (int)pid);
        if (sqlite3_prepare_v2(db,
                               "UPDATE sandboxes SET pid=?, start_time=?, boot_id=?, state=? "
                               "WHERE project=? AND number=?",
                               -1, &st, NULL) != SQLITE_OK)
                return lfs_fail(err, LFS_FAILED, EIO, "the home's records: %s", sqlite3_errmsg(db));
        sqlite3_bind_int(st, 1, (int)pid);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)start);
        sqlite3_bind_text(st, 3, boot, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, state, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, project, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 6, number);
        return db_step_done(db, st, err);
}

/* The smallest free number of project, claimed in one transaction by a 'starting' row
 * that names the creating process (so that reclaim can tell a create in progress from
 * one that died). */
static int claim_number(lfs_home *home, sqlite3 *db, const char *project, const char *cgroup_root, int *ret,
                        lfs_error **err) {
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
                return lfs_fail(err, LFS_BUSY, EBUSY, "the home's records are locked; try again");
        sqlite3_stmt *st;
        int number = 1;
        if (sqlite3_prepare_v2(db, "SELECT number FROM sandboxes WHERE project=? ORDER BY number", -1, &st,
                               NULL) == SQLITE_OK) {
                sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
                while (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == number)
                        number++;
                sqlite3_finalize(st);
        }
        _cleanup_free_ char *dir = sandbox_dir(home, project, number);
        _cleanup_free_ char *cgroup = lfs_cgroup_sandbox_path(cgroup_root, home->path, project, number);
        _cleanup_free_ char *socket = xasprintf("%s/control.sock", dir);
        int r = 0;
        if (sqlite3_prepare_v2(
                    db,
                    "INSERT INTO sandboxes(project, number, platform, runtime, dir, cgroup, socket, "
                    "state) VALUES(?, ?, 'linux', 'native', ?, ?, ?, 'starting')",
                    -1, &st, NULL) != SQLITE_OK)
                r = lfs_fail(err, LFS_FAILED, EIO, "the home's records: %s", sqlite3_errmsg(db));
        else {
                sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
                sqlite3_bind_int(st, 2, number);
                sqlite3_bind_text(st, 3, dir, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 4, cgroup, -1, SQLITE_STATIC);
                sqlite3_bind_text(st, 5, socket, -1, SQLITE_STATIC);
                r = db_step_done(db, st, err);
        }
        if (r == 0)
                r = record_owner(db, project, number, getpid(), "starting", err);
        if (r == 0 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
                r = lfs_fail(err, LFS_FAILED, EIO, "the home's records: %s", sqlite3_errmsg(db));
        if (r < 0)
                sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
        else
                *ret = number;
        return r;
}

static void delete_record(sqlite3 *db, const char *project, int number) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "DELETE FROM sandboxes WHERE project=? AND number=?", -1, &st, NULL) !=
            SQLITE_OK)
                return;
        sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, number);
        db_step_done(db, st, NULL);
}

void lfs_sandbox_record_delete(lfs_home *home, const char *project, int number, pid_t pid) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st;
        if (home_db_open(home, &db, NULL) < 0)
                return;
        if (sqlite3_prepare_v2(db, "DELETE FROM sandboxes WHERE project=? AND number=? AND pid=?", -1, &st,
                               NULL) == SQLITE_OK) {
                sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
                sqlite3_bind_int(st, 2, number);
                sqlite3_bind_int(st, 3, (int)pid);
                db_step_done(db, st, NULL);
        }
        sqlite3_close(db);
}

static char *column_text(sqlite3_stmt *st, int i) {
        const char *t = (const char *)sqlite3_column_text(st, i);
        return t ? xstrdup(t) : NULL;
}

/* The platform a row names, or for a row from before platforms were recorded, the one
 * its runtime and the home imply (SPEC 5). */
static const char *record_platform(sqlite3_stmt *st, int platform_col, int runtime_col) {
        const char *placement = "host";
        lfs_placement(&placement, NULL);
        return lfs_record_platform((const char *)sqlite3_column_text(st, platform_col),
                                   (const char *)sqlite3_column_text(st, runtime_col), placement);
}

#define RECORD_COLUMNS "project, number, pid, start_time, boot_id, dir, cgroup, platform, state, runtime"

static void record_from_row(sqlite3_stmt *st, sandbox_record *ret) {
        *ret = (sandbox_record){
                .project = column_text(st, 0),
                .number = sqlite3_column_int(st, 1),
                .pid = (pid_t)sqlite3_column_int(st, 2),
                .start_time = (unsigned long long)sqlite3_column_int64(st, 3),
                .boot_id = column_text(st, 4),
                .dir = column_text(st, 5),
                .cgroup = column_text(st, 6),
                .platform = xstrdup(record_platform(st, 7, 9)),
                .state = column_text(st, 8),
        };
}

static int read_record(sqlite3 *db, const char *project, int number, sandbox_record *ret, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "SELECT " RECORD_COLUMNS " FROM sandboxes WHERE project=? AND number=?",
                               -1, &st, NULL) != SQLITE_OK)
                return lfs_fail(err, LFS_FAILED, EIO, "the home's records: %s", sqlite3_errmsg(db));
        sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, number);
        int r = 0;
        if (sqlite3_step(st) != SQLITE_ROW)
                r = lfs_fail(err, LFS_NO_SUCH_SANDBOX, ENOENT,
                             "project '%s' has no sandbox %d; 'layerfs project list_sandboxes' shows them",
                             project, number);
        else
                record_from_row(st, ret);
        sqlite3_finalize(st);
        return r;
}

/* A record is used, signalled or deleted only if it names exactly the directory (and
 * cgroup) this home computes for it: a record pointing anywhere else is refused and
 * nothing there is touched (SPEC 4). */
static int record_trusted(lfs_home *home, const sandbox_record *rec, lfs_error **err) {
        _cleanup_free_ char *dir = sandbox_dir(home, rec->project, rec->number);
        if (!rec->dir || strcmp(rec->dir, dir))
                return lfs_fail(
                        err, LFS_INVALID_INPUT, 0,
                        "the record of sandbox %d of project '%s' points at '%s', but it should be '%s'; "
                        "nothing was touched; fix or remove the record in %s/home.db",
                        rec->number, rec->project, rec->dir ? rec->dir : "(nothing)", dir, home->path);
        if (rec->cgroup) {
                _cleanup_free_ char *root = NULL;
                lfs_error *ignored = NULL;
                if (lfs_cgroup_root(&root, &ignored) < 0) {
                        lfs_error_free(ignored);
                        return lfs_fail(err, LFS_UNSUPPORTED, ENOTSUP,
                                        "sandbox %d of project '%s' has a cgroup (%s) but this host has "
                                        "no cgroup2 to check it against; nothing was touched",
                                        rec->number, rec->project, rec->cgroup);
                }
                _cleanup_free_ char *cgroup =
                        lfs_cgroup_sandbox_path(root, home->path, rec->project, rec->number);
                _cleanup_free_ char *untagged =
                        lfs_cgroup_sandbox_path_untagged(root, rec->project, rec->number);
                if (strcmp(rec->cgroup, cgroup) && strcmp(rec->cgroup, untagged))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "the record of sandbox %d of project '%s' names cgroup '%s', but it "
                                        "should be '%s' (is LAYERFS_CGROUP_ROOT the one it was made with?); "
                                        "nothing was touched",
                                        rec->number, rec->project, rec->cgroup, cgroup);
        }
        return 0;
}

/* Detaches every mount below <dir>/mnt, also those whose daemon died (ENOTCONN). */
static void detach_mounts(const char *dir) {
        _cleanup_free_ char *mnt = xasprintf("%s/mnt", dir);
        DIR *d = opendir(mnt);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
                        _cleanup_free_ char *p = xasprintf("%s/%s", mnt, de->d_name);
                        umount2(p, MNT_DETACH | UMOUNT_NOFOLLOW);
                }
        closedir(d);
}

/* Everything a Sandbox whose daemon is gone left: processes in its cgroup (however
 * they detached), its mounts, its cgroups, its directory and its record. The record
 * must be trusted (record_trusted) and not alive. */
static int remove_remains(sqlite3 *db, const sandbox_record *rec, lfs_error **err) {
        int r = 0;
        if (rec->cgroup && (r = lfs_cgroup_destroy(rec->cgroup, 10000)) < 0)
                return lfs_fail(err, LFS_FAILED, -r,
                                "cannot end the processes of sandbox %d of project '%s' in %s: %s; its "
                                "record stays so that 'layerfs runtime reclaim' can try again",
                                rec->number, rec->project, rec->cgroup, strerror(-r));
        detach_mounts(rec->dir);
        rm_rf_at(AT_FDCWD, rec->dir);
        delete_record(db, rec->project, rec->number);
        return 0;
}

/* ---- the daemon process ---- */

/* Which layerfs-daemon a Sandbox runs: LAYERFS_DAEMON; else the one beside the running
 * program (the build tree, where the tests run build/layerfs); else where `make install`
 * put it (LAYERFS_DAEMON_PATH, recorded by the build in config.h). Always an absolute
 * path: execve of a bare name runs ./layerfs-daemon from whatever directory the caller
 * is in. Found before anything is made, so that a missing daemon leaves nothing behind. */
static int daemon_path(char **ret_path, lfs_error **err) {
        const char *env = getenv("LAYERFS_DAEMON");
        if (env && *env) {
                if (env[0] != '/')
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "LAYERFS_DAEMON='%s' is not an absolute path; give the full path of "
                                        "a layerfs-daemon, or unset it to use %s",
                                        env, LAYERFS_DAEMON_PATH);
                *ret_path = xstrdup(env);
                return 0;
        }
        _cleanup_free_ char *beside = NULL;
        char self[PATH_MAX];
        ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (k > 0) {
                self[k] = 0;
                beside = xasprintf("%s/layerfs-daemon", dirname(self));
                if (access(beside, X_OK) == 0) {
                        *ret_path = TAKE_PTR(beside);
                        return 0;
                }
        }
        if (access(LAYERFS_DAEMON_PATH, X_OK) == 0) {
                *ret_path = xstrdup(LAYERFS_DAEMON_PATH);
                return 0;
        }
        return lfs_fail(
                err, LFS_FAILED, ENOENT,
                "no layerfs-daemon to start: none beside this program (%s) and none installed at %s; "
                "install LayerFS ('make install') or set LAYERFS_DAEMON to a daemon's absolute path",
                beside ? beside : "/proc/self/exe unreadable", LAYERFS_DAEMON_PATH);
}

/* Starts the daemon detached (its own session, not our child) in the leaf
 * <cgroup>/daemon; returns its pid. The intermediate child is reaped here. */
static int spawn_daemon(lfs_home *home, const sandbox_record *rec, const char *exe, pid_t *ret_pid,
                        lfs_error **err) {
        _cleanup_free_ char *log = xasprintf("%s/daemon.log", rec->dir), *num = xasprintf("%d", rec->number),
                            *procs = xasprintf("%s/daemon/cgroup.procs", rec->cgroup);
        _cleanup_close_ int procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (procs_fd < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot open %s: %s", procs, strerror(errno));
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "pipe: %s", strerror(errno));
        pid_t child = fork();
        if (child < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                return lfs_fail(err, LFS_FAILED, errno, "fork: %s", strerror(errno));
        }
        if (child == 0) {
                /* Only async-signal-safe calls: the caller may have threads. */
                setsid();
                pid_t grandchild = fork();
                if (grandchild != 0) {
                        (void)!write(pipefd[1], &grandchild, sizeof(grandchild));
                        _exit(grandchild > 0 ? 0 : 1);
                }
                /* Into the Sandbox's cgroup before anything else, so that ending the
                 * cgroup always ends the daemon too. */
                if (write(procs_fd, "0", 1) != 1)
                        _exit(126);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
                if (null >= 0)
                        dup2(null, 0);
                if (out >= 0) {
                        dup2(out, 1);
                        dup2(out, 2);
                }
                /* Nothing of the caller's reaches the daemon: a pipe it held open would keep
                 * the caller's reader waiting until the Sandbox closes. */
                close_range(3, ~0U, 0);
                execl(exe, "layerfs-daemon", "--home", home->path, "--project", rec->project, "--sandbox",
                      num, "--dir", rec->dir, "--cgroup", rec->cgroup, (char *)NULL);
                dprintf(2, "cannot run %s: %s\n", exe, strerror(errno));
                _exit(127);
        }
        close(pipefd[1]);
        pid_t pid = -1;
        ssize_t k = read(pipefd[0], &pid, sizeof(pid));
        close(pipefd[0]);
        int status;
        waitpid(child, &status, 0);
        if (k != sizeof(pid) || pid <= 0)
                return lfs_fail(err, LFS_FAILED, ECHILD, "could not start %s", exe);
        *ret_pid = pid;
        return 0;
}

/* ---- the control socket ---- */

static int connect_control(const char *dir) {
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        int n = snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/control.sock", dir);
        if (n < 0 || (size_t)n >= sizeof(addr.sun_path))
                return -ENAMETOOLONG;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

static char *read_token(const char *dir) {
        _cleanup_free_ char *path = xasprintf("%s/token", dir);
        char buf[128] = "";
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = 0;
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return xstrdup(buf);
}

static lfs_code code_from_name(const char *name) {
        for (int c = LFS_INVALID_INPUT; c <= LFS_FAILED; c++)
                if (name && !strcmp(lfs_code_name((lfs_code)c), name))
                        return (lfs_code)c;
        return LFS_FAILED;
}

static int daemon_gone(const sandbox_record *rec, int errnum, lfs_error **err) {
        return lfs_fail(err, LFS_NO_SUCH_SANDBOX, errnum,
                        "sandbox %d of project '%s' is gone: its daemon died; 'layerfs runtime reclaim' "
                        "(or 'layerfs project list_sandboxes') cleans up after it",
                        rec->number, rec->project);
}

/* Connects and sends req (token added) with fds passed along (SCM_RIGHTS); returns the
 * connected socket. */
static int send_request(const sandbox_record *rec, json_t *req, const int *fds, size_t n_fds,
                        lfs_error **err) {
        _cleanup_free_ char *token = read_token(rec->dir);
        _cleanup_close_ int fd = connect_control(rec->dir);
        if (fd < 0 || !token) {
                json_decref(req);
                return daemon_gone(rec, fd < 0 ? -fd : ENOENT, err);
        }
        json_object_set_new(req, "token", json_string(token));
        _cleanup_free_ char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        size_t len = strlen(text);
        text[len] = '\n';
        union {
                char buf[CMSG_SPACE(sizeof(int) * 3)];
                struct cmsghdr align;
        } control = { 0 };
        struct iovec iov = { .iov_base = text, .iov_len = len + 1 };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (n_fds) {
                msg.msg_control = control.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (sent < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot talk to sandbox %d: %s", rec->number,
                                strerror(errno));
        /* The fds went with the first bytes; the rest of a long request follows. */
        for (size_t off = (size_t)sent; off < len + 1;) {
                ssize_t k = send(fd, text + off, len + 1 - off, MSG_NOSIGNAL);
                if (k <= 0)
                        return lfs_fail(err, LFS_FAILED, EIO, "cannot talk to sandbox %d", rec->number);
                off += (size_t)k;
        }
        return TAKE_FD(fd);
}

/* The daemon's answer line: its "ok" result, or its error as ours. */
/* No answer: a daemon that was closing (idle close, another caller's close) took the
 * connection but no longer read it; its teardown removes the Sandbox's directory last.
 * A daemon that died some other way (killed, crashed) leaves the directory, and the
 * call may have done part of its work. */
static int no_answer(const sandbox_record *rec, lfs_error **err) {
        for (int i = 0; i < 100 && record_alive(rec); i++)
                usleep(20 * 1000);
        if (!record_alive(rec) && access(rec->dir, F_OK) < 0 && errno == ENOENT)
                return lfs_fail(err, LFS_NO_SUCH_SANDBOX, 0,
                                "sandbox %d of project '%s' closed while the call was on its way; the call "
                                "did nothing",
                                rec->number, rec->project);
        if (!record_alive(rec))
                return lfs_fail(
                        err, LFS_NO_SUCH_SANDBOX, 0,
                        "sandbox %d of project '%s' is gone: its daemon died during the call, which may "
                        "have done part of its work; 'layerfs runtime reclaim' cleans up after it",
                        rec->number, rec->project);
        return lfs_fail(err, LFS_FAILED, EIO,
                        "sandbox %d's daemon gave no answer; see 'layerfs sandbox log %d'", rec->number,
                        rec->number);
}

static int parse_response(const sandbox_record *rec, const char *line, json_t **ret, lfs_error **err) {
        json_t *resp = line ? json_loads(line, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        if (!resp)
                return no_answer(rec, err);
        json_t *error = json_object_get(resp, "error");
        int r = 0;
        if (error) {
                json_t *paths = json_object_get(error, "paths");
                lfs_code code = code_from_name(json_string_value(json_object_get(error, "code")));
                const char *message = json_string_value(json_object_get(error, "message"));
                if (code == LFS_CONFLICT && json_is_array(paths)) {
                        size_t n = json_array_size(paths);
                        char **list = xcalloc(n, sizeof(char *));
                        for (size_t i = 0; i < n; i++)
                                list[i] = xstrdup(json_string_value(json_array_get(paths, i)) ?: "");
                        r = lfs_fail_conflict(err, list, n, "%s", message ? message : "conflict");
                } else {
                        r = lfs_fail(err, code, 0, "%s", message ? message : "failed");
                }
        } else if (ret) {
                *ret = json_incref(json_object_get(resp, "ok"));
        }
        json_decref(resp);
        return r;
}

/* Sends req and returns the "ok" result, or the daemon's error. */
static int rpc(const sandbox_record *rec, json_t *req, json_t **ret, lfs_error **err) {
        int fd = send_request(rec, req, NULL, 0, err);
        if (fd < 0)
                return fd;
        FILE *in = fdopen(fd, "r");
        if (!in) {
                close(fd);
                return lfs_fail(err, LFS_FAILED, errno, "fdopen: %s", strerror(errno));
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t k = getline(&line, &cap, in);
        fclose(in);
        int r = parse_response(rec, k > 0 ? line : NULL, ret, err);
        free(line);
        return r;
}

static int wait_ready(const sandbox_record *rec, pid_t pid) {
        for (int i = 0; i < 200; i++) {
                json_t *resp = NULL;
                if (rpc(rec, json_pack("{s:s}", "call", "sandbox.ping"), &resp, NULL) == 0) {
                        json_decref(resp);
                        return 0;
                }
                if (kill(pid, 0) < 0 && errno == ESRCH)
                        return -ESRCH;
                struct timespec ts = { .tv_nsec = 25 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        return -ETIMEDOUT;
}

/* ---- checks before anything is made ---- */

/* LAYERFS_SANDBOX, the home's default runtime: native (the default) is built. */
static int check_default_runtime(lfs_error **err) {
        const char *v = getenv("LAYERFS_SANDBOX");
        if (!v || !strcmp(v, "native") || !strcmp(v, "docker") || !strcmp(v, "namespaces"))
                return 0;
        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                        "LAYERFS_SANDBOX='%s' is not a runtime; give docker, native or namespaces", v);
}

/* The runtime a linux Sandbox records: native; namespaces is not in this build. */
static int check_linux_runtime(lfs_error **err) {
        const char *v = getenv("LAYERFS_SANDBOX");
        if (v && !strcmp(v, "namespaces"))
                return lfs_fail(
                        err, LFS_UNSUPPORTED, 0,
                        "LAYERFS_SANDBOX=namespaces: the namespaces runtime is not in this build; use "
                        "native (or unset it)");
        return 0;
}

/* LAYERFS_WATCHER, for a new Sandbox's daemon: bpf, proc or cgroup (unset: bpf where it
 * loads, else cgroup). */
static int check_watcher(lfs_error **err) {
        const char *v = getenv("LAYERFS_WATCHER");
        if (!v || !*v || !strcmp(v, "bpf") || !strcmp(v, "proc") || !strcmp(v, "cgroup"))
                return 0;
        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                        "LAYERFS_WATCHER='%s' is not a watcher; give bpf, proc or cgroup", v);
}

/* Commands run as the command identity in a Workspace below the sandboxes directory, so
 * every directory on the way there must let that identity through. */
static int check_traversable(const char *path, uid_t uid, gid_t gid, lfs_error **err) {
        _cleanup_free_ char *walk = xstrdup(path);
        size_t len = strlen(walk);
        for (size_t i = 1; i <= len; i++) {
                if (walk[i] != '/' && walk[i] != 0)
                        continue;
                char saved = walk[i];
                walk[i] = 0;
                struct stat st;
                if (stat(walk, &st) == 0) {
                        mode_t bit = st.st_uid == uid ? S_IXUSR : st.st_gid == gid ? S_IXGRP : S_IXOTH;
                        if (!(st.st_mode & bit))
                                return lfs_fail(err, LFS_PERMISSION_DENIED, EACCES,
                                                "the command identity %u:%u cannot pass through %s (mode "
                                                "%04o, owner %u:%u), which holds the Sandboxes; "
                                                "'chmod o+x %s' lets it through",
                                                (unsigned)uid, (unsigned)gid, walk,
                                                (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
                                                (unsigned)st.st_gid, walk);
                }
                walk[i] = saved;
        }
        return 0;
}

static int open_project(lfs_home *home, const char *project, char **ret_name, lfs_error **err) {
        lfs_store *s = NULL;
        int r = lfs_store_open(home, project, &s, err);
        if (r < 0)
                return r;
        *ret_name = xstrdup(lfs_store_project(s));
        lfs_store_close(s);
        return 0;
}

/* ---- create ---- */

/* The Sandbox's directory (0711: the command identity passes through to mnt/ and tmp/;
 * token and socket are root's) with its token, its cgroup with the leaf "daemon", and the
 * daemon answering on its socket. */
static int start_daemon(lfs_home *home, const sandbox_record *rec, const char *daemon, pid_t *ret_pid,
                        lfs_error **err) {
        rm_rf_at(AT_FDCWD, rec->dir);
        if (mkdir(rec->dir, 0711) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s: %s", rec->dir, strerror(errno));
        unsigned char raw[16];
        char token[33];
        _cleanup_close_ int urandom = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (urandom < 0 || read(urandom, raw, sizeof(raw)) != (ssize_t)sizeof(raw))
                return lfs_fail(err, LFS_FAILED, EIO, "cannot read /dev/urandom for the Sandbox's token");
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(token + 2 * i, 3, "%02x", raw[i]);
        _cleanup_free_ char *token_path = xasprintf("%s/token", rec->dir);
        _cleanup_close_ int tfd = open(token_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (tfd < 0 || write(tfd, token, 32) != 32)
                return lfs_fail(err, LFS_FAILED, errno, "cannot write %s", token_path);
        _cleanup_free_ char *root = xstrdup(rec->cgroup), *leaf = xasprintf("%s/daemon", rec->cgroup);
        int r;
        if ((r = lfs_cgroup_make(dirname(root))) < 0 || (r = lfs_cgroup_make(rec->cgroup)) < 0 ||
            (r = lfs_cgroup_make(leaf)) < 0)
                return lfs_fail(err, LFS_FAILED, -r, "cannot make the cgroup %s: %s", leaf, strerror(-r));
        if ((r = spawn_daemon(home, rec, daemon, ret_pid, err)) < 0)
                return r;
        if ((r = wait_ready(rec, *ret_pid)) < 0)
                return lfs_fail(err, LFS_FAILED, -r, "sandbox %d's daemon did not become ready (%s)",
                                rec->number, strerror(-r));
        return 0;
}

/* Appends the last lines of the daemon's log to *err's message. */
static void add_daemon_log(const sandbox_record *rec, lfs_error **err) {
        _cleanup_free_ char *path = xasprintf("%s/daemon.log", rec->dir);
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        if (!f || !err || !*err)
                return;
        char lines[3][512] = { "", "", "" }, line[512];
        unsigned n = 0;
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = 0;
                snprintf(lines[n++ % 3], sizeof(lines[0]), "%s", line);
        }
        if (!n)
                return;
        char *msg = xasprintf("%s; the daemon's log ended with:", (*err)->message);
        for (unsigned i = n > 3 ? n - 3 : 0; i < n; i++) {
                char *next = xasprintf("%s\n  %s", msg, lines[i % 3]);
                free(msg);
                msg = next;
        }
        free((*err)->message);
        (*err)->message = msg;
}

/* LAYERFS_INJECT_FAILURE=record makes recording the running daemon fail, for the tests
 * of a create that must undo everything. */
static bool injected(const char *what) {
        const char *v = getenv("LAYERFS_INJECT_FAILURE");
        return v && !strcmp(v, what);
}

int lfs_sandbox_create(lfs_home *home, const char *project, const char *image, const char *platform,
                       int *ret_sandbox, lfs_error **err) {
        (void)image; /* ignored for linux Sandboxes (SPEC 5) */
        const lfs_platform *chosen = NULL;
        uid_t uid;
        gid_t gid;
        double idle;
        /* The daemon reads the same settings (the identity, the idle close): refused here,
         * before anything is made. */
        int r = check_default_runtime(err);
        if (r < 0 || (r = lfs_platform_choose(home->path, platform, &chosen, err)) < 0 ||
            (r = check_watcher(err)) < 0 || (r = lfs_command_identity(&uid, &gid, err)) < 0 ||
            (r = lfs_idle_seconds(&idle, err)) < 0)
                return r;
        if (chosen->family != LFS_FAMILY_LINUX)
                return lfs_fail(err, LFS_UNSUPPORTED, 0, "platform '%s' cannot be driven by this build",
                                chosen->id);
        if ((r = check_linux_runtime(err)) < 0)
                return r;
        if (geteuid() != 0)
                return lfs_fail(
                        err, LFS_UNSUPPORTED, EPERM,
                        "the linux platform needs root (it mounts FUSE and makes cgroups); run as root");
        _cleanup_free_ char *name = NULL, *base = sandboxes_dir(home), *cgroup_root = NULL, *daemon = NULL;
        if ((r = open_project(home, project, &name, err)) < 0 ||
            (r = lfs_cgroup_root(&cgroup_root, err)) < 0 || (r = daemon_path(&daemon, err)) < 0)
                return r;
        if ((r = check_traversable(home->path, uid, gid, err)) < 0)
                return r;
        /* Numbers held by dead Sandboxes become free again. */
        lfs_reclaimed *gone = NULL;
        size_t n_gone = 0;
        if (lfs_runtime_reclaim(home, &gone, &n_gone, NULL) == 0)
                lfs_reclaimed_free(gone, n_gone);
        if (mkdir(base, 0711) < 0 && errno != EEXIST)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s: %s", base, strerror(errno));
        sqlite3 *db = NULL;
        if ((r = home_db_open(home, &db, err)) < 0)
                return r;
        int number = 0;
        if ((r = claim_number(home, db, name, cgroup_root, &number, err)) < 0) {
                sqlite3_close(db);
                return r;
        }
        sandbox_record rec = { .project = xstrdup(name),
                               .number = number,
                               .dir = sandbox_dir(home, name, number),
                               .cgroup = lfs_cgroup_sandbox_path(cgroup_root, home->path, name, number) };
        pid_t pid = -1;
        r = start_daemon(home, &rec, daemon, &pid, err);
        if (r == 0)
                r = injected("record")
                            ? lfs_fail(err, LFS_FAILED, EIO,
                                       "cannot record sandbox %d (LAYERFS_INJECT_FAILURE=record)", number)
                            : record_owner(db, name, number, pid, "running", err);
        if (r < 0) {
                /* Nothing of a failed create stays: ending the cgroup ends the daemon (it
                 * started in it); then the directory and the record go, the daemon's log
                 * with them: its last words go into the error. */
                lfs_cgroup_destroy(rec.cgroup, 10000);
                add_daemon_log(&rec, err);
                detach_mounts(rec.dir);
                rm_rf_at(AT_FDCWD, rec.dir);
                delete_record(db, name, number);
        } else {
                *ret_sandbox = number;
        }
        sqlite3_close(db);
        record_done(&rec);
        return r;
}

/* ---- opening, closing, reclaiming ---- */

/* Opens the trusted record of project's Sandbox number. */
static int sandbox_open(lfs_home *home, const char *project, int number, sandbox_record *ret,
                        lfs_error **err) {
        _cleanup_free_ char *name = NULL;
        int r = open_project(home, project, &name, err);
        if (r < 0)
                return r;
        if (number <= 0)
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "sandbox number %d is not valid: give 1 or more",
                                number);
        sqlite3 *db = NULL;
        if ((r = home_db_open(home, &db, err)) < 0)
                return r;
        r = read_record(db, name, number, ret, err);
        sqlite3_close(db);
        if (r == 0 && (r = record_trusted(home, ret, err)) < 0)
                record_done(ret);
        return r;
}

/* Opens the record of a Sandbox whose daemon must be alive to answer. */
static int sandbox_open_live(lfs_home *home, const char *project, int number, sandbox_record *ret,
                             lfs_error **err) {
        int r = sandbox_open(home, project, number, ret, err);
        if (r < 0)
                return r;
        const lfs_platform *p = lfs_platform_find(ret->platform);
        if (!p || p->family != LFS_FAMILY_LINUX) {
                /* Calls follow the record's platform, never the caller's default. */
                r = lfs_fail(
                        err, LFS_UNSUPPORTED, 0,
                        "sandbox %d of project '%s' runs on platform '%s', which this build cannot drive",
                        ret->number, ret->project, ret->platform ? ret->platform : "?");
                record_done(ret);
        } else if (!strcmp(ret->state ? ret->state : "", "starting") || !record_alive(ret)) {
                r = daemon_gone(ret, ESRCH, err);
                record_done(ret);
        }
        return r;
}

int lfs_sandbox_close(lfs_home *home, const char *project, int sandbox, int force, lfs_error **err) {
        sandbox_record rec = { 0 };
        int r = sandbox_open(home, project, sandbox, &rec, err);
        if (r < 0)
                return r;
        if (record_alive(&rec) && !strcmp(rec.state ? rec.state : "", "running")) {
                json_t *req = json_pack("{s:s, s:b}", "call", "sandbox.close", "force", force);
                lfs_error *refusal = NULL;
                r = rpc(&rec, req, NULL, &refusal);
                if (r < 0 && refusal->code != LFS_NO_SUCH_SANDBOX) {
                        /* Dirty, or the daemon could not: nothing was removed. */
                        if (err)
                                *err = refusal;
                        else
                                lfs_error_free(refusal);
                        record_done(&rec);
                        return r;
                }
                lfs_error_free(refusal);
                /* The daemon removed everything and exits; wait for that, then make sure. */
                for (int i = 0; i < 500 && record_alive(&rec); i++) {
                        struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
                        nanosleep(&ts, NULL);
                }
        } else if (!strcmp(rec.state ? rec.state : "", "starting") && record_alive(&rec)) {
                record_done(&rec);
                return lfs_fail(err, LFS_BUSY, EBUSY,
                                "sandbox %d of project '%s' is still being created; try again in a moment",
                                sandbox, project ? project : "");
        }
        sqlite3 *db = NULL;
        if ((r = home_db_open(home, &db, err)) == 0) {
                /* Whatever the daemon left (or all of it, if it was gone) goes now. */
                r = remove_remains(db, &rec, err);
                sqlite3_close(db);
        }
        record_done(&rec);
        return r;
}

void lfs_reclaimed_free(lfs_reclaimed *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].project);
                free(items[i].dir);
        }
        free(items);
}

int lfs_runtime_reclaim(lfs_home *home, lfs_reclaimed **ret, size_t *ret_n, lfs_error **err) {
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        *ret = NULL;
        *ret_n = 0;
        if (access(path, F_OK) < 0)
                return 0;
        sqlite3 *db = NULL;
        int r = home_db_open(home, &db, err);
        if (r < 0)
                return r;
        sandbox_record *recs = NULL;
        size_t n = 0, cap = 0;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "SELECT " RECORD_COLUMNS " FROM sandboxes ORDER BY project, number", -1,
                               &st, NULL) == SQLITE_OK) {
                while (sqlite3_step(st) == SQLITE_ROW) {
                        GROW(recs, cap, n + 1);
                        record_from_row(st, &recs[n++]);
                }
                sqlite3_finalize(st);
        }
        lfs_reclaimed *out = NULL;
        size_t n_out = 0, cap_out = 0;
        for (size_t i = 0; i < n; i++) {
                sandbox_record *rec = &recs[i];
                lfs_error *why = NULL;
                /* Alive (also a create in progress), or not ours to touch: left alone. */
                if (!rec->project || record_alive(rec) || record_trusted(home, rec, &why) < 0 ||
                    remove_remains(db, rec, &why) < 0) {
                        lfs_error_free(why);
                        record_done(rec);
                        continue;
                }
                GROW(out, cap_out, n_out + 1);
                lfs_reclaimed *item = &out[n_out++];
                item->project = xstrdup(rec->project);
                item->sandbox = rec->number;
                item->dir = xstrdup(rec->dir);
                record_done(rec);
        }
        free(recs);
        sqlite3_close(db);
        *ret = out;
        *ret_n = n_out;
        return 0;
}

size_t lfs_count_sandboxes(lfs_home *home, const char *project) {
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        sqlite3 *db = NULL;
        size_t n = 0;
        if (access(path, F_OK) < 0 || home_db_open(home, &db, NULL) < 0)
                return 0;
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db, "SELECT count(*) FROM sandboxes WHERE project=? AND state='running'", -1,
                               &st, NULL) == SQLITE_OK) {
                sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
                if (sqlite3_step(st) == SQLITE_ROW)
                        n = (size_t)sqlite3_column_int64(st, 0);
                sqlite3_finalize(st);
        }
        sqlite3_close(db);
        return n;
}

int lfs_sandbox_list(lfs_home *home, lfs_sandbox_info **ret, size_t *ret_n, lfs_error **err) {
        sqlite3 *db = NULL;
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        lfs_sandbox_info *out = NULL;
        size_t n = 0, cap = 0;
        /* What is listed is alive: Sandboxes whose daemon died are reclaimed first. */
        lfs_reclaimed *gone = NULL;
        size_t n_gone = 0;
        if (lfs_runtime_reclaim(home, &gone, &n_gone, NULL) == 0)
                lfs_reclaimed_free(gone, n_gone);
        if (access(path, F_OK) == 0) {
                int r = home_db_open(home, &db, err);
                if (r < 0)
                        return r;
                sqlite3_stmt *st;
                if (sqlite3_prepare_v2(db,
                                       "SELECT project, number, platform, image, runtime FROM sandboxes "
                                       "WHERE state='running' ORDER BY project, number",
                                       -1, &st, NULL) == SQLITE_OK) {
                        while (sqlite3_step(st) == SQLITE_ROW) {
                                GROW(out, cap, n + 1);
                                const char *image = (const char *)sqlite3_column_text(st, 3);
                                out[n++] = (lfs_sandbox_info){
                                        .project = xstrdup((const char *)sqlite3_column_text(st, 0)),
                                        .sandbox = sqlite3_column_int(st, 1),
                                        .platform = xstrdup(record_platform(st, 2, 4)),
                                        .image = image ? xstrdup(image) : NULL,
                                };
                        }
                        sqlite3_finalize(st);
                }
                sqlite3_close(db);
        }
        for (size_t i = 0; i < n; i++) {
                lfs_workspace_info *ws = NULL;
                size_t k = 0;
                if (lfs_sandbox_list_workspaces(home, out[i].project, out[i].sandbox, &ws, &k, NULL) == 0) {
                        out[i].workspaces = k;
                        lfs_workspace_info_free(ws, k);
                }
        }
        *ret = out;
        *ret_n = n;
        return 0;
}

void lfs_sandbox_info_free(lfs_sandbox_info *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].project);
                free(items[i].platform);
                free(items[i].image);
        }
        free(items);
}

void lfs_workspace_info_free(lfs_workspace_info *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].branch);
                free(items[i].path);
                free(items[i].platform);
        }
        free(items);
}

/* Opens the Sandbox and sends call with the given fields. */
static int sandbox_call(lfs_home *home, const char *project, int sandbox, json_t *req, json_t **ret,
                        lfs_error **err) {
        sandbox_record rec = { 0 };
        int r = sandbox_open_live(home, project, sandbox, &rec, err);
        if (r < 0) {
                json_decref(req);
                return r;
        }
        r = rpc(&rec, req, ret, err);
        record_done(&rec);
        return r;
}

int lfs_sandbox_list_workspaces(lfs_home *home, const char *project, int sandbox, lfs_workspace_info **ret,
                                size_t *ret_n, lfs_error **err) {
        json_t *result = NULL;
        int r = sandbox_call(home, project, sandbox, json_pack("{s:s}", "call", "sandbox.list_workspaces"),
                             &result, err);
        if (r < 0)
                return r;
        size_t n = json_array_size(result);
        lfs_workspace_info *out = xcalloc(n, sizeof(*out));
        for (size_t i = 0; i < n; i++) {
                json_t *w = json_array_get(result, i);
                out[i].branch = xstrdup(json_string_value(json_object_get(w, "branch")) ?: "");
                out[i].path = xstrdup(json_string_value(json_object_get(w, "path")) ?: "");
                out[i].dirty = json_is_true(json_object_get(w, "dirty"));
                out[i].platform = xstrdup(json_string_value(json_object_get(w, "platform")) ?: "linux");
        }
        json_decref(result);
        *ret = out;
        *ret_n = n;
        return 0;
}

int lfs_workspace_mount(lfs_home *home, const char *project, int sandbox, const char *branch,
                        char **ret_path, lfs_error **err) {
        json_t *result = NULL;
        int r = lfs_check_branch_name(branch, err);
        if (r < 0 || (r = sandbox_call(home, project, sandbox,
                                       json_pack("{s:s, s:s}", "call", "workspace.mount", "branch", branch),
                                       &result, err)) < 0)
                return r;
        *ret_path = xstrdup(json_string_value(json_object_get(result, "path")) ?: "");
        json_decref(result);
        return 0;
}

int lfs_workspace_status(lfs_home *home, const char *project, int sandbox, const char *branch,
                         lfs_change **ret_changes, size_t *ret_n, lfs_error **err) {
        json_t *result = NULL;
        int r = sandbox_call(home, project, sandbox,
                             json_pack("{s:s, s:s}", "call", "workspace.status", "branch", branch), &result,
                             err);
        if (r < 0)
                return r;
        size_t n = json_array_size(result);
        lfs_change *out = xcalloc(n, sizeof(*out));
        for (size_t i = 0; i < n; i++) {
                json_t *c = json_array_get(result, i);
                const char *kind = json_string_value(json_object_get(c, "change")) ?: "";
                out[i].path = lfs_json_get_path(c, "path") ?: xstrdup("");
                out[i].kind = !strcmp(kind, "added")     ? LFS_ADDED
                              : !strcmp(kind, "deleted") ? LFS_DELETED
                                                         : LFS_MODIFIED;
        }
        json_decref(result);
        *ret_changes = out;
        *ret_n = n;
        return 0;
}

int lfs_workspace_commit(lfs_home *home, const char *project, int sandbox, const char *branch,
                         const char *message, lfs_id *ret_commit, int *ret_merged, lfs_error **err) {
        if (!message || !*message)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "a commit needs a message; give one with -m MESSAGE");
        if (!lfs_is_utf8(message))
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the commit message is not UTF-8 text");
        json_t *result = NULL;
        int r = sandbox_call(home, project, sandbox,
                             json_pack("{s:s, s:s, s:s}", "call", "workspace.commit", "branch", branch,
                                       "message", message),
                             &result, err);
        if (r < 0)
                return r;
        r = lfs_id_from_hex(json_string_value(json_object_get(result, "commit")) ?: "", ret_commit);
        if (ret_merged)
                *ret_merged = json_is_true(json_object_get(result, "merged"));
        json_decref(result);
        return r < 0 ? lfs_fail(err, LFS_FAILED, EIO, "the daemon's answer had no commit") : 0;
}

int lfs_workspace_unmount(lfs_home *home, const char *project, int sandbox, const char *branch, int discard,
                          lfs_error **err) {
        return sandbox_call(home, project, sandbox,
                            json_pack("{s:s, s:s, s:b}", "call", "workspace.unmount", "branch", branch,
                                      "discard", discard),
                            NULL, err);
}

/* Appends the file's contents to *buf (missing is fine). */
static void append_file(const char *path, char **buf, size_t *len) {
        FILE *f = fopen(path, "re");
        if (!f)
                return;
        char chunk[65536];
        size_t k;
        while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0) {
                *buf = xrealloc(*buf, *len + k + 1);
                memcpy(*buf + *len, chunk, k);
                *len += k;
                (*buf)[*len] = 0;
        }
        fclose(f);
}

int lfs_sandbox_log(lfs_home *home, const char *project, int sandbox, size_t lines, char **ret_text,
                    lfs_error **err) {
        sandbox_record rec = { 0 };
        int r = sandbox_open(home, project, sandbox, &rec, err);
        if (r < 0)
                return r;
        /* The rotated part first: the tail may start there. */
        _cleanup_free_ char *old = xasprintf("%s/daemon.log.1", rec.dir);
        _cleanup_free_ char *cur = xasprintf("%s/daemon.log", rec.dir);
        char *text = xstrdup("");
        size_t len = 0;
        append_file(old, &text, &len);
        append_file(cur, &text, &len);
        record_done(&rec);
        if (!lines)
                lines = 100;
        size_t seen = 0;
        char *start = text + len;
        if (len && text[len - 1] == '\n')
                start--;
        while (start > text && seen < lines) {
                start--;
                if (*start == '\n' && ++seen == lines) {
                        start++;
                        break;
                }
        }
        *ret_text = xstrdup(start);
        free(text);
        return 0;
}

/* ---- exec ---- */

static json_t *exec_request(const char *branch, const char *const *argv, size_t n_argv,
                            const lfs_exec_options *o) {
        json_t *command = json_array(), *env = json_array();
        for (size_t i = 0; i < n_argv; i++)
                json_array_append_new(command, json_string(argv[i]));
        for (size_t i = 0; o && i < o->n_env; i++)
                json_array_append_new(env, json_string(o->env[i]));
        json_t *req = json_pack("{s:s, s:s, s:o, s:o}", "call", "workspace.exec", "branch", branch,
                                "command", command, "env", env);
        if (o && o->tty) {
                /* The command's terminal is like ours; a --env TERM=... given after it wins. */
                const char *term = getenv("TERM");
                if (term && *term && lfs_is_utf8(term))
                        json_array_insert_new(env, 0, json_sprintf("TERM=%s", term));
                json_object_set_new(req, "tty", json_true());
        }
        if (o && o->cwd)
                json_object_set_new(req, "cwd", json_string(o->cwd));
        if (o && o->timeout > 0)
                json_object_set_new(req, "timeout", json_real(o->timeout));
        return req;
}

static int check_exec_input(const char *const *argv, size_t n_argv, const lfs_exec_options *o,
                            lfs_error **err) {
        if (!n_argv || !argv[0] || !*argv[0])
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "give the command to run after '--'");
        for (size_t i = 0; i < n_argv; i++)
                if (!argv[i] || !lfs_is_utf8(argv[i]))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "word %zu of the command is not UTF-8 text", i + 1);
        for (size_t i = 0; o && i < o->n_env; i++) {
                const char *e = o->env[i];
                if (!e || !*e || *e == '=' || !strchr(e, '='))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "environment entry '%s' is not KEY=VALUE; give --env KEY=VALUE",
                                        e ? e : "");
                if (!lfs_is_utf8(e))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0, "environment entry %zu is not UTF-8 text",
                                        i + 1);
        }
        if (o && o->cwd && !lfs_is_utf8(o->cwd))
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the cwd is not UTF-8 text");
        /* Also NaN and infinity, which JSON cannot carry. */
        if (o && !(o->timeout >= 0 && o->timeout <= LFS_MAX_TIMEOUT_SECONDS))
                return lfs_fail(
                        err, LFS_INVALID_INPUT, 0,
                        "timeout %g is out of range: give a number of seconds from 0 to %.0f (0: none)",
                        o->timeout, LFS_MAX_TIMEOUT_SECONDS);
        return 0;
}

int lfs_workspace_exec(lfs_home *home, const char *project, int sandbox, const char *branch,
                       const char *const *argv, size_t n_argv, const lfs_exec_options *options,
                       int *ret_exit, lfs_error **err) {
        int r = lfs_check_branch_name(branch, err);
        if (r < 0 || (r = check_exec_input(argv, n_argv, options, err)) < 0)
                return r;
        sandbox_record rec = { 0 };
        if ((r = sandbox_open_live(home, project, sandbox, &rec, err)) < 0)
                return r;
        /* The command writes into pipes of ours (or its terminal); we copy while it runs.
         * When it ends we take what it wrote and stop: processes it left in the background
         * may hold them for as long as the Sandbox lives, and must not keep the caller
         * waiting, nor read what the caller's terminal gets afterwards. */
        exec_streams streams;
        int in = options ? options->stdin_fd : -1, out = options ? options->stdout_fd : -1,
            errfd = options ? options->stderr_fd : -1;
        char *line = NULL;
        if ((r = exec_streams_open(&streams, in, out, errfd, options && options->tty, err)) < 0)
                goto done;
        int sock = send_request(&rec, exec_request(branch, argv, n_argv, options), streams.passed, 3, err);
        exec_streams_sent(&streams);
        if (sock < 0) {
                r = sock;
                goto done;
        }
        line = exec_streams_relay(&streams, sock);
        close(sock);
        json_t *result = NULL;
        r = parse_response(&rec, line, &result, err);
        free(line);
        if (r == 0) {
                long long code;
                if (lfs_json_whole("exit status", json_object_get(result, "exit"), 0, 255, &code, NULL) < 0)
                        r = lfs_fail(err, LFS_FAILED, EIO, "sandbox %d's answer had no exit status",
                                     sandbox);
                else
                        *ret_exit = (int)code;
        }
        json_decref(result);
done:
        exec_streams_close(&streams);
        record_done(&rec);
        return r;
}

/* ---- background processes ---- */

int lfs_process_start(lfs_home *home, const char *project, int sandbox, const char *branch,
                      const char *const *argv, size_t n_argv, const lfs_exec_options *options, int *ret_pid,
                      char **ret_log, lfs_error **err) {
        int r = lfs_check_branch_name(branch, err);
        if (r < 0 || (r = check_exec_input(argv, n_argv, options, err)) < 0)
                return r;
        if (options && options->tty)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "a background process has no terminal: its output goes to its log");
        json_t *req = exec_request(branch, argv, n_argv, options);
        json_object_set_new(req, "call", json_string("process.start"));
        json_object_del(req, "timeout");
        json_t *result = NULL;
        if ((r = sandbox_call(home, project, sandbox, req, &result, err)) < 0)
                return r;
        long long pid;
        if (lfs_json_whole("pid", json_object_get(result, "pid"), 1, LFS_MAX_PID, &pid, NULL) < 0) {
                json_decref(result);
                return lfs_fail(err, LFS_FAILED, EIO, "sandbox %d's answer had no pid", sandbox);
        }
        *ret_pid = (int)pid;
        if (ret_log)
                *ret_log = xstrdup(json_string_value(json_object_get(result, "log")) ?: "");
        json_decref(result);
        return 0;
}

int lfs_process_list(lfs_home *home, const char *project, int sandbox, lfs_process_info **ret, size_t *ret_n,
                     lfs_error **err) {
        json_t *result = NULL;
        int r = sandbox_call(home, project, sandbox, json_pack("{s:s}", "call", "process.list"), &result,
                             err);
        if (r < 0)
                return r;
        size_t n = json_array_size(result);
        lfs_process_info *out = xcalloc(n ? n : 1, sizeof(*out));
        for (size_t i = 0; i < n; i++) {
                json_t *p = json_array_get(result, i);
                out[i] = (lfs_process_info){
                        .pid = (int)json_integer_value(json_object_get(p, "pid")),
                        .cgroup = xstrdup(json_string_value(json_object_get(p, "cgroup")) ?: ""),
                        .command = xstrdup(json_string_value(json_object_get(p, "command")) ?: ""),
                        .running = !strcmp(json_string_value(json_object_get(p, "state")) ?: "", "running"),
                        .exit = (int)json_integer_value(json_object_get(p, "exit")),
                };
        }
        json_decref(result);
        *ret = out;
        *ret_n = n;
        return 0;
}

void lfs_process_info_free(lfs_process_info *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].cgroup);
                free(items[i].command);
        }
        free(items);
}

int lfs_process_kill(lfs_home *home, const char *project, int sandbox, int pid, lfs_error **err) {
        if (pid <= 0)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "pid %d is out of range: give a whole number from 1 to %d", pid,
                                LFS_MAX_PID);
        return sandbox_call(home, project, sandbox,
                            json_pack("{s:s, s:i}", "call", "process.kill", "pid", pid), NULL, err);
}

/* ---- events ---- */

int lfs_sandbox_events(lfs_home *home, const char *project, int sandbox, int follow, lfs_event_fn fn,
                       void *userdata, char **ret_watcher, lfs_error **err) {
        json_t *req = json_pack("{s:s, s:b}", "call", "sandbox.events", "follow", follow);
        if (!follow) {
                json_t *result = NULL;
                int r = sandbox_call(home, project, sandbox, req, &result, err);
                if (r < 0)
                        return r;
                if (ret_watcher)
                        *ret_watcher = xstrdup(json_string_value(json_object_get(result, "watcher")) ?: "");
                size_t i;
                json_t *e;
                json_array_foreach(json_object_get(result, "events"), i, e) {
                        char *text = json_dumps(e, JSON_COMPACT);
                        int stop = fn(userdata, text);
                        free(text);
                        if (stop)
                                break;
                }
                json_decref(result);
                return 0;
        }
        sandbox_record rec = { 0 };
        int r = sandbox_open_live(home, project, sandbox, &rec, err);
        if (r < 0) {
                json_decref(req);
                return r;
        }
        int fd = send_request(&rec, req, NULL, 0, err);
        if (fd < 0) {
                record_done(&rec);
                return fd;
        }
        FILE *in = fdopen(fd, "r");
        char *line = NULL;
        size_t cap = 0;
        while (in && getline(&line, &cap, in) > 0) {
                line[strcspn(line, "\n")] = 0;
                if (!strncmp(line, "{\"error\"", 8)) { /* refused */
                        r = parse_response(&rec, line, NULL, err);
                        break;
                }
                if (fn(userdata, line))
                        break;
        }
        free(line);
        if (in)
                fclose(in);
        else
                close(fd);
        record_done(&rec);
        return r;
}
