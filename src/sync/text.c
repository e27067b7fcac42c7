/*
 * text.c - message formatting shared by the sync files: compact rank lists,
 * safe quoting of text that came from other ranks, and log lines that name
 * the rank. Messages name ranks and values, and must stay readable for
 * hundreds of ranks.
 */
#include "sync.h"

#include "../comm/frame.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Consecutive runs of three or more become "a-b"; pairs stay "a, b". */
void
ccol__sync_ranks(ccol__buf *b, const int *ranks, size_t n)
{
    ccol__buf_printf(b, n == 1 ? "rank " : "ranks ");
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && ranks[j + 1] == ranks[j] + 1)
            j++;
        if (i > 0)
            ccol__buf_printf(b, ", ");
        if (j - i >= 2) {
            ccol__buf_printf(b, "%d-%d", ranks[i], ranks[j]);
        } else {
            ccol__buf_printf(b, "%d", ranks[i]);
            if (j > i)
                ccol__buf_printf(b, ", %d", ranks[j]);
        }
        i = j + 1;
    }
}

/* Bytes from other ranks may hold anything: only printable ASCII is
 * copied, so messages stay one readable line. */
void
ccol__sync_text(ccol__buf *b, const char *s, size_t len, size_t max)
{
    size_t n = len < max ? len : max;
    char c;

    for (size_t i = 0; i < n; i++) {
        c = s[i];
        if ((unsigned char)c < 0x20 || (unsigned char)c >= 0x7f)
            c = '?';
        ccol__buf_put(b, &c, 1);
    }
    if (n < len)
        ccol__buf_printf(b, "...");
}

/* Messages are built in a growable buffer, then copied (truncated if
 * needed) into the fixed-size error record. */
ccol_status
ccol__sync_fail_buf(ccol__err *e, ccol_status st, ccol__buf *b,
                    const char *fallback)
{
    ccol__buf_u8(b, 0);
    if (b->oom || b->p == NULL)
        ccol__seterr(e, st, "%s", fallback);
    else
        ccol__seterr(e, st, "%s", (const char *)b->p);
    ccol__buf_free(b);
    return st;
}

ccol_status
ccol__sync_fail_comm(ccol__err *e, ccol_status st, const char *label,
                     const char *msg)
{
    size_t n = strlen(label);

    if (n > CCOL_LABEL_MAX)
        n = CCOL_LABEL_MAX - 3; /* the comm keeps that much, then "..." */
    if (strncmp(msg, label, n) == 0)
        return ccol__seterr(e, st, "%s", msg);
    return ccol__seterr(e, st, "%s: %s", label, msg);
}

/* Formats only when the level passes the filter; every line names the
 * rank ("rank r/n: ") so interleaved multi-rank logs stay readable. */
void
ccol__sync_log(const ccol_sync *sync, ccol_log_level level, const char *fmt,
               ...)
{
    char line[CCOL__ERRMSG_MAX];
    va_list ap;
    int rank = sync->comm ? ccol_comm_rank(sync->comm) : 0;
    int size = sync->comm ? ccol_comm_size(sync->comm) : 1;

    if (!ccol__log_enabled(level))
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    ccol__log(level, "sync", "rank %d/%d: %s", rank, size, line);
}
