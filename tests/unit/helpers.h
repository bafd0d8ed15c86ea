/* SPDX-License-Identifier: MIT */
/*
 * Shared by the unit tests: a private temporary home per test, directories built from
 * a table of entries, and assertions that say what differed.
 *
 * Every test that touches the disk runs with env_setup/env_teardown as its cmocka
 * setup and teardown, so the temporary root is removed even when an assertion fails
 * part-way (cmocka runs the teardown after a failed test).
 */
#ifndef LFS_TEST_HELPERS_H
#define LFS_TEST_HELPERS_H

/* cmocka.h needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layerfs.h"

/* Fails the running test at the caller's line, with a message. */
#define assert_msg(cond, ...)                                                                               \
        do {                                                                                                \
                if (!(cond)) {                                                                              \
                        print_error("ERROR: " __VA_ARGS__);                                                 \
                        print_error("\n");                                                                  \
                        _fail(__FILE__, __LINE__);                                                          \
                }                                                                                           \
        } while (0)

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* snprintf into an array, failing the test rather than truncating a path. */
#define fmt_path(buf, ...)                                                                                  \
        assert_msg(snprintf((buf), sizeof(buf), __VA_ARGS__) < (int)sizeof(buf), "path too long")

#define TEST_MAX_STRINGS 256

typedef struct test_env {
        char root[PATH_MAX]; /* the mkdtemp directory: everything the test makes */
        char home_dir[PATH_MAX]; /* <root>/home */
        lfs_home *home;
        lfs_store *store; /* closed by the teardown when set */
        lfs_error *err; /* freed by the teardown when set */
        unsigned next_dir;
        /* Strings handed out by env_path, freed by the teardown: tests may fail
         * part-way, and they should not have to track them. */
        char *strings[TEST_MAX_STRINGS];
        size_t n_strings;
} test_env;

/* ---- paths and files ---- */

static inline const char *env_keep(test_env *env, char *s) {
        assert_non_null(s);
        assert_msg(env->n_strings < TEST_MAX_STRINGS, "too many strings for one test");
        env->strings[env->n_strings++] = s;
        return s;
}

/* "<root>/<formatted>", owned by env. */
__attribute__((format(printf, 2, 3))) static inline const char *env_path(test_env *env, const char *fmt,
                                                                         ...) {
        char rel[PATH_MAX];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(rel, sizeof(rel), fmt, ap);
        va_end(ap);
        assert_msg(n >= 0 && n < (int)sizeof(rel), "path too long");
        char *s = NULL;
        assert_true(asprintf(&s, "%s/%s", env->root, rel) > 0);
        return env_keep(env, s);
}

/* A path below root that does not exist yet, for directories to build or export into. */
static inline const char *env_fresh_path(test_env *env, const char *what) {
        return env_path(env, "%s-%u", what, env->next_dir++);
}

