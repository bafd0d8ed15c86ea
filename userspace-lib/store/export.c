/* SPDX-License-Identifier: MIT */
/* A commit's tree written out as a directory. It is built beside the target under a
 * temporary name and renamed into place, so a failure leaves nothing behind. Every
 * object read is checked against its id. */
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <sys/stat.h>

#include "fault.h"
#include "leftover.h"
#include "store.h"

/* The signals an export holds off while it writes, so that what it wrote goes rather than
 * stays. SIGHUP, SIGINT and SIGTERM, where their default would end the process (a
 * caller's handler or SIG_IGN is left alone), stop the export at its next entry: its
 * directory removed, the signal then takes its course. Only this thread's mask changes,
 * and only meanwhile: the CLI and the commands it runs keep their defaults. (A write past
 * ulimit -f fails EFBIG rather than raising SIGXFSZ while the Store is open, fsize.h;
 * io_uring's workers hold every signal already, and a write the ring left short is
 * finished in this thread.) */
static const int held_signals[] = { SIGHUP, SIGINT, SIGTERM };
typedef struct export_signals {
        sigset_t held; /* blocked here, not already by the caller: the ones that stop it */
} export_signals;

static void export_signals_hold(export_signals *es) {
        sigset_t want, old;
        sigemptyset(&want);
        sigemptyset(&es->held);
        for (size_t i = 0; i < ELEMENTSOF(held_signals); i++) {
                struct sigaction sa;
                if (sigaction(held_signals[i], NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
                        sigaddset(&want, held_signals[i]);
        }
        pthread_sigmask(SIG_BLOCK, &want, &old);
        for (size_t i = 0; i < ELEMENTSOF(held_signals); i++)
                if (sigismember(&want, held_signals[i]) && !sigismember(&old, held_signals[i]))
                        sigaddset(&es->held, held_signals[i]);
}

/* The signal that stops the export (pending since), or 0. */
static int export_stop_signal(const export_signals *es) {
        sigset_t pending;
        if (sigpending(&pending) < 0)
                return 0;
        for (size_t i = 0; i < ELEMENTSOF(held_signals); i++)
                if (sigismember(&es->held, held_signals[i]) && sigismember(&pending, held_signals[i]))
                        return held_signals[i];
        return 0;
}

/* A stop signal still pending takes its course. */
static void export_signals_release(const export_signals *es) {
        pthread_sigmask(SIG_UNBLOCK, &es->held, NULL);
}

/* One batch of small files: their objects read (and checked) into buffers, then created
 * and written through the io layer. */
typedef struct write_batch {
        lfs_object_read rd[LFS_IO_BATCH];
        lfs_io_item wr[LFS_IO_BATCH];
        char *path[LFS_IO_BATCH]; /* relative to the export root */
        size_t k;
        bool started;
} write_batch;

/* Two batches: the walk fills one (its objects read as soon as it is full) while the io
 * layer creates and writes the other. The walk itself (trees, directories) and the reads
 * thus run while io_uring's workers create files; a list of thousands of files written
 * once the walk had made it left the workers idle during the walk, and each list's last
 * batch drained the pipeline (measured: bench/export_floor.sh). */
typedef struct export_walk {
        lfs_store *s;
        int root_fd;
        const char *dir; /* the target, for messages */
        export_signals signals;
        write_batch batches[2];
        write_batch *filling, *writing;
        uint64_t written; /* files started */
} export_walk;

/* what ("write", "make") failed on path, shortened for the message (a path may be
 * 4,095 bytes); errnum is positive. */
static int write_failed(const char *what, const char *path, int errnum, lfs_error **err) {
        _cleanup_free_ char *shown = lfs_path_excerpt(path);
        return lfs_fail(err, LFS_FAILED, errnum, "cannot %s %s: %s%s", what, shown, strerror(errnum),
                        lfs_fsize_hint(errnum));
}

/* The io layer itself failed (no one file did): a submission or a wait. */
static int ring_failed(int r, lfs_error **err) {
        return lfs_fail(err, LFS_FAILED, r, "cannot write the exported files: %s", strerror(-r));
}

/* Waits for a batch's files (when started) and frees its buffers; reports a failure,
 * naming the first file that failed, only with ok true. */
static int finish_batch(export_walk *ew, write_batch *b, bool ok, lfs_error **err) {
        int r = b->started ? lfs_io_wait_files(ew->s->io, b->wr, b->k) : 0;
        if (ok && r < 0) {
                size_t i = 0;
                while (i < b->k && b->wr[i].result >= 0)
                        i++;
                r = i < b->k ? write_failed("write", b->path[i], -r, err) : ring_failed(r, err);
        }
        for (size_t i = 0; i < b->k; i++) {
                free(b->rd[i].buf);
                free(b->path[i]);
        }
        b->k = 0;
        b->started = false;
        return ok ? r : 0;
}

/* Reads the filling batch's objects and starts its files, then waits for the batch
 * started before (the ring writes one batch while the next is read and checked). */
static int flush_batch(export_walk *ew, lfs_error **err) {
        lfs_fault_point("export-batch"); /* the batches before written or writing, this one not */
        write_batch *b = ew->filling;
        int r = lfs_object_read_batch(ew->s, b->rd, b->k, err);
        for (size_t i = 0; i < b->k && r == 0; i++) {
                b->wr[i].buf = b->rd[i].buf;
                b->wr[i].len = b->rd[i].size;
        }
        if (r == 0 && b->k) {
                b->started = true;
                int rr = lfs_io_start_files(ew->s->io, b->wr, b->k, true);
                if (rr < 0)
                        r = ring_failed(rr, err);
        }
        if (r == 0)
                r = finish_batch(ew, ew->writing, true, err);
        ew->written += b->k;
        ew->filling = ew->writing;
        ew->writing = b;
        lfs_home *home = ew->s->home;
        /* The whole count is not known before the walk ends: what is written so far. */
        if (r == 0 && home && home->progress)
                home->progress(home->progress_data, "writing files", ew->written, 0);
        return r;
}

static bool stop_requested(const void *userdata) {
        const export_walk *ew = userdata;
        return export_stop_signal(&ew->signals) != 0;
}

static int stopped(const export_walk *ew, lfs_error **err) {
        int sig = export_stop_signal(&ew->signals);
        return lfs_fail(err, LFS_FAILED, EINTR,
                        "the export into '%s' was stopped by SIG%s; nothing was left", ew->dir,
                        sig ? sigabbrev_np(sig) : "?");
}

static int copy_large(export_walk *ew, const char *path, const lfs_entry *e, mode_t mode, lfs_error **err) {
        _cleanup_close_ int in = lfs_object_open(ew->s, &e->id, err);
        if (in < 0)
                return in;
        _cleanup_close_ int out = openat(ew->root_fd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        if (out < 0)
                return write_failed("write", path, errno, err);
        lfs_id got;
        int r = lfs_stream_sparse(in, e->size, out, stop_requested, ew, &got);
        if (r == -ECANCELED)
                return stopped(ew, err);
        if (r == -EIO || (r == 0 && !lfs_id_eq(&got, &e->id)))
                return lfs_object_damaged(ew->s, &e->id, err);
        if (r < 0)
                return write_failed("write", path, -r, err);
        return 0;
}

/* A file of the tree at path: a large one is copied now (a loose object is copied by its
 * data, so its holes stay holes); a small one joins the filling batch. */
static int add_file(export_walk *ew, const char *path, const lfs_entry *e, lfs_error **err) {
        mode_t mode = e->mode == LFS_MODE_EXEC ? 0755 : 0644;
        if (e->size > LFS_PACK_MAX_BLOB)
                return copy_large(ew, path, e, mode, err);
        write_batch *b = ew->filling;
        size_t i = b->k++;
        b->path[i] = xstrdup(path);
        b->rd[i] = (lfs_object_read){ .id = e->id, .size = e->size };
        b->wr[i] = (lfs_io_item){ .dirfd = ew->root_fd,
                                  .path = b->path[i],
                                  .open_flags = O_WRONLY | O_CREAT | O_EXCL,
                                  .mode = mode };
        return b->k == LFS_IO_BATCH ? flush_batch(ew, err) : 0;
}

/* Makes the directories and symlinks of the tree and writes its files (a batch at a
 * time, once their directories are made), depth first with a stack of the trees on the
 * way down (no recursion) and one path buffer. */
static int walk_tree(export_walk *ew, const lfs_id *root, lfs_error **err) {
        typedef struct {
                lfs_tree t;
                size_t next, path_len;
        } level;
        level *stack = NULL;
        size_t n = 0, cap = 0;
        path_buf path = { 0 };
        ew->filling = &ew->batches[0];
        ew->writing = &ew->batches[1];
        GROW(stack, cap, 1);
        int r = lfs_db_get_tree(ew->s, root, &stack[0].t, err);
        if (r == 0)
                n = 1;
        while (n && r == 0) {
                if (export_stop_signal(&ew->signals)) {
                        r = stopped(ew, err);
                        break;
                }
                level *top = &stack[n - 1];
                if (top->next == top->t.n) {
                        lfs_tree_done(&top->t);
                        path_buf_cut(&path, top->path_len);
                        n--;
                        continue;
                }
                const lfs_entry *e = &top->t.entries[top->next++];
                path_buf_cut(&path, top->path_len);
                path_buf_push(&path, e->name);
                if (path.len > LFS_PATH_MAX) {
                        _cleanup_free_ char *shown = lfs_path_excerpt(path.s);
                        r = lfs_fail(
                                err, LFS_FAILED, ENAMETOOLONG,
                                "the commit holds a path of %zu bytes (%s), longer than " LFS_PATH_MAX_TEXT
                                " bytes (PATH_MAX): it cannot be written out; nothing was written",
                                path.len, shown);
                } else if (lfs_mode_is_dir(e->mode)) {
                        if (mkdirat(ew->root_fd, path.s, 0755) < 0) {
                                r = write_failed("make", path.s, errno, err);
                        } else {
                                GROW(stack, cap, n + 1);
                                stack[n] = (level){ .path_len = path.len };
                                if ((r = lfs_db_get_tree(ew->s, &e->id, &stack[n].t, err)) == 0)
                                        n++;
                        }
                } else if (e->mode == LFS_MODE_LINK) {
                        _cleanup_free_ char *target = NULL;
                        r = lfs_object_read_whole(ew->s, &e->id, e->size, &target, err);
                        if (r == 0 && target) {
                                if (symlinkat(target, ew->root_fd, path.s) < 0)
                                        r = write_failed("make symlink", path.s, errno, err);
                        }
                } else {
                        r = add_file(ew, path.s, e, err);
                }
        }
        if (r == 0 && ew->filling->k)
                r = flush_batch(ew, err);
        if (r == 0)
                r = finish_batch(ew, ew->writing, true, err);
        /* After a failure: nothing may still write from the buffers freed here. */
        (void)finish_batch(ew, ew->writing, false, NULL);
        (void)finish_batch(ew, ew->filling, false, NULL);
        for (size_t i = 0; i < n; i++)
                lfs_tree_done(&stack[i].t);
        free(stack);
        path_buf_done(&path);
        return r;
}

/* dir must be missing or an empty directory, in an existing parent. */
static int check_export_target(const char *dir, lfs_error **err) {
        struct stat st;
        if (lstat(dir, &st) < 0) {
                if (errno == ENOENT)
                        return 0;
                return lfs_fail(err, LFS_FAILED, errno, "cannot look at '%s': %s", dir, strerror(errno));
        }
        if (!S_ISDIR(st.st_mode))
                return lfs_fail(err, LFS_INVALID_INPUT, EEXIST,
                                "'%s' exists and is not a directory; export into a new or empty "
                                "directory",
                                dir);
        DIR *d = opendir(dir);
        if (!d)
                return lfs_fail(err, errno == EACCES ? LFS_PERMISSION_DENIED : LFS_FAILED, errno,
                                "cannot read directory '%s': %s", dir, strerror(errno));
        struct dirent *de;
        bool empty = true;
        while (empty && (de = readdir(d)))
                empty = !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..");
        closedir(d);
        if (!empty)
                return lfs_fail(err, LFS_INVALID_INPUT, ENOTEMPTY,
                                "directory '%s' is not empty; export into a new or empty directory", dir);
        /* rename(2) replaces an empty directory atomically at the end. */
        return 0;
}

/* The temporary directory of an export into DIR is ".BASE" EXPORT_TMP_INFIX "PID" beside
 * it (BASE being DIR's last component). */
#define EXPORT_TMP_INFIX ".layerfs-export-"

/* An earlier export's temporary directory for the same DIR: ".BASE" EXPORT_TMP_INFIX and
 * digits exactly (userdata is the prefix). */
static bool is_export_tmp(void *userdata, const char *name, bool locked) {
        (void)locked;
        const char *pid = name + strlen(userdata);
        return *pid && !pid[strspn(pid, "0123456789")];
}

/* Removes what killed exports into parent_fd/base left (SIGKILL, a power cut): only
 * directories of this user (not symlinks) that no running export holds (leftover.h), in
 * whatever pid namespace it runs; their names carry a pid, which a new export in another
 * pid namespace may have again. */
static void remove_stale_exports(int parent_fd, const char *base) {
        _cleanup_free_ char *prefix = xasprintf(".%s" EXPORT_TMP_INFIX, base);
        (void)lfs_leftovers_remove_shared(parent_fd, prefix, is_export_tmp, prefix);
}

/* Makes parent_fd/name, the export's temporary directory, and locks it for as long as
 * the export runs (the fd returned): the lock tells a later export into the same
 * directory that this one is alive. */
static int make_export_tmp(int parent_fd, const char *name, const char *dir, lfs_error **err) {
        int fd = lfs_leftover_make_shared(parent_fd, name, O_DIRECTORY, 0755);
        if (fd == -EEXIST)
                return lfs_fail(err, LFS_BUSY, EEXIST,
                                "'%s' beside '%s' is a running export's (or another user's); "
                                "export again once it is done",
                                name, dir);
        if (fd == -EBUSY)
                return lfs_fail(err, LFS_BUSY, EBUSY,
                                "another export into '%s' started at the same time; export again once "
                                "it is done",
                                dir);
        if (fd < 0)
                return lfs_fail(err, fd == -ENOENT ? LFS_INVALID_INPUT : LFS_FAILED, -fd,
                                "cannot make a directory beside '%s' (%s); does its parent exist "
                                "and is it writable?",
                                dir, strerror(-fd));
        return fd;
}

int lfs_branch_export(lfs_store *s, const char *ref, const char *dir, lfs_error **err) {
        lfs_id commit;
        lfs_commit_info c;
        int r = lfs_store_resolve(s, ref, &commit, err);
        if (r < 0)
                return r;
        if (!dir || !*dir)
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "give the directory to export into");
        if ((r = check_export_target(dir, err)) < 0 || (r = lfs_db_get_commit(s, &commit, &c, err)) < 0)
                return r;
        lfs_id tree = c.tree;
        lfs_commit_info_done(&c);
        _cleanup_free_ char *copy1 = xstrdup(dir), *copy2 = xstrdup(dir);
        const char *parent = dirname(copy1), *base = basename(copy2);
        _cleanup_close_ int parent_fd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (parent_fd < 0)
                return lfs_fail(err, errno == ENOENT ? LFS_INVALID_INPUT : LFS_FAILED, errno,
                                "cannot open the directory of '%s' (%s); does its parent exist?", dir,
                                strerror(errno));
        remove_stale_exports(parent_fd, base);
        _cleanup_free_ char *tmp = xasprintf(".%s" EXPORT_TMP_INFIX "%d", base, (int)getpid());
        export_walk ew = { .s = s, .root_fd = make_export_tmp(parent_fd, tmp, dir, err), .dir = dir };
        if (ew.root_fd < 0)
                return ew.root_fd;
        export_signals_hold(&ew.signals);
        r = walk_tree(&ew, &tree, err);
        /* Into the directory opened at the start, not DIR's name again: a parent of DIR
         * that another user may change (swapped for a symlink to /root meanwhile) moved
         * root's export there. */
        if (r == 0 && renameat(parent_fd, tmp, parent_fd, base) < 0)
                r = lfs_fail(err, LFS_FAILED, errno, "cannot move the export into place at '%s': %s", dir,
                             strerror(errno));
        /* Through the directory it made and holds, not its name again: the owner of DIR's
         * parent may have put another of root's directories there (an earlier export), and
         * it was emptied. */
        if (r < 0)
                (void)lfs_leftover_remove_held(parent_fd, tmp, ew.root_fd);
        close(ew.root_fd);
        export_signals_release(&ew.signals);
        return r;
}
