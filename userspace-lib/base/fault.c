/* SPDX-License-Identifier: MIT */
/* Failure injection for the tests (fault.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault.h"

static bool write_all(int fd, const char *buf, size_t len) {
        while (len > 0) {
                ssize_t n = write(fd, buf, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return false;
                buf += n;
                len -= (size_t)n;
        }
        return true;
}

/* Appends the decimal digits of v at *p (no stdio: async-signal-safe). */
static char *put_number(char *p, long v) {
        char digits[24];
        size_t n = 0;
        do
                digits[n++] = (char)('0' + v % 10);
        while ((v /= 10) > 0);
        while (n > 0)
                *p++ = digits[--n];
        return p;
}

/* The times a step of LAYERFS_FAULT was reached in this process, for STEP#N. */
static unsigned long times_reached;

void lfs_fault_point(const char *step) {
        const char *v = getenv("LAYERFS_FAULT");
        size_t len = strlen(step);
        if (!v || strncmp(v, step, len) || (v[len] != '@' && v[len] != '#'))
                return;
        v += len;
        unsigned long nth = 0; /* every time */
        if (*v == '#')
                for (v++; *v >= '0' && *v <= '9'; v++)
                        nth = nth * 10 + (unsigned long)(*v - '0');
        if (*v != '@' || !v[1] || (nth && __atomic_add_fetch(&times_reached, 1, __ATOMIC_SEQ_CST) != nth))
                return;
        const char *fifo = v + 1;
        char line[256];
        if (len > sizeof(line) - 32)
                return;
        char *p = line;
        memcpy(p, step, len);
        p += len;
        *p++ = ' ';
        p = put_number(p, (long)getpid());
        *p++ = '\n';
        /* The open waits for the test's reader; the second for its go-ahead. */
        int fd = open(fifo, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        bool sent = write_all(fd, line, (size_t)(p - line));
        close(fd);
        if (!sent || (fd = open(fifo, O_RDONLY | O_CLOEXEC)) < 0)
                return;
        char sink[64];
        for (;;) {
                ssize_t n = read(fd, sink, sizeof(sink));
                if (n == 0 || (n < 0 && errno != EINTR))
                        break;
        }
        close(fd);
}

bool lfs_fault_fails(const char *what) {
        const char *v = getenv("LAYERFS_INJECT_FAILURE");
        return v && !strcmp(v, what);
}
