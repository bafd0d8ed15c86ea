/* SPDX-License-Identifier: MIT */
/*
 * A Sandbox's daemon seen from the library: which layerfs-daemon runs, starting it
 * detached in the Sandbox's cgroup with its directory, token and socket, waiting until
 * it answers, and waiting for an owner's exit.
 */
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "cgroup.h"
#include "client.h"
#include "config.h" /* LAYERFS_DAEMON_PATH: where make install puts the daemon */
#include "teardown.h"

/* Waits (on a pidfd: no polling) until the record's owner has exited, at most
 * timeout_ms. True when it has. */
bool lfs_wait_owner_gone(const sandbox_record *rec, int timeout_ms) {
        if (!lfs_record_alive(rec))
                return true;
        _cleanup_close_ int fd = (int)syscall(SYS_pidfd_open, rec->pid, 0);
        /* The pidfd is the owner's only if the owner still runs now that it is open. */
        if (fd < 0 || !lfs_record_alive(rec))
                return !lfs_record_alive(rec);
        struct pollfd p = { .fd = fd, .events = POLLIN };
        while (poll(&p, 1, timeout_ms) < 0 && errno == EINTR)
                ;
        return !lfs_record_alive(rec);
}

/* Which layerfs-daemon a Sandbox runs: LAYERFS_DAEMON; else the one beside the running
 * program (the build tree, where the tests run build/layerfs); else where `make install`
 * put it (LAYERFS_DAEMON_PATH, recorded by the build in config.h). Always an absolute
 * path: execve of a bare name runs ./layerfs-daemon from whatever directory the caller
 * is in. Found before anything is made, so that a missing daemon leaves nothing behind. */
int lfs_daemon_path(char **ret_path, lfs_error **err) {
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

static int wait_ready(const sandbox_record *rec, pid_t pid) {
        for (int i = 0; i < 200; i++) {
                json_t *resp = NULL;
                if (lfs_rpc(rec, LFS_CALL_SANDBOX_PING, NULL, &resp, NULL) == 0) {
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

/* The Sandbox's directory (0711: the command identity passes through to mnt/ and tmp/;
 * token and socket are root's) with its token, its cgroup with the leaf "daemon", and the
 * daemon answering on its socket. rec->dir_fd is the directory once made. */
int lfs_start_daemon(lfs_home *home, int base_fd, sandbox_record *rec, const char *daemon, pid_t *ret_pid,
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
void lfs_add_daemon_log(const sandbox_record *rec, lfs_error **err) {
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
