/* SPDX-License-Identifier: MIT */
/*
 * The pool of Sandboxes made ahead of their create (LAYERFS_POOL=N, off by default). A
 * pooled Sandbox is a whole Sandbox, made by the same create as any other (its number,
 * directory, cgroup, id range, init and daemon), whose record says 'pooled' with a key:
 * what the create that made it took from its caller and passes on to the daemon, the
 * init and the commands (the project, the options, the builds, the environment, and a
 * named set of process state: resource limits, namespaces, root, identity, capabilities,
 * scheduling, umask, CPUs; docs/runtime.md lists it). A create whose own key is the same
 * takes one in one transaction and asks its daemon once, with a deadline (which starts
 * its idle time again). A create with another key makes its own, and so does a caller
 * under a seccomp filter: a filter cannot be compared, so it is never served, nor fills,
 * a pool. Nothing but a create takes a pooled Sandbox: every
 * call but close and log refuses one (NoSuchSandbox), lists do not show one, and its idle
 * close, a reclaim and a home's reclaim end it like any other.
 */
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "client.h"
#include "fault.h"
#include "hash.h"

/* What of /proc/self/status a child inherits, which a daemon and its commands would get
 * from a create's caller. Not the signals blocked or ignored: the daemon's start and each
 * command's set them all back to the default (a create run with '&' from a script, which
 * ignores SIGINT and SIGQUIT, takes from the same pool as one run in the foreground). */
static const char *const inherited_status[] = { "Umask:",
                                                "Uid:",
                                                "Gid:",
                                                "Groups:",
                                                "CapInh:",
                                                "CapPrm:",
                                                "CapEff:",
                                                "CapBnd:",
                                                "CapAmb:",
                                                "NoNewPrivs:",
                                                "Seccomp:",
                                                "Cpus_allowed_list:",
                                                "Mems_allowed_list:",
                                                NULL };

static void hash_text(lfs_hasher *h, const char *label, const char *value) {
        lfs_hasher_update(h, label, strlen(label) + 1);
        lfs_hasher_update(h, value ? value : "", value ? strlen(value) + 1 : 0);
}

static void hash_status(lfs_hasher *h) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
        char line[4096];
        while (f && fgets(line, sizeof(line), f))
                for (size_t i = 0; inherited_status[i]; i++)
                        if (!strncmp(line, inherited_status[i], strlen(inherited_status[i])))
                                hash_text(h, "status", line);
}

static void hash_namespaces(lfs_hasher *h) {
        static const char *const kinds[] = { "mnt", "net",  "pid_for_children", "uts",
                                             "ipc", "user", "cgroup",           "time_for_children" };
        char target[64];
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++) {
                _cleanup_free_ char *link = xasprintf("/proc/self/ns/%s", kinds[i]);
                ssize_t k = readlink(link, target, sizeof(target) - 1);
                target[k > 0 ? k : 0] = 0;
                hash_text(h, kinds[i], target);
        }
        struct stat root;
        _cleanup_free_ char *r = stat("/", &root) == 0
                                         ? xasprintf("%llu:%llu", (unsigned long long)root.st_dev,
                                                     (unsigned long long)root.st_ino)
                                         : NULL;
        hash_text(h, "root", r);
}

