/* SPDX-License-Identifier: MIT */
/*
 * layerfs.h - the public C API of liblayerfs.
 *
 * Every call returns 0 on success or a negative errno-style value on failure, in
 * which case *err (when err is not NULL) receives an lfs_error that names one of the
 * codes of SPEC section 6 and a message saying what was wrong and what to do.
 * Output parameters are named ret_* and are left untouched on failure.
 */
#ifndef LAYERFS_H
#define LAYERFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The library is built with hidden visibility: what this header declares is all it
 * exports (tests/packaging/test_exports.sh checks it). */
#define LFS_PUBLIC __attribute__((visibility("default")))

typedef enum lfs_code {
        LFS_OK = 0,
        LFS_INVALID_INPUT,
        LFS_UNSUPPORTED,
        LFS_NO_SUCH_PROJECT,
        LFS_NO_SUCH_BRANCH,
        LFS_NO_SUCH_SANDBOX,
        LFS_NOT_MOUNTED,
        LFS_ALREADY_MOUNTED,
        LFS_LIMIT_REACHED,
        LFS_BUSY,
        LFS_DIRTY,
        LFS_CONFLICT,
        LFS_PERMISSION_DENIED,
        LFS_FAILED,
} lfs_code;

typedef struct lfs_error {
        lfs_code code;
        int errnum; /* the errno behind it, or 0 */
        char *message; /* what was wrong, with which value, and what to do */
        /* For LFS_CONFLICT: every conflicting path. */
        char **paths;
        size_t n_paths;
} lfs_error;

/* "InvalidInput", "NoSuchBranch", ... as SPEC section 6 spells them. */
LFS_PUBLIC const char *lfs_code_name(lfs_code code);
LFS_PUBLIC void lfs_error_free(lfs_error *err);

#define LFS_ID_LEN 32
#define LFS_HEX_LEN 64

typedef struct lfs_id {
        uint8_t bytes[LFS_ID_LEN];
} lfs_id;

LFS_PUBLIC void lfs_id_to_hex(const lfs_id *id, char ret_hex[LFS_HEX_LEN + 1]);

/* Long work reports progress here: phase names the work and what done counts ("reading
 * files", "gc: marking objects"); total is 0 when unknown. */
typedef void (*lfs_progress_fn)(void *userdata, const char *phase, uint64_t done, uint64_t total);

typedef struct lfs_home lfs_home;
typedef struct lfs_store lfs_store;

/* dir NULL: $LAYERFS_HOME, else /var/lib/layerfs for root, else $XDG_DATA_HOME/layerfs. */
LFS_PUBLIC int lfs_home_open(const char *dir, lfs_home **ret_home, lfs_error **err);
LFS_PUBLIC void lfs_home_close(lfs_home *home);
LFS_PUBLIC const char *lfs_home_path(const lfs_home *home);
LFS_PUBLIC void lfs_home_set_progress(lfs_home *home, lfs_progress_fn fn, void *userdata);

/* project.init(name, from_dir?): branch "main" holds from_dir's tree, or is empty. */
LFS_PUBLIC int lfs_project_init(lfs_home *home, const char *name, const char *from_dir, lfs_id *ret_commit,
                                lfs_error **err);

typedef struct lfs_project_info {
        char *project;
        char **branches;
        size_t n_branches;
        size_t sandboxes;
} lfs_project_info;

LFS_PUBLIC int lfs_project_list(lfs_home *home, lfs_project_info **ret_projects, size_t *ret_n,
                                lfs_error **err);
LFS_PUBLIC void lfs_project_list_free(lfs_project_info *projects, size_t n);

/* name NULL: the home's only project (NoSuchProject or InvalidInput otherwise). */
LFS_PUBLIC int lfs_store_open(lfs_home *home, const char *project, lfs_store **ret_store, lfs_error **err);
LFS_PUBLIC void lfs_store_close(lfs_store *store);
LFS_PUBLIC const char *lfs_store_project(const lfs_store *store);

typedef struct lfs_branch_info {
        char *name;
        lfs_id commit;
} lfs_branch_info;

/* from: a branch name or a commit id (a unique hex prefix of at least 4); NULL = "main". */
LFS_PUBLIC int lfs_branch_create(lfs_store *store, const char *name, const char *from, lfs_id *ret_commit,
                                 lfs_error **err);
LFS_PUBLIC int lfs_branch_list(lfs_store *store, lfs_branch_info **ret_branches, size_t *ret_n,
                               lfs_error **err);
