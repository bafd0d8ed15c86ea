/* SPDX-License-Identifier: MIT */
/*
 * runtime.status (what this host offers: the kernel probes of backends/probe.c and the
 * platforms of backends/platforms.c) and runtime.reclaim (Sandboxes whose daemon is gone,
 * taken over and removed).
 */
#include <limits.h>

#include "client.h"
#include "platforms.h"
#include "probe.h"

int lfs_runtime_status(lfs_home *home, lfs_runtime_info **ret, lfs_error **err) {
        const char *placement = "host";
        int r = lfs_placement(&placement, err);
        if (r < 0)
                return r;
        lfs_runtime_info *s = xcalloc(1, sizeof(*s));
        s->home = xstrdup(home->path);
        s->placement = xstrdup(placement);
        lfs_probe_features(s);
        lfs_platforms_status(s);
        const char *transport = getenv("LAYERFS_FUSE_TRANSPORT");
        const char *passthrough = getenv("LAYERFS_FUSE_PASSTHROUGH");
        const char *uring = getenv("LAYERFS_FUSE_URING");
        bool named = transport && *transport;
        transport = named ? transport : LFS_FUSE_DEFAULT_TRANSPORT;
        /* Rings where asked for and there (or the daemon may set the switch), else the
         * dev loop they fall back to; the transport named uring stays (sandbox create
         * refuses it where the rings are not there). */
        int rings = lfs_probe_fuse_uring();
        bool may_set = uring && !strcmp(uring, "on");
        bool rings_asked = may_set || (uring && !strcmp(uring, "auto"));
        if (rings_asked && (!named || !strcmp(transport, "dev")))
                transport = rings > 0 || (rings == 0 && may_set) ? "uring" : "dev";
        s->fuse_transport = xstrdup(transport);
        bool own_loop = strcmp(s->fuse_transport, "libfuse") != 0;
        for (size_t i = 0; i < s->n_features; i++)
                if (!strcmp(s->features[i].name, "kernel:fuse-passthrough"))
                        s->fuse_passthrough = s->features[i].present && own_loop &&
                                              !(passthrough && !strcmp(passthrough, "0"));
        *ret = s;
        return 0;
}

/* runtime.status's rows of platforms or of runtimes, and the array. */
static void free_status_rows(lfs_platform_status *rows, size_t n) {
        for (size_t i = 0; i < n; i++) {
                for (size_t k = 0; k < rows[i].n_missing; k++)
                        free(rows[i].missing[k]);
                free(rows[i].missing);
                free(rows[i].id);
        }
        free(rows);
}

void lfs_runtime_info_free(lfs_runtime_info *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n_features; i++) {
                free(s->features[i].name);
                free(s->features[i].note);
        }
        free(s->features);
        free_status_rows(s->platforms, s->n_platforms);
        free_status_rows(s->runtimes, s->n_runtimes);
        free(s->default_why);
        for (size_t i = 0; i < s->n_missing; i++)
                free(s->missing[i]);
        free(s->missing);
        free(s->home);
        free(s->placement);
        free(s->default_runtime);
        free(s->watcher);
        free(s->fuse_transport);
        free(s);
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
        lfs_sandbox_ref sb;
        const lfs_platform *p = NULL;
        const lfs_runtime *rt = lfs_record_runtime(s->home, rec, &p, &sb);
        lfs_error *e = NULL;
        if (rt->reach(p, &sb, NULL) < 0 || lfs_record_alive(rec) ||
            lfs_record_set_owner(s->db, rec, getpid(), "removing", &e) < 0) {
                lfs_error_free(e);
                return;
        }
        if (lfs_remove_remains(s->home, s->db, rec, &e) < 0)
                reclaimed_add(s, rec->project, rec->number, rec->dir, e ? e->message : "failed");
        else
                reclaimed_add(s, rec->project, rec->number, rec->dir, NULL);
        lfs_error_free(e);
}

int lfs_reclaim_with(lfs_home *home, sqlite3 *db, lfs_reclaimed **ret, size_t *ret_n, lfs_error **err) {
        reclaim_state s = { .home = home, .db = db };
        int r = lfs_records_each(home, db, reclaim_one, &s, err);
        if (r < 0) {
                lfs_reclaimed_free(s.out, s.n);
                return r;
        }
        *ret = s.out;
        *ret_n = s.n;
        return 0;
}

static void orphan_found(void *userdata, const char *home, const char *project, int number, const char *dir,
                         const char *left_alone) {
        (void)home; /* dir names it */
        reclaimed_add(userdata, project, number, dir, left_alone);
}

/* The Sandboxes of every home that is gone, through each runtime that keeps places on
 * this host (linux's two share one cgroup root: swept once). */
static void reclaim_orphans(reclaim_state *s) {
        int (*swept[4])(lfs_orphan_fn, void *) = { NULL };
        size_t n_swept = 0;
        for (size_t i = 0; i < lfs_n_platforms; i++) {
                const lfs_runtime *rts[] = { lfs_platforms[i].runtime, lfs_platforms[i].preferred };
                for (size_t k = 0; k < ELEMENTSOF(rts); k++) {
                        bool done = !rts[k] || !rts[k]->reclaim_orphans;
                        for (size_t j = 0; j < n_swept && !done; j++)
                                done = swept[j] == rts[k]->reclaim_orphans;
                        if (done || n_swept == ELEMENTSOF(swept))
                                continue;
                        swept[n_swept++] = rts[k]->reclaim_orphans;
                        (void)rts[k]->reclaim_orphans(orphan_found, s);
                }
        }
}

/* The Sandboxes of this home whose daemon is gone. */
static int reclaim_home(lfs_home *home, lfs_reclaimed **ret, size_t *ret_n, lfs_error **err) {
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        if (access(path, F_OK) < 0)
                return 0;
        /* A 'sandboxes' that is not the home's own: nothing below it is touched. */
        _cleanup_close_ int base = -1;
        int r = lfs_home_dir(home, "sandboxes", 0711, false, &base, err);
        if (r < 0 && r != -ENOENT)
                return r;
        sqlite3 *db = NULL;
        if ((r = lfs_records_open(home, &db, err)) < 0)
                return r;
        r = lfs_reclaim_with(home, db, ret, ret_n, err);
        lfs_records_close(db);
        return r;
}

int lfs_runtime_reclaim(lfs_home *home, lfs_reclaimed **ret, size_t *ret_n, lfs_error **err) {
        *ret = NULL;
        *ret_n = 0;
        int r = reclaim_home(home, ret, ret_n, err);
        if (r < 0)
                return r;
        /* Then those of the homes that are gone, which no home's records name. */
        reclaim_state s = { .home = home, .out = *ret, .n = *ret_n, .cap = *ret_n };
        reclaim_orphans(&s);
        *ret = s.out;
        *ret_n = s.n;
        return 0;
}
