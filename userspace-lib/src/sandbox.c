/* SPDX-License-Identifier: MIT */
/*
 * Sandboxes: numbered per project, one layerfs-daemon each, recorded in <home>/home.db
 * (records.c). The library claims the number in one transaction, makes the Sandbox's
 * cgroup, starts the daemon in its leaf, waits until its control socket answers, and
 * then hands the record to the daemon. Every later call goes to the daemon over its
 * socket with the Sandbox's token, both reached through the Sandbox's directory held
 * open. A Sandbox whose daemon is gone is reclaimed: whoever takes its record over (one
 * compare-and-swap) ends its processes, removes its mounts, cgroups and directory, and
 * deletes the record of that instance last.
 */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "cgroup.h"
#include "config.h" /* LAYERFS_DAEMON_PATH: where make install puts the daemon */
#include "exec_streams.h"
#include "json_path.h"
#include "numbers.h"
#include "platforms.h"
#include "records.h"
#include "store.h"
#include "teardown.h"

#define record_done lfs_record_done
#define record_alive lfs_record_alive

/* ---- the Sandbox's directory ---- */

/* Opens <home>/sandboxes/<project>-<n> beneath the home without following a symlink:
 * a 'sandboxes' swapped for a link to someone else's tree, with a token and a socket of
 * theirs, is refused (PermissionDenied), never talked to. -ENOENT (no error set) when it
 * does not exist. */
