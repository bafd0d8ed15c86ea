/* SPDX-License-Identifier: MIT */
/* The log of the daemon and of the FUSE transports that serve its mounts (log.c): stderr,
 * which the library points at the Sandbox's daemon.log. */
#ifndef LFS_LOG_H
#define LFS_LOG_H

/* Where daemon.log is: the Sandbox's directory (kept, not copied). */
void log_set_dir(const char *dir);
/* One entry, quoted onto one line, with the time. */
void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
