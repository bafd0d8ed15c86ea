/* SPDX-License-Identifier: MIT */
/*
 * One pair of watcher programs per cgroup root, shared by every daemon below it
 * (bpf/README.md, "One pair per cgroup root").
 *
 * Nothing is pinned: each daemon holds fds of the two links and of the map of rings, so
 * the kernel keeps the programs attached while one daemon holds them and detaches and
 * frees them all when the last one closes them, by its close or by its death (SIGKILL
 * included). The next daemon finds the set through an xattr of the root's directory that
 * names the three objects by id (ids grow, not reused within a boot); it takes them by id
 * if they still exist and are what the xattr says, and otherwise loads a new set and
 * rewrites the xattr. Finding, loading and publishing happen under a flock of the root's
 * directory. Each daemon's ring is keyed by its Sandbox's cgroup id; the daemon takes it
 * out at its close, and the reclaim of a Sandbox (whose daemon is gone) takes it out too.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "numbers.h"
#include "util.h"
#include "watcher.h"
#include "watcher_set.h"

/* trusted: only a process with CAP_SYS_ADMIN reads or writes it, as only one loads BPF.
 * The number is the set's layout: a set of another layout is never joined. */
#define SET_XATTR "trusted.layerfs.watcher.1"

int lfs_bpf(int cmd, union bpf_attr *attr) {
        int r = (int)syscall(SYS_bpf, cmd, attr, sizeof(*attr));
        return r < 0 ? -errno : r;
}

static int info_of(int fd, void *info, uint32_t len) {
        union bpf_attr attr = { .info = {
                                        .bpf_fd = (uint32_t)fd, .info_len = len, .info = (uintptr_t)info } };
        return lfs_bpf(BPF_OBJ_GET_INFO_BY_FD, &attr);
}

/* The raw tracepoint link id, if it is attached to tracepoint: its fd. */
static int link_by_id(uint32_t id, const char *tracepoint) {
        union bpf_attr attr = { .link_id = id };
        _cleanup_close_ int fd = lfs_bpf(BPF_LINK_GET_FD_BY_ID, &attr);
        if (fd < 0)
                return fd;
        char name[64] = "";
        struct bpf_link_info info = { .raw_tracepoint = { .tp_name = (uintptr_t)name,
                                                          .tp_name_len = sizeof(name) } };
        int r = info_of(fd, &info, sizeof(info));
        if (r < 0)
                return r;
        if (info.type != BPF_LINK_TYPE_RAW_TRACEPOINT || strcmp(name, tracepoint))
                return -ENOENT;
        return TAKE_FD(fd);
}

/* The map id, if it is a map of rings as watcher.bpf.c makes it: its fd. */
static int rings_by_id(uint32_t id) {
        union bpf_attr attr = { .map_id = id };
        _cleanup_close_ int fd = lfs_bpf(BPF_MAP_GET_FD_BY_ID, &attr);
        if (fd < 0)
                return fd;
        struct bpf_map_info info = { 0 };
        int r = info_of(fd, &info, sizeof(info));
        if (r < 0)
                return r;
        if (info.type != BPF_MAP_TYPE_HASH_OF_MAPS || info.key_size != sizeof(uint64_t) ||
            strcmp(info.name, WATCHER_RINGS_NAME))
                return -ENOENT;
        return TAKE_FD(fd);
}

_Static_assert(LFS_MAX_SANDBOXES_PER_ROOT == WATCH_MAX_SANDBOXES,
               "numbers.h bounds the test's size by the map's");

uint32_t lfs_watcher_max_sandboxes(void) {
        /* sandbox create and the daemon's start refused a bad value (InvalidInput); one
         * set in between goes as unset, the production bound. */
        uint64_t n;
        return lfs_test_max_sandboxes_per_root(&n, NULL) < 0 ? WATCH_MAX_SANDBOXES : (uint32_t)n;
}

