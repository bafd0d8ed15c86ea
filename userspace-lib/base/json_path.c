/* SPDX-License-Identifier: MIT */
#include "json_path.h"
#include "util.h"

size_t lfs_utf8_sequence(const unsigned char *s) {
        unsigned char c = s[0];
        if (c < 0x80)
                return 1;
        size_t n;
        unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
        if (c >= 0xc2 && c <= 0xdf)
                n = 2;
        else if (c >= 0xe0 && c <= 0xef) {
                n = 3;
                if (c == 0xe0)
                        lo = 0xa0;
                else if (c == 0xed)
                        hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
                n = 4;
                if (c == 0xf0)
                        lo = 0x90;
                else if (c == 0xf4)
                        hi = 0x8f;
        } else
                return 0;
        if (s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if (s[i] < 0x80 || s[i] > 0xbf)
                        return 0;
        return n;
}

bool lfs_is_utf8(const char *s) {
        for (const unsigned char *p = (const unsigned char *)s; *p;) {
                size_t n = lfs_utf8_sequence(p);
                if (!n)
                        return false;
                p += n;
        }
        return true;
}

json_t *lfs_json_path(const char *path) {
        if (lfs_is_utf8(path))
                return json_string(path);
        size_t len = strlen(path);
        char *text = xmalloc(3 * len + 1), *out = text;
        for (const unsigned char *p = (const unsigned char *)path; *p;) {
                size_t n = lfs_utf8_sequence(p);
                if (n) {
                        memcpy(out, p, n);
                        out += n;
                        p += n;
                } else {
                        memcpy(out, "\xef\xbf\xbd", 3); /* U+FFFD */
                        out += 3;
                        p++;
                }
        }
        *out = 0;
        json_t *j = json_string(text);
        free(text);
        return j;
}

void lfs_json_set_path(json_t *obj, const char *key, const char *path) {
        json_object_set_new(obj, key, lfs_json_path(path));
        if (lfs_is_utf8(path))
                return;
        static const char digits[] = "0123456789abcdef";
        size_t len = strlen(path);
        char *hex = xmalloc(2 * len + 1);
        for (size_t i = 0; i < len; i++) {
                hex[2 * i] = digits[(unsigned char)path[i] >> 4];
                hex[2 * i + 1] = digits[(unsigned char)path[i] & 15];
        }
        hex[2 * len] = 0;
        char *bytes_key = xasprintf("%s_bytes", key);
        json_object_set_new(obj, bytes_key, json_string(hex));
        free(bytes_key);
        free(hex);
}

static int hex_value(char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

char *lfs_json_get_path(json_t *obj, const char *key) {
        char *bytes_key = xasprintf("%s_bytes", key);
        const char *hex = json_string_value(json_object_get(obj, bytes_key));
        free(bytes_key);
        if (hex) {
                size_t len = strlen(hex) / 2;
                char *path = xmalloc(len + 1);
                for (size_t i = 0; i < len; i++) {
                        int h = hex_value(hex[2 * i]), l = hex_value(hex[2 * i + 1]);
                        if (h < 0 || l < 0 || (h == 0 && l == 0)) {
                                free(path);
                                return NULL;
                        }
                        path[i] = (char)(h << 4 | l);
                }
                path[len] = 0;
                return path;
        }
        const char *text = json_string_value(json_object_get(obj, key));
        return text ? xstrdup(text) : NULL;
}
