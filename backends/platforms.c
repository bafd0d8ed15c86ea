/* SPDX-License-Identifier: MIT */
/* The table of the eight platforms (platforms.h), their readiness and the refusals. */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "platforms.h"
#include "probe.h"
#include "util.h"

void lfs_missing_add(lfs_missing *m, const char *name) {
        if (m->n < ELEMENTSOF(m->names))
                m->names[m->n++] = name;
}

static void need_kernel(lfs_missing *m, const char *name) {
        if (!lfs_probe_kernel(name))
                lfs_missing_add(m, name);
}

/* An executable of that name in PATH. */
static bool have_tool(const char *name) {
        const char *path = getenv("PATH");
        for (const char *p = path && *path ? path : "/usr/bin:/bin"; *p;) {
                size_t n = strcspn(p, ":");
                _cleanup_free_ char *candidate = xasprintf("%.*s/%s", (int)n, p, name);
                if (access(candidate, X_OK) == 0)
                        return true;
                p += n + (p[n] == ':');
        }
        return false;
}

static void need_tool(lfs_missing *m, const char *tool, const char *name) {
        if (!have_tool(tool))
                lfs_missing_add(m, name);
}

/* A unix socket that accepts a connection. */
static bool socket_answers(const char *path) {
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        if (!path || strlen(path) >= sizeof(addr.sun_path))
                return false;
        memcpy(addr.sun_path, path, strlen(path) + 1);
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        return fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof(addr)) == 0;
}

static void probe_docker(lfs_missing *m) {
        const char *host = getenv("DOCKER_HOST");
        const char *path = host && !strncmp(host, "unix://", 7) ? host + 7 : "/var/run/docker.sock";
        if (!socket_answers(path))
                lfs_missing_add(m, "socket:docker");
}

static void probe_podman(lfs_missing *m) {
        const char *runtime_dir = getenv("XDG_RUNTIME_DIR");
        _cleanup_free_ char *user = runtime_dir ? xasprintf("%s/podman/podman.sock", runtime_dir) : NULL;
        if (!socket_answers("/run/podman/podman.sock") && !socket_answers(user))
                lfs_missing_add(m, "socket:podman");
}

static void probe_firecracker(lfs_missing *m) {
        need_tool(m, "firecracker", "tool:firecracker");
        need_kernel(m, "kernel:kvm");
}

static void probe_qemu(lfs_missing *m) {
        need_tool(m, "qemu-system-x86_64", "tool:qemu-system-x86_64");
}

static void probe_lima(lfs_missing *m) {
        need_tool(m, "limactl", "tool:limactl");
}

/* A Linux kernel is never a macOS host; WSL kernels say so in their release. */
static void probe_mac(lfs_missing *m) {
        lfs_missing_add(m, "host:macos");
}

static void probe_wsl(lfs_missing *m) {
        FILE *f = fopen("/proc/sys/kernel/osrelease", "re");
        char release[128] = "";
        if (f) {
                if (!fgets(release, sizeof(release), f))
                        release[0] = 0;
                fclose(f);
        }
        if (!strstr(release, "microsoft") && !strstr(release, "WSL"))
                lfs_missing_add(m, "host:wsl");
}

const lfs_platform lfs_platforms[] = {
        { "linux", LFS_FAMILY_LINUX, &lfs_runtime_native, NULL, &lfs_runtime_namespaces },
        { "docker", LFS_FAMILY_CONTAINER, &lfs_runtime_docker_unbuilt, probe_docker, NULL },
        { "podman", LFS_FAMILY_CONTAINER, &lfs_runtime_docker_unbuilt, probe_podman, NULL },
        { "firecracker", LFS_FAMILY_VM, &lfs_runtime_vm_unbuilt, probe_firecracker, NULL },
        { "qemu", LFS_FAMILY_VM, &lfs_runtime_vm_unbuilt, probe_qemu, NULL },
        { "lima", LFS_FAMILY_VM, &lfs_runtime_vm_unbuilt, probe_lima, NULL },
        { "mac", LFS_FAMILY_VM, &lfs_runtime_vm_unbuilt, probe_mac, NULL },
        { "wsl", LFS_FAMILY_VM, &lfs_runtime_vm_unbuilt, probe_wsl, NULL },
};
const size_t lfs_n_platforms = ELEMENTSOF(lfs_platforms);

const char *lfs_platform_names(void) {
        return "linux, docker, podman, firecracker, qemu, lima, mac, wsl";
}

