/* SPDX-License-Identifier: MIT */
/* Failure injection for the tests: compiled into every build, inert unless the
 * environment asks (docs/testing.md, "Faults at a named step").
 *
 * LAYERFS_FAULT=STEP@FIFO or STEP#N@FIFO: a thread that reaches lfs_fault_point(STEP)
 * (each time; with #N, only the Nth time in this process) writes "STEP PID\n" to FIFO (a
 * named pipe the test made), then waits until the test writes to FIFO again, or kills
 * it. A test so lands a SIGKILL inside an operation, or changes the world between a
 * check and its use, at a named point rather than after a guessed delay. Only that
 * thread waits: a daemon goes on serving its Workspaces meanwhile.
 *
 * LAYERFS_INJECT_FAILURE=WHAT: lfs_fault_fails(WHAT) is true, and the caller fails that
 * step (a create that must undo everything). */
#ifndef LFS_FAULT_H
#define LFS_FAULT_H

#include <stdbool.h>

/* Async-signal-safe (no allocation, no stdio): a child between clone and exec may call it. */
void lfs_fault_point(const char *step);
bool lfs_fault_fails(const char *what);

#endif
