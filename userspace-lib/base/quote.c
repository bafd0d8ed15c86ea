/* SPDX-License-Identifier: MIT */
#include "quote.h"

#include "json_path.h"
#include "util.h"

/* The code point of a well-formed sequence of n bytes. */
static unsigned code_point(const unsigned char *p, size_t n) {
        if (n == 1)
                return p[0];
        unsigned c = p[0] & (0x7f >> n);
        for (size_t i = 1; i < n; i++)
                c = c << 6 | (p[i] & 0x3f);
        return c;
}

/* Characters that print nothing but change what a terminal shows, or where a line ends:
 * C1 controls (U+009B is CSI on terminals that take C1), the line and paragraph
 * separators, and the marks and overrides of bidirectional text (a name shown in another
 * order than it is: "Trojan Source"). */
static bool invisible_control(unsigned c) {
        return (c >= 0x80 && c <= 0x9f) || c == 0x061c || c == 0x200e || c == 0x200f ||
               (c >= 0x2028 && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069);
}

/* git's short escapes for C0 controls; 0: none (octal). */
static char short_escape(unsigned char c) {
        static const char names[] = "abtnvfr";
        return c >= '\a' && c <= '\r' ? names[c - '\a'] : 0;
}

typedef struct text {
        char *buf;
        size_t len, cap;
} text;

static void put(text *t, const char *s, size_t n) {
        GROW(t->buf, t->cap, t->len + n + 1);
        memcpy(t->buf + t->len, s, n);
        t->len += n;
        t->buf[t->len] = 0;
}

static void put_escaped_byte(text *t, unsigned char c) {
        char esc[8];
        char name = short_escape(c);
        if (name)
                snprintf(esc, sizeof(esc), "\\%c", name);
        else
                snprintf(esc, sizeof(esc), "\\%03o", c);
        put(t, esc, strlen(esc));
}

/* Whether the byte or sequence at p (n bytes; 0: not UTF-8) must be escaped. */
static bool must_escape(const unsigned char *p, size_t n, lfs_quote_style style) {
        if (n == 0)
                return style != LFS_QUOTE_JSON; /* JSON text is UTF-8 already */
        unsigned c = code_point(p, n);
        if (c == '\n' || c == '\t')
                return style == LFS_QUOTE_ENTRY || style == LFS_QUOTE_INLINE;
        if (c < 0x20)
                return style != LFS_QUOTE_JSON; /* JSON escapes them itself */
        if (c == '"' || c == '\\')
                return style == LFS_QUOTE_ENTRY;
        return c == 0x7f || invisible_control(c);
}

char *lfs_quote(const char *s, lfs_quote_style style) {
        const unsigned char *p = (const unsigned char *)(s ? s : "");
        bool quote = false;
        for (const unsigned char *q = p; *q && !quote;) {
                size_t n = lfs_utf8_sequence(q);
                quote = must_escape(q, n, style);
                q += n ? n : 1;
        }
        if (!quote)
                return xstrdup((const char *)p);
        text t = { 0 };
        if (style == LFS_QUOTE_ENTRY)
                put(&t, "\"", 1);
        while (*p) {
                size_t n = lfs_utf8_sequence(p);
                if (!must_escape(p, n, style)) {
                        put(&t, (const char *)p, n ? n : 1);
                        p += n ? n : 1;
                } else if (n == 1 && (*p == '"' || *p == '\\')) {
                        put(&t, "\\", 1);
                        put(&t, (const char *)p, 1);
                        p++;
                } else if (style == LFS_QUOTE_JSON) {
                        /* Every code point it escapes is below U+10000: one \uXXXX. */
                        char esc[8];
                        snprintf(esc, sizeof(esc), "\\u%04x", code_point(p, n));
                        put(&t, esc, strlen(esc));
                        p += n;
                } else {
                        for (size_t i = 0; i < (n ? n : 1); i++)
                                put_escaped_byte(&t, p[i]);
                        p += n ? n : 1;
                }
        }
        if (style == LFS_QUOTE_ENTRY)
                put(&t, "\"", 1);
        return t.buf;
}
