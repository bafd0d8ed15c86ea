/* SPDX-License-Identifier: MIT */
/*
 * The mount table: the Sandbox's Workspaces (d->ws, at most MAX_WORKSPACES), each a FUSE
 * mount served by a thread of its own, and the calls on them: workspace.mount, status,
 * commit, unmount and sandbox.list_workspaces.
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>

#include "daemon.h"
#include "fuse_mount.h"
#include "fuse_transport.h"
#include "json_path.h"
#include "log.h"
#include "codec.h"

workspace *find_ws(daemon_state *d, const char *branch) {
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active && !strcmp(d->ws[i].branch, branch))
                        return &d->ws[i];
        return NULL;
}

static void *serve_mount(void *arg) {
        workspace *w = arg;
        ws_session_serve(w->session);
        return NULL;
}

/* A name a merged commit replaced. With the old inode named, the kernel treats it as
 * deleted (its link count cleared), so it is evicted and FORGET lets its upper file go;
 * a directory that is not empty in the kernel's cache can only be forgotten. The parent's
 * attributes go too: the kernel refreshes them with the name's only when it has the name
 * cached, and a subdirectory added or removed under a name it never looked up left the
 * parent's link count stale for the hour its attributes are valid. */
static void invalidate(void *userdata, uint64_t parent, uint64_t child, const char *name) {
        workspace *w = userdata;
        if (!child || ws_session_notify_delete(w->session, parent, child, name) < 0)
                ws_session_notify_inval_entry(w->session, parent, name);
        ws_session_notify_inval_inode(w->session, parent);
}