static int open_sandbox_dir(lfs_home *home, const sandbox_record *rec, int *ret_fd, lfs_error **err) {
        _cleanup_close_ int base = -1;
        int r = lfs_home_dir(home, "sandboxes", 0711, false, &base, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *name = xasprintf("%s-%d", rec->project, rec->number);
        _cleanup_close_ int fd = lfs_open_beneath(base, name, O_RDONLY | O_DIRECTORY);
        if (fd == -ENOENT)
                return -ENOENT;
        if (fd < 0)
                return lfs_fail(err, fd == -ELOOP || fd == -ENOTDIR ? LFS_PERMISSION_DENIED : LFS_FAILED,
                                -fd, "cannot open %s: %s; LayerFS follows no link inside the home", rec->dir,
                                strerror(-fd));
        struct stat st;
        if (fstat(fd, &st) < 0 || (st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 022))
                return lfs_fail(err, LFS_PERMISSION_DENIED, EPERM,
                                "%s is not a Sandbox's directory of this home (owner uid %u, mode %04o): it "
                                "must be root's and writable by no one else; nothing there was used",
                                rec->dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Everything a Sandbox left: processes in its cgroup (however they detached, whatever
 * FUSE connection of theirs holds them), its mounts, its cgroups, its directory; the
 * record of this instance last, and only when all of that is gone. The caller owns the
 * record (it claimed it, or took it over). When something stays, the record is left
 * to whoever takes it over next (no owner), and the message says what stayed. */
static int remove_remains(lfs_home *home, sqlite3 *db, sandbox_record *rec, lfs_error **err) {
        _cleanup_close_ int base = -1;
        int r = lfs_home_dir(home, "sandboxes", 0711, false, &base, err);
        if (r < 0 && r != -ENOENT) {
                /* A 'sandboxes' that is not the home's: nothing is touched. */
                lfs_record_set_owner(db, rec, 0, "removing", NULL);
                return r;
        }
        _cleanup_free_ char *why = NULL;
        r = rec->cgroup ? lfs_sandbox_end_processes(rec->cgroup, 10000, &why) : 0;
        if (r == 0)
                r = lfs_sandbox_remove(rec->cgroup, rec->dir, &why);
        if (r < 0) {
                lfs_record_set_owner(db, rec, 0, "removing", NULL);
                return lfs_fail(err, LFS_FAILED, -r,
                                "sandbox %d of project '%s' could not be removed completely: %s; its record "
                                "stays so that 'layerfs runtime reclaim' can finish once that is fixed",
                                rec->number, rec->project, why ? why : strerror(-r));
        }
        return lfs_record_delete(db, rec, err);
}

/* Waits (on a pidfd: no polling) until the record's owner has exited, at most
 * timeout_ms. True when it has. */
static bool wait_owner_gone(const sandbox_record *rec, int timeout_ms) {
        if (!record_alive(rec))
                return true;
        _cleanup_close_ int fd = (int)syscall(SYS_pidfd_open, rec->pid, 0);
        /* The pidfd is the owner's only if the owner still runs now that it is open. */
        if (fd < 0 || !record_alive(rec))
                return !record_alive(rec);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        while (poll(&p, 1, timeout_ms) < 0 && errno == EINTR)
                ;
        return !record_alive(rec);
}

/* ---- the daemon process ---- */

/* Which layerfs-daemon a Sandbox runs: LAYERFS_DAEMON; else the one beside the running
 * program (the build tree, where the tests run build/layerfs); else where `make install`
 * put it (LAYERFS_DAEMON_PATH, recorded by the build in config.h). Always an absolute
 * path: execve of a bare name runs ./layerfs-daemon from whatever directory the caller
 * is in. Found before anything is made, so that a missing daemon leaves nothing behind. */
static int daemon_path(char **ret_path, lfs_error **err) {
        const char *env = getenv("LAYERFS_DAEMON");
        if (env && *env) {
                if (env[0] != '/')
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "LAYERFS_DAEMON='%s' is not an absolute path; give the full path of "
                                        "a layerfs-daemon, or unset it to use %s",
                                        env, LAYERFS_DAEMON_PATH);
                *ret_path = xstrdup(env);
                return 0;
        }
        _cleanup_free_ char *beside = NULL;
        char self[PATH_MAX];
        ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (k > 0) {
                self[k] = 0;
                beside = xasprintf("%s/layerfs-daemon", dirname(self));
                if (access(beside, X_OK) == 0) {
                        *ret_path = TAKE_PTR(beside);
                        return 0;
                }
        }
        if (access(LAYERFS_DAEMON_PATH, X_OK) == 0) {
                *ret_path = xstrdup(LAYERFS_DAEMON_PATH);
                return 0;
        }
        return lfs_fail(
                err, LFS_FAILED, ENOENT,
                "no layerfs-daemon to start: none beside this program (%s) and none installed at %s; "
                "install LayerFS ('make install') or set LAYERFS_DAEMON to a daemon's absolute path",
                beside ? beside : "/proc/self/exe unreadable", LAYERFS_DAEMON_PATH);
}

/* Starts the daemon detached (its own session, not our child) in the leaf
 * <cgroup>/daemon; returns its pid. The intermediate child is reaped here. */
static int spawn_daemon(lfs_home *home, const sandbox_record *rec, const char *exe, pid_t *ret_pid,
                        lfs_error **err) {
        _cleanup_free_ char *num = xasprintf("%d", rec->number), *leaf = xasprintf("%s/daemon", rec->cgroup);
        _cleanup_close_ int leaf_fd = lfs_cgroup_open(leaf);
        _cleanup_close_ int procs_fd =
                leaf_fd < 0 ? -1 : openat(leaf_fd, "cgroup.procs", O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        if (procs_fd < 0)
                return lfs_fail(err, LFS_FAILED, leaf_fd < 0 ? -leaf_fd : errno,
                                "cannot open %s/cgroup.procs: %s", leaf,
                                strerror(leaf_fd < 0 ? -leaf_fd : errno));
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "pipe: %s", strerror(errno));
        pid_t child = fork();
        if (child < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                return lfs_fail(err, LFS_FAILED, errno, "fork: %s", strerror(errno));
        }
        if (child == 0) {
                /* Only async-signal-safe calls: the caller may have threads. */
                setsid();
                pid_t grandchild = fork();
                if (grandchild != 0) {
                        (void)!write(pipefd[1], &grandchild, sizeof(grandchild));
                        _exit(grandchild > 0 ? 0 : 1);
                }
                /* Into the Sandbox's cgroup before anything else, so that ending the
                 * cgroup always ends the daemon too. */
                if (write(procs_fd, "0", 1) != 1)
                        _exit(126);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                int out = openat(rec->dir_fd, "daemon.log",
                                 O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (null >= 0)
                        dup2(null, 0);
                if (out >= 0) {
                        dup2(out, 1);
                        dup2(out, 2);
                }
                /* Nothing of the caller's reaches the daemon: a pipe it held open would keep
                 * the caller's reader waiting until the Sandbox closes. */
                close_range(3, ~0U, 0);
                execl(exe, "layerfs-daemon", "--home", home->path, "--project", rec->project, "--sandbox",
                      num, "--dir", rec->dir, "--cgroup", rec->cgroup, "--instance", rec->instance,
                      (char *)NULL);
                dprintf(2, "cannot run %s: %s\n", exe, strerror(errno));
                _exit(127);
        }
        close(pipefd[1]);
        pid_t pid = -1;
        ssize_t k = read(pipefd[0], &pid, sizeof(pid));
        close(pipefd[0]);
        int status;
        waitpid(child, &status, 0);
        if (k != sizeof(pid) || pid <= 0)
                return lfs_fail(err, LFS_FAILED, ECHILD, "could not start %s", exe);
        *ret_pid = pid;
        return 0;
}

/* ---- the control socket ---- */

/* The Sandbox's socket, reached through its directory held open (no path to swap, and
 * no limit of 108 bytes on the home's path). */
static int connect_control(int dir_fd) {
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/control.sock", dir_fd);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        return fd;
}

static char *read_token(int dir_fd) {
        char buf[128] = "";
        int fd = openat(dir_fd, "token", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!f) {
                if (fd >= 0)
                        close(fd);
                return NULL;
        }
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = 0;
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return xstrdup(buf);
}

static lfs_code code_from_name(const char *name) {
        for (int c = LFS_INVALID_INPUT; c <= LFS_FAILED; c++)
                if (name && !strcmp(lfs_code_name((lfs_code)c), name))
                        return (lfs_code)c;
        return LFS_FAILED;
}

static int daemon_gone(const sandbox_record *rec, int errnum, lfs_error **err) {
        return lfs_fail(err, LFS_NO_SUCH_SANDBOX, errnum,
                        "sandbox %d of project '%s' is gone: its daemon died; 'layerfs runtime reclaim' "
                        "(or 'layerfs project list_sandboxes') cleans up after it",
                        rec->number, rec->project);
}

/* Connects and sends req (token added) with fds passed along (SCM_RIGHTS); returns the
 * connected socket. */
static int send_request(const sandbox_record *rec, json_t *req, const int *fds, size_t n_fds,
                        lfs_error **err) {
        _cleanup_free_ char *token = rec->dir_fd >= 0 ? read_token(rec->dir_fd) : NULL;
        _cleanup_close_ int fd = rec->dir_fd >= 0 ? connect_control(rec->dir_fd) : -ENOENT;
        if (fd < 0 || !token) {
                json_decref(req);
                return daemon_gone(rec, fd < 0 ? -fd : ENOENT, err);
        }
        json_object_set_new(req, "token", json_string(token));
        _cleanup_free_ char *text = json_dumps(req, JSON_COMPACT);
        json_decref(req);
        size_t len = strlen(text);
        text[len] = '\n';
        union {
                char buf[CMSG_SPACE(sizeof(int) * 3)];
                struct cmsghdr align;
        } control = { 0 };
        struct iovec iov = { .iov_base = text, .iov_len = len + 1 };
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
        if (n_fds) {
                msg.msg_control = control.buf;
                msg.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
        }
        ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
        if (sent < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot talk to sandbox %d: %s", rec->number,
                                strerror(errno));
        /* The fds went with the first bytes; the rest of a long request follows. */
        for (size_t off = (size_t)sent; off < len + 1;) {
                ssize_t k = send(fd, text + off, len + 1 - off, MSG_NOSIGNAL);
                if (k <= 0)
                        return lfs_fail(err, LFS_FAILED, EIO, "cannot talk to sandbox %d", rec->number);
                off += (size_t)k;
        }
        return TAKE_FD(fd);
}

/* The daemon's answer line: its "ok" result, or its error as ours. */
/* No answer: a daemon that was closing (idle close, another caller's close) took the
 * connection but no longer read it; its teardown removes the Sandbox's directory last.
 * A daemon that died some other way (killed, crashed) leaves the directory, and the
 * call may have done part of its work. */
static int no_answer(const sandbox_record *rec, lfs_error **err) {
        wait_owner_gone(rec, 2000);
        if (!record_alive(rec) && access(rec->dir, F_OK) < 0 && errno == ENOENT)
                return lfs_fail(err, LFS_NO_SUCH_SANDBOX, 0,
                                "sandbox %d of project '%s' closed while the call was on its way; the call "
                                "did nothing",
                                rec->number, rec->project);
        if (!record_alive(rec))
                return lfs_fail(
                        err, LFS_NO_SUCH_SANDBOX, 0,
                        "sandbox %d of project '%s' is gone: its daemon died during the call, which may "
                        "have done part of its work; 'layerfs runtime reclaim' cleans up after it",
                        rec->number, rec->project);
        return lfs_fail(err, LFS_FAILED, EIO,
                        "sandbox %d's daemon gave no answer; see 'layerfs sandbox log %d'", rec->number,
                        rec->number);
}

static int parse_response(const sandbox_record *rec, const char *line, json_t **ret, lfs_error **err) {
        json_t *resp = line ? json_loads(line, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        if (!resp)
                return no_answer(rec, err);
        json_t *error = json_object_get(resp, "error");
        int r = 0;
        if (error) {
                json_t *paths = json_object_get(error, "paths");
                lfs_code code = code_from_name(json_string_value(json_object_get(error, "code")));
                const char *message = json_string_value(json_object_get(error, "message"));
                if (code == LFS_CONFLICT && json_is_array(paths)) {
                        size_t n = json_array_size(paths);
                        char **list = xcalloc(n, sizeof(char *));
                        for (size_t i = 0; i < n; i++)
                                list[i] = xstrdup(json_string_value(json_array_get(paths, i)) ?: "");
                        r = lfs_fail_conflict(err, list, n, "%s", message ? message : "conflict");
                } else {
                        r = lfs_fail(err, code, 0, "%s", message ? message : "failed");
                }
        } else if (ret) {
                *ret = json_incref(json_object_get(resp, "ok"));
        }
        json_decref(resp);
        return r;
}

/* Sends req and returns the "ok" result, or the daemon's error. */
static int rpc(const sandbox_record *rec, json_t *req, json_t **ret, lfs_error **err) {
        int fd = send_request(rec, req, NULL, 0, err);
        if (fd < 0)
                return fd;
        FILE *in = fdopen(fd, "r");
        if (!in) {
                close(fd);
                return lfs_fail(err, LFS_FAILED, errno, "fdopen: %s", strerror(errno));
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t k = getline(&line, &cap, in);
        fclose(in);
        int r = parse_response(rec, k > 0 ? line : NULL, ret, err);
        free(line);
        return r;
}

static int wait_ready(const sandbox_record *rec, pid_t pid) {
        for (int i = 0; i < 200; i++) {
                json_t *resp = NULL;
                if (rpc(rec, json_pack("{s:s}", "call", "sandbox.ping"), &resp, NULL) == 0) {
                        json_decref(resp);
                        return 0;
                }
                if (kill(pid, 0) < 0 && errno == ESRCH)
                        return -ESRCH;
                struct timespec ts = { .tv_nsec = 25 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        return -ETIMEDOUT;
}

/* ---- checks before anything is made ---- */

/* LAYERFS_SANDBOX, the home's default runtime: native (the default) is built. */
static int check_default_runtime(lfs_error **err) {
        const char *v = getenv("LAYERFS_SANDBOX");
        if (!v || !strcmp(v, "native") || !strcmp(v, "docker") || !strcmp(v, "namespaces"))
                return 0;
        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                        "LAYERFS_SANDBOX='%s' is not a runtime; give docker, native or namespaces", v);
}

/* The runtime a linux Sandbox records: native; namespaces is not in this build. */
static int check_linux_runtime(lfs_error **err) {
        const char *v = getenv("LAYERFS_SANDBOX");
        if (v && !strcmp(v, "namespaces"))
                return lfs_fail(
                        err, LFS_UNSUPPORTED, 0,
                        "LAYERFS_SANDBOX=namespaces: the namespaces runtime is not in this build; use "
                        "native (or unset it)");
        return 0;
}

/* LAYERFS_WORKSPACE_MEMORY, for a new Sandbox's daemon: the budget of each Workspace's
 * metadata, a size (4096, 512M, 2G). */
static int check_workspace_memory(lfs_error **err) {
        const char *v = getenv("LAYERFS_WORKSPACE_MEMORY");
        uint64_t bytes;
        return v && *v ? lfs_parse_size("LAYERFS_WORKSPACE_MEMORY", v, &bytes, err) : 0;
}

/* LAYERFS_WATCHER, for a new Sandbox's daemon: bpf, proc or cgroup (unset: bpf where it
 * loads, else cgroup). */
static int check_watcher(lfs_error **err) {
        const char *v = getenv("LAYERFS_WATCHER");
        if (!v || !*v || !strcmp(v, "bpf") || !strcmp(v, "proc") || !strcmp(v, "cgroup"))
                return 0;
        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                        "LAYERFS_WATCHER='%s' is not a watcher; give bpf, proc or cgroup", v);
}

/* Commands run as the command identity in a Workspace below the sandboxes directory, so
 * every directory on the way there must let that identity through. */
static int check_traversable(const char *path, uid_t uid, gid_t gid, lfs_error **err) {
        _cleanup_free_ char *walk = xstrdup(path);
        size_t len = strlen(walk);
        for (size_t i = 1; i <= len; i++) {
                if (walk[i] != '/' && walk[i] != 0)
                        continue;
                char saved = walk[i];
                walk[i] = 0;
                struct stat st;
                if (stat(walk, &st) == 0) {
                        mode_t bit = st.st_uid == uid ? S_IXUSR : st.st_gid == gid ? S_IXGRP : S_IXOTH;
                        if (!(st.st_mode & bit))
                                return lfs_fail(err, LFS_PERMISSION_DENIED, EACCES,
                                                "the command identity %u:%u cannot pass through %s (mode "
                                                "%04o, owner %u:%u), which holds the Sandboxes; "
                                                "'chmod o+x %s' lets it through",
                                                (unsigned)uid, (unsigned)gid, walk,
                                                (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
                                                (unsigned)st.st_gid, walk);
                }
                walk[i] = saved;
        }
        return 0;
}

static int open_project(lfs_home *home, const char *project, char **ret_name, lfs_error **err) {
        lfs_store *s = NULL;
        int r = lfs_store_open(home, project, &s, err);
        if (r < 0)
                return r;
        *ret_name = xstrdup(lfs_store_project(s));
        lfs_store_close(s);
        return 0;
}

/* ---- create ---- */

/* The Sandbox's directory (0711: the command identity passes through to mnt/ and tmp/;
 * token and socket are root's) with its token, its cgroup with the leaf "daemon", and the
 * daemon answering on its socket. rec->dir_fd is the directory once made. */
static int start_daemon(lfs_home *home, int base_fd, sandbox_record *rec, const char *daemon, pid_t *ret_pid,
                        lfs_error **err) {
        _cleanup_free_ char *name = xasprintf("%s-%d", rec->project, rec->number), *why = NULL;
        /* Remains of a Sandbox whose record is gone (deleted by hand): the number is ours
         * now, and so is whatever this home keeps under it. */
        int r = lfs_sandbox_end_processes(rec->cgroup, 10000, &why);
        if (r == 0)
                r = lfs_sandbox_remove(rec->cgroup, rec->dir, &why);
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, -r,
                                "sandbox %d of project '%s' has remains without a record that cannot be "
                                "removed: %s",
                                rec->number, rec->project, why ? why : strerror(-r));
        if (mkdirat(base_fd, name, 0711) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s: %s", rec->dir, strerror(errno));
        rec->dir_fd = lfs_open_beneath(base_fd, name, O_RDONLY | O_DIRECTORY);
        if (rec->dir_fd < 0)
                return lfs_fail(err, LFS_FAILED, -rec->dir_fd, "cannot open %s: %s", rec->dir,
                                strerror(-rec->dir_fd));
        (void)fchmod(rec->dir_fd, 0711); /* whatever the umask */
        unsigned char raw[16];
        char token[33];
        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                return lfs_fail(err, LFS_FAILED, EIO, "cannot get random bytes for the Sandbox's token");
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(token + 2 * i, 3, "%02x", raw[i]);
        _cleanup_close_ int tfd =
                openat(rec->dir_fd, "token", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (tfd < 0 || write(tfd, token, 32) != 32)
                return lfs_fail(err, LFS_FAILED, errno, "cannot write %s/token", rec->dir);
        _cleanup_free_ char *root = xstrdup(rec->cgroup), *leaf = xasprintf("%s/daemon", rec->cgroup);
        if ((r = lfs_cgroup_make(dirname(root))) < 0 || (r = lfs_cgroup_make(rec->cgroup)) < 0 ||
            (r = lfs_cgroup_make(leaf)) < 0)
                return lfs_fail(err, LFS_FAILED, -r, "cannot make the cgroup %s: %s", leaf, strerror(-r));
        if ((r = spawn_daemon(home, rec, daemon, ret_pid, err)) < 0)
                return r;
        if ((r = wait_ready(rec, *ret_pid)) < 0)
                return lfs_fail(err, LFS_FAILED, -r, "sandbox %d's daemon did not become ready (%s)",
                                rec->number, strerror(-r));
        return 0;
}

/* Appends the last lines of the daemon's log to *err's message. */
static void add_daemon_log(const sandbox_record *rec, lfs_error **err) {
        int fd =
                rec->dir_fd >= 0 ? openat(rec->dir_fd, "daemon.log", O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        _cleanup_fclose_ FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!f && fd >= 0)
                close(fd);
        if (!f || !err || !*err)
                return;
        char lines[3][512] = { "", "", "" }, line[512];
        unsigned n = 0;
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = 0;
                snprintf(lines[n++ % 3], sizeof(lines[0]), "%s", line);
        }
        if (!n)
                return;
        char *msg = xasprintf("%s; the daemon's log ended with:", (*err)->message);
        for (unsigned i = n > 3 ? n - 3 : 0; i < n; i++) {
                char *next = xasprintf("%s\n  %s", msg, lines[i % 3]);
                free(msg);
                msg = next;
        }
        free((*err)->message);
        (*err)->message = msg;
}

/* LAYERFS_INJECT_FAILURE=record makes recording the running daemon fail, for the tests
 * of a create that must undo everything. */
static bool injected(const char *what) {
        const char *v = getenv("LAYERFS_INJECT_FAILURE");
        return v && !strcmp(v, what);
}

int lfs_sandbox_create(lfs_home *home, const char *project, const char *image, const char *platform,
                       int *ret_sandbox, lfs_error **err) {
        (void)image; /* ignored for linux Sandboxes (SPEC 5) */
        const lfs_platform *chosen = NULL;
        uid_t uid;
        gid_t gid;
        double idle;
        /* The daemon reads the same settings (the identity, the idle close): refused here,
         * before anything is made. */
        int r = check_default_runtime(err);
        if (r < 0 || (r = lfs_platform_choose(home->path, platform, &chosen, err)) < 0 ||
            (r = check_watcher(err)) < 0 || (r = lfs_command_identity(&uid, &gid, err)) < 0 ||
            (r = lfs_idle_seconds(&idle, err)) < 0 || (r = check_workspace_memory(err)) < 0)
                return r;
        if (chosen->family != LFS_FAMILY_LINUX)
                return lfs_fail(err, LFS_UNSUPPORTED, 0, "platform '%s' cannot be driven by this build",
                                chosen->id);
        if ((r = check_linux_runtime(err)) < 0)
                return r;
        if (geteuid() != 0)
                return lfs_fail(
                        err, LFS_UNSUPPORTED, EPERM,
                        "the linux platform needs root (it mounts FUSE and makes cgroups); run as root");
        _cleanup_free_ char *name = NULL, *cgroup_root = NULL, *daemon = NULL;
        if ((r = open_project(home, project, &name, err)) < 0 ||
            (r = lfs_cgroup_root(&cgroup_root, err)) < 0 || (r = daemon_path(&daemon, err)) < 0)
                return r;
        if ((r = check_traversable(home->path, uid, gid, err)) < 0)
                return r;
        /* Numbers held by dead Sandboxes become free again. */
        lfs_reclaimed *gone = NULL;
        size_t n_gone = 0;
        if (lfs_runtime_reclaim(home, &gone, &n_gone, NULL) == 0)
                lfs_reclaimed_free(gone, n_gone);
        /* The Stores are not the commands' to read: a home from before keeps its
         * projects/ no more open than a new one (docs/security.md). */
        _cleanup_close_ int base = -1, projects = -1;
        if ((r = lfs_home_dir(home, "projects", 0700, true, &projects, err)) < 0 ||
            (r = lfs_home_dir(home, "sandboxes", 0711, true, &base, err)) < 0)
                return r;
        sqlite3 *db = NULL;
        if ((r = lfs_records_open(home, &db, err)) < 0)
                return r;
        sandbox_record rec = { .dir_fd = -1 };
        if ((r = lfs_record_claim(home, db, name, cgroup_root, &rec, err)) < 0) {
                sqlite3_close(db);
                return r;
        }
        pid_t pid = -1;
        r = start_daemon(home, base, &rec, daemon, &pid, err);
        if (r == 0 && injected("record"))
                r = lfs_fail(err, LFS_FAILED, EIO,
                             "cannot record sandbox %d (LAYERFS_INJECT_FAILURE=record)", rec.number);
        else if (r == 0 && (r = lfs_record_set_owner(db, &rec, pid, "running", err)) == -ESTALE)
                r = lfs_fail(err, LFS_FAILED, ESTALE,
                             "the record of sandbox %d of project '%s' changed while it was being created",
                             rec.number, rec.project);
        if (r < 0) {
                /* Nothing of a failed create stays: ending the cgroup ends the daemon (it
                 * started in it); then the mounts, the directory and the record go, the
                 * daemon's log with them: its last words go into the error. */
                add_daemon_log(&rec, err);
                remove_remains(home, db, &rec, NULL);
        } else {
                *ret_sandbox = rec.number;
        }
        sqlite3_close(db);
        record_done(&rec);
        return r;
}

/* ---- opening, closing, reclaiming ---- */

/* Opens the checked record of project's Sandbox number, and its directory if it is
 * there (rec->dir_fd, else -1). */
static int sandbox_open(lfs_home *home, const char *project, int number, sandbox_record *ret,
                        lfs_error **err) {
        _cleanup_free_ char *name = NULL;
        int r = open_project(home, project, &name, err);
        if (r < 0)
                return r;
        if (number <= 0)
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "sandbox number %d is not valid: give 1 or more",
                                number);
        sqlite3 *db = NULL;
        if ((r = lfs_records_open(home, &db, err)) < 0)
                return r;
        r = lfs_record_read(home, db, name, number, ret, err);
        sqlite3_close(db);
        if (r == 0 && (r = open_sandbox_dir(home, ret, &ret->dir_fd, err)) == -ENOENT)
                r = 0;
        if (r < 0 && ret->project)
                record_done(ret);
        return r;
}

/* Opens the record of a Sandbox whose daemon must be alive to answer. */
static int sandbox_open_live(lfs_home *home, const char *project, int number, sandbox_record *ret,
                             lfs_error **err) {
        int r = sandbox_open(home, project, number, ret, err);
        if (r < 0)
                return r;
        const lfs_platform *p = lfs_platform_find(ret->platform);
        if (!p || p->family != LFS_FAMILY_LINUX) {
                /* Calls follow the record's platform, never the caller's default. */
                r = lfs_fail(
                        err, LFS_UNSUPPORTED, 0,
                        "sandbox %d of project '%s' runs on platform '%s', which this build cannot drive",
                        ret->number, ret->project, ret->platform ? ret->platform : "?");
                record_done(ret);
        } else if (!strcmp(ret->state ? ret->state : "", "removing")) {
                r = lfs_fail(err, LFS_NO_SUCH_SANDBOX, ESRCH,
                             "sandbox %d of project '%s' is being removed; the call did nothing",
                             ret->number, ret->project);
                record_done(ret);
        } else if (!strcmp(ret->state ? ret->state : "", "starting") || !record_alive(ret) ||
                   ret->dir_fd < 0) {
                r = daemon_gone(ret, ESRCH, err);
                record_done(ret);
        }
        return r;
}

static bool same_instance(const sandbox_record *a, const sandbox_record *b) {
        return a->instance && b->instance ? !strcmp(a->instance, b->instance) : !a->instance && !b->instance;
}

/* Once the owner the caller saw is gone: whatever that instance of the Sandbox left is
 * removed, by the caller unless someone else already took it over. A record that is gone,
 * or names a later instance with the same number, means there is nothing left to do. */
static int finish_removal(lfs_home *home, const sandbox_record *seen, lfs_error **err) {
        sqlite3 *db = NULL;
        int r = lfs_records_open(home, &db, err);
        if (r < 0)
                return r;
        sandbox_record now = { .dir_fd = -1 };
        lfs_error *why = NULL;
        r = lfs_record_read(home, db, seen->project, seen->number, &now, &why);
        if (r < 0 && why && why->code == LFS_NO_SUCH_SANDBOX)
                r = 0; /* removed: by its daemon, or by whoever took it over */
        else if (r < 0 && err)
                *err = TAKE_PTR(why);
        else if (r == 0 && same_instance(&now, seen)) {
                if (record_alive(&now) ||
                    (r = lfs_record_set_owner(db, &now, getpid(), "removing", err)) == -ESTALE)
                        r = lfs_fail(err, LFS_BUSY, EBUSY,
                                     "sandbox %d of project '%s' is being %s by process %d; try again in a "
                                     "moment",
                                     now.number, now.project,
                                     !strcmp(now.state, "starting") ? "created" : "removed", (int)now.pid);
                else if (r == 0)
                        r = remove_remains(home, db, &now, err);
        }
        lfs_error_free(why);
        record_done(&now);
        sqlite3_close(db);
        return r;
}

/* How long a close waits for the daemon it asked, or for another caller's removal. */
#define CLOSE_WAIT_MS 30000

int lfs_sandbox_close(lfs_home *home, const char *project, int sandbox, int force, lfs_error **err) {
        sandbox_record rec = { .dir_fd = -1 };
        int r = sandbox_open(home, project, sandbox, &rec, err);
        if (r < 0)
                return r;
        bool alive = record_alive(&rec);
        if (alive && !strcmp(rec.state, "starting")) {
                record_done(&rec);
                return lfs_fail(err, LFS_BUSY, EBUSY,
                                "sandbox %d of project '%s' is still being created; try again in a moment",
                                sandbox, project ? project : "");
        }
        if (alive && !strcmp(rec.state, "running")) {
                json_t *req = json_pack("{s:s, s:b}", "call", "sandbox.close", "force", force);
                lfs_error *refusal = NULL;
                r = rpc(&rec, req, NULL, &refusal);
                if (r < 0 && refusal->code != LFS_NO_SUCH_SANDBOX && refusal->code != LFS_FAILED) {
                        /* Dirty: nothing was removed. */
                        if (err)
                                *err = refusal;
                        else
                                lfs_error_free(refusal);
                        record_done(&rec);
                        return r;
                }
                /* The daemon tore the Sandbox down (or could not finish: then it left the
                 * record to be taken over) and exits. */
                lfs_error_free(refusal);
        }
        if (!wait_owner_gone(&rec, CLOSE_WAIT_MS)) {
                r = lfs_fail(
                        err, LFS_BUSY, EBUSY,
                        "sandbox %d of project '%s': process %d, which %s it, did not finish within %d s; "
                        "see 'layerfs sandbox log %d'",
                        sandbox, rec.project, (int)rec.pid,
                        !strcmp(rec.state, "running") ? "was asked to close" : "is removing",
                        CLOSE_WAIT_MS / 1000, sandbox);
                record_done(&rec);
                return r;
        }
        r = finish_removal(home, &rec, err);
        record_done(&rec);
        return r;
}

void lfs_reclaimed_free(lfs_reclaimed *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].project);
                free(items[i].dir);
                free(items[i].left_alone);
        }
        free(items);
}

typedef struct reclaim_state {
        lfs_home *home;
        sqlite3 *db;
        lfs_reclaimed *out;
        size_t n, cap;
} reclaim_state;

static void reclaimed_add(reclaim_state *s, const char *project, long long number, const char *dir,
                          const char *left_alone) {
        GROW(s->out, s->cap, s->n + 1);
        s->out[s->n++] = (lfs_reclaimed){ .project = xstrdup(project),
                                          .sandbox = number > INT_MAX || number < INT_MIN ? 0 : (int)number,
                                          .dir = xstrdup(dir ? dir : ""),
                                          .left_alone = left_alone ? xstrdup(left_alone) : NULL };
}

static void reclaim_one(void *userdata, sandbox_record *rec, const char *project, long long number,
                        lfs_error *why) {
        reclaim_state *s = userdata;
        if (!rec) {
                reclaimed_add(s, project, number, NULL, why ? why->message : "refused");
                return;
        }
        /* Alive (also a create in progress), or of a platform this build cannot tear
         * down: left alone. Taken over (one compare-and-swap on the dead owner it was read
         * with) before anything is touched, so that two reclaims, or a reclaim and a
         * close, never both act on it, nor on a later Sandbox with its number. */
        const lfs_platform *p = lfs_platform_find(rec->platform);
        lfs_error *e = NULL;
        if (!p || p->family != LFS_FAMILY_LINUX || record_alive(rec) ||
            lfs_record_set_owner(s->db, rec, getpid(), "removing", &e) < 0) {
                lfs_error_free(e);
                return;
        }
        if (remove_remains(s->home, s->db, rec, &e) < 0)
                reclaimed_add(s, rec->project, rec->number, rec->dir, e ? e->message : "failed");
        else
                reclaimed_add(s, rec->project, rec->number, rec->dir, NULL);
        lfs_error_free(e);
}

int lfs_runtime_reclaim(lfs_home *home, lfs_reclaimed **ret, size_t *ret_n, lfs_error **err) {
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        *ret = NULL;
        *ret_n = 0;
        if (access(path, F_OK) < 0)
                return 0;
        /* A 'sandboxes' that is not the home's own: nothing below it is touched. */
        _cleanup_close_ int base = -1;
        int r = lfs_home_dir(home, "sandboxes", 0711, false, &base, err);
        if (r < 0 && r != -ENOENT)
                return r;
        reclaim_state s = { .home = home };
        if ((r = lfs_records_open(home, &s.db, err)) < 0)
                return r;
        r = lfs_records_each(home, s.db, reclaim_one, &s, err);
        sqlite3_close(s.db);
        if (r < 0) {
                lfs_reclaimed_free(s.out, s.n);
                return r;
        }
        *ret = s.out;
        *ret_n = s.n;
        return 0;
}

typedef struct live_state {
        const char *project; /* NULL: every project */
        lfs_sandbox_info *out;
        size_t n, cap;
} live_state;

/* A running Sandbox whose daemon is alive: what list_sandboxes lists and project list
 * counts. Records refused, dead or being removed are not Sandboxes to use. */
static void live_one(void *userdata, sandbox_record *rec, const char *project, long long number,
                     lfs_error *why) {
        (void)project, (void)number, (void)why;
        live_state *s = userdata;
        if (!rec || strcmp(rec->state, "running") || !record_alive(rec) ||
            (s->project && strcmp(s->project, rec->project)))
                return;
        GROW(s->out, s->cap, s->n + 1);
        s->out[s->n++] = (lfs_sandbox_info){ .project = xstrdup(rec->project),
                                             .sandbox = rec->number,
                                             .platform = xstrdup(rec->platform) };
}

static int live_sandboxes(lfs_home *home, live_state *s, lfs_error **err) {
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        if (access(path, F_OK) < 0)
                return 0;
        sqlite3 *db = NULL;
        int r = lfs_records_open(home, &db, err);
        if (r == 0)
                r = lfs_records_each(home, db, live_one, s, err);
        sqlite3_close(db);
        return r;
}

size_t lfs_count_sandboxes(lfs_home *home, const char *project) {
        live_state s = { .project = project };
        live_sandboxes(home, &s, NULL);
        lfs_sandbox_info_free(s.out, s.n);
        return s.n;
}

int lfs_sandbox_list(lfs_home *home, lfs_sandbox_info **ret, size_t *ret_n, lfs_error **err) {
        /* What is listed is alive: Sandboxes whose daemon died are reclaimed first. */
        lfs_reclaimed *gone = NULL;
        size_t n_gone = 0;
        if (lfs_runtime_reclaim(home, &gone, &n_gone, NULL) == 0)
                lfs_reclaimed_free(gone, n_gone);
        live_state s = { 0 };
        int r = live_sandboxes(home, &s, err);
        if (r < 0) {
                lfs_sandbox_info_free(s.out, s.n);
                return r;
        }
        for (size_t i = 0; i < s.n; i++) {
                lfs_workspace_info *ws = NULL;
                size_t k = 0;
                if (lfs_sandbox_list_workspaces(home, s.out[i].project, s.out[i].sandbox, &ws, &k, NULL) ==
                    0) {
                        s.out[i].workspaces = k;
                        lfs_workspace_info_free(ws, k);
                }
        }
        *ret = s.out;
        *ret_n = s.n;
        return 0;
}

void lfs_sandbox_info_free(lfs_sandbox_info *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].project);
                free(items[i].platform);
                free(items[i].image);
        }
        free(items);
}

