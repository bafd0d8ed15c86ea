/* SPDX-License-Identifier: MIT */
/* The Sandbox daemon's shared state and the helpers its calls share. */
#ifndef LFS_DAEMON_H
#define LFS_DAEMON_H

#include <jansson.h>
#include <pthread.h>

#include "bpf_watcher.h"
#include "calls.h"
#include "fuse_transport.h"
#include "runtime.h"
#include "store.h"
#include "workspace.h"

#define MAX_WORKSPACES 16
/* Connections served at once (each has a thread); past them, one still waiting for its
 * request gives its place, else the newcomer is refused Busy. */
#define MAX_CLIENTS 128
/* Connections told to give their place and not gone yet: past this many, the accept loop
 * waits for them before it takes more (threads stay below MAX_CLIENTS + MAX_EVICTING). */
#define MAX_EVICTING 16
/* Connection threads kept waiting for the next connection once theirs is served. */
#define MAX_IDLE_SERVERS 2
/* Each Workspace's metadata budget unless LAYERFS_WORKSPACE_MEMORY says otherwise. */
#define DEFAULT_WORKSPACE_MEMORY (1ull << 30)

typedef struct workspace {
        bool active;
        /* Taken by a mount at work on the Store without d->lock (call_mount): not active
         * yet, but no other mount takes the slot or the branch, and the idle close waits. */
        bool mounting;
        char *branch;
        char *key; /* the branch as one path component */
        char *mountpoint;
        char *upper;
        lfs_store *store;
        ws_fs *fs;
        ws_session *session; /* the mount and its FUSE loop */
        pthread_t thread;
        dev_t dev; /* the mount's device, once it answered */
        /* Calls using fs without d->lock held (status, commit, dirty checks): the
         * Workspace stays mounted until the last of them lets go (hold_ws). */
        unsigned holders;
} workspace;

enum { EVENT_START = 1, EVENT_EXIT = 2 };
#define EVENT_RING 4096

/* A process of the Sandbox starting or ending. */
typedef struct sandbox_event {
        uint64_t seq;
        int kind;
        pid_t pid, ppid;
        int status; /* exit: the wait status */
        char cgroup[32]; /* its command's leaf: cmd-<k> */
        char comm[16];
        double time; /* seconds since the epoch */
        double received; /* when the daemon learnt of it: time + the watcher's latency */
} sandbox_event;

typedef struct leaf_id {
        uint64_t id; /* the cgroup id (the directory's inode number) */
        char name[32];
} leaf_id;