/* mkdir -p of the parent directories of path. */
static inline void make_parents(const char *path) {
        char copy[PATH_MAX];
        fmt_path(copy, "%s", path);
        for (char *p = copy + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                assert_msg(mkdir(copy, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", copy, strerror(errno));
                *p = '/';
        }
}

static inline void write_bytes(const char *path, const void *data, size_t len, mode_t mode) {
        make_parents(path);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        assert_msg(fd >= 0, "cannot write %s: %s", path, strerror(errno));
        size_t done = 0;
        while (done < len) {
                ssize_t k = write(fd, (const char *)data + done, len - done);
                assert_msg(k > 0, "cannot write %s: %s", path, strerror(errno));
                done += (size_t)k;
        }
        /* The umask must not decide whether a file is executable. */
        assert_int_equal(fchmod(fd, mode), 0);
        assert_int_equal(close(fd), 0);
}

static inline void write_text(const char *path, const char *text) {
        write_bytes(path, text, strlen(text), 0644);
}

/* The whole file, NUL-terminated; *ret_len (if given) without the NUL. */
static inline char *read_whole(const char *path, size_t *ret_len) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        struct stat st;
        assert_int_equal(fstat(fd, &st), 0);
        char *buf = malloc((size_t)st.st_size + 1);
        assert_non_null(buf);
        size_t done = 0;
        ssize_t k;
        while (done < (size_t)st.st_size && (k = read(fd, buf + done, (size_t)st.st_size - done)) > 0)
                done += (size_t)k;
        close(fd);
        buf[done] = 0;
        if (ret_len)
                *ret_len = done;
        return buf;
}

/* What fd gives until its end (a child's pipe), at most size - 1 bytes, NUL-terminated;
 * fd is closed. Returns the length. */
static inline size_t read_to_end(int fd, char *out, size_t size) {
        size_t len = 0;
        ssize_t k;
        while (len + 1 < size && (k = read(fd, out + len, size - 1 - len)) > 0)
                len += (size_t)k;
        out[len] = 0;
        close(fd);
        return len;
}

/* The descriptors this process holds now (of /proc/self/fd, less the listing's own). */
static inline size_t open_descriptors(void) {
        DIR *d = opendir("/proc/self/fd");
        assert_non_null(d);
        size_t n = 0;
        for (struct dirent *e; (e = readdir(d));)
                n += e->d_name[0] != '.';
        closedir(d);
        return n - 1;
}

/* Bytes this process has read through read(2) and its kin (/proc/self/io, rchar). */
static inline uint64_t bytes_read(void) {
        FILE *f = fopen("/proc/self/io", "re");
        assert_non_null(f);
        unsigned long long rchar = 0;
        char line[128];
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "rchar: %llu", &rchar) == 1)
                        break;
        fclose(f);
        return rchar;
}

/* ---- directories described by a table ---- */

typedef enum entry_kind {
        ENTRY_END = 0,
        ENTRY_REG, /* a regular file, not executable */
        ENTRY_XREG, /* an executable file */
        ENTRY_LINK, /* a symlink; data is its target */
        ENTRY_EMPTY_DIR,
} entry_kind;

typedef struct entry_spec {
        entry_kind kind;
        const char *path; /* relative, "/"-separated; parents are implied */
        const char *data;
} entry_spec;

#define REG(p, d)                                                                                           \
        { ENTRY_REG, (p), (d) }
#define XREG(p, d)                                                                                          \
        { ENTRY_XREG, (p), (d) }
#define LINK(p, target)                                                                                     \
        { ENTRY_LINK, (p), (target) }
#define EMPTY_DIR(p)                                                                                        \
        { ENTRY_EMPTY_DIR, (p), NULL }
#define TREE(...) ((const entry_spec[]){ __VA_ARGS__, { ENTRY_END, NULL, NULL } })
#define NO_ENTRIES ((const entry_spec[]){ { ENTRY_END, NULL, NULL } })

