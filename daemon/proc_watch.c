/* SPDX-License-Identifier: MIT */
/*
 * The third watcher tier, for hosts without BPF: the netlink proc connector (libmnl).
 * The kernel reports every fork and every thread's exit on the host; the daemon keeps the
 * processes of its Sandbox: those it starts, and the children of those (or any new
 * process whose /proc/PID/cgroup is in the Sandbox's subtree). It counts each process's
 * threads, so that a process is reported once, when its last thread ends, like the BPF
 * tier does.
 */
#include <libmnl/libmnl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include "cgroup.h"
#include "daemon.h"
#include "log.h"
#include "codec.h"

typedef struct tracked {
        pid_t tgid;
        pid_t parent; /* at its fork: the exit event may not say (see on_process_exit) */
        unsigned threads;
        bool own; /* started by the daemon, which reports it itself (pidfd) */
        char leaf[32];
        char comm[16]; /* at its start: at its end /proc may have nothing left */
} tracked;

/* An exit of a process not (yet) known: its fork event may come later, since events
 * from different CPUs can arrive out of order. */
typedef struct early_exit {
        pid_t tgid, ppid;
        int status;
} early_exit;

/* Every untracked exit on the host goes in, so the ring must outlast a burst of them
 * between a process's exit and its late fork event (256 lost one now and then in
 * test_watcher.sh's 1,000-process run). */
#define EARLY_EXITS 4096

/* A fork whose parent we did not know yet and whose child was gone before we could read
 * its cgroup: the parent's own fork event can come after it (another CPU), and then says
 * whether the child was ours. */
typedef struct early_fork {
        pid_t child, parent;
} early_fork;

struct proc_watch {
        struct mnl_socket *nl;
        early_exit early[EARLY_EXITS];
        unsigned n_early; /* written so far; the ring keeps the last EARLY_EXITS */
        early_fork forks[EARLY_EXITS];
        unsigned n_forks; /* likewise */
        char *cgroup_prefix; /* "0::/layerfs/p-1/cmd-": a line of /proc/PID/cgroup in a leaf */
        tracked *procs;
        size_t n, cap;
        proc_event_fn fn;
        void *userdata;
};

static tracked *find(proc_watch *w, pid_t tgid) {
        for (size_t i = 0; i < w->n; i++)
                if (w->procs[i].tgid == tgid)
                        return &w->procs[i];
        return NULL;
}

static void track(proc_watch *w, pid_t tgid, pid_t parent, const char *leaf, bool own) {
        if (find(w, tgid))
                return;
        GROW(w->procs, w->cap, w->n + 1);
        tracked *t = &w->procs[w->n++];
        *t = (tracked){ .tgid = tgid, .parent = parent, .threads = 1, .own = own };
        snprintf(t->leaf, sizeof(t->leaf), "%s", leaf);
}

/* The command leaf pid lives in, if it is one of the Sandbox's; "" if not. */
static bool leaf_of(proc_watch *w, pid_t pid, char leaf[32]) {
        char path[64], line[512];
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        FILE *f = fopen(path, "re");
        bool found = false;
        size_t plen = strlen(w->cgroup_prefix);
        while (f && !found && fgets(line, sizeof(line), f))
                if (!strncmp(line, w->cgroup_prefix, plen)) {
                        line[strcspn(line, "\n")] = 0;
                        snprintf(leaf, 32, "cmd-%.26s", line + plen);
                        found = true;
                }
        if (f)
                fclose(f);
        return found;
}

static void comm_of(pid_t pid, char comm[16]) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
        comm[0] = 0;
        FILE *f = fopen(path, "re");
        if (f) {
                if (fgets(comm, 16, f))
                        comm[strcspn(comm, "\n")] = 0;
                fclose(f);
        }
}

static void process_forked(proc_watch *w, pid_t child, pid_t parent_tgid);

/* The forks that waited for parent: now that it is known, each is heard again (their own
 * children may be waiting for them in turn). */
