/* SPDX-License-Identifier: MIT */
/*
 * What the daemon knows of its Sandbox's processes: starts and ends, from the BPF
 * watcher (every process of the command leaves, also those that detached) or, without
 * BPF, from the daemon itself (the commands it started, through their pidfds). The last
 * EVENT_RING events are kept for `sandbox events` and `process list`.
 */
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>

#include "daemon.h"
#include "fault.h"
#include "json_path.h"
#include "frame.h"
#include "log.h"
#include "watcher_set.h"
#include "codec.h"

/* A CLOCK_MONOTONIC time (0: now) as seconds since the epoch. */
static double realtime_of(uint64_t monotonic_ns) {
        struct timespec mono, real;
        clock_gettime(CLOCK_MONOTONIC, &mono);
        clock_gettime(CLOCK_REALTIME, &real);
        double now_mono = (double)mono.tv_sec + (double)mono.tv_nsec / 1e9;
        double now_real = (double)real.tv_sec + (double)real.tv_nsec / 1e9;
        return monotonic_ns ? now_real - (now_mono - (double)monotonic_ns / 1e9) : now_real;
}

void register_leaf(daemon_state *d, const char *leaf) {
        struct stat st;
        const char *name = strrchr(leaf, '/');
        if (!name || stat(leaf, &st) < 0)
                return;
        pthread_mutex_lock(&d->lock);
        GROW(d->leaves, d->cap_leaves, d->n_leaves + 1);
        d->leaves[d->n_leaves].id = (uint64_t)st.st_ino;
        snprintf(d->leaves[d->n_leaves].name, sizeof(d->leaves[d->n_leaves].name), "%s", name + 1);
        d->n_leaves++;
        pthread_mutex_unlock(&d->lock);
}

/* With d->lock held. */
static const char *leaf_name_of(daemon_state *d, uint64_t cgroup_id) {
        for (size_t i = d->n_leaves; i-- > 0;)
                if (d->leaves[i].id == cgroup_id)
                        return d->leaves[i].name;
        return "";
}

/* A connection following the events: its eventfd is written to wake it. */
typedef struct follower {
        int wake_fd;
        struct follower *next;
} follower;

void wake_followers(daemon_state *d) {
        uint64_t one = 1;
        for (follower *f = d->followers; f; f = f->next)
                (void)!write(f->wake_fd, &one, sizeof(one));
}

/* With d->lock held. */
static void store_event(daemon_state *d, const sandbox_event *e) {
        sandbox_event *slot = &d->events[d->n_events % EVENT_RING];
        *slot = *e;
        slot->seq = d->n_events++;
        wake_followers(d);
}

void record_event(daemon_state *d, int kind, pid_t pid, pid_t ppid, int status, const char *leaf,
                  const char *comm) {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        sandbox_event e = { .kind = kind,
                            .pid = pid,
                            .ppid = ppid,
                            .status = status,
                            .time = (double)now.tv_sec + (double)now.tv_nsec / 1e9 };
        e.received = e.time;
        const char *name = leaf ? strrchr(leaf, '/') : NULL; /* a path, or the leaf's name */
        snprintf(e.cgroup, sizeof(e.cgroup), "%s", name ? name + 1 : leaf ? leaf : "");
        snprintf(e.comm, sizeof(e.comm), "%s", comm ? comm : "");
        pthread_mutex_lock(&d->lock);
        store_event(d, &e);
        pthread_mutex_unlock(&d->lock);
}

/* Whether the BPF tier already reported the exit of pid, which a process started since
 * (the pid reused) clears. Its program reports a process when the thread that ends sees
 * no live thread left, but the kernel counts a thread out (signal->live) before the
 * tracepoint: threads ending together (exit_group) can each see 0, and the process was
 * reported twice (test_watcher's multithreaded process, once in a loaded make check).
 * Both events come before any reuse of the pid (it is freed only after them). */
static bool bpf_exit_seen(daemon_state *d, const struct watch_event *w) {
        size_t kept = d->n_bpf_exits < ELEMENTSOF(d->bpf_exits) ? d->n_bpf_exits : ELEMENTSOF(d->bpf_exits);
        for (size_t i = 0; i < kept; i++)
                if (d->bpf_exits[i] == (pid_t)w->pid) {
                        if (w->kind == WATCH_EXIT)
                                return true;
                        d->bpf_exits[i] = 0; /* started again: a new process */
                }
        if (w->kind == WATCH_EXIT)
                d->bpf_exits[d->n_bpf_exits++ % ELEMENTSOF(d->bpf_exits)] = (pid_t)w->pid;
        return false;
}

