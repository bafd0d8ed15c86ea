/* SPDX-License-Identifier: MIT */
/* The Sandbox's end, from inside: sandbox.close and the idle close. */
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>

#include "daemon.h"
#include "fault.h"
#include "log.h"
#include "codec.h"
#include "records.h"

/* The teardown's step between the end of the processes and the removal: nothing of the
 * Sandbox holds the Workspaces now, so they unmount (MNT_FORCE for what others hold). */
static void stop_mounts(void *userdata) {
        daemon_state *d = userdata;
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        stop_mount(&d->ws[i], true);
}

/* The idle gc's work: nothing when the project had fewer than d->gc_after_deletes branches
 * deleted since its last gc, nor once the Sandbox began closing (a signal or a close while
 * the count was read: its daemon's exit would wait for the gc). It does not wait for
 * writers at work (their project is not idle: the deletions are counted again at the next
 * idle close), and a close that comes while it plans stops it (d->idle_gc_stop): the
 * closer waits 30 s for the daemon's exit, which waits for this thread, and a large Store's
 * gc takes longer. So does a mount (idle_gc_yield). One that has begun to change the Store
 * goes on to its end (main joins this thread before its last act), its teardown beside it,
 * a mount waiting for it without d->lock (call_mount). */
static void run_idle_gc(daemon_state *d) {
        lfs_error *err = NULL;
        lfs_store *s = NULL;
        uint64_t deleted = 0;
        lfs_gc_result res = { 0 };
        int r = lfs_store_open(d->home, d->project, &s, &err);
        if (r == 0)
                r = lfs_store_deleted_branches(s, &deleted, &err);
        pthread_mutex_lock(&d->lock);
        bool closing = d->closing;
        pthread_mutex_unlock(&d->lock);
        if (r == 0 && deleted >= d->gc_after_deletes && !closing) {
                log_line("project gc: %llu branches deleted since the last (LAYERFS_GC_AFTER_DELETES=%llu)",
                         (unsigned long long)deleted, (unsigned long long)d->gc_after_deletes);
                const lfs_gc_control control = { .no_wait = true, .stop = &d->idle_gc_stop };
                r = lfs_store_gc_controlled(s, NULL, &control, &res, &err);
                if (r == -EWOULDBLOCK || r == -ECANCELED) {
                        log_line("project gc at the idle close %s: %s",
                                 r == -ECANCELED ? "stopped" : "skipped", err->message);
                        r = 0;
                } else if (r == 0)
                        log_line(
                                "project gc: removed %llu commits, %llu trees, %llu packed blobs, %llu loose "
                                "objects; %llu bytes freed",
                                (unsigned long long)res.commits, (unsigned long long)res.trees,
                                (unsigned long long)res.packed_blobs, (unsigned long long)res.loose_objects,
                                (unsigned long long)res.bytes);
        }
        if (r < 0)
                log_line("project gc at the idle close failed: %s", err ? err->message : strerror(-r));
        lfs_gc_result_done(&res);
        lfs_store_close(s);
        lfs_error_free(err);
}

/* The idle gc, beside the accept loop: a gc takes seconds on a large Store (9.7 s on
 * 1,000,000 files, bench/README.md), for which the loop would accept no connection, read
 * no signal and leave the watchers' events unread (a full BPF ring loses exits). */
static void *idle_gc_main(void *arg) {
        daemon_state *d = arg;
        (void)pthread_setname_np(pthread_self(), "lfs-idle-gc");
        run_idle_gc(d);
        pthread_mutex_lock(&d->lock);
        d->idle_gc = IDLE_GC_ENDED;
        pthread_mutex_unlock(&d->lock);
        wake_main_loop(d); /* the loop decides the close */
        return NULL;
}

bool idle_gc_start(daemon_state *d) {
        if (!d->gc_after_deletes)
                return false;
        pthread_mutex_lock(&d->lock);
        if (d->idle_gc != IDLE_GC_NONE) { /* never two at once: the loop waits for that one */
                pthread_mutex_unlock(&d->lock);
                return true;
        }
        d->idle_gc = IDLE_GC_RUNNING; /* before the thread can end */
        /* A mount's stop was for the gc before this one; a mount that came since the
         * accept loop found the Sandbox idle (d->lock let go between) stops this one as
         * idle_gc_yield would have: at work on the Store, it would wait for the whole gc. */
        d->idle_gc_stop = d->closing || mounted_any(d);
        bool started = pthread_create(&d->idle_gc_thread, NULL, idle_gc_main, d) == 0;
        if (!started)
                d->idle_gc = IDLE_GC_NONE;
        pthread_mutex_unlock(&d->lock);
        if (!started) /* here and now, as the close's work beside its teardown (beside) */
                run_idle_gc(d);
        return started;
}

