/* SPDX-License-Identifier: MIT */
/* workspace.exec: a command in its own cgroup leaf, as the command identity (SPEC 3). */
#include <fcntl.h>
#include <limits.h>
#include <linux/major.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

#include "daemon.h"
#include "log.h"
#include "codec.h"
#include "json_path.h"
#include "exec_streams.h"
#include "fault.h"
#include "frame.h"
#include "numbers.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

typedef struct str_list {
        char **items;
        size_t n, cap;
} str_list;

static void str_list_add(str_list *l, char *s) {
        GROW(l->items, l->cap, l->n + 2);
        l->items[l->n++] = s;
        l->items[l->n] = NULL;
}

static void str_list_done(str_list *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->items[i]);
        free(l->items);
        *l = (str_list){ 0 };
}

/* Sets KEY=VALUE, replacing an earlier KEY. */
static void env_set(str_list *env, const char *entry) {
        size_t key_len = strcspn(entry, "=");
        for (size_t i = 0; i < env->n; i++)
                if (!strncmp(env->items[i], entry, key_len) && env->items[i][key_len] == '=') {
                        free(env->items[i]);
                        env->items[i] = xstrdup(entry);
                        return;
                }
        str_list_add(env, xstrdup(entry));
}

static const char *env_get(const str_list *env, const char *key) {
        size_t len = strlen(key);
        for (size_t i = 0; i < env->n; i++)
                if (!strncmp(env->items[i], key, len) && env->items[i][len] == '=')
                        return env->items[i] + len + 1;
        return NULL;
}

/* The command's environment: PATH, HOME and TMPDIR of the Sandbox, then the caller's. */
static json_t *build_env(daemon_state *d, json_t *given, str_list *env) {
        _cleanup_free_ char *home = xasprintf("HOME=%s", d->tmp), *tmpdir = xasprintf("TMPDIR=%s", d->tmp);
        env_set(env, "PATH=" DEFAULT_PATH);
        env_set(env, home);
        env_set(env, tmpdir);
        if (given && !json_is_array(given))
                return lfs_proto_errorf(LFS_INVALID_INPUT, "env must be a list of KEY=VALUE strings");
        size_t i;
        json_t *v;
        json_array_foreach(given, i, v) {
                const char *s = json_string_value(v);
                if (!s || !*s || *s == '=' || !strchr(s, '='))
                        return lfs_proto_errorf(
                                LFS_INVALID_INPUT,
                                "environment entry '%s' is not KEY=VALUE; give --env KEY=VALUE",
                                s ? s : "(not a string)");
                env_set(env, s);
        }
        return NULL;
}

/* The directory the command starts in: the Workspace, or cwd below it (relative to the
 * Workspace, or absolute inside it). Symlinks are followed and must stay inside. */
