/* SPDX-License-Identifier: MIT */
/*
 * layerfs-daemon: one per Sandbox. It serves the Sandbox's Workspaces over FUSE (a thread
 * per mount) and answers the library on the Sandbox's control socket, one JSON object per
 * line: {"token", "call", ...} -> {"ok": result} or {"error": {"code", "message"}}.
 *
 *   layerfs-daemon --home DIR --project NAME --sandbox N --dir SANDBOX_DIR
 *
 * SANDBOX_DIR (0700) holds `token` (0600, written by the library before the start),
 * `control.sock`, `daemon.log`, and per Workspace `mnt/<branch>` and `upper/<branch>`.
 */
#define FUSE_USE_VERSION 35
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "fuse_ops.h"
#include "store.h"
#include "workspace.h"

#define MAX_WORKSPACES 16

typedef struct workspace {
        bool active;
        char *branch;
        char *key; /* the branch as one path component */
        char *mountpoint;
        char *upper;
        lfs_store *store;
        ws_fs *fs;
        struct fuse_session *se;
        pthread_t thread;
} workspace;

typedef struct daemon_state {
        lfs_home *home;
        char *project;
        char *dir;
        char *token;
        int number;
        workspace ws[MAX_WORKSPACES];
        bool closing;
} daemon_state;

/* One line of the daemon's log (stderr, which the library points at daemon.log). */
#define LOG_MAX_BYTES (1 << 20)
static const char *log_dir; /* the Sandbox's directory, where daemon.log is */

/* Keeps the log bounded: past LOG_MAX_BYTES it becomes daemon.log.1 (replacing the
 * previous one) and a new daemon.log starts. */
static void rotate_log(void) {
        struct stat st;
        if (!log_dir || fstat(STDERR_FILENO, &st) < 0 || st.st_size < LOG_MAX_BYTES)
                return;
        _cleanup_free_ char *path = xasprintf("%s/daemon.log", log_dir);
        _cleanup_free_ char *old = xasprintf("%s/daemon.log.1", log_dir);
        if (rename(path, old) < 0)
                return;
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        fflush(stdout);
        fflush(stderr);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
}

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
        rotate_log();
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime_r(&now, &tm));
        fprintf(stderr, "%s ", when);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        fflush(stderr);
}

static json_t *error_json(lfs_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *error_json(lfs_code code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *msg = NULL;
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        json_t *j = json_pack("{s:{s:s, s:s}}", "error", "code", lfs_code_name(code), "message",
                              msg ? msg : "out of memory");
        free(msg);
        return j;
}

static json_t *error_from(lfs_error *err) {
        json_t *e = json_pack("{s:s, s:s}", "code", lfs_code_name(err ? err->code : LFS_FAILED), "message",
                              err && err->message ? err->message : "failed");
        if (err && err->n_paths) {
                json_t *paths = json_array();
                for (size_t i = 0; i < err->n_paths; i++)
                        json_array_append_new(paths, json_string(err->paths[i]));
                json_object_set_new(e, "paths", paths);
        }
        lfs_error_free(err);
        return json_pack("{s:o}", "error", e);
}

static json_t *ok_json(json_t *result) {
        return json_pack("{s:o}", "ok", result ? result : json_object());
}

/* "feature/x" -> "feature%2Fx": a branch as one directory name. */
static char *branch_key(const char *branch) {
        size_t len = strlen(branch);
        char *key = xmalloc(3 * len + 1), *p = key;
        for (const char *s = branch; *s; s++) {
                if (*s == '/' || *s == '%')
                        p += sprintf(p, "%%%02X", (unsigned char)*s);
                else
                        *p++ = *s;
        }
        *p = 0;
        return key;
}

static workspace *find_ws(daemon_state *d, const char *branch) {
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active && !strcmp(d->ws[i].branch, branch))
                        return &d->ws[i];
        return NULL;
}

static void *serve_mount(void *arg) {
        workspace *w = arg;
        fuse_session_loop(w->se);
        return NULL;
}

static void invalidate(void *userdata, uint64_t parent, const char *name) {
        workspace *w = userdata;
        fuse_lowlevel_notify_inval_entry(w->se, parent, name, strlen(name));
}

static void ws_release_slot(workspace *w) {
        if (w->se) {
                fuse_session_unmount(w->se);
                fuse_session_destroy(w->se);
        }
        ws_close(w->fs);
        lfs_store_close(w->store);
        if (w->upper)
                rm_rf_at(AT_FDCWD, w->upper);
        if (w->mountpoint)
                rmdir(w->mountpoint);
        free(w->branch);
        free(w->key);
        free(w->mountpoint);
        free(w->upper);
        *w = (workspace){ 0 };
}

