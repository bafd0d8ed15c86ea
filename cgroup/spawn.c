/* SPDX-License-Identifier: MIT */
/* Starting a command straight into its cgroup leaf (cgroup.h). */
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "cgroup.h"
#include "fault.h"
#include "landlock.h"
#include "seccomp.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Each step in words (lfs_spawn_stage_name): the one table of them. */
static const char *const stage_names[_LFS_SPAWN_STAGE_MAX] = {
        [LFS_SPAWN_STAGE_LEAF] = "make the command's cgroup",
        [LFS_SPAWN_STAGE_CLONE] = "clone the command's process into its cgroup",
        [LFS_SPAWN_STAGE_CGROUP] = "move the command's process into its cgroup",
        [LFS_SPAWN_STAGE_NAMESPACES] = "join the namespaces the command runs in",
        [LFS_SPAWN_STAGE_STREAMS] = "give the command its stdin, stdout and stderr",
        [LFS_SPAWN_STAGE_TERMINAL] = "make the command's terminal its controlling terminal",
        [LFS_SPAWN_STAGE_IDENTITY] = "take the command identity",
        [LFS_SPAWN_STAGE_CWD] = "enter the working directory of the command",
        [LFS_SPAWN_STAGE_SCOPE] = "scope the command away from abstract unix sockets (Landlock)",
        [LFS_SPAWN_STAGE_LIMITS] = "give the command its creator's resource limits",
        [LFS_SPAWN_STAGE_SECCOMP] = "install the command's seccomp filter",
};

const char *lfs_spawn_stage_name(lfs_spawn_stage stage) {
        return stage >= 0 && stage < _LFS_SPAWN_STAGE_MAX ? stage_names[stage] : "start the command";
}

/* What the child reports through the error pipe when it cannot get to execve. */
typedef struct child_failure {
        lfs_spawn_stage stage;
        int errnum;
} child_failure;

static _Noreturn void child_fail(int pipe_fd, lfs_spawn_stage stage, int errnum) {
        child_failure f = { .stage = stage, .errnum = errnum };
        (void)!write(pipe_fd, &f, sizeof(f));
        _exit(126);
}

/* The limits lfs_cgroup_lift_limits lifted for this process, as they were: what its
 * children get back. Open files too: the daemon holds many across its Workspaces (never
 * more than the kernel's nr_open: lifted to the hard limit), its commands as many as
 * their creator. */
static const int lifted_resources[] = { RLIMIT_FSIZE, RLIMIT_CPU, RLIMIT_AS, RLIMIT_DATA, RLIMIT_NOFILE };
static struct rlimit creator_limits[ELEMENTSOF(lifted_resources)];
static bool limits_lifted;

void lfs_cgroup_lift_limits(void) {
        for (size_t i = 0; i < ELEMENTSOF(lifted_resources); i++) {
                struct rlimit *was = &creator_limits[i], none = { RLIM_INFINITY, RLIM_INFINITY };
                if (getrlimit(lifted_resources[i], was) < 0) {
                        *was = none;
                        continue;
                }
                /* Without CAP_SYS_RESOURCE, as far as the hard limit. */
                struct rlimit hard = { was->rlim_max, was->rlim_max };
                if (setrlimit(lifted_resources[i], &none) < 0)
                        (void)setrlimit(lifted_resources[i], &hard);
        }
        limits_lifted = true;
}

