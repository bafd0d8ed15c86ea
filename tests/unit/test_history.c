/* SPDX-License-Identifier: MIT */
/*
 * Merge bases and ancestor questions over commits' generations (issue 18): the answers
 * on linear, diverged, criss-cross and random merge histories against the ones worked
 * out here from whole ancestor sets; a merge of two Branches diverged by 3 commits on
 * top of 5,000 reads tens of commits, not the history (counted by the Store's
 * commits_read); a Store made before the generations opens, gets them filled (by two
 * processes at once too, and after an older layerfs wrote more commits without them),
 * merges and verifies; verify names a wrong generation and the fix.
 */
#include "helpers.h"
#include "store.h"
#include "store_helpers.h"

/* A history built here: its commits (of the empty tree) in the order written, each's
 * parents as indexes into it, and the generations worked out here. */
#define HIST_MAX 160
typedef struct history {
        lfs_id ids[HIST_MAX];
        int parents[HIST_MAX][2];
        size_t n_parents[HIST_MAX];
        uint64_t gen[HIST_MAX];
        size_t n;
} history;

/* Writes the next commit (as lfs_record_commits does, its generation from the parents'
 * rows); returns its index. */
static int hist_add(test_env *env, history *h, int p1, int p2) {
        assert_true(h->n < HIST_MAX);
        int i = (int)h->n++;
        char message[32];
        fmt_path(message, "c%d", i);
        lfs_commit_info c = {
                .tree = *lfs_empty_tree_id(), .author = "test", .time = 1, .message = message
        };
        h->gen[i] = 1;
        const int ps[2] = { p1, p2 };
        for (size_t k = 0; k < 2; k++) {
                if (ps[k] < 0)
                        continue;
                h->parents[i][c.n_parents] = ps[k];
                c.parents[c.n_parents++] = h->ids[ps[k]];
                h->gen[i] = h->gen[ps[k]] + 1 > h->gen[i] ? h->gen[ps[k]] + 1 : h->gen[i];
        }
        h->n_parents[i] = c.n_parents;
        lfs_commit_compute_id(&c);
        assert_ok(env, lfs_db_put_commit(env->store, &c, &env->err));
        h->ids[i] = c.id;
        return i;
}

/* Whether a is an ancestor of (or is) b, from the parents recorded here. */
static bool hist_reaches(const history *h, int b, int a) {
        bool seen[HIST_MAX] = { false };
        int stack[HIST_MAX * 2], n = 0;
        stack[n++] = b;
        while (n) {
                int x = stack[--n];
                if (x == a)
                        return true;
                if (seen[x])
                        continue;
                seen[x] = true;
                for (size_t k = 0; k < h->n_parents[x]; k++)
                        stack[n++] = h->parents[x][k];
        }
        return false;
}

/* The merge base worked out from whole ancestor sets: of the common ancestors no other
 * descends from (the best ones), the highest generation, then the smallest id; -1 if
 * none. *ret_best: how many best ones there are. */
static int hist_expected_base(const history *h, int a, int b, int *ret_best) {
        int pick = -1, best = 0;
        for (int c = 0; c < (int)h->n; c++) {
                if (!hist_reaches(h, a, c) || !hist_reaches(h, b, c))
                        continue;
                bool below_another = false;
                for (int d = 0; d < (int)h->n && !below_another; d++)
                        below_another = d != c && hist_reaches(h, a, d) && hist_reaches(h, b, d) &&
                                        hist_reaches(h, d, c);
                if (below_another)
                        continue;
                best++;
                if (pick < 0 || h->gen[c] > h->gen[pick] ||
                    (h->gen[c] == h->gen[pick] &&
                     memcmp(h->ids[c].bytes, h->ids[pick].bytes, LFS_ID_LEN) < 0))
                        pick = c;
        }
        *ret_best = best;
        return pick;
}

/* Every pair's merge base and both ancestor questions as worked out here; every stored
 * generation as worked out here. Returns how many pairs had more than one best base. */
