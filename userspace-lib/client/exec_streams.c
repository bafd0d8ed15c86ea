/* SPDX-License-Identifier: MIT */
#include "exec_streams.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>

#include "codec.h"
#include "frame.h"

/* What a pseudo-terminal can hold between the command's write and our read: the kernel's
 * flip buffers (64 KiB) and the line discipline's (4 KiB). Once the command has ended,
 * more than this was written afterwards, by what it left in the background. */
#define PTY_HOLDS_AT_MOST (128 * 1024)
/* ^D: the end of input on a terminal in canonical mode (the command's, as it starts). */
#define END_OF_INPUT '\004'

bool lfs_is_terminal(int fd) {
        struct stat st;
        return fd >= 0 && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && isatty(fd);
}

/* ---- the caller's terminal while a command's is relayed ----
 * Signal handlers reach only globals: one such relay at a time per process. */

static const int ending_signals[] = { SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGPIPE,   SIGALRM, SIGUSR1,
                                      SIGUSR2, SIGXCPU, SIGXFSZ, SIGABRT, SIGVTALRM, SIGPROF };

static struct {
        bool active;
        int raw_fd; /* the caller's terminal, in raw mode; -1: none */
        struct termios saved, raw;
        int size_fd; /* the terminal whose window size the command's follows; -1: none */
        int master;
        int wake[2]; /* a signal arrived: wakes the relay's poll */
        volatile sig_atomic_t resized;
        bool handled[NSIG];
        struct sigaction old[NSIG];
} term = { .raw_fd = -1, .size_fd = -1, .master = -1, .wake = { -1, -1 } };

/* Async-signal-safe, as everything the handlers call. */
static void restore_terminal(void) {
        if (term.raw_fd >= 0)
                (void)tcsetattr(term.raw_fd, TCSANOW, &term.saved);
}

static void wake_relay(void) {
        if (term.wake[1] >= 0)
                (void)!write(term.wake[1], "", 1);
}

/* A signal that ends the process: the terminal is put back first, then the signal does
 * what it did before (the caller's handler, or the default: the process ends). */
static void on_ending_signal(int sig) {
        int saved = errno;
        restore_terminal();
        sigaction(sig, &term.old[sig], NULL);
        term.handled[sig] = false;
        raise(sig); /* blocked until this handler returns */
        errno = saved;
}

static void on_stop(int sig);

static void handle(int sig, void (*fn)(int)) {
        struct sigaction sa = { .sa_handler = fn, .sa_flags = SA_RESTART };
        sigemptyset(&sa.sa_mask);
        sigaction(sig, &sa, NULL);
}

/* Stopped (kill -TSTP; in raw mode ^Z is the command's): the terminal as it was while
 * stopped, raw again when continued. */
static void on_stop(int sig) {
        int saved = errno;
        restore_terminal();
        handle(sig, SIG_DFL);
        raise(sig);
        errno = saved;
}

static void on_continue(int sig) {
        (void)sig;
        int saved = errno;
        if (term.handled[SIGTSTP])
                handle(SIGTSTP, on_stop);
        if (term.raw_fd >= 0)
                (void)tcsetattr(term.raw_fd, TCSANOW, &term.raw);
        term.resized = 1; /* it may have changed meanwhile */
        wake_relay();
        errno = saved;
}

static void on_resize(int sig) {
        (void)sig;
        int saved = errno;
        term.resized = 1;
        wake_relay();
        errno = saved;
}

static void copy_window_size(void) {
        struct winsize ws;
        if (term.size_fd >= 0 && ioctl(term.size_fd, TIOCGWINSZ, &ws) == 0)
                (void)ioctl(term.master, TIOCSWINSZ, &ws);
}

/* Takes sig unless the process ignores it (nohup: a hangup must not end it now). */
static void take_signal(int sig, void (*fn)(int)) {
        if (sigaction(sig, NULL, &term.old[sig]) < 0 || term.old[sig].sa_handler == SIG_IGN)
                return;
        term.handled[sig] = true;
        handle(sig, fn);
}

