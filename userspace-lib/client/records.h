/* SPDX-License-Identifier: MIT */
/*
 * The Sandbox records in <home>/home.db (records.c). A record is one instance of a
 * numbered Sandbox: it is claimed in one transaction, owned by one live process at a
 * time (the creator while 'starting', the daemon while 'running', whoever removes it
 * while 'removing'), changes owner only by compare-and-swap on the owner it was read
 * with, and is deleted by its instance only after everything it names is gone. Every
 * field is checked against the rules that made it before anything acts on it.
 */
#ifndef LFS_RECORDS_H
#define LFS_RECORDS_H

#include <sqlite3.h>

#include <stdint.h>

#include "runtime.h"
#include "store.h"

typedef struct sandbox_record {
        char *project;
        int number;
        char *instance; /* 32 hex digits: this Sandbox, not an earlier or later one with its number */
        /* The owner: the creating process while 'starting', the daemon while 'running',
         * who removes it while 'removing' (0: nobody now; anyone may take it over). */
        pid_t pid;
        unsigned long long start_time; /* of the owner, in clock ticks since boot */
        char *boot_id;
        char *dir;
        char *cgroup; /* NULL in records from before Sandboxes had cgroups */
        char *platform;
        char *runtime; /* native, namespaces, docker, vm */
        /* namespaces: the first host uid and gid of the Sandbox's own 65536 (its ids
         * 0..65535 map onto them); 0 for the other runtimes. */
        uint32_t id_base;
        char *state; /* starting, running, removing */
        lfs_sandbox_limits limits; /* what it was made with (0: none) */
        lfs_network network;
        /* private: the first address (host order) of its /30 (+1 the host's end, +2 its
         * own); 0 otherwise. */
        uint32_t net_base;
        int dir_fd; /* the Sandbox's directory once opened (sandbox.c), else -1 */
} sandbox_record;

void lfs_record_done(sandbox_record *rec);

/* Opens home.db (made 0600 if missing), the table made or brought up to date. */
int lfs_records_open(lfs_home *home, sqlite3 **ret, lfs_error **err);
/* Closes a connection of lfs_records_open without the checkpoint SQLite makes when the last
 * connection closes (records.c says why). */
void lfs_records_close(sqlite3 *db);

/* "<home>/sandboxes/<project>-<n>": where a Sandbox's directory is. */
char *lfs_sandbox_dir(const lfs_home *home, const char *project, int number);

/* Field 22 of /proc/PID/stat, -ESRCH for a zombie. */
int lfs_process_start_time(pid_t pid, unsigned long long *ret);
/* True only if pid, start time and boot id all match a running process (SPEC 4). */
bool lfs_record_alive(const sandbox_record *rec);

/* Claims the smallest free number of project: a 'starting' row owned by the caller,
 * with a new instance and its limits, on runtime, in one transaction. A namespaces Sandbox
 * gets its own range of host ids there too: the lowest 65536 of the home's id range
 * (LAYERFS_ID_RANGE, FIRST:COUNT; default 1073741824:1073741824) that no other record of
 * the home holds and that no /etc/subuid or /etc/subgid entry overlaps; LimitReached when
 * none is left. A private network gets its /30 there too: the lowest of LAYERFS_NET_RANGE
 * that no record holds and that holds none of the host's addresses; LimitReached when
 * none is left. *ret_id_hold: the host-wide lock of the id range (for the Sandbox's init to
 * keep), or -1 when the runtime has no range; *ret_net_hold: the host-wide lock of the /30
 * (for the create to keep until the host's end of the network has its address), or -1. */
int lfs_record_claim(lfs_home *home, sqlite3 *db, const char *project, const char *cgroup_root,
                     const lfs_runtime *rt, const lfs_sandbox_limits *limits, lfs_network network,
                     sandbox_record *ret, int *ret_id_hold, int *ret_net_hold, lfs_error **err);