static int compare_text(const void *a, const void *b) {
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The environment the daemon and the init keep (lfs_env_reaches_daemon: the rest is dropped
 * at their start), sorted, but for the settings that name the pool, the home and the
 * project (the key's own parts) and the tests' failure steps (read by each process at the
 * step; a daemon taken from a pool has those it was made with). */
static void hash_settings(lfs_hasher *h) {
        extern char **environ;
        static const char *const own[] = { "LAYERFS_POOL=", "LAYERFS_HOME=", "LAYERFS_PROJECT=",
                                           "LAYERFS_FAULT=", NULL };
        size_t n = 0;
        for (char **e = environ; *e; e++)
                n++;
        _cleanup_free_ const char **set = xcalloc(n + 1, sizeof(*set));
        size_t k = 0;
        for (char **e = environ; *e; e++) {
                bool skip = !lfs_env_reaches_daemon(*e);
                for (size_t i = 0; !skip && own[i]; i++)
                        skip = !strncmp(*e, own[i], strlen(own[i]));
                if (!skip)
                        set[k++] = *e;
        }
        qsort(set, k, sizeof(*set), compare_text);
        for (size_t i = 0; i < k; i++)
                hash_text(h, "setting", set[i]);
}

/* A build's file: its path, device, inode, size and time (a build installed over it is
 * another). */
static void hash_build(lfs_hasher *h, const char *what, const char *path) {
        struct stat st;
        _cleanup_free_ char *v =
                stat(path, &st) == 0
                        ? xasprintf("%s %llu:%llu %lld %lld.%09ld", path, (unsigned long long)st.st_dev,
                                    (unsigned long long)st.st_ino, (long long)st.st_size,
                                    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec)
                        : xstrdup(path);
        hash_text(h, what, v);
}

/* What else a process passes on to its children that the daemon and the init do not set
 * back: scheduling (nice, policy and priority, I/O priority), personality, securebits,
 * transparent huge pages, timer slack, the memory policy, oom_score_adj. */
static void hash_scheduling(lfs_hasher *h) {
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, 0);
        struct sched_param param = { 0 };
        (void)sched_getparam(0, &param);
        int mempolicy = -1;
        (void)syscall(SYS_get_mempolicy, &mempolicy, NULL, 0, NULL, 0);
        _cleanup_free_ char *v =
                xasprintf("%d %d %d %d %ld %d %d %d %d %d", nice, errno, sched_getscheduler(0),
                          param.sched_priority, syscall(SYS_ioprio_get, 1 /* IOPRIO_WHO_PROCESS */, 0),
                          personality(0xffffffff), prctl(PR_GET_SECUREBITS),
                          prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0), prctl(PR_GET_TIMERSLACK), mempolicy);
        hash_text(h, "scheduling", v);
        char adj[32] = "";
        _cleanup_close_ int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, adj, sizeof(adj) - 1) : -1;
        adj[k > 0 ? k : 0] = 0;
        hash_text(h, "oom_score_adj", adj);
}

/* A caller confined by a seccomp filter (mode 2): filters cannot be compared, and its
 * daemon and commands would be filtered alike, which a pooled Sandbox made under another
 * filter is not. (An LSM label is compared: it is in the key, see hash_label.) */
static bool filtered(void) {
        _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        bool mode = false;
        while (f && fgets(line, sizeof(line), f))
                if (!strncmp(line, "Seccomp:", 8))
                        mode = atoi(line + 8) != 0;
        return mode;
}

/* The caller's LSM label (AppArmor's profile, SELinux's context), which its children keep:
 * a filler is a fork of its caller, so the Sandboxes it makes run under the same. */
static void hash_label(lfs_hasher *h) {
        char label[4096] = "";
        _cleanup_close_ int fd = open("/proc/self/attr/current", O_RDONLY | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, label, sizeof(label) - 1) : -1;
        label[k > 0 ? k : 0] = 0;
        hash_text(h, "label", label);
}

char *lfs_pool_key(const lfs_pool_request *q) {
        if (filtered())
                return NULL;
        lfs_hasher *h = lfs_hasher_new_plain();
        hash_text(h, "pool", "2");
        hash_text(h, "project", q->project);
        hash_text(h, "platform", q->platform);
        hash_text(h, "runtime", q->runtime);
        hash_text(h, "network", lfs_network_name(q->network));
        _cleanup_free_ char *limits = xasprintf(
                "%llu %llu %.17g %llu", (unsigned long long)q->limits->memory,
                (unsigned long long)q->limits->pids, q->limits->cpus, (unsigned long long)q->limits->disk);
        hash_text(h, "limits", limits);
        /* The builds: the daemon, the init beside it, and this program (whose create made
         * the Sandbox): one installed over them serves no create from a pooled old one. */
        _cleanup_free_ char *dir = xstrdup(q->daemon);
        char *slash = strrchr(dir, '/');
        if (slash)
                *slash = 0;
        _cleanup_free_ char *init = xasprintf("%s/layerfs-init", dir);
        hash_build(h, "daemon", q->daemon);
        hash_build(h, "init", init);
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        self[n > 0 ? n : 0] = 0;
        hash_build(h, "program", self);
        hash_settings(h);
        for (int i = 0; i < RLIM_NLIMITS; i++) {
                struct rlimit rl = { 0, 0 };
                (void)getrlimit(i, &rl);
                _cleanup_free_ char *v = xasprintf("%d %llu %llu", i, (unsigned long long)rl.rlim_cur,
                                                   (unsigned long long)rl.rlim_max);
                hash_text(h, "rlimit", v);
        }
        hash_scheduling(h);
        hash_namespaces(h);
        hash_status(h);
        hash_label(h);
        lfs_id id;
        lfs_hasher_finish(h, &id);
        char *hex = xmalloc(LFS_HEX_LEN + 1);
        lfs_id_to_hex(&id, hex);
        return hex;
}