typedef struct daemon_state {
        lfs_home *home;
        uint64_t gc_after_deletes; /* LAYERFS_GC_AFTER_DELETES; 0: the idle close runs no gc */
        char *project;
        char *dir;
        char *token;
        char *cgroup; /* the Sandbox's cgroup; the daemon lives in its leaf "daemon" */
        char *instance; /* this Sandbox's instance: its record names it (records.h) */
        /* The runtime of the Sandbox's platform, and the Sandbox as it sees it: every
         * command starts, is listed, signalled and ended through it, and so does the
         * Sandbox (close.c). */
        const lfs_runtime *runtime;
        lfs_sandbox_ref sb;
        char *tmp; /* the commands' HOME and TMPDIR, owned by the command identity */
        int number;
        uid_t uid; /* the command identity (SPEC 3), as the command sees it */
        gid_t gid;
        /* ...and on the host (lfs_host_id): the owner of its tmp and Workspaces. */
        uid_t host_uid;
        gid_t host_gid;
        /* Everything below is guarded by lock. Each client connection has a thread. */
        pthread_mutex_t lock;
        workspace ws[MAX_WORKSPACES];
        unsigned next_command; /* names the leaves cmd-<k> */
        unsigned running_execs;
        unsigned starting_commands; /* checked, not yet in their leaf (exec.c) */
        unsigned *starting; /* their numbers k (leaves cmd-<k>), starting_commands of them */
        size_t cap_starting;
        /* An eventfd each of them adds 1 to when its process is in its leaf (before it takes
         * the command's identity: lfs_command_spec.born_fd) and again once it started or
         * failed: close_sandbox waits on it. Not a lock's condition: the process adds to it
         * between its clone and its execve, where it may make system calls alone. */
        int started_efd;
        unsigned waiters; /* threads reaping started processes */
        unsigned clients; /* connections being served */
        struct client *first_client, *last_client; /* in the order they came */
        unsigned evicting; /* of clients: told to go (still waiting for a request), not gone yet */
        /* Connection threads that served theirs and wait for the next (MAX_IDLE_SERVERS
         * at most, named lfs-idle meanwhile), and the connections handed to them: a new
         * thread per connection ran every open Sandbox's BPF watcher on its clone3. */
        unsigned idle_servers, n_handoff;
        struct client *handoff;
        pthread_cond_t handoff_cond;
        uint64_t ws_memory; /* each Workspace's metadata budget (ws_set_limits) */
        /* The first mount's Store, opened on spare_thread as the daemon starts answering
         * (mounts.c, start_spare_store); spare_started: the thread is to be joined. */
        lfs_store *spare_store;
        pthread_t spare_thread;
        bool spare_started;
        /* Process starts and ends, the last EVENT_RING of them (events.c). */
        const char *watcher_kind; /* "bpf" or "cgroup" */
        lfs_watcher *watcher; /* the BPF tier */
        /* The default watcher loads on a thread of its own beside the daemon's first answers
         * (start_watcher): set, under lock, with watcher and watcher_kind once it has loaded
         * or given up; await_watcher waits for it. */
        bool watcher_settled;
        bool watcher_loading; /* watcher_loader is to be joined */
        bool watcher_abandoned; /* not loaded by its deadline: what loads later is closed */
        bool watcher_loader_done; /* the loader has settled what it made, and ends */
        long long watcher_deadline_ms; /* lfs_now_ms() by which a waiter gives up on the load */
        uint64_t watcher_load_wait_ms; /* the deadline's distance from the daemon's start */
        pthread_t watcher_loader;
        pthread_cond_t watcher_cond; /* CLOCK_MONOTONIC */
        /* The BPF tier's last exits reported, by pid (see on_watch_event); a ring. */
        pid_t bpf_exits[256];
        unsigned n_bpf_exits;
        struct proc_watch *proc; /* the proc connector tier */
        sandbox_event events[EVENT_RING];
        uint64_t n_events;
        struct follower *followers; /* of sandbox.events: woken by each event and by the close */
        leaf_id *leaves;
        size_t n_leaves, cap_leaves;
        /* The idle close's gc (close.c, idle_gc_start), on idle_gc_thread beside the accept
         * loop, which goes on accepting, serving and reading signals and events meanwhile:
         * running from the loop's start of it, ended as the thread ends (it wakes the loop
         * then), none again once the loop or main joined it. One at a time. */
        enum { IDLE_GC_NONE, IDLE_GC_RUNNING, IDLE_GC_ENDED } idle_gc;
        pthread_t idle_gc_thread;
        /* Set by the close or a mount (idle_gc_yield): the gc ends if it has not begun to
         * change the Store; cleared as the next one starts. */
        _Atomic bool idle_gc_stop;
        bool closing;
        bool closed; /* teardown has finished */
        bool removed; /* ...and removed everything: the record goes as the daemon's last act */
        bool left_some; /* ...and something stayed: the record is released as its last act */
        /* (or neither: the place stayed for the closer, who has the record: close_beside_start) */
        /* The close's work beside the teardown (close_beside_start, close.c): main
         * joins it before the daemon's last act. */
        pthread_t beside[2];
        unsigned n_beside;
        /* Signalled as a connection, an exec or a reaper of started processes ends (clients,
         * running_execs, waiters): the daemon's end waits on it for them. */
        pthread_cond_t gone_cond;
        pthread_cond_t ws_released; /* a Workspace's last holder let go, or a mount's Store part ended */
        int wake_fd; /* eventfd: tells the accept loop to look again (close, idle) */
        /* signalfd of SIGTERM, SIGINT and SIGHUP, blocked in every thread of the daemon
         * (main blocks them before the first thread starts): the accept loop reads them
         * and closes the Sandbox (close_on_signal). */
        int signal_fd;
        /* CLOCK_MONOTONIC ms of the last request that passed its checks (token, version)
         * or the last command's end: the idle close counts from it. A connection that
         * brings no valid request does not keep a Sandbox open. */
        long long last_activity_ms;
} daemon_state;

/* Tells the accept loop to look again (close, idle). */
static inline void wake_main_loop(daemon_state *d) {
        uint64_t one = 1;
        (void)!write(d->wake_fd, &one, sizeof(one));
}
typedef struct detached_start {
        void *(*fn)(void *);
        void *arg;
        char name[16];
} detached_start;

