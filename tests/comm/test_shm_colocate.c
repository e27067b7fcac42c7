/*
 * test_shm_colocate.c - the co-location rule of the shm wait, fed with
 * processor placements and times instead of a scheduler: which placements
 * count as "every peer on my processor", when a waiter so placed sleeps at
 * once and when it probes (spins anyway, so that the scheduler can move the
 * ranks apart), how the gap between probes grows while the ranks stay
 * together, and that ranks found apart leave the rule at once.
 */
#include "harness.h"

#include "comm/slots.h"

#include <stdlib.h>
#include <string.h>

#define MS 1000000LL

/* A link laid out over plain memory for `size` ranks, with rank r last
 * seen waiting on processor cpus[r] (+ 1, as the control lines keep it). */
static ccol__slots *
placed(int size, const int *cpus, bool yield)
{
    size_t bytes = ccol__slots_bytes(size, true);
    ccol__ident *id = calloc(1, sizeof *id);
    ccol__slots *b = calloc(1, sizeof *b);
    uint8_t *mem = aligned_alloc(CCOL__LINE, bytes);

    memset(mem, 0, bytes);
    id->size = size;
    ccol__slots_locate(b, mem, id, true);
    b->yield = yield;
    for (int r = 0; r < size; r++)
        atomic_store(&ccol__slots_ctl(b, r)->cpu, cpus[r]);
    return b;
}

static void
unplace(ccol__slots *b)
{
    free(b->mem);
    free((void *)(uintptr_t)b->id);
    free(b);
}

CCOL_TEST(peers_here_only_when_every_peer_is_on_my_processor)
{
    const int together[] = { 2, 2, 2 }, split[] = { 2, 1, 2 };
    const int one[] = { 1 }, both[] = { 1, 2 };
    ccol__slots *l = placed(3, together, false);

    CHECK(ccol__slots_peers_here(l, one, 1, 2));
    CHECK(ccol__slots_peers_here(l, both, 2, 2));
    CHECK(!ccol__slots_peers_here(l, one, 1, 1)); /* I moved to cpu 0 */
    CHECK(!ccol__slots_peers_here(l, one, 1, 0)); /* mine unknown */
    CHECK(!ccol__slots_peers_here(l, one, 0, 2)); /* nobody waited for */
    unplace(l);
    l = placed(3, split, false);
    CHECK(!ccol__slots_peers_here(l, one, 1, 2));
    CHECK(!ccol__slots_peers_here(l, both, 2, 2));
    unplace(l);
    /* More ranks than processors: sharing is the rule, so never. */
    l = placed(3, together, true);
    CHECK(!ccol__slots_peers_here(l, both, 2, 2));
    unplace(l);
}

CCOL_TEST(apart_never_sleeps_at_once)
{
    ccol__probe p = { 0 };

    for (int64_t t = 0; t < 100 * MS; t += MS / 100)
        CHECK(!ccol__slots_sleep_at_once(&p, false, t));
    CHECK_EQ(p.gap, 0);
}

/* Together from t0 on: asleep at once for the first gap, then one probe
 * of CCOL__PROBE_NS (spinning), then asleep for twice the gap. */
CCOL_TEST(together_sleeps_at_once_between_probes)
{
    ccol__probe p = { 0 };
    const int64_t t0 = 5000 * MS, g = CCOL__PROBE_GAP_NS;
    const int64_t len = CCOL__PROBE_NS;

    CHECK(ccol__slots_sleep_at_once(&p, true, t0));
    CHECK(ccol__slots_sleep_at_once(&p, true, t0 + g - 1));
    CHECK(!ccol__slots_sleep_at_once(&p, true, t0 + g)); /* probe starts */
    CHECK(!ccol__slots_sleep_at_once(&p, true, t0 + g + len - 1));
    CHECK(ccol__slots_sleep_at_once(&p, true, t0 + g + len)); /* over */
    CHECK_EQ(p.gap, 2 * g);
    CHECK(ccol__slots_sleep_at_once(&p, true, t0 + g + len + 2 * g - 1));
    CHECK(!ccol__slots_sleep_at_once(&p, true, t0 + g + len + 2 * g));
}

/* A job kept on one processor by a real load: the gap doubles up to its
 * bound, so probing costs a small share of the time. */
CCOL_TEST(gap_grows_to_its_bound_while_together)
{
    ccol__probe p = { 0 };
    int64_t probing = 0, step = MS / 100, span = 20000 * MS;

    for (int64_t t = 0; t < span; t += step)
        probing += ccol__slots_sleep_at_once(&p, true, t) ? 0 : step;
    CHECK_EQ(p.gap, CCOL__PROBE_GAP_MAX_NS);
    CHECK(probing > 0);
    CHECK(probing * 20 < span); /* under 5 % */
}

/* Found apart (the scheduler moved a rank during a probe, or the other
 * processor freed up): the rule is left at once, and a later co-location
 * starts again from the shortest gap. */
CCOL_TEST(apart_leaves_the_rule_and_starts_over)
{
    ccol__probe p = { 0 };
    int64_t t = 0;

    for (; t < 3000 * MS; t += MS / 10)
        ccol__slots_sleep_at_once(&p, true, t);
    CHECK(p.gap > CCOL__PROBE_GAP_NS);
    CHECK(!ccol__slots_sleep_at_once(&p, false, t));
    CHECK_EQ(p.gap, 0);
    CHECK_EQ(p.end, 0);
    CHECK(ccol__slots_sleep_at_once(&p, true, t + 1));
    CHECK_EQ(p.gap, CCOL__PROBE_GAP_NS);
    CHECK(!ccol__slots_sleep_at_once(&p, true, t + 1 + CCOL__PROBE_GAP_NS));
}

CCOL_TEST_MAIN(CCOL_T(peers_here_only_when_every_peer_is_on_my_processor),
               CCOL_T(apart_never_sleeps_at_once),
               CCOL_T(together_sleeps_at_once_between_probes),
               CCOL_T(gap_grows_to_its_bound_while_together),
               CCOL_T(apart_leaves_the_rule_and_starts_over))