/* A private network's record is acted on only if no other record names its link (the
 * first 12 digits of its instance; a create never writes two): else InvalidInput naming
 * both. */
int lfs_record_check_link(lfs_home *home, sqlite3 *db, const sandbox_record *rec, lfs_error **err);
/* LAYERFS_NET_RANGE (A.B.C.D/N; default 169.254.64.0/18): the addresses this home's private
 * networks take their /30s from: its first address and how many. */
int lfs_net_range(uint32_t *ret_first, uint32_t *ret_count, lfs_error **err);
/* Whether base could be a private network's /30 as a create claims it: a multiple of 4
 * outside 0.0.0.0/8, 127.0.0.0/8 and 224.0.0.0/3. */
bool lfs_net_base_valid(long long base);
/* LAYERFS_ID_RANGE: the host ids this home's namespaces Sandboxes take their ranges from. */
int lfs_id_range(uint32_t *ret_first, uint32_t *ret_count, lfs_error **err);

/* The record of project's Sandbox number, checked field by field: NoSuchSandbox when
 * there is none, InvalidInput saying which field is wrong with which value. */
int lfs_record_read(lfs_home *home, sqlite3 *db, const char *project, int number, sandbox_record *ret,
                    lfs_error **err);

/* Calls fn for each record: checked (rec set, why NULL) or refused (rec NULL, why the
 * message; project and number as the row has them, for reports). */
typedef void (*lfs_record_fn)(void *userdata, sandbox_record *rec, const char *project, long long number,
                              lfs_error *why);
int lfs_records_each(lfs_home *home, sqlite3 *db, lfs_record_fn fn, void *userdata, lfs_error **err);

/* Moves the record from the owner it was read with to pid (0: nobody) in state, in one
 * compare-and-swap: -ESTALE (no error set) if its owner or instance changed meanwhile.
 * rec is updated. */
int lfs_record_set_owner(sqlite3 *db, sandbox_record *rec, pid_t pid, const char *state, lfs_error **err);

/* Deletes the record of this instance (and no later one with its number). */
int lfs_record_delete(sqlite3 *db, const sandbox_record *rec, lfs_error **err);

/* The pool (LAYERFS_POOL, pool.c). A pooled Sandbox is a whole Sandbox made ahead of its
 * create: its record is 'pooled', owned by its daemon, with the key of the creates it may
 * serve (pool column). Offer: rec (the filler's 'starting' record) becomes daemon's,
 * pooled with key. */
int lfs_record_pool_offer(sqlite3 *db, sandbox_record *rec, pid_t daemon, const char *key, lfs_error **err);
/* How many pooled Sandboxes of project with key have a live daemon. */
int lfs_record_pool_count(lfs_home *home, sqlite3 *db, const char *project, const char *key, size_t *ret,
                          lfs_error **err);
/* Takes the lowest pooled Sandbox of project (NULL: any) with key (NULL: any) whose daemon
 * is alive: its record is 'running' from then on (one transaction; no two takers get one).
 * -ENOENT (no error set) when there is none. */
int lfs_record_pool_take(lfs_home *home, sqlite3 *db, const char *project, const char *key,
                         sandbox_record *ret, lfs_error **err);

/* For the daemon's own teardown: deletes the record of this instance of project's
 * Sandbox number: its teardown finished. */
int lfs_sandbox_record_delete(lfs_home *home, const char *project, int number, const char *instance);
/* Its teardown could not finish: the record (owned by the calling daemon) is left to
 * whoever takes it over next (state removing, no owner). */
int lfs_sandbox_record_release(lfs_home *home, const char *project, int number, const char *instance);
/* Its teardown left the place to its closer (process closer, alive): the record is the
 * closer's (state removing), which removes the rest once the daemon exited. */
int lfs_sandbox_record_hand_over(lfs_home *home, const char *project, int number, const char *instance,
                                 pid_t closer);

#endif