static void forks_of(proc_watch *w, pid_t parent) {
        for (unsigned i = 0; i < EARLY_EXITS && i < w->n_forks; i++)
                if (w->forks[i].child && w->forks[i].parent == parent) {
                        pid_t child = w->forks[i].child;
                        w->forks[i].child = 0;
                        process_forked(w, child, parent);
                }
}

/* child, a new process of parent_tgid's. */
static void process_forked(proc_watch *w, pid_t child, pid_t parent_tgid) {
        tracked *parent = find(w, parent_tgid);
        char leaf[32] = "";
        if (parent_tgid == getpid()) {
                /* A command the daemon started: the daemon reports it; its children are ours. */
                if (leaf_of(w, child, leaf)) {
                        track(w, child, parent_tgid, leaf, true);
                        forks_of(w, child);
                }
                return;
        }
        if (parent)
                snprintf(leaf, sizeof(leaf), "%s", parent->leaf);
        else if (!leaf_of(w, child, leaf)) {
                w->forks[w->n_forks++ % EARLY_EXITS] = (early_fork){ .child = child, .parent = parent_tgid };
                return;
        }
        char comm[16];
        for (unsigned i = 0; i < EARLY_EXITS && i < w->n_early; i++) {
                early_exit *e = &w->early[i];
                if (e->tgid != child)
                        continue;
                /* It ended before we heard it start. */
                e->tgid = 0;
                comm_of(child, comm);
                w->fn(w->userdata, EVENT_START, child, parent_tgid, 0, leaf, comm);
                w->fn(w->userdata, EVENT_EXIT, child, e->ppid ? e->ppid : parent_tgid, e->status, leaf,
                      comm);
                forks_of(w, child);
                return;
        }
        track(w, child, parent_tgid, leaf, false);
        comm_of(child, comm);
        snprintf(find(w, child)->comm, 16, "%s", comm);
        w->fn(w->userdata, EVENT_START, child, parent_tgid, 0, leaf, comm);
        forks_of(w, child);
}

static void on_process_fork(proc_watch *w, const struct proc_event *ev) {
        const struct fork_proc_event *f = &ev->event_data.fork;
        if (f->child_pid != f->child_tgid) { /* a new thread */
                tracked *t = find(w, f->child_tgid);
                if (t)
                        t->threads++;
                return;
        }
        process_forked(w, f->child_tgid, f->parent_tgid);
}

/* The kernel sends the exit event after it has told the parent (exit_notify): a parent
 * that reaps at once on another CPU can release the task first, and then the event's
 * parent is 0 (test_watcher.sh's 1,000 children showed one in about 6 runs). The parent
 * from the fork stands in for it then. */
static void on_process_exit(proc_watch *w, const struct proc_event *ev) {
        const struct exit_proc_event *x = &ev->event_data.exit;
        tracked *t = find(w, x->process_tgid);
        if (!t) {
                if (x->process_pid == x->process_tgid) /* maybe ours, its fork still to come */
                        w->early[w->n_early++ % EARLY_EXITS] = (early_exit){ .tgid = x->process_tgid,
                                                                             .ppid = x->parent_tgid,
                                                                             .status = (int)x->exit_code };
                return;
        }
        if (--t->threads > 0)
                return; /* other threads of the process live on */
        char leaf[32], comm[16];
        bool own = t->own;
        pid_t parent = x->parent_tgid ? (pid_t)x->parent_tgid : t->parent;
        snprintf(leaf, sizeof(leaf), "%s", t->leaf);
        comm_of(x->process_pid, comm); /* the exiting task while /proc still has it */
        if (!comm[0])
                snprintf(comm, sizeof(comm), "%s", t->comm);
        *t = w->procs[--w->n];
        if (!own)
                w->fn(w->userdata, EVENT_EXIT, x->process_tgid, parent, (int)x->exit_code, leaf, comm);
}

