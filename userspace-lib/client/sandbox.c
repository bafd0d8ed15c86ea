/* SPDX-License-Identifier: MIT */
/*
 * Sandboxes: numbered per project, one layerfs-daemon each, recorded in <home>/home.db
 * (records.c). The library claims the number in one transaction, makes the Sandbox's
 * cgroup, starts the daemon in its leaf, waits until its control socket answers, and
 * then hands the record to the daemon. Every later call goes to the daemon over its
 * socket with the Sandbox's token, both reached through the Sandbox's directory held
 * open. A Sandbox whose daemon is gone is reclaimed: whoever takes its record over (one
 * compare-and-swap) ends its processes, removes its mounts, cgroups and directory, and
 * deletes the record of that instance last.
 */
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

#include "client.h"
#include "fault.h"
#include "numbers.h"
#include "platforms.h"
#include "probe.h"
#include "rtnetlink.h"

/* ---- the Sandbox's directory ---- */

/* Opens <home>/sandboxes/<project>-<n> beneath the home without following a symlink:
 * a 'sandboxes' swapped for a link to someone else's tree, with a token and a socket of
 * theirs, is refused (PermissionDenied), never talked to. -ENOENT (no error set) when it
 * does not exist. */
static int open_sandbox_dir_in(int base, const sandbox_record *rec, int *ret_fd, lfs_error **err) {
        _cleanup_free_ char *name = xasprintf("%s-%d", rec->project, rec->number);
        _cleanup_close_ int fd = lfs_open_beneath(base, name, O_RDONLY | O_DIRECTORY);
        if (fd == -ENOENT)
                return -ENOENT;
        if (fd < 0)
                return lfs_fail(err, fd == -ELOOP || fd == -ENOTDIR ? LFS_PERMISSION_DENIED : LFS_FAILED,
                                -fd, "cannot open %s: %s; LayerFS follows no link inside the home", rec->dir,
                                strerror(-fd));
        struct stat st;
        if (fstat(fd, &st) < 0 || (st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & 022))
                return lfs_fail(err, LFS_PERMISSION_DENIED, EPERM,
                                "%s is not a Sandbox's directory of this home (owner uid %u, mode %04o): it "
                                "must be root's and writable by no one else; nothing there was used",
                                rec->dir, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int open_sandbox_dir(lfs_home *home, const sandbox_record *rec, int *ret_fd, lfs_error **err) {
        _cleanup_close_ int base = -1;
        int r = lfs_home_dir(home, "sandboxes", 0711, false, &base, err);
        return r < 0 ? r : open_sandbox_dir_in(base, rec, ret_fd, err);
}

int lfs_sandbox_open_dir(lfs_home *home, sandbox_record *rec, lfs_error **err) {
        int r = open_sandbox_dir(home, rec, &rec->dir_fd, err);
        return r == -ENOENT ? lfs_daemon_gone(rec, ENOENT, err) : r;
}

/* The runtime a checked record names (records.c refuses one that is not of the eight
 * platforms or the four runtimes), its platform, and the record as that runtime sees it. */
const lfs_runtime *lfs_record_runtime(const lfs_home *home, const sandbox_record *rec,
                                      const lfs_platform **ret_platform, lfs_sandbox_ref *ret) {
        *ret = (lfs_sandbox_ref){ .home = home->path,
                                  .project = rec->project,
                                  .number = rec->number,
                                  .dir = rec->dir,
                                  .place = rec->cgroup,
                                  .id_base = rec->id_base,
                                  .instance = rec->instance,
                                  .network = rec->network,
                                  .net_base = rec->net_base };
        const lfs_platform *p = lfs_platform_find(rec->platform);
        if (!p)
                p = lfs_platform_find("linux");
        const lfs_runtime *rt = lfs_platform_runtime(p, rec->runtime);
        if (ret_platform)
                *ret_platform = p;
        return rt ? rt : p->runtime;
}

/* Everything a Sandbox left, through its runtime's reclaim: processes (however they
 * detached, whatever FUSE connection of theirs holds them), its mounts, its place, its
 * directory; the record of this instance last, and only when all of that is gone. The
 * caller owns the record (it claimed it, or took it over). When something stays, the
 * record is left to whoever takes it over next (no owner), and the message says what
 * stayed. */
int lfs_remove_remains(lfs_home *home, sqlite3 *db, sandbox_record *rec, lfs_error **err) {
        _cleanup_close_ int base = -1;
        int r = lfs_home_dir(home, "sandboxes", 0711, false, &base, err);
        if (r < 0 && r != -ENOENT) {
                /* A 'sandboxes' that is not the home's: nothing is touched. */
                lfs_record_set_owner(db, rec, 0, "removing", NULL);
                return r;
        }
        if ((r = lfs_record_check_link(home, db, rec, err)) < 0) {
                lfs_record_set_owner(db, rec, 0, "removing", NULL);
                return r;
        }
        _cleanup_free_ char *why = NULL;
        lfs_sandbox_ref sb;
        r = lfs_record_runtime(home, rec, NULL, &sb)->reclaim(&sb, &why);
        if (r < 0) {
                lfs_record_set_owner(db, rec, 0, "removing", NULL);
                return lfs_fail(err, LFS_FAILED, -r,
                                "sandbox %d of project '%s' could not be removed completely: %s; its record "
                                "stays so that 'layerfs runtime reclaim' can finish once that is fixed",
                                rec->number, rec->project, why ? why : strerror(-r));
        }
        return lfs_record_delete(db, rec, err);
}

/* ---- checks before anything is made ---- */

/* LAYERFS_WORKSPACE_MEMORY, for a new Sandbox's daemon: the budget of each Workspace's
 * metadata, a size (4096, 512M, 2G). */
static int check_workspace_memory(lfs_error **err) {
        const char *v = getenv("LAYERFS_WORKSPACE_MEMORY");
        uint64_t bytes;
        return v && *v ? lfs_parse_size("LAYERFS_WORKSPACE_MEMORY", v, &bytes, err) : 0;
}

/* A knob for a new Sandbox's daemon that names one of a few values (values: NULL-ended;
 * unset or empty: the daemon's default): 0, or InvalidInput naming what it is not
 * (what) and the values it may be. */
static int check_env_choice(const char *var, const char *what, const char *const *values, lfs_error **err) {
        const char *v = getenv(var);
        if (!v || !*v)
                return 0;
        char choices[128] = "";
        for (size_t i = 0, used = 0; values[i]; i++) {
                if (!strcmp(v, values[i]))
                        return 0;
                const char *sep = i == 0 ? "" : values[i + 1] ? ", " : " or ";
                int k = snprintf(choices + used, sizeof(choices) - used, "%s%s", sep, values[i]);
                used = k > 0 && (size_t)k < sizeof(choices) - used ? used + (size_t)k : sizeof(choices) - 1;
        }
        return lfs_fail(err, LFS_INVALID_INPUT, 0, "%s='%s' is not %s; give %s", var, v, what, choices);
}

/* LAYERFS_WATCHER: bpf, proc or cgroup (unset: bpf where it loads, else cgroup);
 * LAYERFS_FUSE_TRANSPORT: the FUSE loop of its Workspaces, dev (our own, over /dev/fuse;
 * unset: the same), uring (the same with io_uring rings) or libfuse (libfuse's);
 * LAYERFS_FUSE_URING: off (unset: the same), auto (rings on our own loop where the host
 * has them on) or on (the daemon turns them on for the whole host);
 * LAYERFS_FUSE_PASSTHROUGH: 0 serves every file's data itself, 1 passes upper files'
 * data through (our own loop, where the kernel offers it; unset: the same). */
static int check_daemon_choices(lfs_error **err) {
        static const char *const watchers[] = { "bpf", "proc", "cgroup", NULL };
        static const char *const transports[] = { "libfuse", "dev", "uring", NULL };
        static const char *const switches[] = { "0", "1", NULL };
        static const char *const uring_modes[] = { "on", "off", "auto", NULL };
        int r = check_env_choice("LAYERFS_WATCHER", "a watcher", watchers, err);
        if (r == 0)
                r = check_env_choice("LAYERFS_FUSE_TRANSPORT", "a FUSE transport", transports, err);
        if (r == 0)
                r = check_env_choice("LAYERFS_FUSE_PASSTHROUGH", "0 or 1", switches, err);
        if (r == 0)
                r = check_env_choice("LAYERFS_FUSE_URING", "an io_uring choice", uring_modes, err);
        if (r == 0)
                r = lfs_check_fuse_uring(err);
        return r;
}

/* Commands run as the command identity in a Workspace below the sandboxes directory, so
 * every directory on the way there must let that identity through. */
static int check_traversable(const char *path, uid_t uid, gid_t gid, lfs_error **err) {
        _cleanup_free_ char *walk = xstrdup(path);
        size_t len = strlen(walk);
        for (size_t i = 1; i <= len; i++) {
                if (walk[i] != '/' && walk[i] != 0)
                        continue;
                char saved = walk[i];
                walk[i] = 0;
                struct stat st;
                if (stat(walk, &st) == 0) {
                        mode_t bit = st.st_uid == uid ? S_IXUSR : st.st_gid == gid ? S_IXGRP : S_IXOTH;
                        if (!(st.st_mode & bit))
                                return lfs_fail(err, LFS_PERMISSION_DENIED, EACCES,
                                                "the command identity %u:%u cannot pass through %s (mode "
                                                "%04o, owner %u:%u), which holds the Sandboxes; "
                                                "'chmod o+x %s' lets it through",
                                                (unsigned)uid, (unsigned)gid, walk,
                                                (unsigned)(st.st_mode & 07777), (unsigned)st.st_uid,
                                                (unsigned)st.st_gid, walk);
                }
                walk[i] = saved;
        }
        return 0;
}

/* The network named (NULL: none named yet), checked by name: InvalidInput for another. */
static int parse_network(const char *name, lfs_error **err) {
        lfs_network n;
        if (name && !lfs_network_from_name(name, &n))
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "--network '%s' is not a network; give " LFS_NETWORK_NAMES, name);
        return 0;
}

/* The network named (checked by parse_network; NULL: the runtime's default): Unsupported
 * for one the runtime cannot give. */
static int choose_network(const char *name, const lfs_runtime *rt, lfs_network *ret, lfs_error **err) {
        lfs_network n = rt->default_network;
        if (name)
                (void)lfs_network_from_name(name, &n);
        if (!(rt->networks & LFS_NETWORK_BIT(n)))
                return lfs_fail(
                        err, LFS_UNSUPPORTED, EOPNOTSUPP,
                        "--network %s: the %s runtime cannot give a Sandbox that network%s%s%s; the "
                        "namespaces runtime (LAYERFS_RUNTIME=namespaces) gives none, host and private",
                        lfs_network_name(n), rt->name, rt->networks_why ? " (" : "",
                        rt->networks_why ? rt->networks_why : "", rt->networks_why ? ")" : "");
        *ret = n;
        return 0;
}

/* ---- create ---- */

int lfs_sandbox_create(lfs_home *home, const char *project, const char *image, const char *platform,
                       int *ret_sandbox, lfs_error **err) {
        lfs_sandbox_options o = { .image = image, .platform = platform };
        return lfs_sandbox_create_with(home, project, &o, ret_sandbox, err);
}

/* The runtime's prepare (its checks before anything is made). A runtime chosen by default
 * (the platform's preferred) that this host cannot run, refused Unsupported, gives way to
 * fallback, the platform's own ('layerfs runtime status' says why). */
static int prepare_runtime(const lfs_platform *p, const lfs_runtime **rt, const lfs_runtime *fallback,
                           char **ret_root, lfs_error **err) {
        lfs_error *refused = NULL;
        int r = (*rt)->prepare(p, ret_root, fallback ? &refused : err);
        if (r >= 0 || !fallback)
                return r;
        if (refused->code != LFS_UNSUPPORTED) {
                if (err)
                        *err = refused;
                else
                        lfs_error_free(refused);
                return r;
        }
        lfs_error_free(refused);
        *rt = fallback;
        return fallback->prepare(p, ret_root, err);
}

/* What a create decided before anything is made: every setting checked, the platform,
 * runtime and network chosen. */
typedef struct create_plan {
        const lfs_platform *platform;
        const lfs_runtime *runtime;
        lfs_sandbox_limits limits;
        lfs_network network;
        uint64_t pool;
        char *project, *place_root, *daemon;
        int base, projects; /* the home's sandboxes/ and projects/ */
} create_plan;

static void create_plan_done(create_plan *c) {
        free(c->project);
        free(c->place_root);
        free(c->daemon);
        if (c->base >= 0)
                close(c->base);
        if (c->projects >= 0)
                close(c->projects);
}

static int create_plan_make(lfs_home *home, const char *project, const lfs_sandbox_options *options,
                            create_plan *c, lfs_error **err) {
        /* The image is ignored for linux Sandboxes (SPEC 5). */
        const char *platform = options ? options->platform : NULL;
        uid_t uid;
        gid_t gid;
        double idle;
        uint64_t gc_after, watcher_wait, max_per_root;
        const char *runtime = "native";
        /* The daemon reads the same settings (the identity, the idle close): refused here,
         * before anything is made. */
        const char *network_name = options ? options->network : NULL;
        int r = lfs_parse_limits(options, &c->limits, err);
        if (r < 0 || (r = parse_network(network_name, err)) < 0 ||
            (r = lfs_default_runtime(&runtime, err)) < 0 ||
            (r = lfs_platform_choose(home->path, platform, &c->platform, err)) < 0 ||
            (r = check_daemon_choices(err)) < 0 || (r = lfs_command_identity(&uid, &gid, err)) < 0 ||
            (r = lfs_idle_seconds(&idle, err)) < 0 || (r = lfs_gc_after_deletes(&gc_after, err)) < 0 ||
            (r = lfs_watcher_load_wait_ms(&watcher_wait, err)) < 0 ||
            (r = lfs_test_max_sandboxes_per_root(&max_per_root, err)) < 0 ||
            (r = check_workspace_memory(err)) < 0 || (r = lfs_pool_size(&c->pool, err)) < 0)
                return r;
        /* The runtime's own checks (linux: root, cgroup2, for namespaces the kernel's
         * namespaces and LAYERFS_ID_RANGE; one this build lacks: Unsupported). */
        const lfs_runtime *fallback = NULL;
        uint32_t id_first = 0, id_count = 0;
        if ((r = lfs_platform_new_runtime(c->platform, &c->runtime, &fallback, err)) < 0 ||
            (r = lfs_id_range(&id_first, &id_count, err)) < 0 ||
            (r = prepare_runtime(c->platform, &c->runtime, fallback, &c->place_root, err)) < 0 ||
            (r = c->runtime->check_limits(c->platform, c->place_root, &c->limits, err)) < 0 ||
            (r = choose_network(network_name, c->runtime, &c->network, err)) < 0 ||
            (r = lfs_project_name(home, project, &c->project, err)) < 0 ||
            (r = lfs_daemon_path(&c->daemon, err)) < 0)
                return r;
        if ((r = check_traversable(home->path, uid, gid, err)) < 0)
                return r;
        /* The Stores are not the commands' to read: a home from before keeps its
         * projects/ no more open than a new one (docs/security.md). */
        if ((r = lfs_home_dir(home, "projects", 0700, true, &c->projects, err)) < 0 ||
            (r = lfs_home_dir(home, "sandboxes", 0711, true, &c->base, err)) < 0)
                return r;
        return 0;
}

static char *plan_pool_key(const create_plan *c) {
        lfs_pool_request q = { .project = c->project,
                               .platform = c->platform->id,
                               .runtime = c->runtime->name,
                               .daemon = c->daemon,
                               .network = c->network,
                               .limits = &c->limits };
        return lfs_pool_key(&q);
}

/* Makes one Sandbox on db as the plan says: 'running' for its caller, or, with pool_key,
 * 'pooled' for a later create with that key. */
static int create_one(lfs_home *home, sqlite3 *db, const create_plan *c, const char *pool_key,
                      int *ret_sandbox, lfs_error **err) {
        /* Numbers held by dead Sandboxes become free again, reclaimed on the connection
         * that then claims the number and writes the record (one open of home.db). */
        lfs_reclaimed *gone = NULL;
        size_t n_gone = 0;
        if (lfs_reclaim_with(home, db, &gone, &n_gone, NULL) == 0)
                lfs_reclaimed_free(gone, n_gone);
        sandbox_record rec = { .dir_fd = -1 };
        /* net_hold is kept until the create is done: by then the host's end of a private
         * network has its address, which keeps the /30 from every other home's create. */
        _cleanup_close_ int id_hold = -1, net_hold = -1;
        int r = lfs_record_claim(home, db, c->project, c->place_root, c->runtime, &c->limits, c->network,
                                 &rec, &id_hold, &net_hold, err);
        if (r < 0)
                return r;
        lfs_fault_point("create-claimed");
        pid_t pid = -1;
        r = lfs_start_daemon(home, c->base, c->platform, &rec, c->daemon, id_hold, &pid, err);
        if (r == 0 && lfs_fault_fails("record"))
                r = lfs_fail(err, LFS_FAILED, EIO,
                             "cannot record sandbox %d (LAYERFS_INJECT_FAILURE=record)", rec.number);
        else if (r == 0 && (r = pool_key ? lfs_record_pool_offer(db, &rec, pid, pool_key, err)
                                         : lfs_record_set_owner(db, &rec, pid, "running", err)) == -ESTALE)
                r = lfs_fail(err, LFS_FAILED, ESTALE,
                             "the record of sandbox %d of project '%s' changed while it was being created",
                             rec.number, rec.project);
        if (r < 0) {
                /* Nothing of a failed create stays: ending the cgroup ends the daemon (it
                 * started in it); then the mounts, the directory and the record go, the
                 * daemon's log with them: its last words go into the error. */
                lfs_add_daemon_log(&rec, err);
                lfs_remove_remains(home, db, &rec, NULL);
        } else {
                *ret_sandbox = rec.number;
        }
        lfs_record_done(&rec);
        return r;
}

/* create_one, and once more after the home's pooled Sandboxes (every project and key) are
 * ended when it found no number, id range or network left: what a pool holds ahead is
 * never what keeps a create from being made. */
static int create_one_or_drain(lfs_home *home, sqlite3 *db, const create_plan *c, int *ret_sandbox,
                               lfs_error **err) {
        lfs_error *first = NULL;
        int r = create_one(home, db, c, NULL, ret_sandbox, &first);
        if (r < 0 && first && first->code == LFS_LIMIT_REACHED && lfs_pool_drain(home, db) > 0) {
                lfs_error_free(TAKE_PTR(first));
                r = create_one(home, db, c, NULL, ret_sandbox, &first);
        }
        if (err)
                *err = first;
        else
                lfs_error_free(first);
        return r;
}

int lfs_sandbox_create_with(lfs_home *home, const char *project, const lfs_sandbox_options *options,
                            int *ret_sandbox, lfs_error **err) {
        _cleanup_(create_plan_done) create_plan c = { .base = -1, .projects = -1 };
        int r = create_plan_make(home, project, options, &c, err);
        if (r < 0)
                return r;
        sqlite3 *db = NULL;
        if ((r = lfs_records_open(home, &db, err)) < 0)
                return r;
        /* A pooled Sandbox made for a create like this one, if there is one (LAYERFS_POOL). */
        _cleanup_free_ char *key = c.pool ? plan_pool_key(&c) : NULL;
        r = key ? lfs_pool_claim(home, db, c.project, key, ret_sandbox) : -ENOENT;
        /* No pooled one, or none could be taken (the records busy): its own, as without a
         * pool (whose records' errors are then the create's). */
        if (r < 0)
                r = create_one_or_drain(home, db, &c, ret_sandbox, err);
        lfs_records_close(db);
        return r;
}

int lfs_sandbox_pool_fill(lfs_home *home, const char *project, const lfs_sandbox_options *options,
                          int ready_fd, lfs_error **err) {
        _cleanup_close_ int ready = ready_fd, filling = -1, lock = -1;
        /* Held from before ready is closed: a caller that then takes the fillers' lock
         * exclusively waits for this fill. */
        int r = lfs_pool_lock(home, NULL, &filling, err);
        if (ready >= 0)
                close(TAKE_FD(ready));
        if (r < 0)
                return r == -EWOULDBLOCK ? 0 : r;
        _cleanup_(create_plan_done) create_plan c = { .base = -1, .projects = -1 };
        r = create_plan_make(home, project, options, &c, err);
        _cleanup_free_ char *key = r == 0 && c.pool ? plan_pool_key(&c) : NULL;
        /* One filler per pool at a time; one that finds another at work leaves it to that. */
        if (key)
                r = lfs_pool_lock(home, key, &lock, err);
        if (!key || r == -EWOULDBLOCK)
                return r == -EWOULDBLOCK ? 0 : r;
        if (r < 0)
                return r;
        sqlite3 *db = NULL;
        if ((r = lfs_records_open(home, &db, err)) < 0)
                return r;
        /* At most the pool's size of creates: pooled daemons that die as they are made do
         * not keep a filler going. */
        for (uint64_t made = 0; made < c.pool; made++) {
                size_t have = 0;
                int number = 0;
                if ((r = lfs_record_pool_count(home, db, c.project, key, &have, err)) < 0 ||
                    have >= c.pool || (r = create_one(home, db, &c, key, &number, err)) < 0)
                        break;
        }
        lfs_records_close(db);
        return r;
}

/* ---- opening, closing, reclaiming ---- */

/* Opens the checked record of project's Sandbox number from the records db, and its
 * directory if it is there (rec->dir_fd, else -1). */
static int sandbox_open_in(lfs_home *home, sqlite3 *db, const char *project, int number, sandbox_record *ret,
                           lfs_error **err) {
        _cleanup_free_ char *name = NULL;
        int r = lfs_project_name(home, project, &name, err);
        if (r < 0)
                return r;
        if (number <= 0)
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "sandbox number %d is not valid: give 1 or more",
                                number);
        r = lfs_record_read(home, db, name, number, ret, err);
        if (r == 0 && (r = open_sandbox_dir(home, ret, &ret->dir_fd, err)) == -ENOENT)
                r = 0;
        if (r < 0 && ret->project)
                lfs_record_done(ret);
        return r;
}

