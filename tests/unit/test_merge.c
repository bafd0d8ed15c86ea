/* SPDX-License-Identifier: MIT */
/*
 * Three-way merge and diff through the public API, on a real temporary home.
 *
 * Each case records a base directory as project "proj" (branch main), branches
 * "feature" from it, commits "ours" on main and "theirs" on feature, and merges
 * feature into main. A conflict must list exactly the conflicting paths and move
 * neither branch; a clean merge must record a commit with both heads as parents whose
 * export holds exactly the expected files.
 */
#include "helpers.h"

typedef struct three_way {
        lfs_id base, ours, theirs;
} three_way;

/* ours or theirs NULL: that branch stays at base. */
static three_way make_three_way(test_env *env, const entry_spec *base, const entry_spec *ours,
                                const entry_spec *theirs) {
        three_way tw;
        tw.base = env_init_project(env, "proj", base);
        lfs_id created;
        assert_ok(env, lfs_branch_create(env->store, "feature", "main", &created, &env->err));
        assert_id_equal(env, &created, &tw.base);
        /* Different messages: equal trees on both sides must still be two commits. */
        tw.ours = ours ? commit_spec(env, "main", ours, "ours") : tw.base;
        tw.theirs = theirs ? commit_spec(env, "feature", theirs, "theirs") : tw.base;
        if (ours)
                assert_id_not_equal(env, &tw.ours, &tw.base);
        if (theirs)
                assert_id_not_equal(env, &tw.theirs, &tw.base);
        return tw;
}

/* Merges feature into main, expecting a new merge commit whose tree is `expected`. */
static lfs_id merge_clean(test_env *env, const three_way *tw, const entry_spec *expected) {
        lfs_merge_result res;
        memset(&res, 0x5a, sizeof(res));
        assert_ok(env, lfs_branch_merge(env->store, "feature", "main", &res, &env->err));
        assert_int_equal(res.fast_forward, 0);
        assert_int_equal(res.up_to_date, 0);
        assert_id_not_equal(env, &res.commit, &tw->ours);
        assert_id_not_equal(env, &res.commit, &tw->theirs);

        lfs_id main_head = head_of(env, "main"), feature_head = head_of(env, "feature");
        assert_id_equal(env, &main_head, &res.commit);
        assert_id_equal(env, &feature_head, &tw->theirs);

        lfs_commit_info c = commit_info(env, "main");
        assert_int_equal(c.n_parents, 2);
        assert_id_equal(env, &c.parents[0], &tw->ours);
        assert_id_equal(env, &c.parents[1], &tw->theirs);

        assert_dir_matches(export_ref(env, "main"), expected);
        return res.commit;
}

