/* SPDX-License-Identifier: MIT */
/* Finding the cgroup2 tree, making cgroups, and ending a subtree (cgroup.h). */
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>

#include "cgroup.h"
#include "hash.h"
#include "util.h"

static bool is_cgroup2(const char *path) {
        struct statfs fs;
        return statfs(path, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
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
                lfs_unescape_octal(mnt);
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

int lfs_cgroup_open(const char *path) {
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct statfs fs;
        if (fstatfs(fd, &fs) < 0 || fs.f_type != CGROUP2_SUPER_MAGIC) {
                close(fd);
                return -EXDEV;
        }
        return fd;
}

static int write_at(int dirfd, const char *name, const char *value) {
        _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
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

/* The first line of dir/file, without its newline ("" when it is empty or unreadable). */
static char *first_line(const char *dir, const char *file) {
        _cleanup_free_ char *path = xasprintf("%s/%s", dir, file);
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        char *line = NULL;
        size_t cap = 0;
        if (!f || getline(&line, &cap, f) < 0) {
                free(line);
                return xstrdup("");
        }
        line[strcspn(line, "\n")] = 0;
        return line;
}

/* Where root's controllers are read: its cgroup.controllers, or, before root is made,
 * its parent's cgroup.subtree_control (what a new child gets). */
static char *offered_source(const char *root, const char **ret_file) {
        struct stat st;
        if (stat(root, &st) == 0) {
                *ret_file = "cgroup.controllers";
                return xstrdup(root);
        }
        _cleanup_free_ char *copy = xstrdup(root);
        *ret_file = "cgroup.subtree_control";
        return xstrdup(dirname(copy));
}

bool lfs_cgroup_offers(const char *root, const char *controller) {
        const char *file;
        _cleanup_free_ char *dir = offered_source(root, &file);
        return listed(dir, file, controller);
}

char *lfs_cgroup_offered(const char *root) {
        const char *file;
        _cleanup_free_ char *dir = offered_source(root, &file);
        return first_line(dir, file);
}

bool lfs_cgroup_v1_bound(const char *controller) {
        _cleanup_fclose_ FILE *f = fopen("/proc/cgroups", "re");
        char name[64];
        int hierarchy, n, enabled;
        if (f && fscanf(f, "%*[^\n]\n") == 0)
                while (fscanf(f, "%63s %d %d %d", name, &hierarchy, &n, &enabled) == 4)
                        if (!strcmp(name, controller))
                                return hierarchy != 0 && enabled;
        return false;
}

int lfs_cgroup_enable(const char *cgroup, const char *controller) {
        _cleanup_free_ char *copy = xstrdup(cgroup);
        const char *parent = dirname(copy);
        if (!listed(parent, "cgroup.controllers", controller))
                return -EOPNOTSUPP;
        if (listed(parent, "cgroup.subtree_control", controller))
                return 0;
        _cleanup_free_ char *value = xasprintf("+%s", controller);
        return lfs_cgroup_write(parent, "cgroup.subtree_control", value);
}

int lfs_cgroup_write(const char *cgroup, const char *file, const char *value) {
        _cleanup_close_ int fd = lfs_cgroup_open(cgroup);
        return fd < 0 ? fd : write_at(fd, file, value);
}

int lfs_cgroup_limit_memory(const char *sandbox, const char *leaf, uint64_t bytes) {
        int r = lfs_cgroup_enable(sandbox, "memory");
        if (r < 0 || (r = lfs_cgroup_enable(leaf, "memory")) < 0)
                return r;
        char value[32];
        snprintf(value, sizeof(value), "%llu", (unsigned long long)bytes);
        return lfs_cgroup_write(leaf, "memory.max", value);
}

int lfs_cgroup_enter(const char *path, pid_t pid) {
        _cleanup_close_ int fd = lfs_cgroup_open(path);
        if (fd < 0)
                return fd;
        char value[32];
        snprintf(value, sizeof(value), "%d", (int)pid);
        return write_at(fd, "cgroup.procs", value);
}

static int populated_at(int cgroup_fd) {
        int fd = openat(cgroup_fd, "cgroup.events", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        _cleanup_fclose_ FILE *f = fdopen(fd, "re");
        if (!f) {
                close(fd);
                return -errno;
        }
        char key[32];
        int value;
        while (fscanf(f, "%31s %d", key, &value) == 2)
                if (!strcmp(key, "populated"))
                        return value != 0;
        return -EIO;
}

int lfs_cgroup_populated(const char *path) {
        _cleanup_close_ int fd = lfs_cgroup_open(path);
        return fd < 0 ? fd : populated_at(fd);
}

/* Waits until deadline (ms of CLOCK_MONOTONIC) for "populated 0", woken by the kernel's
 * notice on cgroup.events itself (kernfs wakes a poll for POLLPRI at each change there), so
 * no polling loop. Not inotify: closing an inotify descriptor waits for an SRCU grace
 * period (fsnotify's group destruction), about 14 ms of every close on a loaded host.
 * 0 empty, -ETIMEDOUT. */
static int wait_empty(int cgroup_fd, long long deadline) {
        _cleanup_close_ int fd = openat(cgroup_fd, "cgroup.events", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        for (;;) {
                /* Each read from the start re-arms the notice: a change after it wakes the
                 * poll below. */
                char buf[256];
                ssize_t k = pread(fd, buf, sizeof(buf) - 1, 0);
                if (k < 0)
                        return errno == ENODEV || errno == ENOENT ? 0 : -errno;
                buf[k] = 0;
                const char *line = strstr(buf, "populated ");
                if (!line)
                        return -EIO;
                if (line[strlen("populated ")] == '0')
                        return 0;
                long long left = deadline - lfs_now_ms();
                if (left <= 0)
                        return -ETIMEDOUT;
                struct pollfd p = { .fd = fd, .events = POLLPRI };
                if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
                        return -errno;
        }
}

void lfs_cgroup_each(int cgroup_fd, void (*fn)(int fd, void *userdata), void *userdata) {
        fn(cgroup_fd, userdata);
        DIR *d = lfs_opendir_at_fd(cgroup_fd);
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
                        _cleanup_close_ int child = openat(dirfd(d), de->d_name,
                                                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (child >= 0)
                                lfs_cgroup_each(child, fn, userdata);
                }
        closedir(d);
}

typedef struct each_id {
        const char *file;
        void (*fn)(int id, void *userdata);
        void *userdata;
} each_id;

static void ids_listed(int fd, void *userdata) {
        each_id *e = userdata;
        int list = openat(fd, e->file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        FILE *f = list >= 0 ? fdopen(list, "re") : NULL;
        if (!f) {
                if (list >= 0)
                        close(list);
                return;
        }
        int id;
        while (fscanf(f, "%d", &id) == 1)
                if (id > 0)
                        e->fn(id, e->userdata);
        fclose(f);
}

void lfs_cgroup_each_id(int cgroup_fd, const char *file, void (*fn)(int id, void *userdata),
                        void *userdata) {
        each_id e = { .file = file, .fn = fn, .userdata = userdata };
        lfs_cgroup_each(cgroup_fd, ids_listed, &e);
}

static void kill_one(int pid, void *userdata) {
        if (kill(pid, SIGKILL) == 0)
                (*(int *)userdata)++;
}

/* Without cgroup.kill (kernels before 5.14): SIGKILL every process listed in the
 * subtree's cgroup.procs until none is left. A process forking meanwhile lands in the
 * same cgroup and is found on the next pass. Only ever on a cgroup2 directory (a
 * cgroup.procs anywhere else lists whatever its writer wanted killed). */
static int kill_by_procs(int cgroup_fd) {
        int killed = 0;
        lfs_cgroup_each_id(cgroup_fd, "cgroup.procs", kill_one, &killed);
        return killed;
}

/* How long processes get to end after cgroup.kill before those still there are looked
 * at for FUSE connections that hold them (lfs_cgroup_abort_fuse): a process ends in
 * about 0.5 ms of kernel work; this is only how soon the rescue starts. */
#define FUSE_RESCUE_MS 1000

/* Without cgroup.kill, how long a pass of SIGKILLs gets before the next one looks for
 * processes forked meanwhile. */
#define KILL_PASS_MS 5

int lfs_cgroup_kill_wait(const char *path, int timeout_ms) {
        _cleanup_close_ int fd = lfs_cgroup_open(path);
        if (fd == -ENOENT)
                return 0; /* the cgroup itself is gone */
        if (fd < 0)
                return fd;
        long long deadline = lfs_now_ms() + timeout_ms;
        int r = write_at(fd, "cgroup.kill", "1");
        if (r == -ENOENT) {
                /* No event says that a process listed was killed or that one forked
                 * meanwhile: a pass every KILL_PASS_MS, cut short when the tree empties. */
                while (kill_by_procs(fd) > 0 && lfs_now_ms() < deadline) {
                        long long pass = lfs_now_ms() + KILL_PASS_MS;
                        wait_empty(fd, pass < deadline ? pass : deadline);
                }
        } else if (r < 0) {
                return r;
        }
        for (;;) {
                long long slice = lfs_now_ms() + FUSE_RESCUE_MS;
                r = wait_empty(fd, slice < deadline ? slice : deadline);
                if (r != -ETIMEDOUT || lfs_now_ms() >= deadline)
                        return r;
                /* Still populated: a process waits in the kernel on something, most
                 * likely a FUSE request that a server of the Sandbox's own read and
                 * will never answer. */
                lfs_cgroup_abort_fuse(fd);
                if (write_at(fd, "cgroup.kill", "1") == -ENOENT)
                        kill_by_procs(fd);
        }
}

/* Removes the empty cgroup name below parent_fd and its children, leaves first. */
static int remove_tree_at(int parent_fd, const char *name, long long deadline) {
        _cleanup_close_ int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        int r = 0;
        DIR *d = lfs_opendir_at_fd(fd);
        if (!d)
                return -errno;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_type == DT_DIR && strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
                        int k = remove_tree_at(dirfd(d), de->d_name, deadline);
                        if (k < 0 && r == 0)
                                r = k;
                }
        closedir(d);
        /* The kernel refuses (EBUSY) a cgroup that still holds a process: one whose last
         * process is still ending goes once cgroup.events says "populated 0"; one whose
         * processes live on past the deadline stays. */
        while (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0) {
                if (errno == ENOENT)
                        break;
                if (errno != EBUSY || lfs_now_ms() >= deadline)
                        return r ? r : -errno;
                if (populated_at(fd) == 0)
                        return r ? r : -EBUSY; /* busy for a reason no event ends */
                if (wait_empty(fd, deadline) < 0)
                        return r ? r : -EBUSY;
        }
        return r;
}

int lfs_cgroup_remove_tree(const char *path, int timeout_ms) {
        _cleanup_close_ int fd = lfs_cgroup_open(path);
        if (fd == -ENOENT)
                return 0;
        if (fd < 0)
                return fd;
        _cleanup_free_ char *parent = xstrdup(path);
        char *slash = strrchr(parent, '/');
        if (!slash || !slash[1])
                return -EINVAL;
        *slash = 0;
        _cleanup_close_ int parent_fd = open(*parent ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (parent_fd < 0)
                return -errno;
        return remove_tree_at(parent_fd, slash + 1, lfs_now_ms() + timeout_ms);
}

int lfs_cgroup_destroy(const char *path, int timeout_ms) {
        int r = lfs_cgroup_kill_wait(path, timeout_ms);
        int k = lfs_cgroup_remove_tree(path, timeout_ms);
        return r < 0 ? r : k;
}

/* One process: "123 (sleep, state D in request_wait_answer)". */
static void describe_process(int pid, char **out) {
        char path[64], stat[512] = "", wchan[128] = "";
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        _cleanup_close_ int sfd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t k = sfd >= 0 ? read(sfd, stat, sizeof(stat) - 1) : -1;
        stat[k > 0 ? k : 0] = 0;
        snprintf(path, sizeof(path), "/proc/%d/wchan", pid);
        _cleanup_close_ int wfd = open(path, O_RDONLY | O_CLOEXEC);
        k = wfd >= 0 ? read(wfd, wchan, sizeof(wchan) - 1) : -1;
        wchan[k > 0 ? k : 0] = 0;
        const char *open_paren = strchr(stat, '('), *close_paren = strrchr(stat, ')');
        char *next;
        if (open_paren && close_paren && close_paren > open_paren && close_paren[1])
                next = xasprintf("%s%s%d (%.*s, state %c%s%s)", *out ? *out : "", *out ? ", " : "", pid,
                                 (int)(close_paren - open_paren - 1), open_paren + 1, close_paren[2],
                                 *wchan && strcmp(wchan, "0") ? " in " : "",
                                 strcmp(wchan, "0") ? wchan : "");
        else
                next = xasprintf("%s%s%d", *out ? *out : "", *out ? ", " : "", pid);
        free(*out);
        *out = next;
}

typedef struct describe_state {
        char *text;
        unsigned n;
} describe_state;

static void describe_one(int pid, void *userdata) {
        describe_state *s = userdata;
        if (s->n++ < 5)
                describe_process(pid, &s->text);
}

char *lfs_cgroup_describe(const char *path) {
        _cleanup_close_ int fd = lfs_cgroup_open(path);
        if (fd < 0)
                return NULL;
        describe_state s = { 0 };
        lfs_cgroup_each_id(fd, "cgroup.procs", describe_one, &s);
        if (s.n > 5) {
                char *more = xasprintf("%s and %u more", s.text, s.n - 5);
                free(s.text);
                s.text = more;
        }
        return s.text;
}
