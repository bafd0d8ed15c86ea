/* SPDX-License-Identifier: MIT */
/* Finding the cgroup2 tree, making cgroups, and ending a subtree (cgroup.h). */
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>

#include "cgroup.h"
#include "store.h"
#include "util.h"

static bool is_cgroup2(const char *path) {
        struct statfs fs;
        return statfs(path, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

/* The mount point field of mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_octal(char *s) {
        char *out = s;
        for (char *p = s; *p; p++) {
                if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
                    p[3] >= '0' && p[3] <= '7') {
                        *out++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
                        p += 3;
                } else {
                        *out++ = *p;
                }
        }
        *out = 0;
}

/* /sys/fs/cgroup when it is cgroup2 (pure v2), else the first cgroup2 mount (hybrid's
 * /sys/fs/cgroup/unified). */
static char *find_cgroup2_mount(void) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/mountinfo", "re");
        if (!f)
                return NULL;
        char *line = NULL, *found = NULL;
        size_t cap = 0;
        while (getline(&line, &cap, f) > 0) {
                char *sep = strstr(line, " - ");
                if (!sep || strncmp(sep + 3, "cgroup2 ", 8))
                        continue;
                char *mnt = NULL;
                /* fields: id parent major:minor root mountpoint ... */
                if (sscanf(line, "%*s %*s %*s %*s %ms", &mnt) != 1)
                        continue;
                unescape_octal(mnt);
                if (!strcmp(mnt, "/sys/fs/cgroup")) {
                        free(found);
                        found = mnt;
                        break;
                }
                if (!found)
                        found = mnt;
                else
                        free(mnt);
        }
        free(line);
        return found;
}

int lfs_cgroup_root(char **ret_root, lfs_error **err) {
        const char *env = getenv("LAYERFS_CGROUP_ROOT");
        if (env && *env) {
                if (env[0] != '/')
                        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                        "LAYERFS_CGROUP_ROOT='%s' is not an absolute path; give a directory "
                                        "in a cgroup2 filesystem",
                                        env);
                /* The root may not exist yet: then its parent must be in cgroup2. */
                _cleanup_free_ char *parent = xstrdup(env);
                char *slash = strrchr(parent, '/');
                if (slash && slash != parent)
                        *slash = 0;
                if (!is_cgroup2(env) && !is_cgroup2(parent))
                        return lfs_fail(err, LFS_UNSUPPORTED, ENOTSUP,
                                        "LAYERFS_CGROUP_ROOT='%s' is not in a cgroup2 filesystem; point it "
                                        "at a directory below a cgroup2 mount, or unset it",
                                        env);
                *ret_root = xstrdup(env);
                return 0;
        }
        _cleanup_free_ char *mnt = find_cgroup2_mount();
        if (!mnt || !is_cgroup2(mnt))
                return lfs_fail(err, LFS_UNSUPPORTED, ENOTSUP,
                                "this host has no cgroup2 filesystem (looked in /proc/self/mountinfo for "
                                "/sys/fs/cgroup or /sys/fs/cgroup/unified); the linux platform needs "
                                "cgroup v2 (kernel:cgroup2)");
        *ret_root = xasprintf("%s/layerfs", mnt);
        return 0;
}

char *lfs_cgroup_sandbox_path(const char *root, const char *home, const char *project, int number) {
        lfs_id digest;
        char hex[LFS_HEX_LEN + 1];
        lfs_sha256(home, strlen(home), &digest);
        lfs_id_to_hex(&digest, hex);
        return xasprintf("%s/%.8s-%s-%d", root, hex, project, number);
}

char *lfs_cgroup_sandbox_path_untagged(const char *root, const char *project, int number) {
        return xasprintf("%s/%s-%d", root, project, number);
}

char *lfs_cgroup_relative(const char *path) {
        struct stat here, up;
        if (stat(path, &here) < 0)
                return NULL;
        _cleanup_free_ char *walk = xstrdup(path);
        size_t mount_len = strlen(walk);
        for (;;) {
                char *slash = strrchr(walk, '/');
                if (!slash || slash == walk)
                        break;
                *slash = 0;
                if (stat(walk, &up) < 0 || up.st_dev != here.st_dev)
                        break;
                mount_len = strlen(walk);
        }
        return xstrdup(path[mount_len] ? path + mount_len : "/");
}

int lfs_cgroup_make(const char *path) {
        if (mkdir(path, 0755) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static int write_file(const char *dir, const char *name, const char *value) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, name);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t len = strlen(value);
        if (write(fd, value, len) != (ssize_t)len)
                return errno ? -errno : -EIO;
        return 0;
}

/* Whether name is a word of the space-separated list in dir/file. */
static bool listed(const char *dir, const char *file, const char *name) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        char word[64];
        while (f && fscanf(f, "%63s", word) == 1)
                if (!strcmp(word, name))
                        return true;
        return false;
}