static int cmp_strp(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The error is a Conflict naming exactly `paths` (NULL-terminated), in any order. */
static void assert_conflict_paths(test_env *env, int r, const char *const *paths) {
        size_t n_expected = 0;
        while (paths[n_expected])
                n_expected++;
        lfs_error *e = env->err;
        assert_msg(r < 0, "the merge succeeded; expected a Conflict");
        assert_msg(e && e->code == LFS_CONFLICT, "expected Conflict, got %s: %s",
                   e ? lfs_code_name(e->code) : "no error", e ? e->message : "");
        if (e->n_paths != n_expected)
                for (size_t i = 0; i < e->n_paths; i++)
                        print_error("conflict path: %s\n", e->paths[i]);
        assert_msg(e->n_paths == n_expected, "%zu conflicting paths listed, expected %zu", e->n_paths,
                   n_expected);
        const char *expected[64], *got[64];
        assert_true(n_expected <= 64);
        memcpy(expected, paths, n_expected * sizeof(*paths));
        memcpy(got, e->paths, n_expected * sizeof(*paths));
        qsort(expected, n_expected, sizeof(*expected), cmp_strp);
        qsort(got, n_expected, sizeof(*got), cmp_strp);
        for (size_t i = 0; i < n_expected; i++)
                assert_msg(!strcmp(expected[i], got[i]), "conflict lists '%s' where '%s' was expected",
                           got[i], expected[i]);
        /* The message should lead the user to the conflicting paths. */
        bool named = false;
        for (size_t i = 0; i < n_expected && !named; i++)
                named = strstr(e->message, expected[i]) != NULL;
        assert_msg(named, "the message names no conflicting path: %s", e->message);
        lfs_error_free(env->err);
        env->err = NULL;
}

/* Merging either way conflicts on exactly `paths` and moves no branch. */
static void merge_conflicts(test_env *env, const three_way *tw, const char *const *paths) {
        size_t main_commits = log_length(env, "main"), feature_commits = log_length(env, "feature");
        lfs_merge_result res;
        memset(&res, 0x5a, sizeof(res));
        lfs_merge_result untouched = res;

        int r = lfs_branch_merge(env->store, "feature", "main", &res, &env->err);
        assert_conflict_paths(env, r, paths);
        assert_memory_equal(&res, &untouched, sizeof(res));

        /* A conflict is symmetric: the other direction names the same paths. */
        r = lfs_branch_merge(env->store, "main", "feature", &res, &env->err);
        assert_conflict_paths(env, r, paths);

        lfs_id main_head = head_of(env, "main"), feature_head = head_of(env, "feature");
        assert_id_equal(env, &main_head, &tw->ours);
        assert_id_equal(env, &feature_head, &tw->theirs);
        assert_int_equal(log_length(env, "main"), main_commits);
        assert_int_equal(log_length(env, "feature"), feature_commits);
}

#define PATHS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- clean merges ---- */

static void test_add_add_same_content_is_clean(void **state) {
        test_env *env = *state;
        three_way tw =
                make_three_way(env, TREE(REG("keep", "k")), TREE(REG("keep", "k"), REG("new", "same")),
                               TREE(REG("keep", "k"), REG("new", "same")));
        merge_clean(env, &tw, TREE(REG("keep", "k"), REG("new", "same")));
}

static void test_modify_modify_same_is_clean(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("f", "old"), REG("g", "g")),
                                      TREE(REG("f", "new"), REG("g", "g")),
                                      TREE(REG("f", "new"), REG("g", "g"), REG("h", "theirs only")));
        merge_clean(env, &tw, TREE(REG("f", "new"), REG("g", "g"), REG("h", "theirs only")));
}

static void test_delete_delete_is_clean(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("gone", "x"), REG("stay", "s")), TREE(REG("stay", "s")),
                                      TREE(REG("stay", "s"), REG("extra", "e")));
        merge_clean(env, &tw, TREE(REG("stay", "s"), REG("extra", "e")));
}

static void test_changes_on_both_sides_to_different_paths(void **state) {
        test_env *env = *state;
        three_way tw =
                make_three_way(env, TREE(REG("a", "1"), REG("b", "1"), REG("dir/c", "1")),
                               TREE(REG("a", "2"), REG("b", "1"), REG("dir/c", "1")),
                               TREE(REG("a", "1"), REG("b", "1"), REG("dir/c", "2"), REG("dir/d", "new")));
        merge_clean(env, &tw, TREE(REG("a", "2"), REG("b", "1"), REG("dir/c", "2"), REG("dir/d", "new")));
}

static void test_rename_with_unrelated_change_is_clean(void **state) {
        test_env *env = *state;
        /* A rename is a delete plus an add; the other side touches another file. */
        three_way tw = make_three_way(env, TREE(REG("old-name.txt", "content"), REG("other", "1")),
                                      TREE(REG("sub/new-name.txt", "content"), REG("other", "1")),
                                      TREE(REG("old-name.txt", "content"), REG("other", "2")));
        merge_clean(env, &tw, TREE(REG("sub/new-name.txt", "content"), REG("other", "2")));
}

static void test_symlink_changed_on_one_side_is_taken(void **state) {
        test_env *env = *state;
        three_way tw =
                make_three_way(env, TREE(LINK("current", "v1"), REG("v1", "1"), REG("v2", "2")),
                               TREE(LINK("current", "v1"), REG("v1", "1"), REG("v2", "2"), REG("ours", "o")),
                               TREE(LINK("current", "v2"), REG("v1", "1"), REG("v2", "2")));
        merge_clean(env, &tw, TREE(LINK("current", "v2"), REG("v1", "1"), REG("v2", "2"), REG("ours", "o")));
}

