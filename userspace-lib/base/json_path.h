/* SPDX-License-Identifier: MIT */
/* Paths in JSON. JSON strings carry only UTF-8 and a path is any bytes but NUL, so a
 * path that is not UTF-8 is written as text with each byte that breaks it replaced by
 * U+FFFD (to show), plus the exact bytes in hex under "<key>_bytes" (to use). */
#pragma once
#include <jansson.h>
#include <stdbool.h>

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), or 0 if the byte at s starts none. */
size_t lfs_utf8_sequence(const unsigned char *s);

/* s is valid UTF-8 (what json_string accepts). */
bool lfs_is_utf8(const char *s);

/* The path as a JSON string, lossy when it is not UTF-8 (never NULL). */
json_t *lfs_json_path(const char *path);

/* obj[key] = the path as text; obj[key + "_bytes"] = its hex when that text is lossy. */
void lfs_json_set_path(json_t *obj, const char *key, const char *path);

/* The exact path lfs_json_set_path stored under key (malloc'd), or NULL if none. */
char *lfs_json_get_path(json_t *obj, const char *key);