static inline void build_entries(const char *dir, const entry_spec *spec) {
        assert_msg(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
        for (const entry_spec *e = spec; e->kind != ENTRY_END; e++) {
                char path[PATH_MAX];
                fmt_path(path, "%s/%s", dir, e->path);
                make_parents(path);
                switch (e->kind) {
                case ENTRY_REG:
                case ENTRY_XREG:
                        write_bytes(path, e->data, strlen(e->data), e->kind == ENTRY_XREG ? 0755 : 0644);
                        break;
                case ENTRY_LINK:
                        assert_msg(symlink(e->data, path) == 0, "symlink %s: %s", path, strerror(errno));
                        break;
                case ENTRY_EMPTY_DIR:
                        assert_msg(mkdir(path, 0755) == 0, "mkdir %s: %s", path, strerror(errno));
                        break;
                case ENTRY_END:
                        break;
                }
        }
}

/* A new directory holding exactly spec. */
static inline const char *make_tree_dir(test_env *env, const entry_spec *spec) {
        const char *dir = env_fresh_path(env, "dir");
        build_entries(dir, spec);
        return dir;
}

/* Does spec name rel itself, or a path below it (rel is then an implied directory)? */
static inline const entry_spec *spec_find(const entry_spec *spec, const char *rel, bool *ret_implied) {
        size_t len = strlen(rel);
        *ret_implied = false;
        for (const entry_spec *e = spec; e->kind != ENTRY_END; e++)
                if (!strcmp(e->path, rel))
                        return e;
        for (const entry_spec *e = spec; e->kind != ENTRY_END; e++)
                if (!strncmp(e->path, rel, len) && e->path[len] == '/') {
                        *ret_implied = true;
                        return e;
                }
        return NULL;
}

/* Everything found below dir must be in spec (explicitly or as a parent). */
static inline void assert_nothing_unexpected(const char *root, const char *rel, const entry_spec *spec) {
        char dir[PATH_MAX];
        fmt_path(dir, "%s%s%s", root, *rel ? "/" : "", rel);
        DIR *d = opendir(dir);
        assert_msg(d, "cannot read %s: %s", dir, strerror(errno));
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                char sub[PATH_MAX], full[PATH_MAX];
                fmt_path(sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
                fmt_path(full, "%s/%s", root, sub);
                bool implied;
                const entry_spec *e = spec_find(spec, sub, &implied);
                if (!e) {
                        closedir(d);
                        assert_msg(false, "%s holds '%s', which it should not", root, sub);
                }
                struct stat st;
                assert_int_equal(lstat(full, &st), 0);
                if (S_ISDIR(st.st_mode))
                        assert_nothing_unexpected(root, sub, spec);
        }
        closedir(d);
}

/* dir holds exactly spec: the same names, kinds, contents, link targets and exec bits. */
static inline void assert_dir_matches(const char *dir, const entry_spec *spec) {
        for (const entry_spec *e = spec; e->kind != ENTRY_END; e++) {
                char path[PATH_MAX];
                fmt_path(path, "%s/%s", dir, e->path);
                struct stat st;
                assert_msg(lstat(path, &st) == 0, "%s is missing from %s", e->path, dir);
                if (e->kind == ENTRY_LINK) {
                        char target[PATH_MAX];
                        assert_msg(S_ISLNK(st.st_mode), "%s should be a symlink", e->path);
                        ssize_t k = readlink(path, target, sizeof(target) - 1);
                        assert_true(k >= 0);
                        target[k] = 0;
                        assert_msg(!strcmp(target, e->data), "%s points to '%s', expected '%s'", e->path,
                                   target, e->data);
                } else if (e->kind == ENTRY_EMPTY_DIR) {
                        assert_msg(S_ISDIR(st.st_mode), "%s should be a directory", e->path);
                } else {
                        assert_msg(S_ISREG(st.st_mode), "%s should be a regular file", e->path);
                        bool exec = st.st_mode & S_IXUSR;
                        assert_msg(exec == (e->kind == ENTRY_XREG), "%s should%s be executable (mode %o)",
                                   e->path, e->kind == ENTRY_XREG ? "" : " not",
                                   (unsigned)st.st_mode & 07777);
                        size_t len = 0;
                        char *got = read_whole(path, &len);
                        assert_non_null(got);
                        bool same = len == strlen(e->data) && !memcmp(got, e->data, len);
                        if (!same)
                                print_error("%s holds '%s', expected '%s'\n", e->path, got, e->data);
                        free(got);
                        assert_msg(same, "contents of %s differ", e->path);
                }
        }
        assert_nothing_unexpected(dir, "", spec);
}

/* Everything in a is in b with the same kind, contents, link target and exec bit. */
static inline void assert_contained_in(const char *a, const char *b, const char *rel) {
        char dir[PATH_MAX];
        fmt_path(dir, "%s%s%s", a, *rel ? "/" : "", rel);
        DIR *d = opendir(dir);
        assert_msg(d, "cannot read %s: %s", dir, strerror(errno));
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                char sub[PATH_MAX], pa[PATH_MAX], pb[PATH_MAX];
                fmt_path(sub, "%s%s%s", rel, *rel ? "/" : "", de->d_name);
                fmt_path(pa, "%s/%s", a, sub);
                fmt_path(pb, "%s/%s", b, sub);
                struct stat sa, sb;
                assert_int_equal(lstat(pa, &sa), 0);
                assert_msg(lstat(pb, &sb) == 0, "'%s' is in %s but not in %s", sub, a, b);
                assert_msg((sa.st_mode & S_IFMT) == (sb.st_mode & S_IFMT), "'%s' differs in kind", sub);
                if (S_ISDIR(sa.st_mode)) {
                        assert_contained_in(a, b, sub);
                } else if (S_ISLNK(sa.st_mode)) {
                        char ta[PATH_MAX], tb[PATH_MAX];
                        ssize_t ka = readlink(pa, ta, sizeof(ta)), kb = readlink(pb, tb, sizeof(tb));
                        assert_msg(ka >= 0 && ka == kb && !memcmp(ta, tb, (size_t)ka),
                                   "symlink '%s' differs", sub);
                } else if (S_ISREG(sa.st_mode)) {
                        assert_msg((sa.st_mode & S_IXUSR) == (sb.st_mode & S_IXUSR),
                                   "'%s' differs in its exec bit", sub);
                        size_t la = 0, lb = 0;
                        char *ca = read_whole(pa, &la), *cb = read_whole(pb, &lb);
                        bool same = ca && cb && la == lb && !memcmp(ca, cb, la);
                        free(ca);
                        free(cb);
                        assert_msg(same, "contents of '%s' differ", sub);
                }
        }
        closedir(d);
}