void lfs_workspace_info_free(lfs_workspace_info *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].branch);
                free(items[i].path);
                free(items[i].platform);
        }
        free(items);
}

/* Opens the Sandbox and sends call with the given fields. */
static int sandbox_call(lfs_home *home, const char *project, int sandbox, json_t *req, json_t **ret,
                        lfs_error **err) {
        sandbox_record rec = { .dir_fd = -1 };
        int r = sandbox_open_live(home, project, sandbox, &rec, err);
        if (r < 0) {
                json_decref(req);
                return r;
        }
        r = rpc(&rec, req, ret, err);
        record_done(&rec);
        return r;
}

int lfs_sandbox_list_workspaces(lfs_home *home, const char *project, int sandbox, lfs_workspace_info **ret,
                                size_t *ret_n, lfs_error **err) {
        json_t *result = NULL;
        int r = sandbox_call(home, project, sandbox, json_pack("{s:s}", "call", "sandbox.list_workspaces"),
                             &result, err);
        if (r < 0)
                return r;
        size_t n = json_array_size(result);
        lfs_workspace_info *out = xcalloc(n, sizeof(*out));
        for (size_t i = 0; i < n; i++) {
                json_t *w = json_array_get(result, i);
                out[i].branch = xstrdup(json_string_value(json_object_get(w, "branch")) ?: "");
                out[i].path = xstrdup(json_string_value(json_object_get(w, "path")) ?: "");
                out[i].dirty = json_is_true(json_object_get(w, "dirty"));
                out[i].platform = xstrdup(json_string_value(json_object_get(w, "platform")) ?: "linux");
        }
        json_decref(result);
        *ret = out;
        *ret_n = n;
        return 0;
}

