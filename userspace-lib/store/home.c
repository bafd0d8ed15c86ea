/* SPDX-License-Identifier: MIT */
/* The home directory and its projects. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>

#include "fault.h"
#include "leftover.h"
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

/* Who may own a directory on the way to the home, or in it: the caller or root. */
static bool trusted_owner(uid_t uid) {
        return uid == 0 || uid == geteuid();
}

/* The path of an open directory, as the kernel resolved it: absolute, no symlink. */
static char *fd_path(int fd) {
        char self[64], buf[PATH_MAX];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
        ssize_t k = readlink(self, buf, sizeof(buf) - 1);
        if (k <= 0 || buf[0] != '/')
                return NULL;
        buf[k] = 0;
        return xstrdup(buf);
}

/* One directory on the way to the home (is_home: the home itself). */
static int check_dir(const char *home, const char *dir, bool is_home, lfs_error **err) {
        struct stat st;
        if (lstat(dir, &st) < 0)
                return lfs_fail(err, errno == EACCES ? LFS_PERMISSION_DENIED : LFS_FAILED, errno,
                                "cannot check '%s' on the way to the home '%s': %s", dir, home,
                                strerror(errno));
        if (!S_ISDIR(st.st_mode))
                return lfs_fail(err, LFS_PERMISSION_DENIED, ELOOP,
                                "the home '%s' cannot be trusted: '%s' changed into a %s while it was "
                                "checked; check who can write to its parent",
                                home, dir, S_ISLNK(st.st_mode) ? "symbolic link" : "non-directory");
        if (!trusted_owner(st.st_uid))
                return lfs_fail(err, LFS_PERMISSION_DENIED, EPERM,
                                "the home '%s' cannot be trusted: '%s' is owned by uid %u, not by you (uid "
                                "%u) or root, and its owner could swap what the home holds; use a home in "
                                "directories of yours or root's ('chown %u '%s'' if it is yours), or give "
                                "another with --home DIR or LAYERFS_HOME",
                                home, dir, (unsigned)st.st_uid, (unsigned)geteuid(), (unsigned)geteuid(),
                                dir);
        /* Writable by others: only a sticky directory above the home (as /tmp), where
         * no one else may rename or remove what the caller or root owns. */
        if ((st.st_mode & (S_IWGRP | S_IWOTH)) && (is_home || !(st.st_mode & S_ISVTX)))
                return lfs_fail(err, LFS_PERMISSION_DENIED, EPERM,
                                "the home '%s' cannot be trusted: '%s' (mode %04o) is writable by %s, who "
                                "could swap what the home holds; 'chmod go-w '%s'', or give another home "
                                "with --home DIR or LAYERFS_HOME",
                                home, dir, (unsigned)(st.st_mode & 07777),
                                st.st_mode & S_IWOTH ? "others" : "its group", dir);
        return 0;
}

/* SPEC 1, as OpenSSH's StrictModes: every directory from / down to path (absolute, no
 * symlink: the kernel's own resolution) owned by the caller or root and not writable
 * by group or others. path_is_home: path is the home itself, else the nearest existing
 * directory above a home still to be made. home: for messages. */
static int check_strict_modes(const char *home, const char *path, bool path_is_home, lfs_error **err) {
        _cleanup_free_ char *walk = xstrdup(path);
        size_t len = strlen(walk);
        int r = check_dir(home, "/", path_is_home && len == 1, err);
        for (size_t i = 1; r == 0 && len > 1 && i <= len; i++) {
                if (walk[i] != '/' && walk[i] != 0)
                        continue;
                char saved = walk[i];
                walk[i] = 0;
                r = check_dir(home, walk, path_is_home && i == len, err);
                walk[i] = saved;
        }
        return r;
}

/* Sets home->path to the home's real path and home->fd to it, once both are checked; a
 * home that does not exist yet keeps fd -1, its nearest existing directory checked. */