/* a and b hold the same tree (as far as a Store records one). */
static inline void assert_same_tree(const char *a, const char *b) {
        assert_contained_in(a, b, "");
        assert_contained_in(b, a, "");
}

/* ---- errors ---- */

#define assert_ok(env, r) assert_ok_at((env), (r), #r, __FILE__, __LINE__)
static inline void assert_ok_at(test_env *env, int r, const char *call, const char *file, int line) {
        if (r >= 0 && !env->err)
                return;
        print_error("ERROR: %s returned %d: %s: %s\n", call, r,
                    env->err ? lfs_code_name(env->err->code) : "(no error set)",
                    env->err && env->err->message ? env->err->message : "");
        _fail(file, line);
}

/* The call failed with code and its message names `named` (when not NULL). The error is
 * then cleared so that the test can make the next call. */
#define assert_error(env, r, code, named) assert_error_at((env), (r), (code), (named), __FILE__, __LINE__)
static inline void assert_error_at(test_env *env, int r, lfs_code code, const char *named, const char *file,
                                   int line) {
        lfs_error *e = env->err;
        const char *why = NULL;
        if (r >= 0)
                why = "the call succeeded";
        else if (!e)
                why = "no error was set";
        else if (e->code != code)
                why = "the code differs";
        else if (!e->message || !*e->message)
                why = "the message is empty";
        else if (named && !strstr(e->message, named))
                why = "the message does not name the value";
        if (why) {
                print_error("ERROR: expected %s%s%s%s, got r=%d %s: %s (%s)\n", lfs_code_name(code),
                            named ? " naming '" : "", named ? named : "", named ? "'" : "", r,
                            e ? lfs_code_name(e->code) : "-", e && e->message ? e->message : "", why);
                _fail(file, line);
        }
        lfs_error_free(env->err);
        env->err = NULL;
}

/* ---- ids ---- */

static inline const char *id_hex(test_env *env, const lfs_id *id) {
        char *hex = malloc(LFS_HEX_LEN + 1);
        assert_non_null(hex);
        lfs_id_to_hex(id, hex);
        return env_keep(env, hex);
}

