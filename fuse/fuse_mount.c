/* SPDX-License-Identifier: MIT */
/* The FUSE mount's setup shared by every transport (fuse_mount.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fuse_mount.h"
#include "util.h"

int lfs_fuse_mount_fd(const char *mountpoint, const char *fsname) {
        _cleanup_close_ int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        char opts[256];
        int n = snprintf(opts, sizeof(opts), "fd=%d,rootmode=%o,user_id=%u,group_id=%u," FUSE_MOUNT_OPTIONS,
                         fd, (unsigned)S_IFDIR, (unsigned)getuid(), (unsigned)getgid());
        if (n < 0 || (size_t)n >= sizeof(opts))
                return -ENAMETOOLONG;
        if (mount(fsname, mountpoint, "fuse." FUSE_MOUNT_SUBTYPE, MS_NOSUID | MS_NODEV, opts) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* A FUSE mount's readahead is 128 KiB (INIT cannot raise it), so a sequential read is
 * a READ round trip per 128 KiB; the knob of its backing device allows more (1 GiB cold
 * read: ~700 -> ~570 ms here with 2 MiB). INIT sets the value, so this runs once the
 * mount answers. Best effort: without sysfs nothing changes. */
static void widen_readahead(dev_t dev) {
        char knob[96];
        snprintf(knob, sizeof(knob), "/sys/class/bdi/%u:%u/read_ahead_kb", major(dev), minor(dev));
        _cleanup_close_ int fd = open(knob, O_WRONLY | O_CLOEXEC);
        if (fd >= 0)
                (void)!write(fd, "2048", 4);
}

int lfs_fuse_mount_answered(const char *mountpoint, dev_t *ret_dev) {
        struct stat st;
        if (stat(mountpoint, &st) < 0)
                return -errno;
        widen_readahead(st.st_dev);
        *ret_dev = st.st_dev;
        return 0;
}