int lfs_sandbox_open(lfs_home *home, const char *project, int number, sandbox_record *ret, lfs_error **err) {
        sqlite3 *db = NULL;
        int r = lfs_records_open(home, &db, err);
        if (r == 0)
                r = sandbox_open_in(home, db, project, number, ret, err);
        lfs_records_close(db);
        return r;
}

/* Opens the record of a Sandbox whose daemon must be alive to answer. */
int lfs_sandbox_open_live(lfs_home *home, const char *project, int number, sandbox_record *ret,
                          lfs_error **err) {
        int r = lfs_sandbox_open(home, project, number, ret, err);
        if (r < 0)
                return r;
        lfs_sandbox_ref sb;
        const lfs_platform *p = NULL;
        const lfs_runtime *rt = lfs_record_runtime(home, ret, &p, &sb);
        /* Calls follow the record's platform and runtime, never the caller's default. */
        if ((r = rt->reach(p, &sb, err)) < 0) {
                lfs_record_done(ret);
        } else if (!strcmp(ret->state ? ret->state : "", "pooled")) {
                /* Made ahead for a create (LAYERFS_POOL): no one's until a create takes it. */
                r = lfs_fail(err, LFS_NO_SUCH_SANDBOX, ENOENT,
                             "project '%s' has no sandbox %d: that number is a pooled Sandbox, made ahead "
                             "for a 'sandbox create' (LAYERFS_POOL); the call did nothing",
                             ret->project, ret->number);
                lfs_record_done(ret);
        } else if (!strcmp(ret->state ? ret->state : "", "removing")) {
                r = lfs_fail(err, LFS_NO_SUCH_SANDBOX, ESRCH,
                             "sandbox %d of project '%s' is being removed; the call did nothing",
                             ret->number, ret->project);
                lfs_record_done(ret);
        } else if (!strcmp(ret->state ? ret->state : "", "starting") || !lfs_record_alive(ret) ||
                   ret->dir_fd < 0) {
                r = lfs_daemon_gone(ret, ESRCH, err);
                lfs_record_done(ret);
        }
        return r;
}

