/* SPDX-License-Identifier: MIT */
/* Numbers from people, the environment and calls, parsed strictly and alike in the CLI,
 * the library and the daemon: decimal digits only (no sign, space, base prefix or
 * suffix), finite, in range, whole where whole. A refusal is InvalidInput naming the
 * value and the accepted range. */
#ifndef LFS_NUMBERS_H
#define LFS_NUMBERS_H

#include <jansson.h>
#include <stdint.h>

#include "util.h"

/* The longest exec timeout (s): far beyond any command, and exact in milliseconds. */
#define LFS_MAX_TIMEOUT_SECONDS 1000000000.0
/* An idle Sandbox closes after this long; LAYERFS_IDLE_SECONDS may shorten it (SPEC 1). */
#define LFS_IDLE_SECONDS 120.0
/* The daemon counts idle time in milliseconds. */
#define LFS_MIN_IDLE_SECONDS 0.001
/* A pid as the kernel's pid_t holds it. */
#define LFS_MAX_PID INT32_MAX

/* text as a whole number from min to max; what names it in a refusal ("--limit"). */
int lfs_parse_whole(const char *what, const char *text, uint64_t min, uint64_t max, uint64_t *ret,
                    lfs_error **err);
/* text as a decimal number from min to max: digits with an optional fraction and exponent
 * (2, 0.5, 1e3), never inf, nan or hex; noun names what it counts in a refusal ("number of
 * CPUs": "--cpus 'x' is not a number of CPUs: give one from 0.01 to 2"). */
int lfs_parse_decimal(const char *what, const char *text, const char *noun, double min, double max,
                      double *ret, lfs_error **err);
/* text as a number of seconds from min to max: digits with an optional fraction and
 * exponent (2, 0.5, 1e3), never inf, nan or hex. */
int lfs_parse_seconds(const char *what, const char *text, double min, double max, double *ret,
                      lfs_error **err);

/* text as a size in bytes: digits with an optional K, M, G or T (powers of 1024),
 * above zero and below 2^64 (-ERANGE past it). */
int lfs_parse_size(const char *what, const char *text, uint64_t *ret, lfs_error **err);

/* The call argument v (JSON) as a whole number from min to max: an integer, never a
 * fraction, a string or a number cut to fit. */
int lfs_json_whole(const char *what, const json_t *v, long long min, long long max, long long *ret,
                   lfs_error **err);
/* The call argument v (JSON) as a number of seconds from min to max. */
int lfs_json_seconds(const char *what, const json_t *v, double min, double max, double *ret,
                     lfs_error **err);

/* The limits of a Sandbox (lfs_sandbox_limits), as the record keeps them: a Sandbox's
 * daemon runs within its memory and pids limits too, so each has a floor that leaves it
 * room: it starts with one thread and about 6 MiB; each mounted Workspace adds two
 * threads (33 with 16 Workspaces) and each connection one while it lasts. */
#define LFS_MIN_MEMORY (64ull << 20)
#define LFS_MAX_MEMORY ((uint64_t)INT64_MAX)
#define LFS_MIN_PIDS 64
#define LFS_MAX_PIDS (4 * 1024 * 1024) /* PID_MAX_LIMIT on 64-bit */
/* cpu.max takes a quota from 1 ms per 100 ms period. */
#define LFS_MIN_CPUS 0.01
#define LFS_MAX_CPUS 65536.0
#define LFS_MIN_DISK (1ull << 20)
#define LFS_MAX_DISK ((uint64_t)INT64_MAX)

/* The limits of o (NULL fields: none) as numbers, each checked against its form and range
 * (cpus also against this host's online CPUs): InvalidInput naming the option, the value
 * and what it takes. */
int lfs_parse_limits(const lfs_sandbox_options *o, lfs_sandbox_limits *ret, lfs_error **err);

/* Who commands run as and who owns Store files in a Workspace (SPEC 3): 501:20, or
 * LAYERFS_COMMAND_UID / LAYERFS_COMMAND_GID, each from 1 to 4294967294 (0 is root's, and
 * 4294967295 is (uid_t)-1, "no change": neither may stand for the command identity). */
int lfs_command_identity(uid_t *ret_uid, gid_t *ret_gid, lfs_error **err);

/* How long a Sandbox with nothing to do lives: LFS_IDLE_SECONDS, or LAYERFS_IDLE_SECONDS
 * from LFS_MIN_IDLE_SECONDS to LFS_IDLE_SECONDS. */
int lfs_idle_seconds(double *ret, lfs_error **err);

/* After how many branch deletions since the last gc a Sandbox's idle close runs project gc
 * (LAYERFS_GC_AFTER_DELETES, from 1 to 1000000); 0 when unset: never. */
#define LFS_MAX_GC_AFTER_DELETES 1000000
int lfs_gc_after_deletes(uint64_t *ret, lfs_error **err);
/* LAYERFS_WATCHER_LOAD_WAIT_MS: how long a command waits, from the daemon's start, for the
 * default watcher's load (100 to 600000; unset: LFS_WATCHER_LOAD_WAIT_MS). */
#define LFS_WATCHER_LOAD_WAIT_MS 5000
#define LFS_MAX_WATCHER_LOAD_WAIT_MS 600000
int lfs_watcher_load_wait_ms(uint64_t *ret, lfs_error **err);
/* LAYERFS_TEST_MAX_SANDBOXES_PER_ROOT, for the tests: the size of a cgroup root's map of
 * rings, from 1 to LFS_MAX_SANDBOXES_PER_ROOT (unset: that bound). The bound is the BPF
 * watcher's WATCH_MAX_SANDBOXES (bpf/watcher.h, which the BPF program includes). */
#define LFS_MAX_SANDBOXES_PER_ROOT 4096
int lfs_test_max_sandboxes_per_root(uint64_t *ret, lfs_error **err);
/* LAYERFS_POOL: how many Sandboxes a create keeps made ahead for creates like it, from 0
 * to LFS_MAX_POOL (unset: 0, no pool). */
#define LFS_MAX_POOL 16
int lfs_pool_size(uint64_t *ret, lfs_error **err);

#endif
