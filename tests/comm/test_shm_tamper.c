/*
 * test_shm_tamper.c - the shared-memory segment written or truncated from
 * outside the job, while its ranks (processes) run. One rank plays the
 * outsider through its own mapping, at a moment when the bytes it changes
 * are published and not yet read: a flipped byte in another rank's slot
 * (payload, or the fingerprint in its header), a flipped byte in a frame
 * waiting in a ring of the tree engine, the segment cut short (also
 * between a rank's size check and its next access, where only the SIGBUS
 * guard stands). Every rank must end with the same named error, none with
 * CCOL_OK, none by a signal, well within the deadline. The guard itself
 * is tested in forked children: a fault on a guarded mapping leaves a
 * mark, any other fault still goes to the application's handler or kills.
 */
#include "outcome.h"

#include "comm/comm.h"
#include "comm/shm_link.h"

#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
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
        CHECK(o->took[r] < ccol_test_scale(TIMEOUT_S / 2));
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
    ccol__shm_link *l = (ccol__shm_link *)c->link;
    int64_t v = rank + 1;
    double t0;
    ccol_status st;

    CHECK_OK(ccol_barrier(c), c);
    if (rank == 1) {
        uint64_t next = c->seq + 1;
        ccol__slot *s = &l->board.slot[next & 1]; /* rank 0's */
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
        run_slot(size, offsetof(ccol__slot, data));
        run_slot(size, offsetof(ccol__slot, arg) + 1);
    }
}

/* Rank 0's slot of an operation published as a later one: an outsider
 * rewrites the word `seq` of rank 0's slot of operation s (an allreduce)
 * to s + 2 (the next allreduce, the same slot by parity), so whoever reads
 * it before rank 0 rewrites the slot takes rank 0's old contribution for
 * its new one. For every rank, rank 0 too, to read it, rank 1 keeps a
 * copy of that slot after s and, once rank 0 has published s + 2 and
 * before rank 1 publishes its own (no rank can have read it yet), puts
 * the copy back and makes the attack's write: the word to s + 2. */
static void
moved_body(ccol_comm *c, int rank, void *arg)
{
    ccol_outcome *o = arg;
    ccol__shm_link *l = (ccol__shm_link *)c->link;
    ccol__slot *kept = malloc(sizeof *kept), *s = NULL;
    int64_t v = rank + 1;
    uint64_t old;
    double t0;
    ccol_status st;

    CHECK(kept != NULL);
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
    old = c->seq;
    s = &l->board.slot[old & 1]; /* rank 0's, of operation old */
    if (rank == 1)
        memcpy(kept, s, sizeof *kept); /* rewritten at old + 2 only */
    CHECK_OK(ccol_barrier(c), c);
    if (rank == 1) {
        CHECK(await_word(&s->seq, old + 2));
        memcpy((uint8_t *)s + sizeof s->seq, (uint8_t *)kept + sizeof s->seq,
               sizeof *s - sizeof s->seq);
        atomic_store(&s->seq, old + 2);
    }
    v = 10 * (rank + 1);
    t0 = ccol_test_now();
    st = ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM);
    ccol_outcome_note(o, rank, st, c, t0);
    if (st == CCOL_OK)
        printf("rank %d: allreduce returned %lld\n", rank, (long long)v);
    free(kept);
}

/* Before the seal covered the sequence number every rank returned CCOL_OK
 * with rank 0's contribution of the earlier allreduce in the sum. */
CCOL_TEST(slot_moved_to_a_later_operation_is_named_by_every_rank)
{
    for (int size = 2; size <= 3; size++) {
        ccol_test_job job = { .size = size, .transport = CCOL_TEST_SHM,
                              .timeout_s = TIMEOUT_S };
        ccol_outcome *o = outcome();

        CHECK_EQ(ccol_test_ranks(&job, moved_body, o), 0);
        expect_agreed(o, size, CCOL_ERR_PEER,
                      "the shared memory of rank 0's slot was modified "
                      "from outside the job during allreduce_i64(sum, n=1) "
                      "#3 (checksum mismatch)");
    }
}

/* ---- rings ---- */

enum { BIG = 4 * CCOL__SLOT_CAP };

