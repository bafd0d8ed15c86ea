/* SPDX-License-Identifier: MIT */
/* The home directory and its projects. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include "store.h"

static char *default_home(void) {
        const char *env = getenv("LAYERFS_HOME");
        if (env && *env)
                return xstrdup(env);
        if (geteuid() == 0)
                return xstrdup("/var/lib/layerfs");
        const char *xdg = getenv("XDG_DATA_HOME");
        if (xdg && *xdg == '/')
                return xasprintf("%s/layerfs", xdg);
        const char *home = getenv("HOME");
        return xasprintf("%s/.local/share/layerfs", home && *home ? home : "/tmp");
}

static char *absolute(const char *path) {
        if (path[0] == '/')
                return xstrdup(path);
        char cwd[4096];
        if (!getcwd(cwd, sizeof(cwd)))
                return xstrdup(path);
        return xasprintf("%s/%s", cwd, path);
}

int lfs_home_open(const char *dir, lfs_home **ret_home, lfs_error **err) {
        _cleanup_free_ char *chosen = dir ? xstrdup(dir) : default_home();
        if (!*chosen)
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the home directory must not be empty");
        struct stat st;
        if (stat(chosen, &st) == 0 && !S_ISDIR(st.st_mode))
                return lfs_fail(err, LFS_INVALID_INPUT, ENOTDIR,
                                "home '%s' is not a directory; give --home DIR or LAYERFS_HOME", chosen);
        lfs_home *home = xcalloc(1, sizeof(*home));
        home->path = absolute(chosen);
        home->fd = -1;
        *ret_home = home;
        return 0;
}

void lfs_home_close(lfs_home *home) {
        if (!home)
                return;
        free(home->path);
        free(home);
}

const char *lfs_home_path(const lfs_home *home) {
        return home->path;
}

void lfs_home_set_progress(lfs_home *home, lfs_progress_fn fn, void *userdata) {
        home->progress = fn;
        home->progress_data = userdata;
}

static int mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *copy = xstrdup(path);
        for (char *p = copy + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = 0;
                if (mkdir(copy, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(copy, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static void remove_stale_init(void *userdata, int dirfd, const char *name) {
        (void)userdata;
        rm_rf_at(dirfd, name);
}

static char *projects_dir(const lfs_home *home) {
        return xasprintf("%s/projects", home->path);
}

static int check_from_dir(const char *from_dir, lfs_error **err) {
        struct stat st;
        if (stat(from_dir, &st) < 0)
                return lfs_fail(err, errno == EACCES ? LFS_PERMISSION_DENIED : LFS_INVALID_INPUT, errno,
                                "--from directory '%s' cannot be used: %s", from_dir, strerror(errno));
        if (!S_ISDIR(st.st_mode))
                return lfs_fail(err, LFS_INVALID_INPUT, ENOTDIR,
                                "--from '%s' is not a directory; give a directory to import", from_dir);
        return 0;
}

int lfs_project_init(lfs_home *home, const char *name, const char *from_dir, lfs_id *ret_commit,
                     lfs_error **err) {
        int r = lfs_check_project_name(name, err);
        if (r < 0 || (from_dir && (r = check_from_dir(from_dir, err)) < 0))
                return r;
        _cleanup_free_ char *projects = projects_dir(home);
        _cleanup_free_ char *final = xasprintf("%s/%s", projects, name);
        if (access(final, F_OK) == 0)
                return lfs_fail(err, LFS_INVALID_INPUT, EEXIST,
                                "project '%s' already exists in %s; choose another name", name, home->path);
        if ((r = mkdir_p(projects, 0755)) < 0)
                return lfs_fail(err, r == -EACCES ? LFS_PERMISSION_DENIED : LFS_FAILED, r,
                                "cannot make %s: %s", projects, strerror(-r));
        _cleanup_close_ int projects_fd = open(projects, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (projects_fd < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot open %s: %s", projects, strerror(errno));
        /* What inits killed part-way left behind. */
        for_each_dead_writer(projects_fd, ".init-", remove_stale_init, NULL);

        /* Built under a temporary name and renamed: a failed init leaves no project. */
        _cleanup_free_ char *tmp_name = xasprintf(".init-%d-%s", (int)getpid(), name);
        _cleanup_free_ char *tmp = xasprintf("%s/%s", projects, tmp_name);
        rm_rf_at(projects_fd, tmp_name);
        if (mkdir(tmp, 0755) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot make %s: %s", tmp, strerror(errno));
        lfs_store *s = NULL;
        lfs_blob_writer *w = NULL;
        lfs_tree_rows rows = { 0 };
        lfs_id tree = *lfs_empty_tree_id(), commit;
        r = lfs_store_open_dir(home, name, tmp, true, &s, err);
        if (r == 0) {
                w = lfs_blob_writer_new(s);
                if (from_dir)
                        r = lfs_snapshot_dir(s, w, from_dir, NULL, &rows, &tree, err);
                else
                        lfs_tree_rows_add(&rows, &tree, NULL, 0);
        }
        if (r == 0) {
                _cleanup_free_ char *message =
                        from_dir ? xasprintf("Import %s", from_dir) : xstrdup("Initial empty commit");
                r = lfs_record_commit(s, w, &rows, "main", NULL, &tree, NULL, 0, message, &commit, err);
        }
        lfs_tree_rows_done(&rows);
        lfs_blob_writer_free(w);
        lfs_store_close(s);
        if (r == 0 && renameat2(projects_fd, tmp_name, projects_fd, name, RENAME_NOREPLACE) < 0)
                r = lfs_fail(err, errno == EEXIST ? LFS_INVALID_INPUT : LFS_FAILED, errno,
                             "cannot put project '%s' in place: %s", name,
                             errno == EEXIST ? "another process created it at the same time"
                                             : strerror(errno));
        if (r < 0) {
                rm_rf_at(projects_fd, tmp_name);
                return r;
        }
        *ret_commit = commit;
        return 0;
}