static bool same_instance(const sandbox_record *a, const sandbox_record *b) {
        return a->instance && b->instance ? !strcmp(a->instance, b->instance) : !a->instance && !b->instance;
}

/* Once the owner the caller saw is gone: whatever that instance of the Sandbox left is
 * removed, by the caller unless someone else already took it over. A record that is gone,
 * or names a later instance with the same number, means there is nothing left to do. */
static int finish_removal(lfs_home *home, sqlite3 *db, const sandbox_record *seen, lfs_error **err) {
        sandbox_record now = { .dir_fd = -1 };
        lfs_error *why = NULL;
        int r = lfs_record_read(home, db, seen->project, seen->number, &now, &why);
        if (r < 0 && why && why->code == LFS_NO_SUCH_SANDBOX)
                r = 0; /* removed: by its daemon, or by whoever took it over */
        else if (r < 0 && err)
                *err = TAKE_PTR(why);
        else if (r == 0 && same_instance(&now, seen)) {
                /* Handed over to this process by the daemon as its last act (sandbox
                 * close): its to finish, without a takeover. */
                bool ours = now.pid == getpid() && lfs_record_alive(&now);
                if (!ours && (lfs_record_alive(&now) ||
                              (r = lfs_record_set_owner(db, &now, getpid(), "removing", err)) == -ESTALE))
                        r = lfs_fail(err, LFS_BUSY, EBUSY,
                                     "sandbox %d of project '%s' is being %s by process %d; try again in a "
                                     "moment",
                                     now.number, now.project,
                                     !strcmp(now.state, "starting") ? "created" : "removed", (int)now.pid);
                else if (r == 0)
                        r = lfs_remove_remains(home, db, &now, err);
        }
        lfs_error_free(why);
        lfs_record_done(&now);
        return r;
}

