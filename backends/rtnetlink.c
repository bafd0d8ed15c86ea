/* SPDX-License-Identifier: MIT */
/* rtnetlink requests over libmnl (rtnetlink.h). */
#include <arpa/inet.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>

#include "rtnetlink.h"
#include "util.h"

/* Room for the largest message a dump sends (the kernel's are up to 32 KiB). */
#define RTNL_BUFFER 32768

struct lfs_rtnl {
        struct mnl_socket *sock;
        unsigned seq;
        char buf[RTNL_BUFFER];
};

int lfs_rtnl_open(lfs_rtnl **ret) {
        lfs_rtnl *nl = calloc(1, sizeof(*nl));
        if (!nl)
                return -ENOMEM;
        nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!nl->sock || mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
                int e = errno;
                lfs_rtnl_close(nl);
                return -e;
        }
        *ret = nl;
        return 0;
}

void lfs_rtnl_close(lfs_rtnl *nl) {
        if (!nl)
                return;
        if (nl->sock)
                mnl_socket_close(nl->sock);
        free(nl);
}

typedef struct open_in {
        int pidfd;
        lfs_rtnl *nl;
        int netns_fd;
        int r;
} open_in;

/* A thread of its own: it joins the namespace and ends there, so no thread of the
 * caller's is ever left in a Sandbox's namespace. */
static void *open_in_thread(void *arg) {
        open_in *o = arg;
        if (setns(o->pidfd, CLONE_NEWNET) < 0) {
                o->r = -errno;
                return NULL;
        }
        o->netns_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (o->netns_fd < 0) {
                o->r = -errno;
                return NULL;
        }
        o->r = lfs_rtnl_open(&o->nl);
        return NULL;
}

int lfs_rtnl_open_in(int pidfd, lfs_rtnl **ret, int *ret_netns_fd) {
        open_in o = { .pidfd = pidfd, .netns_fd = -1 };
        pthread_t t;
        int r = -pthread_create(&t, NULL, open_in_thread, &o);
        if (r < 0)
                return r;
        pthread_join(t, NULL);
        if (o.r < 0) {
                if (o.netns_fd >= 0)
                        close(o.netns_fd);
                return o.r;
        }
        *ret = o.nl;
        if (ret_netns_fd)
                *ret_netns_fd = o.netns_fd;
        else
                close(o.netns_fd);
        return 0;
}

/* A request of type with flags in nl's buffer. */
static struct nlmsghdr *request(lfs_rtnl *nl, uint16_t type, uint16_t flags) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(nl->buf);
        nlh->nlmsg_type = type;
        /* A dump ends with NLMSG_DONE, every other request with its ack. */
        nlh->nlmsg_flags = NLM_F_REQUEST | flags | ((flags & NLM_F_DUMP) == NLM_F_DUMP ? 0 : NLM_F_ACK);
        nlh->nlmsg_seq = ++nl->seq;
        return nlh;
}

/* Sends the request and reads the answers until its ack (or the end of its dump): each
 * message goes to cb. 0, or the kernel's negative errno. */
