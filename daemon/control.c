/* SPDX-License-Identifier: MIT */
/*
 * The control socket: the accept loop (with the idle close), the cap on connections,
 * the framing (one JSON request line with its fds over SCM_RIGHTS, one JSON answer line)
 * and the dispatch of each call; docs/protocol.md.
 */
#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "daemon.h"
#include "log.h"
#include "reply.h"

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
        pthread_cond_broadcast(&d->gone_cond);
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
        if (start_detached("lfs-connection", serve_client, c) < 0) {
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
void control_serve(daemon_state *d, int lfd, long long idle_ms) {
        spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
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
                                        close_sandbox(d, "idle", NULL);
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
