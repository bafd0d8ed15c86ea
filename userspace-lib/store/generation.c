/* SPDX-License-Identifier: MIT */
/* Commits' generations, as in git's commit-graph: a first commit's is 1, any other's 1 +
 * the highest of its parents'. An ancestor's is lower than its descendant's, so a walk
 * that takes the highest generation first has seen every descendant of a commit before
 * it (merge.c). A commit is written with its generation (lfs_db_put_commit); a Store made
 * before the column, or a commit written by a layerfs before it, has none, and the first
 * question about a commit fills it for that commit and its ancestors: once, O(history),
 * then never again.
 *
 * The fill writes in transactions of a chunk of commits each, never one long one: a
 * writer waits for one chunk at most, as for a commit (the whole of a long history in
 * one transaction would hold the Store's write lock for seconds, and another writer would
 * give up Busy after its busy_timeout). Each chunk is committed whole or not at all, and
 * whatever a chunk recorded is right (each generation from parents' ones already
 * recorded), so a fill killed between or inside chunks leaves a Store whose next fill
 * goes on. Two processes filling at once take turns at the write lock and write the same
 * values (a generation is its commit's own: the id names the parents), each where none
 * is yet. No gc.lock: a generation names no object, and a gc that deletes a commit the
 * fill then updates changes no row. */
#include "fault.h"
#include "store.h"

static int commit_fail(lfs_store *s, const lfs_id *id, const char *why, lfs_error **err) {
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(id, hex);
        return lfs_fail(err, LFS_FAILED, EIO, "commit %s of project '%s' %s", hex, s->project, why);
}

/* The generation of id's row once its parents have theirs: 0 while one has none (each
 * such parent pushed onto *stack, a parent waiting on its own parents being a cycle). */
static int generation_from_parents(lfs_store *s, const lfs_id *parents, size_t n, const lfs_idset *waiting,
                                   lfs_id **stack, size_t *depth, size_t *cap, uint64_t *ret,
                                   lfs_error **err) {
        uint64_t highest = 0;
        bool ready = true;
        for (size_t i = 0; i < n; i++) {
                lfs_id pp[2];
                size_t pn;
                uint64_t g;
                int r = lfs_db_get_parents(s, &parents[i], pp, &pn, &g, err);
                if (r < 0)
                        return r;
                if (g) {
                        highest = g > highest ? g : highest;
                        continue;
                }
                /* Everything above a waiting commit on the stack is its ancestor: a parent
                 * of one of them that waits too is its own ancestor. */
                if (lfs_idset_has(waiting, &parents[i]))
                        return commit_fail(s, &parents[i],
                                           "is its own ancestor: table commits is damaged; 'layerfs "
                                           "project verify' names what else is",
                                           err);
                ready = false;
                GROW(*stack, *cap, *depth + 1);
                (*stack)[(*depth)++] = parents[i];
        }
        *ret = ready ? highest + 1 : 0;
        return 0;
}

/* Inside a transaction: the commits of the stack given their generations, depth first
 * (a commit once its parents have theirs), up to chunk of them; 1 when more are left. */
static int fill_chunk(lfs_store *s, lfs_id **stack, size_t *depth, size_t *cap, lfs_idset *waiting,
                      size_t chunk, lfs_error **err) {
        size_t written = 0;
        while (*depth && written < chunk) {
                lfs_id id = (*stack)[*depth - 1], parents[2];
                size_t n;
                uint64_t g;
                int r = lfs_db_get_parents(s, &id, parents, &n, &g, err);
                if (r < 0)
                        return r;
                if (g) { /* given its generation since it was pushed */
                        (*depth)--;
                        continue;
                }
                size_t below = *depth;
                if ((r = generation_from_parents(s, parents, n, waiting, stack, depth, cap, &g, err)) < 0)
                        return r;
                if (!g) {
                        lfs_idset_add(waiting, &id);
                        continue;
                }
                if ((r = lfs_db_set_generation(s, &id, g, err)) < 0)
                        return r;
                *depth = below - 1;
                written++;
        }
        return *depth > 0;
}

int lfs_generations_fill(lfs_store *s, const lfs_id *start, size_t chunk, lfs_error **err) {
        lfs_id parents[2];
        size_t n;
        uint64_t g;
        int r = lfs_db_get_parents(s, start, parents, &n, &g, err);
        if (r < 0 || g)
                return r;
        if (!lfs_db_generation_column(s, true))
                return lfs_db_fail(s, err, "add the column of commits' generations");
        /* Inside the caller's transaction, when it has one, as part of it. */
        bool own = sqlite3_get_autocommit(s->db);
        lfs_id *stack = NULL;
        size_t depth = 0, cap = 0;
        lfs_idset waiting = { 0 };
        GROW(stack, cap, 1);
        stack[depth++] = *start;
        do {
                if (own && (r = lfs_db_begin(s, err)) < 0)
                        break;
                r = fill_chunk(s, &stack, &depth, &cap, &waiting, chunk ? chunk : 1, err);
                if (r >= 0)
                        lfs_fault_point("store-generations-chunk"); /* a chunk made, not committed */
                if (own && r >= 0) {
                        int c = lfs_db_commit(s, err);
                        r = c < 0 ? c : r;
                } else if (own) {
                        lfs_db_rollback(s);
                }
        } while (r > 0);
        lfs_idset_done(&waiting);
        free(stack);
        if (r < 0 && err && *err) {
                char hex[LFS_HEX_LEN + 1];
                lfs_id_to_hex(start, hex);
                lfs_error_append(err, " (recording the generations of commit %s and its ancestors)", hex);
        }
        return r < 0 ? r : 0;
}

int lfs_generation_check(lfs_store *s, const lfs_commit_info *c, lfs_error **err) {
        lfs_id parents[2];
        size_t n;
        uint64_t stored, highest = 0;
        int r = lfs_db_get_parents(s, &c->id, parents, &n, &stored, err);
        for (size_t i = 0; i < n && r == 0 && stored; i++) {
                lfs_id pp[2];
                size_t pn;
                uint64_t g;
                r = lfs_db_get_parents(s, &parents[i], pp, &pn, &g, err);
                if (r == 0 && !g)
                        stored = 0; /* a parent not filled yet: the next fill checks no more */
                highest = g > highest ? g : highest;
        }
        /* None recorded yet is no damage: a Store made before them, filled as it is used. */
        if (r < 0 || !stored || stored == highest + 1)
                return r;
        _cleanup_free_ char *why = xasprintf(
                "has generation %llu where its parents make it %llu: table commits is damaged; "
                "\"UPDATE commits SET generation=NULL\" in %s/store.db has the next merge compute every "
                "commit's again",
                (unsigned long long)stored, (unsigned long long)highest + 1, s->path);
        return commit_fail(s, &c->id, why, err);
}
