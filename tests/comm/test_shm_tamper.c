/*
 * test_shm_tamper.c - the shared-memory segment written or truncated from
 * outside the job, while its ranks (processes) run. One rank plays the
 * outsider through its own mapping, at a moment when the bytes it changes
 * are published and not yet read: a flipped byte in another rank's slot
 * (payload, or the fingerprint in its header), a flipped byte in a frame
 * waiting in a ring of the tree engine, the segment cut short. Every rank
 * must end with the same named error, none with CCOL_OK, none by a signal,
 * well within the deadline.
 */
#include "outcome.h"

#include "comm/shm_link.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define TIMEOUT_S 5.0

/* Waits (at most 5 s) until *word reaches at least `want`. */
static bool
await_word(_Atomic uint64_t *word, uint64_t want)
{
    double until = ccol_test_now() + 5;
    struct timespec ts = { 0, 100000 };

    while (atomic_load(word) < want) {
        if (ccol_test_now() > until)
            return false;
        nanosleep(&ts, NULL);
    }
    return true;
}

/* Every rank failed with `want`, the same message containing `needle`,
 * well within the deadline. */
static void
expect_agreed(const ccol_outcome *o, int size, ccol_status want,
              const char *needle)
{
    for (int r = 0; r < size; r++) {
        CHECK_STATUS((ccol_status)o->status[r], want);
        CHECK_CONTAINS(o->msg[r], needle);
        CHECK_STR_EQ(o->msg[r], o->msg[0]);
        CHECK(o->took[r] < TIMEOUT_S / 2);
    }
}

static ccol_outcome *
outcome(void)
{
    ccol_outcome *o = ccol_test_shared(sizeof *o);

    for (int r = 0; r < 8; r++)
        o->status[r] = 99;
    return o;
}

/* ---- slots ---- */

/* What the outsider flips in rank 0's slot. */
static size_t slot_flip_at;

/* Rank 1, before publishing its own slot of the allreduce, flips one
 * byte of rank 0's published one: no rank can have read it yet. */
static void
slot_body(ccol_comm *c, int rank, void *arg)
{
    ccol_outcome *o = arg;
    ccol__shm_link *l = c->link;
    int64_t v = rank + 1;
    double t0;
    ccol_status st;

    CHECK_OK(ccol_barrier(c), c);
    if (rank == 1) {
        uint64_t next = c->seq + 1;
        ccol__shm_slot *s = &l->slots[next & 1]; /* rank 0's */
        CHECK(await_word(&s->seq, next));
        ((uint8_t *)s)[slot_flip_at] ^= 0x01;
    }
    t0 = ccol_test_now();
    st = ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM);
    ccol_outcome_note(o, rank, st, c, t0);
    if (st == CCOL_OK)
        printf("rank %d: allreduce returned %lld\n", rank, (long long)v);
}

static void
run_slot(int size, size_t flip_at)
{
    ccol_test_job job = { .size = size, .transport = CCOL_TEST_SHM,
                          .timeout_s = TIMEOUT_S };
    ccol_outcome *o = outcome();

    slot_flip_at = flip_at;
    CHECK_EQ(ccol_test_ranks(&job, slot_body, o), 0);
    expect_agreed(o, size, CCOL_ERR_PEER,
                  "the shared memory of rank 0's slot was modified from "
                  "outside the job");
    CHECK_CONTAINS(o->msg[0], "(checksum mismatch)");
}

/* Before the checksum the payload flip came back as every rank's result
 * (a forged sum, CCOL_OK), the fingerprint flip as ranks that diverged. */
CCOL_TEST(slot_modified_from_outside_is_named_by_every_rank)
{
    for (int size = 2; size <= 3; size++) {
        run_slot(size, offsetof(ccol__shm_slot, data));
        run_slot(size, offsetof(ccol__shm_slot, arg) + 1);
    }
}

/* ---- rings ---- */

enum { BIG = 4 * CCOL__SLOT_CAP };

/* Rank 0's ring from rank r (its child: the tree is a star). */
static ccol__shm_ring *
ring_from(const ccol__shm_link *l, int r)
{
    return (ccol__shm_ring *)(l->base + l->rings +
                              l->stride * (size_t)(2 * (r - 1)));
}

