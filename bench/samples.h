/* SPDX-License-Identifier: MIT */
/*
 * The clock and the summary the C benchmarks (lifecycle_floor.c, lifecycle_lib.c) share,
 * so their medians and 99th percentiles are the same figures as bench/lifecycle.sh's.
 */
#ifndef LAYERFS_BENCH_SAMPLES_H
#define LAYERFS_BENCH_SAMPLES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline int64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static inline int samples_by_value(const void *a, const void *b) {
        int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
        return (x > y) - (x < y);
}

/* Sorts n samples and prints "median p99" (nearest rank); the line's end is the caller's. */
static inline void samples_report(int64_t *samples, long n) {
        qsort(samples, (size_t)n, sizeof(*samples), samples_by_value);
        long p99 = (99 * n + 99) / 100 - 1;
        printf("%lld %lld", (long long)samples[(n - 1) / 2], (long long)samples[p99 < n ? p99 : n - 1]);
}

#endif