static json_t *resolve_cwd(const workspace *w, const char *cwd, char **ret) {
        _cleanup_free_ char *joined = NULL;
        size_t mlen = strlen(w->mountpoint);
        if (!cwd || !*cwd)
                joined = xstrdup(w->mountpoint);
        else if (cwd[0] == '/')
                joined = xstrdup(cwd);
        else
                joined = xasprintf("%s/%s", w->mountpoint, cwd);
        char real[PATH_MAX];
        struct stat st;
        if (!realpath(joined, real) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
                return lfs_proto_errorf(LFS_INVALID_INPUT,
                                        "cwd '%s' is not a directory in the Workspace of '%s' (%s); give a "
                                        "directory below it",
                                        cwd, w->branch, w->mountpoint);
        if (strncmp(real, w->mountpoint, mlen) || (real[mlen] && real[mlen] != '/'))
                return lfs_proto_errorf(LFS_INVALID_INPUT,
                                        "cwd '%s' leads to %s, outside the Workspace of '%s' (%s); give a "
                                        "directory below it",
                                        cwd, real, w->branch, w->mountpoint);
        *ret = xstrdup(real);
        return NULL;
}

/* Candidates for argv[0], as execvp would try them: itself when it has a '/', else each
 * directory of the command's PATH. */
static void program_paths(const char *name, const char *path_var, str_list *ret) {
        if (strchr(name, '/')) {
                str_list_add(ret, xstrdup(name));
                return;
        }
        const char *p = path_var ? path_var : DEFAULT_PATH;
        while (*p) {
                size_t n = strcspn(p, ":");
                str_list_add(ret, n ? xasprintf("%.*s/%s", (int)n, p, name) : xstrdup(name));
                p += n + (p[n] == ':');
        }
}

static int exit_code(const siginfo_t *si) {
        if (si->si_code == CLD_EXITED)
                return si->si_status;
        return 128 + si->si_status; /* killed or dumped by signal N */
}

/* Waits for the command (on its pidfd); at the timeout the runtime ends every process of
 * it (native: its whole leaf). Returns its exit code as docker run gives it; *ret_status
 * is the wait status (exit code << 8, or the signal). */
static int wait_command(daemon_state *d, const char *name, int pidfd, double timeout, bool *ret_timed_out,
                        int *ret_status) {
        *ret_timed_out = false;
        *ret_status = 0;
        if (timeout > 0) {
                struct pollfd p = { .fd = pidfd, .events = POLLIN };
                struct timespec start, now;
                clock_gettime(CLOCK_MONOTONIC, &start);
                for (;;) {
                        clock_gettime(CLOCK_MONOTONIC, &now);
                        double left = timeout - (double)(now.tv_sec - start.tv_sec) -
                                      (double)(now.tv_nsec - start.tv_nsec) / 1e9;
                        if (left <= 0) {
                                *ret_timed_out = true;
                                d->runtime->end_command(&d->sb, name, 5000);
                                break;
                        }
                        int k = poll(&p, 1, left > INT_MAX / 1000 ? INT_MAX : (int)(left * 1000) + 1);
                        if (k > 0)
                                break;
                        if (k < 0 && errno != EINTR)
                                break;
                }
        }
        siginfo_t si = { 0 };
        while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0)
                if (errno != EINTR)
                        return 126;
        *ret_status = si.si_code == CLD_EXITED ? si.si_status << 8 : si.si_status;
        return *ret_timed_out ? 124 : exit_code(&si);
}

