/* SPDX-License-Identifier: MIT */
/*
 * Sandboxes: numbered per project, one layerfs-daemon each, recorded in <home>/home.db.
 * The library claims the number in one transaction, starts the daemon, waits until its
 * control socket answers, and then records the daemon's pid, start time and boot id.
 * Every later call goes to the daemon over its socket with the Sandbox's token.
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "store.h"

static const char *const platform_names[] = { "linux", "docker", "podman", "firecracker",
                                              "qemu",  "lima",   "mac",    "wsl" };

typedef struct sandbox_record {
        char *project;
        int number;
        pid_t pid;
        unsigned long long start_time;
        char *boot_id;
        char *dir;
        char *platform;
} sandbox_record;

static void record_done(sandbox_record *rec) {
        free(rec->project);
        free(rec->boot_id);
        free(rec->dir);
        free(rec->platform);
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
                    " PRIMARY KEY(project, number)) WITHOUT ROWID;",
                    NULL, NULL, &msg) != SQLITE_OK) {
                int r = lfs_fail(err, LFS_FAILED, EIO, "cannot use %s: %s", path, msg ? msg : "?");
                sqlite3_free(msg);
                sqlite3_close(db);
                return r;
        }
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

/* The smallest free number of project, claimed by a 'starting' row. */
static int claim_number(sqlite3 *db, const char *project, const char *dir_base, int *ret, lfs_error **err) {
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
        _cleanup_free_ char *dir = xasprintf("%s/%s-%d", dir_base, project, number);
        int r = 0;
        if (sqlite3_prepare_v2(db,
                               "INSERT INTO sandboxes(project, number, platform, runtime, dir, state) "
                               "VALUES(?, ?, 'linux', 'native', ?, 'starting')",
                               -1, &st, NULL) != SQLITE_OK)
                r = lfs_fail(err, LFS_FAILED, EIO, "the home's records: %s", sqlite3_errmsg(db));
        else {
                sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
                sqlite3_bind_int(st, 2, number);
                sqlite3_bind_text(st, 3, dir, -1, SQLITE_STATIC);
                r = db_step_done(db, st, err);
        }
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

static char *sandboxes_dir(const lfs_home *home) {
        return xasprintf("%s/sandboxes", home->path);
}

static int read_record(sqlite3 *db, const char *project, int number, sandbox_record *ret, lfs_error **err) {
        sqlite3_stmt *st;
        if (sqlite3_prepare_v2(db,
                               "SELECT pid, start_time, boot_id, dir, platform, state FROM sandboxes "
                               "WHERE project=? AND number=?",
                               -1, &st, NULL) != SQLITE_OK)
                return lfs_fail(err, LFS_FAILED, EIO, "the home's records: %s", sqlite3_errmsg(db));
        sqlite3_bind_text(st, 1, project, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 2, number);
        int r = 0;
        if (sqlite3_step(st) != SQLITE_ROW) {
                r = lfs_fail(err, LFS_NO_SUCH_SANDBOX, ENOENT,
                             "project '%s' has no sandbox %d; 'layerfs project list_sandboxes' shows them",
                             project, number);
        } else {
                const char *boot = (const char *)sqlite3_column_text(st, 2);
                *ret = (sandbox_record){
                        .project = xstrdup(project),
                        .number = number,
                        .pid = (pid_t)sqlite3_column_int(st, 0),
                        .start_time = (unsigned long long)sqlite3_column_int64(st, 1),
                        .boot_id = boot ? xstrdup(boot) : NULL,
                        .dir = xstrdup((const char *)sqlite3_column_text(st, 3)),
                        .platform = xstrdup((const char *)sqlite3_column_text(st, 4)),
                };
        }
        sqlite3_finalize(st);
        return r;
}

/* ---- the daemon process ---- */

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot. */
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

static char *daemon_path(void) {
        const char *env = getenv("LAYERFS_DAEMON");
        if (env && *env)
                return xstrdup(env);
        char self[4096];
        ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (k > 0) {
                self[k] = 0;
                char *path = xasprintf("%s/layerfs-daemon", dirname(self));
                if (access(path, X_OK) == 0)
                        return path;
                free(path);
        }
        return xstrdup("layerfs-daemon");
}

/* Starts the daemon detached (its own session, not our child); returns its pid. */
static int spawn_daemon(lfs_home *home, const char *project, int number, const char *dir, pid_t *ret_pid,
                        lfs_error **err) {
        _cleanup_free_ char *exe = daemon_path(), *log = xasprintf("%s/daemon.log", dir),
                            *num = xasprintf("%d", number);
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
                setsid();
                pid_t grandchild = fork();
                if (grandchild != 0) {
                        (void)!write(pipefd[1], &grandchild, sizeof(grandchild));
                        _exit(grandchild > 0 ? 0 : 1);
                }
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
                execl(exe, "layerfs-daemon", "--home", home->path, "--project", project, "--sandbox", num,
                      "--dir", dir, (char *)NULL);
                dprintf(2, "cannot run %s: %s\n", exe, strerror(errno));
                _exit(127);
        }
        close(pipefd[1]);
        pid_t pid = -1;
        ssize_t k = read(pipefd[0], &pid, sizeof(pid));
        close(pipefd[0]);
        int status;
        waitpid(child, &status, 0); /* the intermediate child: no zombie left behind */
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

/* Sends req (token added) and returns the "ok" result, or the daemon's error. */
static int rpc(const sandbox_record *rec, json_t *req, json_t **ret, lfs_error **err) {
        _cleanup_free_ char *token = read_token(rec->dir);
        _cleanup_close_ int fd = connect_control(rec->dir);
        if (fd < 0 || !token) {
                json_decref(req);
                return lfs_fail(
                        err, LFS_NO_SUCH_SANDBOX, fd < 0 ? -fd : ENOENT,
                        "sandbox %d of project '%s' does not answer: its daemon is gone; 'layerfs sandbox "
                        "close %d' cleans up after it",
                        rec->number, rec->project, rec->number);
        }
        json_object_set_new(req, "token", json_string(token));
        char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        size_t len = strlen(text);
        text[len] = '\n';
        bool sent = write(fd, text, len + 1) == (ssize_t)(len + 1);
        free(text);
        if (!sent)
                return lfs_fail(err, LFS_FAILED, EIO, "cannot talk to sandbox %d", rec->number);
        FILE *in = fdopen(TAKE_FD(fd), "r");
        char *line = NULL;
        size_t cap = 0;
        ssize_t k = in ? getline(&line, &cap, in) : -1;
        if (in)
                fclose(in);
        json_t *resp = k > 0 ? json_loads(line, 0, NULL) : NULL;
        free(line);
        if (!resp)
                return lfs_fail(err, LFS_FAILED, EIO,
                                "sandbox %d's daemon gave no answer; see 'layerfs sandbox log %d'",
                                rec->number, rec->number);
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

/* ---- the public calls ---- */

static int check_platform(lfs_home *home, const char *platform, lfs_error **err) {
        if (!platform || !strcmp(platform, "linux"))
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(platform_names); i++)
                if (!strcmp(platform, platform_names[i]))
                        return lfs_fail(
                                err, LFS_UNSUPPORTED, 0,
                                "platform '%s' is not available for home %s in this build; it allows: linux",
                                platform, home->path);
        return lfs_fail(
                err, LFS_INVALID_INPUT, 0,
                "unknown platform '%s'; the platforms are linux, docker, podman, firecracker, qemu, lima, "
                "mac, wsl",
                platform);
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

/* The Sandbox's directory with its token, and the daemon answering on its socket. */
static int start_daemon(lfs_home *home, const sandbox_record *rec, pid_t *ret_pid, lfs_error **err) {
        rm_rf_at(AT_FDCWD, rec->dir);
        if (mkdir(rec->dir, 0700) < 0)
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
        int r = spawn_daemon(home, rec->project, rec->number, rec->dir, ret_pid, err);
        if (r < 0)
                return r;
        if ((r = wait_ready(rec, *ret_pid)) < 0)
                return lfs_fail(err, LFS_FAILED, -r,
                                "sandbox %d's daemon did not become ready (%s); see %s/daemon.log",
                                rec->number, strerror(-r), rec->dir);
        return 0;
}

/* Records who the daemon is: liveness later needs pid, start time and boot id to match. */
static int record_running(sqlite3 *db, const sandbox_record *rec, pid_t pid, lfs_error **err) {
        unsigned long long start = 0;
        _cleanup_free_ char *boot = boot_id();
        sqlite3_stmt *st;
        if (process_start_time(pid, &start) < 0 ||
            sqlite3_prepare_v2(db,
                               "UPDATE sandboxes SET pid=?, start_time=?, boot_id=?, state='running' "
                               "WHERE project=? AND number=?",
                               -1, &st, NULL) != SQLITE_OK)
                return lfs_fail(err, LFS_FAILED, EIO, "cannot record sandbox %d", rec->number);
        sqlite3_bind_int(st, 1, (int)pid);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)start);
        sqlite3_bind_text(st, 3, boot, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, rec->project, -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 5, rec->number);
        return db_step_done(db, st, err);
}

