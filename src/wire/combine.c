/*
 * combine.c - the join-reduce combine of the compile collective on its
 * bytes: decode two exchange payloads, join them (src/dyn), encode the
 * result canonically. Since the join and the encoding are canonical, the
 * combine is associative and commutative on the bytes.
 */
#include "wire.h"

#include <string.h>

ccol_status
ccol__wire_xchg_combine(void *ud, const void *a, size_t alen,
                        const void *b, size_t blen, void **out,
                        size_t *out_len)
{
    ccol__xchg xa, xb;
    ccol__buf buf = { 0 };
    ccol_status st, sa, sb;

    (void)ud;
    memset(&xa, 0, sizeof xa);
    memset(&xb, 0, sizeof xb);
    sa = ccol__wire_get_xchg(a, alen, &xa, NULL);
    sb = ccol__wire_get_xchg(b, blen, &xb, NULL);
    /* The same status whichever argument is bad (commutative). */
    st = sa == CCOL_OK ? sb : sb == CCOL_OK ? sa : sa < sb ? sa : sb;
    if (st == CCOL_OK)
        st = ccol__xchg_join(&xa, &xb);
    if (st == CCOL_OK)
        st = ccol__wire_put_xchg(&buf, &xa);
    ccol__xchg_free(&xa);
    ccol__xchg_free(&xb);
    if (st != CCOL_OK) {
        ccol__buf_free(&buf);
        return st;
    }
    *out = ccol__buf_take(&buf, out_len);
    return CCOL_OK;
}