static int terminal_begin(int in, int out, int err, lfs_error **error) {
        if (term.active)
                return lfs_fail(error, LFS_BUSY, EBUSY,
                                "another exec with a terminal is running in this process; one at a time");
        term.master = -1; /* until the daemon sends it */
        term.raw_fd = lfs_is_terminal(in) && tcgetattr(in, &term.saved) == 0 ? in : -1;
        term.size_fd = lfs_is_terminal(in)    ? in
                       : lfs_is_terminal(out) ? out
                       : lfs_is_terminal(err) ? err
                                              : -1;
        if (pipe2(term.wake, O_CLOEXEC | O_NONBLOCK) < 0)
                return lfs_fail(error, LFS_FAILED, errno, "pipe: %s", strerror(errno));
        term.resized = 0;
        term.active = true;
        if (term.size_fd >= 0)
                take_signal(SIGWINCH, on_resize);
        if (term.raw_fd < 0)
                return 0;
        /* The handlers first: a signal between the two finds the terminal restorable. */
        for (size_t i = 0; i < ELEMENTSOF(ending_signals); i++)
                take_signal(ending_signals[i], on_ending_signal);
        take_signal(SIGTSTP, on_stop);
        take_signal(SIGCONT, on_continue);
        term.raw = term.saved;
        cfmakeraw(&term.raw);
        (void)tcsetattr(term.raw_fd, TCSANOW, &term.raw);
        return 0;
}

static void terminal_end(void) {
        if (!term.active)
                return;
        restore_terminal();
        for (int sig = 1; sig < NSIG; sig++)
                if (term.handled[sig]) {
                        sigaction(sig, &term.old[sig], NULL);
                        term.handled[sig] = false;
                }
        for (int i = 0; i < 2; i++)
                if (term.wake[i] >= 0)
                        close(TAKE_FD(term.wake[i]));
        term.raw_fd = term.size_fd = term.master = -1;
        term.active = false;
}

/* ---- the streams ---- */

static void close_fd(int *fd) {
        if (*fd >= 0)
                close(TAKE_FD(*fd));
}

static int nonblocking(int fd) {
        int flags = fcntl(fd, F_GETFL);
        return flags < 0 ? -errno : fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ? -errno : 0;
}

/* A pipe: the command gets end[command_side] (blocking, as programs expect), we keep the
 * other, non-blocking. */
static int pipe_for(exec_streams *s, int stream, int *ret_ours, lfs_error **error) {
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return lfs_fail(error, LFS_FAILED, errno, "pipe: %s", strerror(errno));
        bool reads = stream == 0; /* the command reads its stdin */
        s->passed[stream] = s->command_ends[stream] = p[reads ? 0 : 1];
        *ret_ours = p[reads ? 1 : 0];
        return nonblocking(*ret_ours) < 0 ? lfs_fail(error, LFS_FAILED, errno, "fcntl: %s", strerror(errno))
                                          : 0;
}

int exec_streams_open(exec_streams *s, int in, int out, int err, bool tty, lfs_error **error) {
        *s = (exec_streams){ .in = in,
                             .out = out,
                             .err = err,
                             .passed = { -1, -1, -1 },
                             .command_ends = { -1, -1, -1 },
                             .to_command = -1,
                             .from_out = -1,
                             .from_err = -1,
                             .master = -1,
                             .null = -1,
                             .tty = tty };
        s->null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (s->null < 0)
                return lfs_fail(error, LFS_FAILED, errno, "/dev/null: %s", strerror(errno));
        if (tty) {
                /* The terminal comes from the daemon once the command runs (its master:
                 * exec_streams_relay takes it). */
                s->in_open = in >= 0;
                if (in < 0) /* nothing to read: the command reads the end at once */
                        s->pending[s->n_pending++] = END_OF_INPUT;
                int r = terminal_begin(in, out, err, error);
                if (r == 0)
                        s->terminal = true;
                return r;
        }
        int r = pipe_for(s, 1, &s->from_out, error);
        if (r < 0 || (r = pipe_for(s, 2, &s->from_err, error)) < 0)
                return r;
        if (lfs_is_terminal(in)) {
                s->in_open = true;
                return pipe_for(s, 0, &s->to_command, error);
        }
        /* A stdin that cannot be read (none, or a closed one the CLI holds with a path
         * descriptor) is no input: the command reads /dev/null's end. */
        int flags = in >= 0 ? fcntl(in, F_GETFL) : -1;
        s->passed[0] = flags >= 0 && !(flags & O_PATH) ? in : s->null;
        return 0;
}

bool exec_streams_window(const exec_streams *s, struct winsize *ret) {
        return s->terminal && term.size_fd >= 0 && ioctl(term.size_fd, TIOCGWINSZ, ret) == 0;
}

