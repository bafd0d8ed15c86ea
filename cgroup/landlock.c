/* SPDX-License-Identifier: MIT */
/* Landlock's scoping of abstract unix sockets (landlock.h). */
#include <errno.h>
#include <linux/landlock.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "landlock.h"

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

/* The ruleset's attributes as of ABI 6: Debian 12's headers stop before "scoped". */
struct scoped_ruleset_attr {
        uint64_t handled_access_fs;
        uint64_t handled_access_net;
        uint64_t scoped;
};
#define SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define ABI_WITH_SCOPES 6

bool lfs_landlock_scope_available(void) {
        long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
        return abi >= ABI_WITH_SCOPES;
}

int lfs_landlock_scope_abstract_unix(void) {
        struct scoped_ruleset_attr attr = { .scoped = SCOPE_ABSTRACT_UNIX_SOCKET };
        long fd = syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
        if (fd < 0)
                return errno == ENOSYS || errno == E2BIG || errno == EINVAL ? -EOPNOTSUPP : -errno;
        int r = syscall(SYS_landlock_restrict_self, (int)fd, 0) < 0 ? -errno : 0;
        close((int)fd);
        return r;
}