static int resolve_home(lfs_home *home, const char *abs, lfs_error **err) {
        int fd = open(abs, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0) {
                _cleanup_free_ char *real = fd_path(fd);
                if (!real) {
                        close(fd);
                        return lfs_fail(err, LFS_FAILED, EIO, "cannot tell where the home '%s' is", abs);
                }
                struct stat held, named;
                int r = check_strict_modes(abs, real, true, err);
                /* What was checked by name is what is held. */
                if (r == 0 && (fstat(fd, &held) < 0 || lstat(real, &named) < 0 ||
                               held.st_dev != named.st_dev || held.st_ino != named.st_ino))
                        r = lfs_fail(err, LFS_PERMISSION_DENIED, EAGAIN,
                                     "the home '%s' changed while it was checked; check who can write to "
                                     "its parents",
                                     abs);
                if (r < 0) {
                        close(fd);
                        return r;
                }
                free(home->path);
                home->path = TAKE_PTR(real);
                if (home->fd >= 0)
                        close(home->fd);
                home->fd = fd;
                return 0;
        }
        if (errno != ENOENT)
                return lfs_fail(err,
                                errno == EACCES    ? LFS_PERMISSION_DENIED
                                : errno == ENOTDIR ? LFS_INVALID_INPUT
                                                   : LFS_FAILED,
                                errno, "cannot open the home '%s': %s; give --home DIR or LAYERFS_HOME", abs,
                                strerror(errno));
        /* Not made yet (project init makes it): the nearest directory above it that
         * exists must be trusted, and the rest of the path plain names. */
        _cleanup_free_ char *prefix = xstrdup(abs);
        _cleanup_close_ int pfd = -1;
        while (pfd < 0) {
                char *slash = strrchr(prefix, '/');
                if (!slash)
                        return lfs_fail(err, LFS_INVALID_INPUT, ENOENT, "the home '%s' is not a path", abs);
                slash[slash == prefix ? 1 : 0] = 0;
                pfd = open(prefix, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (pfd < 0 && errno != ENOENT)
                        return lfs_fail(err, errno == EACCES ? LFS_PERMISSION_DENIED : LFS_INVALID_INPUT,
                                        errno, "cannot make the home '%s': '%s': %s", abs, prefix,
                                        strerror(errno));
        }
        const char *rest = abs + strlen(prefix);
        for (const char *p = rest; *p;) {
                p += strspn(p, "/");
                size_t n = strcspn(p, "/");
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "the home '%s' does not exist yet and its path has '.' or '..' in "
                                        "it; give it as a plain path",
                                        abs);
                p += n;
        }
        _cleanup_free_ char *real = fd_path(pfd);
        if (!real)
                return lfs_fail(err, LFS_FAILED, EIO, "cannot tell where '%s' is", prefix);
        int r = check_strict_modes(abs, real, false, err);
        if (r < 0)
                return r;
        /* The names below it, one slash between each and none at the end: the path the
         * home will have once made, which the handle keeps (lfs_home_make). */
        _cleanup_free_ char *names = xstrdup(rest);
        char *out = names;
        for (const char *p = rest + strspn(rest, "/"); *p; p += strspn(p, "/")) {
                size_t n = strcspn(p, "/");
                if (out != names)
                        *out++ = '/';
                memmove(out, p, n);
                out += n;
                p += n;
        }
        *out = 0;
        free(home->path);
        home->path = xasprintf("%s/%s", strcmp(real, "/") ? real : "", names);
        return 0;
}

int lfs_home_open(const char *dir, lfs_home **ret_home, lfs_error **err) {
        _cleanup_free_ char *chosen = dir ? xstrdup(dir) : default_home();
        if (!*chosen)
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "the home directory must not be empty");
        struct stat st;
        if (stat(chosen, &st) == 0 && !S_ISDIR(st.st_mode))
                return lfs_fail(err, LFS_INVALID_INPUT, ENOTDIR,
                                "home '%s' is not a directory; give --home DIR or LAYERFS_HOME", chosen);
        _cleanup_free_ char *abs = absolute(chosen);
        lfs_home *home = xcalloc(1, sizeof(*home));
        home->fd = -1;
        int r = resolve_home(home, abs, err);
        if (r < 0) {
                lfs_home_close(home);
                return r;
        }
        *ret_home = home;
        return 0;
}

/* Whether home->fd is still the directory its path names. A home removed (or moved away)
 * and made again at the same path is another directory, the one SQLite opens home.db in
 * by path: the handle follows the path. */