static void test_mode_change_on_one_side_is_taken(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("run.sh", "echo hi\n"), REG("x", "1")),
                                      TREE(XREG("run.sh", "echo hi\n"), REG("x", "1")),
                                      TREE(REG("run.sh", "echo hi\n"), REG("x", "2")));
        merge_clean(env, &tw, TREE(XREG("run.sh", "echo hi\n"), REG("x", "2")));
        /* assert_dir_matches checked the exec bit of the export; check the tree says so too. */
        lfs_change *changes;
        size_t n;
        char base_hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&tw.base, base_hex);
        assert_ok(env, lfs_branch_diff(env->store, base_hex, "main", &changes, &n, &env->err));
        assert_int_equal(n, 2);
        assert_string_equal(changes[0].path, "run.sh");
        assert_int_equal(changes[0].kind, LFS_MODIFIED);
        lfs_change_list_free(changes, n);
}

static void test_mode_on_one_side_and_contents_on_the_other_merge(void **state) {
        test_env *env = *state;
        /* As git does: the new contents with the exec bit, whichever side made which. */
        three_way tw = make_three_way(env, TREE(REG("run.sh", "v1"), REG("tool", "t1")),
                                      TREE(XREG("run.sh", "v1"), REG("tool", "t2")),
                                      TREE(REG("run.sh", "v2"), XREG("tool", "t1")));
        merge_clean(env, &tw, TREE(XREG("run.sh", "v2"), XREG("tool", "t2")));
}

static void test_exec_bit_cleared_on_one_side_and_contents_changed_on_the_other(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(XREG("run.sh", "v1"), REG("x", "1")),
                                      TREE(REG("run.sh", "v1"), REG("x", "1")),
                                      TREE(XREG("run.sh", "v2"), REG("x", "2")));
        merge_clean(env, &tw, TREE(REG("run.sh", "v2"), REG("x", "2")));
}

static void test_same_contents_on_both_sides_and_mode_on_one(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("run.sh", "v1"), REG("x", "1")),
                                      TREE(XREG("run.sh", "v2"), REG("x", "1")),
                                      TREE(REG("run.sh", "v2"), REG("x", "2")));
        merge_clean(env, &tw, TREE(XREG("run.sh", "v2"), REG("x", "2")));
}

static void test_deleted_on_one_side_unchanged_on_the_other_is_deleted(void **state) {
        test_env *env = *state;
        /* Files, an executable, a symlink and a directory, deleted on one side or the other. */
        three_way tw = make_three_way(
                env,
                TREE(REG("ours-deleted", "1"), XREG("theirs-deleted", "2"), LINK("link", "ours-deleted"),
                     REG("dir/a", "a"), REG("dir/sub/b", "b"), REG("x", "1")),
                TREE(XREG("theirs-deleted", "2"), REG("dir/a", "a"), REG("dir/sub/b", "b"), REG("x", "1")),
                TREE(REG("ours-deleted", "1"), LINK("link", "ours-deleted"), REG("x", "2")));
        merge_clean(env, &tw, TREE(REG("x", "2")));
}

static void test_file_replaced_by_directory_on_one_side_is_taken(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("x", "file"), REG("y", "1")),
                                      TREE(REG("x", "file"), REG("y", "2")),
                                      TREE(REG("x/inner", "now a dir"), REG("y", "1")));
        merge_clean(env, &tw, TREE(REG("x/inner", "now a dir"), REG("y", "2")));
}

static void test_directory_deleted_while_other_side_adds_inside(void **state) {
        test_env *env = *state;
        /* Nothing that the deleting side saw was changed, so the new file survives. */
        three_way tw = make_three_way(env, TREE(REG("d/a", "1"), REG("top", "t")), TREE(REG("top", "t")),
                                      TREE(REG("d/a", "1"), REG("d/new", "n"), REG("top", "t")));
        merge_clean(env, &tw, TREE(REG("d/new", "n"), REG("top", "t")));
}

static void test_directory_deleted_on_both_sides_with_other_changes(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("d/a", "1"), REG("d/e/b", "1"), REG("top", "t")),
                                      TREE(REG("top", "ours")), TREE(REG("top", "t"), REG("theirs", "x")));
        /* Theirs kept d, ours deleted it and nothing in it changed on theirs. */
        merge_clean(env, &tw, TREE(REG("top", "ours"), REG("theirs", "x")));
}

static void test_directory_deleted_while_other_side_emptied_it(void **state) {
        test_env *env = *state;
        /* Both sides agree nothing stays in d: it must go, not linger as an empty directory. */
        three_way tw = make_three_way(env, TREE(REG("d/a", "1"), REG("d/b", "1"), REG("top", "t")),
                                      TREE(REG("top", "ours")), TREE(REG("d/b", "1"), REG("top", "t")));
        merge_clean(env, &tw, TREE(REG("top", "ours")));
}

