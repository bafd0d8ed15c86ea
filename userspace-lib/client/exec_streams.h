/* SPDX-License-Identifier: MIT */
/* The caller's side of a command's streams (workspace.exec, SPEC 3). A command never
 * receives the caller's terminal: a terminal it could keep (a process it leaves in the
 * background would read what the user types afterwards, or write to the terminal at any
 * time) is relayed through a pipe that ends with the exec; other streams (files, pipes,
 * sockets) are passed as they are. The command's stdout and stderr are always pipes of
 * ours, copied while it runs. With tty, the command gets a pseudo-terminal of its own
 * instead (the daemon makes it, in the devpts the command sees, and sends its master
 * back before the answer), relayed to and from the caller's streams, the caller's terminal
 * in raw mode meanwhile and its window size followed. */
#ifndef LFS_EXEC_STREAMS_H
#define LFS_EXEC_STREAMS_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/ioctl.h>

#include "util.h"

typedef struct exec_streams {
        int in, out, err; /* the caller's; -1: none (stdin: /dev/null; output: dropped) */
        int passed[3]; /* what the command gets as 0, 1, 2 */
        int command_ends[3]; /* those of passed that are ours, closed once sent; -1: none */
        int to_command; /* where the caller's stdin is copied (a pipe, or the terminal's
                           master); -1: none */
        int from_out, from_err; /* what the command writes into (with tty: the master) */
        int master; /* with tty: our side of the command's terminal, once the daemon sent it */
        int null;
        bool tty, in_open;
        bool terminal; /* the process's one relay of a terminal is ours (exec_streams.c) */
        char pending[4096]; /* read from the caller's stdin, not yet taken */
        size_t n_pending;
} exec_streams;

/* Makes the pipes (and with tty, the terminal) for a command whose caller's streams are
 * in, out and err; with tty, puts the caller's terminal in raw mode until
 * exec_streams_close. */
int exec_streams_open(exec_streams *s, int in, int out, int err, bool tty, lfs_error **error);

/* With tty: the caller's window size (of the first of in, out, err that is a terminal),
 * for the request, so that the command's terminal has it from the start. false: none. */
bool exec_streams_window(const exec_streams *s, struct winsize *ret);

/* The command's ends went to the daemon: ours are closed, so that only the command holds
 * them. */
void exec_streams_sent(exec_streams *s);

/* Copies between the caller's streams and the command's until the daemon's answer has
 * come on sock (made non-blocking; with tty the terminal's master comes first, on sock
 * too); returns what lfs_frame_read gave for it: 1 and
 * *ret_answer, 0 if the connection ended without one, or a negative errno and
 * *ret_read_err. What the command wrote before it ended is copied; what it left in the
 * background writes afterwards is not. */
int exec_streams_relay(exec_streams *s, int sock, json_t **ret_answer, lfs_error **ret_read_err);

/* Closes everything (a command's stdin pipe or terminal ends here for whatever it left
 * behind) and restores the caller's terminal. */
void exec_streams_close(exec_streams *s);

/* fd is a terminal: a character device that answers as one. */
bool lfs_is_terminal(int fd);

#endif
