/* SPDX-License-Identifier: MIT */
/*
 * The control socket: the accept loop (with the idle close), the cap on connections, and
 * each connection's request read (proto/frame.c), checked (proto/codec.c) and answered;
 * the handlers are calls.c's. docs/protocol.md is the protocol.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "daemon.h"
#include "fault.h"
#include "frame.h"
#include "log.h"
#include "codec.h"

typedef struct client {
        daemon_state *d;
        int fd;
        /* Guarded by d->lock: */
        bool waiting; /* for its request: may give its place to a newer connection */
        bool answering; /* its request read, being served: counted as activity meanwhile */
        bool evicted; /* told to (its reading shut down) */
        struct client *prev, *next; /* d's list, in the order they came */
        struct client *handoff_next; /* d->handoff's, while it waits for an idle thread */
} client;

static void client_unlink(daemon_state *d, client *c) {
        *(c->prev ? &c->prev->next : &d->first_client) = c->next;
        *(c->next ? &c->next->prev : &d->last_client) = c->prev;
}

/* The peer's uid and pid, as the kernel saw it connect; uid -1 if they cannot be read. */
static long peer_uid(int fd, pid_t *ret_pid) {
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred))
                return -1;
        *ret_pid = cred.pid;
        return (long)cred.uid;
}

/* The request's call, checked (docs/protocol.md, "Requests": its peer, its version, its
 * token, its call, its fds, in that order, before anything is done), run through its
 * handler: under d->lock unless the call takes it itself (LFS_CALL_UNLOCKED), and refused
 * while the Sandbox closes (the unlocked calls check that themselves as they start). */