static json_t *call_mount(daemon_state *d, const char *branch) {
        lfs_error *err = NULL;
        if (!branch || lfs_check_branch_name(branch, &err) < 0)
                return err ? error_from(err) : error_json(LFS_INVALID_INPUT, "give the branch to mount");
        if (find_ws(d, branch))
                return error_json(
                        LFS_ALREADY_MOUNTED,
                        "branch '%s' is already mounted in sandbox %d; unmount it first or use it there",
                        branch, d->number);
        workspace *w = NULL;
        for (int i = 0; i < MAX_WORKSPACES && !w; i++)
                if (!d->ws[i].active)
                        w = &d->ws[i];
        if (!w)
                return error_json(LFS_LIMIT_REACHED,
                                  "sandbox %d already has %d Workspaces mounted; unmount one first",
                                  d->number, MAX_WORKSPACES);
        w->branch = xstrdup(branch);
        w->key = branch_key(branch);
        w->mountpoint = xasprintf("%s/mnt/%s", d->dir, w->key);
        w->upper = xasprintf("%s/upper/%s", d->dir, w->key);
        int r = lfs_store_open(d->home, d->project, &w->store, &err);
        lfs_id head;
        if (r == 0)
                r = lfs_branch_head(w->store, branch, &head, &err);
        if (r < 0) {
                free(w->upper);
                free(w->mountpoint);
                w->upper = w->mountpoint = NULL;
                ws_release_slot(w);
                return error_from(err);
        }
        rm_rf_at(AT_FDCWD, w->upper);
        struct stat st;
        if (mkdir(w->mountpoint, 0755) < 0 &&
            (errno != EEXIST || lstat(w->mountpoint, &st) < 0 || !S_ISDIR(st.st_mode))) {
                json_t *j = error_json(LFS_FAILED, "cannot mount at %s: %s; remove what is in the way",
                                       w->mountpoint,
                                       errno == EEXIST ? "it is not a directory" : strerror(errno));
                free(TAKE_PTR(w->mountpoint)); /* not ours to remove */
                ws_release_slot(w);
                return j;
        }
        if (mkdir(w->upper, 0700) < 0) {
                json_t *j = error_json(LFS_FAILED, "cannot make %s: %s", w->upper, strerror(errno));
                ws_release_slot(w);
                return j;
        }
        const char *owner = getenv("LAYERFS_COMMAND_UID"), *group = getenv("LAYERFS_COMMAND_GID");
        uid_t uid = owner && *owner ? (uid_t)strtoul(owner, NULL, 10) : 501;
        gid_t gid = group && *group ? (gid_t)strtoul(group, NULL, 10) : 20;
        if (ws_open(w->store, branch, w->upper, uid, gid, &w->fs, &err) < 0) {
                ws_release_slot(w);
                return error_from(err);
        }
        _cleanup_free_ char *fsname = xasprintf("layerfs:%s/%s", d->project, branch);
        w->se = ws_fuse_mount(w->fs, w->mountpoint, fsname);
        if (!w->se) {
                ws_release_slot(w);
                return error_json(LFS_FAILED,
                                  "cannot mount the Workspace of '%s' (see 'layerfs sandbox log %d')",
                                  branch, d->number);
        }
        ws_set_invalidator(w->fs, invalidate, w);
        if (pthread_create(&w->thread, NULL, serve_mount, w) != 0) {
                ws_release_slot(w);
                return error_json(LFS_FAILED, "cannot start the Workspace's thread");
        }
        w->active = true;
        log_line("mounted %s at %s", branch, w->mountpoint);
        return ok_json(json_pack("{s:i, s:s, s:n, s:s}", "sandbox", d->number, "path", w->mountpoint,
                                 "image", "platform", "linux"));
}

static json_t *not_mounted(daemon_state *d, const char *branch) {
        return error_json(
                LFS_NOT_MOUNTED,
                "branch '%s' is not mounted in sandbox %d; 'layerfs sandbox list_workspaces %d' shows "
                "what is",
                branch ? branch : "", d->number, d->number);
}

static json_t *changes_json(const lfs_change *changes, size_t n) {
        json_t *out = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(out, json_pack("{s:s, s:s}", "path", changes[i].path, "change",
                                                     lfs_change_kind_name(changes[i].kind)));
        return out;
}

