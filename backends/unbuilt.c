/* SPDX-License-Identifier: MIT */
/*
 * The runtimes this build lacks (runtime.h): docker (docker, podman) and vm (the VM
 * routes). Readiness names the missing backend or route; every other operation is
 * Unsupported, so that a platform without its runtime is refused through the same table
 * as one with it. Their own folders (docker/, vm/) replace these rows.
 */
#include "platforms.h"
#include "runtime.h"
#include "util.h"

/* The names probe adds: static, as lfs_missing keeps them. */
static const char *const missing_names[] = { "backend:docker", "backend:podman", "route:firecracker",
                                             "route:qemu",     "route:lima",     "route:mac",
                                             "route:wsl" };

static void need_named(lfs_missing *m, const char *kind, const char *id) {
        size_t k = strlen(kind);
        for (size_t i = 0; i < ELEMENTSOF(missing_names); i++)
                if (!strncmp(missing_names[i], kind, k) && !strcmp(missing_names[i] + k, id))
                        lfs_missing_add(m, missing_names[i]);
}

/* The Docker Engine backend is not in this build. */
static void docker_probe(const lfs_platform *p, lfs_missing *m) {
        need_named(m, "backend:", p->id);
}

/* The VM agent route is not in this build. */
static void vm_probe(const lfs_platform *p, lfs_missing *m) {
        need_named(m, "route:", p->id);
}

static int unbuilt_prepare(const lfs_platform *p, char **ret_root, lfs_error **err) {
        (void)ret_root;
        return lfs_fail(err, LFS_UNSUPPORTED, 0, "platform '%s' cannot be driven by this build", p->id);
}

static int unbuilt_check_limits(const lfs_platform *p, const char *root, const lfs_sandbox_limits *limits,
                                lfs_error **err) {
        (void)root, (void)limits;
        return unbuilt_prepare(p, NULL, err);
}

static int unbuilt_reach(const lfs_platform *p, const lfs_sandbox_ref *sb, lfs_error **err) {
        return lfs_fail(err, LFS_UNSUPPORTED, 0,
                        "sandbox %d of project '%s' runs on platform '%s', which this build cannot drive",
                        sb->number, sb->project, p->id);
}

static int unbuilt_create(const lfs_sandbox_ref *sb, const lfs_daemon_start *start, lfs_daemon_handle *ret,
                          lfs_error **err) {
        (void)start, (void)ret;
        return lfs_fail(err, LFS_UNSUPPORTED, 0,
                        "sandbox %d of project '%s': its platform's runtime is not in this build",
                        sb->number, sb->project);
}

static int unbuilt_spawn(const lfs_sandbox_ref *sb, const lfs_command_spec *spec, pid_t *ret_pid,
                         int *ret_pidfd, lfs_error **err) {
        (void)ret_pid, (void)ret_pidfd;
        return lfs_fail(err, LFS_UNSUPPORTED, EOPNOTSUPP,
                        "cannot start '%s' in sandbox %d of project '%s': its platform's runtime is not in "
                        "this build",
                        spec->argv && spec->argv[0] ? spec->argv[0] : spec->name, sb->number, sb->project);
}

static int unbuilt_open_terminal(const lfs_sandbox_ref *sb) {
        (void)sb;
        return -EOPNOTSUPP;
}

static int unbuilt_end_command(const lfs_sandbox_ref *sb, const char *name, int timeout_ms) {
        (void)sb, (void)name, (void)timeout_ms;
        return -EOPNOTSUPP;
}

static void unbuilt_command_done(const lfs_sandbox_ref *sb, const char *name) {
        (void)sb, (void)name;
}

static void unbuilt_list(const lfs_sandbox_ref *sb, lfs_process_fn fn, void *userdata) {
        (void)sb, (void)fn, (void)userdata;
}

static int unbuilt_signal(const lfs_sandbox_ref *sb, pid_t pid, int sig) {
        (void)sb, (void)pid, (void)sig;
        return -EOPNOTSUPP;
}

static int unbuilt_teardown(const lfs_sandbox_ref *sb, bool leave_place, lfs_teardown_hook hook,
                            void *userdata, char **ret_why) {
        (void)leave_place, (void)hook, (void)userdata;
        if (ret_why)
                *ret_why = xasprintf("the runtime of sandbox %d is not in this build", sb->number);
        return -EOPNOTSUPP;
}

static int unbuilt_reclaim(const lfs_sandbox_ref *sb, char **ret_why) {
        return unbuilt_teardown(sb, false, NULL, NULL, ret_why);
}

#define UNBUILT_OPS                                                                                         \
        .prepare = unbuilt_prepare, .check_limits = unbuilt_check_limits, .reach = unbuilt_reach,           \
        .create = unbuilt_create, .spawn = unbuilt_spawn, .open_terminal = unbuilt_open_terminal,           \
        .end_command = unbuilt_end_command, .command_done = unbuilt_command_done, .list = unbuilt_list,     \
        .signal = unbuilt_signal, .teardown = unbuilt_teardown, .reclaim = unbuilt_reclaim

const lfs_runtime lfs_runtime_docker_unbuilt = { .name = "docker", .probe = docker_probe, UNBUILT_OPS };
const lfs_runtime lfs_runtime_vm_unbuilt = { .name = "vm", .probe = vm_probe, UNBUILT_OPS };
