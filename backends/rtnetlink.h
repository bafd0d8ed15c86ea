/* SPDX-License-Identifier: MIT */
/*
 * The few rtnetlink requests LayerFS makes, over libmnl: a link up, a veth pair, an IPv4
 * address, a default route, a link's end, the host's IPv4 addresses. Every one of them
 * goes through one socket of a net namespace (lfs_rtnl_open: the caller's; lfs_rtnl_open_in:
 * a process's) and waits for the kernel's answer. The Sandbox init brings its lo up with
 * them (init/sandbox_init.c), the namespaces runtime wires a private network
 * (linux/network.c), the records check the addresses they hand out against the host's.
 * Functions return 0 or a negative errno (the kernel's answer).
 */
#ifndef LFS_RTNETLINK_H
#define LFS_RTNETLINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct lfs_rtnl lfs_rtnl;

/* A socket in the caller's net namespace. */
int lfs_rtnl_open(lfs_rtnl **ret);
/* A socket in the net namespace of pidfd's process, and (ret_netns_fd, may be NULL) an fd of
 * that namespace: a thread of its own joins it, so the caller's never does. */
int lfs_rtnl_open_in(int pidfd, lfs_rtnl **ret, int *ret_netns_fd);
void lfs_rtnl_close(lfs_rtnl *nl);

/* Sets the link name up. */
int lfs_rtnl_link_up(lfs_rtnl *nl, const char *name);
/* The index of the link name: -ENODEV when there is none. */
int lfs_rtnl_link_index(lfs_rtnl *nl, const char *name, int *ret);
/* A veth pair: name here, peer in the net namespace peer_netns_fd under peer_name.
 * -EEXIST when a link name is there already (nothing is made). */
int lfs_rtnl_veth_add(lfs_rtnl *nl, const char *name, const char *peer_name, int peer_netns_fd);
/* Removes the link name (a veth's peer goes with it); 0 also when there is none. */
int lfs_rtnl_link_del(lfs_rtnl *nl, const char *name);
/* Adds address/prefix (IPv4, host order) on the link index. */
int lfs_rtnl_addr_add(lfs_rtnl *nl, int index, uint32_t address, unsigned prefix);
/* The default IPv4 route through gateway (host order) on the link index. */
int lfs_rtnl_route_default(lfs_rtnl *nl, int index, uint32_t gateway);
/* Every IPv4 address of the namespace's links (host order), *ret_n of them; free *ret. */
int lfs_rtnl_ipv4_addresses(lfs_rtnl *nl, uint32_t **ret, size_t *ret_n);

/* The dotted text of address (host order) into buf (16 bytes at least). */
const char *lfs_ipv4_text(uint32_t address, char *buf);

#endif
