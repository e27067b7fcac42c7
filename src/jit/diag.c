/*
 * diag.c - diagnostics: "file:line:col: error: message", the source line and
 * a caret under the column, written into the module's errmsg.
 *
 * The caret line copies tabs from the source line so the caret lines up in
 * a terminal; lines longer than LINE_MAX bytes are cut.
 */
#include "value.h"

#include <stdio.h>
#include <string.h>

#define LINE_MAX_SHOWN 400

/* Finds line `line` (1-based) of the source; *len excludes the newline. */
static const char *
find_line(const ccol_jit_module *m, int line, size_t *len)
{
    const char *p = m->src, *end = m->src + m->len;
    for (int l = 1; l < line && p < end; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            return NULL;
        p = nl + 1;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *len = (size_t)((nl ? nl : end) - p);
    if (*len > 0 && p[*len - 1] == '\r')
        (*len)--;
    return p;
}

/* Appends the source line and the caret line at `col` to buf. */
static void
put_excerpt(char *buf, size_t cap, const char *src, size_t len, int col)
{
    size_t n = strlen(buf);
    if (len > LINE_MAX_SHOWN)
        len = LINE_MAX_SHOWN;
    snprintf(buf + n, cap - n, "\n%.*s\n", (int)len, src);
    n = strlen(buf);
    for (int i = 1; i < col && n + 2 < cap; i++) {
        /* A tab in the source stays a tab under it, so the caret lines up
         * in a terminal whatever its tab width. */
        bool tab = (size_t)i <= len && src[i - 1] == '\t';
        buf[n++] = tab ? '\t' : ' ';
    }
    if (n + 1 < cap)
        buf[n++] = '^';
    buf[n] = '\0';
}

/* The location prefix is that of compilers, so editors can jump to it. */
void
jit__jit_diag(ccol_jit_module *m, int line, int col, const char *msg)
{
    size_t len = 0;
    const char *src = m->src ? find_line(m, line, &len) : NULL;
    snprintf(m->errmsg, sizeof m->errmsg, "%s:%d:%d: error: %s",
             m->file ? m->file : "<input>", line, col, msg);
    if (src != NULL)
        put_excerpt(m->errmsg, sizeof m->errmsg, src, len, col);
}

/* The formatting under jit__jit_seterr and the session's errors. */
ccol_status
jit__jit_errf(char *buf, size_t cap, ccol_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return st;
}