static int talk(lfs_rtnl *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data) {
        unsigned seq = nlh->nlmsg_seq, portid = mnl_socket_get_portid(nl->sock);
        if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        for (;;) {
                ssize_t k = mnl_socket_recvfrom(nl->sock, nl->buf, sizeof(nl->buf));
                if (k < 0)
                        return -errno;
                int r = mnl_cb_run(nl->buf, (size_t)k, seq, portid, cb, data);
                if (r < 0)
                        return -errno;
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

static struct nlmsghdr *link_request(lfs_rtnl *nl, uint16_t type, uint16_t flags, const char *name) {
        struct nlmsghdr *nlh = request(nl, type, flags);
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
        ifm->ifi_family = AF_UNSPEC;
        if (name)
                mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        return nlh;
}

int lfs_rtnl_link_up(lfs_rtnl *nl, const char *name) {
        struct nlmsghdr *nlh = link_request(nl, RTM_NEWLINK, 0, name);
        struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
        ifm->ifi_change = IFF_UP;
        ifm->ifi_flags = IFF_UP;
        return talk(nl, nlh, NULL, NULL);
}

static int index_cb(const struct nlmsghdr *nlh, void *data) {
        if (nlh->nlmsg_type == RTM_NEWLINK)
                *(int *)data = ((const struct ifinfomsg *)mnl_nlmsg_get_payload(nlh))->ifi_index;
        return MNL_CB_OK;
}

int lfs_rtnl_link_index(lfs_rtnl *nl, const char *name, int *ret) {
        int index = 0;
        struct nlmsghdr *nlh = link_request(nl, RTM_GETLINK, 0, name);
        int r = talk(nl, nlh, index_cb, &index);
        if (r < 0)
                return r;
        if (index <= 0)
                return -ENODEV;
        *ret = index;
        return 0;
}

int lfs_rtnl_veth_add(lfs_rtnl *nl, const char *name, const char *peer_name, int peer_netns_fd) {
        struct nlmsghdr *nlh = link_request(nl, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, name);
        struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
        struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        /* The peer: an ifinfomsg of its own, then its attributes. */
        struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
        struct ifinfomsg *pm = mnl_nlmsg_put_extra_header(nlh, sizeof(*pm));
        pm->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, peer_name);
        mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_netns_fd);
        mnl_attr_nest_end(nlh, peer);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, info);
        return talk(nl, nlh, NULL, NULL);
}

int lfs_rtnl_link_del(lfs_rtnl *nl, const char *name) {
        int r = talk(nl, link_request(nl, RTM_DELLINK, 0, name), NULL, NULL);
        return r == -ENODEV ? 0 : r;
}

int lfs_rtnl_addr_add(lfs_rtnl *nl, int index, uint32_t address, unsigned prefix) {
        struct nlmsghdr *nlh = request(nl, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = (unsigned char)prefix;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (unsigned)index;
        uint32_t net = htonl(address);
        mnl_attr_put_u32(nlh, IFA_LOCAL, net);
        mnl_attr_put_u32(nlh, IFA_ADDRESS, net);
        return talk(nl, nlh, NULL, NULL);
}

int lfs_rtnl_route_default(lfs_rtnl *nl, int index, uint32_t gateway) {
        struct nlmsghdr *nlh = request(nl, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        rtm->rtm_family = AF_INET;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_BOOT;
        rtm->rtm_scope = RT_SCOPE_UNIVERSE;
        rtm->rtm_type = RTN_UNICAST;
        mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gateway));
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)index);
        return talk(nl, nlh, NULL, NULL);
}

typedef struct addresses {
        uint32_t *v;
        size_t n, cap;
} addresses;

static int address_attr_cb(const struct nlattr *attr, void *data) {
        if (mnl_attr_get_type(attr) == IFA_LOCAL && mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
                *(const struct nlattr **)data = attr;
        return MNL_CB_OK;
}

static int address_cb(const struct nlmsghdr *nlh, void *data) {
        addresses *a = data;
        const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
        if (nlh->nlmsg_type != RTM_NEWADDR || ifa->ifa_family != AF_INET)
                return MNL_CB_OK;
        const struct nlattr *local = NULL;
        mnl_attr_parse(nlh, sizeof(*ifa), address_attr_cb, &local);
        if (local) {
                GROW(a->v, a->cap, a->n + 1);
                a->v[a->n++] = ntohl(mnl_attr_get_u32(local));
        }
        return MNL_CB_OK;
}

int lfs_rtnl_ipv4_addresses(lfs_rtnl *nl, uint32_t **ret, size_t *ret_n) {
        struct nlmsghdr *nlh = request(nl, RTM_GETADDR, NLM_F_DUMP);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        addresses a = { 0 };
        int r = talk(nl, nlh, address_cb, &a);
        if (r < 0) {
                free(a.v);
                return r;
        }
        *ret = a.v;
        *ret_n = a.n;
        return 0;
}

const char *lfs_ipv4_text(uint32_t address, char *buf) {
        snprintf(buf, 16, "%u.%u.%u.%u", address >> 24, (address >> 16) & 255, (address >> 8) & 255,
                 address & 255);
        return buf;
}