/* Why a mount stops a gc that plans: a mount is the Sandbox put to work again (taken from
 * a pool, most often), and the gc was the idle time's chore. The mount pins its base under
 * the gc's lock, so it would wait for the whole gc, plan and sweep: the plan, the mark of
 * everything every branch and pin reaches, is most of a gc's time (9.7 s for the whole
 * gc of 1,000,000 files, bench/README.md). Stopped while it plans, the gc has changed
 * nothing and loses only that time; the deletions stay counted, and the next idle close
 * runs it again (one whose Sandbox is always taken again while it plans never ends: then
 * 'layerfs project gc'). One that has begun to change the Store goes on to its end, and
 * the mount waits for it without d->lock. */
void idle_gc_yield(daemon_state *d) {
        if (d->idle_gc != IDLE_GC_RUNNING || d->idle_gc_stop)
                return;
        d->idle_gc_stop = true;
        log_line("a mount came during the idle gc: the gc ends if it is still planning");
}

void idle_gc_join(daemon_state *d) {
        pthread_mutex_lock(&d->lock);
        bool started = d->idle_gc != IDLE_GC_NONE;
        pthread_mutex_unlock(&d->lock);
        if (!started)
                return;
        pthread_join(d->idle_gc_thread, NULL);
        pthread_mutex_lock(&d->lock);
        d->idle_gc = IDLE_GC_NONE;
        pthread_mutex_unlock(&d->lock);
}

/* What the close does beside its teardown, each on a thread of its own: the closer waits
 * for the daemon's exit, which would wait for this work done after the teardown, and both
 * wait on the kernel or the disk, not the CPU. The daemon leaves its root's watcher pair
 * (the kernel answers a delete from a map of maps after an RCU grace period: 11 to 18 ms
 * of every close here, at load 4 to 8) and, for `sandbox close`, hands its record over to
 * the closer: a write that restarts home.db's WAL every few closes (an fdatasync of the
 * WAL and one of the home's directory, 7 to 12 ms). Owned by the live closer from then
 * on, the record is taken by no reclaim while the processes end; a closer killed
 * meanwhile leaves it to the next reclaim, which ends the daemon with the rest of the
 * place. */
static void *leave_watcher(void *arg) {
        lfs_watcher_leave(arg);
        return NULL;
}

typedef struct hand_over_work {
        daemon_state *d;
        pid_t closer;
} hand_over_work;

static void *hand_over(void *arg) {
        hand_over_work *w = arg;
        int r = lfs_sandbox_record_hand_over(w->d->home, w->d->project, w->d->number, w->d->instance,
                                             w->closer);
        if (r == 0)
                lfs_fault_point("close-handed-over"); /* the closer's record, the teardown going on */
        else
                log_line("cannot hand the record of sandbox %d over to its closer, process %d; the closer "
                         "takes it over after this daemon's exit",
                         w->d->number, (int)w->closer);
        free(w);
        return NULL;
}

/* fn(arg) on a thread of its own, joined by close_beside_join; here and now when no
 * thread can be made. */
static void beside(daemon_state *d, void *(*fn)(void *), void *arg) {
        if (d->n_beside < ELEMENTSOF(d->beside) &&
            pthread_create(&d->beside[d->n_beside], NULL, fn, arg) == 0)
                d->n_beside++;
        else
                fn(arg);
}

/* With d->lock held. */
static void close_beside_start(daemon_state *d, pid_t closer) {
        if (d->watcher) /* none while loading: the loader leaves once loaded (settle_watcher) */
                beside(d, leave_watcher, d->watcher);
        if (closer > 0) {
                hand_over_work *w = xmalloc(sizeof(*w));
                *w = (hand_over_work){ .d = d, .closer = closer };
                beside(d, hand_over, w);
        }
}

void close_beside_join(daemon_state *d) {
        for (unsigned i = 0; i < d->n_beside; i++)
                pthread_join(d->beside[i], NULL);
        d->n_beside = 0;
}

/* Everything the Sandbox made goes: processes, mounts, its place, directory; the record
 * after all that, as the daemon's last act (main); the same for `sandbox close` and for
 * the idle close. With a closer (the process of `sandbox close`, whose library waits for
 * this daemon's exit and then reclaims what is left), the daemon stays in its leaf: the
 * place with the daemon's leaf is the closer's to remove, and the record is handed over to
 * it beside the teardown (close_beside_start). With d->lock held. When something stays, the
 * record stays too, released as the daemon's last act to whoever takes it over (the
 * closing library, which owns it already, or the next reclaim), and *ret_why says what
 * stayed. */