int lfs_workspace_mount(lfs_home *home, const char *project, int sandbox, const char *branch,
                        char **ret_path, lfs_error **err) {
        json_t *result = NULL;
        int r = lfs_check_branch_name(branch, err);
        if (r < 0 || (r = sandbox_call(home, project, sandbox,
                                       json_pack("{s:s, s:s}", "call", "workspace.mount", "branch", branch),
                                       &result, err)) < 0)
                return r;
        *ret_path = xstrdup(json_string_value(json_object_get(result, "path")) ?: "");
        json_decref(result);
        return 0;
}

int lfs_workspace_status(lfs_home *home, const char *project, int sandbox, const char *branch,
                         lfs_change **ret_changes, size_t *ret_n, lfs_error **err) {
        json_t *result = NULL;
        int r = sandbox_call(home, project, sandbox,
                             json_pack("{s:s, s:s}", "call", "workspace.status", "branch", branch), &result,
                             err);
        if (r < 0)
                return r;
        size_t n = json_array_size(result);
        lfs_change *out = xcalloc(n, sizeof(*out));
        for (size_t i = 0; i < n; i++) {
                json_t *c = json_array_get(result, i);
                const char *kind = json_string_value(json_object_get(c, "change")) ?: "";
                out[i].path = lfs_json_get_path(c, "path") ?: xstrdup("");
                out[i].kind = !strcmp(kind, "added")     ? LFS_ADDED
                              : !strcmp(kind, "deleted") ? LFS_DELETED
                                                         : LFS_MODIFIED;
        }
        json_decref(result);
        *ret_changes = out;
        *ret_n = n;
        return 0;
}

