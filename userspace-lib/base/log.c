/* SPDX-License-Identifier: MIT */
/* The daemon's log: <Sandbox dir>/daemon.log (its stdout and stderr), one quoted line per
 * entry, rotated to daemon.log.1 past LOG_MAX_BYTES. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "log.h"
#include "quote.h"
#include "util.h"

/* One line of the daemon's log (stderr, which the library points at daemon.log). */
#define LOG_MAX_BYTES (1 << 20)
static const char *log_dir; /* the Sandbox's directory, where daemon.log is */

void log_set_dir(const char *dir) {
        log_dir = dir;
}

/* Keeps the log bounded: past LOG_MAX_BYTES it becomes daemon.log.1 (replacing the
 * previous one) and a new daemon.log starts. */
static void rotate_log(void) {
        struct stat st;
        if (!log_dir || fstat(STDERR_FILENO, &st) < 0 || st.st_size < LOG_MAX_BYTES)
                return;
        _cleanup_free_ char *path = xasprintf("%s/daemon.log", log_dir);
        _cleanup_free_ char *old = xasprintf("%s/daemon.log.1", log_dir);
        if (rename(path, old) < 0)
                return;
        int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        fflush(stdout);
        fflush(stderr);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
}

void log_line(const char *fmt, ...) {
        rotate_log();
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", gmtime_r(&now, &tm));
        va_list ap;
        va_start(ap, fmt);
        char *entry = NULL;
        if (vasprintf(&entry, fmt, ap) < 0)
                entry = NULL;
        va_end(ap);
        /* One line per entry, whatever a command line or path in it holds. */
        _cleanup_free_ char *shown = lfs_quote(entry ? entry : "(out of memory)", LFS_QUOTE_INLINE);
        free(entry);
        fprintf(stderr, "%s %s\n", when, shown);
        fflush(stderr);
}