static json_t *serve_request(daemon_state *d, int fd, lfs_frame_reader *reader, json_t *req) {
        _cleanup_error_ lfs_error *e = NULL;
        call_request r = { .args = req, .fd = fd };
        /* Root's alone, whatever the socket's mode became or whoever was handed a
         * connection: a daemon that runs as root starts commands for no one else, with the
         * token or without. */
        long uid = peer_uid(fd, &r.peer_pid);
        if (uid != 0)
                return lfs_proto_errorf(LFS_PERMISSION_DENIED,
                                        "sandbox %d serves root only; this connection is uid %ld's; run "
                                        "layerfs as root",
                                        d->number, uid);
        if (lfs_proto_parse_request(req, d->token, &r.call, &e) < 0)
                return lfs_proto_error(e);
        r.n_fds = lfs_call_fds(r.call);
        if ((lfs_call_flags(r.call) & LFS_CALL_FDS_OR_NONE) && lfs_frame_no_fds(reader))
                r.n_fds = 0;
        if (lfs_frame_take_fds(reader, lfs_call_name(r.call), r.n_fds, r.fds, &e) < 0)
                return lfs_proto_error(e);
        bool locked = !(lfs_call_flags(r.call) & LFS_CALL_UNLOCKED);
        pthread_mutex_lock(&d->lock);
        d->last_activity_ms = lfs_now_ms();
        if (!locked) {
                pthread_mutex_unlock(&d->lock);
                json_t *answer = handle_call(d, &r);
                pthread_mutex_lock(&d->lock);
                d->last_activity_ms = lfs_now_ms(); /* a follower of events, gone now */
                pthread_mutex_unlock(&d->lock);
                return answer;
        }
        bool closing = d->closing;
        json_t *answer = closing ? NULL : handle_call(d, &r);
        d->last_activity_ms = lfs_now_ms(); /* a long commit ends: the idle time starts now */
        pthread_mutex_unlock(&d->lock);
        if (closing) {
                for (size_t i = 0; i < r.n_fds; i++) /* the handler would have taken them */
                        close(r.fds[i]);
                answer = lfs_proto_errorf(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        }
        return answer;
}

/* One request per connection; exec holds its connection until the command ends, so
 * each connection has its own thread. Calls other than the unlocked ones run under
 * d->lock, which status, commit, list_workspaces, unmount and close release while they
 * read a Workspace (hold_ws). */
static void serve_one(client *c) {
        daemon_state *d = c->d;
        lfs_frame_reader reader;
        lfs_frame_reader_init(&reader, c->fd, LFS_FRAME_MAX_REQUEST, LFS_CALL_MAX_FDS);
        _cleanup_error_ lfs_error *e = NULL;
        json_t *req = NULL, *answer = NULL;
        int k = lfs_frame_read(&reader, &req, &e);
        pthread_mutex_lock(&d->lock);
        c->waiting = false;
        /* Until serve_request counts it as activity (after the peer's check and the
         * parse), the idle close must still see it coming (request_awaited). */
        c->answering = k > 0;
        bool evicted = c->evicted;
        if (evicted && k > 0) {
                /* Its request came as it was told to give its place: it is served, so it is
                 * no longer leaving. Counted as leaving, a follow of events served this way
                 * kept the accept loop waiting for it (MAX_EVICTING of them stopped it for
                 * good: newcomers got neither a place nor Busy). */
                c->evicted = false;
                d->evicting--;
        }
        pthread_mutex_unlock(&d->lock);
        /* Told to give its place as its request arrived: a whole request is still served
         * (only reading was shut down), one cut short is not answered. */
        if (k > 0) {
                answer = serve_request(d, c->fd, &reader, req);
                pthread_mutex_lock(&d->lock);
                c->answering = false;
                pthread_mutex_unlock(&d->lock);
        } else if (evicted) /* told why, in case its request is on its way after all */
                answer = lfs_proto_errorf(LFS_BUSY,
                                          "sandbox %d serves %d connections at once, the most it takes, "
                                          "and this one gave its place to a newer one before its request "
                                          "came; try again",
                                          d->number, MAX_CLIENTS);
        else if (k < 0) /* too long, not one JSON object, cut short */
                answer = lfs_proto_error(e);
        json_decref(req);
        lfs_frame_reader_done(&reader); /* closes fds that no call took */
        /* A client gone before its answer is not the daemon's failure. */
        if (answer) /* an evicted connection's reader may be gone: its refusal never waits */
                (void)lfs_frame_write(c->fd, answer, LFS_FRAME_MAX_ANSWER, NULL, 0, evicted && k <= 0, NULL);
        json_decref(answer);
        pthread_mutex_lock(&d->lock);
        client_unlink(d, c);
        d->clients--;
        d->evicting -= c->evicted;
        pthread_cond_broadcast(&d->gone_cond);
        pthread_mutex_unlock(&d->lock);
        close(c->fd);
        free(c);
        wake_main_loop(d);
}

/* The next connection handed to this thread once it has served its own, or NULL: the
 * thread ends (MAX_IDLE_SERVERS wait already). No handler leaves state in its thread
 * (credentials, namespaces, signal mask: those change only in a command's child). */
static client *next_client(daemon_state *d) {
        pthread_mutex_lock(&d->lock);
        /* Not once the Sandbox closes: the daemon's end waits for connections, not for
         * idle threads, and its state goes with main's return. */
        if (d->closing || d->idle_servers >= MAX_IDLE_SERVERS) {
                pthread_mutex_unlock(&d->lock);
                return NULL;
        }
        d->idle_servers++;
        pthread_setname_np(pthread_self(), "lfs-idle");
        while (!d->handoff)
                pthread_cond_wait(&d->handoff_cond, &d->lock);
        client *c = d->handoff;
        d->handoff = c->handoff_next;
        d->n_handoff--;
        d->idle_servers--;
        pthread_mutex_unlock(&d->lock);
        pthread_setname_np(pthread_self(), "lfs-connection");
        return c;
}

static void *serve_clients(void *arg) {
        client *c = arg;
        daemon_state *d = c->d;
        for (; c; c = next_client(d))
                serve_one(c); /* frees c */
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
        json_t *j =
                lfs_proto_errorf(LFS_BUSY,
                                 "sandbox %d serves %d connections at once, the most it takes, and each "
                                 "is running a call (an exec, a follow of events); try again when one ends",
                                 d->number, MAX_CLIENTS);
        /* Without waiting: a refusal must not hold the accept loop. */
        (void)lfs_frame_write(fd, j, LFS_FRAME_MAX_ANSWER, NULL, 0, true, NULL);
        json_decref(j);
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
        /* A connection told to leave may be served after all (its request came meanwhile):
         * past MAX_CLIENTS + MAX_EVICTING connections, nobody is told to leave any more. */
        bool may_evict = d->clients < MAX_CLIENTS + MAX_EVICTING;
        for (client *o = d->first_client; o && !room && may_evict; o = o->next)
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
        if (d->idle_servers > d->n_handoff) { /* a thread waits for it */
                c->handoff_next = d->handoff;
                d->handoff = c;
                d->n_handoff++;
                pthread_cond_signal(&d->handoff_cond);
                pthread_mutex_unlock(&d->lock);
                return;
        }
        pthread_mutex_unlock(&d->lock);
        if (start_detached("lfs-connection", serve_clients, c) < 0) {
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

int control_listen(const char *path) {
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

/* Whether a connection accepted waits for its request, or has it read and not yet counted
 * as activity: with the accept loop going on
 * beside the idle gc, the request of a create taking this Sandbox from a pool may be on
 * its way in one of these rather than in the socket's queue. With d->lock held. */
static bool request_awaited(daemon_state *d) {
        for (client *c = d->first_client; c; c = c->next)
                if ((c->waiting || c->answering) && !c->evicted)
                        return true;
        return false;
}

/* The idle close once its gc ended (or none ran), the idle time having been up since
 * idle_from, the last activity then. A request served meanwhile (the idle time started
 * again) keeps the Sandbox open; so does, once, a request on its way (a create taking this
 * Sandbox from a pool asks once): a connection waiting to be accepted, or accepted and not
 * read yet. The idle time then starts again; the request, if it has the token, is activity.
 * Only once until a request is (*given_again): connections with no request or a wrong one
 * keep no Sandbox open. */
static void idle_close(daemon_state *d, int lfd, bool paused, long long idle_from, long long *given_again) {
        lfs_fault_point("idle-gc-done");
        struct pollfd waiting = { .fd = lfd, .events = POLLIN };
        bool asked = !paused && poll(&waiting, 1, 0) > 0;
        pthread_mutex_lock(&d->lock);
        asked = asked || request_awaited(d);
        bool unchanged = d->last_activity_ms == idle_from;
        if (asked && unchanged && idle_from != *given_again)
                d->last_activity_ms = *given_again = lfs_now_ms();
        else if (unchanged && !d->closing && !mounted_any(d) && d->running_execs == 0)
                close_sandbox(d, "idle", 0, NULL);
        pthread_mutex_unlock(&d->lock);
}

/* The accept loop's fds before the refused connections: the socket, wake_fd, the two
 * watchers' and signal_fd. */
#define FIXED_POLLED 5

/* Accepts clients until the Sandbox closes. With no Workspace mounted, no command
 * running and no request (one with the token: see last_activity_ms) for idle_ms, the
 * daemon closes the Sandbox itself, after its gc (idle_gc_start), which runs beside this
 * loop: connections, signals and the watchers' events are served meanwhile, and the close
 * is decided as it ends (idle_close). SIGTERM, SIGINT and SIGHUP close it too
 * (close_on_signal), during that gc as well (main waits for the gc's end). The only timer
 * is the idle deadline: an idle daemon sleeps in poll. */
void control_serve(daemon_state *d, int lfd, long long idle_ms) {
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        bool paused = false;
        long long given_again = -1; /* the idle time given once more for a waiting connection */
        long long idle_from = -1; /* the last activity when the running idle gc began */
        pthread_mutex_lock(&d->lock);
        d->last_activity_ms = lfs_now_ms();
        pthread_mutex_unlock(&d->lock);
        for (;;) {
                pthread_mutex_lock(&d->lock);
                long long last_activity = d->last_activity_ms;
                /* Not before teardown has finished: it lets go of the lock while it waits. */
                bool closed = d->closed;
                bool idle = !mounted_any(d) && d->running_execs == 0;
                bool evictions_pending = d->evicting >= MAX_EVICTING;
                int gc = d->idle_gc;
                lfs_watcher *watcher = d->watcher; /* set once, by the watcher's loader */
                pthread_mutex_unlock(&d->lock);
                if (closed)
                        return; /* a gc still running is main's to wait for (idle_gc_join) */
                if (gc == IDLE_GC_ENDED) {
                        idle_gc_join(d);
                        idle_close(d, lfd, paused, idle_from, &given_again);
                        continue;
                }
                int timeout = -1;
                if (idle && gc == IDLE_GC_NONE) {
                        long long left = last_activity + idle_ms - lfs_now_ms();
                        if (left <= 0) {
                                idle_from = last_activity;
                                lfs_fault_point("idle-gc-start"); /* found idle, d->lock let go */
                                if (!idle_gc_start(d)) /* else decided as it ends */
                                        idle_close(d, lfd, paused, idle_from, &given_again);
                                continue;
                        }
                        timeout = (int)(left > INT32_MAX ? INT32_MAX : left);
                }
                struct pollfd p[FIXED_POLLED + MAX_REFUSED] = {
                        { .fd = lfd, .events = paused || evictions_pending ? 0 : POLLIN },
                        { .fd = d->wake_fd, .events = POLLIN },
                        { .fd = watcher ? lfs_watcher_fd(watcher) : -1, .events = POLLIN },
                        { .fd = d->proc ? proc_watch_fd(d->proc) : -1, .events = POLLIN },
                        { .fd = d->signal_fd, .events = POLLIN },
                };
                size_t n_polled = n_refused;
                for (size_t i = 0; i < n_polled; i++)
                        p[FIXED_POLLED + i] = (struct pollfd){ .fd = refused[i], .events = POLLIN };
                if (poll(p, FIXED_POLLED + n_polled, timeout) < 0 && errno != EINTR)
                        return;
                for (size_t i = n_polled; i-- > 0;)
                        if (p[FIXED_POLLED + i].revents) { /* its request (or its end) came: read, let go */
                                char sink[4096];
                                while (recv(refused[i], sink, sizeof(sink), MSG_DONTWAIT) > 0)
                                        ;
                                refused_drop(i);
                        }
                if (p[2].revents & POLLIN)
                        lfs_watcher_consume(watcher);
                if (p[3].revents & POLLIN)
                        proc_watch_consume(d->proc);
                struct signalfd_siginfo si;
                if ((p[4].revents & POLLIN) && read(d->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                        close_on_signal(d, &si);
                        continue; /* closed, or still open (a dirty Workspace): looked at again */
                }
                if (p[1].revents & POLLIN) {
                        uint64_t n;
                        (void)!read(d->wake_fd, &n, sizeof(n));
                        paused = false;
                }
                if (!(p[0].revents & POLLIN))
                        continue;
                int cfd = accept_client(lfd, &paused);
                if (cfd >= 0)
                        admit_client(d, cfd);
        }
}