const lfs_platform *lfs_platform_find(const char *id) {
        for (size_t i = 0; id && i < lfs_n_platforms; i++)
                if (!strcmp(lfs_platforms[i].id, id))
                        return &lfs_platforms[i];
        return NULL;
}

int lfs_placement(const char **ret, lfs_error **err) {
        const char *v = getenv("LAYERFS_PLACEMENT");
        if (!v || !*v || !strcmp(v, "host")) {
                *ret = "host";
                return 0;
        }
        const lfs_platform *p = lfs_platform_find(v);
        if (!p || p->family != LFS_FAMILY_VM)
                return lfs_fail(
                        err, LFS_INVALID_INPUT, 0,
                        "LAYERFS_PLACEMENT='%s' is not a placement; give host, firecracker, qemu, lima, "
                        "mac or wsl",
                        v);
        *ret = p->id;
        return 0;
}

bool lfs_platform_allowed(const lfs_platform *p, const char *placement) {
        if (p->family == LFS_FAMILY_CONTAINER)
                return true;
        if (!placement || !strcmp(placement, "host"))
                return p->family == LFS_FAMILY_LINUX;
        return !strcmp(p->id, placement);
}

char *lfs_allowed_names(const char *placement) {
        char *out = xstrdup("");
        for (size_t i = 0; i < lfs_n_platforms; i++)
                if (lfs_platform_allowed(&lfs_platforms[i], placement)) {
                        char *next = xasprintf("%s%s%s", out, *out ? ", " : "", lfs_platforms[i].id);
                        free(out);
                        out = next;
                }
        return out;
}

int lfs_default_runtime(const char **ret, lfs_error **err) {
        static const char *const runtimes[] = { "native", "namespaces", "docker" };
        const char *v = getenv("LAYERFS_SANDBOX");
        if (!v) {
                *ret = runtimes[0];
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(runtimes); i++)
                if (!strcmp(v, runtimes[i])) {
                        *ret = runtimes[i];
                        return 0;
                }
        return lfs_fail(err, LFS_INVALID_INPUT, 0,
                        "LAYERFS_SANDBOX='%s' is not a runtime; give docker, native or namespaces", v);
}

int lfs_platform_new_runtime(const lfs_platform *p, const lfs_runtime **ret,
                             const lfs_runtime **ret_fallback, lfs_error **err) {
        *ret_fallback = NULL;
        if (!p->preferred) {
                *ret = p->runtime;
                return 0;
        }
        const char *v = getenv("LAYERFS_RUNTIME"), *home_default = NULL;
        if (!v && getenv("LAYERFS_SANDBOX")) {
                int r = lfs_default_runtime(&home_default, err);
                if (r < 0)
                        return r;
                /* docker names a platform; a linux Sandbox then chooses as if unset. */
                if (lfs_platform_runtime(p, home_default))
                        v = home_default;
        }
        if (!v) {
                *ret = p->preferred;
                *ret_fallback = p->runtime;
                return 0;
        }
        const lfs_runtime *rt = lfs_platform_runtime(p, v);
        if (!rt)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "LAYERFS_RUNTIME='%s' is not a runtime of the %s platform; give %s or %s", v,
                                p->id, p->runtime->name, p->preferred->name);
        *ret = rt;
        return 0;
}

const lfs_runtime *lfs_platform_runtime(const lfs_platform *p, const char *name) {
        if (!name || !strcmp(name, p->runtime->name))
                return p->runtime;
        if (p->preferred && !strcmp(name, p->preferred->name))
                return p->preferred;
        return NULL;
}

const lfs_runtime *lfs_runtime_find(const char *name) {
        for (size_t i = 0; name && i < lfs_n_platforms; i++) {
                const lfs_runtime *rt = lfs_platform_runtime(&lfs_platforms[i], name);
                if (rt)
                        return rt;
        }
        return NULL;
}

void lfs_platform_missing(const lfs_platform *p, lfs_missing *missing) {
        if (p->probe)
                p->probe(missing);
        p->runtime->probe(p, missing);
}

/* One row of runtime.status: id, allowed, and what m names as missing (joining s->missing
 * when allowed). */
static void status_row(lfs_runtime_info *s, lfs_platform_status *ps, const char *id, bool allowed,
                       const lfs_missing *m) {
        ps->id = xstrdup(id);
        ps->allowed = allowed;
        ps->ready = allowed && m->n == 0;
        ps->missing = xcalloc(m->n ? m->n : 1, sizeof(char *));
        for (size_t k = 0; k < m->n; k++) {
                ps->missing[ps->n_missing++] = xstrdup(m->names[k]);
                if (allowed)
                        lfs_runtime_add_missing(s, m->names[k]);
        }
}