/* Data written through the kernel's page cache (writeback cache, shared mmap) reaches
 * us only on writeback: ask for it before looking at what changed. Without the
 * workspace's lock held, since the mount's thread serves the writes this causes. */
static void flush_kernel_cache(workspace *w) {
        int fd = open(w->mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
                syncfs(fd);
                close(fd);
        }
}

static json_t *call_status(daemon_state *d, const char *branch) {
        workspace *w = branch ? find_ws(d, branch) : NULL;
        if (!w)
                return not_mounted(d, branch);
        flush_kernel_cache(w);
        lfs_change *changes = NULL;
        size_t n = 0;
        lfs_error *err = NULL;
        if (ws_status(w->fs, &changes, &n, &err) < 0)
                return error_from(err);
        json_t *j = ok_json(changes_json(changes, n));
        lfs_change_list_free(changes, n);
        return j;
}

static json_t *call_commit(daemon_state *d, const char *branch, const char *message) {
        workspace *w = branch ? find_ws(d, branch) : NULL;
        if (!w)
                return not_mounted(d, branch);
        flush_kernel_cache(w);
        lfs_error *err = NULL;
        lfs_id commit;
        int merged = 0;
        if (ws_commit(w->fs, message, &commit, &merged, &err) < 0)
                return error_from(err);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&commit, hex);
        log_line("committed %s on %s%s", hex, branch, merged ? " (merged)" : "");
        return ok_json(json_pack("{s:s, s:b}", "commit", hex, "merged", merged));
}

/* Detaches a mount and waits for its thread; force: lazily, even while busy. */
static int stop_mount(workspace *w, bool force) {
        if (umount2(w->mountpoint, force ? MNT_DETACH : 0) < 0 && errno != EINVAL && errno != ENOENT)
                return -errno;
        pthread_join(w->thread, NULL);
        log_line("unmounted %s", w->branch);
        ws_release_slot(w);
        return 0;
}

static json_t *call_unmount(daemon_state *d, const char *branch, bool discard) {
        workspace *w = branch ? find_ws(d, branch) : NULL;
        if (!w)
                return not_mounted(d, branch);
        lfs_error *err = NULL;
        flush_kernel_cache(w);
        if (!discard && ws_is_dirty(w->fs, &err)) {
                lfs_error_free(err);
                return error_json(
                        LFS_DIRTY,
                        "the Workspace of '%s' has uncommitted changes; commit them, or unmount with "
                        "--discard to drop them",
                        branch);
        }
        int r = stop_mount(w, false);
        if (r == -EBUSY)
                return error_json(
                        LFS_BUSY,
                        "the Workspace of '%s' is in use (a process has its cwd or a file open in %s); "
                        "end it, then unmount",
                        branch, w->mountpoint);
        if (r < 0)
                return error_json(LFS_FAILED, "cannot unmount %s: %s", w->mountpoint, strerror(-r));
        return ok_json(NULL);
}

static json_t *call_list(daemon_state *d) {
        json_t *out = json_array();
        for (int i = 0; i < MAX_WORKSPACES; i++) {
                workspace *w = &d->ws[i];
                if (!w->active)
                        continue;
                flush_kernel_cache(w);
                json_array_append_new(out, json_pack("{s:s, s:s, s:b}", "branch", w->branch, "path",
                                                     w->mountpoint, "dirty", ws_is_dirty(w->fs, NULL)));
        }
        return ok_json(out);
}

static json_t *call_close(daemon_state *d, bool force) {
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        flush_kernel_cache(&d->ws[i]);
        if (!force)
                for (int i = 0; i < MAX_WORKSPACES; i++)
                        if (d->ws[i].active && ws_is_dirty(d->ws[i].fs, NULL))
                                return error_json(
                                        LFS_DIRTY,
                                        "the Workspace of '%s' in sandbox %d has uncommitted changes; "
                                        "commit them, or close with --force to drop them",
                                        d->ws[i].branch, d->number);
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        stop_mount(&d->ws[i], true);
        d->closing = true;
        return ok_json(NULL);
}