/* Runs in the child: async-signal-safe calls only. */
static _Noreturn void child_run(const lfs_spawn_args *a, int procs_fd, int pipe_fd) {
        /* Until its execve the child holds every fd of the daemon, and its memory is the
         * daemon's (lfs_clone3_shared) or a copy of it: not dumpable from its first step,
         * so that nothing but the host's root may reach them through ptrace,
         * process_vm_writev, pidfd_getfd or /proc. The flag belongs to the memory, so a
         * daemon that shares it has it too; execve gives the command memory of its own,
         * dumpable as any. */
        (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        if (procs_fd >= 0 && write(procs_fd, "0", 1) != 1)
                child_fail(pipe_fd, LFS_SPAWN_STAGE_CGROUP, errno);
        if (a->born_fd > 0) {
                uint64_t one = 1;
                (void)!write(a->born_fd, &one, sizeof(one));
        }
        /* The pid namespace was the clone's (pid_for_children); the others are joined here,
         * all at once, while the child is still root on the host and single-threaded. */
        int join = a->ns_flags & ~CLONE_NEWPID;
        if (join && syscall(SYS_setns, a->ns_pidfd, join) < 0)
                child_fail(pipe_fd, LFS_SPAWN_STAGE_NAMESPACES, errno);
        struct sigaction dfl = { .sa_handler = SIG_DFL };
        for (int sig = 1; sig < NSIG; sig++)
                (void)sigaction(sig, &dfl, NULL); /* the daemon ignores SIGPIPE; commands must not */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (a->new_session)
                (void)setsid();
        if (dup2(a->fd_in, 0) < 0 || dup2(a->fd_out, 1) < 0 || dup2(a->fd_err, 2) < 0)
                child_fail(pipe_fd, LFS_SPAWN_STAGE_STREAMS, errno);
        /* Never stolen (0: not from another session): a terminal that is some session's
         * already is refused. */
        if (a->controlling_tty && ioctl(0, TIOCSCTTY, 0) < 0)
                child_fail(pipe_fd, LFS_SPAWN_STAGE_TERMINAL, errno);
        /* Raw system calls: glibc's wrappers apply a credential change to every thread
         * it knows of, and after a raw clone3 it still believes in the daemon's threads
         * and may wait for them forever (seen as a hung child). The saved uid stays the
         * daemon's until execve, which makes it the command's (saved = effective) once the
         * daemon's fds are closed and its memory let go of: where fs.suid_dumpable is 1 a
         * change of identity makes the memory dumpable again, and with all its ids the
         * command's, a process of the command identity (another command, a local user)
         * passed the kernel's ptrace check on this child (test_spawn_window.sh). The flag
         * is cleared again all the same.
         * Then every capability goes, in every set: the kernel drops them at a change of
         * uid only when an old id was root of the process's user namespace, and in a
         * Sandbox's (joined above: its setns gave the child every capability there) the
         * host's 0 is not, so the child kept them until execve, and its chdir and execve's
         * path walk passed where the command identity may not (a --cwd or a program's
         * directory of mode 000, a program it may not execute, one it may not read made
         * dumpable: test_spawn_caps.sh). On the host the kernel clears the effective set
         * but keeps the permitted one (the saved uid stays 0): cleared here too. From here
         * on nothing needs one: no_new_privs is what seccomp and Landlock ask for, limits
         * are only lowered. */
        if (a->uid != (uid_t)-1) {
                if (syscall(SYS_setgroups, 0, NULL) < 0 ||
                    syscall(SYS_setresgid, a->gid, a->gid, a->gid) < 0 ||
                    syscall(SYS_setresuid, a->uid, a->uid, (uid_t)-1) < 0)
                        child_fail(pipe_fd, LFS_SPAWN_STAGE_IDENTITY, errno);
                struct __user_cap_header_struct head = { .version = _LINUX_CAPABILITY_VERSION_3 };
                struct __user_cap_data_struct none_caps[2] = {};
                if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
                    syscall(SYS_capset, &head, none_caps) < 0)
                        child_fail(pipe_fd, LFS_SPAWN_STAGE_IDENTITY, errno);
                (void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
        lfs_fault_point("spawn-identity-set"); /* the command's identity, no execve yet */
        /* No setuid or file-capability program gains anything for the command (SPEC 3):
         * fusermount3 cannot mount for it, su and sudo cannot raise it. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                child_fail(pipe_fd, LFS_SPAWN_STAGE_IDENTITY, errno);
        if (a->ns_flags & CLONE_NEWNS) {
                /* In the joined mount view, by its path; it must be the directory checked. */
                struct stat want, got;
                if (!a->cwd || a->cwd_fd < 0)
                        child_fail(pipe_fd, LFS_SPAWN_STAGE_CWD, EINVAL);
                if (fstat(a->cwd_fd, &want) < 0)
                        child_fail(pipe_fd, LFS_SPAWN_STAGE_CWD, errno);
                lfs_fault_point("exec-cwd-chdir"); /* opened, not yet reached by path */
                if (chdir(a->cwd) < 0)
                        child_fail(pipe_fd, LFS_SPAWN_STAGE_CWD, errno);
                if (stat(".", &got) < 0 || got.st_dev != want.st_dev || got.st_ino != want.st_ino)
                        child_fail(pipe_fd, LFS_SPAWN_STAGE_CWD, EXDEV);
        } else if (a->cwd_fd >= 0 ? fchdir(a->cwd_fd) < 0 : a->cwd && chdir(a->cwd) < 0)
                child_fail(pipe_fd, LFS_SPAWN_STAGE_CWD, errno);
        /* Before the filter, which may deny Landlock's calls. A kernel without the scope
         * (before 6.12) leaves it out: runtime status names kernel:landlock-scope. */
        int scoped = a->scope_abstract_unix ? lfs_landlock_scope_abstract_unix() : 0;
        if (scoped < 0 && scoped != -EOPNOTSUPP)
                child_fail(pipe_fd, LFS_SPAWN_STAGE_SCOPE, -scoped);
        /* Nothing of the daemon's reaches the command; the error pipe closes at execve. */
        syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
        /* The command gets what its Sandbox's creator had, never more than the daemon has
         * now (an operator may have lowered it: prlimit): only lowered, which needs no
         * privilege (prlimit64 raw, as the identity's calls above). After every step that
         * makes a descriptor (the daemon's table may hold more files than the creator's
         * soft limit: Landlock's ruleset then failed EMFILE). A limit the kernel refuses
         * even lowered (open files above an fs.nr_open lowered since) stays the daemon's. */
        for (size_t i = 0; limits_lifted && i < ELEMENTSOF(lifted_resources); i++) {
                struct rlimit now, want = creator_limits[i];
                if (syscall(SYS_prlimit64, 0, lifted_resources[i], NULL, &now) < 0)
                        child_fail(pipe_fd, LFS_SPAWN_STAGE_LIMITS, errno);
                want.rlim_max = want.rlim_max < now.rlim_max ? want.rlim_max : now.rlim_max;
                want.rlim_cur = want.rlim_cur < want.rlim_max ? want.rlim_cur : want.rlim_max;
                if (syscall(SYS_prlimit64, 0, lifted_resources[i], &want, NULL) < 0 && errno != EPERM)
                        child_fail(pipe_fd, LFS_SPAWN_STAGE_LIMITS, errno);
        }
        /* Last: the filter holds for everything the command does, nothing of ours before. */
        int r = a->seccomp ? lfs_seccomp_install(a->seccomp) : 0;
        if (r < 0)
                child_fail(pipe_fd, LFS_SPAWN_STAGE_SECCOMP, -r);
        bool denied = false;
        for (size_t i = 0; i < a->n_paths; i++) {
                execve(a->paths[i], a->argv, a->envp);
                if (errno == EACCES || errno == ENOEXEC || errno == EISDIR || errno == EPERM)
                        denied = true;
        }
        _exit(denied ? 126 : 127);
}

bool lfs_clone3_refused(int errnum) {
        return errnum == ENOSYS || errnum == E2BIG || errnum == EOPNOTSUPP || errnum == EBUSY ||
               errnum == EACCES;
}

/* Children of the calling thread start in the pid namespace of pidfd's process until
 * leave_pid_namespace: *ret_own is the thread's own (for the way back). Only this thread
 * changes: setns of a pid namespace is a thread's pid_for_children. */
static int enter_pid_namespace(int pidfd, int *ret_own) {
        int own = open("/proc/thread-self/ns/pid_for_children", O_RDONLY | O_CLOEXEC);
        if (own < 0)
                return -errno;
        if (syscall(SYS_setns, pidfd, CLONE_NEWPID) < 0) {
                int e = errno;
                close(own);
                return -e;
        }
        *ret_own = own;
        return 0;
}

static void leave_pid_namespace(int own) {
        if (own < 0)
                return;
        if (syscall(SYS_setns, own, CLONE_NEWPID) < 0)
                abort(); /* later forks of this thread would land in a Sandbox: never go on */
        close(own);
}

/* What a child that shares the daemon's memory runs (lfs_clone3_shared). */
typedef struct shared_spawn {
        const lfs_spawn_args *a;
        int err_write;
} shared_spawn;

static int shared_spawn_main(void *arg) {
        const shared_spawn *c = arg;
        child_run(c->a, -1, c->err_write);
}

/* clone3 straight into the leaf: a child that shares the daemon's memory where this build
 * can (lfs_clone3_shared), else a copy of it as a fork makes (the daemon's page tables
 * copied, then torn down by the child's execve: most of an exec's cost in the daemon). The
 * child's pid, or -errno. */
static pid_t clone_into_cgroup(const lfs_spawn_args *a, int cgroup_fd, int err_write, int *ret_pidfd) {
        const struct clone_args into = {
                .flags = CLONE_PIDFD | CLONE_INTO_CGROUP,
                .pidfd = (uint64_t)(uintptr_t)ret_pidfd,
                .exit_signal = SIGCHLD,
                .cgroup = (uint64_t)cgroup_fd,
        };
        struct clone_args args = into;
        shared_spawn c = { .a = a, .err_write = err_write };
        pid_t pid = lfs_clone3_shared(&args, shared_spawn_main, &c);
        /* -EINVAL: the kernel refuses a child that shares memory here (a time namespace
         * for children of its own, say); a copy is still allowed. */
        if (pid != -ENOSYS && pid != -EINVAL)
                return pid;
        args = into;
        pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
        if (pid == 0)
                child_run(a, -1, err_write);
        return pid < 0 ? -errno : pid;
}

/* *stage: the child's step that failed, when the child said so; else left as it is. */
static int spawn_in_cgroup(const lfs_spawn_args *a, int cgroup_fd, pid_t *ret_pid, int *ret_pidfd,
                           lfs_spawn_stage *stage) {
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int err_read = pipefd[0], err_write = pipefd[1];
        pid_t pid = -1;
        int pidfd = -1;
        const char *no_clone3 = getenv("LAYERFS_NO_CLONE3");
        if (!(no_clone3 && !strcmp(no_clone3, "1"))) {
                pid = clone_into_cgroup(a, cgroup_fd, err_write, &pidfd);
                if (pid < 0 && !lfs_clone3_refused(-pid))
                        return pid;
        }
        if (pid < 0) {
                /* The fallback: the child joins its leaf itself, before anything else. */
                _cleanup_free_ char *procs = xasprintf("%s/cgroup.procs", a->cgroup);
                _cleanup_close_ int procs_fd = open(procs, O_WRONLY | O_CLOEXEC);
                if (procs_fd < 0)
                        return -errno;
                pid = fork();
                if (pid < 0)
                        return -errno;
                if (pid == 0)
                        child_run(a, procs_fd, err_write);
                pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        }
        close(TAKE_FD(err_write));
        child_failure f;
        ssize_t k = read(err_read, &f, sizeof(f));
        if (k == (ssize_t)sizeof(f)) {
                /* It never ran the command: reap it here, and say why. */
                int status;
                waitpid(pid, &status, 0);
                if (pidfd >= 0)
                        close(pidfd);
                *stage = f.stage;
                return f.errnum ? -f.errnum : -EIO;
        }
        if (pidfd < 0) {
                int e = errno;
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                return -e;
        }
        *ret_pid = pid;
        *ret_pidfd = pidfd;
        return 0;
}

int lfs_cgroup_spawn(const lfs_spawn_args *a, pid_t *ret_pid, int *ret_pidfd,
                     lfs_spawn_stage *failed_stage) {
        _cleanup_close_ int cgroup_fd = open(a->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cgroup_fd < 0) {
                *failed_stage = LFS_SPAWN_STAGE_CLONE;
                return -errno;
        }
        int own_pidns = -1;
        if (a->ns_flags & CLONE_NEWPID) {
                int r = enter_pid_namespace(a->ns_pidfd, &own_pidns);
                if (r < 0) {
                        *failed_stage = LFS_SPAWN_STAGE_NAMESPACES;
                        return r;
                }
        }
        lfs_spawn_stage stage = LFS_SPAWN_STAGE_CLONE;
        int r = spawn_in_cgroup(a, cgroup_fd, ret_pid, ret_pidfd, &stage);
        leave_pid_namespace(own_pidns);
        if (r < 0)
                *failed_stage = stage;
        return r;
}