/* How long a close waits for the daemon it asked, or for another caller's removal. */
#define CLOSE_WAIT_MS 30000
/* How long a close waits for a daemon that answered in another protocol version to exit:
 * longer than a daemon's own end (END_WAIT_MS, 2 s, in daemon/main.c). */
#define OTHER_VERSION_WAIT_MS 5000

/* The close, on one connection to the records: the record is read once before the daemon is
 * asked and once after it is gone, and a connection held meanwhile keeps home.db's WAL index
 * in shared memory for the daemon's hand-over, which would otherwise rebuild it from the
 * WAL, as would the second read. */
static int sandbox_close_in(lfs_home *home, sqlite3 *db, const char *project, int sandbox, int force,
                            lfs_error **err) {
        sandbox_record rec = { .dir_fd = -1 };
        int r = sandbox_open_in(home, db, project, sandbox, &rec, err);
        if (r < 0)
                return r;
        lfs_sandbox_ref sb;
        const lfs_platform *p = NULL;
        if ((r = lfs_record_runtime(home, &rec, &p, &sb)->reach(p, &sb, err)) < 0) {
                lfs_record_done(&rec);
                return r;
        }
        bool alive = lfs_record_alive(&rec);
        const char *state = rec.state ? rec.state : ""; /* a checked record has one */
        if (alive && !strcmp(state, "starting")) {
                lfs_record_done(&rec);
                return lfs_fail(err, LFS_BUSY, EBUSY,
                                "sandbox %d of project '%s' is still being created; try again in a moment",
                                sandbox, project ? project : "");
        }
        /* A pooled Sandbox closes as a running one: the pool is one smaller. */
        if (alive && (!strcmp(state, "running") || !strcmp(state, "pooled"))) {
                lfs_error *refusal = NULL;
                int fd = lfs_rpc_send(&rec, LFS_CALL_SANDBOX_CLOSE, json_pack("{s:b}", "force", force), NULL,
                                      0, &refusal);
                /* The Sandbox's directory is not needed again: let go of it before the
                 * daemon removes it, so that the daemon's rmdir frees it (on a file system
                 * that discards freed blocks at once, about 1 ms) while its close waits on
                 * the kernel anyway, not this process's close of it after the daemon's
                 * exit. */
                if (rec.dir_fd >= 0)
                        close(rec.dir_fd);
                rec.dir_fd = -1;
                r = fd < 0 ? fd : lfs_rpc_read_answer(&rec, fd, NULL, &refusal);
                if (fd >= 0)
                        close(fd);
                /* An answer of another protocol version (-EPROTO) says nothing of what the
                 * daemon did: it may be closing (one from before versions acts on the
                 * request), so it is given its own end's wait; one still there after it
                 * refused, and that refusal (naming both versions) is the answer, not a
                 * Busy after CLOSE_WAIT_MS. */
                if (r == -EPROTO && !lfs_wait_owner_gone(&rec, OTHER_VERSION_WAIT_MS)) {
                        if (err)
                                *err = refusal;
                        else
                                lfs_error_free(refusal);
                        lfs_record_done(&rec);
                        return r;
                }
                if (r < 0 && r != -EPROTO && refusal->code != LFS_NO_SUCH_SANDBOX &&
                    refusal->code != LFS_FAILED) {
                        /* Dirty: nothing was removed. */
                        if (err)
                                *err = refusal;
                        else
                                lfs_error_free(refusal);
                        lfs_record_done(&rec);
                        return r;
                }
                /* The daemon tore the Sandbox down but for its own cgroup leaf and the
                 * Sandbox's cgroup, handed the record over to this process (or could not
                 * finish: then it released the record), and exits: finish_removal removes
                 * the rest. */
                lfs_error_free(refusal);
        }
        if (!lfs_wait_owner_gone(&rec, CLOSE_WAIT_MS)) {
                r = lfs_fail(
                        err, LFS_BUSY, EBUSY,
                        "sandbox %d of project '%s': process %d, which %s it, did not finish within %d s; "
                        "see 'layerfs sandbox log %d'",
                        sandbox, rec.project, (int)rec.pid,
                        !strcmp(state, "running") ? "was asked to close" : "is removing",
                        CLOSE_WAIT_MS / 1000, sandbox);
                lfs_record_done(&rec);
                return r;
        }
        /* The daemon is gone; its leaf, the Sandbox's cgroup and the record (handed over to
         * this process) are still here after a sandbox close: a closer killed now leaves
         * them to the next reclaim. */
        lfs_fault_point("close-daemon-gone");
        r = finish_removal(home, db, &rec, err);
        lfs_record_done(&rec);
        return r;
}

