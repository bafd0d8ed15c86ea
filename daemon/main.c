/* SPDX-License-Identifier: MIT */
/*
 * layerfs-daemon: one per Sandbox. It serves the Sandbox's Workspaces over FUSE (a thread
 * per mount) and answers the library on the Sandbox's control socket in the protocol of
 * docs/protocol.md (proto/).
 *
 *   layerfs-daemon --home DIR --project NAME --sandbox N --dir SANDBOX_DIR --cgroup CGROUP
 *                  --instance ID [--platform NAME] [--ready-fd FD] [--disk BYTES]
 *
 * SANDBOX_DIR (0711) holds `token` (0600, written by the library before the start),
 * `control.sock`, `daemon.log`, and per Workspace `mnt/<branch>` and `upper/<branch>`.
 *
 * This file sets the daemon up and runs it: the rest is by concern, control.c (the
 * socket: each request read and checked through proto/), calls.c (the handler of each
 * call), mounts.c (the Workspaces), exec.c, events.c, proc_watch.c, close.c (the
 * Sandbox's end) and log.c.
 */
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <linux/keyctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>

#include "cgroup.h"
#include "config.h" /* LAYERFS_VERSION */
#include "daemon.h"
#include "fault.h"
#include "log.h"
#include "numbers.h"
#include "platforms.h"
#include "records.h"
#include "watcher_set.h"

/* SIGUSR1's handler: it only interrupts a mount thread's read (mounts.c). */
static void ignore_signal(int sig) {
        (void)sig;
}

/* The Sandbox's token, written by the library before the start. */
static char *read_token(const char *dir) {
        _cleanup_free_ char *path = xasprintf("%s/token", dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return NULL;
        char buf[128] = "";
        if (!fgets(buf, sizeof(buf), f))
                buf[0] = 0;
        fclose(f);
        buf[strcspn(buf, "\n")] = 0;
        return buf[0] ? xstrdup(buf) : NULL;
}

/* LAYERFS_WORKSPACE_MEMORY (checked by the library when the Sandbox was made). */
static uint64_t workspace_memory_from_env(void) {
        uint64_t bytes;
        const char *s = getenv("LAYERFS_WORKSPACE_MEMORY");
        return s && lfs_parse_size("LAYERFS_WORKSPACE_MEMORY", s, &bytes, NULL) == 0
                       ? bytes
                       : DEFAULT_WORKSPACE_MEMORY;
}

/* The daemon's memory, bounded by its cgroup where the memory controller is there: its
 * Workspaces' budgets and a margin for the rest (threads, Store caches, commits). A
 * hybrid host's v2 hierarchy (this project's test machines) has no controllers: there
 * the budgets alone bound it, and the log says so. */
static void limit_daemon_memory(daemon_state *d) {
        uint64_t max = MAX_WORKSPACES * d->ws_memory + (512ull << 20);
        _cleanup_free_ char *leaf = xasprintf("%s/daemon", d->cgroup);
        int r = lfs_cgroup_limit_memory(d->cgroup, leaf, max);
        if (r == 0)
                log_line("memory.max of %s: %llu bytes", leaf, (unsigned long long)max);
        else
                log_line("no memory limit on the daemon's cgroup (%s): %s; each Workspace's metadata stays "
                         "within %llu bytes",
                         leaf,
                         r == -EOPNOTSUPP ? "no memory controller in this cgroup2 hierarchy" : strerror(-r),
                         (unsigned long long)d->ws_memory);
}

/* The daemon, and so every command it starts, leaves the session keyring of whoever ran
 * `sandbox create` for a new empty one: a process possesses every key of its session
 * keyring and reads, unlinks or revokes it whatever its uid, so the creator's (a login
 * session's Kerberos tickets, fscrypt or ecryptfs keys) would be every command's.
 * A kernel without keyrings has nothing to leave. */
static int leave_session_keyring(void) {
        if (syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL) >= 0 || errno == ENOSYS)
                return 0;
        return -1;
}