static int check_history(test_env *env, const history *h) {
        int several = 0;
        for (size_t i = 0; i < h->n; i++) {
                lfs_id parents[2];
                size_t n;
                uint64_t g;
                assert_ok(env, lfs_db_get_parents(env->store, &h->ids[i], parents, &n, &g, &env->err));
                assert_msg(g == h->gen[i], "commit %zu has generation %llu, not %llu", i,
                           (unsigned long long)g, (unsigned long long)h->gen[i]);
        }
        for (int a = 0; a < (int)h->n; a++)
                for (int b = 0; b < (int)h->n; b++) {
                        int best;
                        int want = hist_expected_base(h, a, b, &best);
                        several += best > 1;
                        lfs_id got;
                        bool found;
                        assert_ok(env, lfs_merge_base(env->store, &h->ids[a], &h->ids[b], &got, &found,
                                                      &env->err));
                        assert_msg(found == (want >= 0), "merge base of %d and %d: found %d, expected %d", a,
                                   b, found, want >= 0);
                        if (found)
                                assert_msg(lfs_id_eq(&got, &h->ids[want]),
                                           "merge base of %d and %d is not commit %d (%d best)", a, b, want,
                                           best);
                        bool anc;
                        assert_ok(env, lfs_is_ancestor(env->store, &h->ids[a], &h->ids[b], &anc, &env->err));
                        assert_msg(anc == hist_reaches(h, b, a), "is %d an ancestor of %d: said %d", a, b,
                                   anc);
                }
        return several;
}

/* A linear history; two lines diverged from it (3 and 4 commits); one merged into the
 * other and both going on; an unrelated history beside. */
static void test_merge_base_of_linear_and_diverged_histories(void **state) {
        test_env *env = *state;
        env_init_project(env, "hist", NULL);
        history h = { 0 };
        int x = hist_add(env, &h, -1, -1);
        for (int i = 0; i < 9; i++)
                x = hist_add(env, &h, x, -1);
        int a = x, b = x;
        for (int i = 0; i < 3; i++)
                a = hist_add(env, &h, a, -1);
        for (int i = 0; i < 4; i++)
                b = hist_add(env, &h, b, -1);
        int m = hist_add(env, &h, a, b); /* b merged into a */
        hist_add(env, &h, m, -1);
        hist_add(env, &h, b, -1);
        int u = hist_add(env, &h, -1, -1); /* another first commit */
        hist_add(env, &h, u, -1);
        assert_int_equal(check_history(env, &h), 0);
}

/* Criss-cross: two lines each merging the other's head at once, twice: two best common
 * ancestors, of one generation; the pick is the same whichever side asks. */
static void test_merge_base_of_criss_cross_histories(void **state) {
        test_env *env = *state;
        env_init_project(env, "hist", NULL);
        history h = { 0 };
        int root = hist_add(env, &h, -1, -1);
        int a = hist_add(env, &h, root, -1), b = hist_add(env, &h, root, -1);
        for (int round = 0; round < 2; round++) {
                int a2 = hist_add(env, &h, a, b), b2 = hist_add(env, &h, b, a);
                a = hist_add(env, &h, a2, -1);
                b = hist_add(env, &h, b2, -1);
        }
        /* Criss-cross of different generations: one side longer before the cross. */
        int c = hist_add(env, &h, hist_add(env, &h, a, -1), -1);
        int c2 = hist_add(env, &h, c, b), b3 = hist_add(env, &h, b, c);
        hist_add(env, &h, c2, -1);
        hist_add(env, &h, b3, -1);
        assert_true(check_history(env, &h) > 0);
}

/* Random histories of up to 4 lines that commit, merge one another, and start anew. */
static void test_merge_base_of_random_histories(void **state) {
        test_env *env = *state;
        env_init_project(env, "hist", NULL);
        unsigned seed = 18;
        int several = 0;
        for (int round = 0; round < 4; round++) {
                history h = { 0 };
                int heads[4] = { hist_add(env, &h, -1, -1) };
                for (size_t k = 1; k < 4; k++)
                        heads[k] = rand_r(&seed) % 2 ? hist_add(env, &h, -1, -1) : heads[0];
                while (h.n < 70) {
                        int k = (int)(rand_r(&seed) % 4), o = (int)(rand_r(&seed) % 4),
                            what = (int)(rand_r(&seed) % 10);
                        if (what < 6 || heads[k] == heads[o])
                                heads[k] = hist_add(env, &h, heads[k], -1);
                        else if (what < 9)
                                heads[k] = hist_add(env, &h, heads[k], heads[o]);
                        else
                                heads[k] = heads[o]; /* a Branch made again from another */
                }
                several += check_history(env, &h);
        }
        print_message("%d pairs with several best merge bases\n", several);
}