int lfs_workspace_commit(lfs_home *home, const char *project, int sandbox, const char *branch,
                         const char *message, lfs_id *ret_commit, int *ret_merged, lfs_error **err) {
        if (!message || !*message)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "a commit needs a message; give one with -m MESSAGE");
        if (!lfs_is_utf8(message))
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the commit message is not UTF-8 text");
        json_t *result = NULL;
        int r = sandbox_call(home, project, sandbox,
                             json_pack("{s:s, s:s, s:s}", "call", "workspace.commit", "branch", branch,
                                       "message", message),
                             &result, err);
        if (r < 0)
                return r;
        r = lfs_id_from_hex(json_string_value(json_object_get(result, "commit")) ?: "", ret_commit);
        if (ret_merged)
                *ret_merged = json_is_true(json_object_get(result, "merged"));
        json_decref(result);
        return r < 0 ? lfs_fail(err, LFS_FAILED, EIO, "the daemon's answer had no commit") : 0;
}

int lfs_workspace_unmount(lfs_home *home, const char *project, int sandbox, const char *branch, int discard,
                          lfs_error **err) {
        return sandbox_call(home, project, sandbox,
                            json_pack("{s:s, s:s, s:b}", "call", "workspace.unmount", "branch", branch,
                                      "discard", discard),
                            NULL, err);
}

