/* SPDX-License-Identifier: MIT */
/* What a project or a branch may be called. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>

#include "hash.h"
#include "names.h"
#include "util.h"

static bool is_lower_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* SPEC 1: [a-z0-9][a-z0-9._-]{0,62} */
int lfs_check_project_name(const char *name, lfs_error **err) {
        size_t len = name ? strlen(name) : 0;
        bool ok = len >= 1 && len <= 63 && is_lower_alnum(name[0]);
        for (size_t i = 1; ok && i < len; i++)
                ok = is_lower_alnum(name[i]) || name[i] == '.' || name[i] == '_' || name[i] == '-';
        if (!ok)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "project name '%s' is not valid: use 1 to 63 characters of a-z, 0-9, "
                                "'.', '_' or '-', starting with a letter or digit",
                                name ? name : "");
        return 0;
}

/* Like git's ref names, kept simple: components of [A-Za-z0-9._-] separated by '/',
 * none empty or starting with '.', at most 200 characters. */
int lfs_check_branch_name(const char *name, lfs_error **err) {
        size_t len = name ? strlen(name) : 0;
        bool ok = len >= 1 && len <= 200 && name[0] != '-';
        bool component_start = true;
        for (size_t i = 0; ok && i < len; i++) {
                char c = name[i];
                if (c == '/') {
                        ok = !component_start;
                        component_start = true;
                        continue;
                }
                ok = (isascii((unsigned char)c) && isalnum((unsigned char)c)) || c == '.' || c == '_' ||
                     c == '-';
                if (component_start && c == '.')
                        ok = false;
                component_start = false;
        }
        if (ok && (component_start || name[len - 1] == '.'))
                ok = false;
        if (!ok)
                return lfs_fail(err, LFS_INVALID_INPUT, 0,
                                "branch name '%s' is not valid: use letters, digits, '.', '_', '-' "
                                "and '/' between parts (no empty part, no part starting with '.', "
                                "not starting with '-'), at most 200 characters",
                                name ? name : "");
        return 0;
}

char *lfs_branch_dir_name(const char *branch) {
        size_t len = strlen(branch);
        char *key = xmalloc(3 * len + 1), *p = key;
        for (const char *s = branch; *s; s++) {
                if (*s == '/' || *s == '%')
                        p += sprintf(p, "%%%02X", (unsigned char)*s);
                else
                        *p++ = *s;
        }
        *p = 0;
        /* A directory name has at most NAME_MAX bytes; a branch may have 200 of which
         * each '/' takes three here. A longer key keeps its start and ends in "%~" and a
         * hash of the branch: no short key has "%~" in it, so none is confused. */
        if (p - key > NAME_MAX) {
                lfs_id digest;
                char hex[LFS_HEX_LEN + 1];
                lfs_sha256(branch, len, &digest);
                lfs_id_to_hex(&digest, hex);
                snprintf(key + 200, 3 * len + 1 - 200, "%%~%.32s", hex);
        }
        return key;
}