int lfs_sandbox_close(lfs_home *home, const char *project, int sandbox, int force, lfs_error **err) {
        sqlite3 *db = NULL;
        int r = lfs_records_open(home, &db, err);
        if (r == 0)
                r = sandbox_close_in(home, db, project, sandbox, force, err);
        lfs_records_close(db);
        return r;
}

typedef struct live_state {
        const char *project; /* NULL: every project */
        lfs_sandbox_info *out;
        size_t n, cap;
} live_state;

/* A running Sandbox whose daemon is alive: what list_sandboxes lists and project list
 * counts. Records refused, dead or being removed are not Sandboxes to use. */
static void live_one(void *userdata, sandbox_record *rec, const char *project, long long number,
                     lfs_error *why) {
        (void)project, (void)number, (void)why;
        live_state *s = userdata;
        if (!rec || strcmp(rec->state, "running") || !lfs_record_alive(rec) ||
            (s->project && strcmp(s->project, rec->project)))
                return;
        GROW(s->out, s->cap, s->n + 1);
        s->out[s->n++] = (lfs_sandbox_info){ .project = xstrdup(rec->project),
                                             .sandbox = rec->number,
                                             .platform = xstrdup(rec->platform) };
}

static int live_sandboxes(lfs_home *home, live_state *s, lfs_error **err) {
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        if (access(path, F_OK) < 0)
                return 0;
        sqlite3 *db = NULL;
        int r = lfs_records_open(home, &db, err);
        if (r == 0)
                r = lfs_records_each(home, db, live_one, s, err);
        lfs_records_close(db);
        return r;
}