static void close_fds(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

/* With BPF the watcher sees every exit; without it the daemon records its own. */
static bool watching_bpf(daemon_state *d) {
        return d->watcher != NULL;
}

/* A command as the request gives it, checked and resolved. */
typedef struct command {
        str_list argv, env, paths;
        char *dir; /* where it starts */
        /* That directory, opened when it was checked: the command starts in exactly it
         * (no path looked up again), and the open fd keeps the mount busy, so that an
         * unmount racing the start is refused Busy instead of leaving the command in the
         * empty directory under the mount. */
        int dir_fd;
        char *leaf; /* its cgroup */
        unsigned number; /* k of its leaf cmd-<k> */
        bool starting; /* counted in d->starting_commands, listed in d->starting */
        bool tty; /* its streams are a terminal made for it: its controlling terminal */
} command;
#define COMMAND_INIT                                                                                        \
        { .dir_fd = -1 }

static const char *program_of(const command *c) {
        return c->argv.n ? c->argv.items[0] : "";
}

/* "cmd-<k>" */
static const char *leaf_name(const command *c) {
        const char *slash = c->leaf ? strrchr(c->leaf, '/') : NULL;
        return slash ? slash + 1 : "";
}

/* The command is in its leaf (or will never be): teardown need not wait for it. */
static void command_started(daemon_state *d, command *c) {
        if (c->dir_fd >= 0) {
                close(c->dir_fd); /* the child is in it (or never will be) */
                c->dir_fd = -1;
        }
        if (!c->starting)
                return;
        c->starting = false;
        pthread_mutex_lock(&d->lock);
        for (unsigned i = 0; i < d->starting_commands; i++)
                if (d->starting[i] == c->number) {
                        d->starting[i] = d->starting[--d->starting_commands];
                        break;
                }
        pthread_mutex_unlock(&d->lock);
        uint64_t one = 1;
        (void)!write(d->started_efd, &one, sizeof(one));
}

static void command_done(daemon_state *d, command *c) {
        command_started(d, c);
        str_list_done(&c->argv);
        str_list_done(&c->env);
        str_list_done(&c->paths);
        free(c->dir);
        free(c->leaf);
        *c = (command)COMMAND_INIT;
}

/* Checks the request's branch, command, env and cwd and names the command's leaf. Every
 * refusal comes from here, before anything is made. */
static json_t *prepare_command(daemon_state *d, lfs_call call, json_t *req, command *c) {
        _cleanup_error_ lfs_error *e = NULL;
        const char *branch, *cwd;
        if (lfs_proto_arg_string(req, call, "branch", &branch, &e) < 0 ||
            lfs_proto_arg_string(req, call, "cwd", &cwd, &e) < 0)
                return lfs_proto_error_take(TAKE_PTR(e));
        json_t *words = json_object_get(req, "command");
        json_t *refusal = NULL;
        size_t i;
        json_t *v;
        if (!json_is_array(words) || json_array_size(words) == 0)
                return lfs_proto_errorf(LFS_INVALID_INPUT, "give the command to run after '--'");
        json_array_foreach(words, i, v) {
                if (!json_string_value(v))
                        return lfs_proto_errorf(LFS_INVALID_INPUT, "the command's words must be strings");
                str_list_add(&c->argv, xstrdup(json_string_value(v)));
        }
        if ((refusal = build_env(d, json_object_get(req, "env"), &c->env)))
                return refusal;
        pthread_mutex_lock(&d->lock);
        workspace *w = branch ? find_ws(d, branch) : NULL;
        if (d->closing)
                refusal = lfs_proto_errorf(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        else if (!w)
                refusal = not_mounted(d, branch);
        else
                refusal = resolve_cwd(w, cwd, &c->dir);
        if (!refusal)
                lfs_fault_point("exec-cwd-resolved"); /* checked, not yet opened */
        if (!refusal && (c->dir_fd = open(c->dir, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
                refusal = lfs_proto_errorf(LFS_INVALID_INPUT, "cwd %s: %s", c->dir, strerror(errno));
        /* A path component swapped for a symlink since the check could lead the open
         * elsewhere: what was opened must be in the Workspace's own filesystem. */
        struct stat opened;
        if (!refusal && w && (fstat(c->dir_fd, &opened) < 0 || opened.st_dev != w->dev))
                refusal =
                        lfs_proto_errorf(LFS_INVALID_INPUT, "cwd '%s' is no longer in the Workspace of '%s'",
                                         c->dir, w->branch);
        if (!refusal) {
                c->number = ++d->next_command;
                c->leaf = xasprintf("%s/cmd-%u", d->cgroup, c->number);
                /* Teardown waits for it to be in its leaf before it ends the Sandbox's. */
                c->starting = true;
                GROW(d->starting, d->cap_starting, d->starting_commands + 1);
                d->starting[d->starting_commands++] = c->number;
        }
        pthread_mutex_unlock(&d->lock);
        if (!refusal)
                program_paths(program_of(c), env_get(&c->env, "PATH"), &c->paths);
        return refusal;
}

/* The command's leaf exists: the watcher learns its cgroup id, so that its events name it. */
static void leaf_placed(void *userdata, const char *name) {
        daemon_state *d = userdata;
        _cleanup_free_ char *leaf = xasprintf("%s/%s", d->cgroup, name);
        register_leaf(d, leaf);
}

/* Starts the command through the runtime, in a place of its own, with fds as 0, 1, 2. On
 * failure *err says why, the runtime's step of the start that failed named (the daemon's
 * log has it too). */
static int start_command(daemon_state *d, const command *c, const int fds[3], pid_t *ret_pid, int *ret_pidfd,
                         lfs_error **err) {
        /* Every process of the command seen by the watcher that stays; none once closing. */
        if (!await_watcher(d))
                return lfs_fail(err, LFS_FAILED, ESHUTDOWN, "cannot start '%s': sandbox %d is closing",
                                program_of(c), d->number);
        lfs_command_spec spec = {
                .name = leaf_name(c),
                .paths = (const char *const *)c->paths.items,
                .n_paths = c->paths.n,
                .argv = c->argv.items,
                .envp = c->env.items,
                .cwd_fd = c->dir_fd,
                .cwd = c->dir,
                .uid = d->uid,
                .gid = d->gid,
                .fds = { fds[0], fds[1], fds[2] },
                .tty = c->tty,
                .placed = leaf_placed,
                .userdata = d,
                .born_fd = d->started_efd,
        };
        _cleanup_error_ lfs_error *e = NULL;
        int r = d->runtime->spawn(&d->sb, &spec, ret_pid, ret_pidfd, &e);
        if (r < 0) {
                log_line("%s: cannot start '%s': %s", c->leaf, program_of(c), e->message);
                return lfs_fail(err, e->code, r, "cannot start '%s' in sandbox %d: %s", program_of(c),
                                d->number, e->message);
        }
        /* The daemon's own forks are not the watcher's to see: it records them. */
        record_event(d, EVENT_START, *ret_pid, getpid(), 0, c->leaf, program_of(c));
        return r;
}

/* A command never receives the caller's terminal (SPEC 3): the library relays one through
 * a pipe, and none of the three fds passed may be a terminal, nor a directory. A call that
 * asks for a terminal (tty) passes none: the daemon makes it (make_terminal). */
static json_t *check_streams(const int fds[3]) {
        static const char *const names[] = { "stdin", "stdout", "stderr" };
        for (int i = 0; i < 3; i++) {
                /* Nor a directory of the caller's, or a path descriptor: the command could
                 * open what lies beneath it (openat, /proc/self/fd/N/...), outside the
                 * Sandbox's view. */
                struct stat st;
                int flags = fcntl(fds[i], F_GETFL);
                if (flags < 0 || (flags & O_PATH) || fstat(fds[i], &st) < 0 || S_ISDIR(st.st_mode))
                        return lfs_proto_errorf(
                                LFS_INVALID_INPUT,
                                "the %s passed is a directory or a path descriptor: a command never "
                                "receives one, which would reach outside the Sandbox's view; give a file, "
                                "a pipe or /dev/null",
                                names[i]);
                if (lfs_is_terminal(fds[i]))
                        return lfs_proto_errorf(
                                LFS_INVALID_INPUT,
                                "the %s passed is a terminal: a command never receives the caller's "
                                "terminal; relay it through a pipe, or ask for a terminal of the command's "
                                "own (tty)",
                                names[i]);
        }
        return NULL;
}

/* The window size the command's terminal starts with: the request's rows and cols (absent:
 * 0, unknown, as a terminal's size is until someone sets it). */
static json_t *read_window(json_t *req, struct winsize *ret) {
        static const char *const names[] = { "rows", "cols" };
        long long v[2] = { 0, 0 };
        for (int i = 0; i < 2; i++) {
                _cleanup_error_ lfs_error *e = NULL;
                json_t *j = json_object_get(req, names[i]);
                if (j && lfs_json_whole(names[i], j, 0, USHRT_MAX, &v[i], &e) < 0)
                        return lfs_proto_errorf(e->code, "%s (the command's terminal's window size)",
                                                e->message);
        }
        *ret = (struct winsize){ .ws_row = (unsigned short)v[0], .ws_col = (unsigned short)v[1] };
        return NULL;
}

/* A pseudo-terminal for the command, of the devpts its view shows as /dev/pts (the
 * runtime's open_terminal), so that `tty` names it there: the slave is the Sandbox's
 * root's (inside: root's; native: the host's root), mode 0600, so that no other local
 * user, and no command of another Sandbox, can open it by name. The master goes to the
 * client (send_terminal). */
static int make_terminal(daemon_state *d, const struct winsize *window, int *ret_master, int *ret_slave) {
        _cleanup_close_ int master = d->runtime->open_terminal(&d->sb);
        if (master < 0)
                return master;
        int unlock = 0;
        if (ioctl(master, TIOCSPTLCK, &unlock) < 0)
                return -errno;
        _cleanup_close_ int slave = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        uint32_t root = lfs_host_id(&d->sb, 0);
        if (slave < 0 || fchown(slave, root, root) < 0 || fchmod(slave, 0600) < 0 ||
            ioctl(master, TIOCSWINSZ, window) < 0)
                return -errno;
        *ret_master = TAKE_FD(master);
        *ret_slave = TAKE_FD(slave);
        return 0;
}

/* The command started on its terminal: its master goes to the client in a frame before the
 * answer ({"v", "terminal": true} with the fd), and the daemon keeps no copy, so that the
 * terminal hangs up when the client closes it. A client gone meanwhile: the same. */
static void send_terminal(daemon_state *d, int conn_fd, int master) {
        json_t *frame = lfs_proto_stream_item(json_pack("{s:b}", "terminal", true));
        _cleanup_error_ lfs_error *e = NULL;
        if (lfs_frame_write(conn_fd, frame, LFS_FRAME_MAX_ANSWER, &master, 1, false, &e) < 0)
                log_line("sandbox %d: the command's terminal could not be sent: %s", d->number, e->message);
        json_decref(frame);
}

json_t *call_exec(daemon_state *d, json_t *req, int conn_fd, int *fds, size_t n_fds) {
        json_t *timeout_j = json_object_get(req, "timeout");
        double timeout = 0;
        command c = COMMAND_INIT;
        json_t *refusal = NULL;
        struct winsize window = { 0 };
        _cleanup_error_ lfs_error *e = NULL;
        if (lfs_proto_arg_bool(req, LFS_CALL_WORKSPACE_EXEC, "tty", false, &c.tty, &e) < 0)
                refusal = lfs_proto_error_take(TAKE_PTR(e));
        else if (c.tty && n_fds)
                refusal = lfs_proto_errorf(
                        LFS_INVALID_INPUT,
                        "with tty the daemon makes the command's terminal and sends its master back: pass "
                        "no fds (%zu came)",
                        n_fds);
        else if (!c.tty && n_fds != 3)
                refusal = lfs_proto_errorf(LFS_INVALID_INPUT,
                                           "exec needs the caller's stdin, stdout and stderr");
        else if (timeout_j &&
                 lfs_json_seconds("timeout", timeout_j, 0, LFS_MAX_TIMEOUT_SECONDS, &timeout, &e) < 0)
                refusal = lfs_proto_errorf(e->code, "%s", e->message);
        else if (!(refusal = c.tty ? read_window(req, &window) : check_streams(fds)))
                refusal = prepare_command(d, LFS_CALL_WORKSPACE_EXEC, req, &c);
        if (refusal) {
                close_fds(fds, n_fds);
                command_done(d, &c);
                return refusal;
        }
        pthread_mutex_lock(&d->lock);
        d->running_execs++;
        pthread_mutex_unlock(&d->lock);
        pid_t pid = -1;
        int pidfd = -1, master = -1, slave = -1, r = 0;
        int terminal[3];
        if (c.tty && (r = make_terminal(d, &window, &master, &slave)) < 0)
                lfs_fail(&e, LFS_FAILED, r, "cannot make a terminal for '%s' in sandbox %d: %s",
                         program_of(&c), d->number, strerror(-r));
        if (slave >= 0) {
                terminal[0] = terminal[1] = terminal[2] = slave;
                fds = terminal;
                n_fds = 1; /* one fd three times */
        }
        if (r == 0)
                r = start_command(d, &c, fds, &pid, &pidfd, &e);
        command_started(d, &c);
        close_fds(fds, n_fds); /* the command has them now */
        if (r == 0 && c.tty)
                send_terminal(d, conn_fd, master);
        if (master >= 0)
                close(master);
        json_t *result;
        if (r < 0) {
                result = lfs_proto_error_take(TAKE_PTR(e));
        } else {
                bool timed_out;
                int status;
                int code = wait_command(d, leaf_name(&c), pidfd, timeout, &timed_out, &status);
                close(pidfd);
                log_line("exec %s: '%s' (pid %d) exited %d%s", c.leaf, program_of(&c), (int)pid, code,
                         timed_out ? " (its timeout ended it)" : "");
                if (!watching_bpf(d))
                        record_event(d, EVENT_EXIT, pid, getpid(), status, c.leaf, program_of(&c));
                result = lfs_proto_ok(json_pack("{s:i}", "exit", code));
                /* Empty once the command and its children are gone; background processes
                 * keep it until the Sandbox closes. */
                d->runtime->command_done(&d->sb, leaf_name(&c));
        }
        command_done(d, &c);
        pthread_mutex_lock(&d->lock);
        d->running_execs--;
        d->last_activity_ms = lfs_now_ms();
        pthread_cond_broadcast(&d->gone_cond);
        pthread_mutex_unlock(&d->lock);
        wake_main_loop(d);
        return result;
}

/* ---- process.start, process.list, process.kill ---- */

typedef struct waiter {
        daemon_state *d;
        pid_t pid;
        int pidfd;
        char *leaf;
        char *program;
} waiter;

/* Reaps a started process; without BPF, records how it ended. */
static void *wait_started(void *arg) {
        waiter *w = arg;
        bool timed_out;
        int status;
        const char *name = strrchr(w->leaf, '/') ? strrchr(w->leaf, '/') + 1 : w->leaf;
        int code = wait_command(w->d, name, w->pidfd, 0, &timed_out, &status);
        close(w->pidfd);
        log_line("process %d (%s) exited %d", (int)w->pid, w->leaf, code);
        if (!watching_bpf(w->d))
                record_event(w->d, EVENT_EXIT, w->pid, getpid(), status, w->leaf, w->program);
        w->d->runtime->command_done(&w->d->sb, name);
        pthread_mutex_lock(&w->d->lock);
        w->d->waiters--;
        pthread_cond_broadcast(&w->d->gone_cond);
        pthread_mutex_unlock(&w->d->lock);
        free(w->leaf);
        free(w->program);
        free(w);
        return NULL;
}

json_t *call_process_start(daemon_state *d, json_t *req) {
        command c = COMMAND_INIT;
        json_t *refusal = prepare_command(d, LFS_CALL_PROCESS_START, req, &c);
        if (refusal) {
                command_done(d, &c);
                return refusal;
        }
        /* Output goes to a log of its own in the Sandbox's directory. */
        _cleanup_free_ char *logs = xasprintf("%s/processes", d->dir);
        _cleanup_free_ char *log = xasprintf("%s/%s.log", logs, leaf_name(&c));
        mkdir(logs, 0700);
        int fds[3] = { open("/dev/null", O_RDONLY | O_CLOEXEC),
                       open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600), -1 };
        fds[2] = fds[1] >= 0 ? dup(fds[1]) : -1;
        pid_t pid = -1;
        int pidfd = -1, r;
        _cleanup_error_ lfs_error *e = NULL;
        if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0) {
                int errnum = errno;
                r = lfs_fail(&e, LFS_FAILED, errnum,
                             "cannot start '%s' in sandbox %d: its output's log %s: %s", program_of(&c),
                             d->number, log, strerror(errnum));
        } else
                r = start_command(d, &c, fds, &pid, &pidfd, &e);
        command_started(d, &c);
        close_fds(fds, 3);
        if (r < 0) {
                command_done(d, &c);
                return lfs_proto_error_take(TAKE_PTR(e));
        }
        waiter *w = xmalloc(sizeof(*w));
        *w = (waiter){ .d = d,
                       .pid = pid,
                       .pidfd = pidfd,
                       .leaf = xstrdup(c.leaf),
                       .program = xstrdup(program_of(&c)) };
        pthread_mutex_lock(&d->lock);
        d->waiters++;
        pthread_mutex_unlock(&d->lock);
        if (start_detached("lfs-wait", wait_started, w) < 0) {
                close(pidfd);
                free(w->leaf);
                free(w->program);
                free(w);
                pthread_mutex_lock(&d->lock);
                d->waiters--;
                pthread_cond_broadcast(&d->gone_cond);
                pthread_mutex_unlock(&d->lock);
        }
        log_line("process %d started in %s: '%s'", (int)pid, c.leaf, program_of(&c));
        json_t *j = lfs_proto_ok(
                json_pack("{s:i, s:s, s:s}", "pid", (int)pid, "cgroup", leaf_name(&c), "log", log));
        command_done(d, &c);
        return j;
}

/* The command line of pid, its words joined by spaces. */
static char *process_command_line(pid_t pid) {
        char path[64], buf[4096];
        snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (k <= 0)
                return xstrdup("");
        for (ssize_t i = 0; i < k - 1; i++)
                if (!buf[i])
                        buf[i] = ' ';
        buf[k] = 0;
        return xstrdup(buf);
}

static void list_one(void *userdata, pid_t pid, const char *leaf) {
        _cleanup_free_ char *cmdline = process_command_line(pid);
        /* The command line is the process's to write: lossy text, so that bytes that are
         * not UTF-8 cannot hide it from the list (json_pack fails on them). */
        json_array_append_new(userdata, json_pack("{s:i, s:s, s:s, s:o}", "pid", (int)pid, "cgroup", leaf,
                                                  "state", "running", "command", lfs_json_path(cmdline)));
}

/* Every process living in the Sandbox's commands (however it detached: the runtime's
 * list; native reads each command leaf's cgroup.procs), then the last 64 that ended,
 * with their exit status: with BPF every process of the Sandbox, without it the commands
 * the daemon started. */
json_t *call_process_list(daemon_state *d) {
        json_t *out = json_array();
        d->runtime->list(&d->sb, list_one, out);
        recent_exits_json(d, out, 64);
        return lfs_proto_ok(out);
}

/* Ends pid only if it is a process of this Sandbox's commands: the runtime takes a pidfd
 * first, so that a pid reused before the signal is not hit. */
json_t *call_process_kill(daemon_state *d, json_t *req) {
        _cleanup_error_ lfs_error *e = NULL;
        long long v;
        /* Checked whole: a pid cut to 32 bits would name another process. */
        if (lfs_json_whole("pid", json_object_get(req, "pid"), 1, LFS_MAX_PID, &v, &e) < 0)
                return lfs_proto_errorf(e->code, "%s; give the pid of a process of sandbox %d", e->message,
                                        d->number);
        pid_t pid = (pid_t)v;
        int r = d->runtime->signal(&d->sb, pid, SIGKILL);
        if (r == -ESRCH)
                return lfs_proto_errorf(
                        LFS_INVALID_INPUT,
                        "process %d is not a process of sandbox %d; 'layerfs process list %d' shows "
                        "them",
                        (int)pid, d->number, d->number);
        if (r < 0)
                return lfs_proto_errorf(LFS_FAILED, "cannot end process %d: %s", (int)pid, strerror(-r));
        log_line("process %d killed", (int)pid);
        return lfs_proto_done();
}