static void test_empty_directory_added_on_one_side(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("a", "1")), TREE(REG("a", "1"), EMPTY_DIR("cache")),
                                      TREE(REG("a", "2")));
        merge_clean(env, &tw, TREE(REG("a", "2"), EMPTY_DIR("cache")));
}

static void test_merge_from_a_commit_id(void **state) {
        test_env *env = *state;
        three_way tw =
                make_three_way(env, TREE(REG("a", "1"), REG("b", "1")), TREE(REG("a", "2"), REG("b", "1")),
                               TREE(REG("a", "1"), REG("b", "2")));
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&tw.theirs, hex);
        hex[12] = 0;
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, hex, "main", &res, &env->err));
        assert_false(res.fast_forward || res.up_to_date);
        lfs_commit_info c = commit_info(env, "main");
        assert_int_equal(c.n_parents, 2);
        assert_id_equal(env, &c.parents[1], &tw.theirs);
        assert_dir_matches(export_ref(env, "main"), TREE(REG("a", "2"), REG("b", "2")));
}

static void test_second_merge_uses_the_first_as_base(void **state) {
        test_env *env = *state;
        three_way tw =
                make_three_way(env, TREE(REG("a", "1"), REG("b", "1")), TREE(REG("a", "2"), REG("b", "1")),
                               TREE(REG("a", "1"), REG("b", "2")));
        merge_clean(env, &tw, TREE(REG("a", "2"), REG("b", "2")));
        /* Against the original base, b (1 -> 2 on main, 1 -> 3 on feature) would conflict. */
        commit_spec(env, "feature", TREE(REG("a", "1"), REG("b", "3")), "theirs again");
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "feature", "main", &res, &env->err));
        assert_false(res.fast_forward || res.up_to_date);
        assert_dir_matches(export_ref(env, "main"), TREE(REG("a", "2"), REG("b", "3")));
        /* And now main contains feature. */
        assert_ok(env, lfs_branch_merge(env->store, "feature", "main", &res, &env->err));
        assert_true(res.up_to_date);
}

static void test_same_new_directory_on_both_sides_is_united(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("top", "t")), TREE(REG("top", "t"), REG("d/a", "ours")),
                                      TREE(REG("top", "t"), REG("d/b", "theirs"), EMPTY_DIR("d/e")));
        merge_clean(env, &tw,
                    TREE(REG("top", "t"), REG("d/a", "ours"), REG("d/b", "theirs"), EMPTY_DIR("d/e")));
}

/* ---- conflicts ---- */

static void test_add_add_different_conflicts(void **state) {
        test_env *env = *state;
        three_way tw =
                make_three_way(env, TREE(REG("keep", "k")), TREE(REG("keep", "k"), REG("new", "ours")),
                               TREE(REG("keep", "k"), REG("new", "theirs")));
        merge_conflicts(env, &tw, PATHS("new"));
}

static void test_modify_modify_different_conflicts(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("f", "base"), REG("g", "g")),
                                      TREE(REG("f", "ours"), REG("g", "g")),
                                      TREE(REG("f", "theirs"), REG("g", "g2")));
        merge_conflicts(env, &tw, PATHS("f"));
}

static void test_modify_delete_conflicts(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("f", "base"), REG("g", "g")),
                                      TREE(REG("f", "ours"), REG("g", "g")), TREE(REG("g", "g")));
        merge_conflicts(env, &tw, PATHS("f"));
}

static void test_delete_modify_conflicts(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("f", "base"), REG("g", "g")), TREE(REG("g", "g")),
                                      TREE(REG("f", "theirs"), REG("g", "g")));
        merge_conflicts(env, &tw, PATHS("f"));
}

static void test_symlink_changed_differently_conflicts(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(LINK("current", "v1")), TREE(LINK("current", "v2")),
                                      TREE(LINK("current", "v3")));
        merge_conflicts(env, &tw, PATHS("current"));
}

static void test_symlink_against_file_conflicts(void **state) {
        test_env *env = *state;
        /* Same bytes, different kinds: a link to "x" is not a file holding "x". */
        three_way tw = make_three_way(env, TREE(REG("keep", "k")), TREE(REG("keep", "k"), LINK("p", "x")),
                                      TREE(REG("keep", "k"), REG("p", "x")));
        merge_conflicts(env, &tw, PATHS("p"));
}