LFS_PUBLIC void lfs_branch_list_free(lfs_branch_info *branches, size_t n);
/* Deletes branch name (its commits stay in the Store); *ret_commit (if not NULL) the head
 * it had. Refused Busy, naming each, while a running Sandbox has it mounted as a
 * Workspace, and InvalidInput for "main"; force deletes it anyway (a Workspace left on it
 * is refused its next commit, NoSuchBranch, until the branch is made again). */
LFS_PUBLIC int lfs_branch_delete(lfs_store *store, const char *name, int force, lfs_id *ret_commit,
                                 lfs_error **err);

typedef struct lfs_commit_info {
        lfs_id id;
        lfs_id tree;
        lfs_id parents[2];
        size_t n_parents;
        char *author;
        int64_t time;
        char *message;
} lfs_commit_info;

/* Newest first, following first parents; limit 0 = all. */
LFS_PUBLIC int lfs_branch_log(lfs_store *store, const char *name, size_t limit,
                              lfs_commit_info **ret_commits, size_t *ret_n, lfs_error **err);
LFS_PUBLIC void lfs_commit_info_free(lfs_commit_info *commits, size_t n);

typedef enum lfs_change_kind {
        LFS_ADDED,
        LFS_MODIFIED,
        LFS_DELETED,
} lfs_change_kind;

typedef struct lfs_change {
        char *path;
        lfs_change_kind kind;
} lfs_change;

LFS_PUBLIC const char *lfs_change_kind_name(lfs_change_kind kind);

/* a, b: branch names or commit ids. Paths of files, symlinks and empty directories. */
LFS_PUBLIC int lfs_branch_diff(lfs_store *store, const char *a, const char *b, lfs_change **ret_changes,
                               size_t *ret_n, lfs_error **err);
LFS_PUBLIC void lfs_change_list_free(lfs_change *changes, size_t n);

typedef struct lfs_merge_result {
        lfs_id commit;
        int fast_forward; /* the head moved to from's commit; no new commit */
        int up_to_date; /* into already contained from */
} lfs_merge_result;

/* On conflict: LFS_CONFLICT with every conflicting path in err->paths; nothing changes. */
LFS_PUBLIC int lfs_branch_merge(lfs_store *store, const char *from, const char *into, lfs_merge_result *ret,
                                lfs_error **err);

/* Records from_dir as the branch's next commit, writing only objects the Store lacks. */
LFS_PUBLIC int lfs_branch_commit(lfs_store *store, const char *branch, const char *from_dir,
                                 const char *message, lfs_id *ret_commit, lfs_error **err);

/* Writes ref's tree into dir, which must be missing or empty. */
LFS_PUBLIC int lfs_branch_export(lfs_store *store, const char *ref, const char *dir, lfs_error **err);

/* ---- lower level, for the Workspace: commit a set of changed paths against a base. ---- */

typedef enum lfs_entry_type {
        LFS_ENTRY_NONE = 0, /* in a change: delete the path (and everything below it) */
        LFS_ENTRY_FILE,
        LFS_ENTRY_EXEC,
        LFS_ENTRY_SYMLINK,
        LFS_ENTRY_DIR,
} lfs_entry_type;

typedef struct lfs_path_change {
        const char *path; /* relative, "/"-separated, no "." or ".." components */
        lfs_entry_type type;
        /* FILE/EXEC: the file whose contents to store; SYMLINK: the link target;
         * DIR: ignored (an empty directory is created when missing). */
        const char *source;
        /* FILE/EXEC/SYMLINK: when set, the contents are this blob already in the Store
         * (of blob_size bytes) and source is not read. */
        const lfs_id *blob;
        uint64_t blob_size;
} lfs_path_change;

/* Builds base's tree with the changes applied and records it as a commit whose parent is
 * base; then moves branch from base to it (compare-and-swap). If the branch has moved,
 * merges three-way; a conflict changes nothing. */
LFS_PUBLIC int lfs_store_commit_changes(lfs_store *store, const char *branch, const lfs_id *base,
                                        const lfs_path_change *changes, size_t n, const char *message,
                                        lfs_id *ret_commit, int *ret_merged, lfs_error **err);

/* Resolves a branch name or a commit id prefix. */
LFS_PUBLIC int lfs_store_resolve(lfs_store *store, const char *ref, lfs_id *ret_commit, lfs_error **err);

/* Moves a branch head only if it is still at expected. */
LFS_PUBLIC int lfs_branch_move(lfs_store *store, const char *branch, const lfs_id *expected,
                               const lfs_id *to, lfs_error **err);