/* The BPF watcher's callback, from the main loop. */
static void on_watch_event(void *userdata, const struct watch_event *w) {
        daemon_state *d = userdata;
        if (bpf_exit_seen(d, w))
                return;
        sandbox_event e = { .kind = w->kind == WATCH_EXIT ? EVENT_EXIT : EVENT_START,
                            .pid = (pid_t)w->pid,
                            .ppid = (pid_t)w->ppid,
                            .status = w->status,
                            .time = realtime_of(w->time_ns),
                            .received = realtime_of(0) };
        memcpy(e.comm, w->comm, sizeof(w->comm));
        e.comm[sizeof(e.comm) - 1] = 0;
        pthread_mutex_lock(&d->lock);
        snprintf(e.cgroup, sizeof(e.cgroup), "%s", leaf_name_of(d, w->cgroup_id));
        store_event(d, &e);
        pthread_mutex_unlock(&d->lock);
}

static void on_proc_event(void *userdata, int kind, pid_t pid, pid_t ppid, int status, const char *leaf,
                          const char *comm) {
        record_event(userdata, kind, pid, ppid, status, leaf, comm);
}

/* Loads the BPF watcher (or joins its root's); its log line. */
static int open_bpf_watcher(daemon_state *d, lfs_watcher **ret) {
        _cleanup_free_ char *leaf = xasprintf("%s/daemon", d->cgroup);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int r = lfs_watcher_open(d->cgroup, leaf, on_watch_event, d, ret);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (r == -E2BIG) /* not a failure of BPF: a root full of Sandboxes */
                log_line("the cgroup root of %s already has %u Sandboxes, as many as its BPF watcher serves",
                         d->cgroup, (unsigned)lfs_watcher_max_sandboxes());
        if (r < 0)
                return r;
        log_line("BPF watcher loaded in %.2f ms (%s)",
                 (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6,
                 lfs_watcher_loaded(*ret) ? "loaded the programs of its cgroup root"
                                          : "joined the programs of its cgroup root");
        return 0;
}

/* How long the daemon's end waits for a loader still running (a command's wait for the
 * load: LAYERFS_WATCHER_LOAD_WAIT_MS, d->watcher_load_wait_ms). */
#define LOADER_END_WAIT_MS 1000

/* The loader's end, with what it made (w, or NULL). */
static void settle_watcher(daemon_state *d, lfs_watcher *w) {
        pthread_mutex_lock(&d->lock);
        /* A close that began meanwhile, or a wait that gave up on the load, left the watcher
         * to us: nothing more to watch with it. */
        bool unwanted = d->closing || d->watcher_abandoned;
        if (w && !unwanted) {
                d->watcher = w;
                d->watcher_kind = "bpf";
        }
        d->watcher_settled = true;
        pthread_mutex_unlock(&d->lock);
        if (w && unwanted) {
                lfs_watcher_close(w); /* out of the root's map, its ring closed */
                log_line("the BPF watcher loaded after the Sandbox %s; left again",
                         d->watcher_abandoned ? "had given up on it" : "began to close");
        }
        pthread_mutex_lock(&d->lock);
        d->watcher_loader_done = true;
        pthread_cond_broadcast(&d->watcher_cond);
        pthread_mutex_unlock(&d->lock);
}

/* The default watcher's thread. Loading the programs of a cgroup root is most of a
 * create's time (bpf/README.md), and nothing before the first command needs them: the
 * daemon answers meanwhile (a mount, a status) and starts no command before this ends.
 * The main loop polls the ring from its next turn on (wake_fd). */
static void *load_watcher(void *arg) {
        daemon_state *d = arg;
        lfs_watcher *w = NULL;
        lfs_fault_point("watcher-loading"); /* the daemon answering, its watcher not loaded */
        int r = open_bpf_watcher(d, &w);
        if (r < 0)
                log_line("the BPF watcher did not %s (%s); watching with cgroup.events and pidfds",
                         r == -E2BIG ? "take this Sandbox" : "load", strerror(-r));
        settle_watcher(d, r < 0 ? NULL : w);
        uint64_t one = 1;
        (void)!write(d->wake_fd, &one, sizeof(one));
        return NULL;
}

int start_watcher(daemon_state *d) {
        const char *want = getenv("LAYERFS_WATCHER");
        if (want && *want && strcmp(want, "bpf") && strcmp(want, "proc") && strcmp(want, "cgroup")) {
                log_line("LAYERFS_WATCHER=%s is not a watcher: give bpf, proc or cgroup", want);
                return -EINVAL;
        }
        d->watcher_kind = "cgroup";
        pthread_condattr_t monotonic;
        pthread_condattr_init(&monotonic);
        pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
        pthread_cond_init(&d->watcher_cond, &monotonic);
        pthread_condattr_destroy(&monotonic);
        d->watcher_deadline_ms = lfs_now_ms() + (long long)d->watcher_load_wait_ms;
        if (!want || !*want) {
                if (pthread_create(&d->watcher_loader, NULL, load_watcher, d) == 0) {
                        d->watcher_loading = true;
                        return 0;
                }
                load_watcher(d); /* no thread: here and now */
                return 0;
        }
        int r = 0;
        if (!strcmp(want, "proc")) {
                r = proc_watch_open(d->cgroup, on_proc_event, d, &d->proc);
                if (r < 0)
                        log_line("the proc connector did not open: %s", strerror(-r));
                else
                        d->watcher_kind = "proc";
        } else if (!strcmp(want, "bpf")) {
                lfs_watcher *w = NULL;
                r = open_bpf_watcher(d, &w);
                if (r < 0 && r != -E2BIG) /* a full root: the create says LimitReached */
                        log_line("the BPF watcher did not load (%s)", strerror(-r));
                else
                        settle_watcher(d, w);
        }
        d->watcher_settled = true;
        return r;
}

bool await_watcher_locked(daemon_state *d) {
        struct timespec deadline = lfs_monotonic_deadline(d->watcher_deadline_ms - lfs_now_ms());
        while (!d->watcher_settled && !d->closing)
                if (pthread_cond_timedwait(&d->watcher_cond, &d->lock, &deadline) == ETIMEDOUT &&
                    !d->watcher_settled) {
                        /* Its root's lock held by another daemon for that long (stopped, or a
                         * local user's flock of the root's directory): the Sandbox goes on
                         * with the daemon's own pidfds, and what loads later is closed. */
                        d->watcher_abandoned = d->watcher_settled = true;
                        log_line("the BPF watcher has not loaded in %llu ms (its cgroup root's lock held?); "
                                 "watching with cgroup.events and pidfds",
                                 (unsigned long long)d->watcher_load_wait_ms);
                        pthread_cond_broadcast(&d->watcher_cond);
                }
        return d->watcher_settled && !d->closing;
}

bool await_watcher(daemon_state *d) {
        pthread_mutex_lock(&d->lock);
        bool settled = await_watcher_locked(d);
        pthread_mutex_unlock(&d->lock);
        return settled;
}

void watcher_closing_locked(daemon_state *d) {
        pthread_cond_broadcast(&d->watcher_cond);
}

bool join_watcher_loader(daemon_state *d) {
        if (!d->watcher_loading)
                return true;
        /* A loader past its root's lock ends within milliseconds, leaving the root's map
         * as it found it; one still waiting for the lock (held by a stopped daemon, say)
         * has added nothing, and the exit ends it. */
        struct timespec deadline = lfs_monotonic_deadline(LOADER_END_WAIT_MS);
        pthread_mutex_lock(&d->lock);
        while (!d->watcher_loader_done &&
               pthread_cond_timedwait(&d->watcher_cond, &d->lock, &deadline) != ETIMEDOUT)
                ;
        bool done = d->watcher_loader_done;
        pthread_mutex_unlock(&d->lock);
        if (!done)
                return false;
        pthread_join(d->watcher_loader, NULL);
        d->watcher_loading = false;
        return true;
}

static json_t *event_json(const sandbox_event *e) {
        /* comm is the process's to set (prctl) and the kernel cuts it at 15 bytes, maybe
         * inside a character: lossy text, so that no name can drop its event (json_pack
         * fails on bytes that are not UTF-8). */
        json_t *j =
                json_pack("{s:s, s:i, s:i, s:s, s:o, s:f}", "event",
                          e->kind == EVENT_EXIT ? "exit" : "start", "pid", (int)e->pid, "ppid", (int)e->ppid,
                          "cgroup", e->cgroup, "comm", lfs_json_path(e->comm), "time", e->time);
        json_object_set_new(j, "received", json_real(e->received));
        if (e->kind == EVENT_EXIT) {
                if (e->status & 0x7f)
                        json_object_set_new(j, "signal", json_integer(e->status & 0x7f));
                else
                        json_object_set_new(j, "exit", json_integer((e->status >> 8) & 0xff));
        }
        return j;
}

/* Events from seq on (the oldest kept if seq is older), with d->lock held. */
static json_t *events_since(daemon_state *d, uint64_t *seq) {
        json_t *out = json_array();
        uint64_t first = d->n_events > EVENT_RING ? d->n_events - EVENT_RING : 0;
        for (uint64_t s = *seq < first ? first : *seq; s < d->n_events; s++)
                json_array_append_new(out, event_json(&d->events[s % EVENT_RING]));
        *seq = d->n_events;
        return out;
}

/* Writes each event of out (taken) as a frame of the stream; false once the client is gone. */
static bool send_events(int fd, json_t *out) {
        size_t i;
        json_t *e;
        bool sent = true;
        json_array_foreach(out, i, e) {
                json_t *frame = lfs_proto_stream_item(json_incref(e));
                sent = sent && lfs_frame_write(fd, frame, LFS_FRAME_MAX_ANSWER, NULL, 0, false, NULL) == 0;
                json_decref(frame);
        }
        json_decref(out);
        return sent;
}

/* Waits, without d->lock, until f is woken (an event, the close) or the client has gone:
 * false then. A client that went away frees its place among MAX_CLIENTS at once, not at
 * the next event. Gone is POLLHUP (the peer closed), not POLLRDHUP: that one is also
 * raised by the daemon's own shutdown of the reading side of a connection told to give
 * its place and served after all, and by a client that only stopped writing. */
static bool wait_follower(daemon_state *d, int fd, follower *f) {
        pthread_mutex_unlock(&d->lock);
        struct pollfd p[2] = { { .fd = fd, .events = 0 }, { .fd = f->wake_fd, .events = POLLIN } };
        int k;
        while ((k = poll(p, 2, -1)) < 0 && errno == EINTR)
                ;
        uint64_t n;
        if (p[1].revents & POLLIN)
                (void)!read(f->wake_fd, &n, sizeof(n));
        pthread_mutex_lock(&d->lock);
        return k > 0 && !(p[0].revents & (POLLHUP | POLLERR | POLLNVAL));
}

json_t *call_events(daemon_state *d, int fd, bool follow) {
        uint64_t seq = 0;
        pthread_mutex_lock(&d->lock);
        /* An unlocked call: it checks the close itself (docs/protocol.md). */
        if (d->closing) {
                pthread_mutex_unlock(&d->lock);
                return lfs_proto_errorf(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        }
        /* The answer names the watcher that stays. */
        if (!await_watcher_locked(d)) {
                pthread_mutex_unlock(&d->lock);
                return lfs_proto_errorf(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        }
        json_t *out = events_since(d, &seq);
        if (!follow) {
                pthread_mutex_unlock(&d->lock);
                return lfs_proto_ok(json_pack("{s:s, s:o}", "watcher", d->watcher_kind, "events", out));
        }
        /* Following: each event is one frame, until the Sandbox closes or the client goes.
         * Registered before the first look at n_events: an event after it wakes us. */
        _cleanup_free_ follower *f = xmalloc(sizeof(*f));
        *f = (follower){ .wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), .next = d->followers };
        if (f->wake_fd < 0) {
                pthread_mutex_unlock(&d->lock);
                json_decref(out);
                return lfs_proto_errorf(LFS_FAILED, "cannot follow the events of sandbox %d: eventfd: %s",
                                        d->number, strerror(errno));
        }
        d->followers = f;
        for (;;) {
                pthread_mutex_unlock(&d->lock);
                bool here = send_events(fd, out);
                pthread_mutex_lock(&d->lock);
                while (here && !d->closing && seq == d->n_events)
                        here = wait_follower(d, fd, f);
                if (!here || d->closing)
                        break;
                out = events_since(d, &seq);
        }
        for (follower **p = &d->followers; *p; p = &(*p)->next)
                if (*p == f) {
                        *p = f->next;
                        break;
                }
        pthread_mutex_unlock(&d->lock);
        close(f->wake_fd);
        return NULL;
}

/* The last exits the daemon knows of, for process.list; with d->lock held. */
void recent_exits_json(daemon_state *d, json_t *out, size_t max) {
        uint64_t first = d->n_events > EVENT_RING ? d->n_events - EVENT_RING : 0;
        size_t n = 0;
        for (uint64_t s = d->n_events; s-- > first && n < max;) {
                const sandbox_event *e = &d->events[s % EVENT_RING];
                if (e->kind != EVENT_EXIT)
                        continue;
                json_t *j = json_pack("{s:i, s:s, s:s, s:o}", "pid", (int)e->pid, "cgroup", e->cgroup,
                                      "state", "exited", "command", lfs_json_path(e->comm));
                json_object_set_new(
                        j, "exit",
                        json_integer(e->status & 0x7f ? 128 + (e->status & 0x7f) : (e->status >> 8) & 0xff));
                json_array_append_new(out, j);
                n++;
        }
}
