/* SPDX-License-Identifier: MIT */
#include "numbers.h"

#include <math.h>
#include <unistd.h>

/* "123": digits only; strtoull alone would take " 1", "+1", "-1" (as 2^64 - 1) and "1x". */
static bool all_digits(const char *s) {
        if (!*s)
                return false;
        for (; *s; s++)
                if (*s < '0' || *s > '9')
                        return false;
        return true;
}

/* "2", "0.5", ".5", "1e3", "2.5E-1": strtod alone would take "inf", "nan", "0x10" and
 * leading space. */
static bool decimal_syntax(const char *s) {
        size_t digits = 0;
        while (*s >= '0' && *s <= '9')
                s++, digits++;
        if (*s == '.')
                for (s++; *s >= '0' && *s <= '9'; s++)
                        digits++;
        if (!digits)
                return false;
        if (*s == 'e' || *s == 'E') {
                s++;
                if (*s == '+' || *s == '-')
                        s++;
                if (*s < '0' || *s > '9')
                        return false;
                while (*s >= '0' && *s <= '9')
                        s++;
        }
        return !*s;
}

/* "1e+09" would say less than "1000000000"; "1.5" stays "1.5". */
static void number_text(double v, char ret[64]) {
        snprintf(ret, 64, "%.15g", v);
}

int lfs_parse_whole(const char *what, const char *text, uint64_t min, uint64_t max, uint64_t *ret,
                    lfs_error **err) {
        if (!text || !all_digits(text))
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "%s '%s' is not a whole number: give one from %llu to %llu", what,
                                text ? text : "", (unsigned long long)min, (unsigned long long)max);
        errno = 0;
        unsigned long long v = strtoull(text, NULL, 10);
        if (errno == ERANGE || v < min || v > max)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "%s '%s' is out of range: give a whole number from %llu to %llu", what, text,
                                (unsigned long long)min, (unsigned long long)max);
        *ret = v;
        return 0;
}

int lfs_parse_size(const char *what, const char *text, uint64_t *ret, lfs_error **err) {
        static const char units[] = "KMGT";
        uint64_t v = 0;
        const char *p = text;
        for (; p && *p >= '0' && *p <= '9'; p++)
                if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*p - '0'), &v))
                        goto too_big;
        const char *unit = p && *p ? strchr(units, *p) : NULL;
        if (!p || p == text || (*p && (!unit || p[1])) || v == 0)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "%s '%s' is not a size: give bytes above zero, or a number with K, M, G or "
                                "T (e.g. 512M)",
                                what, text ? text : "");
        for (int shift = unit ? (int)(unit - units + 1) * 10 : 0; shift > 0; shift -= 10)
                if (__builtin_mul_overflow(v, 1024, &v))
                        goto too_big;
        *ret = v;
        return 0;
too_big:
        return lfs_fail(err, LFS_INVALID_INPUT, ERANGE, "%s '%s' is out of range: give a size below 16 EiB",
                        what, text);
}

int lfs_parse_decimal(const char *what, const char *text, const char *noun, double min, double max,
                      double *ret, lfs_error **err) {
        char lo[64], hi[64];
        number_text(min, lo);
        number_text(max, hi);
        if (!text || !decimal_syntax(text))
                return lfs_fail(err, LFS_INVALID_INPUT, 0, "%s '%s' is not a %s: give one from %s to %s",
                                what, text ? text : "", noun, lo, hi);
        errno = 0;
        double v = strtod(text, NULL);
        if (errno == ERANGE || !isfinite(v) || v < min || v > max)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "%s '%s' is out of range: give a %s from %s to %s", what, text, noun, lo,
                                hi);
        *ret = v;
        return 0;
}

int lfs_parse_seconds(const char *what, const char *text, double min, double max, double *ret,
                      lfs_error **err) {
        return lfs_parse_decimal(what, text, "number of seconds", min, max, ret, err);
}

int lfs_json_whole(const char *what, const json_t *v, long long min, long long max, long long *ret,
                   lfs_error **err) {
        if (json_is_integer(v) && json_integer_value(v) >= min && json_integer_value(v) <= max) {
                *ret = json_integer_value(v);
                return 0;
        }
        _cleanup_free_ char *text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        return lfs_fail(err, LFS_INVALID_INPUT, 0, "%s %s is %s: give a whole number from %lld to %lld",
                        what, text ? text : "(missing)",
                        json_is_integer(v) ? "out of range" : "not a whole number", min, max);
}

int lfs_json_seconds(const char *what, const json_t *v, double min, double max, double *ret,
                     lfs_error **err) {
        double x = json_number_value(v);
        if (json_is_number(v) && isfinite(x) && x >= min && x <= max) {
                *ret = x;
                return 0;
        }
        char lo[64], hi[64];
        number_text(min, lo);
        number_text(max, hi);
        _cleanup_free_ char *text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        return lfs_fail(err, LFS_INVALID_INPUT, 0, "%s %s is %s: give a number of seconds from %s to %s",
                        what, text ? text : "(missing)", json_is_number(v) ? "out of range" : "not a number",
                        lo, hi);
}

