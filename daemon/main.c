/* SPDX-License-Identifier: MIT */
/*
 * layerfs-daemon: one per Sandbox. It serves the Sandbox's Workspaces over FUSE (a thread
 * per mount) and answers the library on the Sandbox's control socket, one JSON object per
 * line: {"token", "call", ...} -> {"ok": result} or {"error": {"code", "message"}}.
 *
 *   layerfs-daemon --home DIR --project NAME --sandbox N --dir SANDBOX_DIR --cgroup CGROUP
 *                  --instance ID
 *
 * SANDBOX_DIR (0711) holds `token` (0600, written by the library before the start),
 * `control.sock`, `daemon.log`, and per Workspace `mnt/<branch>` and `upper/<branch>`.
 */
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "cgroup.h"
#include "config.h" /* LAYERFS_VERSION */
#include "daemon.h"
#include "records.h"
#include "teardown.h"
#include "json_path.h"
#include "numbers.h"
#include "quote.h"
#include "fuse_ops.h"

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

void log_line(const char *fmt, ...) {
        rotate_log();
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime_r(&now, &tm));
        va_list ap;
        va_start(ap, fmt);
        char *entry = NULL;
        if (vasprintf(&entry, fmt, ap) < 0)
                entry = NULL;
        va_end(ap);
        /* One line per entry, whatever a command line or path in it holds. */
        _cleanup_free_ char *shown = lfs_quote(entry ? entry : "(out of memory)", LFS_QUOTE_INLINE);
        free(entry);
        fprintf(stderr, "%s %s\n", when, shown);
        fflush(stderr);
}

json_t *error_json(lfs_code code, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        char *msg = NULL;
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        /* A message may quote a path that is not UTF-8: lfs_json_path keeps it text. */
        json_t *e = json_pack("{s:s, s:o}", "code", lfs_code_name(code), "message",
                              lfs_json_path(msg ? msg : "out of memory"));
        free(msg);
        return json_pack("{s:o}", "error", e);
}

json_t *error_from(lfs_error *err) {
        json_t *e = json_pack("{s:s, s:o}", "code", lfs_code_name(err ? err->code : LFS_FAILED), "message",
                              lfs_json_path(err && err->message ? err->message : "failed"));
        if (err && err->n_paths) {
                json_t *paths = json_array();
                for (size_t i = 0; i < err->n_paths; i++)
                        json_array_append_new(paths, lfs_json_path(err->paths[i]));
                json_object_set_new(e, "paths", paths);
        }
        lfs_error_free(err);
        return json_pack("{s:o}", "error", e);
}

json_t *ok_json(json_t *result) {
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
        /* A directory name has at most NAME_MAX bytes; a branch may have 200 of which
         * each '/' takes three here. A longer key keeps its start and ends in "%~" and a
         * hash of the branch: no short key has "%~" in it, so none is confused. */
        if (p - key > NAME_MAX) {
                lfs_id digest;
                char hex[LFS_HEX_LEN + 1];
                lfs_sha256(branch, len, &digest);
                lfs_id_to_hex(&digest, hex);
                snprintf(key + 200, 3 * len + 1 - 200, "%%~%.32s", hex);
        }
        return key;
}