static bool home_fd_current(const lfs_home *home) {
        struct stat held, named;
        return fstat(home->fd, &held) == 0 && held.st_nlink > 0 && lstat(home->path, &named) == 0 &&
               held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

static void home_fields_free(lfs_home *h) {
        if (h->fd >= 0)
                close(h->fd);
        free(h->path);
}

/* Holds the directory now at home->path, checked as at open: -ENOENT (no error set) when
 * there is none. Threads of the daemon and of a library client share a handle, so neither
 * its path (kept from the open) nor a descriptor number another thread may be using
 * changes: the first bind publishes its descriptor once (a thread that lost the race
 * drops its own), a later one puts the new directory onto the same number (dup3), so a
 * thread using home->fd meanwhile gets the old directory or the new one, never whatever
 * a closed number was reused for. */
static int bind_home(lfs_home *home, lfs_error **err) {
        _cleanup_(home_fields_free) lfs_home fresh = { .fd = -1 };
        int r = resolve_home(&fresh, home->path, err);
        if (r < 0)
                return r;
        if (fresh.fd < 0)
                return -ENOENT;
        int held = -1;
        if (__atomic_compare_exchange_n(&home->fd, &held, fresh.fd, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST)) {
                fresh.fd = -1;
                return 0;
        }
        if (dup3(fresh.fd, held, O_CLOEXEC) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot hold the home '%s' again: %s", home->path,
                                strerror(errno));
        return 0;
}

/* Whether the handle holds the directory at its path now, binding it if it exists. */
static int home_bound(lfs_home *home, lfs_error **err) {
        if (home->fd >= 0 && home_fd_current(home))
                return 0;
        return bind_home(home, err);
}

int lfs_home_make(lfs_home *home, lfs_error **err) {
        int r = home_bound(home, err);
        if (r != -ENOENT)
                return r;
        /* The parents that are missing, 0755 (the command identity passes through to the
         * Sandboxes), then the home, 0711: it lists nothing to anyone else. */
        _cleanup_free_ char *walk = xstrdup(home->path);
        for (char *p = walk + 1;; p++) {
                if (*p != '/' && *p)
                        continue;
                char saved = *p;
                *p = 0;
                bool last = !saved;
                if (mkdir(walk, last ? 0711 : 0755) == 0 && last) {
                        _cleanup_close_ int fd = open(walk, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (fd >= 0)
                                (void)fchmod(fd, 0711); /* whatever the umask */
                } else if (errno != EEXIST) {
                        return lfs_fail(err, errno == EACCES ? LFS_PERMISSION_DENIED : LFS_FAILED, errno,
                                        "cannot make %s: %s", walk, strerror(errno));
                }
                if (last)
                        break;
                *p = saved;
        }
        /* Checked again: someone may have made it first. */
        r = bind_home(home, err);
        if (r == -ENOENT)
                r = lfs_fail(err, LFS_FAILED, ENOENT, "the home '%s' disappeared as it was made",
                             home->path);
        return r;
}

int lfs_home_dir(lfs_home *home, const char *name, mode_t mode, bool create, int *ret_fd, lfs_error **err) {
        int r = create ? lfs_home_make(home, err) : home_bound(home, err);
        if (r < 0)
                return r;
        if (create && mkdirat(home->fd, name, mode) < 0 && errno != EEXIST)
                return lfs_fail(err, errno == EACCES ? LFS_PERMISSION_DENIED : LFS_FAILED, errno,
                                "cannot make %s/%s: %s", home->path, name, strerror(errno));
        _cleanup_close_ int fd = lfs_open_beneath(home->fd, name, O_RDONLY | O_DIRECTORY);
        if (fd == -ENOENT)
                return -ENOENT;
        if (fd == -ELOOP || fd == -ENOTDIR || fd == -EXDEV)
                return lfs_fail(err, LFS_PERMISSION_DENIED, -fd,
                                "'%s/%s' is not a directory of the home but a %s; LayerFS follows no link "
                                "inside the home: remove it",
                                home->path, name, fd == -ENOTDIR ? "file" : "symbolic link");
        if (fd < 0)
                return lfs_fail(err, fd == -EACCES ? LFS_PERMISSION_DENIED : LFS_FAILED, -fd,
                                "cannot open %s/%s: %s", home->path, name, strerror(-fd));
        struct stat st;
        if (fstat(fd, &st) < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot stat %s/%s: %s", home->path, name,
                                strerror(errno));
        if (!trusted_owner(st.st_uid) || (st.st_mode & (S_IWGRP | S_IWOTH)))
                return lfs_fail(err, LFS_PERMISSION_DENIED, EPERM,
                                "'%s/%s' (owner uid %u, mode %04o) could be changed by others than you and "
                                "root; 'chown %u' it and 'chmod go-w' it",
                                home->path, name, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777),
                                (unsigned)geteuid());
        /* Homes made before it was so keep nothing more open than it should be. */
        if (create && (st.st_mode & 07777 & ~mode) && st.st_uid == geteuid())
                (void)fchmod(fd, st.st_mode & mode & 07777);
        *ret_fd = TAKE_FD(fd);
        return 0;
}

void lfs_home_close(lfs_home *home) {
        if (!home)
                return;
        home_fields_free(home);
        free(home);
}

const char *lfs_home_path(const lfs_home *home) {
        return home->path;
}

void lfs_home_set_progress(lfs_home *home, lfs_progress_fn fn, void *userdata) {
        home->progress = fn;
        home->progress_data = userdata;
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
        /* The Stores are the home owner's alone: the command identity and other users
         * read none of them (SPEC 3, docs/security.md). */
        _cleanup_close_ int projects_fd = -1;
        if ((r = lfs_home_dir(home, "projects", 0700, true, &projects_fd, err)) < 0)
                return r;
        /* What inits killed part-way left behind: each init holds flock on its directory
         * (leftover.h), so one of the same pid in another pid namespace is never taken for
         * a dead one's. */
        (void)lfs_leftovers_remove(projects_fd, ".init-", NULL, NULL);

        /* Built under a temporary name and renamed: a failed init leaves no project. */
        _cleanup_free_ char *tmp_name = xasprintf(".init-%d-%s", (int)getpid(), name);
        _cleanup_free_ char *tmp = xasprintf("%s/%s", projects, tmp_name);
        _cleanup_close_ int tmp_fd = lfs_leftover_make(projects_fd, tmp_name, O_DIRECTORY, 0755);
        if (tmp_fd == -EEXIST || tmp_fd == -EBUSY)
                return lfs_fail(err, LFS_BUSY, -tmp_fd,
                                "another 'project init %s' is running (%s is its); try again once it is "
                                "done",
                                name, tmp);
        if (tmp_fd < 0)
                return lfs_fail(err, LFS_FAILED, -tmp_fd, "cannot make %s: %s", tmp, strerror(-tmp_fd));
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
                        lfs_tree_rows_add(&rows, &tree, NULL, 0, 0);
        }
        if (r == 0) {
                _cleanup_free_ char *message =
                        from_dir ? xasprintf("Import %s", from_dir) : xstrdup("Initial empty commit");
                r = lfs_record_commit(s, w, &rows, "main", NULL, &tree, NULL, 0, message, &commit, err);
        }
        lfs_tree_rows_done(&rows);
        lfs_blob_writer_free(w);
        lfs_store_close(s);
        if (r == 0)
                lfs_fault_point("import-rename"); /* whole under its temporary name */
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
                if (errno == EACCES)
                        return lfs_fail(err, LFS_PERMISSION_DENIED, errno,
                                        "cannot read %s: %s; the home's projects are its owner's "
                                        "alone: run layerfs as the home's owner",
                                        projects, strerror(errno));
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

int lfs_store_project_list(lfs_home *home, lfs_project_info **ret_projects, size_t *ret_n, lfs_error **err) {
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

int lfs_project_name(lfs_home *home, const char *project, char **ret_name, lfs_error **err) {
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
        if (stat(path, &st) < 0 && errno == EACCES) /* not "no such project": not ours to see */
                return lfs_fail(err, LFS_PERMISSION_DENIED, EACCES,
                                "cannot look for project '%s' in home %s: its projects are its "
                                "owner's alone; run layerfs as the home's owner",
                                project, home->path);
        if (stat(path, &st) < 0)
                return lfs_fail(err, LFS_NO_SUCH_PROJECT, ENOENT,
                                "home %s has no project '%s'; 'layerfs project list' shows the "
                                "projects",
                                home->path, project);
        *ret_name = only ? TAKE_PTR(only) : xstrdup(project);
        return 0;
}

int lfs_store_open(lfs_home *home, const char *project, lfs_store **ret_store, lfs_error **err) {
        _cleanup_free_ char *name = NULL;
        int r = lfs_project_name(home, project, &name, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *path = xasprintf("%s/projects/%s", home->path, name);
        return lfs_store_open_dir(home, name, path, false, ret_store, err);
}