/* Rank 0's ring from rank r (its child: the tree is a star). */
static ccol__shm_ring *
ring_from(const ccol__shm_link *l, int r)
{
    return (ccol__shm_ring *)(void *)(l->map + l->rings +
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
        ccol__shm_link *l = (ccol__shm_link *)c->link;
        ccol__shm_ring *r = ring_from(l, ccol_comm_size(c) - 1);
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
/* Rank 1 cuts the segment and goes on as if it had checked just before:
 * its next access faults. */
static bool cut_unseen;

/* The others wait in the next operation (asleep after their spin) for
 * rank 1, which cuts the segment short first. */
static void
cut_body(ccol_comm *c, int rank, void *arg)
{
    ccol_outcome *o = arg;
    ccol__shm_link *l = (ccol__shm_link *)c->link;
    double t0;
    ccol_status st;

    CHECK_OK(ccol_barrier(c), c);
    t0 = ccol_test_now();
    if (rank == 1) {
        struct timespec ts = { 0, 100000000 };
        nanosleep(&ts, NULL);
        CHECK(ftruncate(l->fd, cut_to) == 0);
        if (cut_unseen)
            l->sized_at = ccol__now_ns(); /* its next check is skipped */
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

/* The cut over the slots (4096 bytes left) and over the rings (none
 * left), at 2 and 3 ranks; `unseen` as cut_unseen. */
static void
run_cuts(bool unseen)
{
    cut_unseen = unseen;
    for (int size = 2; size <= 3; size++) {
        ccol_test_job job = { .size = size, .transport = CCOL_TEST_SHM,
                              .timeout_s = TIMEOUT_S };
        run_cut(&job, 4096);
        job = ring_job(size);
        run_cut(&job, 0);
    }
    cut_unseen = false;
}

/* Before the size checks every rank died of SIGBUS. */
CCOL_TEST(segment_truncated_from_outside_is_named_by_every_rank)
{
    run_cuts(false);
}

/* The segment cut between rank 1's size check and its next access: the
 * access faults (SIGBUS), the guard turns that into a mark, and every rank
 * still names the truncation. */
CCOL_TEST(segment_truncated_between_check_and_access)
{
    run_cuts(true);
}

/* ---- the guard alone, in a forked child ---- */

/* A file in /dev/shm of `bytes`, mapped; its name is removed at once. */
static uint8_t *
scratch_map(size_t bytes, int *fd)
{
    char name[64];
    void *p;

    snprintf(name, sizeof name, "/ccol-test-guard-%d", (int)getpid());
    *fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    shm_unlink(name);
    if (*fd < 0 || ftruncate(*fd, (off_t)bytes) != 0)
        return NULL;
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The child's part: 0 when a guarded fault left its mark and the zeros. */
static int
guarded_child(void)
{
    int fd, slot;
    uint8_t *p = scratch_map(1 << 16, &fd);

    if (p == NULL)
        return 10;
    p[40000] = 7;
    slot = ccol__shm_guard_add(p, 1 << 16);
    if (slot < 0 || ccol__shm_guard_cut(slot) || ftruncate(fd, 0) != 0)
        return 11;
    if (*(volatile uint8_t *)(p + 40000) != 0) /* faults, then reads 0 */
        return 12;
    p[50000] = 1; /* writes go nowhere, without a fault */
    if (!ccol__shm_guard_cut(slot))
        return 13;
    ccol__shm_guard_remove(slot);
    munmap(p, 1 << 16);
    return 0;
}

/* A fault on a mapping no guard covers, after a guard was installed. */
static void
unguarded_fault(void)
{
    int fd, gfd;
    uint8_t *g = scratch_map(4096, &gfd), *p = scratch_map(1 << 16, &fd);

    if (g == NULL || p == NULL || ccol__shm_guard_add(g, 4096) < 0 ||
        ftruncate(fd, 0) != 0)
        _exit(20);
    (void)*(volatile uint8_t *)(p + 40000);
    _exit(21); /* not reached: the fault is not ccol's */
}

static void
app_handler(int sig)
{
    (void)sig;
    _exit(42);
}

/* Runs fn in a forked child; returns its wait status. */
static int
in_child(void (*fn)(void))
{
    int st = -1;
    pid_t pid = fork();

    if (pid == 0) {
        fn();
        _exit(0);
    }
    if (pid > 0)
        waitpid(pid, &st, 0);
    return st;
}

static void
guarded_then_exit(void)
{
    _exit(guarded_child());
}

static void
app_handler_first(void)
{
    signal(SIGBUS, app_handler);
    unguarded_fault();
}

/* The default action first (a sanitizer may have installed its own). */
static void
default_first(void)
{
    signal(SIGBUS, SIG_DFL);
    unguarded_fault();
}

CCOL_TEST(guard_turns_a_fault_into_a_mark)
{
    int st = in_child(guarded_then_exit);

    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 0);
}

/* Faults that are not ccol's keep their fate: the application's handler
 * installed before ccol's runs; without one, the process dies of SIGBUS. */
CCOL_TEST(guard_leaves_other_faults_alone)
{
    int st = in_child(app_handler_first);

    CHECK(WIFEXITED(st));
    CHECK_EQ(WEXITSTATUS(st), 42);
    st = in_child(default_first);
    CHECK(WIFSIGNALED(st));
    CHECK_EQ(WTERMSIG(st), SIGBUS);
}

CCOL_TEST_MAIN(CCOL_T(slot_modified_from_outside_is_named_by_every_rank),
               CCOL_T(slot_moved_to_a_later_operation_is_named_by_every_rank),
               CCOL_T(ring_frame_modified_from_outside_is_named_by_every_rank),
               CCOL_T(segment_truncated_from_outside_is_named_by_every_rank),
               CCOL_T(segment_truncated_between_check_and_access),
               CCOL_T(guard_turns_a_fault_into_a_mark),
               CCOL_T(guard_leaves_other_faults_alone))