static void ws_release_slot(workspace *w) {
        ws_session_destroy(w->session);
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

/* The Store of the first mount is opened ahead, on a thread started once the daemon
 * answers: a create is most often followed by a mount at once, which then finds its Store
 * open rather than opening it and rebuilding store.db's WAL index (about 0.9 ms, a
 * process's first connection, against 0.4 with another one open). The thread takes no
 * lock; what it opens is taken by the first mount or closed at the daemon's end. */
static void *open_spare_store(void *arg) {
        daemon_state *d = arg;
        lfs_store *s = NULL;
        if (lfs_store_open(d->home, d->project, &s, NULL) == 0)
                d->spare_store = s;
        return NULL;
}

void start_spare_store(daemon_state *d) {
        d->spare_started = pthread_create(&d->spare_thread, NULL, open_spare_store, d) == 0;
}

/* The Store opened ahead, once (NULL when it did not open, and for every later mount),
 * after the thread's end. */
static lfs_store *take_spare_store(daemon_state *d) {
        if (!d->spare_started)
                return NULL;
        pthread_join(d->spare_thread, NULL);
        d->spare_started = false;
        return TAKE_PTR(d->spare_store);
}

void drop_spare_store(daemon_state *d) {
        lfs_store_close(take_spare_store(d));
}

/* The Store's part of a mount, without d->lock: its wait for a gc would stop every other
 * call, the accept loop, the signals and the watchers with it (2.4 s of a 1,000,000-file
 * idle gc; a pool's 1 s ping to take the Sandbox failed over to the next one). The gc's
 * lock is held first, for the head's read and the pin: once it is held no gc runs, so the
 * read under the Store's write lock (lfs_branch_head_serial) never waits for a gc's
 * transaction (that wait failed Busy after busy_timeout, LFS_DB_BUSY_MS); the wait for
 * the gc's lock itself has no deadline, since a gc goes on to its end. A close that came
 * meanwhile (it does not wait for this: the teardown goes on) leaves the rest undone. */
static int open_base(daemon_state *d, workspace *w, lfs_error **err) {
        int r = w->store ? 0 : lfs_store_open(d->home, d->project, &w->store, err);
        _cleanup_store_hold_ lfs_store *held = NULL;
        if (r == 0)
                r = lfs_store_hold_scoped(w->store, &held, err);
        if (r < 0)
                return r;
        pthread_mutex_lock(&d->lock);
        bool closing = d->closing;
        pthread_mutex_unlock(&d->lock);
        if (closing)
                return -ECANCELED; /* the caller says so: it looks again under d->lock */
        lfs_id head;
        r = lfs_branch_head_serial(w->store, w->branch, &head, err);
        if (r == 0)
                r = ws_open(w->store, w->branch, w->upper, d->host_uid, d->host_gid, &w->fs, err);
        return r;
}

/* Called with d->lock held (dispatch); releases it for the Store's part (open_base). */
json_t *call_mount(daemon_state *d, const char *branch) {
        lfs_error *err = NULL;
        if (!branch || lfs_check_branch_name(branch, &err) < 0)
                return err ? lfs_proto_error_take(err)
                           : lfs_proto_errorf(LFS_INVALID_INPUT, "give the branch to mount");
        workspace *w = NULL;
        for (int i = 0; i < MAX_WORKSPACES; i++) {
                workspace *o = &d->ws[i];
                if ((o->active || o->mounting) && !strcmp(o->branch, branch))
                        return lfs_proto_errorf(
                                LFS_ALREADY_MOUNTED,
                                "branch '%s' is already %s in sandbox %d; unmount it first or "
                                "use it there",
                                branch, o->active ? "mounted" : "being mounted", d->number);
                if (!w && !o->active && !o->mounting)
                        w = o;
        }
        if (!w)
                return lfs_proto_errorf(LFS_LIMIT_REACHED,
                                        "sandbox %d already has %d Workspaces mounted; unmount one first",
                                        d->number, MAX_WORKSPACES);
        /* Before its mount point shows that the mount came (the tests wait for it). */
        idle_gc_yield(d);
        w->branch = xstrdup(branch);
        w->key = lfs_branch_dir_name(branch);
        w->mountpoint = xasprintf("%s/mnt/%s", d->dir, w->key);
        w->upper = xasprintf("%s/upper/%s", d->dir, w->key);
        /* The mount point first, the head after it under the Store's write lock: a branch
         * delete running meanwhile either sees the mount point (Busy) or ends before the
         * head is read (NoSuchBranch); userspace-lib/client/branch.c. Both directories are
         * made under d->lock: a close's teardown, which removes the Sandbox's directory,
         * never runs beside a mount making them. */
        struct stat st;
        if (mkdir(w->mountpoint, 0755) < 0 &&
            (errno != EEXIST || lstat(w->mountpoint, &st) < 0 || !S_ISDIR(st.st_mode))) {
                json_t *j = lfs_proto_errorf(LFS_FAILED, "cannot mount at %s: %s; remove what is in the way",
                                             w->mountpoint,
                                             errno == EEXIST ? "it is not a directory" : strerror(errno));
                free(TAKE_PTR(w->mountpoint)); /* not ours to remove */
                free(TAKE_PTR(w->upper));
                ws_release_slot(w);
                return j;
        }
        rm_rf_at(AT_FDCWD, w->upper);
        if (mkdir(w->upper, 0700) < 0) {
                json_t *j = lfs_proto_errorf(LFS_FAILED, "cannot make %s: %s", w->upper, strerror(errno));
                ws_release_slot(w);
                return j;
        }
        w->store = take_spare_store(d);
        w->mounting = true;
        pthread_mutex_unlock(&d->lock);
        int r = open_base(d, w, &err);
        pthread_mutex_lock(&d->lock);
        w->mounting = false;
        pthread_cond_broadcast(&d->ws_released); /* an unmount of the branch waits for this */
        if (d->closing) {
                /* Its teardown did not wait for this mount (not active): what it made goes
                 * here, and no FUSE mount is made after the teardown's. */
                lfs_error_free(err);
                ws_release_slot(w);
                return lfs_proto_errorf(LFS_NO_SUCH_SANDBOX,
                                        "sandbox %d closed while '%s' was being mounted", d->number, branch);
        }
        if (r < 0) {
                ws_release_slot(w);
                return lfs_proto_error_take(err);
        }
        _cleanup_free_ char *fsname = xasprintf("layerfs:%s/%s", d->project, branch);
        w->session = ws_session_mount((fuse_fs){ &ws_workspace_ops, w->fs }, w->mountpoint, fsname);
        if (!w->session) {
                ws_release_slot(w);
                return lfs_proto_errorf(LFS_FAILED,
                                        "cannot mount the Workspace of '%s' (see 'layerfs sandbox log %d')",
                                        branch, d->number);
        }
        ws_set_invalidator(w->fs, invalidate, w);
        ws_set_limits(w->fs, d->ws_memory, MAX_WORKSPACES);
        if (pthread_create(&w->thread, NULL, serve_mount, w) != 0) {
                ws_release_slot(w);
                return lfs_proto_errorf(LFS_FAILED, "cannot start the Workspace's thread");
        }
        /* Waits for the mount to answer (INIT), then knows its device. */
        if (lfs_fuse_mount_answered(w->mountpoint, &w->dev) < 0) {
                stop_mount(w, true);
                return lfs_proto_errorf(LFS_FAILED, "the Workspace of '%s' does not answer at %s", branch,
                                        w->mountpoint);
        }
        ws_set_concurrent_requests(w->fs, strcmp(ws_session_transport(w->session), "uring") == 0);
        w->active = true;
        log_line("mounted %s at %s (FUSE loop: %s, passthrough: %s)", branch, w->mountpoint,
                 ws_session_transport(w->session), ws_session_passthrough(w->session) ? "on" : "off");
        return lfs_proto_ok(json_pack("{s:i, s:s, s:n, s:s}", "sandbox", d->number, "path", w->mountpoint,
                                      "image", "platform", "linux"));
}

/* A mount at work counts: it waits for a gc without d->lock for as long as the gc runs,
 * which may be longer than the idle time (its request's activity is counted as it came). */
bool mounted_any(daemon_state *d) {
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active || d->ws[i].mounting)
                        return true;
        return false;
}