#define assert_id_equal(env, a, b)                                                                          \
        assert_msg(!memcmp((a)->bytes, (b)->bytes, LFS_ID_LEN), "%s is %s, expected %s", #a,                \
                   id_hex((env), (a)), id_hex((env), (b)))
#define assert_id_not_equal(env, a, b)                                                                      \
        assert_msg(memcmp((a)->bytes, (b)->bytes, LFS_ID_LEN), "%s and %s are both %s", #a, #b,             \
                   id_hex((env), (a)))

/* ---- the fixture ---- */

static inline int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void)st;
        (void)ftw;
        if (type == FTW_DP)
                return rmdir(path) < 0 ? -1 : 0;
        return unlink(path) < 0 ? -1 : 0;
}

static inline int make_writable(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void)ftw;
        /* Store directories may be read-only for a non-root user; emptying needs w+x. */
        if (type == FTW_D)
                chmod(path, (st->st_mode & 07777) | S_IRWXU);
        return 0;
}

/* rm -rf path. */
static inline int remove_tree(const char *path) {
        nftw(path, make_writable, 32, FTW_PHYS);
        return nftw(path, remove_one, 32, FTW_DEPTH | FTW_PHYS);
}

static inline int env_setup(void **state) {
        test_env *env = calloc(1, sizeof(*env));
        if (!env)
                return -1;
        const char *tmp = getenv("TMPDIR");
        /* Short enough that "<root>/home" and the paths below it always fit. */
        if (snprintf(env->root, 256, "%s/layerfs-unit.XXXXXX", tmp && *tmp ? tmp : "/tmp") >= 256 ||
            !mkdtemp(env->root)) {
                free(env);
                return -1;
        }
        if (snprintf(env->home_dir, sizeof(env->home_dir), "%s/home", env->root) >=
            (int)sizeof(env->home_dir)) {
                remove_tree(env->root);
                free(env);
                return -1;
        }
        /* A fixed author keeps commit ids independent of who runs the tests. */
        setenv("LAYERFS_AUTHOR", "unit-test <unit@test>", 1);
        unsetenv("LAYERFS_NO_URING");
        if (lfs_home_open(env->home_dir, &env->home, &env->err) < 0) {
                remove_tree(env->root);
                free(env);
                return -1;
        }
        *state = env;
        return 0;
}

static inline int env_teardown(void **state) {
        test_env *env = *state;
        if (!env)
                return 0;
        lfs_store_close(env->store);
        lfs_home_close(env->home);
        lfs_error_free(env->err);
        unsetenv("LAYERFS_NO_URING");
        int r = remove_tree(env->root);
        for (size_t i = 0; i < env->n_strings; i++)
                free(env->strings[i]);
        free(env);
        *state = NULL;
        return r;
}

#define env_test(f) cmocka_unit_test_setup_teardown(f, env_setup, env_teardown)

/* ---- common Store steps ---- */

/* Makes project `name` from spec (NULL: an empty project) and opens its Store into env. */
static inline lfs_id env_init_project(test_env *env, const char *name, const entry_spec *spec) {
        lfs_id commit;
        const char *from = spec ? make_tree_dir(env, spec) : NULL;
        assert_ok(env, lfs_project_init(env->home, name, from, &commit, &env->err));
        lfs_store_close(env->store);
        env->store = NULL;
        assert_ok(env, lfs_store_open(env->home, name, &env->store, &env->err));
        return commit;
}

static inline lfs_id head_of(test_env *env, const char *branch) {
        lfs_id id;
        assert_ok(env, lfs_store_resolve(env->store, branch, &id, &env->err));
        return id;
}

/* Records spec as the branch's next commit. */
static inline lfs_id commit_spec(test_env *env, const char *branch, const entry_spec *spec,
                                 const char *message) {
        lfs_id commit;
        const char *dir = make_tree_dir(env, spec);
        assert_ok(env, lfs_branch_commit(env->store, branch, dir, message, &commit, &env->err));
        return commit;
}