/* Rank 0 enters late: once the last rank's frame lies whole in its ring,
 * rank 0 flips a payload byte there, then reads it. */
static void
ring_body(ccol_comm *c, int rank, void *arg)
{
    ccol_outcome *o = arg;
    uint8_t *buf = malloc(BIG), *out = NULL;
    size_t lens[3];
    double t0;
    ccol_status st;

    memset(buf, rank + 1, BIG);
    if (rank == 0) {
        ccol__shm_link *l = c->link;
        ccol__shm_ring *r = ring_from(l, c->size - 1);
        uint64_t tail = atomic_load(&r->tail);
        CHECK(await_word(&r->head, tail + CCOL__HDR_SIZE + BIG));
        r->data[(tail + CCOL__HDR_SIZE + 10) & (l->cap - 1)] ^= 0x01;
    }
    t0 = ccol_test_now();
    st = ccol_allgatherv(c, buf, BIG, (void **)&out, lens);
    ccol_outcome_note(o, rank, st, c, t0);
    ccol_free(out);
    free(buf);
}

/* A job past its tree threshold: every operation takes the rings. */
static ccol_test_job
ring_job(int size)
{
    ccol_test_job job = { .size = size, .transport = CCOL_TEST_SHM,
                          .timeout_s = TIMEOUT_S };

    job.params.mask = CCOL_COMM_PARAM_TREE_THRESHOLD;
    job.params.tree_threshold = 1;
    return job;
}

CCOL_TEST(ring_frame_modified_from_outside_is_named_by_every_rank)
{
    for (int size = 2; size <= 3; size++) {
        ccol_test_job job = ring_job(size);
        ccol_outcome *o = outcome();
        char needle[120];

        CHECK_EQ(ccol_test_ranks(&job, ring_body, o), 0);
        snprintf(needle, sizeof needle,
                 "the shared memory of rank %d's ring to rank 0 was "
                 "modified from outside the job (frame body checksum "
                 "mismatch)",
                 size - 1);
        expect_agreed(o, size, CCOL_ERR_PEER, needle);
    }
}

/* ---- truncation ---- */

/* Bytes the outsider leaves of the segment. */
static off_t cut_to;

/* The others wait in the next operation (asleep after their spin) for
 * rank 1, which cuts the segment short first. */
static void
cut_body(ccol_comm *c, int rank, void *arg)
{
    ccol_outcome *o = arg;
    ccol__shm_link *l = c->link;
    double t0;
    ccol_status st;

    CHECK_OK(ccol_barrier(c), c);
    t0 = ccol_test_now();
    if (rank == 1) {
        struct timespec ts = { 0, 100000000 };
        nanosleep(&ts, NULL);
        CHECK(ftruncate(l->fd, cut_to) == 0);
    }
    st = ccol_barrier(c);
    ccol_outcome_note(o, rank, st, c, t0);
}

static void
run_cut(ccol_test_job *job, off_t to)
{
    ccol_outcome *o = outcome();
    char needle[64];

    cut_to = to;
    CHECK_EQ(ccol_test_ranks(job, cut_body, o), 0); /* no rank signalled */
    snprintf(needle, sizeof needle, "was truncated to %lld bytes (expected ",
             (long long)to);
    expect_agreed(o, job->size, CCOL_ERR_IO, needle);
    CHECK_CONTAINS(o->msg[0], "the shared memory segment /ccol-");
}

/* Before the size checks every rank died of SIGBUS. */
CCOL_TEST(segment_truncated_from_outside_is_named_by_every_rank)
{
    for (int size = 2; size <= 3; size++) {
        ccol_test_job job = { .size = size, .transport = CCOL_TEST_SHM,
                              .timeout_s = TIMEOUT_S };
        run_cut(&job, 4096);
        job = ring_job(size);
        run_cut(&job, 0);
    }
}

CCOL_TEST_MAIN(CCOL_T(slot_modified_from_outside_is_named_by_every_rank),
               CCOL_T(ring_frame_modified_from_outside_is_named_by_every_rank),
               CCOL_T(segment_truncated_from_outside_is_named_by_every_rank))
