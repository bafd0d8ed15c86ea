/* SPDX-License-Identifier: MIT */
/*
 * The eight platforms of SPEC 5 in one table: each one's family, its runtime (runtime.h:
 * the operations that hold its Sandboxes, and the name a record of it keeps) and what its
 * readiness needs beyond the runtime's. Adding a platform is adding a row (and, for a new
 * runtime, a folder of backends/ with its table). Functions return 0 or a negative errno
 * with *err set.
 */
#ifndef LFS_PLATFORMS_H
#define LFS_PLATFORMS_H

#include <stdbool.h>
#include <stddef.h>

#include "layerfs.h"
#include "runtime.h"

typedef enum lfs_family { LFS_FAMILY_LINUX, LFS_FAMILY_CONTAINER, LFS_FAMILY_VM } lfs_family;

/* A name in the `missing` lists of runtime.status, with a word on how to get it. */
typedef struct lfs_missing {
        const char *names[8];
        size_t n;
} lfs_missing;
/* Adds name (a static string) unless the list is full. */
void lfs_missing_add(lfs_missing *m, const char *name);

typedef struct lfs_platform {
        const char *id;
        lfs_family family;
        const lfs_runtime *runtime; /* its name is what a record keeps: native, docker, vm */
        /* Adds what this host lacks for this platform beyond its runtime's needs (a
         * socket, a tool, the host); NULL: nothing. */
        void (*probe)(lfs_missing *missing);
        /* The runtime a new Sandbox of it gets when none is named and this host has what
         * that runtime needs (its prepare does not refuse it Unsupported); else runtime's.
         * NULL: always runtime. linux: namespaces. */
        const lfs_runtime *preferred;
} lfs_platform;

extern const lfs_platform lfs_platforms[];
extern const size_t lfs_n_platforms;

/* "linux, docker, podman, firecracker, qemu, lima, mac, wsl" */
const char *lfs_platform_names(void);
const lfs_platform *lfs_platform_find(const char *id); /* exact, case-sensitive; NULL if none */

/* LAYERFS_PLACEMENT: "host" (default) or a VM route name; InvalidInput otherwise. */
int lfs_placement(const char **ret, lfs_error **err);
/* Whether a home of this placement allows the platform: host allows linux, docker and
 * podman; a route allows itself, docker and podman (inside that VM). */
bool lfs_platform_allowed(const lfs_platform *p, const char *placement);
/* The platforms a placement allows, comma-separated. */
char *lfs_allowed_names(const char *placement);

/* LAYERFS_SANDBOX, the home's default runtime, read here only: "native" when unset, else
 * native, namespaces or docker (static strings); anything else (the empty string too) is
 * InvalidInput naming the value. */
int lfs_default_runtime(const char **ret, lfs_error **err);
/* The runtime a new Sandbox of p runs on: p's own for a platform with one; for one with a
 * preferred runtime too (linux: native and namespaces) the one LAYERFS_RUNTIME names when
 * set, else the one LAYERFS_SANDBOX names when it names one of them, else the preferred,
 * with *ret_fallback (else NULL) the one to use where the preferred's prepare refuses
 * Unsupported. Anything else in LAYERFS_RUNTIME (the empty string too) is InvalidInput
 * naming the value. */
int lfs_platform_new_runtime(const lfs_platform *p, const lfs_runtime **ret,
                             const lfs_runtime **ret_fallback, lfs_error **err);
/* The runtime a record of platform p names: p's own or its preferred; NULL (p's own) for
 * records from before runtimes were recorded; NULL for any other name. */
const lfs_runtime *lfs_platform_runtime(const lfs_platform *p, const char *name);
/* The runtime of any platform named name (a record's runtime column); NULL if none. */
const lfs_runtime *lfs_runtime_find(const char *name);

/* runtime.status's platforms: each one's readiness on this host, and whether s's
 * placement allows it; what an allowed one lacks joins s->missing. And linux's runtimes:
 * each one's readiness, the default a new Sandbox gets and why it is not the preferred. */
void lfs_platforms_status(lfs_runtime_info *s);

/* The platform a record names; one from before platforms were recorded (NULL) reads as
 * the one its runtime implies: native/namespaces linux, docker docker, vm the home's
 * route. */
const char *lfs_record_platform(const char *platform, const char *runtime, const char *placement);

/* What this host lacks for p: its own probe's names, then its runtime's. */
void lfs_platform_missing(const lfs_platform *p, lfs_missing *missing);

/* Checks a requested platform (NULL: the home's default, LAYERFS_SANDBOX) before anything
 * is made: unknown names are InvalidInput listing the eight; known but not allowed by
 * the home is Unsupported naming the home, its placement and what it allows; allowed but
 * not ready is Unsupported naming what is missing. *ret is the platform to use. */
int lfs_platform_choose(const char *home, const char *requested, const lfs_platform **ret, lfs_error **err);

#endif