static void test_mode_and_content_changed_differently_conflicts(void **state) {
        test_env *env = *state;
        /* The exec bit merges on its own, but the contents still conflict. */
        three_way tw = make_three_way(env, TREE(REG("run.sh", "v1")), TREE(XREG("run.sh", "v2")),
                                      TREE(REG("run.sh", "v3")));
        merge_conflicts(env, &tw, PATHS("run.sh"));
}

static void test_added_with_same_contents_and_different_modes_conflicts(void **state) {
        test_env *env = *state;
        /* No base to say which mode is the change. */
        three_way tw = make_three_way(env, TREE(REG("keep", "k")), TREE(REG("keep", "k"), XREG("p", "x")),
                                      TREE(REG("keep", "k"), REG("p", "x")));
        merge_conflicts(env, &tw, PATHS("p"));
}

static void test_file_against_directory_conflicts(void **state) {
        test_env *env = *state;
        three_way tw =
                make_three_way(env, TREE(REG("keep", "k")), TREE(REG("keep", "k"), REG("x", "a file")),
                               TREE(REG("keep", "k"), REG("x/inner", "in a dir")));
        merge_conflicts(env, &tw, PATHS("x"));
}

static void test_modified_file_against_directory_conflicts(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("x", "file")), TREE(REG("x", "changed")),
                                      TREE(REG("x/inner", "now a dir")));
        merge_conflicts(env, &tw, PATHS("x"));
}

static void test_deleted_directory_against_changed_file_inside(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("d/f", "1"), REG("d/g", "1"), REG("top", "t")),
                                      TREE(REG("top", "t")),
                                      TREE(REG("d/f", "2"), REG("d/g", "1"), REG("top", "t")));
        merge_conflicts(env, &tw, PATHS("d/f"));
}

static void test_deleted_directory_against_deep_change(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("a/b/c/f", "1"), REG("a/x", "1")),
                                      TREE(REG("a/b/c/f", "2"), REG("a/x", "1")), TREE(REG("other", "o")));
        merge_conflicts(env, &tw, PATHS("a/b/c/f"));
}

static void test_same_new_file_in_new_directory_conflicts(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("top", "t")),
                                      TREE(REG("top", "t"), REG("d/a", "ours"), REG("d/only-ours", "o")),
                                      TREE(REG("top", "t"), REG("d/a", "theirs")));
        merge_conflicts(env, &tw, PATHS("d/a"));
}

static void test_directory_replaced_by_file_against_change_inside(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("x/inner", "1"), REG("y", "1")),
                                      TREE(REG("x", "now a file"), REG("y", "1")),
                                      TREE(REG("x/inner", "2"), REG("y", "1")));
        merge_conflicts(env, &tw, PATHS("x"));
}

static void test_every_conflict_is_listed(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(
                env,
                TREE(REG("a", "1"), REG("b", "1"), REG("c", "1"), REG("nested/deep/f", "1"),
                     LINK("link", "t1"), REG("ok", "1"), REG("z/last", "1")),
                TREE(REG("a", "ours"), REG("c", "ours"), REG("nested/deep/f", "ours"), LINK("link", "t2"),
                     REG("ok", "1"), REG("added", "x"), REG("z/last", "ours")),
                TREE(REG("a", "theirs"), REG("b", "theirs"), REG("c/now-a-dir", "x"),
                     REG("nested/deep/f", "theirs"), LINK("link", "t3"), REG("ok", "changed"),
                     REG("z/last", "theirs")));
        merge_conflicts(env, &tw, PATHS("a", "b", "c", "nested/deep/f", "link", "z/last"));
}

/* ---- no merge commit ---- */

static void test_fast_forward_makes_no_commit(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("a", "1")), NULL, TREE(REG("a", "1"), REG("b", "2")));
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "feature", "main", &res, &env->err));
        assert_int_equal(res.fast_forward, 1);
        assert_int_equal(res.up_to_date, 0);
        assert_id_equal(env, &res.commit, &tw.theirs);
        lfs_id main_head = head_of(env, "main");
        assert_id_equal(env, &main_head, &tw.theirs);
        /* main's history is feature's: theirs, then base. */
        assert_int_equal(log_length(env, "main"), 2);
        lfs_commit_info c = commit_info(env, "main");
        assert_int_equal(c.n_parents, 1);
        assert_id_equal(env, &c.parents[0], &tw.base);
        assert_dir_matches(export_ref(env, "main"), TREE(REG("a", "1"), REG("b", "2")));
}