int lfs_live_sandboxes(lfs_home *home, const char *project, lfs_sandbox_info **ret, size_t *ret_n,
                       lfs_error **err) {
        live_state s = { .project = project };
        int r = live_sandboxes(home, &s, err);
        if (r < 0) {
                lfs_sandbox_info_free(s.out, s.n);
                return r;
        }
        *ret = s.out;
        *ret_n = s.n;
        return 0;
}

/* Running Sandboxes of project, from the home's records (0 when there are none). */
static size_t count_sandboxes(lfs_home *home, const char *project) {
        live_state s = { .project = project };
        live_sandboxes(home, &s, NULL);
        lfs_sandbox_info_free(s.out, s.n);
        return s.n;
}

/* The Store lists the projects and their branches; how many Sandboxes each runs is
 * the client's to count (the Store knows no Sandbox). */
int lfs_project_list(lfs_home *home, lfs_project_info **ret_projects, size_t *ret_n, lfs_error **err) {
        lfs_project_info *projects = NULL;
        size_t n = 0;
        int r = lfs_store_project_list(home, &projects, &n, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                projects[i].sandboxes = count_sandboxes(home, projects[i].project);
        *ret_projects = projects;
        *ret_n = n;
        return 0;
}

/* How long a list waits for the daemons' answers, all of them together. */
#define LIST_ANSWER_MS 2000

typedef struct listed_state {
        int base; /* <home>/sandboxes */
        sandbox_record *recs;
        size_t n, cap;
        bool dead; /* a record whose owner is gone: for the reclaim */
} listed_state;

/* A running Sandbox whose daemon is alive: its record is kept (taken from the scan), with
 * its directory open for the question to its daemon. */
static void listed_one(void *userdata, sandbox_record *rec, const char *project, long long number,
                       lfs_error *why) {
        (void)project, (void)number, (void)why;
        listed_state *s = userdata;
        bool alive = rec && lfs_record_alive(rec);
        s->dead |= rec && !alive;
        if (!alive || strcmp(rec->state, "running"))
                return;
        GROW(s->recs, s->cap, s->n + 1);
        sandbox_record *mine = &s->recs[s->n++];
        *mine = *rec;
        *rec = (sandbox_record){ .dir_fd = -1 };
        if (s->base < 0 || open_sandbox_dir_in(s->base, mine, &mine->dir_fd, NULL) < 0)
                mine->dir_fd = -1;
}

static void network_of(const sandbox_record *rec, lfs_sandbox_network *ret) {
        lfs_sandbox_network n = { 0 };
        snprintf(n.mode, sizeof(n.mode), "%s", lfs_network_name(rec->network));
        if (rec->network == LFS_NETWORK_PRIVATE) {
                lfs_network_link_name(rec->instance, n.host_link);
                lfs_ipv4_text(rec->net_base + 1, n.host_address);
                lfs_ipv4_text(rec->net_base + 2, n.sandbox_address);
                n.prefix = LFS_NETWORK_PREFIX;
        }
        *ret = n;
}

/* The records are read once, and the daemons asked for their Workspaces all at once
 * (lfs_rpc_all): a list of 200 asked each in turn, opening the Store and the records again
 * for each, took 372 ms here. */
int lfs_sandbox_list_details(lfs_home *home, lfs_sandbox_details **ret, size_t *ret_n, lfs_error **err) {
        listed_state s = { .base = -1 };
        _cleanup_free_ char *path = xasprintf("%s/home.db", home->path);
        int r = 0;
        if (access(path, F_OK) == 0) {
                /* A 'sandboxes' that is not the home's own: no directory below it is used. */
                if (lfs_home_dir(home, "sandboxes", 0711, false, &s.base, NULL) < 0)
                        s.base = -1;
                sqlite3 *db = NULL;
                if ((r = lfs_records_open(home, &db, err)) == 0)
                        r = lfs_records_each(home, db, listed_one, &s, err);
                /* What is listed is alive, and Sandboxes whose daemon died are reclaimed
                 * (SPEC 4): by the same connection, once the scan found one. */
                lfs_reclaimed *gone = NULL;
                size_t n_gone = 0;
                if (r == 0 && s.dead && lfs_reclaim_with(home, db, &gone, &n_gone, NULL) == 0)
                        lfs_reclaimed_free(gone, n_gone);
                lfs_records_close(db);
                if (s.base >= 0)
                        close(s.base);
        }
        if (r < 0) {
                for (size_t i = 0; i < s.n; i++)
                        lfs_record_done(&s.recs[i]);
                free(s.recs);
                return r;
        }
        _cleanup_free_ json_t **answers = xcalloc(s.n ? s.n : 1, sizeof(*answers));
        _cleanup_free_ int *status = xcalloc(s.n ? s.n : 1, sizeof(*status));
        lfs_rpc_all(s.recs, s.n, LFS_CALL_SANDBOX_LIST_WORKSPACES, LIST_ANSWER_MS, answers, status);
        lfs_sandbox_details *out = xcalloc(s.n ? s.n : 1, sizeof(*out));
        for (size_t i = 0; i < s.n; i++) {
                const sandbox_record *rec = &s.recs[i];
                out[i] = (lfs_sandbox_details){ .project = xstrdup(rec->project),
                                                .sandbox = rec->number,
                                                .platform = xstrdup(rec->platform),
                                                .workspaces = json_array_size(answers[i]),
                                                .limits = rec->limits,
                                                .answered = status[i] == 0 };
                network_of(rec, &out[i].network);
                json_decref(answers[i]);
                lfs_record_done(&s.recs[i]);
        }
        free(s.recs);
        *ret = out;
        *ret_n = s.n;
        return 0;
}

void lfs_sandbox_details_free(lfs_sandbox_details *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].project);
                free(items[i].platform);
        }
        free(items);
}