/* How long a take waits for the pooled daemon's answer: it answers in about a millisecond
 * when it is well; one that does not (stopped, hung, its idle close's gc under way) is
 * ended, and the create takes another or makes its own. */
#define TAKE_ANSWER_MS 1000

/* Ends a pooled Sandbox the caller took (its record 'running', its daemon's): the record
 * becomes the caller's, and its remains go as a dead one's do. Nobody else knows it: it was
 * never handed out. */
static void end_taken(lfs_home *home, sqlite3 *db, sandbox_record *rec) {
        if (lfs_record_set_owner(db, rec, getpid(), "removing", NULL) == 0)
                (void)lfs_remove_remains(home, db, rec, NULL);
}

int lfs_pool_claim(lfs_home *home, sqlite3 *db, const char *project, const char *key, int *ret_sandbox) {
        for (;;) {
                sandbox_record rec = { .dir_fd = -1 };
                int r = lfs_record_pool_take(home, db, project, key, &rec, NULL);
                if (r < 0)
                        return r;
                lfs_fault_point("pool-taken");
                /* Its daemon answers in time (which starts its idle time again), or it is
                 * ended, and the next one is taken. */
                json_t *resp = NULL;
                r = lfs_sandbox_open_dir(home, &rec, NULL);
                if (r == 0) {
                        lfs_rpc_all(&rec, 1, LFS_CALL_SANDBOX_PING, TAKE_ANSWER_MS, &resp, &r);
                        json_decref(resp);
                }
                if (r == 0) {
                        *ret_sandbox = rec.number;
                        lfs_record_done(&rec);
                        return 0;
                }
                end_taken(home, db, &rec);
                lfs_record_done(&rec);
        }
}

int lfs_pool_drain(lfs_home *home, sqlite3 *db) {
        int drained = 0;
        for (;;) {
                sandbox_record rec = { .dir_fd = -1 };
                if (lfs_record_pool_take(home, db, NULL, NULL, &rec, NULL) < 0)
                        return drained;
                end_taken(home, db, &rec);
                lfs_record_done(&rec);
                drained++;
        }
}

int lfs_pool_lock(lfs_home *home, const char *key, int *ret_fd, lfs_error **err) {
        _cleanup_close_ int dir = -1;
        int r = lfs_home_dir(home, "pool", 0700, true, &dir, err);
        if (r < 0)
                return r;
        /* Every filler holds the fillers' lock shared, its own pool's exclusively, both
         * without waiting: one who holds the fillers' lock exclusively (a wait for the fills
         * under way, or `flock LOCK layerfs sandbox create`, which would wait for itself)
         * gets no fill. */
        _cleanup_free_ char *name = key ? xasprintf("%.16s.lock", key) : xstrdup("fillers.lock");
        _cleanup_close_ int fd = openat(dir, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return lfs_fail(err, LFS_FAILED, errno, "cannot open %s/pool/%s: %s", home->path, name,
                                strerror(errno));
        while ((r = flock(fd, (key ? LOCK_EX : LOCK_SH) | LOCK_NB)) < 0 && errno == EINTR)
                ;
        if (r < 0)
                return errno == EWOULDBLOCK ? -EWOULDBLOCK
                                            : lfs_fail(err, LFS_FAILED, errno, "cannot lock %s/pool/%s: %s",
                                                       home->path, name, strerror(errno));
        *ret_fd = TAKE_FD(fd);
        return 0;
}
