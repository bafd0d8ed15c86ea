/* SPDX-License-Identifier: MIT */
/*
 * A runtime: what a platform needs to hold a Sandbox, as one table of operations. Each
 * row of platforms.c points at its runtime; the library and the daemon reach a Sandbox's
 * processes only through the runtime its record names (its platform's, or for linux native
 * or namespaces), never through a runtime's own functions. linux/native.c and
 * linux/namespaces.c are the ones built today (cgroup v2, cgroup/ below them);
 * unbuilt.c answers Unsupported for the platforms whose runtime this build lacks (docker,
 * podman, the VMs). A new runtime is a folder of its own (docker/, vm/) with one table.
 *
 * The arguments say what a Sandbox is, never how a runtime keeps it: a runtime's own handle
 * on a Sandbox (native: its cgroup; later a container's id, a VM's name) is `place`, which
 * the record keeps and only the runtime reads. Operations return 0 or a negative errno
 * (with *err set where they take one).
 */
#ifndef LFS_RUNTIME_H
#define LFS_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "layerfs.h"

struct lfs_platform;
struct lfs_missing;

/* A Sandbox's network (sandbox create --network): none (a net namespace of its own with
 * only lo), host (the host's), private (lo and a veth pair to the host, on a /30 of its
 * own). */
typedef enum lfs_network {
        LFS_NETWORK_NONE,
        LFS_NETWORK_HOST,
        LFS_NETWORK_PRIVATE,
} lfs_network;
#define LFS_NETWORK_NAMES "none, host or private"
#define LFS_NETWORK_BIT(n) (1u << (n))

