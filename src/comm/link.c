/*
 * link.c - what every transport shares (see link.h): the common part of a
 * link instance, the one wording of a missed deadline, and the
 * spin-then-block policy of the waits in memory.
 */
#include "link.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void
ccol__link_init(ccol__link *l, const ccol__link_ops *ops,
                const ccol__link_cfg *cfg)
{
    l->ops = ops;
    l->id = cfg->id;
    l->sent = 0;
    l->received = 0;
    l->faults = cfg->faults;
    l->foreign = false;
}

void
ccol__link_destroy(ccol__link *l, bool foreign)
{
    if (l == NULL)
        return;
    l->foreign = foreign;
    l->ops->destroy(l);
}

void
ccol__link_sub_name(const ccol__link_cfg *cfg, char *out, size_t n)
{
    snprintf(out, n, "sub-%016" PRIx64, cfg->id.comm_id);
}

/* The absent ranks as "1, 3", each followed by what describe says of it
 * (" (last seen in ...)"); returns their number. */
static int
list_absent(ccol__buf *b, const ccol__ident *id, ccol__absent_fn absent,
            ccol__describe_fn describe, const void *ud)
{
    int n = 0;

    for (int r = 0; r < id->size; r++) {
        char why[CCOL__WHAT_MAX + 64];
        if (!absent(ud, r))
            continue;
        ccol__buf_printf(b, "%s%d", n++ ? ", " : "", ccol__id_gr(id, r));
        if (describe != NULL) {
            describe(ud, r, why, sizeof why);
            ccol__buf_printf(b, "%s", why);
        }
    }
    return n;
}

ccol_status
ccol__missed(ccol__err *err, const ccol__ident *id, const char *what,
             double timeout_s, ccol__absent_fn absent,
             ccol__describe_fn describe, const void *ud)
{
    ccol__buf b = { 0 };
    int n = list_absent(&b, id, absent, describe, ud);

    ccol__seterr(err, CCOL_ERR_TIMEOUT,
                 "%s timed out after %.3g s; missing %s: %s", what,
                 timeout_s, n == 1 ? "rank" : "ranks",
                 b.p ? (char *)b.p : "?");
    ccol__buf_free(&b);
    return CCOL_ERR_TIMEOUT;
}

ccol_status
ccol__missed_join(ccol__err *err, const ccol__ident *id, const char *where,
                  double timeout_s, ccol__absent_fn absent, const void *ud)
{
    ccol__buf b = { 0 };

    list_absent(&b, id, absent, NULL, ud);
    ccol__seterr(err, CCOL_ERR_TIMEOUT,
                 "%s: ranks did not join within %.3g s; missing: %s", where,
                 timeout_s, b.p ? (char *)b.p : "?");
    ccol__buf_free(&b);
    return CCOL_ERR_TIMEOUT;
}

/* Yielding instead of pausing when ranks outnumber processors: a spinning
 * rank would otherwise hold the core the rank it waits for needs. */
ccol_status
ccol__spin_setup(int ranks, int64_t *spin_ns, bool *yield, ccol__err *err)
{
    const char *v = getenv("CCOL_SPIN_US");
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    long long us;

    *spin_ns = CCOL__DEFAULT_SPIN_NS;
    *yield = ncpu > 0 && ranks > ncpu;
    if (v == NULL || v[0] == '\0')
        return CCOL_OK;
    if (!ccol__parse_int(v, 0, 1000000, &us))
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "CCOL_SPIN_US='%s' is not a number of "
                            "microseconds in [0, 1000000]",
                            v);
    *spin_ns = (int64_t)us * 1000;
    return CCOL_OK;
}

/* A peer's start (untrusted) moves the deadline earlier only. */
int64_t
ccol__skewed_deadline(int64_t deadline, int64_t mono, int64_t wall,
                      int64_t peer_wall, int64_t t)
{
    /* unsigned: a peer's clock may say anything, and the difference must
     * not overflow */
    uint64_t back = (uint64_t)wall - (uint64_t)peer_wall;
    int64_t d;

    if (peer_wall >= wall)
        return deadline;
    d = back > (uint64_t)(t - t / 4) ? mono + t / 4
                                      : mono + t - (int64_t)back;
    return d < deadline ? d : deadline;
}
