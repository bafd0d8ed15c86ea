/* SPDX-License-Identifier: MIT */
/*
 * A Sandbox's lifecycle through the C library from one process (bench/lifecycle.sh): what
 * a long-lived client (an agent, the HTTP API, a CI runner linking liblayerfs) pays per
 * step, without a CLI process's start in each.
 *
 *   lifecycle-lib N
 *
 * N cycles, on $LAYERFS_HOME's only project, of: lfs_sandbox_create, lfs_workspace_mount of
 * main, lfs_workspace_exec of `true` twice, lfs_workspace_unmount, lfs_sandbox_close (of
 * the Sandbox now idle). Prints one line per step, "STEP median_us p99_us", the steps
 * create, mount, first_exec, exec, unmount, close, create_to_first_exec. With LAYERFS_POOL
 * set, the pool is filled before each cycle, untimed (lfs_sandbox_pool_fill): each create
 * takes a Sandbox made ahead, as a fleet's does when its pool keeps up. Uses only
 * layerfs.h, as any client would. Needs root (Sandboxes).
 */
#include <layerfs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "samples.h"

enum {
        STEP_CREATE,
        STEP_MOUNT,
        STEP_FIRST_EXEC,
        STEP_EXEC,
        STEP_UNMOUNT,
        STEP_CLOSE,
        STEP_TO_FIRST,
        N_STEPS
};

static const char *const step_names[N_STEPS] = {
        [STEP_CREATE] = "create",
        [STEP_MOUNT] = "mount",
        [STEP_FIRST_EXEC] = "first_exec",
        [STEP_EXEC] = "exec",
        [STEP_UNMOUNT] = "unmount",
        [STEP_CLOSE] = "close",
        [STEP_TO_FIRST] = "create_to_first_exec",
};

/* Ends the run on a failed call, naming the step and the library's error. */
static void check(int rc, const char *what, lfs_error **errp) {
        if (rc >= 0)
                return;
        lfs_error *err = *errp;
        fprintf(stderr, "lifecycle-lib: %s: %s: %s\n", what, err ? lfs_code_name(err->code) : "?",
                err && err->message ? err->message : "no message");
        lfs_error_free(err);
        exit(1);
}

static void exec_true(lfs_home *home, int sandbox) {
        static const char *const argv[] = { "true" };
        lfs_exec_options options = { .stdin_fd = -1, .stdout_fd = -1, .stderr_fd = -1 };
        lfs_error *err = NULL;
        int status = -1;
        check(lfs_workspace_exec(home, NULL, sandbox, "main", argv, 1, &options, &status, &err), "exec",
              &err);
        if (status != 0) {
                fprintf(stderr, "lifecycle-lib: true exited %d\n", status);
                exit(1);
        }
}

int main(int argc, char **argv) {
        long n = argc == 2 ? strtol(argv[1], NULL, 10) : 0;
        if (n < 1 || n > 100000) {
                fprintf(stderr, "usage: lifecycle-lib N (cycles, 1 to 100000)\n");
                return 2;
        }
        int64_t *samples[N_STEPS];
        for (int s = 0; s < N_STEPS; s++)
                if (!(samples[s] = calloc((size_t)n, sizeof(int64_t)))) {
                        perror("lifecycle-lib: calloc");
                        return 1;
                }
        lfs_home *home = NULL;
        lfs_error *err = NULL;
        check(lfs_home_open(NULL, &home, &err), "home", &err);
        const char *pool = getenv("LAYERFS_POOL");
        for (long i = 0; i < n; i++) {
                int sandbox = 0;
                char *path = NULL;
                if (pool && *pool)
                        check(lfs_sandbox_pool_fill(home, NULL, NULL, -1, &err), "pool fill", &err);
                int64_t t0 = now_us();
                check(lfs_sandbox_create(home, NULL, NULL, NULL, &sandbox, &err), "create", &err);
                int64_t t1 = now_us();
                check(lfs_workspace_mount(home, NULL, sandbox, "main", &path, &err), "mount", &err);
                int64_t t2 = now_us();
                exec_true(home, sandbox);
                int64_t t3 = now_us();
                exec_true(home, sandbox);
                int64_t t4 = now_us();
                check(lfs_workspace_unmount(home, NULL, sandbox, "main", 0, &err), "unmount", &err);
                int64_t t5 = now_us();
                check(lfs_sandbox_close(home, NULL, sandbox, 0, &err), "close", &err);
                int64_t t6 = now_us();
                free(path);
                samples[STEP_CREATE][i] = t1 - t0;
                samples[STEP_MOUNT][i] = t2 - t1;
                samples[STEP_FIRST_EXEC][i] = t3 - t2;
                samples[STEP_EXEC][i] = t4 - t3;
                samples[STEP_UNMOUNT][i] = t5 - t4;
                samples[STEP_CLOSE][i] = t6 - t5;
                samples[STEP_TO_FIRST][i] = t3 - t0;
        }
        lfs_home_close(home);
        for (int s = 0; s < N_STEPS; s++) {
                printf("%s ", step_names[s]);
                samples_report(samples[s], n);
                putchar('\n');
                free(samples[s]);
        }
        return 0;
}
