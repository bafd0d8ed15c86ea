/* SPDX-License-Identifier: MIT */
/* workspace.exec: a command in its own cgroup leaf, as the command identity (SPEC 3). */
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "cgroup.h"
#include "daemon.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

typedef struct str_list {
        char **items;
        size_t n, cap;
} str_list;

static void str_list_add(str_list *l, char *s) {
        GROW(l->items, l->cap, l->n + 2);
        l->items[l->n++] = s;
        l->items[l->n] = NULL;
}

static void str_list_done(str_list *l) {
        for (size_t i = 0; i < l->n; i++)
                free(l->items[i]);
        free(l->items);
        *l = (str_list){ 0 };
}

/* Sets KEY=VALUE, replacing an earlier KEY. */
static void env_set(str_list *env, const char *entry) {
        size_t key_len = strcspn(entry, "=");
        for (size_t i = 0; i < env->n; i++)
                if (!strncmp(env->items[i], entry, key_len) && env->items[i][key_len] == '=') {
                        free(env->items[i]);
                        env->items[i] = xstrdup(entry);
                        return;
                }
        str_list_add(env, xstrdup(entry));
}

static const char *env_get(const str_list *env, const char *key) {
        size_t len = strlen(key);
        for (size_t i = 0; i < env->n; i++)
                if (!strncmp(env->items[i], key, len) && env->items[i][len] == '=')
                        return env->items[i] + len + 1;
        return NULL;
}

/* The command's environment: PATH, HOME and TMPDIR of the Sandbox, then the caller's. */
static json_t *build_env(daemon_state *d, json_t *given, str_list *env) {
        _cleanup_free_ char *home = xasprintf("HOME=%s", d->tmp), *tmpdir = xasprintf("TMPDIR=%s", d->tmp);
        env_set(env, "PATH=" DEFAULT_PATH);
        env_set(env, home);
        env_set(env, tmpdir);
        if (given && !json_is_array(given))
                return error_json(LFS_INVALID_INPUT, "env must be a list of KEY=VALUE strings");
        size_t i;
        json_t *v;
        json_array_foreach(given, i, v) {
                const char *s = json_string_value(v);
                if (!s || !*s || *s == '=' || !strchr(s, '='))
                        return error_json(LFS_INVALID_INPUT,
                                          "environment entry '%s' is not KEY=VALUE; give --env KEY=VALUE",
                                          s ? s : "(not a string)");
                env_set(env, s);
        }
        return NULL;
}

/* The directory the command starts in: the Workspace, or cwd below it (relative to the
 * Workspace, or absolute inside it). Symlinks are followed and must stay inside. */