/* Checks every reachable object against its name and the database's integrity. */
LFS_PUBLIC int lfs_store_verify(lfs_store *store, uint64_t *ret_objects_checked, lfs_error **err);

/* project.gc: what it takes. */
typedef struct lfs_gc_options {
        int dry_run; /* 1: report what would go, change nothing */
        /* A pack whose live blobs hold less than this percentage of its bytes is rewritten
         * (its live blobs copied into one new pack, the old one removed); 1 to 100; 0: the
         * default, LFS_GC_REPACK_BELOW. A pack with no live blob is removed whatever it is. */
        unsigned repack_below;
} lfs_gc_options;
#define LFS_GC_REPACK_BELOW 50

typedef enum lfs_gc_pack_action {
        LFS_GC_PACK_REMOVED = 1, /* no live blob left */
        LFS_GC_PACK_REWRITTEN, /* its live blobs moved to a new pack */
} lfs_gc_pack_action;

typedef struct lfs_gc_pack {
        char *name; /* below objects/packs/ */
        uint64_t size; /* its length */
        uint64_t live; /* bytes of its blobs that something reaches */
        lfs_gc_pack_action action;
} lfs_gc_pack;

/* What a gc removed (dry run: would remove). */
typedef struct lfs_gc_result {
        uint64_t commits, trees; /* database rows */
        uint64_t database_bytes; /* the data those rows held (the file shrinks if vacuumed) */
        uint64_t packed_blobs; /* rows of blobs in packs */
        uint64_t loose_objects; /* loose object files */
        uint64_t leftovers; /* tmp files and unrecorded packs that killed writers left */
        uint64_t stale_pins; /* pins of Workspaces whose daemon is gone */
        uint64_t pins; /* live pins kept (their commits were roots, as branches are) */
        uint64_t bytes; /* bytes on disk of the object files removed or shrunk (st_blocks) */
        int vacuumed; /* 1: the database was compacted (it had many free pages) */
        lfs_gc_pack *packs; /* packs removed or rewritten */
        size_t n_packs;
} lfs_gc_result;

/* Removes the commits, trees and blobs that no branch reaches (and no mounted Workspace
 * needs: its base commits stay), and the pack space they held; safe while Sandboxes run
 * and while other processes commit: it waits for writing operations in progress, and they
 * wait for it. InvalidInput for options out of range, before anything. */
LFS_PUBLIC int lfs_store_gc(lfs_store *store, const lfs_gc_options *options, lfs_gc_result *ret,
                            lfs_error **err);
LFS_PUBLIC void lfs_gc_result_done(lfs_gc_result *result);

/* ---- Sandboxes and Workspaces (platform linux) ---- */

/* project NULL: the home's only project. Returns the new Sandbox's number. Root only. */
LFS_PUBLIC int lfs_sandbox_create(lfs_home *home, const char *project, const char *image,
                                  const char *platform, int *ret_sandbox, lfs_error **err);

/* A Sandbox's limits, as numbers (0: none). */
typedef struct lfs_sandbox_limits {
        uint64_t memory; /* bytes: memory.max of the Sandbox's cgroup (its daemon and commands) */
        uint64_t pids; /* pids.max of the Sandbox's cgroup: its processes and threads together */
        double cpus; /* cpu.max: CPUs' worth of time per period (1.5: 150 ms of each 100 ms) */
        uint64_t disk; /* bytes: its Workspaces' uncommitted data and its TMPDIR together */
} lfs_sandbox_limits;

/* What sandbox.create takes. Limits as a person writes them (NULL: none): memory and disk
 * are sizes (bytes, or a number with K, M, G or T: "512M", "2G"), pids a whole number,
 * cpus a decimal number ("1.5"). A value that is not of its form, or out of its range, is
 * InvalidInput; a limit this host cannot enforce (its cgroup controller is not offered
 * to LayerFS) is Unsupported; both before anything is made. */
typedef struct lfs_sandbox_options {
        const char *image; /* ignored for linux Sandboxes */
        const char *platform; /* NULL: the home's default */
        const char *memory;
        const char *pids;
        const char *cpus;
        const char *disk;
        /* "none" (a net namespace of its own with only lo up), "host" (the host's network),
         * "private" (lo and a veth pair to the host, on a /30 of its own; nothing routed
         * beyond it); NULL: the runtime's default (namespaces: none; native: host, the only
         * one it gives). Another name is InvalidInput, one the runtime cannot give is
         * Unsupported, both before anything is made. */
        const char *network;
} lfs_sandbox_options;