static int on_message(const struct nlmsghdr *nlh, void *data) {
        proc_watch *w = data;
        const struct cn_msg *msg = mnl_nlmsg_get_payload(nlh);
        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*msg) + sizeof(struct proc_event) ||
            msg->id.idx != CN_IDX_PROC)
                return MNL_CB_OK;
        /* The event sits at offset 36 of the message, unaligned for its 64-bit fields:
         * copy it out before reading it. */
        struct proc_event ev;
        memcpy(&ev, msg->data, sizeof(ev));
        if (ev.what == PROC_EVENT_FORK)
                on_process_fork(w, &ev);
        else if (ev.what == PROC_EVENT_EXIT)
                on_process_exit(w, &ev);
        return MNL_CB_OK;
}

/* Subscribes (PROC_CN_MCAST_LISTEN) to the connector's process events. */
static int listen_events(struct mnl_socket *nl) {
        char buf[NLMSG_SPACE(sizeof(struct cn_msg) + sizeof(enum proc_cn_mcast_op))] = { 0 };
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = NLMSG_DONE;
        nlh->nlmsg_pid = 0;
        struct cn_msg *msg =
                mnl_nlmsg_put_extra_header(nlh, sizeof(struct cn_msg) + sizeof(enum proc_cn_mcast_op));
        msg->id.idx = CN_IDX_PROC;
        msg->id.val = CN_VAL_PROC;
        msg->len = sizeof(enum proc_cn_mcast_op);
        enum proc_cn_mcast_op op = PROC_CN_MCAST_LISTEN;
        memcpy(msg->data, &op, sizeof(op));
        return mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0 ? -errno : 0;
}

int proc_watch_open(const char *sandbox_cgroup, proc_event_fn fn, void *userdata, proc_watch **ret) {
        _cleanup_free_ char *rel = lfs_cgroup_relative(sandbox_cgroup);
        if (!rel)
                return -ENOENT;
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_CONNECTOR, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (!nl)
                return -errno;
        /* The kernel reports every fork and exit on the host: a burst must not overflow
         * the socket (events would be lost), so the buffer is large (root may force it). */
        int size = 32 << 20;
        setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
        int r = mnl_socket_bind(nl, CN_IDX_PROC, MNL_SOCKET_AUTOPID) < 0 ? -errno : listen_events(nl);
        if (r < 0) {
                mnl_socket_close(nl);
                return r;
        }
        proc_watch *w = xcalloc(1, sizeof(*w));
        w->nl = nl;
        w->cgroup_prefix = xasprintf("0::%s/cmd-", rel);
        w->fn = fn;
        w->userdata = userdata;
        *ret = w;
        return 0;
}

int proc_watch_fd(proc_watch *w) {
        return mnl_socket_get_fd(w->nl);
}

void proc_watch_consume(proc_watch *w) {
        char buf[8192] __attribute__((aligned(8)));
        ssize_t k;
        /* Each event comes as an NLMSG_DONE message, which mnl_cb_run would take for the
         * end of a dump: walk the messages instead. */
        /* At most 256 reads per turn of the daemon's loop: a burst of the host's forks must
         * not keep it from answering its callers. */
        for (int turns = 0; turns < 256 && ((k = mnl_socket_recvfrom(w->nl, buf, sizeof(buf))) > 0 ||
                                            (k < 0 && errno == ENOBUFS));
             turns++) {
                if (k < 0) {
                        log_line("the proc connector dropped events (the socket overflowed)");
                        continue;
                }
                int len = (int)k;
                for (const struct nlmsghdr *nlh = (const struct nlmsghdr *)(const void *)buf;
                     mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len))
                        on_message(nlh, w);
        }
}

void proc_watch_close(proc_watch *w) {
        if (!w)
                return;
        mnl_socket_close(w->nl);
        free(w->cgroup_prefix);
        free(w->procs);
        free(w);
}