/* The thread names itself: named by its creator after pthread_create, a detached thread
 * that had already ended (a ping's connection) was freed under pthread_setname_np, and the
 * daemon died of it (ASan, test_protocol's 200 pings at once: connects refused, "the daemon
 * is gone"). */
static inline void *detached_trampoline(void *p) {
        detached_start s = *(detached_start *)p;
        free(p);
        (void)pthread_setname_np(pthread_self(), s.name); /* /proc/PID/task/TID/comm: who is who */
        return s.fn(s.arg);
}

/* Runs fn(arg) in a thread of its own, named name (15 bytes at most: its comm), that
 * nobody joins; 0 or a negative errno. */
static inline int start_detached(const char *name, void *(*fn)(void *), void *arg) {
        detached_start *s = xmalloc(sizeof(*s));
        *s = (detached_start){ .fn = fn, .arg = arg };
        snprintf(s->name, sizeof(s->name), "%s", name);
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int r = pthread_create(&t, &attr, detached_trampoline, s);
        pthread_attr_destroy(&attr);
        if (r != 0)
                free(s);
        return -r;
}

/* A call as its handler gets it (calls.c): the request, whose arguments the handler
 * reads, the connection (a stream writes its frames there) and the fds that came with
 * it, exactly lfs_call_fds(call) of them (the handler's to close). */
typedef struct call_request {
        lfs_call call;
        json_t *args;
        int fd;
        pid_t peer_pid; /* the process that connected, as the kernel saw it */
        int fds[LFS_CALL_MAX_FDS];
        size_t n_fds;
} call_request;

/* calls.c: runs r's call through the handler array indexed by the call's enum. */
json_t *handle_call(daemon_state *d, const call_request *r);

/* control.c: the control socket at path (0600), and the accept loop, until the Sandbox
 * closes; with nothing mounted, running or asked for idle_ms, the daemon closes it. */
int control_listen(const char *path);
void control_serve(daemon_state *d, int lfd, long long idle_ms);

/* mounts.c: the mount table and the Workspace calls. With d->lock held unless said. */
workspace *find_ws(daemon_state *d, const char *branch);
/* Whether a Workspace is mounted or being mounted (the idle close waits for both). */
bool mounted_any(daemon_state *d);
json_t *not_mounted(daemon_state *d, const char *branch);
json_t *call_mount(daemon_state *d, const char *branch);
/* Opens the Store for the first mount on a thread of its own, once the daemon answers;
 * drop_spare_store closes it if no mount took it (at the daemon's end, without d->lock). */
void start_spare_store(daemon_state *d);
void drop_spare_store(daemon_state *d);
/* status and commit release d->lock while they read the Workspace. */
json_t *call_status(daemon_state *d, const char *branch);
json_t *call_commit(daemon_state *d, const char *branch, const char *message);
json_t *call_unmount(daemon_state *d, const char *branch, bool discard);
json_t *call_list(daemon_state *d);
/* Each Workspace's dirtiness, read with d->lock released; false when the Sandbox began
 * closing meanwhile. */
bool check_dirty(daemon_state *d, bool dirty[MAX_WORKSPACES], ws_usage usage[MAX_WORKSPACES]);
/* Unmounts (force: also while busy) and frees the slot; a negative errno if it stays. */
int stop_mount(workspace *w, bool force);
/* Waits (on d->ws_released) until no call reads w any more. */
void wait_ws_released(daemon_state *d, workspace *w);

/* close.c: everything the Sandbox made goes, its record last (why: for the log);
 * *ret_why says what stayed when something did. */
int close_sandbox(daemon_state *d, const char *why, pid_t closer, char **ret_why);
/* Before the idle close, without d->lock: project gc when the project had
 * d->gc_after_deletes branches deleted since its last gc, on a thread of its own that
 * wakes the accept loop as it ends (d->idle_gc); logs what it did. false when no gc is to
 * run (none asked for, or one ran here: no thread could be made): the close is decided at
 * once. A request meanwhile is served and keeps the Sandbox open; a mount stops the gc if
 * it still plans (idle_gc_yield), else waits for it without d->lock (it pins under the
 * gc's lock: call_mount). */
bool idle_gc_start(daemon_state *d);
/* A mount came (call_mount): an idle gc that still plans ends, as at a close; one that
 * has begun to change the Store goes on. With d->lock held. */