/* lfs_sandbox_create with limits (options NULL: none). */
LFS_PUBLIC int lfs_sandbox_create_with(lfs_home *home, const char *project,
                                       const lfs_sandbox_options *options, int *ret_sandbox,
                                       lfs_error **err);
/* LAYERFS_POOL=N (0 to 16; unset: 0): creates with the same options and settings share a
 * pool of N Sandboxes made ahead, and lfs_sandbox_create_with takes one when there is one
 * (whose daemon answers) instead of making one (docs/runtime.md). This makes pooled
 * Sandboxes for creates like one with these options until N are there; one process fills
 * a pool at a time (another that finds it at work returns 0). ready_fd (or -1) is closed
 * once this process holds the fillers' lock (HOME/pool/fillers.lock, shared): a caller
 * that runs the fill in a process of its own waits on it and returns, and one that takes
 * that lock exclusively waits until every fill under way is done. A pooled Sandbox's idle
 * close (LAYERFS_IDLE_SECONDS) ends it as any other's. */
LFS_PUBLIC int lfs_sandbox_pool_fill(lfs_home *home, const char *project, const lfs_sandbox_options *options,
                                     int ready_fd, lfs_error **err);
/* The limits a running Sandbox was made with, as its record keeps them. */
LFS_PUBLIC int lfs_sandbox_get_limits(lfs_home *home, const char *project, int sandbox,
                                      lfs_sandbox_limits *ret, lfs_error **err);
/* A Sandbox's network, as its record keeps it. */
typedef struct lfs_sandbox_network {
        char mode[8]; /* "none", "host" or "private" */
        /* private: the host's end of its veth pair (a link of the host's) and its address,
         * and the Sandbox's address (on its eth0, its default route through the host's),
         * dotted, on a /prefix of their own; empty otherwise. */
        char host_link[16];
        char host_address[16];
        char sandbox_address[16];
        int prefix; /* 30 for private, else 0 */
} lfs_sandbox_network;
LFS_PUBLIC int lfs_sandbox_get_network(lfs_home *home, const char *project, int sandbox,
                                       lfs_sandbox_network *ret, lfs_error **err);
/* A running Sandbox as `project list_sandboxes` shows it: what lfs_sandbox_list gives,
 * its limits and network from its record, and whether its daemon answered. */
typedef struct lfs_sandbox_details {
        char *project;
        int sandbox;
        char *platform;
        size_t workspaces; /* its daemon's count; 0 when it did not answer */
        lfs_sandbox_limits limits;
        lfs_sandbox_network network;
        /* 0: its daemon gave no answer within 2 s (stopped, hung, or closing meanwhile):
         * it is listed from its record, its Workspaces not counted. */
        int answered;
} lfs_sandbox_details;
/* Every running Sandbox of the home, as lfs_sandbox_list, read from the records at once
 * and each daemon asked for its Workspaces at the same time as the others: a daemon
 * that does not answer costs the list 2 s at most, and is listed as such. */
LFS_PUBLIC int lfs_sandbox_list_details(lfs_home *home, lfs_sandbox_details **ret, size_t *ret_n,
                                        lfs_error **err);
LFS_PUBLIC void lfs_sandbox_details_free(lfs_sandbox_details *items, size_t n);
/* Ends the Sandbox's daemon, unmounts, removes its directory and record. Refuses Dirty
 * unless force. */
LFS_PUBLIC int lfs_sandbox_close(lfs_home *home, const char *project, int sandbox, int force,
                                 lfs_error **err);

typedef struct lfs_workspace_info {
        char *branch;
        char *path;
        int dirty;
        char *platform; /* the Sandbox's */
        char *transport; /* the FUSE loop serving its mount: "libfuse", "dev" */
        int passthrough; /* whether upper files' data passes between the kernel and them */
        /* What the daemon keeps of its namespace now: the bytes counted against
         * LAYERFS_WORKSPACE_MEMORY, and the inode records (what the kernel has looked up and
         * still holds, what changed, and the directories listed). */
        uint64_t metadata_bytes;
        uint64_t inodes;
} lfs_workspace_info;

LFS_PUBLIC int lfs_sandbox_list_workspaces(lfs_home *home, const char *project, int sandbox,
                                           lfs_workspace_info **ret, size_t *ret_n, lfs_error **err);
LFS_PUBLIC void lfs_workspace_info_free(lfs_workspace_info *items, size_t n);