/* The commands' HOME and TMPDIR: private to the Sandbox, owned by the command identity
 * (on the host: its host ids). */
static int make_private_tmp(daemon_state *d) {
        d->tmp = xasprintf("%s/tmp", d->dir);
        if (mkdir(d->tmp, 0700) < 0 && errno != EEXIST)
                return -errno;
        if (chown(d->tmp, d->host_uid, d->host_gid) < 0)
                return -errno;
        return 0;
}

/* A start that fails once the home is open: what it holds goes, then the exit (1). */
static int start_failed(daemon_state *d) {
        free(d->token);
        free(d->tmp);
        lfs_home_close(d->home);
        return 1;
}

/* How long the daemon's end waits for its callers to have their answers. */
#define END_WAIT_MS 2000

/* Waits on gone_cond until no connection, exec or reaper is left, at most END_WAIT_MS;
 * how many are still there. */
static unsigned wait_callers_gone(daemon_state *d) {
        struct timespec deadline = lfs_monotonic_deadline(END_WAIT_MS);
        pthread_mutex_lock(&d->lock);
        unsigned running = d->running_execs + d->waiters + d->clients;
        while (running && pthread_cond_timedwait(&d->gone_cond, &d->lock, &deadline) != ETIMEDOUT)
                running = d->running_execs + d->waiters + d->clients;
        running = d->running_execs + d->waiters + d->clients;
        pthread_mutex_unlock(&d->lock);
        return running;
}

static const char usage[] =
        "usage: layerfs-daemon --home DIR --project NAME --sandbox N --dir DIR --cgroup CGROUP --instance ID\n"
        "                      [--platform NAME] [--runtime NAME]\n"
        "                      [--id-base N] [--ready-fd FD] [--disk BYTES] [--network NAME]\n"
        "(started by liblayerfs for each Sandbox; see 'layerfs-daemon --help')\n";

/* The man page layerfs-daemon(8) is made from this text (packaging/man/help2man.sh): keep
 * its layout, section names alone on a line and entries indented by four spaces. */
