/* SPDX-License-Identifier: MIT */
/* lfs_monotonic_deadline: a deadline pthread_cond_timedwait takes, also for a time already
 * past (a negative tv_nsec is EINVAL, not ETIMEDOUT, and its waiter spun for ever). */
#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "helpers.h"
#include "util.h"

static void test_deadline_in_range(void **state) {
        (void)state;
        /* Every remainder of a second, both ways: one of the negative ones lands below zero
         * whatever the clock's nanoseconds are (all but 1 ms of each second). */
        for (long long ms = -2500; ms <= 2500; ms++) {
                struct timespec now, t = lfs_monotonic_deadline(ms);
                clock_gettime(CLOCK_MONOTONIC, &now);
                assert_msg(t.tv_nsec >= 0 && t.tv_nsec < 1000000000L, "%lld ms: tv_nsec %ld", ms, t.tv_nsec);
                long long t_ms = (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000,
                          now_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
                assert_msg(t_ms <= now_ms + (ms > 0 ? ms : 0) + 1, "%lld ms: %lld ms from now", ms,
                           t_ms - now_ms);
                assert_msg(ms <= 0 || t_ms + 50 >= now_ms + ms, "%lld ms: %lld ms from now", ms,
                           t_ms - now_ms);
        }
}

/* What the daemon's waits do with it: a deadline past is a timeout at once. */
static void test_past_deadline_times_out(void **state) {
        (void)state;
        pthread_condattr_t monotonic;
        pthread_condattr_init(&monotonic);
        pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
        pthread_cond_t cond;
        pthread_cond_init(&cond, &monotonic);
        pthread_condattr_destroy(&monotonic);
        pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&lock);
        for (long long ms = -999; ms <= 0; ms += 111) {
                struct timespec t = lfs_monotonic_deadline(ms);
                int r = pthread_cond_timedwait(&cond, &lock, &t);
                assert_msg(r == ETIMEDOUT, "%lld ms: pthread_cond_timedwait gave %d", ms, r);
        }
        pthread_mutex_unlock(&lock);
        pthread_cond_destroy(&cond);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_deadline_in_range),
                cmocka_unit_test(test_past_deadline_times_out),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
