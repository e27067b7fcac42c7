/*
 * test_fault.c - injected faults (CCOL_FAULT / params.fault): every
 * surviving rank must end with an error naming the faulty rank, within the
 * deadline plus a margin, or succeed when the fault is harmless (a short
 * delay). Processes over tcp and shm (a killed rank must not take the test
 * down) and threads over inproc; over shm both the frames of the rings
 * and the one-hop slots.
 */
#include "harness.h"
#include "outcome.h"

#include <stdio.h>
#include <string.h>

/* Three barriers; the fault fires at operation 2 of the faulty rank. */
static void
body(ccol_comm *c, int rank, void *arg)
{
    ccol_outcome *o = arg;
    double t0 = ccol_test_now();
    ccol_status st = CCOL_OK;

    for (int i = 0; i < 3 && st == CCOL_OK; i++) {
        int64_t v = rank;
        st = i == 1 ? ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM)
                    : ccol_barrier(c);
    }
    ccol_outcome_note(o, rank, st, c, t0);
}

static ccol_outcome *
run(ccol_test_transport t, int size, const char *spec)
{
    ccol_test_job job = { .size = size, .transport = t, .timeout_s = 1 };
    ccol_outcome *o = ccol_test_shared(sizeof *o);

    for (int r = 0; r < size; r++)
        o->status[r] = 99;
    job.params.mask = CCOL_COMM_PARAM_FAULT;
    job.params.fault = spec;
    job.may_die = ~0u; /* kill faults end the faulty rank on purpose */
    ccol_test_ranks(&job, body, o);
    return o;
}

/* Every rank but `faulty` failed with `want`, naming `named`, in time. */
static void
expect_named(const ccol_outcome *o, int size, int faulty, ccol_status want,
             int named)
{
    char needle[32];
    snprintf(needle, sizeof needle, "%d", named);
    for (int r = 0; r < size; r++) {
        if (r == faulty)
            continue;
        CHECK_STATUS((ccol_status)o->status[r], want);
        CHECK_CONTAINS(o->msg[r], needle);
        CHECK(o->took[r] < ccol_test_scale(1.0 + 3.0));
    }
}

CCOL_TEST(tcp_kill_is_peer_named)
{
    ccol_outcome *o = run(CCOL_TEST_TCP, 3, "rank=2,op=2,kind=kill");
    expect_named(o, 3, 2, CCOL_ERR_PEER, 2);
    CHECK_CONTAINS(o->msg[0], "rank 2");
}

CCOL_TEST(tcp_stall_is_timeout_named)
{
    ccol_outcome *o = run(CCOL_TEST_TCP, 3, "rank=1,op=2,kind=stall,ms=2500");
    expect_named(o, 3, 1, CCOL_ERR_TIMEOUT, 1);
    CHECK_CONTAINS(o->msg[0], "missing rank: 1");
}

CCOL_TEST(tcp_corrupt_is_peer_named)
{
    ccol_outcome *o = run(CCOL_TEST_TCP, 3, "rank=1,op=2,kind=corrupt");
    for (int r = 0; r < 3; r++) {
        CHECK_STATUS((ccol_status)o->status[r], CCOL_ERR_PEER);
        CHECK_CONTAINS(o->msg[r], "rank 1");
    }
}

/* Rank 0's result of operation 2 reaches its children damaged: they fail
 * on it and tell rank 0 why before they go, so rank 0 (at operation 3)
 * fails with their words, and no survivor blames a rank for leaving
 * ("rank 1 closed its connection"). */
CCOL_TEST(tcp_corrupt_result_is_named_by_every_rank)
{
    ccol_outcome *o = run(CCOL_TEST_TCP, 3, "rank=0,op=2,kind=corrupt");
    for (int r = 0; r < 3; r++) {
        CHECK_STATUS((ccol_status)o->status[r], CCOL_ERR_PEER);
        CHECK_CONTAINS(o->msg[r], "rank 0 sent a corrupt");
        CHECK(strstr(o->msg[r], "closed its connection") == NULL);
    }
}

CCOL_TEST(tcp_truncate_and_close_are_peer_named)
{
    ccol_outcome *o = run(CCOL_TEST_TCP, 3, "rank=2,op=2,kind=truncate");
    expect_named(o, 3, 2, CCOL_ERR_PEER, 2);
    o = run(CCOL_TEST_TCP, 3, "rank=1,op=3,kind=close");
    expect_named(o, 3, 1, CCOL_ERR_PEER, 1);
}

CCOL_TEST(tcp_drop_is_timeout_named)
{
    /* Rank 1's contribution to operation 2 never arrives. */
    ccol_outcome *o = run(CCOL_TEST_TCP, 3, "rank=1,op=2,kind=drop");
    for (int r = 0; r < 3; r++) {
        CHECK_STATUS((ccol_status)o->status[r], CCOL_ERR_TIMEOUT);
        CHECK_CONTAINS(o->msg[r], "1");
    }
    CHECK_CONTAINS(o->msg[0], "missing rank: 1");
}

CCOL_TEST(short_delay_is_harmless)
{
    ccol_outcome *o = run(CCOL_TEST_TCP, 3, "rank=2,op=2,kind=delay,ms=100");
    for (int r = 0; r < 3; r++)
        CHECK_STATUS((ccol_status)o->status[r], CCOL_OK);
    o = run(CCOL_TEST_INPROC, 8, "rank=5,msg=1,kind=delay,ms=100");
    for (int r = 0; r < 8; r++)
        CHECK_STATUS((ccol_status)o->status[r], CCOL_OK);
}

