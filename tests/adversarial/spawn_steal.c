/* SPDX-License-Identifier: MIT */
/* The attacker of test_spawn_window.sh: a command that is root in its Sandbox's user
 * namespace watches for the next process of the pid namespace (the daemon's child that
 * starts a command) and, in the moment that child has joined the user namespace but is
 * not yet the command identity, takes one of the daemon's fds from it with
 * pidfd_getfd (a ptrace-mode ATTACH check: the child's credentials are in the Sandbox's
 * user namespace, where this root has CAP_SYS_PTRACE; only a memory that is not dumpable
 * stops it). For SECONDS seconds prints "got PID FD TARGET" for each fd it could take
 * (the commands' own, such as the loader's, count too: the test tells which were the
 * daemon's), then how many processes it watched. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static double now(void) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
        double end = now() + (argc > 1 ? atof(argv[1]) : 10);
        int last_fd = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
        if (last_fd < 0) {
                perror("ns_last_pid");
                return 2;
        }
        long seen = -1;
        int pidfd = -1, tries = 0;
        unsigned long pids = 0;
        while (now() < end) {
                char buf[32];
                ssize_t n = pread(last_fd, buf, sizeof(buf) - 1, 0);
                if (n <= 0)
                        return 2;
                buf[n] = '\0';
                long pid = atol(buf);
                if (pid != seen) {
                        seen = pid;
                        if (pidfd >= 0)
                                close(pidfd);
                        pidfd = (int)syscall(SYS_pidfd_open, (int)pid, 0);
                        tries = 0;
                        pids++;
                }
                if (pidfd < 0 || pid == (long)getpid() || ++tries > 4000)
                        continue;
                for (int target = 3; target < 12; target++) {
                        int fd = (int)syscall(SYS_pidfd_getfd, pidfd, target, 0);
                        if (fd < 0)
                                continue;
                        char self[64], where[4096];
                        snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
                        ssize_t k = readlink(self, where, sizeof(where) - 1);
                        where[k > 0 ? k : 0] = '\0';
                        printf("got %ld %d %s\n", pid, target, where);
                        fflush(stdout);
                        close(fd);
                        tries = 4000; /* one per process is enough */
                        break;
                }
        }
        printf("watched %lu new pids\n", pids);
        return 0;
}