static json_t *resolve_cwd(const workspace *w, const char *cwd, char **ret) {
        _cleanup_free_ char *joined = NULL;
        size_t mlen = strlen(w->mountpoint);
        if (!cwd || !*cwd)
                joined = xstrdup(w->mountpoint);
        else if (cwd[0] == '/')
                joined = xstrdup(cwd);
        else
                joined = xasprintf("%s/%s", w->mountpoint, cwd);
        char real[PATH_MAX];
        struct stat st;
        if (!realpath(joined, real) || stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
                return error_json(LFS_INVALID_INPUT,
                                  "cwd '%s' is not a directory in the Workspace of '%s' (%s); give a "
                                  "directory below it",
                                  cwd, w->branch, w->mountpoint);
        if (strncmp(real, w->mountpoint, mlen) || (real[mlen] && real[mlen] != '/'))
                return error_json(LFS_INVALID_INPUT,
                                  "cwd '%s' leads to %s, outside the Workspace of '%s' (%s); give a "
                                  "directory below it",
                                  cwd, real, w->branch, w->mountpoint);
        *ret = xstrdup(real);
        return NULL;
}

/* Candidates for argv[0], as execvp would try them: itself when it has a '/', else each
 * directory of the command's PATH. */
static void program_paths(const char *name, const char *path_var, str_list *ret) {
        if (strchr(name, '/')) {
                str_list_add(ret, xstrdup(name));
                return;
        }
        const char *p = path_var ? path_var : DEFAULT_PATH;
        while (*p) {
                size_t n = strcspn(p, ":");
                str_list_add(ret, n ? xasprintf("%.*s/%s", (int)n, p, name) : xstrdup(name));
                p += n + (p[n] == ':');
        }
}

static int exit_code(const siginfo_t *si) {
        if (si->si_code == CLD_EXITED)
                return si->si_status;
        return 128 + si->si_status; /* killed or dumped by signal N */
}

/* Waits for the command; at the timeout ends its whole leaf. Returns its exit code. */
static int wait_command(const char *leaf, int pidfd, double timeout, bool *ret_timed_out) {
        *ret_timed_out = false;
        if (timeout > 0) {
                struct pollfd p = { .fd = pidfd, .events = POLLIN };
                struct timespec start, now;
                clock_gettime(CLOCK_MONOTONIC, &start);
                for (;;) {
                        clock_gettime(CLOCK_MONOTONIC, &now);
                        double left = timeout - (double)(now.tv_sec - start.tv_sec) -
                                      (double)(now.tv_nsec - start.tv_nsec) / 1e9;
                        if (left <= 0) {
                                *ret_timed_out = true;
                                lfs_cgroup_kill_wait(leaf, 5000);
                                break;
                        }
                        int k = poll(&p, 1, left > INT_MAX / 1000 ? INT_MAX : (int)(left * 1000) + 1);
                        if (k > 0)
                                break;
                        if (k < 0 && errno != EINTR)
                                break;
                }
        }
        siginfo_t si = { 0 };
        while (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0)
                if (errno != EINTR)
                        return 126;
        return *ret_timed_out ? 124 : exit_code(&si);
}

static void close_fds(int *fds, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (fds[i] >= 0)
                        close(fds[i]);
}

json_t *call_exec(daemon_state *d, json_t *req, int *fds, size_t n_fds) {
        const char *branch = json_string_value(json_object_get(req, "branch"));
        const char *cwd = json_string_value(json_object_get(req, "cwd"));
        json_t *command = json_object_get(req, "command"), *timeout_j = json_object_get(req, "timeout");
        double timeout = timeout_j ? json_number_value(timeout_j) : 0;
        str_list argv = { 0 }, env = { 0 }, paths = { 0 };
        _cleanup_free_ char *dir = NULL, *leaf = NULL;
        json_t *refusal = NULL;
        size_t i;
        json_t *v;
        if (n_fds != 3)
                refusal = error_json(LFS_INVALID_INPUT, "exec needs the caller's stdin, stdout and stderr");
        else if (!json_is_array(command) || json_array_size(command) == 0)
                refusal = error_json(LFS_INVALID_INPUT, "give the command to run after '--'");
        else if ((timeout_j && !json_is_number(timeout_j)) || timeout < 0)
                refusal = error_json(LFS_INVALID_INPUT, "timeout must be a number of seconds, 0 or more");
        json_array_foreach(command, i, v) {
                if (!refusal && !json_string_value(v))
                        refusal = error_json(LFS_INVALID_INPUT, "the command's words must be strings");
                str_list_add(&argv, xstrdup(json_string_value(v) ?: ""));
        }
        if (!refusal)
                refusal = build_env(d, json_object_get(req, "env"), &env);
        pthread_mutex_lock(&d->lock);
        workspace *w = branch ? find_ws(d, branch) : NULL;
        if (refusal)
                ;
        else if (d->closing)
                refusal = error_json(LFS_NO_SUCH_SANDBOX, "sandbox %d is closing", d->number);
        else if (!w)
                refusal = not_mounted(d, branch);
        else
                refusal = resolve_cwd(w, cwd, &dir);
        if (!refusal) {
                leaf = xasprintf("%s/cmd-%u", d->cgroup, ++d->next_command);
                d->running_execs++;
        }
        pthread_mutex_unlock(&d->lock);
        if (refusal || argv.n == 0) {
                close_fds(fds, n_fds);
                str_list_done(&argv);
                str_list_done(&env);
                return refusal;
        }
        program_paths(argv.items[0], env_get(&env, "PATH"), &paths);
        lfs_spawn_args a = {
                .cgroup = leaf,
                .paths = (const char *const *)paths.items,
                .n_paths = paths.n,
                .argv = argv.items,
                .envp = env.items,
                .cwd = dir,
                .uid = d->uid,
                .gid = d->gid,
                .fd_in = fds[0],
                .fd_out = fds[1],
                .fd_err = fds[2],
        };
        pid_t pid = -1;
        int pidfd = -1, r = lfs_cgroup_make(leaf);
        if (r == 0)
                r = lfs_cgroup_spawn(&a, &pid, &pidfd);
        close_fds(fds, n_fds); /* the command has them now */
        json_t *result;
        if (r < 0) {
                log_line("exec %s: cannot start '%s': %s", leaf, argv.items[0], strerror(-r));
                result = error_json(LFS_FAILED, "cannot start '%s' in sandbox %d: %s", argv.items[0],
                                    d->number, strerror(-r));
        } else {
                bool timed_out;
                int code = wait_command(leaf, pidfd, timeout, &timed_out);
                close(pidfd);
                log_line("exec %s: '%s' (pid %d) exited %d%s", leaf, argv.items[0], (int)pid, code,
                         timed_out ? " (its timeout ended it)" : "");
                result = ok_json(json_pack("{s:i}", "exit", code));
        }
        /* Empty once the command and its children are gone; background processes keep it
         * until the Sandbox closes. */
        lfs_cgroup_remove_tree(leaf, 0);
        str_list_done(&argv);
        str_list_done(&env);
        str_list_done(&paths);
        pthread_mutex_lock(&d->lock);
        d->running_execs--;
        pthread_mutex_unlock(&d->lock);
        wake_main_loop(d);
        return result;
}