static void test_up_to_date_changes_nothing(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("a", "1")), TREE(REG("a", "1"), REG("b", "2")), NULL);
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "feature", "main", &res, &env->err));
        assert_int_equal(res.up_to_date, 1);
        assert_int_equal(res.fast_forward, 0);
        assert_id_equal(env, &res.commit, &tw.ours);
        lfs_id main_head = head_of(env, "main"), feature_head = head_of(env, "feature");
        assert_id_equal(env, &main_head, &tw.ours);
        assert_id_equal(env, &feature_head, &tw.base);
        assert_int_equal(log_length(env, "main"), 2);
}

static void test_equal_heads_are_up_to_date(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("a", "1")), NULL, NULL);
        lfs_merge_result res;
        assert_ok(env, lfs_branch_merge(env->store, "feature", "main", &res, &env->err));
        assert_int_equal(res.up_to_date, 1);
        assert_id_equal(env, &res.commit, &tw.base);
        assert_int_equal(log_length(env, "main"), 1);
}

/* ---- refusals ---- */

static void test_merge_into_itself_is_refused(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("a", "1")), TREE(REG("a", "2")), NULL);
        lfs_merge_result res;
        int r = lfs_branch_merge(env->store, "main", "main", &res, &env->err);
        assert_error(env, r, LFS_INVALID_INPUT, "'main'");
        lfs_id main_head = head_of(env, "main");
        assert_id_equal(env, &main_head, &tw.ours);
}

static void test_merge_of_unknown_branch_is_refused(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("a", "1")), TREE(REG("a", "2")), NULL);
        lfs_merge_result res;
        int r = lfs_branch_merge(env->store, "no-such-branch", "main", &res, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "no-such-branch");
        r = lfs_branch_merge(env->store, "main", "no-such-branch", &res, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "no-such-branch");
        lfs_id main_head = head_of(env, "main");
        assert_id_equal(env, &main_head, &tw.ours);
}

static void test_merge_into_a_commit_id_is_refused(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("a", "1")), TREE(REG("a", "2")), TREE(REG("b", "1")));
        /* Only a branch can move; a commit id as `into` must not be resolved. */
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&tw.ours, hex);
        lfs_merge_result res;
        int r = lfs_branch_merge(env->store, "feature", hex, &res, &env->err);
        assert_true(r < 0);
        assert_non_null(env->err);
        assert_true(env->err->code == LFS_NO_SUCH_BRANCH || env->err->code == LFS_INVALID_INPUT);
        lfs_error_free(env->err);
        env->err = NULL;
}

/* ---- diff ---- */

typedef struct expected_change {
        lfs_change_kind kind;
        const char *path;
} expected_change;

static void assert_changes(test_env *env, const char *a, const char *b, const expected_change *want,
                           size_t n_want) {
        lfs_change *changes = NULL;
        size_t n = 0;
        assert_ok(env, lfs_branch_diff(env->store, a, b, &changes, &n, &env->err));
        bool same = n == n_want;
        for (size_t i = 0; same && i < n; i++)
                same = changes[i].kind == want[i].kind && !strcmp(changes[i].path, want[i].path);
        if (!same)
                for (size_t i = 0; i < n; i++)
                        print_error("diff %s..%s: %s %s\n", a, b, lfs_change_kind_name(changes[i].kind),
                                    changes[i].path);
        lfs_change_list_free(changes, n);
        assert_msg(same, "diff %s..%s differs from the %zu expected changes", a, b, n_want);
}