CCOL_TEST(inproc_faults_are_named)
{
    ccol_outcome *o = run(CCOL_TEST_INPROC, 3, "rank=1,op=2,kind=corrupt");
    for (int r = 0; r < 3; r++) {
        CHECK_STATUS((ccol_status)o->status[r], CCOL_ERR_PEER);
        CHECK_CONTAINS(o->msg[r], "rank 1");
    }
    o = run(CCOL_TEST_INPROC, 3, "rank=2,op=1,kind=close");
    expect_named(o, 3, 2, CCOL_ERR_PEER, 2);
}

/* The same faults over shared memory: a killed rank is noticed by its
 * pid, a closed or truncating one by its departure flag. */
CCOL_TEST(shm_kill_and_stall_are_named)
{
    ccol_outcome *o = run(CCOL_TEST_SHM, 3, "rank=2,op=2,kind=kill");
    expect_named(o, 3, 2, CCOL_ERR_PEER, 2);
    CHECK_CONTAINS(o->msg[0], "rank 2");
    CHECK_CONTAINS(o->msg[0], "died");
    o = run(CCOL_TEST_SHM, 3, "rank=1,op=2,kind=stall,ms=2500");
    expect_named(o, 3, 1, CCOL_ERR_TIMEOUT, 1);
    CHECK_CONTAINS(o->msg[0], "missing rank: 1");
    o = run(CCOL_TEST_SHM, 8, "rank=0,op=3,kind=kill");
    expect_named(o, 8, 0, CCOL_ERR_PEER, 0);
}

CCOL_TEST(shm_frame_faults_are_named)
{
    ccol_outcome *o = run(CCOL_TEST_SHM, 3, "rank=1,op=2,kind=corrupt");
    for (int r = 0; r < 3; r++) {
        CHECK_STATUS((ccol_status)o->status[r], CCOL_ERR_PEER);
        CHECK_CONTAINS(o->msg[r], "rank 1");
    }
    o = run(CCOL_TEST_SHM, 3, "rank=2,op=2,kind=truncate");
    expect_named(o, 3, 2, CCOL_ERR_PEER, 2);
    o = run(CCOL_TEST_SHM, 3, "rank=1,op=3,kind=close");
    expect_named(o, 3, 1, CCOL_ERR_PEER, 1);
    o = run(CCOL_TEST_SHM, 3, "rank=1,op=2,kind=drop");
    for (int r = 0; r < 3; r++)
        CHECK_STATUS((ccol_status)o->status[r], CCOL_ERR_TIMEOUT);
    CHECK_CONTAINS(o->msg[0], "missing rank: 1");
    o = run(CCOL_TEST_SHM, 3, "rank=2,op=2,kind=delay,ms=100");
    for (int r = 0; r < 3; r++)
        CHECK_STATUS((ccol_status)o->status[r], CCOL_OK);
}

/* At two ranks every operation is one slot per rank: the per-message
 * faults act on the slot (message 2 is operation 2's). */
CCOL_TEST(shm_slot_faults_are_named)
{
    ccol_outcome *o = run(CCOL_TEST_SHM, 2, "rank=1,msg=2,kind=corrupt");
    for (int r = 0; r < 2; r++) {
        CHECK_STATUS((ccol_status)o->status[r], CCOL_ERR_PEER);
        CHECK_CONTAINS(o->msg[r], "rank 1 sent a bad slot");
        CHECK_STR_EQ(o->msg[r], o->msg[0]);
    }
    o = run(CCOL_TEST_SHM, 2, "rank=0,op=2,kind=drop");
    for (int r = 0; r < 2; r++) {
        CHECK_STATUS((ccol_status)o->status[r], CCOL_ERR_TIMEOUT);
        CHECK_CONTAINS(o->msg[r], "missing rank: 0");
        CHECK_STR_EQ(o->msg[r], o->msg[0]);
    }
    o = run(CCOL_TEST_SHM, 2, "rank=1,op=2,kind=truncate");
    expect_named(o, 2, 1, CCOL_ERR_PEER, 1);
    CHECK_CONTAINS(o->msg[0], "rank 1 left");
    o = run(CCOL_TEST_SHM, 2, "rank=1,msg=1,kind=delay,ms=100");
    for (int r = 0; r < 2; r++)
        CHECK_STATUS((ccol_status)o->status[r], CCOL_OK);
}

CCOL_TEST(bad_fault_spec_is_rejected)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_FAULT,
                           .fault = "rank=1,kind=explode" };
    ccol_comm *c = NULL;
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "bad fault spec 'rank=1,kind=explode'");
    ccol_comm_destroy(c);
}

CCOL_TEST_MAIN(CCOL_T(tcp_kill_is_peer_named), CCOL_T(tcp_stall_is_timeout_named),
               CCOL_T(tcp_corrupt_is_peer_named),
               CCOL_T(tcp_corrupt_result_is_named_by_every_rank),
               CCOL_T(tcp_truncate_and_close_are_peer_named),
               CCOL_T(tcp_drop_is_timeout_named),
               CCOL_T(short_delay_is_harmless),
               CCOL_T(inproc_faults_are_named),
               CCOL_T(shm_kill_and_stall_are_named),
               CCOL_T(shm_frame_faults_are_named),
               CCOL_T(shm_slot_faults_are_named),
               CCOL_T(bad_fault_spec_is_rejected))