/* n commits in a line from a first commit, in one transaction. */
static void hist_line(test_env *env, size_t n, lfs_id *ret_head) {
        lfs_commit_info c = { .tree = *lfs_empty_tree_id(), .author = "test", .time = 2 };
        char message[32];
        c.message = message;
        assert_ok(env, lfs_db_begin(env->store, &env->err));
        for (size_t i = 0; i < n; i++) {
                fmt_path(message, "line %zu", i);
                lfs_commit_compute_id(&c);
                assert_ok(env, lfs_db_put_commit(env->store, &c, &env->err));
                c.parents[0] = c.id;
                c.n_parents = 1;
        }
        assert_ok(env, lfs_db_commit(env->store, &env->err));
        *ret_head = c.id;
}

/* Two Branches diverged by 3 commits each on top of 5,000: the merge base, both ancestor
 * questions and the whole branch merge read tens of commits, not the history (the walk
 * from one end over the whole history read 5,000 and more). */
static void test_merge_of_diverged_branches_reads_tens_of_commits(void **state) {
        test_env *env = *state;
        env_init_project(env, "big", TREE(REG("a", "1")));
        lfs_id top;
        hist_line(env, 5000, &top);
        assert_ok(env, lfs_db_cas_branch(env->store, "one", NULL, &top, &env->err));
        assert_ok(env, lfs_db_cas_branch(env->store, "two", NULL, &top, &env->err));
        for (int i = 0; i < 3; i++) {
                char text[16];
                fmt_path(text, "%d", i);
                commit_spec(env, "one", TREE(REG("one", text)), "one");
                commit_spec(env, "two", TREE(REG("two", text)), "two");
        }
        lfs_id one = head_of(env, "one"), two = head_of(env, "two"), base;
        bool found, anc;
        env->store->commits_read = 0;
        assert_ok(env, lfs_merge_base(env->store, &one, &two, &base, &found, &env->err));
        uint64_t merge_base_reads = env->store->commits_read;
        assert_true(found);
        assert_id_equal(env, &base, &top);
        env->store->commits_read = 0;
        assert_ok(env, lfs_is_ancestor(env->store, &one, &two, &anc, &env->err));
        assert_false(anc);
        assert_ok(env, lfs_is_ancestor(env->store, &top, &two, &anc, &env->err));
        assert_true(anc);
        uint64_t ancestor_reads = env->store->commits_read;
        env->store->commits_read = 0;
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "one", "two", &res, &env->err));
        uint64_t merge_reads = env->store->commits_read;
        print_message("commits read: merge base %llu, two ancestor questions %llu, branch merge %llu\n",
                      (unsigned long long)merge_base_reads, (unsigned long long)ancestor_reads,
                      (unsigned long long)merge_reads);
        assert_msg(merge_base_reads < 30, "the merge base read %llu commits",
                   (unsigned long long)merge_base_reads);
        assert_msg(ancestor_reads < 30, "two ancestor questions read %llu commits",
                   (unsigned long long)ancestor_reads);
        assert_msg(merge_reads < 60, "the branch merge read %llu commits", (unsigned long long)merge_reads);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
}

#define OLD_COMMITS_TABLE                                                                                   \
        "CREATE TABLE commits(id BLOB PRIMARY KEY, tree BLOB NOT NULL, parent1 BLOB, parent2 BLOB,"         \
        " author TEXT NOT NULL, time INTEGER NOT NULL, message TEXT NOT NULL) WITHOUT ROWID"

/* Project (closed) given table commits of the shape Stores made before the generations
 * have. */
static void make_old_commits(test_env *env, const char *project) {
        store_db_exec(env, project,
                      "BEGIN; ALTER TABLE commits RENAME TO commits_new; " OLD_COMMITS_TABLE
                      "; INSERT INTO commits SELECT id, tree, parent1, parent2, author, time, message FROM "
                      "commits_new; DROP TABLE commits_new; COMMIT");
}

/* Every commit of the Store has a generation, and the right one. */
static void assert_generations_right(test_env *env) {
        sqlite3_stmt *st = query_row(
                env->store->db,
                "SELECT count(*), sum(c.generation IS NULL), sum(c.generation IS NOT 1 + max(0,"
                " coalesce((SELECT generation FROM commits p WHERE p.id=c.parent1), 0),"
                " coalesce((SELECT generation FROM commits p WHERE p.id=c.parent2), 0))) FROM commits c");
        int n = sqlite3_column_int(st, 0), missing = sqlite3_column_int(st, 1),
            wrong = sqlite3_column_int(st, 2);
        sqlite3_finalize(st);
        assert_true(n > 0);
        assert_msg(missing == 0 && wrong == 0, "of %d commits, %d have no generation and %d a wrong one", n,
                   missing, wrong);
}