typedef struct lfs_sandbox_info {
        char *project;
        int sandbox;
        char *platform;
        char *image; /* NULL for linux */
        size_t workspaces;
} lfs_sandbox_info;

/* Every running Sandbox of the home (all projects), by project and number. */
LFS_PUBLIC int lfs_sandbox_list(lfs_home *home, lfs_sandbox_info **ret, size_t *ret_n, lfs_error **err);
LFS_PUBLIC void lfs_sandbox_info_free(lfs_sandbox_info *items, size_t n);

/* The last lines (0: 100) of the Sandbox daemon's log, also after the daemon died. */
LFS_PUBLIC int lfs_sandbox_log(lfs_home *home, const char *project, int sandbox, size_t lines,
                               char **ret_text, lfs_error **err);

/* Mounts branch in the Sandbox; *ret_path is the Workspace's path (free it). */
LFS_PUBLIC int lfs_workspace_mount(lfs_home *home, const char *project, int sandbox, const char *branch,
                                   char **ret_path, lfs_error **err);
LFS_PUBLIC int lfs_workspace_status(lfs_home *home, const char *project, int sandbox, const char *branch,
                                    lfs_change **ret_changes, size_t *ret_n, lfs_error **err);
LFS_PUBLIC int lfs_workspace_commit(lfs_home *home, const char *project, int sandbox, const char *branch,
                                    const char *message, lfs_id *ret_commit, int *ret_merged,
                                    lfs_error **err);
LFS_PUBLIC int lfs_workspace_unmount(lfs_home *home, const char *project, int sandbox, const char *branch,
                                     int discard, lfs_error **err);

typedef struct lfs_exec_options {
        const char *cwd; /* below the Workspace (relative, or absolute inside it) */
        const char *const *env; /* KEY=VALUE entries added to PATH, HOME and TMPDIR */
        size_t n_env;
        double timeout; /* seconds; 0: none. At the end, the whole command's
                           cgroup is killed and the exit status is 124 */
        int stdin_fd; /* given to the command as it is, unless it is a terminal: a command
                         never receives the caller's terminal, so what it reads is copied
                         through a pipe while it runs; -1: /dev/null */
        int stdout_fd, stderr_fd; /* where its output is copied while it runs; -1: dropped */
        int tty; /* non-zero: the command gets a pseudo-terminal of its own as its
                    controlling terminal (stdin, stdout and stderr; its output then comes
                    to stdout_fd), with TERM from our environment. A stdin_fd that is a
                    terminal is in raw mode meanwhile (restored however the call ends,
                    also by a signal that ends the process); the window size follows the
                    caller's terminal (SIGWINCH). One such call at a time per process. */
} lfs_exec_options;

/* Runs argv (n_argv words) in the Workspace of branch, as the command identity, in a
 * cgroup of its own below the Sandbox's. Output streams while it runs; *ret_exit is its
 * status as docker run gives it (126 could not run, 127 not found, 124 timeout, 128+N
 * signal N). Output that processes it left in the background write after it ended is
 * not copied. A command that could not be started is Failed, its message naming the step
 * of the start that failed (its cgroup, the Sandbox's namespaces, its working
 * directory...), with the value and what to do; so for lfs_process_start. */
LFS_PUBLIC int lfs_workspace_exec(lfs_home *home, const char *project, int sandbox, const char *branch,
                                  const char *const *argv, size_t n_argv, const lfs_exec_options *options,
                                  int *ret_exit, lfs_error **err);

/* Starts argv in the Workspace of branch in the background, in a cgroup of its own; its
 * stdin is /dev/null and its output goes to *ret_log (a file in the Sandbox's directory;
 * NULL: not returned). It lives until it ends, is killed, or the Sandbox closes. */
LFS_PUBLIC int lfs_process_start(lfs_home *home, const char *project, int sandbox, const char *branch,
                                 const char *const *argv, size_t n_argv, const lfs_exec_options *options,
                                 int *ret_pid, char **ret_log, lfs_error **err);

typedef struct lfs_process_info {
        int pid;
        char *cgroup; /* the command's leaf: cmd-<k> */
        char *command; /* its command line (running) or program (exited) */
        int running; /* 0: it was started with process start and has exited with exit */
        int exit;
} lfs_process_info;

/* Every live process of the Sandbox (also those that detached), then the processes
 * started with lfs_process_start that have ended, with their exit status. */
LFS_PUBLIC int lfs_process_list(lfs_home *home, const char *project, int sandbox, lfs_process_info **ret,
                                size_t *ret_n, lfs_error **err);