/* The environment variable as a whole number; fallback when it is unset or empty. */
static int env_whole(const char *name, uint64_t min, uint64_t max, uint64_t fallback, uint64_t *ret,
                     lfs_error **err) {
        const char *s = getenv(name);
        if (!s || !*s) {
                *ret = fallback;
                return 0;
        }
        return lfs_parse_whole(name, s, min, max, ret, err);
}

int lfs_command_identity(uid_t *ret_uid, gid_t *ret_gid, lfs_error **err) {
        uint64_t uid = 0, gid = 0;
        int r = env_whole("LAYERFS_COMMAND_UID", 1, UINT32_MAX - 1, 501, &uid, err);
        if (r < 0 || (r = env_whole("LAYERFS_COMMAND_GID", 1, UINT32_MAX - 1, 20, &gid, err)) < 0)
                return r;
        *ret_uid = (uid_t)uid;
        *ret_gid = (gid_t)gid;
        return 0;
}

int lfs_idle_seconds(double *ret, lfs_error **err) {
        const char *s = getenv("LAYERFS_IDLE_SECONDS");
        if (!s || !*s) {
                *ret = LFS_IDLE_SECONDS;
                return 0;
        }
        return lfs_parse_seconds("LAYERFS_IDLE_SECONDS", s, LFS_MIN_IDLE_SECONDS, LFS_IDLE_SECONDS, ret,
                                 err);
}

int lfs_gc_after_deletes(uint64_t *ret, lfs_error **err) {
        const char *s = getenv("LAYERFS_GC_AFTER_DELETES");
        if (!s || !*s) {
                *ret = 0;
                return 0;
        }
        return lfs_parse_whole("LAYERFS_GC_AFTER_DELETES", s, 1, LFS_MAX_GC_AFTER_DELETES, ret, err);
}

int lfs_watcher_load_wait_ms(uint64_t *ret, lfs_error **err) {
        return env_whole("LAYERFS_WATCHER_LOAD_WAIT_MS", 100, LFS_MAX_WATCHER_LOAD_WAIT_MS,
                         LFS_WATCHER_LOAD_WAIT_MS, ret, err);
}

int lfs_test_max_sandboxes_per_root(uint64_t *ret, lfs_error **err) {
        return env_whole("LAYERFS_TEST_MAX_SANDBOXES_PER_ROOT", 1, LFS_MAX_SANDBOXES_PER_ROOT,
                         LFS_MAX_SANDBOXES_PER_ROOT, ret, err);
}

int lfs_pool_size(uint64_t *ret, lfs_error **err) {
        return env_whole("LAYERFS_POOL", 0, LFS_MAX_POOL, 0, ret, err);
}

/* A size from min to max (bytes); the floor is said in the unit it is written in. */
static int parse_size_limit(const char *what, const char *text, uint64_t min, uint64_t max,
                            const char *why_min, uint64_t *ret, lfs_error **err) {
        uint64_t v = 0;
        int r = lfs_parse_size(what, text, &v, err);
        if (r < 0)
                return r;
        if (v < min || v > max)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "%s '%s' is out of range: give a size from %lluM (%s) to %llu bytes", what,
                                text, (unsigned long long)(min >> 20), why_min, (unsigned long long)max);
        *ret = v;
        return 0;
}

int lfs_parse_limits(const lfs_sandbox_options *o, lfs_sandbox_limits *ret, lfs_error **err) {
        lfs_sandbox_limits l = { 0 };
        int r = 0;
        if (o && o->memory)
                r = parse_size_limit("--memory", o->memory, LFS_MIN_MEMORY, LFS_MAX_MEMORY,
                                     "the Sandbox's daemon runs within it too", &l.memory, err);
        if (r == 0 && o && o->pids)
                r = lfs_parse_whole("--pids", o->pids, LFS_MIN_PIDS, LFS_MAX_PIDS, &l.pids, err);
        if (r == 0 && o && o->cpus) {
                long online = sysconf(_SC_NPROCESSORS_ONLN);
                double max = online > 0 && online < LFS_MAX_CPUS ? (double)online : LFS_MAX_CPUS;
                r = lfs_parse_decimal("--cpus", o->cpus, "number of CPUs", LFS_MIN_CPUS, max, &l.cpus, err);
        }
        if (r == 0 && o && o->disk)
                r = parse_size_limit("--disk", o->disk, LFS_MIN_DISK, LFS_MAX_DISK, "at least a megabyte",
                                     &l.disk, err);
        if (r < 0)
                return r;
        *ret = l;
        return 0;
}
