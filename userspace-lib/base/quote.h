/* SPDX-License-Identifier: MIT */
/* Text for output: one helper for every text printer, so that a name cannot forge lines
 * or drive the terminal it is printed on. A path, a command line, a message or a log line
 * may hold what a command chose: newlines (a second entry), escape sequences (OSC, CSI:
 * a terminal's title, colours, a cleared screen), C1 controls (which some terminals
 * take as escapes), line separators and bidirectional overrides (text shown in another
 * order than it is). These are written as C escapes, as git's quotePath does: \n, \t,
 * \033, and octal per byte for the rest ("\302\233"). Printable UTF-8 stays as it is. */
#ifndef LFS_QUOTE_H
#define LFS_QUOTE_H

typedef enum lfs_quote_style {
        /* A path or command line, one entry of a list: as it is when nothing in it needs
         * quoting, else in double quotes with '"' and '\' escaped too (git's
         * quote_c_style), so that the quoted form cannot be mistaken for a plain one. */
        LFS_QUOTE_ENTRY,
        /* Inside a message: escapes only, no quotes added. */
        LFS_QUOTE_INLINE,
        /* Text of several lines (a commit message, a log): as INLINE, keeping '\n' and tabs. */
        LFS_QUOTE_LINES,
        /* JSON text: what JSON leaves raw (DEL, C1 controls, separators, overrides) becomes
         * \uXXXX inside its strings; the value it encodes is unchanged. */
        LFS_QUOTE_JSON,
} lfs_quote_style;

/* s as safe text (malloc'd, never NULL; "" for NULL). */
char *lfs_quote(const char *s, lfs_quote_style style);

#endif
