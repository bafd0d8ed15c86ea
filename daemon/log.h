/* SPDX-License-Identifier: MIT */
/* The daemon's log (log.c). */
#ifndef LFS_DAEMON_LOG_H
#define LFS_DAEMON_LOG_H

/* Where daemon.log is: the Sandbox's directory (kept, not copied). */
void log_set_dir(const char *dir);
/* One entry, quoted onto one line, with the time. */
void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
