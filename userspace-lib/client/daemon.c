/* SPDX-License-Identifier: MIT */
/*
 * A Sandbox's daemon seen from the library: which layerfs-daemon runs, its directory and
 * token, its start (by the platform's runtime, which returns once the daemon says it
 * listens), and waiting for an owner's exit.
 */
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "client.h"
#include "config.h" /* LAYERFS_DAEMON_PATH: where make install puts the daemon */

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

/* The Sandbox's directory (0711: the command identity passes through to mnt/ and tmp/;
 * token and socket are root's) with its token, then its place with the daemon in it (the
 * runtime's create), answering on its socket. rec->dir_fd is the directory once made. */
int lfs_start_daemon(lfs_home *home, int base_fd, const lfs_platform *platform, sandbox_record *rec,
                     const char *daemon, int id_hold, pid_t *ret_pid, lfs_error **err) {
        _cleanup_free_ char *name = xasprintf("%s-%d", rec->project, rec->number), *why = NULL;
        lfs_sandbox_ref sb;
        const lfs_runtime *runtime = lfs_record_runtime(home, rec, NULL, &sb);
        /* Remains of a Sandbox whose record is gone (deleted by hand): the number is ours
         * now, and so is whatever this home keeps under it. */
        int r = runtime->reclaim(&sb, &why);
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
        /* The daemon writes a byte to its --ready-fd once its socket listens: the
         * runtime's create waits for that (or the daemon's exit), never polls. */
        _cleanup_free_ char *num = xasprintf("%d", rec->number),
                            *ready = xasprintf("%d", LFS_DAEMON_READY_FD),
                            *id_base = xasprintf("%u", (unsigned)rec->id_base);
        _cleanup_free_ char *disk =
                rec->limits.disk ? xasprintf("%llu", (unsigned long long)rec->limits.disk) : NULL;
        const char *const args[] = { "--home",
                                     home->path,
                                     "--project",
                                     rec->project,
                                     "--sandbox",
                                     num,
                                     "--dir",
                                     rec->dir,
                                     "--cgroup",
                                     rec->cgroup,
                                     "--instance",
                                     rec->instance,
                                     "--platform",
                                     platform->id,
                                     "--runtime",
                                     runtime->name,
                                     "--id-base",
                                     id_base,
                                     "--network",
                                     lfs_network_name(rec->network),
                                     "--ready-fd",
                                     ready,
                                     disk ? "--disk" : NULL,
                                     disk,
                                     NULL };
        lfs_daemon_start start = { .exe = daemon,
                                   .args = args,
                                   .dir_fd = rec->dir_fd,
                                   .limits = &rec->limits,
                                   .init_holds_fd = id_hold };
        lfs_daemon_handle h = { .pid = -1, .pidfd = -1 };
        if ((r = runtime->create(&sb, &start, &h, err)) < 0)
                return r;
        close(h.pidfd);
        /* It listens: one call proves that it answers, and speaks our protocol. */
        json_t *resp = NULL;
        if ((r = lfs_rpc(rec, LFS_CALL_SANDBOX_PING, json_object(), &resp, err)) < 0)
                return r;
        json_decref(resp);
        *ret_pid = h.pid;
        return 0;
}

/* Appends the last lines of the daemon's log to *err's message, on its one line: a
 * message's control characters are shown escaped, so a newline would print as \n. */
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
        lfs_error_append(err, "; the daemon's log ended with:");
        for (unsigned i = n > 3 ? n - 3 : 0; i < n; i++)
                lfs_error_append(err, "%s '%s'", i > (n > 3 ? n - 3 : 0) ? ";" : "", lines[i % 3]);
}