static void test_diff_lists_every_kind_of_change(void **state) {
        test_env *env = *state;
        make_three_way(env,
                       TREE(REG("a", "1"), REG("b", "1"), REG("d/x", "1"), REG("d/y", "1"), REG("f", "file"),
                            LINK("l", "a"), REG("m", "1")),
                       TREE(REG("a", "2"), REG("b", "1"), REG("c", "new"), EMPTY_DIR("e"),
                            REG("f/g", "now dir"), LINK("l", "b"), XREG("m", "1")),
                       NULL);
        static const expected_change forward[] = {
                { LFS_MODIFIED, "a" },  { LFS_ADDED, "c" },    { LFS_DELETED, "d/x" },
                { LFS_DELETED, "d/y" }, { LFS_ADDED, "e" },    { LFS_DELETED, "f" },
                { LFS_ADDED, "f/g" },   { LFS_MODIFIED, "l" }, { LFS_MODIFIED, "m" },
        };
        assert_changes(env, "feature", "main", forward, COUNT_OF(forward));
        static const expected_change backward[] = {
                { LFS_MODIFIED, "a" }, { LFS_DELETED, "c" },  { LFS_ADDED, "d/x" },
                { LFS_ADDED, "d/y" },  { LFS_DELETED, "e" },  { LFS_DELETED, "f/g" },
                { LFS_ADDED, "f" },    { LFS_MODIFIED, "l" }, { LFS_MODIFIED, "m" },
        };
        assert_changes(env, "main", "feature", backward, COUNT_OF(backward));
}

/* The diff passes over the entries two trees share byte for byte unread (skip_equal,
 * diff.c): changes at either end of the sorted order and between runs of equal entries,
 * a name right after an equal one it extends, file <-> directory both ways, a mode alone,
 * the last entry's id alone (the same size), and one change among 40 equal entries, each
 * way round. */
static void test_diff_beside_runs_of_equal_entries(void **state) {
        test_env *env = *state;
        enum { BIG = 40, FIXED = 14 };
        static const entry_spec feature_fixed[FIXED] = {
                REG("a", "1"),       REG("b", "same"),     REG("c", "same"),   REG("d/x", "1"),
                REG("d/y", "same"),  REG("e", "same"),     REG("f", "f"),      REG("g", "same"),
                XREG("h", "same"),   REG("k", "same"),     REG("m/n", "same"), REG("z", "last"),
                REG("zz/q", "deep"), REG("big/n39", "39"),
        };
        static const entry_spec main_fixed[FIXED] = {
                REG("0", "new first"), REG("b", "same"),   REG("c", "same"), REG("c0", "after c"),
                REG("d/x", "2"),       REG("d/y", "same"), REG("e", "same"), EMPTY_DIR("e2"),
                REG("f/g", "now dir"), REG("g", "same"),   REG("h", "same"), REG("k", "same"),
                REG("m", "now file"),  REG("z", "lass"),
        };
        /* big/n00..n38 in both, n17 changed in main, n39 (the last) in feature only. */
        static char names[BIG][32];
        entry_spec feature[FIXED + BIG], main_spec[FIXED + BIG];
        memcpy(feature, feature_fixed, sizeof(feature_fixed));
        memcpy(main_spec, main_fixed, sizeof(main_fixed));
        size_t nf = FIXED, nm = FIXED;
        for (int i = 0; i < BIG - 1; i++) {
                snprintf(names[i], sizeof(names[i]), "big/n%02d", i);
                feature[nf++] = (entry_spec)REG(names[i], "same");
                main_spec[nm++] = (entry_spec)REG(names[i], i == 17 ? "diff" : "same");
        }
        feature[nf] = (entry_spec){ ENTRY_END, NULL, NULL };
        main_spec[nm] = (entry_spec){ ENTRY_END, NULL, NULL };
        make_three_way(env, feature, main_spec, NULL);
        static const expected_change forward[] = {
                { LFS_ADDED, "0" },         { LFS_DELETED, "a" },    { LFS_MODIFIED, "big/n17" },
                { LFS_DELETED, "big/n39" }, { LFS_ADDED, "c0" },     { LFS_MODIFIED, "d/x" },
                { LFS_ADDED, "e2" },        { LFS_DELETED, "f" },    { LFS_ADDED, "f/g" },
                { LFS_MODIFIED, "h" },      { LFS_DELETED, "m/n" },  { LFS_ADDED, "m" },
                { LFS_MODIFIED, "z" },      { LFS_DELETED, "zz/q" },
        };
        assert_changes(env, "feature", "main", forward, COUNT_OF(forward));
        static const expected_change backward[] = {
                { LFS_DELETED, "0" },     { LFS_ADDED, "a" },     { LFS_MODIFIED, "big/n17" },
                { LFS_ADDED, "big/n39" }, { LFS_DELETED, "c0" },  { LFS_MODIFIED, "d/x" },
                { LFS_DELETED, "e2" },    { LFS_DELETED, "f/g" }, { LFS_ADDED, "f" },
                { LFS_MODIFIED, "h" },    { LFS_DELETED, "m" },   { LFS_ADDED, "m/n" },
                { LFS_MODIFIED, "z" },    { LFS_ADDED, "zz/q" },
        };
        assert_changes(env, "main", "feature", backward, COUNT_OF(backward));
}