int lfs_cgroup_limit_memory(const char *sandbox, const char *leaf, uint64_t bytes) {
        _cleanup_free_ char *root = xstrdup(sandbox);
        const char *parent = dirname(root);
        if (!listed(parent, "cgroup.controllers", "memory"))
                return -EOPNOTSUPP;
        const char *chain[] = { parent, sandbox };
        for (size_t i = 0; i < 2; i++) {
                int r;
                if (!listed(chain[i], "cgroup.subtree_control", "memory") &&
                    (r = write_file(chain[i], "cgroup.subtree_control", "+memory")) < 0)
                        return r;
        }
        char value[32];
        snprintf(value, sizeof(value), "%llu", (unsigned long long)bytes);
        return write_file(leaf, "memory.max", value);
}

int lfs_cgroup_enter(const char *path, pid_t pid) {
        char value[32];
        snprintf(value, sizeof(value), "%d", (int)pid);
        return write_file(path, "cgroup.procs", value);
}

int lfs_cgroup_populated(const char *path) {
        _cleanup_free_ char *events = xasprintf("%s/cgroup.events", path);
        _cleanup_fclose_ FILE *f = fopen(events, "re");
        if (!f)
                return -errno;
        char key[32];
        int value;
        while (fscanf(f, "%31s %d", key, &value) == 2)
                if (!strcmp(key, "populated"))
                        return value != 0;
        return -EIO;
}

static long long now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(long ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000 };
        nanosleep(&ts, NULL);
}

/* Waits for "populated 0", woken by inotify on cgroup.events (the kernel signals each
 * change there), so no polling loop. */
static int wait_empty(const char *path, int timeout_ms) {
        _cleanup_free_ char *events = xasprintf("%s/cgroup.events", path);
        _cleanup_close_ int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
        if (ifd < 0)
                return -errno;
        if (inotify_add_watch(ifd, events, IN_MODIFY) < 0)
                return errno == ENOENT ? 0 : -errno;
        long long deadline = now_ms() + timeout_ms;
        for (;;) {
                int populated = lfs_cgroup_populated(path);
                if (populated == 0 || populated == -ENOENT)
                        return 0;
                if (populated < 0)
                        return populated;
                long long left = deadline - now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = ifd, .events = POLLIN };
                if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
                        return -errno;
                char buf[4096];
                while (read(ifd, buf, sizeof(buf)) > 0)
                        ;
        }
}

/* Without cgroup.kill (kernels before 5.14): SIGKILL every process listed in the
 * subtree's cgroup.procs until none is left. A process forking meanwhile lands in the
 * same cgroup and is found on the next pass. */
static int kill_by_procs(const char *path) {
        int killed = 0;
        _cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", path);
        FILE *f = fopen(procs, "re");
        if (f) {
                int pid;
                while (fscanf(f, "%d", &pid) == 1)
                        if (kill(pid, SIGKILL) == 0)
                                killed++;
                fclose(f);
        }
        DIR *d = opendir(path);
        if (!d)
                return killed;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
                        _cleanup_free_ char *child = xasprintf("%s/%s", path, de->d_name);
                        killed += kill_by_procs(child);
                }
        closedir(d);
        return killed;
}

int lfs_cgroup_kill_wait(const char *path, int timeout_ms) {
        int r = write_file(path, "cgroup.kill", "1");
        if (r == -ENOENT) {
                struct stat st;
                if (stat(path, &st) < 0)
                        return 0; /* the cgroup itself is gone */
                long long deadline = now_ms() + timeout_ms;
                while (kill_by_procs(path) > 0 && now_ms() < deadline)
                        sleep_ms(5);
        } else if (r < 0) {
                return r;
        }
        return wait_empty(path, timeout_ms);
}

int lfs_cgroup_remove_tree(const char *path, int timeout_ms) {
        DIR *d = opendir(path);
        if (!d)
                return errno == ENOENT ? 0 : -errno;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
                        _cleanup_free_ char *child = xasprintf("%s/%s", path, de->d_name);
                        int k = lfs_cgroup_remove_tree(child, timeout_ms);
                        if (k < 0 && r == 0)
                                r = k;
                }
        closedir(d);
        /* A cgroup whose last process just died may still be busy while the kernel
         * finishes the exit: retry for a while. */
        long long deadline = now_ms() + timeout_ms;
        while (rmdir(path) < 0) {
                if (errno == ENOENT)
                        break;
                if (errno != EBUSY || now_ms() >= deadline)
                        return r ? r : -errno;
                sleep_ms(2);
        }
        return r;
}

int lfs_cgroup_destroy(const char *path, int timeout_ms) {
        int r = lfs_cgroup_kill_wait(path, timeout_ms);
        int k = lfs_cgroup_remove_tree(path, timeout_ms);
        return r < 0 ? r : k;
}