/* The network named (none, host, private): false for any other text. */
static inline bool lfs_network_from_name(const char *name, lfs_network *ret) {
        static const char *const names[] = { "none", "host", "private" };
        for (unsigned i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
                if (!strcmp(name, names[i])) {
                        *ret = (lfs_network)i;
                        return true;
                }
        return false;
}
static inline const char *lfs_network_name(lfs_network n) {
        return n == LFS_NETWORK_HOST ? "host" : n == LFS_NETWORK_PRIVATE ? "private" : "none";
}

/* The host's end of a private Sandbox's veth pair: "lfs" and the first 12 hex digits of
 * its instance (15 characters, IFNAMSIZ's most), so that no two Sandboxes of any home on
 * the host, nor two instances of one numbered Sandbox, name the same link (48 random
 * bits). */
#define LFS_NETWORK_LINK_SIZE 16
static inline void lfs_network_link_name(const char *instance, char buf[LFS_NETWORK_LINK_SIZE]) {
        snprintf(buf, LFS_NETWORK_LINK_SIZE, "lfs%.12s", instance ? instance : "");
}

/* How many addresses a private network's link takes: a /30 (its network, the host's end,
 * the Sandbox's end, its broadcast). */
#define LFS_NETWORK_PREFIX 30
#define LFS_NETWORK_SIZE 4u

/* One Sandbox as its record names it. */
typedef struct lfs_sandbox_ref {
        const char *home; /* the home's path */
        const char *project;
        int number;
        const char *dir; /* its directory, <home>/sandboxes/<project>-<n> */
        /* The runtime's handle on it, as the record keeps it (native: its cgroup); NULL in
         * records from before runtimes had one. */
        const char *place;
        /* The first host uid and gid of the range its ids 0..65535 map onto (namespaces: one
         * range per Sandbox, chosen when it is claimed and kept in its record); 0 for
         * runtimes without one. */
        uint32_t id_base;
        /* This instance of the Sandbox (32 hex digits), as its record names it. */
        const char *instance;
        lfs_network network;
        /* private: the first address (host order) of its /30: +1 the host's end, +2 its
         * own; 0 otherwise. */
        uint32_t net_base;
} lfs_sandbox_ref;

/* The host's id for id of a Sandbox: itself, or with a range of its own (namespaces) the
 * id its user namespace maps it onto. What the daemon's Workspaces and files give the
 * command identity on the host, so that inside they are the command identity's. */
static inline uint32_t lfs_host_id(const lfs_sandbox_ref *sb, uint32_t id) {
        return sb->id_base ? sb->id_base + id : id;
}

/* The fd on which a daemon that create starts finds the write end of its readiness pipe
 * (the daemon's --ready-fd): it writes one byte there, LFS_DAEMON_READY once its socket
 * listens, or LFS_DAEMON_LIMIT_REACHED, then exits, when its cgroup root already has as
 * many Sandboxes as it may (lfs_watcher_max_sandboxes()). */
#define LFS_DAEMON_READY_FD 3
#define LFS_DAEMON_READY '1'
#define LFS_DAEMON_LIMIT_REACHED 'L'
/* The fd on which a Sandbox's init (namespaces) keeps, for its life, the lock of its id
 * range that create took (lfs_daemon_start.init_holds_fd). */
#define LFS_INIT_HOLD_FD 4

/* How to start a Sandbox's daemon (create). */
typedef struct lfs_daemon_start {
        const char *exe; /* an absolute path */
        /* Its arguments after argv[0], NULL-terminated (with --ready-fd LFS_DAEMON_READY_FD). */
        const char *const *args;
        int dir_fd; /* the Sandbox's directory, made: its output goes to daemon.log there */
        /* What the Sandbox may use (check_limits accepted them): set on its place before the
         * daemon starts in it. */
        const lfs_sandbox_limits *limits;
        /* An fd the Sandbox's own init (a runtime that has one) keeps open on
         * LFS_INIT_HOLD_FD for its life, or -1: the host-wide lock of the Sandbox's id
         * range, which goes when the init ends with the Sandbox. */
        int init_holds_fd;
} lfs_daemon_start;

/* A daemon that create started: it has said it listens (its --ready-fd). */
typedef struct lfs_daemon_handle {
        pid_t pid;
        int pidfd; /* the caller closes it */
} lfs_daemon_handle;

/* A command to start in a Sandbox (the daemon's side of exec and process start). */
typedef struct lfs_command_spec {
        /* Its name in the Sandbox, unique while it lives: "cmd-<k>" (what process list
         * shows as its cgroup). */
        const char *name;
        const char *const *paths; /* the program: each candidate tried in turn (PATH) */
        size_t n_paths;
        char *const *argv;
        char *const *envp;
        int cwd_fd; /* it starts in this directory */
        /* ...whose path this is: a runtime with a mount view of its own reaches it by path
         * there, and checks it is the same directory. */
        const char *cwd;
        uid_t uid;
        gid_t gid;
        int fds[3]; /* become its 0, 1, 2 */
        bool tty; /* fds[0] is a terminal made for it: its session's controlling terminal */
        /* Called once the command's place exists and before the command starts in it (the
         * daemon's watcher learns the place's id there); may be NULL. */
        void (*placed)(void *userdata, const char *name);
        void *userdata;
        /* > 0: an eventfd the command's process adds 1 to once it is in its place, before
         * it takes the command's identity (lfs_spawn_args.born_fd); 0: none. */
        int born_fd;
} lfs_command_spec;

/* A process of the Sandbox's commands: its pid and the name of its command. */
typedef void (*lfs_process_fn)(void *userdata, pid_t pid, const char *command);

/* The teardown's step between the end of the processes and the removal: the daemon lets
 * go of its own mounts there. */
typedef void (*lfs_teardown_hook)(void *userdata);

/* A Sandbox whose home is gone, found by reclaim_orphans: its home's path, project and
 * number, its directory; left_alone NULL when it was removed, else why not. */
typedef void (*lfs_orphan_fn)(void *userdata, const char *home, const char *project, int number,
                              const char *dir, const char *left_alone);

typedef struct lfs_runtime {
        /* What a record of it names as its runtime: "native", "namespaces", "docker", "vm". */
        const char *name;
        /* The networks it can give a Sandbox (LFS_NETWORK_BIT of each), and the one it gives
         * without --network. */
        unsigned networks;
        lfs_network default_network;
        /* Why it gives no other network, added to the refusal of one (NULL: nothing to add). */
        const char *networks_why;
        /* Whether each of its Sandboxes runs as a range of 65536 host ids of its own, claimed
         * by the create (LAYERFS_ID_RANGE) and named by the record. */
        bool owns_id_range;
        /* Readiness: adds to *missing what this host lacks for platform p on this runtime,
         * in runtime status's names (after what the platform's own probe added). */
        void (*probe)(const struct lfs_platform *p, struct lfs_missing *missing);
        /* Create's checks before anything is made; *ret_root is where the runtime keeps
         * its Sandboxes (native: the cgroup root), from which a record's place is named. */
        int (*prepare)(const struct lfs_platform *p, char **ret_root, lfs_error **err);
        /* Create's check of the limits asked for, after prepare (root is its *ret_root) and
         * before anything is made: Unsupported, naming the limit, what enforces it and the
         * host, for one this host cannot enforce. */
        int (*check_limits)(const struct lfs_platform *p, const char *root, const lfs_sandbox_limits *limits,
                            lfs_error **err);
        /* Whether this build can act on sb (calls, close, reclaim): 0, else Unsupported
         * naming the Sandbox and its platform. */
        int (*reach)(const struct lfs_platform *p, const lfs_sandbox_ref *sb, lfs_error **err);
        /* Makes sb's place, sets start->limits on it, and starts its daemon there; returns once the daemon
         * said it listens, or fails (the daemon exited, or did not say so within 5 s). What it made stays
         * for reclaim to remove. */
        int (*create)(const lfs_sandbox_ref *sb, const lfs_daemon_start *start, lfs_daemon_handle *ret,
                      lfs_error **err);
        /* The daemon's side: starts the command in a place of its own in sb; its pid and a
         * pidfd. On failure nothing of it stays, and *err says which step of the start
         * failed (its place, namespaces, identity, working directory...), with the value
         * and what to do. */
        int (*spawn)(const lfs_sandbox_ref *sb, const lfs_command_spec *spec, pid_t *ret_pid, int *ret_pidfd,
                     lfs_error **err);
        /* The daemon's side of exec with a terminal: a new pseudo-terminal's master (O_RDWR |
         * O_NOCTTY | O_CLOEXEC, still locked) of the devpts instance that sb's commands see as
         * /dev/pts, so that the command's terminal is one it can name (tty, ttyname). A
         * negative errno. */
        int (*open_terminal)(const lfs_sandbox_ref *sb);
        /* Ends every process of the command named (however it detached): its timeout. At
         * most timeout_ms. */
        int (*end_command)(const lfs_sandbox_ref *sb, const char *name, int timeout_ms);
        /* The command ended: its place goes if nothing of it is left (background processes
         * keep it until the Sandbox closes). */
        void (*command_done)(const lfs_sandbox_ref *sb, const char *name);
        /* Calls fn for each process of sb's commands (process list). */
        void (*list)(const lfs_sandbox_ref *sb, lfs_process_fn fn, void *userdata);
        /* Sends sig to pid only if it is a process of sb's commands, through a pidfd taken
         * before the check (a pid reused meanwhile is not hit): -ESRCH if it is not one,
         * else 0 or the signal's negative errno. */
        int (*signal)(const lfs_sandbox_ref *sb, pid_t pid, int sig);
        /* The live Sandbox's end, by its own daemon: every process ends (the daemon leaves
         * the Sandbox first), then hook, then its mounts, place and directory go: 0. With
         * leave_place (a caller waits for the daemon's exit: sandbox close), or where the
         * daemon cannot leave, every process but the daemon's ends and the place stays with
         * the daemon in it, for the caller's reclaim once the daemon exited: 1. Else a
         * negative errno and *ret_why saying what stayed. */
        int (*teardown)(const lfs_sandbox_ref *sb, bool leave_place, lfs_teardown_hook hook, void *userdata,
                        char **ret_why);
        /* A Sandbox whose daemon is gone (or a create of the caller's that failed):
         * whatever it left, processes, mounts, place, directory. 0, or a negative errno and
         * *ret_why saying what stayed. */
        int (*reclaim)(const lfs_sandbox_ref *sb, char **ret_why);
        /* The places of Sandboxes of any home whose home is gone (deleted, or made again),
         * which no record names any more: each is ended and removed, and fn told. Never one
         * whose home is there, nor one it cannot tell (fn is told why). NULL: none. */
        int (*reclaim_orphans)(lfs_orphan_fn fn, void *userdata);
} lfs_runtime;

/* The native runtime (linux/native.c): every command in a cgroup of its own. */
extern const lfs_runtime lfs_runtime_native;
/* The namespaces runtime (linux/namespaces.c): native's cgroups, and the Sandbox's own
 * user, pid, mount, ipc, uts, cgroup and net namespaces, which every command joins. */
extern const lfs_runtime lfs_runtime_namespaces;
/* Runtimes this build lacks (unbuilt.c): probe names them missing, every other operation
 * is Unsupported. */
extern const lfs_runtime lfs_runtime_docker_unbuilt;
extern const lfs_runtime lfs_runtime_vm_unbuilt;

#endif
