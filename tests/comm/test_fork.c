/*
 * test_fork.c - a communicator belongs to the process that created it.
 *
 * A rank forks while its job runs (shm, tcp, tcp+shm across two faked
 * hosts, inproc threads, and oob): one child destroys its copy of the
 * communicator and exits, as a child's finalizers would; another tries
 * every operation and must be refused at once with INVALID_ARG naming the
 * owner. Meanwhile the other ranks already wait in the next collective,
 * and afterwards every rank runs every operation again with checked
 * results: the child's destroy must not have marked the rank departed,
 * removed the segment's name, shut a socket down or stolen a byte. Over
 * shm the job's name is then free and a new job of that name runs.
 */
#include "harness.h"

#include "comm/shm.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXR 8

/* What every rank of a job reads. */
typedef struct fork_job {
    ccol_test_job *job;
    unsigned forkers;    /* bit r: rank r forks the two children */
    char host[MAXR][8];  /* CCOL_HOST per rank, for the tcp+shm jobs,
                            which create their own comm */
    char name[64];       /* shm: the name a second job reuses */
} fork_job;

/* A commutative combine: the sum of little-endian int64s. */
static ccol_status
add_i64(void *ud, const void *a, size_t alen, const void *b, size_t blen,
        void **out, size_t *out_len)
{
    int64_t x = 0, y = 0, *s = malloc(sizeof *s);

    (void)ud;
    if (s == NULL)
        return CCOL_ERR_NO_MEMORY;
    if (alen == sizeof x)
        memcpy(&x, a, sizeof x);
    if (blen == sizeof y)
        memcpy(&y, b, sizeof y);
    *s = x + y;
    *out = s;
    *out_len = sizeof *s;
    return CCOL_OK;
}

/* Every operation once, results checked; `round` varies the inputs. */
static void
exercise(ccol_comm *c, int rank, int round)
{
    int size = ccol_comm_size(c);
    uint8_t mine[24], *all = NULL, *b = NULL;
    size_t lens[MAXR], off = 0, blen = 0, jlen = 0;
    int64_t v = rank + round, j = rank * 10, *jr = NULL;
    double d = 0.5 * rank;

    memset(mine, rank + round, sizeof mine);
    CHECK_OK(ccol_allgatherv(c, mine, (size_t)(rank + round) % 24,
                             (void **)&all, lens), c);
    for (int r = 0; r < size && all != NULL; r++) {
        CHECK_EQ(lens[r], (size_t)(r + round) % 24);
        for (size_t i = 0; i < lens[r]; i++)
            CHECK_EQ(all[off + i], r + round);
        off += lens[r];
    }
    CHECK_OK(ccol_bcast(c, round % size, "root", 4, (void **)&b, &blen), c);
    CHECK(blen == 4 && b != NULL && memcmp(b, "root", 4) == 0);
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
    CHECK_EQ(v, (int64_t)size * (size - 1) / 2 + (int64_t)size * round);
    CHECK_OK(ccol_allreduce_f64(c, &d, 1, CCOL_OP_MAX), c);
    CHECK(d == 0.5 * (size - 1));
    CHECK_OK(ccol_join_reduce(c, 9, &j, sizeof j, add_i64, NULL,
                              (void **)&jr, &jlen), c);
    CHECK(jlen == sizeof j && jr != NULL &&
          *jr == 10LL * size * (size - 1) / 2);
    CHECK_OK(ccol_barrier(c), c);
    ccol_free(all);
    ccol_free(b);
    ccol_free(jr);
}

/* In the child: one refused operation, named as the owner's. */
static void
check_refused(ccol_comm *c, ccol_status st, int owner)
{
    char want[96];

    CHECK_STATUS(st, CCOL_ERR_INVALID_ARG);
    snprintf(want, sizeof want, "belongs to process %d (rank %d)", owner,
             ccol_comm_rank(c));
    CHECK_CONTAINS(ccol_comm_errmsg(c), want);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "a forked child");
}