int close_sandbox(daemon_state *d, const char *why, pid_t closer, char **ret_why) {
        log_line("closing sandbox %d (%s)", d->number, why);
        d->closing = true;
        d->idle_gc_stop = true; /* an idle gc still planning ends (run_idle_gc) */
        lfs_fault_point("close-begun"); /* logged, refusing calls, nothing ended yet */
        watcher_closing_locked(d); /* a loading watcher leaves by itself once loaded */
        close_beside_start(d, closer);
        wake_followers(d); /* followers of sandbox events end */
        /* Whatever reads a Workspace stops now; then nothing holds them. A mount at work on
         * the Store (mounting, without d->lock) is not waited for: it may wait for a gc, and
         * it undoes itself once it sees closing (call_mount). */
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        ws_cancel(d->ws[i].fs);
        for (int i = 0; i < MAX_WORKSPACES; i++)
                if (d->ws[i].active)
                        wait_ws_released(d, &d->ws[i]);
        /* A command checked before closing began must be in its leaf before the leaves
         * are ended, or it could start after and outlive the Sandbox. One in its leaf is
         * ended there: stopped by the command identity between its identity change and its
         * execve, it would hold its start, and this close, for ever
         * (test_close_stopped_start.sh). One not yet there says so on started_efd. */
        while (d->starting_commands) {
                for (unsigned i = 0; i < d->starting_commands; i++) {
                        _cleanup_free_ char *name = xasprintf("cmd-%u", d->starting[i]);
                        (void)d->runtime->end_command(&d->sb, name, 0);
                }
                pthread_mutex_unlock(&d->lock);
                struct pollfd started = { .fd = d->started_efd, .events = POLLIN };
                uint64_t n;
                if (poll(&started, 1, -1) > 0)
                        (void)!read(d->started_efd, &n, sizeof(n));
                pthread_mutex_lock(&d->lock);
        }
        _cleanup_free_ char *left = NULL;
        /* The runtime's teardown: every process ends (the daemon leaves the Sandbox
         * first), the Workspaces unmount (stop_mounts), the rest goes. */
        int r = d->runtime->teardown(&d->sb, closer > 0, stop_mounts, d, &left);
        if (r == 0) {
                /* The record goes last of all, once every caller had its answer (main). */
                d->removed = true;
        } else if (r > 0) {
                /* The place stays for the closer's reclaim after this daemon's exit, the
                 * record handed over to it (close_beside_start); with no closer, at an idle close
                 * where the daemon could not step out, for the next reclaim, the record
                 * naming this daemon, dead by then. */
                r = 0;
        } else {
                log_line("sandbox %d could not be removed completely: %s; its record stays", d->number,
                         left ? left : strerror(-r));
                /* Released as the daemon's last act (main), not now: taken over while this
                 * daemon still answered its callers, a reclaim would race it. */
                d->left_some = true;
        }
        d->closed = true;
        wake_main_loop(d);
        if (r < 0 && ret_why)
                *ret_why = TAKE_PTR(left);
        return r;
}

/* Called with d->lock held (dispatch, close_on_signal); without --force, releases it for
 * the dirty checks. With --force it cancels whatever reads a Workspace (teardown). why says
 * who asked, for the log. */
json_t *call_close(daemon_state *d, bool force, pid_t closer, const char *why) {
        bool dirty[MAX_WORKSPACES];
        if (!force && !check_dirty(d, dirty, NULL))
                return lfs_proto_errorf(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        for (int i = 0; i < MAX_WORKSPACES && !force; i++)
                if (d->ws[i].active && dirty[i])
                        return lfs_proto_errorf(
                                LFS_DIRTY,
                                "the Workspace of '%s' in sandbox %d has uncommitted changes; "
                                "commit them, or close with --force to drop them",
                                d->ws[i].branch, d->number);
        _cleanup_free_ char *left = NULL;
        int r = close_sandbox(d, why, closer, &left);
        if (r < 0)
                return lfs_proto_errorf(
                        LFS_FAILED,
                        "sandbox %d could not be removed completely: %s; its record stays so that "
                        "'layerfs runtime reclaim' can finish once that is fixed",
                        d->number, left ? left : strerror(-r));
        return lfs_proto_done();
}

void close_on_signal(daemon_state *d, const struct signalfd_siginfo *si) {
        const char *name = sigabbrev_np((int)si->ssi_signo);
        _cleanup_free_ char *why =
                xasprintf("SIG%s from pid %u, uid %u", name ? name : "?", si->ssi_pid, si->ssi_uid);
        pthread_mutex_lock(&d->lock);
        if (d->closing) {
                /* Nothing to add: the close under way goes on to its end. */
                log_line("%s while sandbox %d closes: the close goes on", why, d->number);
        } else {
                /* No closer waits to reclaim the place: the daemon steps out of it and removes
                 * it all itself, as the idle close does. */
                json_t *answer = call_close(d, false, 0, why);
                _cleanup_error_ lfs_error *refused = NULL;
                if (lfs_proto_parse_answer(answer, NULL, &refused) < 0)
                        log_line("%s: sandbox %d stays open: %s: %s", why, d->number,
                                 lfs_code_name(refused->code), refused->message);
                json_decref(answer);
        }
        pthread_mutex_unlock(&d->lock);
}