static void test_diff_of_equal_trees_is_empty(void **state) {
        test_env *env = *state;
        three_way tw = make_three_way(env, TREE(REG("a", "1"), REG("d/b", "2")), NULL, NULL);
        static const expected_change none[] = { { LFS_ADDED, "(none)" } };
        assert_changes(env, "main", "feature", none, 0);
        char hex[LFS_HEX_LEN + 1];
        lfs_id_to_hex(&tw.base, hex);
        assert_changes(env, hex, "main", none, 0);
}

static void test_diff_of_unknown_ref_is_refused(void **state) {
        test_env *env = *state;
        make_three_way(env, TREE(REG("a", "1")), NULL, NULL);
        lfs_change *changes = NULL;
        size_t n = 0;
        int r = lfs_branch_diff(env->store, "main", "nowhere", &changes, &n, &env->err);
        assert_error(env, r, LFS_NO_SUCH_BRANCH, "nowhere");
        assert_null(changes);
}

static void test_change_kind_names(void **state) {
        (void)state;
        assert_string_equal(lfs_change_kind_name(LFS_ADDED), "added");
        assert_string_equal(lfs_change_kind_name(LFS_MODIFIED), "modified");
        assert_string_equal(lfs_change_kind_name(LFS_DELETED), "deleted");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                env_test(test_add_add_same_content_is_clean),
                env_test(test_modify_modify_same_is_clean),
                env_test(test_delete_delete_is_clean),
                env_test(test_changes_on_both_sides_to_different_paths),
                env_test(test_rename_with_unrelated_change_is_clean),
                env_test(test_symlink_changed_on_one_side_is_taken),
                env_test(test_mode_change_on_one_side_is_taken),
                env_test(test_mode_on_one_side_and_contents_on_the_other_merge),
                env_test(test_exec_bit_cleared_on_one_side_and_contents_changed_on_the_other),
                env_test(test_same_contents_on_both_sides_and_mode_on_one),
                env_test(test_deleted_on_one_side_unchanged_on_the_other_is_deleted),
                env_test(test_file_replaced_by_directory_on_one_side_is_taken),
                env_test(test_directory_deleted_while_other_side_adds_inside),
                env_test(test_directory_deleted_on_both_sides_with_other_changes),
                env_test(test_directory_deleted_while_other_side_emptied_it),
                env_test(test_empty_directory_added_on_one_side),
                env_test(test_merge_from_a_commit_id),
                env_test(test_second_merge_uses_the_first_as_base),
                env_test(test_same_new_directory_on_both_sides_is_united),
                env_test(test_add_add_different_conflicts),
                env_test(test_modify_modify_different_conflicts),
                env_test(test_modify_delete_conflicts),
                env_test(test_delete_modify_conflicts),
                env_test(test_symlink_changed_differently_conflicts),
                env_test(test_symlink_against_file_conflicts),
                env_test(test_mode_and_content_changed_differently_conflicts),
                env_test(test_added_with_same_contents_and_different_modes_conflicts),
                env_test(test_file_against_directory_conflicts),
                env_test(test_modified_file_against_directory_conflicts),
                env_test(test_deleted_directory_against_changed_file_inside),
                env_test(test_deleted_directory_against_deep_change),
                env_test(test_same_new_file_in_new_directory_conflicts),
                env_test(test_directory_replaced_by_file_against_change_inside),
                env_test(test_every_conflict_is_listed),
                env_test(test_fast_forward_makes_no_commit),
                env_test(test_up_to_date_changes_nothing),
                env_test(test_equal_heads_are_up_to_date),
                env_test(test_merge_into_itself_is_refused),
                env_test(test_merge_of_unknown_branch_is_refused),
                env_test(test_merge_into_a_commit_id_is_refused),
                env_test(test_diff_lists_every_kind_of_change),
                env_test(test_diff_beside_runs_of_equal_entries),
                env_test(test_diff_of_equal_trees_is_empty),
                env_test(test_diff_of_unknown_ref_is_refused),
                cmocka_unit_test(test_change_kind_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