int lfs_sandbox_list(lfs_home *home, lfs_sandbox_info **ret, size_t *ret_n, lfs_error **err) {
        lfs_sandbox_details *d = NULL;
        size_t n = 0;
        int r = lfs_sandbox_list_details(home, &d, &n, err);
        if (r < 0)
                return r;
        lfs_sandbox_info *out = xcalloc(n ? n : 1, sizeof(*out));
        for (size_t i = 0; i < n; i++)
                out[i] = (lfs_sandbox_info){ .project = TAKE_PTR(d[i].project),
                                             .sandbox = d[i].sandbox,
                                             .platform = TAKE_PTR(d[i].platform),
                                             .workspaces = d[i].workspaces };
        lfs_sandbox_details_free(d, n);
        *ret = out;
        *ret_n = n;
        return 0;
}

int lfs_sandbox_get_limits(lfs_home *home, const char *project, int sandbox, lfs_sandbox_limits *ret,
                           lfs_error **err) {
        sandbox_record rec = { .dir_fd = -1 };
        int r = lfs_sandbox_open_live(home, project, sandbox, &rec, err);
        if (r < 0)
                return r;
        *ret = rec.limits;
        lfs_record_done(&rec);
        return 0;
}

int lfs_sandbox_get_network(lfs_home *home, const char *project, int sandbox, lfs_sandbox_network *ret,
                            lfs_error **err) {
        sandbox_record rec = { .dir_fd = -1 };
        int r = lfs_sandbox_open_live(home, project, sandbox, &rec, err);
        if (r < 0)
                return r;
        network_of(&rec, ret);
        lfs_record_done(&rec);
        return 0;
}