LFS_PUBLIC void lfs_process_info_free(lfs_process_info *items, size_t n);
/* SIGKILLs pid if it is a process of the Sandbox; InvalidInput otherwise. */
LFS_PUBLIC int lfs_process_kill(lfs_home *home, const char *project, int sandbox, int pid, lfs_error **err);

/* Called with each process event of a Sandbox, one JSON object as text:
 * {"event": "start"|"exit", "pid", "ppid", "cgroup", "comm", "time", "exit"|"signal"}.
 * A non-zero return stops the stream. */
typedef int (*lfs_event_fn)(void *userdata, const char *json);

/* The Sandbox's recent process events (the daemon keeps the last 4,096), then, with
 * follow, each new one as it happens until the Sandbox closes or fn returns non-zero.
 * *ret_watcher (if not NULL, without follow): "bpf" or "cgroup". */
LFS_PUBLIC int lfs_sandbox_events(lfs_home *home, const char *project, int sandbox, int follow,
                                  lfs_event_fn fn, void *userdata, char **ret_watcher, lfs_error **err);

typedef struct lfs_feature {
        char *name; /* "kernel:cgroup.kill", ... (kconfig-notes/ says what each needs) */
        int present;
        char *note; /* NULL, or what else the probe found */
} lfs_feature;

typedef struct lfs_platform_status {
        char *id;
        int allowed; /* by the home's placement (one kernel opens a Store) */
        int ready; /* allowed, and nothing missing */
        char **missing; /* "kernel:cgroup.kill", "tool:qemu-system-x86_64", "socket:docker", ... */
        size_t n_missing;
} lfs_platform_status;

typedef struct lfs_runtime_info {
        char *home;
        char *placement; /* "host" */
        char *default_runtime; /* what a new linux Sandbox gets: LAYERFS_RUNTIME's, LAYERFS_SANDBOX's,
                                  else namespaces where ready, else native */
        char *watcher; /* what a new Sandbox would watch its processes with */
        lfs_feature *features;
        size_t n_features, cap_features;
        lfs_platform_status *platforms; /* all eight */
        size_t n_platforms;
        char **missing; /* every absent kernel feature, and what the allowed platforms lack */
        size_t n_missing, cap_missing;
        /* The linux platform's runtimes ("native", "namespaces"), each as a platform is. */
        lfs_platform_status *runtimes;
        size_t n_runtimes;
        /* Why default_runtime is not linux's preferred one (NULL when it is, or when the
         * home names its runtime): "namespaces is not ready here: kernel:userns". */
        char *default_why;
        /* The FUSE loop a new Sandbox's Workspaces get ("libfuse", "dev", "uring":
         * LAYERFS_FUSE_TRANSPORT, else dev; with LAYERFS_FUSE_URING=auto or on, uring
         * where the host has FUSE over io_uring on or the daemon may turn it on, else
         * dev) and whether their upper files' data passes through (our own loop on a
         * kernel with passthrough, unless LAYERFS_FUSE_PASSTHROUGH=0). */
        char *fuse_transport;
        int fuse_passthrough; /* 1 or 0 */
} lfs_runtime_info;

/* Probes what this host's kernel offers (by trying it, not by its version). As root it
 * makes LayerFS's cgroup root if missing (the cgroup.kill and clone3 probes use it). */
LFS_PUBLIC int lfs_runtime_status(lfs_home *home, lfs_runtime_info **ret, lfs_error **err);
LFS_PUBLIC void lfs_runtime_info_free(lfs_runtime_info *s);

typedef struct lfs_reclaimed {
        char *project;
        int sandbox;
        char *dir;
        /* NULL: removed. Else the record was left alone, and this says why: a field that
         * is not what this home writes (InvalidInput's message), or what of the Sandbox
         * could not be removed (the record stays for the next reclaim). */
        char *left_alone;
} lfs_reclaimed;

/* Cleans up after every Sandbox of the home whose daemon is gone: kills what is left in
 * its cgroup, detaches its mounts, removes its cgroups, directory and record. Records
 * that fail their checks, or whose remains cannot all be removed, are left alone and
 * listed with left_alone set. */
LFS_PUBLIC int lfs_runtime_reclaim(lfs_home *home, lfs_reclaimed **ret, size_t *ret_n, lfs_error **err);
LFS_PUBLIC void lfs_reclaimed_free(lfs_reclaimed *items, size_t n);

#ifdef __cplusplus
}
#endif
#endif