/* The child that uses its copy: every operation is refused. */
static void
child_uses(ccol_comm *c)
{
    int owner = (int)getppid();
    int64_t v = 1;
    double d = 1;
    void *out = NULL;
    size_t lens[MAXR], n = 0;

    check_refused(c, ccol_barrier(c), owner);
    check_refused(c, ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), owner);
    check_refused(c, ccol_allreduce_f64(c, &d, 1, CCOL_OP_SUM), owner);
    check_refused(c, ccol_allgatherv(c, "x", 1, &out, lens), owner);
    check_refused(c, ccol_bcast(c, 0, "x", 1, &out, &n), owner);
    check_refused(c, ccol_join_reduce(c, 9, &v, sizeof v, add_i64, NULL,
                                      &out, &n), owner);
    check_refused(c, ccol_agree_all(c, true, &(bool){ false }), owner);
    CHECK_EQ(v, 1); /* untouched */
    ccol_comm_destroy(c);
}

/* Forks a child running `uses` (or only destroying its copy) and waits
 * for it: its failed checks, printed by the child, count through its exit
 * status. */
static void
fork_child(ccol_comm *c, bool uses)
{
    int before = ccol_test_failures(), st = -1;
    pid_t pid;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        if (uses)
            child_uses(c);
        else
            ccol_comm_destroy(c); /* as a finalizer at exit would */
        _exit(ccol_test_failures() > before ? 1 : 0);
    }
    CHECK(pid > 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* One rank's part: a round, the forks (the others already wait in the
 * next round meanwhile), then more rounds. */
static void
run_rank(ccol_comm *c, int rank, const fork_job *fj)
{
    exercise(c, rank, 0);
    if (fj->forkers & (1u << rank)) {
        fork_child(c, false);
        fork_child(c, true);
    }
    for (int round = 1; round < 4; round++)
        exercise(c, rank, round);
}

static void
body(ccol_comm *c, int rank, void *arg)
{
    run_rank(c, rank, arg);
}

/* The tcp+shm ranks set their host first, then join. */
static void
hier_body(ccol_comm *unused, int rank, void *arg)
{
    fork_job *fj = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;

    (void)unused;
    setenv("CCOL_HOST", fj->host[rank], 1);
    ccol_test_params(fj->job, rank, &p);
    CHECK_OK(ccol_comm_create(&p, &c), c);
    if (ccol_comm_status(c) == CCOL_OK) {
        CHECK_STR_EQ(ccol_comm_transport(c), "tcp+shm");
        run_rank(c, rank, fj);
    }
    ccol_comm_destroy(c);
}