int lfs_watcher_root_lock(const char *root) {
        _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        while (flock(fd, LOCK_EX) < 0)
                if (errno != EINTR)
                        return -errno;
        return TAKE_FD(fd);
}

void lfs_watcher_set_close(watcher_set *set) {
        int *fds[] = { &set->fork_link, &set->exit_link, &set->rings };
        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (*fds[i] >= 0) {
                        close(*fds[i]);
                        *fds[i] = -1;
                }
}

int lfs_watcher_set_find(int root_fd, watcher_set *ret) {
        char ids[64];
        ssize_t n = fgetxattr(root_fd, SET_XATTR, ids, sizeof(ids) - 1);
        if (n < 0)
                return errno == ENODATA ? -ENOENT : -errno;
        ids[n] = 0;
        unsigned fork_id, exit_id, rings_id;
        if (sscanf(ids, "%u %u %u", &fork_id, &exit_id, &rings_id) != 3)
                return -ENOENT;
        watcher_set set = { .fork_link = link_by_id(fork_id, "sched_process_fork"),
                            .exit_link = link_by_id(exit_id, "sched_process_exit"),
                            .rings = rings_by_id(rings_id) };
        if (set.fork_link < 0 || set.exit_link < 0 || set.rings < 0) {
                lfs_watcher_set_close(&set);
                return -ENOENT; /* its last holder has gone: the kernel freed it */
        }
        *ret = set;
        return 0;
}

int lfs_watcher_set_publish(int root_fd, const watcher_set *set) {
        struct bpf_link_info fork_info = { 0 }, exit_info = { 0 };
        struct bpf_map_info rings_info = { 0 };
        int r;
        if ((r = info_of(set->fork_link, &fork_info, sizeof(fork_info))) < 0 ||
            (r = info_of(set->exit_link, &exit_info, sizeof(exit_info))) < 0 ||
            (r = info_of(set->rings, &rings_info, sizeof(rings_info))) < 0)
                return r;
        char ids[64];
        int len = snprintf(ids, sizeof(ids), "%u %u %u", fork_info.id, exit_info.id, rings_info.id);
        return fsetxattr(root_fd, SET_XATTR, ids, (size_t)len, 0) < 0 ? -errno : 0;
}

int lfs_watcher_set_add(const watcher_set *set, uint64_t sandbox, int *ret_ring) {
        union bpf_attr attr = { .map_type = BPF_MAP_TYPE_RINGBUF, .max_entries = WATCH_RING_BYTES };
        snprintf(attr.map_name, sizeof(attr.map_name), "sandbox_ring");
        _cleanup_close_ int ring = lfs_bpf(BPF_MAP_CREATE, &attr);
        if (ring < 0)
                return ring;
        uint32_t value = (uint32_t)ring;
        attr = (union bpf_attr){ .map_fd = (uint32_t)set->rings,
                                 .key = (uintptr_t)&sandbox,
                                 .value = (uintptr_t)&value,
                                 .flags = BPF_ANY };
        int r = lfs_bpf(BPF_MAP_UPDATE_ELEM, &attr);
        if (r < 0)
                return r;
        *ret_ring = TAKE_FD(ring);
        return 0;
}

int lfs_watcher_set_remove(const watcher_set *set, uint64_t sandbox) {
        union bpf_attr attr = { .map_fd = (uint32_t)set->rings, .key = (uintptr_t)&sandbox };
        int r = lfs_bpf(BPF_MAP_DELETE_ELEM, &attr);
        return r == -ENOENT ? 0 : r;
}

int lfs_watcher_forget(const char *root, uint64_t sandbox) {
        _cleanup_close_ int root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return errno == ENOENT ? 0 : -errno;
        watcher_set set = WATCHER_SET_NONE;
        int r = lfs_watcher_set_find(root_fd, &set);
        if (r < 0)
                return r == -ENOENT ? 0 : r;
        r = lfs_watcher_set_remove(&set, sandbox);
        lfs_watcher_set_close(&set);
        return r;
}