/* A project with a main that went on (20 commits) and a Branch diverged from it. */
static void make_diverged_project(test_env *env, const char *project) {
        env_init_project(env, project, TREE(REG("a", "0")));
        for (int i = 0; i < 20; i++) {
                char text[16];
                fmt_path(text, "%d", i);
                commit_spec(env, "main", TREE(REG("a", text)), "main");
        }
        assert_ok(env, lfs_branch_create(env->store, "side", "main", NULL, &env->err));
        commit_spec(env, "side", TREE(REG("a", "19"), REG("side", "1")), "side");
        commit_spec(env, "main", TREE(REG("a", "main's"), REG("main", "1")), "main again");
}

/* A Store made before the generations opens (the column added, every commit without
 * one), merges (filling the generations of the two Branches' histories), verifies; the
 * commits an older layerfs writes afterwards, without a generation, are filled by the
 * next merge. */
static void test_store_made_before_generations(void **state) {
        test_env *env = *state;
        make_diverged_project(env, "old");
        env_close_store(env);
        make_old_commits(env, "old");
        env_reopen_store(env, "old");
        assert_true(env->store->has_generations);
        sqlite3_stmt *st = query_row(env->store->db, "SELECT count(*), count(generation) FROM commits");
        assert_true(sqlite3_column_int(st, 0) > 20);
        assert_int_equal(sqlite3_column_int(st, 1), 0);
        sqlite3_finalize(st);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "side", "main", &res, &env->err));
        assert_false(res.fast_forward);
        assert_generations_right(env);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        lfs_commit_info merged = commit_info(env, "main");
        assert_int_equal(merged.n_parents, 2);
        lfs_commit_info_done(&merged);
        /* An older layerfs commits on side (no generation), twice; this one merges again. */
        for (int i = 0; i < 2; i++) {
                lfs_id head = head_of(env, "side");
                lfs_commit_info c = commit_info(env, "side");
                free(c.author);
                free(c.message);
                c.author = "old";
                c.message = "older layerfs";
                c.time = 1;
                c.parents[0] = head;
                c.n_parents = 1;
                lfs_commit_compute_id(&c);
                sqlite3_stmt *ins;
                assert_int_equal(
                        sqlite3_prepare_v2(env->store->db,
                                           "INSERT INTO commits(id, tree, parent1, author, time, message)"
                                           " VALUES(?, ?, ?, 'old', 1, 'older layerfs')",
                                           -1, &ins, NULL),
                        SQLITE_OK);
                sqlite3_bind_blob(ins, 1, c.id.bytes, LFS_ID_LEN, SQLITE_STATIC);
                sqlite3_bind_blob(ins, 2, c.tree.bytes, LFS_ID_LEN, SQLITE_STATIC);
                sqlite3_bind_blob(ins, 3, head.bytes, LFS_ID_LEN, SQLITE_STATIC);
                assert_int_equal(sqlite3_step(ins), SQLITE_DONE);
                sqlite3_finalize(ins);
                assert_ok(env, lfs_db_cas_branch(env->store, "side", &head, &c.id, &env->err));
        }
        assert_ok(env, lfs_branch_merge(env->store, "side", "main", &res, &env->err));
        assert_generations_right(env);
        env_reopen_store(env, env_close_store(env));
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
}

/* An open that finds another writer holding the Store does not wait for it to add the
 * column: it opens at once without, and commits go on (without generations); the
 * first merge once the writer is gone adds it and fills them. */