void idle_gc_yield(daemon_state *d);
/* Waits for the idle gc's thread, if one was started, and sets d->idle_gc back to none
 * (the accept loop once it ended; main, after a close that came meanwhile). */
void idle_gc_join(daemon_state *d);
/* sandbox.close: Dirty unless force, else close_sandbox (why: who asked, for the log). */
json_t *call_close(daemon_state *d, bool force, pid_t closer, const char *why);
/* Waits for the close's work beside the teardown, if it started (main, before its last act). */
void close_beside_join(daemon_state *d);
/* SIGTERM, SIGINT or SIGHUP, read from d->signal_fd by the accept loop: the close of
 * sandbox.close without --force (a dirty Workspace keeps the Sandbox open, and the log
 * says so), its log naming the signal and its sender; during a close, only logged.
 * Without d->lock held. */
struct signalfd_siginfo;
void close_on_signal(daemon_state *d, const struct signalfd_siginfo *si);

/* workspace.exec: runs req's command in a new leaf of the Sandbox's cgroup with the
 * client's stdin, stdout and stderr (fds, passed with the request), or with tty on a
 * terminal the daemon makes, whose master it sends on conn_fd before the answer; waits
 * for it and answers {exit}. Takes ownership of the fds. */
json_t *call_exec(daemon_state *d, json_t *req, int conn_fd, int *fds, size_t n_fds);
/* process.start: the command in a new leaf, in the background, output to a log of its
 * own; answers {pid, cgroup, log}. process.list and process.kill: with d->lock held. */
json_t *call_process_start(daemon_state *d, json_t *req);
json_t *call_process_list(daemon_state *d);
json_t *call_process_kill(daemon_state *d, json_t *req);

/* proc_watch.c: the proc connector tier. fn gets each start and end of a process of the
 * Sandbox that the daemon did not start itself (those it reports from their pidfds). */
typedef struct proc_watch proc_watch;
typedef void (*proc_event_fn)(void *userdata, int kind, pid_t pid, pid_t ppid, int status, const char *leaf,
                              const char *comm);
int proc_watch_open(const char *sandbox_cgroup, proc_event_fn fn, void *userdata, proc_watch **ret);
int proc_watch_fd(proc_watch *w);
void proc_watch_consume(proc_watch *w);
void proc_watch_close(proc_watch *w);

/* events.c. The watcher: LAYERFS_WATCHER=bpf|proc|cgroup forces one, made before the daemon
 * answers; by default BPF where it loads, else cgroup (the daemon records the starts and
 * ends of what it started), loaded beside the daemon's first answers. */
int start_watcher(daemon_state *d);
/* With d->lock held: returns true once the watcher is what it will stay (loaded, or given
 * up for cgroup: by the loader, or by this wait at WATCHER_LOAD_WAIT_MS after the start),
 * so that a command started after it has all its events seen by one watcher; false when
 * the Sandbox began to close first (nothing is to start then). */
bool await_watcher_locked(daemon_state *d);
/* The same, taking d->lock. */
bool await_watcher(daemon_state *d);
/* With d->lock held, d->closing set: wakes the waiters of await_watcher. A load still
 * going on closes its watcher itself when it ends. */
void watcher_closing_locked(daemon_state *d);
/* Main, once the Sandbox has closed: waits a little for a loader still running to settle
 * (so that no ring it added stays in its root's map) and joins it. False when it is still
 * running (stuck on its root's lock): the daemon must end with _exit, d still in use. */
bool join_watcher_loader(daemon_state *d);
/* Remembers leaf's cgroup id, so that events name their command's leaf. */
void register_leaf(daemon_state *d, const char *leaf);
/* Without d->lock held. */
void record_event(daemon_state *d, int kind, pid_t pid, pid_t ppid, int status, const char *leaf,
                  const char *comm);
/* sandbox.events: the events kept; follow: each later one as a frame on fd, until the
 * Sandbox closes or the client goes (then NULL: nothing more to answer). */
json_t *call_events(daemon_state *d, int fd, bool follow);
/* Wakes every follower of events (a new event, or the Sandbox closing); with d->lock held. */
void wake_followers(daemon_state *d);
/* Appends the last max exits to out, newest first; with d->lock held. */
void recent_exits_json(daemon_state *d, json_t *out, size_t max);

#endif