/* The command's terminal, from the daemon: its master is relayed from now on, its window
 * size is the caller's (again: it may have changed since the request). */
static int take_terminal(exec_streams *s, int master) {
        if (nonblocking(master) < 0) {
                close(master);
                return -errno;
        }
        s->master = s->to_command = s->from_out = master;
        term.master = master;
        copy_window_size();
        return 0;
}

/* A frame before the answer: the command's terminal ({"v", "terminal": true} with its
 * master). 1 if frame was that (taken), 0 if it is the answer, or a negative errno (and
 * *err) for a terminal frame without its fd. */
static int terminal_frame(exec_streams *s, lfs_frame_reader *reader, const json_t *frame, lfs_error **err) {
        if (!s->tty || s->master >= 0 || !json_is_true(json_object_get(frame, "terminal")) ||
            json_object_get(frame, "ok") || json_object_get(frame, "error") ||
            lfs_proto_check_version(frame, true, NULL) < 0)
                return 0;
        int master = -1;
        int r = lfs_frame_take_fds(reader, "the frame of the command's terminal", 1, &master, err);
        if (r < 0)
                return r;
        if ((r = take_terminal(s, master)) < 0)
                return lfs_fail(err, LFS_FAILED, -r, "cannot relay the command's terminal: %s",
                                strerror(-r));
        return 1;
}

void exec_streams_sent(exec_streams *s) {
        for (int i = 0; i < 3; i++)
                close_fd(&s->command_ends[i]);
}

/* Copies what is in from to *to (-1: dropped); max: at most that many bytes (SIZE_MAX:
 * until it would block). Returns 0 at the end of input, 1 if more may come. A failed
 * write to *to (a closed reader) drops the rest rather than failing the command. */
static int pump(int from, int *to, size_t max) {
        char buf[65536];
        while (max) {
                ssize_t k = read(from, buf, max < sizeof(buf) ? max : sizeof(buf));
                if (k == 0)
                        return 0;
                if (k < 0)
                        return errno == EINTR ? 1 : errno == EAGAIN ? 1 : 0;
                max -= (size_t)k;
                for (ssize_t off = 0; *to >= 0 && off < k;) {
                        ssize_t w = write(*to, buf + off, (size_t)(k - off));
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w <= 0) {
                                *to = -1;
                                break;
                        }
                        off += w;
                }
        }
        return 1;
}

/* A write to a pipe whose reader is gone raises SIGPIPE, which would end the caller:
 * here it is only EPIPE (the command no longer reads its stdin). */