static void test_open_beside_a_writer_leaves_the_column_for_later(void **state) {
        test_env *env = *state;
        make_diverged_project(env, "old");
        env_close_store(env);
        make_old_commits(env, "old");
        sqlite3 *writer;
        assert_int_equal(sqlite3_open(env_path(env, "home/projects/old/store.db"), &writer), SQLITE_OK);
        assert_int_equal(sqlite3_exec(writer, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        env_reopen_store(env, "old");
        assert_false(env->store->has_generations);
        assert_int_equal(sqlite3_exec(writer, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(writer);
        commit_spec(env, "main", TREE(REG("a", "after"), REG("main", "1")), "without a generation");
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "side", "main", &res, &env->err));
        assert_true(env->store->has_generations);
        assert_generations_right(env);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
}

/* Child i fills the generations of arg's two heads, the first i. */
static int fill_both(lfs_store *store, size_t i, const void *arg) {
        const lfs_id *heads = arg;
        int r = 0;
        for (size_t k = 0; k < 2 && r == 0; k++)
                r = lfs_generations_fill(store, &heads[(i + k) % 2], 1, NULL);
        return r;
}

/* Two processes fill one old Store's generations at once, a commit a transaction: both
 * end well (taking turns at the write lock), and every generation is right. */
static void test_generations_filled_by_two_processes_at_once(void **state) {
        test_env *env = *state;
        make_diverged_project(env, "old");
        lfs_id heads[2] = { head_of(env, "main"), head_of(env, "side") };
        env_close_store(env);
        make_old_commits(env, "old");
        store_children_run(env, "old", 2, fill_both, heads);
        env_reopen_store(env, "old");
        assert_generations_right(env);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
}

/* What the child below fills: main's history, 3 commits a transaction. */
static int fill_main(lfs_store *store) {
        lfs_id head;
        int r = lfs_branch_head(store, "main", &head, NULL);
        return r < 0 ? r : lfs_generations_fill(store, &head, 3, NULL);
}

/* A fill killed inside its third chunk (written, not committed) keeps the two chunks
 * before it, all right, and loses the third; the Store verifies, and the next merge
 * fills the rest. */
static void test_fill_killed_inside_a_chunk(void **state) {
        test_env *env = *state;
        make_diverged_project(env, "old");
        env_close_store(env);
        make_old_commits(env, "old");
        int pidfd;
        store_child_at(env, "old", "store-generations-chunk#3", fill_main, &pidfd);
        store_child_kill(pidfd);
        env_reopen_store(env, "old");
        sqlite3_stmt *st = query_row(env->store->db, "SELECT count(generation) FROM commits");
        assert_int_equal(sqlite3_column_int(st, 0), 6);
        sqlite3_finalize(st);
        st = query_row(env->store->db,
                       "SELECT count(*) FROM commits WHERE generation IS NOT NULL AND generation"
                       " NOT IN (1, 2, 3, 4, 5, 6)");
        assert_int_equal(sqlite3_column_int(st, 0), 0); /* the first commits, from the first on */
        sqlite3_finalize(st);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "side", "main", &res, &env->err));
        assert_generations_right(env);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
}

/* A wrong generation fails verify, naming the commit and the fix; the fix works. */
static void test_verify_names_a_wrong_generation(void **state) {
        test_env *env = *state;
        make_diverged_project(env, "proj");
        lfs_id head = head_of(env, "main");
        env_close_store(env);
        _cleanup_free_ char *sql =
                xasprintf("UPDATE commits SET generation=99 WHERE lower(hex(id))='%s'", id_hex(env, &head));
        store_db_exec(env, "proj", sql);
        env_reopen_store(env, "proj");
        const char *named[] = { "has generation 99 where its parents make it", id_hex(env, &head),
                                "\"UPDATE commits SET generation=NULL\"" };
        for (size_t i = 0; i < ELEMENTSOF(named); i++) {
                int r = lfs_store_verify(env->store, NULL, &env->err);
                assert_error(env, r, LFS_FAILED, named[i]);
        }
        env_close_store(env);
        store_db_exec(env, "proj", "UPDATE commits SET generation=NULL");
        env_reopen_store(env, "proj");
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "side", "main", &res, &env->err));
        assert_generations_right(env);
        assert_ok(env, lfs_store_verify(env->store, NULL, &env->err));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                env_test(test_merge_base_of_linear_and_diverged_histories),
                env_test(test_merge_base_of_criss_cross_histories),
                env_test(test_merge_base_of_random_histories),
                env_test(test_merge_of_diverged_branches_reads_tens_of_commits),
                env_test(test_store_made_before_generations),
                env_test(test_open_beside_a_writer_leaves_the_column_for_later),
                env_test(test_generations_filled_by_two_processes_at_once),
                env_test(test_fill_killed_inside_a_chunk),
                env_test(test_verify_names_a_wrong_generation),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