/* The Store of env->store closed, so that a child process can open its own; returns
 * the project's name for env_reopen_store. */
static inline const char *env_close_store(test_env *env) {
        assert_non_null(env->store);
        char *project = strdup(lfs_store_project(env->store));
        lfs_store_close(env->store);
        env->store = NULL;
        return env_keep(env, project);
}

static inline void env_reopen_store(test_env *env, const char *project) {
        assert_ok(env, lfs_store_open(env->home, project, &env->store, &env->err));
}

/* Runs in the child of export_isolated; never returns. */
static inline void export_child(test_env *env, const char *project, const char *ref, const char *dir,
                                int out_fd) {
        /* cmocka's handlers would resume the test run inside the child. */
        static const int crash_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS };
        for (size_t i = 0; i < COUNT_OF(crash_signals); i++)
                signal(crash_signals[i], SIG_DFL);
        lfs_home *home = NULL;
        lfs_store *store = NULL;
        lfs_error *err = NULL;
        int r = lfs_home_open(env->home_dir, &home, &err);
        if (r == 0)
                r = lfs_store_open(home, project, &store, &err);
        if (r == 0)
                r = lfs_branch_export(store, ref, dir, &err);
        dprintf(out_fd, "%d %d %d %s", r, err ? (int)err->code : 0, err ? err->errnum : 0,
                err && err->message ? err->message : "");
        _exit(0);
}

/*
 * lfs_branch_export with the same result and error, but in a child process: a crash in
 * the library then fails this one test instead of ending every test after it (and
 * their cleanup). The child opens the Store itself, so env->store is closed meanwhile.
 */
static inline int export_isolated(test_env *env, const char *ref, const char *dir) {
        const char *project = env_close_store(env);
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                close(fds[0]);
                export_child(env, project, ref, dir, fds[1]);
        }
        close(fds[1]);
        char report[4096];
        size_t len = read_to_end(fds[0], report, sizeof(report));
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_msg(!WIFSIGNALED(status), "lfs_branch_export(%s, %s) crashed: %s", ref, dir,
                   strsignal(WTERMSIG(status)));
        /* A sanitizer that stops the child on undefined behaviour exits without a report. */
        assert_msg(WIFEXITED(status) && len > 0,
                   "lfs_branch_export(%s, %s) ended with status %d without a result; see the report above",
                   ref, dir, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        env_reopen_store(env, project);
        int r, code, errnum, offset = 0;
        assert_int_equal(sscanf(report, "%d %d %d %n", &r, &code, &errnum, &offset), 3);
        if (r < 0) {
                lfs_error *e = calloc(1, sizeof(*e));
                assert_non_null(e);
                e->code = (lfs_code)code;
                e->errnum = errnum;
                e->message = strdup(report + offset);
                lfs_error_free(env->err);
                env->err = e;
        }
        return r;
}

/* Exports ref into a new directory and returns its path. */
static inline const char *export_ref(test_env *env, const char *ref) {
        const char *dir = env_fresh_path(env, "export");
        assert_ok(env, export_isolated(env, ref, dir));
        return dir;
}

/* The commit's record, for its tree and parents. */
static inline lfs_commit_info commit_info(test_env *env, const char *ref) {
        lfs_commit_info *log = NULL;
        size_t n = 0;
        assert_ok(env, lfs_branch_log(env->store, ref, 1, &log, &n, &env->err));
        assert_int_equal(n, 1);
        lfs_commit_info c = log[0];
        c.author = NULL;
        c.message = NULL;
        lfs_commit_info_free(log, n);
        return c;
}

static inline size_t log_length(test_env *env, const char *ref) {
        lfs_commit_info *log = NULL;
        size_t n = 0;
        assert_ok(env, lfs_branch_log(env->store, ref, 0, &log, &n, &env->err));
        lfs_commit_info_free(log, n);
        return n;
}

#endif
