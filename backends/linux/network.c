/* SPDX-License-Identifier: MIT */
/* A private Sandbox's veth pair (network.h), over rtnetlink.h. */
#include <fcntl.h>

#include "network.h"
#include "rtnetlink.h"
#include "util.h"

/* The Sandbox's end, in its own net namespace. */
#define PEER_NAME "eth0"

/* Writes value into /proc/sys/net/<family>/conf/<link>/<name> (the caller's net
 * namespace's). */
static int link_sysctl(const char *family, const char *link, const char *name, const char *value) {
        _cleanup_free_ char *path = xasprintf("/proc/sys/net/%s/conf/%s/%s", family, link, name);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        size_t len = strlen(value);
        ssize_t k = write(fd, value, len);
        return k == (ssize_t)len ? 0 : k < 0 ? -errno : -EIO;
}

/* The host's end: its address; nothing that arrives on it is forwarded (whatever the
 * host's ip_forward) and no source but its /30's is taken from it; no IPv6 (its
 * link-local address would be one more way to the host); then up. */
static int set_up_host_end(lfs_rtnl *nl, const char *link, uint32_t address, const char **ret_step) {
        int index = 0, r;
        if ((r = lfs_rtnl_link_index(nl, link, &index)) < 0)
                *ret_step = "finding the host's end";
        else if ((r = link_sysctl("ipv4", link, "forwarding", "0")) < 0)
                *ret_step = "turning forwarding off on the host's end";
        else if ((r = link_sysctl("ipv4", link, "rp_filter", "1")) < 0)
                *ret_step = "the strict reverse-path filter on the host's end";
        else if ((r = link_sysctl("ipv6", link, "disable_ipv6", "1")) < 0 && r != -ENOENT)
                *ret_step = "turning IPv6 off on the host's end";
        else if ((r = lfs_rtnl_addr_add(nl, index, address, LFS_NETWORK_PREFIX)) < 0)
                *ret_step = "the host's end's address";
        else if ((r = lfs_rtnl_link_up(nl, link)) < 0)
                *ret_step = "setting the host's end up";
        return r;
}

/* The Sandbox's end, through a socket in its net namespace: its address, up, and the
 * default route through the host's end. */
static int set_up_peer(lfs_rtnl *in, uint32_t address, uint32_t gateway, const char **ret_step) {
        int index = 0, r;
        if ((r = lfs_rtnl_link_index(in, PEER_NAME, &index)) < 0)
                *ret_step = "finding the Sandbox's " PEER_NAME;
        else if ((r = lfs_rtnl_addr_add(in, index, address, LFS_NETWORK_PREFIX)) < 0)
                *ret_step = "the Sandbox's address";
        else if ((r = lfs_rtnl_link_up(in, PEER_NAME)) < 0)
                *ret_step = "setting the Sandbox's " PEER_NAME " up";
        else if ((r = lfs_rtnl_route_default(in, index, gateway)) < 0)
                *ret_step = "the Sandbox's default route";
        return r;
}

int lfs_network_connect(const lfs_sandbox_ref *sb, int init_pidfd, lfs_error **err) {
        if (sb->network != LFS_NETWORK_PRIVATE)
                return 0;
        char link[LFS_NETWORK_LINK_SIZE], host_text[16], own_text[16];
        lfs_network_link_name(sb->instance, link);
        uint32_t host = sb->net_base + 1, own = sb->net_base + 2;
        lfs_rtnl *nl = NULL, *in = NULL;
        _cleanup_close_ int netns_fd = -1;
        const char *step = "a netlink socket on the host";
        int r = lfs_rtnl_open(&nl);
        if (r == 0 && (r = lfs_rtnl_open_in(init_pidfd, &in, &netns_fd)) < 0)
                step = "a netlink socket in the Sandbox's net namespace";
        if (r == 0 && (r = lfs_rtnl_veth_add(nl, link, PEER_NAME, netns_fd)) < 0)
                step = r == -EEXIST ? "the veth pair (a link of that name is there already)"
                                    : "the veth pair";
        if (r == 0)
                r = set_up_host_end(nl, link, host, &step);
        if (r == 0)
                r = set_up_peer(in, own, host, &step);
        lfs_rtnl_close(nl);
        lfs_rtnl_close(in);
        if (r < 0)
                return lfs_fail(err, LFS_FAILED, -r,
                                "cannot give sandbox %d its private network (host end %s with %s/%d, the "
                                "Sandbox's %s with %s/%d): %s failed: %s",
                                sb->number, link, lfs_ipv4_text(host, host_text), LFS_NETWORK_PREFIX,
                                PEER_NAME, lfs_ipv4_text(own, own_text), LFS_NETWORK_PREFIX, step,
                                strerror(-r));
        return 0;
}

int lfs_network_remove(const lfs_sandbox_ref *sb, char **ret_why) {
        if (sb->network != LFS_NETWORK_PRIVATE)
                return 0;
        char link[LFS_NETWORK_LINK_SIZE];
        lfs_network_link_name(sb->instance, link);
        lfs_rtnl *nl = NULL;
        int r = lfs_rtnl_open(&nl);
        if (r == 0)
                r = lfs_rtnl_link_del(nl, link);
        lfs_rtnl_close(nl);
        if (r < 0 && ret_why)
                *ret_why = xasprintf("cannot remove the link %s (sandbox %d's private network): %s", link,
                                     sb->number, strerror(-r));
        return r;
}