/* Appends the contents of dir_fd/name to *buf (missing is fine). */
static void append_file(int dir_fd, const char *name, char **buf, size_t *len) {
        int fd = dir_fd >= 0 ? openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!f) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        char chunk[65536];
        size_t k;
        while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0) {
                *buf = xrealloc(*buf, *len + k + 1);
                memcpy(*buf + *len, chunk, k);
                *len += k;
                (*buf)[*len] = 0;
        }
        fclose(f);
}

int lfs_sandbox_log(lfs_home *home, const char *project, int sandbox, size_t lines, char **ret_text,
                    lfs_error **err) {
        sandbox_record rec = { .dir_fd = -1 };
        int r = sandbox_open(home, project, sandbox, &rec, err);
        if (r < 0)
                return r;
        /* The rotated part first: the tail may start there. */
        char *text = xstrdup("");
        size_t len = 0;
        append_file(rec.dir_fd, "daemon.log.1", &text, &len);
        append_file(rec.dir_fd, "daemon.log", &text, &len);
        record_done(&rec);
        if (!lines)
                lines = 100;
        size_t seen = 0;
        char *start = text + len;
        if (len && text[len - 1] == '\n')
                start--;
        while (start > text && seen < lines) {
                start--;
                if (*start == '\n' && ++seen == lines) {
                        start++;
                        break;
                }
        }
        *ret_text = xstrdup(start);
        free(text);
        return 0;
}