workspace *find_ws(daemon_state *d, const char *branch) {
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

/* A name a merged commit replaced. With the old inode named, the kernel treats it as
 * deleted (its link count cleared), so it is evicted and FORGET lets its upper file go;
 * a directory that is not empty in the kernel's cache can only be forgotten. */
static void invalidate(void *userdata, uint64_t parent, uint64_t child, const char *name) {
        workspace *w = userdata;
        if (child && fuse_lowlevel_notify_delete(w->se, parent, child, name, strlen(name)) == 0)
                return;
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

static int stop_mount(workspace *w, bool force);

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
        if (ws_open(w->store, branch, w->upper, d->uid, d->gid, &w->fs, &err) < 0) {
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
        ws_set_limits(w->fs, d->ws_memory, MAX_WORKSPACES);
        if (pthread_create(&w->thread, NULL, serve_mount, w) != 0) {
                ws_release_slot(w);
                return error_json(LFS_FAILED, "cannot start the Workspace's thread");
        }
        /* Waits for the mount to answer (INIT), then knows its device. */
        if (stat(w->mountpoint, &st) < 0) {
                stop_mount(w, true);
                return error_json(LFS_FAILED, "the Workspace of '%s' does not answer at %s", branch,
                                  w->mountpoint);
        }
        w->dev = st.st_dev;
        ws_fuse_widen_readahead(w->dev);
        w->active = true;
        log_line("mounted %s at %s", branch, w->mountpoint);
        return ok_json(json_pack("{s:i, s:s, s:n, s:s}", "sandbox", d->number, "path", w->mountpoint,
                                 "image", "platform", "linux"));
}

json_t *not_mounted(daemon_state *d, const char *branch) {
        return error_json(
                LFS_NOT_MOUNTED,
                "branch '%s' is not mounted in sandbox %d; 'layerfs sandbox list_workspaces %d' shows "
                "what is",
                branch ? branch : "", d->number, d->number);
}

static json_t *changes_json(const lfs_change *changes, size_t n) {
        json_t *out = json_array();
        for (size_t i = 0; i < n; i++) {
                json_t *c = json_pack("{s:s}", "change", lfs_change_kind_name(changes[i].kind));
                lfs_json_set_path(c, "path", changes[i].path);
                json_array_append_new(out, c);
        }
        return out;
}

/* Data written through the kernel's page cache (a shared mapping) reaches us only on
 * writeback: ask for it before looking at what changed. syncfs does not wait for a FUSE
 * mount's writeback to be answered (only virtiofs has FUSE_SYNCFS), so a process still
 * running with a shared mapping had its writes missed by the commit. Invalidating the
 * pages of each file open for writing makes the kernel write every dirty one back
 * (launder) and wait for our answer before it returns; the process's next access reads
 * them from us again. Without the workspace's lock held, since the mount's thread
 * serves the writes this causes. */
static void flush_kernel_cache(workspace *w) {
        int fd = open(w->mountpoint, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
                syncfs(fd);
                close(fd);
        }
        uint64_t *writers = NULL;
        size_t n = 0;
        if (ws_open_writers(w->fs, &writers, &n) == 0)
                for (size_t i = 0; i < n; i++)
                        (void)fuse_lowlevel_notify_inval_inode(w->se, writers[i], 0, 0);
        free(writers);
}

/* Status, commit and the dirty checks can take long (a large file to read) and must not
 * stop the Sandbox's other calls meanwhile: they run without d->lock, holding the
 * Workspace instead. A held Workspace stays mounted; unmount and close wait for its
 * holders (close --force and unmount --discard cancel them first). With d->lock held. */
static void hold_ws(workspace *w) {
        w->holders++;
}

static void release_ws(daemon_state *d, workspace *w) {
        if (--w->holders == 0)
                pthread_cond_broadcast(&d->ws_released);
}

/* A long read of w: held, d->lock let go, the kernel's cached data flushed first. */
static void work_begin(daemon_state *d, workspace *w) {
        hold_ws(w);
        pthread_mutex_unlock(&d->lock);
        flush_kernel_cache(w);
}

static void work_end(daemon_state *d, workspace *w) {
        pthread_mutex_lock(&d->lock);
        release_ws(d, w);
}

/* With d->lock held; released while waiting. */
static void wait_ws_released(daemon_state *d, workspace *w) {
        while (w->holders)
                pthread_cond_wait(&d->ws_released, &d->lock);
}

/* What a cancelled status or commit tells its caller. With d->lock held. */
static json_t *cancelled(daemon_state *d, const char *what, const char *branch) {
        if (d->closing)
                return error_json(LFS_NO_SUCH_SANDBOX, "the %s of '%s' was cancelled: sandbox %d is closing",
                                  what, branch, d->number);
        return error_json(LFS_NOT_MOUNTED,
                          "the %s of '%s' was cancelled: the Workspace is being unmounted with --discard",
                          what, branch);
}

/* Called with d->lock held (dispatch); releases it while the Workspace is read. */
static json_t *call_status(daemon_state *d, const char *branch) {
        workspace *w = branch ? find_ws(d, branch) : NULL;
        if (!w)
                return not_mounted(d, branch);
        work_begin(d, w);
        lfs_change *changes = NULL;
        size_t n = 0;
        lfs_error *err = NULL;
        int r = ws_status(w->fs, &changes, &n, &err);
        work_end(d, w);
        if (r == -ECANCELED) {
                lfs_error_free(err);
                return cancelled(d, "status", branch);
        }
        if (r < 0)
                return error_from(err);
        json_t *j = ok_json(changes_json(changes, n));
        lfs_change_list_free(changes, n);
        return j;
}

/* Called with d->lock held (dispatch); releases it while the Workspace is committed. */
static json_t *call_commit(daemon_state *d, const char *branch, const char *message) {
        workspace *w = branch ? find_ws(d, branch) : NULL;
        if (!w)
                return not_mounted(d, branch);
        work_begin(d, w);
        lfs_error *err = NULL;
        lfs_id commit;
        int merged = 0;
        int r = ws_commit(w->fs, message, &commit, &merged, &err);
        work_end(d, w);
        if (r == -ECANCELED) {
                lfs_error_free(err);
                return cancelled(d, "commit", branch);
        }
        if (r < 0)
                return error_from(err);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&commit, hex);
        log_line("committed %s on %s%s", hex, branch, merged ? " (merged)" : "");
        return ok_json(json_pack("{s:s, s:b}", "commit", hex, "merged", merged));
}

/* Whether each Workspace has changes (dirty[i] for d->ws[i]), without d->lock held
 * meanwhile. With d->lock held; false if the Sandbox began closing meanwhile. */
static bool check_dirty(daemon_state *d, bool dirty[MAX_WORKSPACES]) {
        bool held[MAX_WORKSPACES] = { false };
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if ((held[i] = d->ws[i].active))
                        hold_ws(&d->ws[i]);
        pthread_mutex_unlock(&d->lock);
        for (int i = 0; i < MAX_WORKSPACES; i++) {
                dirty[i] = false;
                if (held[i]) {
                        flush_kernel_cache(&d->ws[i]);
                        dirty[i] = ws_is_dirty(d->ws[i].fs, NULL);
                }
        }
        pthread_mutex_lock(&d->lock);
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (held[i])
                        release_ws(d, &d->ws[i]);
        return !d->closing;
}

static void ignore_signal(int sig) {
        (void)sig;
}

/* The mount's FUSE loop can outlive our unmount: a copy of the mount in another mount
 * namespace (unshare -m, a container) or a bind mount keeps the connection, so its
 * read of /dev/fuse never ends. Tell the loop to exit and interrupt that read (SIGUSR1,
 * whose handler does nothing, without SA_RESTART) until the thread is gone; destroying
 * the session then closes /dev/fuse, which aborts the connection for those copies
 * (ENOTCONN). The signal is repeated because it can land just before the read. */
static void end_mount_thread(workspace *w) {
        fuse_session_exit(w->se);
        for (;;) {
                pthread_kill(w->thread, SIGUSR1);
                struct timespec deadline;
                clock_gettime(CLOCK_REALTIME, &deadline);
                deadline.tv_nsec += 100 * 1000 * 1000;
                if (deadline.tv_nsec >= 1000000000L) {
                        deadline.tv_sec++;
                        deadline.tv_nsec -= 1000000000L;
                }
                if (pthread_timedjoin_np(w->thread, NULL, &deadline) == 0)
                        return;
        }
}

/* Unmounts and ends the mount's thread. Busy stays EBUSY unless force (teardown, the
 * Sandbox's own processes are dead by then): MNT_FORCE aborts the FUSE connection
 * first, so that whatever outside the Sandbox still uses the mount (a shell's cwd, an
 * open file) gets ENOTCONN rather than keeping it, then a busy mount is detached. */
static int stop_mount(workspace *w, bool force) {
        int r;
        if (force) {
                r = umount2(w->mountpoint, MNT_FORCE);
                if (r < 0 && errno == EBUSY)
                        r = umount2(w->mountpoint, MNT_DETACH);
        } else {
                r = umount2(w->mountpoint, 0);
        }
        if (r < 0 && errno != EINVAL && errno != ENOENT)
                return -errno;
        end_mount_thread(w);
        log_line("unmounted %s", w->branch);
        ws_release_slot(w);
        return 0;
}

/* Called with d->lock held (dispatch); releases it for the dirty check and while it waits
 * for the Workspace's other holders. */
static json_t *call_unmount(daemon_state *d, const char *branch, bool discard) {
        workspace *w = branch ? find_ws(d, branch) : NULL;
        if (!w)
                return not_mounted(d, branch);
        if (discard) {
                ws_cancel(w->fs); /* its changes go anyway: a status or commit need not finish */
        } else {
                work_begin(d, w);
                bool dirty = ws_is_dirty(w->fs, NULL);
                work_end(d, w);
                if (dirty && !d->closing)
                        return error_json(
                                LFS_DIRTY,
                                "the Workspace of '%s' has uncommitted changes; commit them, or unmount with "
                                "--discard to drop them",
                                branch);
        }
        wait_ws_released(d, w);
        /* Meanwhile the Sandbox may have begun closing, or another unmount ended this one. */
        if (d->closing)
                return error_json(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        if (find_ws(d, branch) != w)
                return not_mounted(d, branch);
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

/* Called with d->lock held (dispatch); releases it for the dirty checks. */
static json_t *call_list(daemon_state *d) {
        bool dirty[MAX_WORKSPACES];
        if (!check_dirty(d, dirty))
                return error_json(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        json_t *out = json_array();
        for (int i = 0; i < MAX_WORKSPACES; i++) {
                workspace *w = &d->ws[i];
                if (!w->active)
                        continue;
                json_array_append_new(out, json_pack("{s:s, s:s, s:b, s:s}", "branch", w->branch, "path",
                                                     w->mountpoint, "dirty", dirty[i], "platform", "linux"));
        }
        return ok_json(out);
}

/* Ends every process the Sandbox started, however it detached, also those that a FUSE
 * server of the Sandbox's own holds (lfs_sandbox_end_processes): the daemon steps out of
 * the Sandbox's cgroup into LayerFS's root and kills the Sandbox's whole subtree. Where
 * the daemon cannot step out (a delegated root with controllers), each command leaf is
 * killed instead and the library removes the rest after the daemon exits. */
static int end_commands(daemon_state *d, char **ret_why) {
        _cleanup_free_ char *root = xstrdup(d->cgroup);
        int r = lfs_cgroup_enter(dirname(root), 0);
        if (r == 0)
                return lfs_sandbox_end_processes(d->cgroup, 10000, ret_why);
        log_line("cannot leave %s (%s): ending each command's cgroup instead", d->cgroup, strerror(-r));
        DIR *dir = opendir(d->cgroup);
        struct dirent *de;
        r = 0;
        while (dir && (de = readdir(dir)))
                if (!strncmp(de->d_name, "cmd-", 4)) {
                        _cleanup_free_ char *leaf = xasprintf("%s/%s", d->cgroup, de->d_name), *why = NULL;
                        int k = lfs_sandbox_end_processes(leaf, 10000, &why);
                        if (k < 0 && r == 0) {
                                r = k;
                                *ret_why = TAKE_PTR(why);
                        }
                }
        if (dir)
                closedir(dir);
        return r;
}

/* Everything the Sandbox made goes: processes, mounts, cgroups, directory, and then its
 * record; the same for `sandbox close` and for the idle close. With d->lock held. When
 * something stays, the record stays too (left to whoever takes it over: the closing
 * library, or the next reclaim) and *ret_why says what stayed. */
static int teardown(daemon_state *d, const char *why, char **ret_why) {
        log_line("closing sandbox %d (%s)", d->number, why);
        d->closing = true;
        pthread_cond_broadcast(&d->events_cond); /* followers of sandbox events end */
        /* Whatever reads a Workspace stops now; then nothing holds them. */
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        ws_cancel(d->ws[i].fs);
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        wait_ws_released(d, &d->ws[i]);
        /* A command checked before closing began must be in its leaf before the leaves
         * are ended, or it could start after and outlive the Sandbox. */
        while (d->starting_commands)
                pthread_cond_wait(&d->started_cond, &d->lock);
        _cleanup_free_ char *left = NULL;
        int r = end_commands(d, &left);
        if (r == 0) {
                for (int i = 0; i < MAX_WORKSPACES; i++)
                        if (d->ws[i].active)
                                stop_mount(&d->ws[i], true);
                r = lfs_sandbox_remove(d->cgroup, d->dir, &left);
        }
        if (r == 0) {
                r = lfs_sandbox_record_delete(d->home, d->project, d->number, d->instance);
                if (r < 0)
                        left = xasprintf("cannot delete its record: %s", strerror(-r));
        } else {
                log_line("sandbox %d could not be removed completely: %s; its record stays", d->number,
                         left ? left : strerror(-r));
                lfs_sandbox_record_release(d->home, d->project, d->number, d->instance);
        }
        d->closed = true;
        wake_main_loop(d);
        if (r < 0 && ret_why)
                *ret_why = TAKE_PTR(left);
        return r;
}

/* Called with d->lock held (dispatch); without --force, releases it for the dirty checks.
 * With --force it cancels whatever reads a Workspace (teardown). */
static json_t *call_close(daemon_state *d, bool force) {
        bool dirty[MAX_WORKSPACES];
        if (!force && !check_dirty(d, dirty))
                return error_json(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        for (int i = 0; i < MAX_WORKSPACES && !force; i++)
                if (d->ws[i].active && dirty[i])
                        return error_json(LFS_DIRTY,
                                          "the Workspace of '%s' in sandbox %d has uncommitted changes; "
                                          "commit them, or close with --force to drop them",
                                          d->ws[i].branch, d->number);
        _cleanup_free_ char *left = NULL;
        int r = teardown(d, force ? "sandbox close --force" : "sandbox close", &left);
        if (r < 0)
                return error_json(LFS_FAILED,
                                  "sandbox %d could not be removed completely: %s; its record stays so that "
                                  "'layerfs runtime reclaim' can finish once that is fixed",
                                  d->number, left ? left : strerror(-r));
        return ok_json(NULL);
}

static json_t *dispatch(daemon_state *d, int client_fd, json_t *req, int *fds, size_t n_fds) {
        const char *token = json_string_value(json_object_get(req, "token"));
        const char *call = json_string_value(json_object_get(req, "call"));
        const char *branch = json_string_value(json_object_get(req, "branch"));
        if (!token || strcmp(token, d->token))
                return error_json(LFS_PERMISSION_DENIED, "the request did not carry this Sandbox's token");
        if (!call)
                return error_json(LFS_INVALID_INPUT, "the request names no call");
        if (!strcmp(call, "workspace.exec"))
                return call_exec(d, req, TAKE_PTR(fds), n_fds);
        for (size_t i = 0; i < n_fds; i++)
                close(fds[i]);
        if (!strcmp(call, "process.start"))
                return call_process_start(d, req);
        if (!strcmp(call, "sandbox.events"))
                return call_events(d, client_fd, json_is_true(json_object_get(req, "follow")));
        if (d->closing)
                return error_json(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
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
        if (!strcmp(call, "process.list"))
                return call_process_list(d);
        if (!strcmp(call, "process.kill"))
                return call_process_kill(d, req);
        if (!strcmp(call, "sandbox.ping"))
                return ok_json(json_pack("{s:i}", "pid", (int)getpid()));
        return error_json(LFS_INVALID_INPUT, "unknown call '%s'", call);
}

#define MAX_REQUEST (1 << 20)
#define MAX_FDS 3

/* One request line, with the fds passed along with it (SCM_RIGHTS). */
static json_t *read_request(int fd, int fds[MAX_FDS], size_t *ret_n_fds, json_t **ret_refusal) {
        _cleanup_free_ char *buf = xmalloc(MAX_REQUEST + 1);
        size_t len = 0;
        *ret_n_fds = 0;
        while (!memchr(buf, '\n', len)) {
                if (len == MAX_REQUEST) {
                        *ret_refusal = error_json(LFS_INVALID_INPUT, "the request is longer than %d bytes",
                                                  MAX_REQUEST);
                        return NULL;
                }
                union {
                        char buf[CMSG_SPACE(sizeof(int) * MAX_FDS)];
                        struct cmsghdr align;
                } control;
                struct iovec iov = { .iov_base = buf + len, .iov_len = MAX_REQUEST - len };
                struct msghdr msg = { .msg_iov = &iov,
                                      .msg_iovlen = 1,
                                      .msg_control = control.buf,
                                      .msg_controllen = sizeof(control.buf) };
                ssize_t k = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return NULL;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                                int *passed = (int *)(void *)CMSG_DATA(c);
                                for (size_t i = 0; i < n; i++) {
                                        if (*ret_n_fds < MAX_FDS)
                                                fds[(*ret_n_fds)++] = passed[i];
                                        else
                                                close(passed[i]);
                                }
                        }
                len += (size_t)k;
        }
        buf[len] = 0;
        json_error_t jerr;
        json_t *req = json_loads(buf, JSON_DISABLE_EOF_CHECK, &jerr);
        if (!req)
                *ret_refusal = error_json(LFS_INVALID_INPUT, "bad request: %s", jerr.text);
        return req;
}

typedef struct client {
        daemon_state *d;
        int fd;
        /* Guarded by d->lock: */
        bool waiting; /* for its request: may give its place to a newer connection */
        bool evicted; /* told to (its reading shut down) */
        struct client *prev, *next; /* d's list, in the order they came */
} client;

static void client_unlink(daemon_state *d, client *c) {
        *(c->prev ? &c->prev->next : &d->first_client) = c->next;
        *(c->next ? &c->next->prev : &d->last_client) = c->prev;
}

/* One request per connection; exec holds its connection until the command ends, so
 * each connection has its own thread. Calls other than exec run under d->lock, which
 * status, commit, list_workspaces, unmount and close release while they read a
 * Workspace (hold_ws). */
static void *serve_client(void *arg) {
        client *c = arg;
        daemon_state *d = c->d;
        int fds[MAX_FDS];
        size_t n_fds = 0;
        json_t *resp = NULL;
        json_t *req = read_request(c->fd, fds, &n_fds, &resp);
        pthread_mutex_lock(&d->lock);
        c->waiting = false;
        pthread_mutex_unlock(&d->lock);
        /* Told to give its place as its request arrived: a whole request is still served
         * (only reading was shut down), one cut short is not. */
        if (req) {
                const char *call = json_string_value(json_object_get(req, "call")) ?: "";
                /* These take the lock themselves, only while they look at the state. */
                bool exec = !strcmp(call, "workspace.exec") || !strcmp(call, "process.start") ||
                            !strcmp(call, "sandbox.events");
                if (!exec)
                        pthread_mutex_lock(&d->lock);
                resp = dispatch(d, c->fd, req, fds, n_fds);
                if (!exec)
                        pthread_mutex_unlock(&d->lock);
                json_decref(req);
        } else {
                for (size_t i = 0; i < n_fds; i++)
                        close(fds[i]);
        }
        char *text = resp ? json_dumps(resp, JSON_COMPACT) : NULL;
        json_decref(resp);
        if (text) {
                size_t len = strlen(text);
                text[len] = '\n';
                (void)!write(c->fd, text, len + 1);
                free(text);
        }
        pthread_mutex_lock(&d->lock);
        client_unlink(d, c);
        d->clients--;
        d->evicting -= c->evicted;
        pthread_mutex_unlock(&d->lock);
        close(c->fd);
        free(c);
        wake_main_loop(d);
        return NULL;
}

/* Refused connections, told why and waiting for their request to arrive before they
 * are closed: closed at once, the client's send of its request would fail (EPIPE) before
 * it could read the answer. At most MAX_REFUSED wait (the oldest goes first); the accept
 * loop polls them. */
#define MAX_REFUSED 32
static int refused[MAX_REFUSED];
static size_t n_refused;

static void refused_drop(size_t i) {
        close(refused[i]);
        refused[i] = refused[--n_refused];
}

/* The connection past MAX_CLIENTS, all of them running a call: told why, and closed
 * once its request came (refused_drop). */
static void refuse_client(daemon_state *d, int fd) {
        json_t *j = error_json(LFS_BUSY,
                               "sandbox %d serves %d connections at once, the most it takes, and each is "
                               "running a call (an exec, a follow of events); try again when one ends",
                               d->number, MAX_CLIENTS);
        char *text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (text) {
                size_t len = strlen(text);
                text[len] = '\n';
                (void)!send(fd, text, len + 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                free(text);
        }
        shutdown(fd, SHUT_WR);
        if (n_refused == MAX_REFUSED)
                refused_drop(0);
        refused[n_refused++] = fd;
}

/* Whether bytes of fd's request wait to be read: such a connection is not idle. */
static bool request_pending(int fd) {
        int n = 0;
        return ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* A new connection gets a thread of its own if there is a place for it: when all are
 * taken, the oldest connection still waiting for its request with nothing sent gives
 * its place (its reading is shut down, its thread ends), so that connections that never
 * send anything cannot hold the daemon; if none is waiting, the newcomer is refused. */
static void admit_client(daemon_state *d, int fd) {
        pthread_mutex_lock(&d->lock);
        bool room = d->clients - d->evicting < MAX_CLIENTS;
        for (client *o = d->first_client; o && !room; o = o->next)
                if (o->waiting && !o->evicted && !request_pending(o->fd)) {
                        o->evicted = true;
                        d->evicting++;
                        shutdown(o->fd, SHUT_RD);
                        room = true;
                }
        if (!room) {
                pthread_mutex_unlock(&d->lock);
                refuse_client(d, fd);
                return;
        }
        client *c = xcalloc(1, sizeof(*c));
        *c = (client){ .d = d, .fd = fd, .waiting = true, .prev = d->last_client };
        *(d->last_client ? &d->last_client->next : &d->first_client) = c;
        d->last_client = c;
        d->clients++;
        pthread_mutex_unlock(&d->lock);
        if (start_detached(serve_client, c) < 0) {
                pthread_mutex_lock(&d->lock);
                client_unlink(d, c);
                d->clients--;
                pthread_mutex_unlock(&d->lock);
                close(fd);
                free(c);
        }
}

/* One fd held in reserve: when the daemon is out of fds, it is given up so that the
 * connection waiting can still be accepted (and a close --force served). */
static int spare_fd = -1;

/* The next connection, or -1. Out of fds with the spare spent, *paused: the accept loop
 * stops looking at the socket until a connection ends, instead of spinning on it. */
static int accept_client(int lfd, bool *paused) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
                close(spare_fd);
                spare_fd = -1;
                fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        }
        if (fd < 0 && errno != EAGAIN && errno != EINTR && errno != ECONNABORTED) {
                log_line("cannot accept a connection: %s; waiting for one to end", strerror(errno));
                *paused = true;
        }
        if (spare_fd < 0)
                spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        return fd;
}

int start_detached(void *(*fn)(void *), void *arg) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int r = pthread_create(&t, &attr, fn, arg);
        pthread_attr_destroy(&attr);
        return -r;
}

void wake_main_loop(daemon_state *d) {
        uint64_t one = 1;
        (void)!write(d->wake_fd, &one, sizeof(one));
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
        if (r < 0 || listen(fd, 64) < 0) {
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

static long long now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool mounted_any(daemon_state *d) {
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        return true;
        return false;
}

/* Accepts clients until the Sandbox closes. With no Workspace mounted, no command
 * running and no request for idle_ms, the daemon closes the Sandbox itself. The only
 * timer is that one deadline: an idle daemon sleeps in poll. */
static void serve(daemon_state *d, int lfd, long long idle_ms) {
        long long last_activity = now_ms();
        bool paused = false;
        for (;;) {
                pthread_mutex_lock(&d->lock);
                /* Not before teardown has finished: it lets go of the lock while it waits. */
                bool closed = d->closed;
                bool idle = !mounted_any(d) && d->running_execs == 0;
                bool evictions_pending = d->evicting >= MAX_EVICTING;
                pthread_mutex_unlock(&d->lock);
                if (closed)
                        return;
                int timeout = -1;
                if (idle) {
                        long long left = last_activity + idle_ms - now_ms();
                        if (left <= 0) {
                                pthread_mutex_lock(&d->lock);
                                if (!d->closing && !mounted_any(d) && d->running_execs == 0)
                                        teardown(d, "idle", NULL);
                                pthread_mutex_unlock(&d->lock);
                                continue;
                        }
                        timeout = (int)(left > INT32_MAX ? INT32_MAX : left);
                }
                struct pollfd p[4 + MAX_REFUSED] = {
                        { .fd = lfd, .events = paused || evictions_pending ? 0 : POLLIN },
                        { .fd = d->wake_fd, .events = POLLIN },
                        { .fd = d->watcher ? lfs_watcher_fd(d->watcher) : -1, .events = POLLIN },
                        { .fd = d->proc ? proc_watch_fd(d->proc) : -1, .events = POLLIN }
                };
                size_t n_polled = n_refused;
                for (size_t i = 0; i < n_polled; i++)
                        p[4 + i] = (struct pollfd){ .fd = refused[i], .events = POLLIN };
                if (poll(p, 4 + n_polled, timeout) < 0 && errno != EINTR)
                        return;
                for (size_t i = n_polled; i-- > 0;)
                        if (p[4 + i].revents) { /* its request (or its end) came: read, let go */
                                char sink[4096];
                                while (recv(refused[i], sink, sizeof(sink), MSG_DONTWAIT) > 0)
                                        ;
                                refused_drop(i);
                        }
                if (p[2].revents & POLLIN)
                        lfs_watcher_consume(d->watcher);
                if (p[3].revents & POLLIN)
                        proc_watch_consume(d->proc);
                if (p[1].revents & POLLIN) {
                        uint64_t n;
                        (void)!read(d->wake_fd, &n, sizeof(n));
                        last_activity = now_ms();
                        paused = false;
                }
                if (!(p[0].revents & POLLIN))
                        continue;
                last_activity = now_ms();
                int cfd = accept_client(lfd, &paused);
                if (cfd >= 0)
                        admit_client(d, cfd);
        }
}

/* LAYERFS_WORKSPACE_MEMORY (checked by the library when the Sandbox was made). */
static uint64_t workspace_memory_from_env(void) {
        uint64_t bytes;
        const char *s = getenv("LAYERFS_WORKSPACE_MEMORY");
        return s && lfs_parse_size("LAYERFS_WORKSPACE_MEMORY", s, &bytes, NULL) == 0
                       ? bytes
                       : DEFAULT_WORKSPACE_MEMORY;
}

/* The daemon's memory, bounded by its cgroup where the memory controller is there: its
 * Workspaces' budgets and a margin for the rest (threads, Store caches, commits). A
 * hybrid host's v2 hierarchy (this project's test machines) has no controllers: there
 * the budgets alone bound it, and the log says so. */
static void limit_daemon_memory(daemon_state *d) {
        uint64_t max = MAX_WORKSPACES * d->ws_memory + (512ull << 20);
        _cleanup_free_ char *leaf = xasprintf("%s/daemon", d->cgroup);
        int r = lfs_cgroup_limit_memory(d->cgroup, leaf, max);
        if (r == 0)
                log_line("memory.max of %s: %llu bytes", leaf, (unsigned long long)max);
        else
                log_line("no memory limit on the daemon's cgroup (%s): %s; each Workspace's metadata stays "
                         "within %llu bytes",
                         leaf,
                         r == -EOPNOTSUPP ? "no memory controller in this cgroup2 hierarchy" : strerror(-r),
                         (unsigned long long)d->ws_memory);
}

/* The commands' HOME and TMPDIR: private to the Sandbox, owned by the command identity. */
static int make_private_tmp(daemon_state *d) {
        d->tmp = xasprintf("%s/tmp", d->dir);
        if (mkdir(d->tmp, 0700) < 0 && errno != EEXIST)
                return -errno;
        if (chown(d->tmp, d->uid, d->gid) < 0)
                return -errno;
        return 0;
}

static const char usage[] =
        "usage: layerfs-daemon --home DIR --project NAME --sandbox N --dir DIR --cgroup CGROUP --instance ID\n"
        "(started by liblayerfs for each Sandbox; see 'layerfs-daemon --help')\n";

/* The man page layerfs-daemon(8) is made from this text (packaging/man/help2man.sh): keep
 * its layout, section names alone on a line and entries indented by four spaces. */
static const char help[] =
        "NAME\n"
        "    layerfs-daemon - the daemon of one LayerFS Sandbox\n"
        "\n"
        "SYNOPSIS\n"
        "    layerfs-daemon --home DIR --project NAME --sandbox N --dir DIR --cgroup CGROUP\n"
        "                   --instance ID\n"
        "\n"
        "DESCRIPTION\n"
        "    liblayerfs (and so 'layerfs sandbox create') starts one layerfs-daemon for each\n"
        "    Sandbox, as root, detached in its own session, in the leaf 'daemon' of the\n"
        "    Sandbox's cgroup, with its output going to DIR/daemon.log. It is not meant to\n"
        "    be run by hand: the library makes the Sandbox's directory, token, cgroup and\n"
        "    record first.\n"
        "\n"
        "    It serves the Sandbox's calls on DIR/control.sock (mode 0600; a client proves\n"
        "    itself with the token in DIR/token), mounts the Sandbox's Workspaces over FUSE\n"
        "    under DIR/mnt/, runs commands each in a cgroup leaf of their own as the command\n"
        "    identity, watches their processes (BPF, else the proc connector or the cgroup's\n"
        "    events) and closes the Sandbox on 'sandbox close' or when idle: it ends every\n"
        "    process in the cgroup, unmounts, and removes the cgroups, DIR and the record.\n"
        "\n"
        "OPTIONS\n"
        "    --home DIR       the home whose Sandbox this is\n"
        "    --project NAME   the project\n"
        "    --sandbox N      the Sandbox's number\n"
        "    --dir DIR        the Sandbox's directory, HOME/sandboxes/NAME-N\n"
        "    --cgroup CGROUP  the Sandbox's cgroup (LAYERFS_CGROUP_ROOT/TAG-NAME-N)\n"
        "    --instance ID    this start of the Sandbox, as its record names it\n"
        "    --help           this text\n"
        "    --version        the version\n"
        "\n"
        "ENVIRONMENT\n"
        "    LAYERFS_IDLE_SECONDS\n"
        "                     with no Workspace mounted and no request for this long\n"
        "                     (default 120), the Sandbox closes itself\n"
        "    LAYERFS_WATCHER  how it watches its processes: bpf, proc or cgroup\n"
        "    LAYERFS_COMMAND_UID, LAYERFS_COMMAND_GID\n"
        "                     the command identity (default 501 and 20)\n"
        "    LAYERFS_FUSE_DEBUG=1\n"
        "                     log every FUSE request\n"
        "    LAYERFS_BPF_DEBUG=1\n"
        "                     log libbpf's messages\n"
        "\n"
        "FILES\n"
        "    DIR/control.sock  the control socket\n"
        "    DIR/token         the token a client must send first\n"
        "    DIR/daemon.log    this daemon's log ('layerfs sandbox log N'), kept to 1 MiB\n"
        "    DIR/mnt/BRANCH    a mounted Workspace\n"
        "    DIR/tmp/          the commands' HOME and TMPDIR\n"
        "\n"
        "EXIT STATUS\n"
        "    0 after the Sandbox closed; 1 when it could not start (the reason is in its\n"
        "    log); 2 for wrong arguments.\n";

int main(int argc, char **argv) {
        daemon_state d = { .lock = PTHREAD_MUTEX_INITIALIZER };
        const char *home_dir = NULL, *number = NULL;
        static const struct option options[] = {
                { "home", required_argument, NULL, 'h' },
                { "project", required_argument, NULL, 'p' },
                { "sandbox", required_argument, NULL, 'n' },
                { "dir", required_argument, NULL, 'd' },
                { "cgroup", required_argument, NULL, 'c' },
                { "instance", required_argument, NULL, 'i' },
                { "help", no_argument, NULL, 'H' },
                { "version", no_argument, NULL, 'V' },
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
                        number = optarg;
                        break;
                case 'd':
                        d.dir = optarg;
                        break;
                case 'c':
                        d.cgroup = optarg;
                        break;
                case 'i':
                        d.instance = optarg;
                        break;
                case 'H':
                        fputs(help, stdout);
                        return 0;
                case 'V':
                        printf("layerfs-daemon %s\n", LAYERFS_VERSION);
                        return 0;
                default:
                        fputs(usage, stderr);
                        return 2;
                }
        }
        if (!home_dir || !d.project || !d.dir || !d.cgroup || !d.instance || !number) {
                fputs(usage, stderr);
                return 2;
        }
        /* The settings the library checked at create, read the same way (numbers.h). */
        lfs_error *err = NULL;
        uint64_t n;
        double idle_seconds;
        if (lfs_parse_whole("--sandbox", number, 1, INT_MAX, &n, &err) < 0 ||
            lfs_command_identity(&d.uid, &d.gid, &err) < 0 || lfs_idle_seconds(&idle_seconds, &err) < 0) {
                fprintf(stderr, "%s: %s\n", lfs_code_name(err->code), err->message);
                lfs_error_free(err);
                return 2;
        }
        d.number = (int)n;
        signal(SIGPIPE, SIG_IGN);
        /* Only interrupts a mount thread's read of /dev/fuse (end_mount_thread). */
        struct sigaction interrupt = { .sa_handler = ignore_signal };
        sigaction(SIGUSR1, &interrupt, NULL);
        /* Many files may be open across the Workspaces. */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                setrlimit(RLIMIT_NOFILE, &rl);
        }
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
        int r = make_private_tmp(&d);
        if (r < 0) {
                fprintf(stderr, "cannot make %s: %s\n", d.tmp, strerror(-r));
                return 1;
        }
        _cleanup_free_ char *mnt = xasprintf("%s/mnt", d.dir), *upper = xasprintf("%s/upper", d.dir);
        mkdir(mnt, 0711); /* passed through to the Workspaces, listed by no one else */
        mkdir(upper, 0700);
        const char *inject = getenv("LAYERFS_INJECT_FAILURE");
        if (inject && !strcmp(inject, "daemon-no-socket")) {
                /* For the tests: a daemon that starts but never answers. */
                log_line("LAYERFS_INJECT_FAILURE=daemon-no-socket: not listening");
                for (;;)
                        pause();
        }
        d.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        _cleanup_free_ char *sock = xasprintf("%s/control.sock", d.dir);
        int lfd = listen_control(sock);
        if (lfd < 0 || d.wake_fd < 0) {
                fprintf(stderr, "cannot listen on %s: %s\n", sock, strerror(lfd < 0 ? -lfd : errno));
                return 1;
        }
        pthread_cond_init(&d.events_cond, NULL);
        pthread_cond_init(&d.ws_released, NULL);
        pthread_cond_init(&d.started_cond, NULL);
        if (start_watcher(&d) < 0)
                return 1;
        d.ws_memory = workspace_memory_from_env();
        limit_daemon_memory(&d);
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        log_line("sandbox %d of %s ready (pid %d, cgroup %s, watcher %s)", d.number, d.project,
                 (int)getpid(), d.cgroup, d.watcher_kind);
        serve(&d, lfd, (long long)(idle_seconds * 1000));
        close(lfd);
        /* Every caller gets its answer first: the close its ok, commands ended by the
         * close their exit status. */
        unsigned running = 0;
        for (int i = 0; i < 200; i++) {
                pthread_mutex_lock(&d.lock);
                running = d.running_execs + d.waiters + d.clients;
                pthread_mutex_unlock(&d.lock);
                if (!running)
                        break;
                struct timespec ts = { .tv_nsec = 10 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        log_line("sandbox %d closed", d.number);
        if (!running) { /* else a thread may still be reading them: the exit frees them */
                lfs_watcher_close(d.watcher);
                proc_watch_close(d.proc);
                free(d.leaves);
        }
        free(d.token);
        free(d.tmp);
        lfs_home_close(d.home);
        return 0;
}