json_t *not_mounted(daemon_state *d, const char *branch) {
        return lfs_proto_errorf(
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
                        (void)ws_session_notify_inval_inode(w->session, writers[i]);
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
void wait_ws_released(daemon_state *d, workspace *w) {
        while (w->holders)
                pthread_cond_wait(&d->ws_released, &d->lock);
}

/* What a cancelled status or commit tells its caller. With d->lock held. */
static json_t *cancelled(daemon_state *d, const char *what, const char *branch) {
        if (d->closing)
                return lfs_proto_errorf(LFS_NO_SUCH_SANDBOX,
                                        "the %s of '%s' was cancelled: sandbox %d is closing", what, branch,
                                        d->number);
        return lfs_proto_errorf(
                LFS_NOT_MOUNTED,
                "the %s of '%s' was cancelled: the Workspace is being unmounted with --discard", what,
                branch);
}

/* Called with d->lock held (dispatch); releases it while the Workspace is read. */
json_t *call_status(daemon_state *d, const char *branch) {
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
                return lfs_proto_error_take(err);
        json_t *j = lfs_proto_ok(changes_json(changes, n));
        lfs_change_list_free(changes, n);
        return j;
}

/* Called with d->lock held (dispatch); releases it while the Workspace is committed. */
json_t *call_commit(daemon_state *d, const char *branch, const char *message) {
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
                return lfs_proto_error_take(err);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&commit, hex);
        log_line("committed %s on %s%s", hex, branch, merged ? " (merged)" : "");
        return lfs_proto_ok(json_pack("{s:s, s:b}", "commit", hex, "merged", merged));
}

/* Whether each Workspace has changes (dirty[i] for d->ws[i]), without d->lock held
 * meanwhile. With d->lock held; false if the Sandbox began closing meanwhile. */
bool check_dirty(daemon_state *d, bool dirty[MAX_WORKSPACES], ws_usage usage[MAX_WORKSPACES]) {
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
                        if (usage)
                                ws_get_usage(d->ws[i].fs, &usage[i]);
                }
        }
        pthread_mutex_lock(&d->lock);
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (held[i])
                        release_ws(d, &d->ws[i]);
        return !d->closing;
}

