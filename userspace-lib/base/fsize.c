/* SPDX-License-Identifier: MIT */
#include "fsize.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

static _Thread_local unsigned depth; /* holds in this thread */
static _Thread_local bool blocked; /* by the outermost hold (not already the caller's) */

void lfs_fsize_hold(void) {
        if (depth++)
                return;
        struct sigaction sa;
        if (sigaction(SIGXFSZ, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
                return;
        sigset_t fsize, old;
        sigemptyset(&fsize);
        sigaddset(&fsize, SIGXFSZ);
        blocked = pthread_sigmask(SIG_BLOCK, &fsize, &old) == 0 && !sigismember(&old, SIGXFSZ);
}

void lfs_fsize_release(void) {
        if (!depth || --depth || !blocked)
                return;
        sigset_t fsize;
        sigemptyset(&fsize);
        sigaddset(&fsize, SIGXFSZ);
        const struct timespec now = { 0 };
        while (sigtimedwait(&fsize, NULL, &now) == SIGXFSZ)
                ;
        pthread_sigmask(SIG_UNBLOCK, &fsize, NULL);
        blocked = false;
}

const char *lfs_fsize_hint(int errnum) {
        static _Thread_local char hint[160];
        struct rlimit rl;
        if (errnum != EFBIG)
                return "";
        if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
                snprintf(hint, sizeof(hint),
                         " (the file size limit, ulimit -f, is %llu KiB: a file would grow past it; raise "
                         "it)",
                         (unsigned long long)(rl.rlim_cur / 1024));
        else
                snprintf(hint, sizeof(hint),
                         " (a file would grow past the file size limit, ulimit -f; raise it)");
        return hint;
}