/* ---- exec ---- */

static json_t *exec_request(const char *branch, const char *const *argv, size_t n_argv,
                            const lfs_exec_options *o) {
        json_t *command = json_array(), *env = json_array();
        for (size_t i = 0; i < n_argv; i++)
                json_array_append_new(command, json_string(argv[i]));
        for (size_t i = 0; o && i < o->n_env; i++)
                json_array_append_new(env, json_string(o->env[i]));
        json_t *req = json_pack("{s:s, s:s, s:o, s:o}", "call", "workspace.exec", "branch", branch,
                                "command", command, "env", env);
        if (o && o->tty) {
                /* The command's terminal is like ours; a --env TERM=... given after it wins. */
                const char *term = getenv("TERM");
                if (term && *term && lfs_is_utf8(term))
                        json_array_insert_new(env, 0, json_sprintf("TERM=%s", term));
                json_object_set_new(req, "tty", json_true());
        }
        if (o && o->cwd)
                json_object_set_new(req, "cwd", json_string(o->cwd));
        if (o && o->timeout > 0)
                json_object_set_new(req, "timeout", json_real(o->timeout));
        return req;
}

static int check_exec_input(const char *const *argv, size_t n_argv, const lfs_exec_options *o,
                            lfs_error **err) {
        if (!n_argv || !argv[0] || !*argv[0])
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "give the command to run after '--'");
        for (size_t i = 0; i < n_argv; i++)
                if (!argv[i] || !lfs_is_utf8(argv[i]))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "word %zu of the command is not UTF-8 text", i + 1);
        for (size_t i = 0; o && i < o->n_env; i++) {
                const char *e = o->env[i];
                if (!e || !*e || *e == '=' || !strchr(e, '='))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "environment entry '%s' is not KEY=VALUE; give --env KEY=VALUE",
                                        e ? e : "");
                if (!lfs_is_utf8(e))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0, "environment entry %zu is not UTF-8 text",
                                        i + 1);
        }
        if (o && o->cwd && !lfs_is_utf8(o->cwd))
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the cwd is not UTF-8 text");
        /* Also NaN and infinity, which JSON cannot carry. */
        if (o && !(o->timeout >= 0 && o->timeout <= LFS_MAX_TIMEOUT_SECONDS))
                return lfs_fail(
                        err, LFS_INVALID_INPUT, 0,
                        "timeout %g is out of range: give a number of seconds from 0 to %.0f (0: none)",
                        o->timeout, LFS_MAX_TIMEOUT_SECONDS);
        return 0;
}