/* The mount's FUSE loop can outlive our unmount: a copy of the mount in another mount
 * namespace (unshare -m, a container) or a bind mount keeps the connection, so its
 * read of /dev/fuse never ends. Tell the loop to exit and interrupt that read (SIGUSR1,
 * whose handler does nothing, without SA_RESTART) until the thread is gone; destroying
 * the session then closes /dev/fuse, which aborts the connection for those copies
 * (ENOTCONN). The signal is repeated because it can land just before the read. */
static void end_mount_thread(workspace *w) {
        ws_session_exit(w->session);
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
int stop_mount(workspace *w, bool force) {
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

/* Waits (on d->ws_released, d->lock let go meanwhile) until no mount of branch is at work
 * on the Store (call_mount). With d->lock held. */
static void wait_mount_ended(daemon_state *d, const char *branch) {
        for (;;) {
                bool mounting = false;
                for (int i = 0; i < MAX_WORKSPACES && !mounting; i++)
                        mounting = d->ws[i].mounting && !strcmp(d->ws[i].branch, branch);
                if (!mounting)
                        return;
                pthread_cond_wait(&d->ws_released, &d->lock);
        }
}

/* Called with d->lock held (dispatch); releases it for the dirty check and while it waits
 * for a mount of the branch under way and for the Workspace's other holders. The mount is
 * waited for as it was when it held d->lock throughout: the unmount that cleans up after a
 * mount killed while it waited for a gc answered NotMounted, and the Workspace was mounted
 * after it for good (tests/adversarial/test_mount_unlocked.sh). */
json_t *call_unmount(daemon_state *d, const char *branch, bool discard) {
        if (branch)
                wait_mount_ended(d, branch);
        if (d->closing) /* meanwhile: the mount undid itself */
                return lfs_proto_errorf(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
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
                        return lfs_proto_errorf(
                                LFS_DIRTY,
                                "the Workspace of '%s' has uncommitted changes; commit them, or unmount with "
                                "--discard to drop them",
                                branch);
        }
        wait_ws_released(d, w);
        /* Meanwhile the Sandbox may have begun closing, or another unmount ended this one. */
        if (d->closing)
                return lfs_proto_errorf(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        if (find_ws(d, branch) != w)
                return not_mounted(d, branch);
        int r = stop_mount(w, false);
        if (r == -EBUSY)
                return lfs_proto_errorf(
                        LFS_BUSY,
                        "the Workspace of '%s' is in use (a process has its cwd or a file open in %s); "
                        "end it, then unmount",
                        branch, w->mountpoint);
        if (r < 0)
                return lfs_proto_errorf(LFS_FAILED, "cannot unmount %s: %s", w->mountpoint, strerror(-r));
        return lfs_proto_done();
}

/* Called with d->lock held (dispatch); releases it for the dirty checks. */
json_t *call_list(daemon_state *d) {
        bool dirty[MAX_WORKSPACES];
        ws_usage usage[MAX_WORKSPACES];
        if (!check_dirty(d, dirty, usage))
                return lfs_proto_errorf(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        json_t *out = json_array();
        for (int i = 0; i < MAX_WORKSPACES; i++) {
                workspace *w = &d->ws[i];
                if (!w->active)
                        continue;
                json_array_append_new(out, json_pack("{s:s, s:s, s:b, s:s, s:s, s:b, s:I, s:I}", "branch",
                                                     w->branch, "path", w->mountpoint, "dirty", dirty[i],
                                                     "platform", "linux", "transport",
                                                     ws_session_transport(w->session), "passthrough",
                                                     ws_session_passthrough(w->session), "metadata_bytes",
                                                     (json_int_t)usage[i].metadata_bytes, "inodes",
                                                     (json_int_t)usage[i].inodes));
        }
        return lfs_proto_ok(out);
}