static ssize_t write_without_sigpipe(int fd, const void *buf, size_t n) {
        sigset_t pipe_set, old, pending;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        sigpending(&pending);
        bool was_pending = sigismember(&pending, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
        ssize_t k = write(fd, buf, n);
        int e = errno;
        if (k < 0 && e == EPIPE && !was_pending) {
                struct timespec none = { 0 };
                sigtimedwait(&pipe_set, NULL, &none);
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        errno = e;
        return k;
}

/* The caller's stdin ended: the command's ends too (with a terminal: ^D, as a person
 * would type it). */
static void end_input(exec_streams *s) {
        s->in_open = false;
        if (s->tty)
                s->pending[s->n_pending++] = END_OF_INPUT;
        else if (!s->n_pending)
                close_fd(&s->to_command);
}

static void read_input(exec_streams *s) {
        ssize_t k = read(s->in, s->pending, sizeof(s->pending));
        if (k > 0)
                s->n_pending = (size_t)k;
        else if (k == 0 || (errno != EINTR && errno != EAGAIN))
                end_input(s); /* also a terminal hung up (EIO) */
}

static void write_input(exec_streams *s) {
        ssize_t k = write_without_sigpipe(s->to_command, s->pending, s->n_pending);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (k <= 0) { /* the command's side is gone: what it did not take is dropped */
                s->n_pending = 0;
                s->in_open = false;
                if (!s->tty)
                        close_fd(&s->to_command);
                return;
        }
        memmove(s->pending, s->pending + k, s->n_pending - (size_t)k);
        s->n_pending -= (size_t)k;
        if (!s->n_pending && !s->in_open && !s->tty)
                close_fd(&s->to_command);
}

/* Takes what the command's terminal still holds of what the command wrote. A poll first:
 * it moves what the kernel has not yet passed to the line discipline (n_tty_poll). */
static void drain_terminal(exec_streams *s, int *to_out) {
        size_t taken = 0;
        for (;;) {
                struct pollfd p = { .fd = s->master, .events = POLLIN };
                int pending = 0;
                if (poll(&p, 1, 0) <= 0 || !(p.revents & POLLIN) ||
                    ioctl(s->master, FIONREAD, &pending) < 0 || pending <= 0 || taken >= PTY_HOLDS_AT_MOST)
                        return;
                taken += (size_t)pending;
                if (pump(s->master, to_out, (size_t)pending) == 0)
                        return;
        }
}

/* The daemon's next frame: what lfs_frame_read gives for the answer; the terminal's frame
 * before it is taken on the way. */
static int read_frame(exec_streams *s, lfs_frame_reader *reader, json_t **ret_answer, lfs_error **err) {
        for (;;) {
                json_t *frame = NULL;
                int got = lfs_frame_read(reader, &frame, err);
                int r = got == 1 ? terminal_frame(s, reader, frame, err) : 0;
                if (r == 0) {
                        if (got == 1)
                                *ret_answer = frame;
                        return got;
                }
                json_decref(frame);
                if (r < 0)
                        return r;
        }
}

int exec_streams_relay(exec_streams *s, int sock, json_t **ret_answer, lfs_error **ret_read_err) {
        int to_out = s->out, to_err = s->err;
        bool err_open = s->from_err >= 0;
        /* The answer is read as it comes, never waited for: the relay goes on meanwhile. */
        int got = 0;
        bool out_ended = false;
        int flags = fcntl(sock, F_GETFL);
        if (flags < 0 || fcntl(sock, F_SETFL, flags | O_NONBLOCK) < 0)
                return 0;
        lfs_frame_reader answer;
        lfs_frame_reader_init(&answer, sock, LFS_FRAME_MAX_ANSWER, s->tty ? 1 : 0);
        for (;;) {
                bool want_in = s->to_command >= 0 && s->in_open && !s->n_pending;
                bool give_in = s->to_command >= 0 && s->n_pending;
                bool out_open = s->from_out >= 0 && !out_ended;
                struct pollfd p[6] = {
                        { .fd = sock, .events = POLLIN },
                        { .fd = out_open ? s->from_out : -1, .events = POLLIN },
                        { .fd = err_open ? s->from_err : -1, .events = POLLIN },
                        { .fd = want_in ? s->in : -1, .events = POLLIN },
                        { .fd = give_in ? s->to_command : -1, .events = POLLOUT },
                        { .fd = s->tty ? term.wake[0] : -1, .events = POLLIN },
                };
                if (poll(p, ELEMENTSOF(p), -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (p[5].revents) {
                        char drained[64];
                        while (read(term.wake[0], drained, sizeof(drained)) > 0)
                                ;
                }
                /* Before what was typed after it: the signal came first. */
                if (s->tty && term.resized) {
                        term.resized = 0;
                        copy_window_size();
                }
                if (p[1].revents)
                        out_ended = pump(s->from_out, &to_out, 65536) == 0;
                if (p[2].revents)
                        err_open = pump(s->from_err, &to_err, 65536) == 1;
                if (p[3].revents)
                        read_input(s);
                if (p[4].revents)
                        write_input(s);
                if (p[0].revents && (got = read_frame(s, &answer, ret_answer, ret_read_err)) != -EAGAIN)
                        break;
        }
        /* The command has ended: what it wrote is in the pipes, or its terminal, now. */
        int pending = 0;
        if (s->tty)
                drain_terminal(s, &to_out);
        else {
                if (s->from_out >= 0 && !out_ended && ioctl(s->from_out, FIONREAD, &pending) == 0)
                        pump(s->from_out, &to_out, (size_t)pending);
                if (err_open && ioctl(s->from_err, FIONREAD, &pending) == 0)
                        pump(s->from_err, &to_err, (size_t)pending);
        }
        lfs_frame_reader_done(&answer);
        return got == -EAGAIN ? 0 : got;
}

void exec_streams_close(exec_streams *s) {
        if (s->terminal)
                terminal_end();
        exec_streams_sent(s);
        if (s->from_out == s->master)
                s->from_out = -1;
        if (s->to_command == s->master)
                s->to_command = -1;
        close_fd(&s->to_command);
        close_fd(&s->from_out);
        close_fd(&s->from_err);
        close_fd(&s->master);
        close_fd(&s->null);
}