int lfs_sandbox_create(lfs_home *home, const char *project, const char *image, const char *platform,
                       int *ret_sandbox, lfs_error **err) {
        (void)image; /* ignored for linux Sandboxes (SPEC 5) */
        int r = check_platform(home, platform, err);
        if (r < 0)
                return r;
        if (geteuid() != 0)
                return lfs_fail(
                        err, LFS_UNSUPPORTED, EPERM,
                        "the linux platform needs root (it mounts FUSE and makes cgroups); run as root");
        _cleanup_free_ char *name = NULL, *base = sandboxes_dir(home);
        if ((r = open_project(home, project, &name, err)) < 0)
                return r;
        if (mkdir(base, 0711) < 0 && errno != EEXIST)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s: %s", base, strerror(errno));
        sqlite3 *db = NULL;
        if ((r = home_db_open(home, &db, err)) < 0)
                return r;
        int number = 0;
        if ((r = claim_number(db, name, base, &number, err)) < 0) {
                sqlite3_close(db);
                return r;
        }
        sandbox_record rec = { .project = xstrdup(name),
                               .number = number,
                               .dir = xasprintf("%s/%s-%d", base, name, number) };
        pid_t pid = -1;
        r = start_daemon(home, &rec, &pid, err);
        if (r == 0)
                r = record_running(db, &rec, pid, err);
        if (r < 0) {
                /* Nothing of a failed create stays: no daemon, no directory, no record. */
                if (pid > 0)
                        kill(pid, SIGKILL);
                rm_rf_at(AT_FDCWD, rec.dir);
                delete_record(db, name, number);
        } else {
                *ret_sandbox = number;
        }
        sqlite3_close(db);
        record_done(&rec);
        return r;
}