void lfs_sandbox_info_free(lfs_sandbox_info *items, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(items[i].project);
                free(items[i].platform);
                free(items[i].image);
        }
        free(items);
}

/* Opens the Sandbox and sends call with the given fields. */
int lfs_sandbox_call(lfs_home *home, const char *project, int sandbox, lfs_call call, json_t *args,
                     json_t **ret, lfs_error **err) {
        sandbox_record rec = { .dir_fd = -1 };
        int r = lfs_sandbox_open_live(home, project, sandbox, &rec, err);
        if (r < 0) {
                json_decref(args);
                return r;
        }
        r = lfs_rpc(&rec, call, args, ret, err);
        lfs_record_done(&rec);
        return r;
}

/* Appends the contents of dir_fd/name to *buf (missing is fine). */
static void append_file(int dir_fd, const char *name, char **buf, size_t *len) {
        int fd = dir_fd >= 0 ? openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
        if (!f) {
                if (fd >= 0)
                        close(fd);
                return;
        }
        char chunk[65536];
        size_t k;
        while ((k = fread(chunk, 1, sizeof(chunk), f)) > 0) {
                *buf = xrealloc(*buf, *len + k + 1);
                memcpy(*buf + *len, chunk, k);
                *len += k;
                (*buf)[*len] = 0;
        }
        fclose(f);
}

int lfs_sandbox_log(lfs_home *home, const char *project, int sandbox, size_t lines, char **ret_text,
                    lfs_error **err) {
        sandbox_record rec = { .dir_fd = -1 };
        int r = lfs_sandbox_open(home, project, sandbox, &rec, err);
        if (r < 0)
                return r;
        /* The rotated part first: the tail may start there. */
        char *text = xstrdup("");
        size_t len = 0;
        append_file(rec.dir_fd, "daemon.log.1", &text, &len);
        append_file(rec.dir_fd, "daemon.log", &text, &len);
        lfs_record_done(&rec);
        if (!lines)
                lines = 100;
        size_t seen = 0;
        char *start = text + len;
        if (len && text[len - 1] == '\n')
                start--;
        while (start > text && seen < lines) {
                start--;
                if (*start == '\n' && ++seen == lines) {
                        start++;
                        break;
                }
        }
        *ret_text = xstrdup(start);
        free(text);
        return 0;
}

/* ---- background processes ---- */