void lfs_platforms_status(lfs_runtime_info *s) {
        s->platforms = xcalloc(lfs_n_platforms, sizeof(*s->platforms));
        s->n_platforms = lfs_n_platforms;
        for (size_t i = 0; i < lfs_n_platforms; i++) {
                const lfs_platform *p = &lfs_platforms[i];
                lfs_missing m = { 0 };
                lfs_platform_missing(p, &m);
                status_row(s, &s->platforms[i], p->id, lfs_platform_allowed(p, s->placement), &m);
        }
        /* The host's own platform's runtimes, and which one a new Sandbox of it gets. */
        const lfs_platform *linux_p = &lfs_platforms[0];
        const lfs_runtime *const runtimes[] = { linux_p->runtime, linux_p->preferred };
        bool allowed = lfs_platform_allowed(linux_p, s->placement);
        s->runtimes = xcalloc(ELEMENTSOF(runtimes), sizeof(*s->runtimes));
        lfs_missing preferred_missing = { 0 };
        for (size_t i = 0; i < ELEMENTSOF(runtimes); i++) {
                lfs_missing m = { 0 };
                runtimes[i]->probe(linux_p, &m);
                status_row(s, &s->runtimes[s->n_runtimes++], runtimes[i]->name, allowed, &m);
                if (runtimes[i] == linux_p->preferred)
                        preferred_missing = m;
        }
        const lfs_runtime *chosen = NULL, *fallback = NULL;
        const char *sandbox = getenv("LAYERFS_SANDBOX");
        if (sandbox && !lfs_platform_runtime(linux_p, sandbox) && strcmp(sandbox, "docker")) {
                s->default_runtime = xstrdup(sandbox); /* as given: a create refuses it */
                return;
        }
        if (lfs_platform_new_runtime(linux_p, &chosen, &fallback, NULL) < 0) {
                s->default_runtime = xstrdup(getenv("LAYERFS_RUNTIME"));
                return;
        }
        if (sandbox && !strcmp(sandbox, "docker")) {
                s->default_runtime = xstrdup(sandbox);
                return;
        }
        if (fallback && preferred_missing.n) {
                _cleanup_free_ char *names = xstrdup("");
                for (size_t k = 0; k < preferred_missing.n; k++) {
                        char *next = xasprintf("%s%s%s", names, k ? " " : "", preferred_missing.names[k]);
                        free(names);
                        names = next;
                }
                chosen = fallback;
                s->default_why = xasprintf("%s is not ready here: %s", linux_p->preferred->name, names);
        }
        s->default_runtime = xstrdup(chosen->name);
}

const char *lfs_record_platform(const char *platform, const char *runtime, const char *placement) {
        if (platform && *platform)
                return platform;
        if (runtime && !strcmp(runtime, "docker"))
                return "docker";
        if (runtime && !strcmp(runtime, "vm") && strcmp(placement, "host"))
                return placement;
        return "linux";
}

int lfs_platform_choose(const char *home, const char *requested, const lfs_platform **ret, lfs_error **err) {
        const char *placement = "host";
        int r = lfs_placement(&placement, err);
        if (r < 0)
                return r;
        const char *name = requested;
        if (!name) {
                const char *runtime = "native";
                r = lfs_default_runtime(&runtime, err);
                if (r < 0)
                        return r;
                name = !strcmp(runtime, "docker") ? "docker" : "linux";
        }
        const lfs_platform *p = lfs_platform_find(name);
        if (!p)
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "unknown platform '%s'; the platforms are %s",
                                name, lfs_platform_names());
        if (!lfs_platform_allowed(p, placement)) {
                _cleanup_free_ char *allowed = lfs_allowed_names(placement);
                return lfs_fail(
                        err, LFS_UNSUPPORTED, 0,
                        "platform '%s' is not allowed for home %s (placement %s): one kernel opens a "
                        "Store, so it allows %s",
                        p->id, home, placement, allowed);
        }
        lfs_missing missing = { 0 };
        lfs_platform_missing(p, &missing);
        if (missing.n) {
                _cleanup_free_ char *names = xstrdup("");
                for (size_t i = 0; i < missing.n; i++) {
                        char *next = xasprintf("%s%s%s", names, i ? ", " : "", missing.names[i]);
                        free(names);
                        names = next;
                }
                return lfs_fail(
                        err, LFS_UNSUPPORTED, 0,
                        "platform '%s' is not ready on this host: missing %s; 'layerfs runtime status' "
                        "says what each needs",
                        p->id, names);
        }
        *ret = p;
        return 0;
}
