/* SPDX-License-Identifier: MIT */
/* The Sandbox daemon's shared state and the helpers its calls share. */
#ifndef LFS_DAEMON_H
#define LFS_DAEMON_H

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <jansson.h>
#include <pthread.h>

#include "store.h"
#include "workspace.h"

#define MAX_WORKSPACES 16

typedef struct workspace {
        bool active;
        char *branch;
        char *key; /* the branch as one path component */
        char *mountpoint;
        char *upper;
        lfs_store *store;
        ws_fs *fs;
        struct fuse_session *se;
        pthread_t thread;
} workspace;

/* A command started with process.start, until the daemon exits. */
typedef struct started_process {
        pid_t pid;
        char *leaf;
        char *command;
        char *log;
        bool ended;
        int exit;
} started_process;

typedef struct daemon_state {
        lfs_home *home;
        char *project;
        char *dir;
        char *token;
        char *cgroup; /* the Sandbox's cgroup; the daemon lives in its leaf "daemon" */
        char *tmp; /* the commands' HOME and TMPDIR, owned by the command identity */
        int number;
        uid_t uid; /* the command identity (SPEC 3) */
        gid_t gid;
        /* Everything below is guarded by lock. Each client connection has a thread. */
        pthread_mutex_t lock;
        workspace ws[MAX_WORKSPACES];
        unsigned next_command; /* names the leaves cmd-<k> */
        unsigned running_execs;
        unsigned waiters; /* threads reaping started processes */
        unsigned clients; /* connections being served */
        started_process **started;
        size_t n_started, cap_started;
        bool closing;
        int wake_fd; /* eventfd: tells the accept loop to look again (close, idle) */
} daemon_state;

void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
json_t *error_json(lfs_code code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
json_t *error_from(lfs_error *err); /* frees err */
json_t *ok_json(json_t *result);
json_t *not_mounted(daemon_state *d, const char *branch);
workspace *find_ws(daemon_state *d, const char *branch); /* with d->lock held */
void wake_main_loop(daemon_state *d);

/* workspace.exec: runs req's command in a new leaf of the Sandbox's cgroup with the
 * client's stdin, stdout and stderr (fds, passed with the request), waits for it and
 * answers {exit}. Takes ownership of the fds. */
json_t *call_exec(daemon_state *d, json_t *req, int *fds, size_t n_fds);
/* process.start: the command in a new leaf, in the background, output to a log of its
 * own; answers {pid, cgroup, log}. process.list and process.kill: with d->lock held. */
json_t *call_process_start(daemon_state *d, json_t *req);
json_t *call_process_list(daemon_state *d);
json_t *call_process_kill(daemon_state *d, json_t *req);

#endif