static const char help[] =
        "NAME\n"
        "    layerfs-daemon - the daemon of one LayerFS Sandbox\n"
        "\n"
        "SYNOPSIS\n"
        "    layerfs-daemon --home DIR --project NAME --sandbox N --dir DIR --cgroup CGROUP\n"
        "                   --instance ID [--platform NAME] [--runtime NAME] [--id-base N]\n"
        "                   [--ready-fd FD] [--disk BYTES] [--network NAME]\n"
        "\n"
        "DESCRIPTION\n"
        "    liblayerfs (and so 'layerfs sandbox create') starts one layerfs-daemon for each\n"
        "    Sandbox, as root, detached in its own session, in the leaf 'daemon' of the\n"
        "    Sandbox's cgroup, with its output going to DIR/daemon.log. It is not meant to\n"
        "    be run by hand: the library makes the Sandbox's directory, token, cgroup and\n"
        "    record first.\n"
        "\n"
        "    It serves root's calls on DIR/control.sock (mode 0600; a client proves itself\n"
        "    with the token in DIR/token), mounts the Sandbox's Workspaces over FUSE\n"
        "    under DIR/mnt/, runs commands each in a cgroup leaf of their own as the command\n"
        "    identity, watches their processes (BPF, else the proc connector or the cgroup's\n"
        "    events) and closes the Sandbox on 'sandbox close' or when idle: it ends every\n"
        "    process in the cgroup, unmounts, and removes the cgroups, DIR and the record.\n"
        "\n"
        "    Under the namespaces runtime the library starts layerfs-init too, from beside\n"
        "    this program: pid 1 of the Sandbox's new namespaces, it builds the Sandbox's\n"
        "    view (the host's root read-only, its own /proc, /sys, /dev and /tmp, and of\n"
        "    HOME only DIR's tmp and mnt), its hostname and lo, says so on fd 3, then only\n"
        "    reaps. It is not meant to be run by hand either.\n"
        "\n"
        "OPTIONS\n"
        "    --home DIR       the home whose Sandbox this is\n"
        "    --project NAME   the project\n"
        "    --sandbox N      the Sandbox's number\n"
        "    --dir DIR        the Sandbox's directory, HOME/sandboxes/NAME-N\n"
        "    --cgroup CGROUP  the Sandbox's cgroup (LAYERFS_CGROUP_ROOT/TAG-NAME-N)\n"
        "    --instance ID    this start of the Sandbox, as its record names it\n"
        "    --platform NAME  the Sandbox's platform, whose runtime holds its commands\n"
        "                     (default linux)\n"
        "    --runtime NAME   the platform's runtime that holds them (linux: native or\n"
        "                     namespaces; default the platform's own, native)\n"
        "    --id-base N      the first host id of the Sandbox's own range (namespaces:\n"
        "                     its ids 0..65535 are the host's N..N+65535); default 0, none\n"
        "    --ready-fd FD    write one byte to FD, then close it, once DIR/control.sock\n"
        "                     listens (the library waits for it)\n"
        "    --disk BYTES     the Sandbox's disk budget, for the log: its Workspaces'\n"
        "                     uncommitted data, its TMPDIR, the logs of its background\n"
        "                     processes and (namespaces) its /tmp and /dev/shm share a\n"
        "                     tmpfs of BYTES (DIR/disk, mounted by the runtime's create\n"
        "                     before the daemon starts); a write past it fails with ENOSPC\n"
        "    --network NAME   the Sandbox's network: none, host or private (namespaces;\n"
        "                     native's is host); default the runtime's (namespaces: none).\n"
        "                     The daemon's teardown removes a private one's host end\n"
        "    --help           this text\n"
        "    --version        the version\n"
        "\n"
        "ENVIRONMENT\n"
        "    LAYERFS_IDLE_SECONDS\n"
        "                     with no Workspace mounted and no request for this long\n"
        "                     (default 120), the Sandbox closes itself\n"
        "    LAYERFS_GC_AFTER_DELETES\n"
        "                     the idle close first runs project gc when the project had\n"
        "                     this many branches deleted since its last gc (default: never)\n"
        "    LAYERFS_WATCHER  how it watches its processes: bpf, proc or cgroup\n"
        "    LAYERFS_WATCHER_LOAD_WAIT_MS\n"
        "                     how long a command waits, from the daemon's start, for the\n"
        "                     default watcher's load before going on without BPF (5000)\n"
        "    LAYERFS_COMMAND_UID, LAYERFS_COMMAND_GID\n"
        "                     the command identity (default 501 and 20)\n"
        "    LAYERFS_FUSE_DEBUG=1\n"
        "                     log every FUSE request\n"
        "    LAYERFS_BPF_DEBUG=1\n"
        "                     log the BPF verifier's messages\n"
        "\n"
        "FILES\n"
        "    DIR/control.sock  the control socket\n"
        "    DIR/token         the token a client must send first\n"
        "    DIR/daemon.log    this daemon's log ('layerfs sandbox log N'), kept to 1 MiB\n"
        "    DIR/mnt/BRANCH    a mounted Workspace\n"
        "    DIR/tmp/          the commands' HOME and TMPDIR\n"
        "    DIR/disk/         with --disk: the tmpfs holding DIR/tmp/, DIR/upper/,\n"
        "                      DIR/processes/ and (namespaces) DIR/view-tmp/\n"
        "\n"
        "EXIT STATUS\n"
        "    0 after the Sandbox closed; 1 when it could not start (the reason is in its\n"
        "    log); 2 for wrong arguments.\n";