/* Opens the record of project's Sandbox number. */
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
        if (r < 0)
                return r;
        /* A record is trusted only if it names exactly the directory this home computes
         * for it: anything else is never used, signalled or deleted (SPEC 4). */
        _cleanup_free_ char *base = sandboxes_dir(home);
        _cleanup_free_ char *expected = xasprintf("%s/%s-%d", base, name, number);
        if (!ret->dir || strcmp(ret->dir, expected)) {
                r = lfs_fail(
                        err, LFS_INVALID_INPUT, 0,
                        "the record of sandbox %d of project '%s' points at '%s', but it should be '%s'; "
                        "nothing was touched; fix or remove the record in %s/home.db",
                        number, name, ret->dir, expected, home->path);
                record_done(ret);
        }
        return r;
}

static bool daemon_alive(const sandbox_record *rec) {
        unsigned long long start = 0;
        _cleanup_free_ char *boot = boot_id();
        return rec->pid > 0 && rec->boot_id && !strcmp(rec->boot_id, boot) &&
               process_start_time(rec->pid, &start) == 0 && start == rec->start_time;
}

int lfs_sandbox_close(lfs_home *home, const char *project, int sandbox, int force, lfs_error **err) {
        sandbox_record rec = { 0 };
        int r = sandbox_open(home, project, sandbox, &rec, err);
        if (r < 0)
                return r;
        json_t *req = json_pack("{s:s, s:b}", "call", "sandbox.close", "force", force);
        r = rpc(&rec, req, NULL, err);
        if (r < 0 && (*err)->code != LFS_NO_SUCH_SANDBOX) {
                record_done(&rec);
                return r;
        }
        if (r < 0) {
                /* The daemon is gone: clean up after it (its mounts may be stale). */
                lfs_error_free(*err);
                *err = NULL;
                r = 0;
        }
        for (int i = 0; i < 200 && daemon_alive(&rec); i++) {
                struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        if (daemon_alive(&rec))
                kill(rec.pid, SIGKILL);
        _cleanup_free_ char *mnt = xasprintf("%s/mnt", rec.dir);
        DIR *d = opendir(mnt);
        if (d) {
                struct dirent *de;
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.') {
                                _cleanup_free_ char *p = xasprintf("%s/%s", mnt, de->d_name);
                                umount2(p, MNT_DETACH);
                        }
                closedir(d);
        }
        rm_rf_at(AT_FDCWD, rec.dir);
        sqlite3 *db = NULL;
        if (home_db_open(home, &db, err) == 0) {
                delete_record(db, rec.project, rec.number);
                sqlite3_close(db);
        }
        record_done(&rec);
        return r;
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
        if (access(path, F_OK) == 0) {
                int r = home_db_open(home, &db, err);
                if (r < 0)
                        return r;
                sqlite3_stmt *st;
                if (sqlite3_prepare_v2(
                            db,
                            "SELECT project, number, platform, image FROM sandboxes WHERE state='running' "
                            "ORDER BY project, number",
                            -1, &st, NULL) == SQLITE_OK) {
                        while (sqlite3_step(st) == SQLITE_ROW) {
                                GROW(out, cap, n + 1);
                                const char *image = (const char *)sqlite3_column_text(st, 3);
                                out[n++] = (lfs_sandbox_info){
                                        .project = xstrdup((const char *)sqlite3_column_text(st, 0)),
                                        .sandbox = sqlite3_column_int(st, 1),
                                        .platform = xstrdup((const char *)sqlite3_column_text(st, 2)),
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
        }
        free(items);
}

/* Opens the Sandbox and sends call with the given fields. */
static int sandbox_call(lfs_home *home, const char *project, int sandbox, json_t *req, json_t **ret,
                        lfs_error **err) {
        sandbox_record rec = { 0 };
        int r = sandbox_open(home, project, sandbox, &rec, err);
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
                out[i].path = xstrdup(json_string_value(json_object_get(c, "path")) ?: "");
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