void lfs_project_list_free(lfs_project_info *projects, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(projects[i].project);
                for (size_t j = 0; j < projects[i].n_branches; j++)
                        free(projects[i].branches[j]);
                free(projects[i].branches);
        }
        free(projects);
}

static int cmp_project(const void *a, const void *b) {
        return strcmp(((const lfs_project_info *)a)->project, ((const lfs_project_info *)b)->project);
}

/* Names of the projects, sorted. */
static int project_names(lfs_home *home, char ***ret, size_t *ret_n, lfs_error **err) {
        _cleanup_free_ char *projects = projects_dir(home);
        char **names = NULL;
        size_t n = 0, cap = 0;
        DIR *d = opendir(projects);
        if (!d) {
                if (errno != ENOENT)
                        return lfs_fail(err, LFS_FAILED, errno, "cannot read %s: %s", projects,
                                        strerror(errno));
        } else {
                struct dirent *de;
                while ((de = readdir(d))) {
                        if (de->d_name[0] == '.' || lfs_check_project_name(de->d_name, NULL) < 0)
                                continue;
                        GROW(names, cap, n + 1);
                        names[n++] = xstrdup(de->d_name);
                }
                closedir(d);
        }
        for (size_t i = 1; i < n; i++)
                for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
                        char *t = names[j];
                        names[j] = names[j - 1];
                        names[j - 1] = t;
                }
        *ret = names;
        *ret_n = n;
        return 0;
}

int lfs_project_list(lfs_home *home, lfs_project_info **ret_projects, size_t *ret_n, lfs_error **err) {
        char **names = NULL;
        size_t n = 0;
        int r = project_names(home, &names, &n, err);
        if (r < 0)
                return r;
        lfs_project_info *out = xcalloc(n, sizeof(*out));
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                lfs_store *s = NULL;
                lfs_branch_info *branches = NULL;
                size_t nb = 0;
                if (r == 0)
                        r = lfs_store_open(home, names[i], &s, err);
                if (r == 0) {
                        r = lfs_branch_list(s, &branches, &nb, err);
                        lfs_store_close(s);
                }
                if (r == 0) {
                        out[k].project = xstrdup(names[i]);
                        out[k].branches = xcalloc(nb, sizeof(char *));
                        for (size_t j = 0; j < nb; j++)
                                out[k].branches[j] = TAKE_PTR(branches[j].name);
                        out[k].n_branches = nb;
                        out[k].sandboxes = lfs_count_sandboxes(home, names[i]);
                        k++;
                        lfs_branch_list_free(branches, nb);
                }
                free(names[i]);
        }
        free(names);
        if (r < 0) {
                lfs_project_list_free(out, k);
                return r;
        }
        qsort(out, k, sizeof(*out), cmp_project);
        *ret_projects = out;
        *ret_n = k;
        return 0;
}

int lfs_store_open(lfs_home *home, const char *project, lfs_store **ret_store, lfs_error **err) {
        _cleanup_free_ char *only = NULL;
        int r;
        if (!project) {
                char **names = NULL;
                size_t n = 0;
                if ((r = project_names(home, &names, &n, err)) < 0)
                        return r;
                if (n == 1)
                        only = xstrdup(names[0]);
                for (size_t i = 0; i < n; i++)
                        free(names[i]);
                free(names);
                if (n == 0)
                        return lfs_fail(err, LFS_NO_SUCH_PROJECT, ENOENT,
                                        "home %s has no project; make one with 'layerfs project init "
                                        "NAME'",
                                        home->path);
                if (n > 1)
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "home %s has %zu projects; say which with --project NAME or "
                                        "LAYERFS_PROJECT",
                                        home->path, n);
                project = only;
        }
        if ((r = lfs_check_project_name(project, err)) < 0)
                return r;
        _cleanup_free_ char *path = xasprintf("%s/projects/%s", home->path, project);
        struct stat st;
        if (stat(path, &st) < 0)
                return lfs_fail(err, LFS_NO_SUCH_PROJECT, ENOENT,
                                "home %s has no project '%s'; 'layerfs project list' shows the "
                                "projects",
                                home->path, project);
        return lfs_store_open_dir(home, project, path, false, ret_store, err);
}