int lfs_workspace_exec(lfs_home *home, const char *project, int sandbox, const char *branch,
                       const char *const *argv, size_t n_argv, const lfs_exec_options *options,
                       int *ret_exit, lfs_error **err) {
        int r = lfs_check_branch_name(branch, err);
        if (r < 0 || (r = check_exec_input(argv, n_argv, options, err)) < 0)
                return r;
        sandbox_record rec = { .dir_fd = -1 };
        if ((r = sandbox_open_live(home, project, sandbox, &rec, err)) < 0)
                return r;
        /* The command writes into pipes of ours (or its terminal); we copy while it runs.
         * When it ends we take what it wrote and stop: processes it left in the background
         * may hold them for as long as the Sandbox lives, and must not keep the caller
         * waiting, nor read what the caller's terminal gets afterwards. */
        exec_streams streams;
        int in = options ? options->stdin_fd : -1, out = options ? options->stdout_fd : -1,
            errfd = options ? options->stderr_fd : -1;
        char *line = NULL;
        if ((r = exec_streams_open(&streams, in, out, errfd, options && options->tty, err)) < 0)
                goto done;
        int sock = send_request(&rec, exec_request(branch, argv, n_argv, options), streams.passed, 3, err);
        exec_streams_sent(&streams);
        if (sock < 0) {
                r = sock;
                goto done;
        }
        line = exec_streams_relay(&streams, sock);
        close(sock);
        json_t *result = NULL;
        r = parse_response(&rec, line, &result, err);
        free(line);
        if (r == 0) {
                long long code;
                if (lfs_json_whole("exit status", json_object_get(result, "exit"), 0, 255, &code, NULL) < 0)
                        r = lfs_fail(err, LFS_FAILED, EIO, "sandbox %d's answer had no exit status",
                                     sandbox);
                else
                        *ret_exit = (int)code;
        }
        json_decref(result);
done:
        exec_streams_close(&streams);
        record_done(&rec);
        return r;
}

/* ---- background processes ---- */

int lfs_process_start(lfs_home *home, const char *project, int sandbox, const char *branch,
                      const char *const *argv, size_t n_argv, const lfs_exec_options *options, int *ret_pid,
                      char **ret_log, lfs_error **err) {
        int r = lfs_check_branch_name(branch, err);
        if (r < 0 || (r = check_exec_input(argv, n_argv, options, err)) < 0)
                return r;
        if (options && options->tty)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "a background process has no terminal: its output goes to its log");
        json_t *req = exec_request(branch, argv, n_argv, options);
        json_object_set_new(req, "call", json_string("process.start"));
        json_object_del(req, "timeout");
        json_t *result = NULL;
        if ((r = sandbox_call(home, project, sandbox, req, &result, err)) < 0)
                return r;
        long long pid;
        if (lfs_json_whole("pid", json_object_get(result, "pid"), 1, LFS_MAX_PID, &pid, NULL) < 0) {
                json_decref(result);
                return lfs_fail(err, LFS_FAILED, EIO, "sandbox %d's answer had no pid", sandbox);
        }
        *ret_pid = (int)pid;
        if (ret_log)
                *ret_log = xstrdup(json_string_value(json_object_get(result, "log")) ?: "");
        json_decref(result);
        return 0;
}

int lfs_process_list(lfs_home *home, const char *project, int sandbox, lfs_process_info **ret, size_t *ret_n,
                     lfs_error **err) {
        json_t *result = NULL;
        int r = sandbox_call(home, project, sandbox, json_pack("{s:s}", "call", "process.list"), &result,
                             err);
        if (r < 0)
                return r;
        size_t n = json_array_size(result);
        lfs_process_info *out = xcalloc(n ? n : 1, sizeof(*out));
        for (size_t i = 0; i < n; i++) {
                json_t *p = json_array_get(result, i);
                out[i] = (lfs_process_info){
                        .pid = (int)json_integer_value(json_object_get(p, "pid")),
                        .cgroup = xstrdup(json_string_value(json_object_get(p, "cgroup")) ?: ""),
                        .command = xstrdup(json_string_value(json_object_get(p, "command")) ?: ""),
                        .running = !strcmp(json_string_value(json_object_get(p, "state")) ?: "", "running"),
                        .exit = (int)json_integer_value(json_object_get(p, "exit")),
                };
        }
        json_decref(result);
        *ret = out;
        *ret_n = n;
        return 0;
}

void lfs_process_info_free(lfs_process_info *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].cgroup);
                free(items[i].command);
        }
        free(items);
}

int lfs_process_kill(lfs_home *home, const char *project, int sandbox, int pid, lfs_error **err) {
        if (pid <= 0)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "pid %d is out of range: give a whole number from 1 to %d", pid,
                                LFS_MAX_PID);
        return sandbox_call(home, project, sandbox,
                            json_pack("{s:s, s:i}", "call", "process.kill", "pid", pid), NULL, err);
}

/* ---- events ---- */

int lfs_sandbox_events(lfs_home *home, const char *project, int sandbox, int follow, lfs_event_fn fn,
                       void *userdata, char **ret_watcher, lfs_error **err) {
        json_t *req = json_pack("{s:s, s:b}", "call", "sandbox.events", "follow", follow);
        if (!follow) {
                json_t *result = NULL;
                int r = sandbox_call(home, project, sandbox, req, &result, err);
                if (r < 0)
                        return r;
                if (ret_watcher)
                        *ret_watcher = xstrdup(json_string_value(json_object_get(result, "watcher")) ?: "");
                size_t i;
                json_t *e;
                json_array_foreach(json_object_get(result, "events"), i, e) {
                        char *text = json_dumps(e, JSON_COMPACT);
                        int stop = fn(userdata, text);
                        free(text);
                        if (stop)
                                break;
                }
                json_decref(result);
                return 0;
        }
        sandbox_record rec = { .dir_fd = -1 };
        int r = sandbox_open_live(home, project, sandbox, &rec, err);
        if (r < 0) {
                json_decref(req);
                return r;
        }
        int fd = send_request(&rec, req, NULL, 0, err);
        if (fd < 0) {
                record_done(&rec);
                return fd;
        }
        FILE *in = fdopen(fd, "r");
        char *line = NULL;
        size_t cap = 0;
        while (in && getline(&line, &cap, in) > 0) {
                line[strcspn(line, "\n")] = 0;
                if (!strncmp(line, "{\"error\"", 8)) { /* refused */
                        r = parse_response(&rec, line, NULL, err);
                        break;
                }
                if (fn(userdata, line))
                        break;
        }
        free(line);
        if (in)
                fclose(in);
        else
                close(fd);
        record_done(&rec);
        return r;
}
