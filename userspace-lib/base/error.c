/* SPDX-License-Identifier: MIT */
/* The one error type: codes and their names (both ways), made with lfs_fail. */
#include "util.h"

static const char *const code_names[] = {
        [LFS_OK] = "OK",
        [LFS_INVALID_INPUT] = "InvalidInput",
        [LFS_UNSUPPORTED] = "Unsupported",
        [LFS_NO_SUCH_PROJECT] = "NoSuchProject",
        [LFS_NO_SUCH_BRANCH] = "NoSuchBranch",
        [LFS_NO_SUCH_SANDBOX] = "NoSuchSandbox",
        [LFS_NOT_MOUNTED] = "NotMounted",
        [LFS_ALREADY_MOUNTED] = "AlreadyMounted",
        [LFS_LIMIT_REACHED] = "LimitReached",
        [LFS_BUSY] = "Busy",
        [LFS_DIRTY] = "Dirty",
        [LFS_CONFLICT] = "Conflict",
        [LFS_PERMISSION_DENIED] = "PermissionDenied",
        [LFS_FAILED] = "Failed",
};

const char *lfs_code_name(lfs_code code) {
        if ((size_t)code < ELEMENTSOF(code_names) && code_names[code])
                return code_names[code];
        return "Failed";
}

lfs_code lfs_code_from_name(const char *name) {
        for (int c = LFS_INVALID_INPUT; c <= LFS_FAILED; c++)
                if (name && !strcmp(lfs_code_name((lfs_code)c), name))
                        return (lfs_code)c;
        return LFS_FAILED;
}

void lfs_error_free(lfs_error *err) {
        if (!err)
                return;
        for (size_t i = 0; i < err->n_paths; i++)
                free(err->paths[i]);
        free(err->paths);
        free(err->message);
        free(err);
}

int lfs_failv(lfs_error **err, lfs_code code, int errnum, const char *fmt, va_list ap) {
        if (errnum < 0)
                errnum = -errnum;
        if (err && !*err) {
                lfs_error *e = xcalloc(1, sizeof(*e));
                e->code = code;
                e->errnum = errnum;
                if (vasprintf(&e->message, fmt, ap) < 0)
                        e->message = xstrdup("(no message: out of memory)");
                *err = e;
        }
        return errnum ? -errnum : -EINVAL;
}

int lfs_fail(lfs_error **err, lfs_code code, int errnum, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        int r = lfs_failv(err, code, errnum, fmt, ap);
        va_end(ap);
        return r;
}

int lfs_error_append(lfs_error **err, const char *fmt, ...) {
        if (!err || !*err)
                return -EINVAL;
        va_list ap;
        va_start(ap, fmt);
        char *more = NULL;
        if (vasprintf(&more, fmt, ap) >= 0) {
                char *m = xasprintf("%s%s", (*err)->message, more);
                free((*err)->message);
                (*err)->message = m;
                free(more);
        }
        va_end(ap);
        return (*err)->errnum ? -(*err)->errnum : -EINVAL;
}

int lfs_fail_conflict(lfs_error **err, char **paths, size_t n, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        bool fresh = err && !*err;
        int r = lfs_failv(err, LFS_CONFLICT, 0, fmt, ap);
        va_end(ap);
        if (fresh) {
                (*err)->paths = paths;
                (*err)->n_paths = n;
        } else {
                for (size_t i = 0; i < n; i++)
                        free(paths[i]);
                free(paths);
        }
        return r;
}