static bool
seg_exists(const char *name)
{
    char path[96];
    int fd;

    ccol__shm_path(name, path, sizeof path);
    fd = shm_open(path, O_RDONLY, 0);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

/* A new job under the first job's name. */
static void
rename_body(ccol_comm *unused, int rank, void *arg)
{
    const fork_job *fj = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;

    (void)unused;
    ccol_test_params(fj->job, rank, &p);
    p.name = fj->name;
    CHECK_OK(ccol_comm_create(&p, &c), c);
    if (ccol_comm_status(c) == CCOL_OK)
        exercise(c, rank, 1);
    ccol_comm_destroy(c);
}

/* A job of `size` ranks over transport t whose ranks in `forkers` fork. */
static void
run_job(ccol_test_transport t, int size, unsigned forkers)
{
    ccol_test_job job = { .size = size, .transport = t };
    fork_job fj = { .job = &job, .forkers = forkers };

    CHECK_EQ(ccol_test_ranks(&job, body, &fj), 0);
    if (t != CCOL_TEST_SHM)
        return;
    /* Rank 0 removed the name once everyone joined, and no child's
     * destroy got in the way: a new job of that name runs. */
    CHECK(!seg_exists(job.name));
    snprintf(fj.name, sizeof fj.name, "%s", job.name);
    {
        ccol_test_job again = { .size = size, .transport = t,
                                .no_comm = true };

        fj.job = &again;
        CHECK_EQ(ccol_test_ranks(&again, rename_body, &fj), 0);
    }
    CHECK(!seg_exists(fj.name));
}

CCOL_TEST(shm_child_leaves_job_intact)
{
    run_job(CCOL_TEST_SHM, 2, 1u);
    run_job(CCOL_TEST_SHM, 3, 1u | 4u);
}

CCOL_TEST(tcp_child_leaves_job_intact)
{
    run_job(CCOL_TEST_TCP, 2, 1u);
    run_job(CCOL_TEST_TCP, 3, 1u | 4u);
}

/* Threads: rank 0 forks while the other thread waits in a collective
 * (holding or about to take the group's lock); the child must not hang
 * on it. */
CCOL_TEST(inproc_child_does_not_hang)
{
    run_job(CCOL_TEST_INPROC, 2, 1u);
    run_job(CCOL_TEST_INPROC, 3, 2u);
}

/* Two hosts "a" and "b" (hosts[r] per rank); leaders and a non-leader
 * fork. */
static void
run_hier(const char *hosts, unsigned forkers)
{
    ccol_test_job job = { .size = (int)strlen(hosts),
                          .transport = CCOL_TEST_TCP, .no_comm = true };
    fork_job fj = { .job = &job, .forkers = forkers };

    for (int r = 0; r < job.size; r++)
        snprintf(fj.host[r], sizeof fj.host[r], "node-%c", hosts[r]);
    CHECK_EQ(ccol_test_ranks(&job, hier_body, &fj), 0);
}

CCOL_TEST(hier_child_leaves_job_intact)
{
    run_hier("aab", 1u);            /* rank 0, leader of a */
    run_hier("aabb", 1u | 2u | 4u); /* both leaders and a non-leader */
}

/* ---- oob: the caller's callbacks act for the parent's job ---- */

/* Calls of the caller's callbacks, counted across processes. */
static int *calls;

static int
one_allgather(void *ctx, const void *send, void *recv, size_t len,
              void **req)
{
    (void)ctx;
    memcpy(recv, send, len);
    *req = NULL;
    calls[0]++;
    return 0;
}

static int
one_test(void *ctx, void *req)
{
    (void)ctx;
    (void)req;
    return 1;
}

static void
one_free(void *ctx, void *req)
{
    (void)ctx;
    (void)req;
}

static void
one_release(void *ctx)
{
    (void)ctx;
    calls[1]++;
}

/* A one-rank oob job: the child's use and destroy call no callback of
 * the caller (no all-gather, no release); the parent's destroy does. */
CCOL_TEST(oob_child_calls_no_callback)
{
    ccol_oob oob = { .allgather = one_allgather, .test = one_test,
                     .free = one_free, .release = one_release,
                     .rank = 0, .size = 1 };
    ccol_comm *c = NULL;
    int64_t v = 5;

    calls = ccol_test_shared(2 * sizeof *calls);
    CHECK_OK(ccol_comm_create_oob(&oob, NULL, &c), c);
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
    CHECK_EQ(v, 5);
    CHECK(calls[0] > 0);
    calls[0] = 0;
    fork_child(c, true);
    fork_child(c, false);
    CHECK_EQ(calls[0], 0);
    CHECK_EQ(calls[1], 0);
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
    ccol_comm_destroy(c);
    CHECK_EQ(calls[1], 1);
}

CCOL_TEST_MAIN(CCOL_T_TIMEOUT(shm_child_leaves_job_intact, 120),
               CCOL_T_TIMEOUT(tcp_child_leaves_job_intact, 120),
               CCOL_T_TIMEOUT(inproc_child_does_not_hang, 120),
               CCOL_T_TIMEOUT(hier_child_leaves_job_intact, 120),
               CCOL_T_TIMEOUT(oob_child_calls_no_callback, 60))