static json_t *dispatch(daemon_state *d, json_t *req) {
        const char *token = json_string_value(json_object_get(req, "token"));
        const char *call = json_string_value(json_object_get(req, "call"));
        const char *branch = json_string_value(json_object_get(req, "branch"));
        if (!token || strcmp(token, d->token))
                return error_json(LFS_PERMISSION_DENIED, "the request did not carry this Sandbox's token");
        if (!call)
                return error_json(LFS_INVALID_INPUT, "the request names no call");
        if (!strcmp(call, "workspace.mount"))
                return call_mount(d, branch);
        if (!strcmp(call, "workspace.status"))
                return call_status(d, branch);
        if (!strcmp(call, "workspace.commit")) {
                const char *message = json_string_value(json_object_get(req, "message"));
                return call_commit(d, branch, message);
        }
        if (!strcmp(call, "workspace.unmount"))
                return call_unmount(d, branch, json_is_true(json_object_get(req, "discard")));
        if (!strcmp(call, "sandbox.list_workspaces"))
                return call_list(d);
        if (!strcmp(call, "sandbox.close"))
                return call_close(d, json_is_true(json_object_get(req, "force")));
        if (!strcmp(call, "sandbox.ping"))
                return ok_json(json_pack("{s:i}", "pid", (int)getpid()));
        return error_json(LFS_INVALID_INPUT, "unknown call '%s'", call);
}

static void serve_client(daemon_state *d, int fd) {
        FILE *in = fdopen(dup(fd), "r");
        if (!in)
                return;
        char *line = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, in) > 0) {
                json_error_t jerr;
                json_t *req = json_loads(line, 0, &jerr);
                json_t *resp =
                        req ? dispatch(d, req) : error_json(LFS_INVALID_INPUT, "bad request: %s", jerr.text);
                json_decref(req);
                char *text = json_dumps(resp, JSON_COMPACT);
                json_decref(resp);
                if (text) {
                        size_t len = strlen(text);
                        text[len] = '\n';
                        (void)!write(fd, text, len + 1);
                        free(text);
                }
                if (d->closing)
                        break;
        }
        free(line);
        fclose(in);
}

static int listen_control(const char *path) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(addr.sun_path)) {
                close(fd);
                return -ENAMETOOLONG;
        }
        memcpy(addr.sun_path, path, strlen(path) + 1);
        unlink(path);
        mode_t old = umask(0177);
        int r = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
        umask(old);
        if (r < 0 || listen(fd, 16) < 0) {
                r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

static char *read_token(const char *dir) {
        _cleanup_free_ char *path = xasprintf("%s/token", dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char buf[128] = "";
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = 0;
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return buf[0] ? xstrdup(buf) : NULL;
}

int main(int argc, char **argv) {
        daemon_state d = { 0 };
        const char *home_dir = NULL;
        static const struct option options[] = {
                { "home", required_argument, NULL, 'h' },
                { "project", required_argument, NULL, 'p' },
                { "sandbox", required_argument, NULL, 'n' },
                { "dir", required_argument, NULL, 'd' },
                { NULL, 0, NULL, 0 },
        };
        int c;
        while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
                switch (c) {
                case 'h':
                        home_dir = optarg;
                        break;
                case 'p':
                        d.project = optarg;
                        break;
                case 'n':
                        d.number = atoi(optarg);
                        break;
                case 'd':
                        d.dir = optarg;
                        break;
                default:
                        fprintf(stderr,
                                "usage: layerfs-daemon --home DIR --project NAME --sandbox N --dir DIR\n");
                        return 2;
                }
        }
        if (!home_dir || !d.project || !d.dir || d.number <= 0) {
                fprintf(stderr, "usage: layerfs-daemon --home DIR --project NAME --sandbox N --dir DIR\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        /* Many files may be open across the Workspaces. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
        lfs_error *err = NULL;
        if (lfs_home_open(home_dir, &d.home, &err) < 0) {
                fprintf(stderr, "%s: %s\n", lfs_code_name(err->code), err->message);
                return 1;
        }
        log_dir = d.dir;
        d.token = read_token(d.dir);
        if (!d.token) {
                fprintf(stderr, "no token in %s/token\n", d.dir);
                return 1;
        }
        _cleanup_free_ char *mnt = xasprintf("%s/mnt", d.dir), *upper = xasprintf("%s/upper", d.dir);
        mkdir(mnt, 0755);
        mkdir(upper, 0700);
        _cleanup_free_ char *sock = xasprintf("%s/control.sock", d.dir);
        int lfd = listen_control(sock);
        if (lfd < 0) {
                fprintf(stderr, "cannot listen on %s: %s\n", sock, strerror(-lfd));
                return 1;
        }
        log_line("sandbox %d of %s ready (pid %d)", d.number, d.project, (int)getpid());
        while (!d.closing) {
                int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                serve_client(&d, cfd);
                close(cfd);
        }
        close(lfd);
        unlink(sock);
        log_line("sandbox %d closed", d.number);
        free(d.token);
        lfs_home_close(d.home);
        return 0;
}