int main(int argc, char **argv) {
        daemon_state d = { .lock = PTHREAD_MUTEX_INITIALIZER };
        const char *home_dir = NULL, *number = NULL, *platform = "linux", *runtime = NULL, *ready = NULL,
                   *id_base = NULL, *disk = NULL, *network = NULL;
        static const struct option options[] = {
                { "home", required_argument, NULL, 'h' },
                { "project", required_argument, NULL, 'p' },
                { "sandbox", required_argument, NULL, 'n' },
                { "dir", required_argument, NULL, 'd' },
                { "cgroup", required_argument, NULL, 'c' },
                { "instance", required_argument, NULL, 'i' },
                { "platform", required_argument, NULL, 'P' },
                { "runtime", required_argument, NULL, 'r' },
                { "id-base", required_argument, NULL, 'b' },
                { "ready-fd", required_argument, NULL, 'R' },
                { "disk", required_argument, NULL, 'D' },
                { "network", required_argument, NULL, 'N' },
                { "help", no_argument, NULL, 'H' },
                { "version", no_argument, NULL, 'V' },
                { NULL, 0, NULL, 0 },
        };
        int c;
        while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
                switch (c) {
                case 'h':
                        home_dir = optarg;
                        break;
                case 'p':
                        d.project = optarg;
                        break;
                case 'n':
                        number = optarg;
                        break;
                case 'd':
                        d.dir = optarg;
                        break;
                case 'c':
                        d.cgroup = optarg;
                        break;
                case 'i':
                        d.instance = optarg;
                        break;
                case 'P':
                        platform = optarg;
                        break;
                case 'r':
                        runtime = optarg;
                        break;
                case 'b':
                        id_base = optarg;
                        break;
                case 'R':
                        ready = optarg;
                        break;
                case 'D':
                        disk = optarg;
                        break;
                case 'N':
                        network = optarg;
                        break;
                case 'H':
                        fputs(help, stdout);
                        return 0;
                case 'V':
                        printf("layerfs-daemon %s\n", LAYERFS_VERSION);
                        return 0;
                default:
                        fputs(usage, stderr);
                        return 2;
                }
        }
        if (!home_dir || !d.project || !d.dir || !d.cgroup || !d.instance || !number) {
                fputs(usage, stderr);
                return 2;
        }
        /* The settings the library checked at create, read the same way (numbers.h). */
        lfs_error *err = NULL;
        uint64_t n, ready_fd = 0, base = 0, disk_bytes = 0, max_per_root;
        double idle_seconds;
        const lfs_platform *p = lfs_platform_find(platform);
        if (!p) {
                fprintf(stderr, "InvalidInput: --platform '%s' is not one of %s\n", platform,
                        lfs_platform_names());
                return 2;
        }
        if (lfs_parse_whole("--sandbox", number, 1, INT_MAX, &n, &err) < 0 ||
            (ready && lfs_parse_whole("--ready-fd", ready, 3, INT_MAX, &ready_fd, &err) < 0) ||
            (id_base && lfs_parse_whole("--id-base", id_base, 0, UINT32_MAX - 65535, &base, &err) < 0) ||
            (disk && lfs_parse_whole("--disk", disk, LFS_MIN_DISK, LFS_MAX_DISK, &disk_bytes, &err) < 0) ||
            lfs_command_identity(&d.uid, &d.gid, &err) < 0 || lfs_idle_seconds(&idle_seconds, &err) < 0 ||
            lfs_gc_after_deletes(&d.gc_after_deletes, &err) < 0 ||
            lfs_watcher_load_wait_ms(&d.watcher_load_wait_ms, &err) < 0 ||
            lfs_test_max_sandboxes_per_root(&max_per_root, &err) < 0) {
                fprintf(stderr, "%s: %s\n", lfs_code_name(err->code), err->message);
                lfs_error_free(err);
                return 2;
        }
        const lfs_runtime *rt = lfs_platform_runtime(p, runtime);
        if (!rt) {
                fprintf(stderr, "InvalidInput: --runtime '%s' is not a runtime of platform %s\n", runtime,
                        p->id);
                return 2;
        }
        lfs_network net = rt->default_network;
        if (network && (!lfs_network_from_name(network, &net) || !(rt->networks & LFS_NETWORK_BIT(net)))) {
                fprintf(stderr, "InvalidInput: --network '%s' is not a network the %s runtime gives\n",
                        network, rt->name);
                return 2;
        }
        d.number = (int)n;
        /* Nothing the daemon starts inherits it. */
        int ready_out = ready && fcntl((int)ready_fd, F_SETFD, FD_CLOEXEC) == 0 ? (int)ready_fd : -1;
        d.runtime = rt;
        d.sb = (lfs_sandbox_ref){
                .home = home_dir,
                .project = d.project,
                .number = d.number,
                .dir = d.dir,
                .place = d.cgroup,
                .id_base = (uint32_t)base,
                .instance = d.instance,
                .network = net,
        };
        d.host_uid = lfs_host_id(&d.sb, d.uid);
        d.host_gid = lfs_host_id(&d.sb, d.gid);
        if (leave_session_keyring() < 0) {
                fprintf(stderr, "cannot join a session keyring of its own: %s\n", strerror(errno));
                return 1;
        }
        /* SIGTERM, SIGINT and SIGHUP (kill, systemctl stop, a hang-up) close the Sandbox as
         * sandbox.close does: blocked here, before the first thread, so in every thread,
         * and read from a signalfd by the accept loop, which runs the close; no handler
         * does any work. A second one during the close waits, blocked, and ends nothing.
         * Commands start with an empty mask (cgroup/spawn.c). */
        sigset_t closing_signals;
        sigemptyset(&closing_signals);
        sigaddset(&closing_signals, SIGTERM);
        sigaddset(&closing_signals, SIGINT);
        sigaddset(&closing_signals, SIGHUP);
        if (pthread_sigmask(SIG_BLOCK, &closing_signals, NULL) != 0 ||
            (d.signal_fd = signalfd(-1, &closing_signals, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
                fprintf(stderr, "cannot take SIGTERM, SIGINT and SIGHUP through a signalfd: %s\n",
                        strerror(errno));
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        /* A Workspace write past a file size limit the daemon could not lift (its
         * creator's hard limit, without CAP_SYS_RESOURCE) fails EFBIG to its writer,
         * rather than ending the daemon and the Workspace with it. Commands get the
         * signal's default back (lfs_cgroup_spawn). */
        signal(SIGXFSZ, SIG_IGN);
        /* Only interrupts a mount thread's read of /dev/fuse (end_mount_thread). */
        struct sigaction interrupt = { .sa_handler = ignore_signal };
        sigaction(SIGUSR1, &interrupt, NULL);
        /* Nor may the creator's limits end the daemon (nor its open files run out across
         * the Workspaces); its commands get them back. */
        lfs_cgroup_lift_limits();
        if (lfs_home_open(home_dir, &d.home, &err) < 0) {
                fprintf(stderr, "%s: %s\n", lfs_code_name(err->code), err->message);
                return 1;
        }
        log_set_dir(d.dir);
        d.token = read_token(d.dir);
        if (!d.token) {
                fprintf(stderr, "no token in %s/token\n", d.dir);
                return start_failed(&d);
        }
        /* The runtime's create made the budget's tmpfs before this daemon started
         * (lfs_linux_make_disk): nothing of the Sandbox ever writes outside it. */
        if (disk_bytes)
                log_line(
                        "disk budget: %llu bytes for the Workspaces' changes, TMPDIR and the process logs%s "
                        "(tmpfs %s/disk)",
                        (unsigned long long)disk_bytes, d.sb.id_base ? ", /tmp and /dev/shm" : "", d.dir);
        int r = make_private_tmp(&d);
        if (r < 0) {
                fprintf(stderr, "cannot make %s: %s\n", d.tmp, strerror(-r));
                return start_failed(&d);
        }
        _cleanup_free_ char *mnt = xasprintf("%s/mnt", d.dir), *upper = xasprintf("%s/upper", d.dir);
        mkdir(mnt, 0711); /* passed through to the Workspaces, listed by no one else */
        mkdir(upper, 0700);
        if (lfs_fault_fails("daemon-no-socket")) {
                /* For the tests: a daemon that starts but never answers. */
                log_line("LAYERFS_INJECT_FAILURE=daemon-no-socket: not listening");
                for (;;)
                        pause();
        }
        d.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        d.started_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        _cleanup_free_ char *sock = xasprintf("%s/control.sock", d.dir);
        int lfd = control_listen(sock);
        if (lfd < 0 || d.wake_fd < 0 || d.started_efd < 0) {
                fprintf(stderr, "cannot listen on %s: %s\n", sock, strerror(lfd < 0 ? -lfd : errno));
                return start_failed(&d);
        }
        pthread_cond_init(&d.ws_released, NULL);
        pthread_condattr_t monotonic;
        pthread_condattr_init(&monotonic);
        pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
        pthread_cond_init(&d.gone_cond, &monotonic);
        pthread_cond_init(&d.handoff_cond, NULL);
        pthread_condattr_destroy(&monotonic);
        if ((r = start_watcher(&d)) < 0) {
                /* A full cgroup root: the library's create says LimitReached. */
                if (r == -E2BIG && ready_out >= 0)
                        (void)!write(ready_out, &(char){ LFS_DAEMON_LIMIT_REACHED }, 1);
                return start_failed(&d);
        }
        d.ws_memory = workspace_memory_from_env();
        limit_daemon_memory(&d);
        log_line("sandbox %d of %s ready (pid %d, cgroup %s, watcher %s)", d.number, d.project,
                 (int)getpid(), d.cgroup, d.watcher_loading ? "bpf, loading" : d.watcher_kind);
        if (ready_out >= 0) {
                /* The library waits for this byte (or our exit): the socket listens. */
                (void)!write(ready_out, &(char){ LFS_DAEMON_READY }, 1);
                close(ready_out);
        }
        /* After the readiness byte: nothing of the create waits for it. */
        start_spare_store(&d);
        control_serve(&d, lfd, (long long)(idle_seconds * 1000));
        close(lfd);
        /* Every caller gets its answer first: the close its ok, commands ended by the
         * close their exit status. Each of them signals gone_cond as it ends; at most
         * END_WAIT_MS. */
        unsigned running = wait_callers_gone(&d);
        log_line("sandbox %d closed", d.number);
        /* Out of the root's map in any case (the close left it beside its teardown): the
         * exit would close the ring, not take it out. */
        drop_spare_store(&d);
        bool loader_joined = join_watcher_loader(&d);
        close_beside_join(&d);
        /* An idle gc that a signal or a close came during (control_serve): the Sandbox is
         * gone already; the gc ends before the record does, as the daemon's work. */
        idle_gc_join(&d);
        lfs_watcher_leave(d.watcher);
        if (!running && loader_joined) { /* else a thread may still use them: the exit frees them */
                lfs_watcher_close(d.watcher);
                proc_watch_close(d.proc);
                free(d.leaves);
                free(d.starting);
                free(d.token);
                free(d.tmp);
        }
        /* The daemon's last act: the record of this instance goes once everything it
         * names is gone and every caller had its answer, so that a record gone means the
         * Sandbox is gone (only the exit of this process is left). */
        if (d.removed) {
                r = lfs_sandbox_record_delete(d.home, d.project, d.number, d.instance);
                if (r < 0)
                        log_line("cannot delete the record of sandbox %d: %s; the library or the next "
                                 "reclaim removes it",
                                 d.number, strerror(-r));
        } else if (d.left_some) {
                /* Handed over to a closer already (close_beside_start), it stays the closer's. */
                lfs_sandbox_record_release(d.home, d.project, d.number, d.instance);
        }
        /* A caller's thread still running (one that never sent its request, a follower
         * whose client stopped reading) uses d, which lives in this frame: the process
         * ends here, with it, instead of returning from main under it. */
        if (running || !loader_joined)
                _exit(0);
        lfs_home_close(d.home);
        return 0;
}
