/* SPDX-License-Identifier: MIT */
/*
 * The pool of Sandboxes made ahead of their create (LAYERFS_POOL=N, off by default). A
 * pooled Sandbox is a whole Sandbox, made by the same create as any other (its number,
 * directory, cgroup, id range, init and daemon), whose record says 'pooled' with a key:
 * everything the create that made it took from its caller (the project, the options, the
 * daemon's build, the LAYERFS_ settings, and what a process passes on to its children:
 * resource limits, namespaces, root, identity, capabilities, umask, CPUs). A
 * create whose own key is the same takes one in one transaction and asks its daemon once
 * (which starts its idle time again), so what it gets is what it would have made. A
 * create with another key makes its own. Nothing but a create takes a pooled Sandbox:
 * every call but close refuses one (NoSuchSandbox), lists do not show one, and its idle
 * close, a reclaim and a home's reclaim end it like any other.
 */
#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>

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

/* The LAYERFS_ settings, sorted, but for those that name the pool, the home and the
 * project (the key's own parts) and the tests' failure steps (read by each process, at
 * the step). */
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
                bool skip = strncmp(*e, "LAYERFS_", 8) != 0;
                for (size_t i = 0; !skip && own[i]; i++)
                        skip = !strncmp(*e, own[i], strlen(own[i]));
                if (!skip)
                        set[k++] = *e;
        }
        qsort(set, k, sizeof(*set), compare_text);
        for (size_t i = 0; i < k; i++)
                hash_text(h, "setting", set[i]);
}

char *lfs_pool_key(const lfs_pool_request *q) {
        lfs_hasher *h = lfs_hasher_new_plain();
        hash_text(h, "pool", "1");
        hash_text(h, "project", q->project);
        hash_text(h, "platform", q->platform);
        hash_text(h, "runtime", q->runtime);
        hash_text(h, "network", lfs_network_name(q->network));
        _cleanup_free_ char *limits = xasprintf(
                "%llu %llu %.17g %llu", (unsigned long long)q->limits->memory,
                (unsigned long long)q->limits->pids, q->limits->cpus, (unsigned long long)q->limits->disk);
        hash_text(h, "limits", limits);
        /* The daemon's build: a new one installed serves no create from a pooled old one. */
        struct stat st;
        _cleanup_free_ char *daemon =
                stat(q->daemon, &st) == 0
                        ? xasprintf("%s %llu:%llu %lld %lld.%09ld", q->daemon, (unsigned long long)st.st_dev,
                                    (unsigned long long)st.st_ino, (long long)st.st_size,
                                    (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec)
                        : xstrdup(q->daemon);
        hash_text(h, "daemon", daemon);
        hash_settings(h);
        for (int i = 0; i < RLIM_NLIMITS; i++) {
                struct rlimit rl = { 0, 0 };
                (void)getrlimit(i, &rl);
                _cleanup_free_ char *v = xasprintf("%d %llu %llu", i, (unsigned long long)rl.rlim_cur,
                                                   (unsigned long long)rl.rlim_max);
                hash_text(h, "rlimit", v);
        }
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, 0);
        _cleanup_free_ char *niceness = xasprintf("%d %d", nice, errno);
        hash_text(h, "nice", niceness);
        char adj[32] = "";
        _cleanup_close_ int fd = open("/proc/self/oom_score_adj", O_RDONLY | O_CLOEXEC);
        ssize_t k = fd >= 0 ? read(fd, adj, sizeof(adj) - 1) : -1;
        adj[k > 0 ? k : 0] = 0;
        hash_text(h, "oom_score_adj", adj);
        hash_namespaces(h);
        hash_status(h);
        lfs_id id;
        lfs_hasher_finish(h, &id);
        char *hex = xmalloc(LFS_HEX_LEN + 1);
        lfs_id_to_hex(&id, hex);
        return hex;
}

int lfs_pool_claim(lfs_home *home, sqlite3 *db, const char *project, const char *key, int *ret_sandbox) {
        for (;;) {
                sandbox_record rec = { .dir_fd = -1 };
                int r = lfs_record_pool_take(home, db, project, key, &rec, NULL);
                if (r < 0)
                        return r == -ENOENT ? -ENOENT : r;
                lfs_fault_point("pool-taken");
                /* Its daemon answers (and starts its idle time again), or it was ending
                 * (its idle close, a kill): then its own end or a reclaim removes it, and
                 * the next one is taken. */
                json_t *resp = NULL;
                r = lfs_sandbox_open_dir(home, &rec, NULL);
                if (r == 0)
                        r = lfs_rpc(&rec, LFS_CALL_SANDBOX_PING, json_object(), &resp, NULL);
                json_decref(resp);
                int number = rec.number;
                lfs_record_done(&rec);
                if (r == 0) {
                        *ret_sandbox = number;
                        return 0;
                }
        }
}

int lfs_pool_lock(lfs_home *home, int *ret_fd) {
        _cleanup_close_ int fd =
                openat(home->fd, "pool.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}
