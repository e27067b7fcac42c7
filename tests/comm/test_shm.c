/*
 * test_shm.c - the shared-memory transport beyond the common contract of
 * test_comm.c: the ring reader on hand-made rings (wrap-around, frames
 * split across pumps, corrupt counters and headers), the pure sleeping path
 * (no spinning) and the spinning one, the segment's name removed once
 * everyone joined, a stale segment of a crashed job replaced, a live job's
 * segment refused, ranks that disagree about the world size or claim a rank
 * twice, CCOL_TRANSPORT, and the spin knob's validation; the one-hop
 * slots: their reader on hand-made slots and ccol_outcome, small operations in
 * the slots and large ones handed to the rings, and failures every rank
 * agrees on (ranks in different operations, a killed rank, a stalled one,
 * a combine failing, a rank arriving at the deadline), and a combine that
 * fails on one rank only, which the others' next operation names.
 */
#include "outcome.h"

#include "comm/shm.h"
#include "comm/slots.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the ring reader ---- */

enum { CAP = 256 };

typedef struct test_ring {
    ccol__shm_ring r;
    uint8_t bytes[CAP];
} test_ring;

/* Appends bytes as a producer would, wrapping at the capacity. */
static void
produce(test_ring *t, uint64_t *head, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        t->r.data[(*head + i) % CAP] = p[i];
    *head += n;
    atomic_store(&t->r.head, *head);
}

static uint8_t *
frame_of(size_t payload, size_t *flen)
{
    ccol__ident id = { .rank = 1, .size = 2 };
    ccol__hdr h;
    uint8_t *pl = malloc(payload + 1), *f;

    for (size_t i = 0; i < payload; i++)
        pl[i] = (uint8_t)(i * 13 + 1);
    ccol__hdr_init(&h, &id, CCOL__K_UP, CCOL__OP_ALLGATHERV, 7, 0, 0, "", 0);
    f = ccol__frame_encode(&h, pl, payload, flen);
    free(pl);
    return f;
}

CCOL_TEST(ring_reader_reassembles_across_wraps)
{
    test_ring *t = calloc(1, sizeof *t);
    ccol__shm_asm a;
    uint64_t head = 0, tail = 0;
    ccol_status st = CCOL_OK;
    char why[200];
    size_t flen;
    uint8_t *f = frame_of(200, &flen); /* 312 bytes: larger than the ring */
    int frames = 0;

    memset(&a, 0, sizeof a);
    /* Start near the end of the ring so every frame wraps. */
    head = tail = 3 * CAP - 40;
    atomic_store(&t->r.head, head);
    for (int k = 0; k < 3; k++) {
        size_t off = 0;
        while (off < flen) {
            size_t n = flen - off < 100 ? flen - off : 100;
            ccol__shm_pump p;
            produce(t, &head, f + off, n);
            off += n;
            p = ccol__shm_ring_pump(&t->r, CAP, &tail, 1 << 20, &a, &st,
                                    why, sizeof why);
            CHECK(p == (off == flen ? CCOL__SHM_FRAME : CCOL__SHM_PARTIAL));
            CHECK_EQ(atomic_load(&t->r.tail), tail);
            if (p != CCOL__SHM_FRAME)
                continue;
            frames++;
            CHECK_EQ(a.msg.h.len, 200);
            CHECK_EQ(a.msg.h.seq, 7);
            CHECK(memcmp(a.msg.payload, f + CCOL__HDR_SIZE, 200) == 0);
            ccol__shm_asm_reset(&a);
        }
    }
    CHECK_EQ(frames, 3);
    CHECK(ccol__shm_ring_pump(&t->r, CAP, &tail, 1 << 20, &a, &st, why,
                              sizeof why) == CCOL__SHM_EMPTY);
    free(f);
    free(t);
}

CCOL_TEST(ring_reader_rejects_bad_bytes)
{
    test_ring *t = calloc(1, sizeof *t);
    ccol__shm_asm a;
    uint64_t head = 0, tail = 0;
    ccol_status st = CCOL_OK;
    char why[200];
    size_t flen;
    uint8_t *f = frame_of(10, &flen);

    memset(&a, 0, sizeof a);
    /* A producer counter more than a ring ahead of the consumer. */
    atomic_store(&t->r.head, CAP + 1);
    CHECK(ccol__shm_ring_pump(&t->r, CAP, &tail, 1 << 20, &a, &st, why,
                              sizeof why) == CCOL__SHM_BAD);
    CHECK_STATUS(st, CCOL_ERR_PEER);
    CHECK_CONTAINS(why, "inconsistent");
    /* A counter that went backwards looks the same. */
    tail = 50;
    atomic_store(&t->r.head, 10);
    CHECK(ccol__shm_ring_pump(&t->r, CAP, &tail, 1 << 20, &a, &st, why,
                              sizeof why) == CCOL__SHM_BAD);
    /* A flipped header byte. */
    head = tail = 0;
    f[20] ^= 0x40;
    produce(t, &head, f, flen);
    CHECK(ccol__shm_ring_pump(&t->r, CAP, &tail, 1 << 20, &a, &st, why,
                              sizeof why) == CCOL__SHM_BAD);
    CHECK_CONTAINS(why, "checksum");
    ccol__shm_asm_reset(&a);
    /* A payload above the receiver's limit. */
    free(f);
    f = frame_of(100, &flen);
    head = tail = 0;
    produce(t, &head, f, flen);
    CHECK(ccol__shm_ring_pump(&t->r, CAP, &tail, 64, &a, &st, why,
                              sizeof why) == CCOL__SHM_BAD);
    CHECK_CONTAINS(why, "exceeds the limit");
    ccol__shm_asm_reset(&a);
    free(f);
    free(t);
}

CCOL_TEST(segment_names_are_clean)
{
    char p[96], q[96];
    char uid[32];

    snprintf(uid, sizeof uid, "/ccol-%u-", (unsigned)getuid());
    ccol__shm_path("port-29500", p, sizeof p);
    CHECK(strncmp(p, uid, strlen(uid)) == 0);
    CHECK_CONTAINS(p, "port-29500");
    ccol__shm_path("../a b/c", p, sizeof p);
    CHECK(strchr(p + 1, '/') == NULL);
    CHECK_CONTAINS(p, ".._a_b_c");
    ccol__shm_path("a-very-long-job-name-that-goes-on-and-on-and-on-and-1", p,
                   sizeof p);
    ccol__shm_path("a-very-long-job-name-that-goes-on-and-on-and-on-and-2", q,
                   sizeof q);
    CHECK(strcmp(p, q) != 0);
}

/* ---- jobs ---- */

static void
ops_body(ccol_comm *c, int rank, void *arg)
{
    int64_t v = rank + 1;
    int size = ccol_comm_size(c);
    (void)arg;
    CHECK_STR_EQ(ccol_comm_transport(c), "shm");
    for (int i = 0; i < 50; i++) {
        v = rank + 1;
        CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
        CHECK_EQ(v, (int64_t)size * (size + 1) / 2);
        CHECK_OK(ccol_barrier(c), c);
    }
}

/* Every operation at each size in `sizes` (0-terminated) with
 * CCOL_SPIN_US set to `spin_us`. */
static void
ops_with_spin(const char *spin_us, const int *sizes)
{
    setenv("CCOL_SPIN_US", spin_us, 1);
    for (int i = 0; sizes[i] != 0; i++) {
        ccol_test_job job = { .size = sizes[i], .transport = CCOL_TEST_SHM };
        CHECK_EQ(ccol_test_ranks(&job, ops_body, NULL), 0);
    }
    unsetenv("CCOL_SPIN_US");
}

CCOL_TEST(sleeping_path_without_spinning)
{
    ops_with_spin("0", (const int[]){ 2, 3, 8, 0 });
}

/* A long spin budget: every hand-off between live ranks happens while
 * spinning, the futex path only serves departures. */
CCOL_TEST(spinning_path_with_a_long_budget)
{
    ops_with_spin("1000000", (const int[]){ 2, 3, 0 });
}

CCOL_TEST(spin_knob_is_validated)
{
    ccol_comm_params p = { .mask = CCOL_COMM_PARAM_TRANSPORT |
                                   CCOL_COMM_PARAM_NAME,
                           .transport = CCOL_TRANSPORT_SHM,
                           .name = "knob-test" };
    ccol_comm *c = NULL;

    setenv("CCOL_SPIN_US", "fast", 1);
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_SPIN_US='fast'");
    ccol_comm_destroy(c);
    p.transport = CCOL_TRANSPORT_INPROC; /* the same policy and knob */
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_SPIN_US='fast'");
    ccol_comm_destroy(c);
    p.transport = CCOL_TRANSPORT_SHM;
    unsetenv("CCOL_SPIN_US");
    p.name = NULL;
    p.mask &= ~(uint64_t)CCOL_COMM_PARAM_NAME;
    /* One rank with neither name nor port is a local communicator... */
    CHECK_OK(ccol_comm_create(&p, &c), c);
    CHECK_STR_EQ(ccol_comm_transport(c), "local");
    ccol_comm_destroy(c);
    /* ...two ranks need something to meet by. */
    p.mask |= CCOL_COMM_PARAM_SIZE;
    p.size = 2;
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "needs a job name");
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

/* Removes the name of a job whose rank 0 the test killed. */
static void
drop_segment(const char *name)
{
    char path[96];

    ccol__shm_path(name, path, sizeof path);
    shm_unlink(path);
}

typedef struct name_arg {
    const ccol_test_job *job; /* named by the harness before the fork */
    int *exists;              /* shared: per rank, the name still exists */
} name_arg;

/* Every rank looks for its own job's segment after the first barrier. */
static void
name_body(ccol_comm *c, int rank, void *arg)
{
    name_arg *a = arg;
    CHECK_OK(ccol_barrier(c), c);
    a->exists[rank] = seg_exists(a->job->name);
}

CCOL_TEST(segment_name_is_removed_after_joining)
{
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_SHM };
    name_arg a = { &job, ccol_test_shared(8 * sizeof(int)) };

    for (int r = 0; r < 3; r++)
        a.exists[r] = -1;
    CHECK_EQ(ccol_test_ranks(&job, name_body, &a), 0);
    CHECK(!seg_exists(job.name));
    for (int r = 0; r < 3; r++)
        CHECK_EQ(a.exists[r], 0);
}

/* Params of an shm rank outside the harness. */
static ccol_comm_params
shm_params(const char *name, int rank, int size, double timeout)
{
    ccol_comm_params p;

    memset(&p, 0, sizeof p);
    p.mask = CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE |
             CCOL_COMM_PARAM_TRANSPORT | CCOL_COMM_PARAM_NAME |
             CCOL_COMM_PARAM_TIMEOUT;
    p.rank = rank;
    p.size = size;
    p.transport = CCOL_TRANSPORT_SHM;
    p.name = name;
    p.timeout_s = timeout;
    return p;
}

/* fork() with stdio flushed first, so the child never writes what the
 * parent had buffered a second time. */
static pid_t
fork_flushed(void)
{
    fflush(stdout);
    fflush(stderr);
    return fork();
}

/* Forks a process that joins `name` as `rank` of `size`. With `leave`
 * it then either dies by SIGKILL while waiting for the others (crash) or
 * keeps waiting until the deadline (live), and leaves in order. Without,
 * it exits as soon as it joined, as a crash would (its communicator not
 * destroyed): 0 when it joined, 1 when it did not. */
static pid_t
spawn_rank_how(const char *name, int rank, int size, double timeout,
               bool leave)
{
    pid_t pid;

    pid = fork_flushed();
    if (pid == 0) {
        ccol_comm_params p = shm_params(name, rank, size, timeout);
        ccol_comm *c = NULL;
        bool ok = ccol_comm_create(&p, &c) == CCOL_OK;
        if (leave)
            ccol_comm_destroy(c);
        else if (!ok)
            fprintf(stderr, "rank %d: %s\n", rank, ccol_comm_errmsg(c));
        _exit(ok || leave ? 0 : 1);
    }
    return pid;
}

static pid_t
spawn_rank(const char *name, int rank, int size, double timeout)
{
    return spawn_rank_how(name, rank, size, timeout, true);
}

static void
wait_for_segment(const char *name)
{
    double end = ccol_test_now() + 10;
    while (!seg_exists(name) && ccol_test_now() < end)
        usleep(1000);
}

static void
job2_body(ccol_comm *c, int rank, void *arg)
{
    (void)arg;
    int64_t v = rank;
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
    CHECK_EQ(v, 1);
}

CCOL_TEST(stale_segment_of_a_crashed_job_is_replaced)
{
    char name[64];
    pid_t pid;
    int st;

    snprintf(name, sizeof name, "stale-%d", (int)getpid());
    /* A crashed job: its rank 0 created the segment and died. */
    pid = spawn_rank(name, 0, 2, 30);
    wait_for_segment(name);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    CHECK(seg_exists(name));
    /* A new job of the same name (and another size) runs. Rank 1 of the
     * new job starts first and may map the stale segment. */
    {
        ccol_comm_params p1 = shm_params(name, 1, 2, 10);
        ccol_comm *c0 = NULL;
        pid_t r1;
        r1 = fork_flushed();
        if (r1 == 0) {
            ccol_comm *c1 = NULL;
            int ok = ccol_comm_create(&p1, &c1) == CCOL_OK;
            if (ok) {
                int64_t v = 1;
                ok = ccol_allreduce_i64(c1, &v, 1, CCOL_OP_SUM) == CCOL_OK &&
                     v == 1;
            }
            if (!ok)
                fprintf(stderr, "rank 1: %s\n", ccol_comm_errmsg(c1));
            ccol_comm_destroy(c1);
            _exit(ok ? 0 : 1);
        }
        usleep(50000);
        ccol_comm_params p0 = shm_params(name, 0, 2, 10);
        CHECK_OK(ccol_comm_create(&p0, &c0), c0);
        job2_body(c0, 0, NULL);
        ccol_comm_destroy(c0);
        waitpid(r1, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    CHECK(!seg_exists(name));
}

CCOL_TEST(live_jobs_segment_is_refused)
{
    char name[64];
    ccol_comm_params p;
    ccol_comm *c = NULL;
    pid_t pid;
    int st;

    snprintf(name, sizeof name, "busy-%d", (int)getpid());
    pid = spawn_rank(name, 0, 2, 5); /* waits for rank 1 for 5 s */
    wait_for_segment(name);
    p = shm_params(name, 0, 2, 1);
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_BUSY);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "still running");
    ccol_comm_destroy(c);
    /* A rank claiming the world has 3 ranks is refused by name. */
    p = shm_params(name, 1, 3, 1);
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "world size is 3");
    CHECK_CONTAINS(ccol_comm_errmsg(c), "created with size 2");
    ccol_comm_destroy(c);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    drop_segment(name); /* its killed rank 0 could not */
}

/* Gives the segment of `name` another owner and mode, as a segment some
 * other local user created first would have. */
static void
squat(const char *name, uid_t uid, mode_t mode)
{
    char path[96], file[128];

    ccol__shm_path(name, path, sizeof path);
    snprintf(file, sizeof file, "/dev/shm%s", path);
    CHECK(chown(file, uid, (gid_t)-1) == 0);
    CHECK(chmod(file, mode) == 0);
}

/* Both a joining rank and a second rank 0 refuse the segment, naming who
 * owns it and its mode. */
static void
expect_refused(const char *name, const char *owner)
{
    for (int rank = 1; rank >= 0; rank--) {
        ccol_comm_params p = shm_params(name, rank, 2, 1);
        ccol_comm *c = NULL;
        CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_BUSY);
        CHECK_CONTAINS(ccol_comm_errmsg(c), "is not this user's own");
        CHECK_CONTAINS(ccol_comm_errmsg(c), owner);
        ccol_comm_destroy(c);
    }
}

/* Another local user creates the job's segment name first (a real rank 0
 * of theirs, waiting): this user's ranks never join it, whether its mode
 * lets them write (0666) or it belongs to another uid (run as root, the
 * one way to make such a segment here; skipped with a message as any
 * other user). */
CCOL_TEST(segment_another_user_created_first_is_refused)
{
    char name[64];
    pid_t pid;
    int st;

    snprintf(name, sizeof name, "squat-%d", (int)getpid());
    pid = spawn_rank(name, 0, 2, 5);
    wait_for_segment(name);
    squat(name, geteuid(), 0666);
    expect_refused(name, "mode 0666");
    if (geteuid() == 0) {
        squat(name, 65534, 0600);
        expect_refused(name, "uid 65534");
    } else {
        printf("  (skipped the other-uid case: making a segment owned by "
               "another user needs root)\n");
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    drop_segment(name);
}

/* A job stopped while forming and then killed leaves its segment's name
 * (its rank 0 never got to remove it); the launcher's cleanup after its
 * ranks ended (ccol__shm_forget) removes it, and never the name of a job
 * whose rank 0 lives. */
CCOL_TEST(launcher_forgets_a_killed_jobs_segment_only)
{
    char name[64];
    ccol_comm_params p;
    pid_t pid;
    int st;

    snprintf(name, sizeof name, "forget-%d", (int)getpid());
    p = shm_params(name, 0, 2, 30); /* what the launcher knows of it */
    pid = spawn_rank(name, 0, 2, 30);
    wait_for_segment(name);
    CHECK_EQ(ccol_shm_cleanup(&p), 0); /* its rank 0 lives */
    CHECK(seg_exists(name));
    kill(pid, SIGSTOP);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    CHECK(seg_exists(name));
    CHECK_EQ(ccol_shm_cleanup(&p), 1);
    CHECK(!seg_exists(name));
    CHECK_EQ(ccol_shm_cleanup(&p), 0); /* nothing left to remove */
}

/* torchrun's SIGTERM to a rank 0 whose job is still forming (issue 47):
 * the name goes with it, and the process still dies of SIGTERM. */
CCOL_TEST(sigterm_while_forming_removes_the_name)
{
    char name[64];
    pid_t pid;
    int st;

    snprintf(name, sizeof name, "term-%d", (int)getpid());
    pid = spawn_rank(name, 0, 2, 30);
    wait_for_segment(name);
    CHECK(seg_exists(name));
    kill(pid, SIGTERM);
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    CHECK(!seg_exists(name));
    drop_segment(name);
}

/* The sweep at the next job: names of the prefix whose rank 0 is gone
 * go; a forming job's name (its rank 0 lives) stays; a bad prefix
 * removes nothing. */
CCOL_TEST(sweep_removes_only_names_whose_rank_0_is_gone)
{
    char dead[64], live[64], prefix[48];
    pid_t a, b;
    int st;

    snprintf(prefix, sizeof prefix, "sweep-%d-", (int)getpid());
    snprintf(dead, sizeof dead, "%sdead", prefix);
    snprintf(live, sizeof live, "%slive", prefix);
    a = spawn_rank(dead, 0, 2, 30);
    b = spawn_rank(live, 0, 2, 30);
    wait_for_segment(dead);
    wait_for_segment(live);
    kill(a, SIGKILL); /* no handler runs: the name stays */
    waitpid(a, &st, 0);
    CHECK(seg_exists(dead));
    CHECK_EQ(ccol_shm_sweep(""), 0u);
    CHECK_EQ(ccol_shm_sweep("a/b"), 0u);
    CHECK_EQ(ccol_shm_sweep("x-too-long-prefix-of-thirty-three"), 0u);
    CHECK(seg_exists(dead));
    CHECK_EQ(ccol_shm_sweep(prefix), 1u);
    CHECK(!seg_exists(dead) && seg_exists(live));
    CHECK_EQ(ccol_shm_sweep(prefix), 0u);
    kill(b, SIGKILL);
    waitpid(b, &st, 0);
    CHECK_EQ(ccol_shm_sweep(prefix), 1u);
    CHECK(!seg_exists(live));
}

CCOL_TEST(rank_claimed_twice_is_refused)
{
    char name[64];
    pid_t pid;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    int st;

    snprintf(name, sizeof name, "dup-%d", (int)getpid());
    pid = spawn_rank(name, 0, 3, 5);
    wait_for_segment(name);
    pid_t r1 = spawn_rank(name, 1, 3, 5);
    usleep(200000);
    p = shm_params(name, 1, 3, 1);
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "rank 1 joined twice");
    ccol_comm_destroy(c);
    kill(pid, SIGKILL);
    kill(r1, SIGKILL);
    waitpid(pid, &st, 0);
    waitpid(r1, &st, 0);
    drop_segment(name);
}

/* Forks a rank of `name` (deadline `secs`) that exits 0 once it joined
 * and passed a barrier with the others; else 2 when its error contains
 * `want` (NULL: never), 1 otherwise. A failed rank leaves as a crash would
 * (its communicator not destroyed) unless `destroy`. */
static pid_t
spawn_member_how(const char *name, int rank, int size, double secs,
                 const char *want, bool destroy)
{
    pid_t pid;

    pid = fork_flushed();
    if (pid == 0) {
        ccol_comm_params p = shm_params(name, rank, size, secs);
        ccol_comm *c = NULL;
        int ok = ccol_comm_create(&p, &c) == CCOL_OK &&
                 ccol_barrier(c) == CCOL_OK;
        const char *msg = ccol_comm_errmsg(c);
        if (!ok && want != NULL && strstr(msg, want) != NULL) {
            if (destroy)
                ccol_comm_destroy(c);
            _exit(2);
        }
        if (!ok)
            fprintf(stderr, "rank %d: %s\n", rank, msg);
        ccol_comm_destroy(c);
        _exit(ok ? 0 : 1);
    }
    return pid;
}

static pid_t
spawn_member_t(const char *name, int rank, int size, double secs,
               const char *want)
{
    return spawn_member_how(name, rank, size, secs, want, false);
}

static pid_t
spawn_member(const char *name, int rank, int size)
{
    return spawn_member_t(name, rank, size, 20, NULL);
}

/* Exit status of child pid, -1 unless it exited. */
static int
exit_status(pid_t pid)
{
    int st;

    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

/* A rank killed while the job was still joining starts again: its new
 * process takes over the dead one's line and the job forms. */
CCOL_TEST(rank_restarted_while_joining_takes_its_line_back)
{
    char name[64];
    pid_t r0, r1, r2;
    int st;

    snprintf(name, sizeof name, "restart-%d", (int)getpid());
    r0 = spawn_member(name, 0, 3);
    wait_for_segment(name);
    r1 = spawn_member(name, 1, 3);
    usleep(300000); /* it claimed its line and waits for rank 2 */
    kill(r1, SIGKILL);
    waitpid(r1, &st, 0);
    /* Rank 2 joins first: every line is claimed, but the job must not
     * form around the dead claimant of line 1; it waits for the restart. */
    r2 = spawn_member(name, 2, 3);
    usleep(300000);
    r1 = spawn_member(name, 1, 3); /* the restart */
    CHECK(exit_status(r0) == 0);
    CHECK(exit_status(r1) == 0);
    CHECK(exit_status(r2) == 0);
    CHECK(!seg_exists(name)); /* everyone joined: rank 0 dropped it */
}

/* A rank killed while joining and never restarted: the others time out
 * at the join's deadline naming it as missing. */
CCOL_TEST(rank_killed_while_joining_is_named_at_the_deadline)
{
    char name[64];
    pid_t r0, r1, r2;
    int st;

    snprintf(name, sizeof name, "killed-%d", (int)getpid());
    r0 = spawn_member_t(name, 0, 3, 2, "missing: 1");
    wait_for_segment(name);
    r1 = spawn_member_t(name, 1, 3, 2, NULL);
    usleep(300000);
    kill(r1, SIGKILL);
    waitpid(r1, &st, 0);
    r2 = spawn_member_t(name, 2, 3, 1.5, "missing: 1");
    CHECK(exit_status(r0) == 2);
    CHECK(exit_status(r2) == 2);
    drop_segment(name); /* its rank 0 exited without destroying */
}

/* Rank 0 gives up before the job formed: a rank still joining says that
 * the rank 0 that created the segment is gone, not that it never made one. */
CCOL_TEST(rank_0_gone_before_the_job_formed_is_named)
{
    char name[64];
    pid_t r0, r1;

    snprintf(name, sizeof name, "gone0-%d", (int)getpid());
    r0 = spawn_member_t(name, 0, 3, 0.5, "missing: 2");
    wait_for_segment(name);
    r1 = spawn_member_t(name, 1, 3, 1.5, "which created it, is gone");
    CHECK(exit_status(r0) == 2);
    CHECK(exit_status(r1) == 2);
    drop_segment(name); /* its rank 0 exited without destroying */
}

/* Rank 0 gives up first (its deadline comes first: it started a little
 * earlier) and leaves as a failed join does, destroying its communicator,
 * while rank 1 still waits: rank 1 names the rank both waited for at
 * once. The name is gone and its creator too, as with a crashed job's
 * segment, but a rank 0 that left says so in its line: nothing new will
 * come, so looking for a new segment would only end in "none to join". */
CCOL_TEST(rank_0_giving_up_first_names_the_missing_rank)
{
    char name[64];
    pid_t r0, r1;

    snprintf(name, sizeof name, "gaveup0-%d", (int)getpid());
    r0 = spawn_member_how(name, 0, 3, 0.5, "missing: 2", true);
    wait_for_segment(name);
    r1 = spawn_member_how(name, 1, 3, 3,
                          "gave up waiting first and left): ranks did not "
                          "join within 3 s; missing: 2",
                          true);
    CHECK(exit_status(r0) == 2);
    CHECK(exit_status(r1) == 2);
    CHECK(!seg_exists(name)); /* rank 0 removed it as it left */
}

/* Waits (up to 10 s) until rank r's control line in the segment `name`
 * says joined and holds its pid (the claim stores the state first, then
 * the pid); false if it never does. The line is line 1 + r of the
 * segment: its first word the state, its second the pid. */
static bool
wait_for_line(const char *name, int r)
{
    char path[96];
    double end = ccol_test_now() + 10;
    bool joined = false;

    ccol__shm_path(name, path, sizeof path);
    while (!joined && ccol_test_now() < end) {
        int fd = shm_open(path, O_RDONLY, 0);
        size_t len = (size_t)CCOL__LINE * (size_t)(2 + r);
        void *map = MAP_FAILED;
        struct stat sb;
        if (fd >= 0 && fstat(fd, &sb) == 0 && (size_t)sb.st_size >= len)
            map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (map != MAP_FAILED) {
            const ccol__rank_ctl *k = (const ccol__rank_ctl *)
                (const void *)((const char *)map + CCOL__LINE * (1 + r));
            joined = atomic_load(&k->state) == CCOL__RANK_JOINED &&
                     atomic_load(&k->pid) > 0;
            munmap(map, len);
        }
        if (fd >= 0)
            close(fd);
        if (!joined)
            usleep(1000);
    }
    return joined;
}

/* Forks a rank of `name` that joins and passes a barrier (deadline
 * `secs`): 2 when either fails with status `want` and a message naming
 * `named`, 0 when both pass, 1 otherwise. */
static pid_t
spawn_expecting(const char *name, int rank, int size, double secs,
                ccol_status want, const char *named)
{
    pid_t pid;

    pid = fork_flushed();
    if (pid == 0) {
        ccol_comm_params p = shm_params(name, rank, size, secs);
        ccol_comm *c = NULL;
        ccol_status st = ccol_comm_create(&p, &c);
        if (st == CCOL_OK)
            st = ccol_barrier(c);
        if (st == CCOL_OK)
            _exit(0);
        if (st == want && strstr(ccol_comm_errmsg(c), named) != NULL)
            _exit(2);
        fprintf(stderr, "rank %d: %s\n", rank, ccol_comm_errmsg(c));
        _exit(1);
    }
    return pid;
}

/* Rank 0 is held (SIGSTOP) between creating the segment and seeing the
 * others join; ranks 1 and 2 join, the job forms, and rank 2 dies at
 * once. Rank 0, let go, finds rank 2 joined with a dead pid, which alone
 * looks like a rank killed while joining (waited for, to be taken over by
 * its restart). The job formed, so rank 0 joins and names rank 2 as a
 * dead peer at its first operation, not at its 20 s deadline as missing
 * from the join. Rank 1 names rank 2 (in its barrier) before rank 0 is let
 * go: a rank 1 still polling its join after rank 0 had failed and exited
 * could no longer trust the mark (rank 0 gone) and would fail as a join
 * that rank 0 left, naming rank 2 as missing. */
CCOL_TEST(a_rank_dead_after_the_job_formed_is_a_peer_to_a_late_rank_0)
{
    char name[64];
    pid_t r0, r1, r2;

    snprintf(name, sizeof name, "late0-%d", (int)getpid());
    r0 = spawn_expecting(name, 0, 3, 20, CCOL_ERR_PEER, "rank 2");
    wait_for_segment(name);
    CHECK(wait_for_line(name, 0));
    kill(r0, SIGSTOP);
    r1 = spawn_expecting(name, 1, 3, 20, CCOL_ERR_PEER, "rank 2");
    r2 = spawn_rank_how(name, 2, 3, 20, false);
    CHECK(exit_status(r2) == 0);
    CHECK(exit_status(r1) == 2);
    kill(r0, SIGCONT);
    CHECK(exit_status(r0) == 2);
    drop_segment(name); /* no-op when rank 0 removed it */
}

/* Bytes of memory a job's segment holds (its allocated blocks). */
static long long
seg_memory(const char *name)
{
    char path[96];
    struct stat sb;
    int fd;
    long long n = -1;

    ccol__shm_path(name, path, sizeof path);
    fd = shm_open(path, O_RDONLY, 0);
    if (fd >= 0 && fstat(fd, &sb) == 0)
        n = (long long)sb.st_blocks * 512;
    if (fd >= 0)
        close(fd);
    return n;
}

/* A world size alone costs no memory: a 5,000-rank job's segment holds
 * its control lines until ranks come, and each rank adds its own rings
 * (it used to reserve 640 MB at once). */
CCOL_TEST(segment_memory_grows_with_the_ranks_that_join)
{
    char name[64];
    pid_t r0, r1;
    long long empty, one;
    int st;

    snprintf(name, sizeof name, "huge-%d", (int)getpid());
    r0 = spawn_rank(name, 0, 5000, 3);
    wait_for_segment(name);
    usleep(100000);
    empty = seg_memory(name);
    r1 = spawn_rank(name, 1, 5000, 3);
    usleep(300000);
    one = seg_memory(name);
    CHECK(empty > 0 && empty < (4 << 20));
    CHECK(one - empty >= 2 * (64 << 10) && one < (8 << 20));
    kill(r0, SIGKILL);
    kill(r1, SIGKILL);
    waitpid(r0, &st, 0);
    waitpid(r1, &st, 0);
    {
        char path[96];
        ccol__shm_path(name, path, sizeof path);
        shm_unlink(path); /* the killed job's name */
    }
}

/* A segment that cannot be sized (here: the file size limit) is an IO
 * error naming /dev/shm, and its name does not stay behind. */
CCOL_TEST(failed_create_leaves_no_name)
{
    char name[64];
    pid_t pid;
    int st;

    snprintf(name, sizeof name, "toolarge-%d", (int)getpid());
    pid = fork_flushed();
    if (pid == 0) {
        struct rlimit rl = { 1 << 16, 1 << 16 };
        ccol_comm_params p = shm_params(name, 0, 40, 1);
        ccol_comm *c = NULL;
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &rl);
        st = ccol_comm_create(&p, &c) == CCOL_ERR_IO &&
             strstr(ccol_comm_errmsg(c), "/dev/shm") != NULL;
        if (!st)
            fprintf(stderr, "got: %s\n", ccol_comm_errmsg(c));
        ccol_comm_destroy(c);
        _exit(st ? 0 : 1);
    }
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
          WEXITSTATUS(st) == 0);
    CHECK(!seg_exists(name));
}

CCOL_TEST(missing_rank_0_is_named_at_join)
{
    ccol_comm_params p = shm_params("nobody-home", 1, 2, 0.3);
    ccol_comm *c = NULL;

    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_TIMEOUT);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "missing: 0");
    ccol_comm_destroy(c);
}

/* CCOL_TRANSPORT picks the transport of ccol_comm_create_env; the port
 * names the job. */
CCOL_TEST(environment_selects_shm)
{
    ccol_comm *c = NULL;
    pid_t pid;
    int st;
    char port[16];

    snprintf(port, sizeof port, "%d", 20000 + (int)(getpid() % 20000));
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_PORT", port, 1);
    setenv("CCOL_TRANSPORT", "carrier-pigeon", 1);
    setenv("RANK", "0", 1);
    CHECK_STATUS(ccol_comm_create_env(NULL, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_TRANSPORT='carrier-pigeon'");
    CHECK_CONTAINS(ccol_comm_errmsg(c), "inproc, tcp or shm");
    ccol_comm_destroy(c);
    setenv("CCOL_TRANSPORT", "shm", 1);
    pid = fork_flushed();
    if (pid == 0) {
        ccol_comm *d = NULL;
        int64_t v = 1;
        setenv("RANK", "1", 1);
        int ok = ccol_comm_create_env(NULL, &d) == CCOL_OK &&
                 ccol_allreduce_i64(d, &v, 1, CCOL_OP_SUM) == CCOL_OK &&
                 v == 1 && strcmp(ccol_comm_transport(d), "shm") == 0;
        ccol_comm_destroy(d);
        _exit(ok ? 0 : 1);
    }
    CHECK_OK(ccol_comm_create_env(NULL, &c), c);
    CHECK_STR_EQ(ccol_comm_transport(c), "shm");
    job2_body(c, 0, NULL);
    ccol_comm_destroy(c);
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    unsetenv("CCOL_TRANSPORT");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("MASTER_PORT");
}

/* ---- the one-hop slots ---- */

CCOL_TEST(slot_reader_rejects_bad_slots)
{
    ccol__slot *s = calloc(1, sizeof *s);
    ccol__verdict *v = calloc(1, sizeof *v);
    ccol__slot_view view;
    ccol__err err;
    char why[200], label[CCOL__LABEL_BUF];

    CHECK_STATUS(ccol__slot_read(s, 7, &view, why, sizeof why),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(why, "modified from outside the job (checksum mismatch)");
    CHECK(view.modified);
    ccol__slot_seal(s, 7);
    CHECK_STATUS(ccol__slot_read(s, 7, &view, why, sizeof why),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(why, "names operation 0");
    CHECK(!view.modified);
    s->op = CCOL__OP_BARRIER;
    s->flags = 6;
    ccol__slot_seal(s, 7);
    CHECK_STATUS(ccol__slot_read(s, 7, &view, why, sizeof why),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(why, "unknown flags 0x6");
    s->flags = 0;
    s->len = CCOL__SLOT_CAP + 1;
    ccol__slot_seal(s, 7);
    CHECK_STATUS(ccol__slot_read(s, 7, &view, why, sizeof why),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(why, "claims 1025 payload bytes");
    s->flags = CCOL__SLOT_BIG; /* the real size of a contribution */
    ccol__slot_seal(s, 7);
    CHECK_OK(ccol__slot_read(s, 7, &view, why, sizeof why), NULL);
    CHECK_EQ(view.len, (uint32_t)CCOL__SLOT_CAP + 1);
    /* Every sealed byte counts: the header and the payload; the label
     * (read only for messages) and what lies past the payload do not. */
    s->flags = 0;
    s->len = 3;
    snprintf(s->label, sizeof s->label, "step");
    memcpy(s->data, "abcd", 4);
    ccol__slot_seal(s, 7);
    CHECK_OK(ccol__slot_read(s, 7, &view, why, sizeof why), NULL);
    s->data[3] = 'x';
    s->label[0] = 'x';
    CHECK_OK(ccol__slot_read(s, 7, &view, why, sizeof why), NULL);
    for (size_t off = 8; off < offsetof(ccol__slot, data) + 3; off++) {
        uint8_t *b = (uint8_t *)s + off;
        if (off >= offsetof(ccol__slot, pad0) &&
            off < offsetof(ccol__slot, data))
            continue; /* padding and label */
        *b ^= 0x10;
        CHECK_STATUS(ccol__slot_read(s, 7, &view, why, sizeof why),
                     CCOL_ERR_PEER);
        CHECK(view.modified);
        *b ^= 0x10;
    }
    /* The sequence number counts too: a slot sealed for operation 7 is
     * modified when read as operation 9's (its `seq` word moved on), and
     * as 5's; the word itself is not read. */
    s->seq = 9;
    CHECK_OK(ccol__slot_read(s, 7, &view, why, sizeof why), NULL);
    CHECK_STATUS(ccol__slot_read(s, 9, &view, why, sizeof why),
                 CCOL_ERR_PEER);
    CHECK(view.modified);
    CHECK_CONTAINS(why, "(checksum mismatch)");
    CHECK_STATUS(ccol__slot_read(s, 5, &view, why, sizeof why),
                 CCOL_ERR_PEER);
    CHECK(view.modified);
    ccol__slot_seal(s, 9);
    CHECK_OK(ccol__slot_read(s, 9, &view, why, sizeof why), NULL);
    memset(s->label, 'a', sizeof s->label); /* no NUL anywhere */
    s->label[2] = '\n';
    ccol__slot_label(s, label);
    CHECK_EQ(strlen(label), (size_t)CCOL__LABEL_MAX); /* the whole field */
    CHECK(label[2] == '?');
    /* A verdict that is not a failure, or has no NUL, stays bounded. */
    v->code = 3;
    memset(v->msg, 'x', sizeof v->msg);
    v->msg[5] = '\x01';
    ccol__verdict_read(v, &err);
    CHECK_STATUS(err.code, CCOL_ERR_PEER);
    CHECK_EQ(strlen(err.msg), sizeof err.msg - 1);
    CHECK(err.msg[5] == '?');
    v->code = CCOL_ERR_TIMEOUT;
    snprintf(v->msg, sizeof v->msg, "barrier #2 timed out");
    ccol__verdict_read(v, &err);
    CHECK_STATUS(err.code, CCOL_ERR_TIMEOUT);
    CHECK_STR_EQ(err.msg, "barrier #2 timed out");
    free(s);
    free(v);
}

/* A barrier costs each rank one slot header and nothing on the rings;
 * a contribution over a slot takes the rings, for every rank, and the
 * next small one is back in the slots. */
static void
slot_body(ccol_comm *c, int rank, void *arg)
{
    uint64_t sent = 0, got = 0, sent2 = 0;
    size_t mine = rank == 1 ? CCOL__SLOT_CAP + 1 : CCOL__SLOT_CAP, lens[3];
    uint8_t *buf = calloc(1, mine), *out = NULL;
    int64_t v = rank;
    (void)arg;

    CHECK_OK(ccol_barrier(c), c);
    ccol_comm_traffic(c, &sent, &got);
    CHECK_EQ(sent, (uint64_t)offsetof(ccol__slot, data));
    CHECK_EQ(got, (uint64_t)offsetof(ccol__slot, data) *
                      (uint64_t)(ccol_comm_size(c) - 1));
    memset(buf, rank + 1, mine);
    CHECK_OK(ccol_allgatherv(c, buf, mine, (void **)&out, lens), c);
    CHECK_EQ(lens[0], (size_t)CCOL__SLOT_CAP);
    CHECK_EQ(lens[1], (size_t)CCOL__SLOT_CAP + 1);
    CHECK(out != NULL && out[0] == 1 && out[CCOL__SLOT_CAP] == 2);
    ccol_free(out);
    ccol_comm_traffic(c, &sent, NULL);
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_MAX), c);
    CHECK_EQ(v, (int64_t)ccol_comm_size(c) - 1);
    ccol_comm_traffic(c, &sent2, NULL);
    CHECK_EQ(sent2 - sent, (uint64_t)offsetof(ccol__slot, data) + 8);
    free(buf);
}

CCOL_TEST(slots_carry_small_operations_and_hand_large_ones_over)
{
    for (int size = 2; size <= 3; size++) {
        ccol_test_job job = { .size = size, .transport = CCOL_TEST_SHM };
        CHECK_EQ(ccol_test_ranks(&job, slot_body, NULL), 0);
    }
}


static ccol_outcome *
run_verdicts(int size, double timeout_s, unsigned may_die, ccol_rank_fn fn)
{
    ccol_test_job job = { .size = size, .transport = CCOL_TEST_SHM,
                          .timeout_s = timeout_s, .may_die = may_die };
    ccol_outcome *o = ccol_test_shared(sizeof *o);

    for (int r = 0; r < 8; r++)
        o->status[r] = 99;
    ccol_test_ranks(&job, fn, o);
    return o;
}

/* Every rank in `ranks` got status `want` and the very same message. */
static void
expect_agreed(const ccol_outcome *o, int size, int skip, ccol_status want,
              const char *needle)
{
    int first = skip == 0 ? 1 : 0;
    for (int r = 0; r < size; r++) {
        if (r == skip)
            continue;
        CHECK_STATUS((ccol_status)o->status[r], want);
        CHECK_CONTAINS(o->msg[r], needle);
        CHECK_STR_EQ(o->msg[r], o->msg[first]);
    }
}

/* Rank 1 reduces two values, rank 0 one: different operations. */
static void
count_diverge_body(ccol_comm *c, int rank, void *arg)
{
    int64_t v[2] = { 1, 2 };
    double t0 = ccol_test_now();

    ccol_comm_set_label(c, rank == 1 ? "guard g" : "guard f");
    ccol_outcome_note(arg, rank,
                      ccol_allreduce_i64(c, v, rank == 1 ? 2 : 1,
                                         CCOL_OP_SUM),
                      c, t0);
    CHECK_STATUS(ccol_barrier(c), CCOL_ERR_DIVERGED); /* poisoned */
}

/* Rank 1 dies before its second operation. */
static void
killed_body(ccol_comm *c, int rank, void *arg)
{
    double t0;
    CHECK_OK(ccol_barrier(c), c);
    if (rank == 1)
        raise(SIGKILL);
    t0 = ccol_test_now();
    ccol_outcome_note(arg, rank, ccol_barrier(c), c, t0);
}

/* Rank 1 is 2.5 s late for its second operation (deadline 1 s): it gets
 * the others' report when it arrives. */
static void
stalled_body(ccol_comm *c, int rank, void *arg)
{
    double t0;
    ccol_comm_set_label(c, "step 1");
    CHECK_OK(ccol_barrier(c), c);
    ccol_comm_set_label(c, "step 2");
    if (rank == 1)
        usleep(2500 * 1000);
    t0 = ccol_test_now();
    ccol_outcome_note(arg, rank, ccol_barrier(c), c, t0);
}

/* Concatenates; fails on the byte 'b' (a pure combine: every rank fails
 * alike), or on the rank whose ud says 1 (not pure: one rank only). */
static ccol_status
picky_combine(void *ud, const void *a, size_t alen, const void *b,
              size_t blen, void **out, size_t *out_len)
{
    uint8_t *o;
    if (*(const int *)ud == 1 || (*(const int *)ud == -1 && blen > 0 &&
                                  ((const char *)b)[0] == 'b'))
        return CCOL_ERR_INVALID_ARG;
    o = malloc(alen + blen + 1);
    if (o == NULL)
        return CCOL_ERR_NO_MEMORY;
    memcpy(o, a, alen);
    memcpy(o + alen, b, blen);
    *out = o;
    *out_len = alen + blen;
    return CCOL_OK;
}

/* A pure combine failing: every rank, one message. */
static void
pure_fail_body(ccol_comm *c, int rank, void *arg)
{
    void *out = NULL;
    size_t n = 0;
    double t0 = ccol_test_now();
    char mine = (char)('a' + rank);

    CHECK_OK(ccol_join_reduce(c, 7, &mine, 1, picky_combine, &(int){ 5 },
                              &out, &n), c);
    CHECK(n == (size_t)ccol_comm_size(c) && memcmp(out, "abc", n) == 0);
    ccol_free(out);
    out = NULL;
    ccol_outcome_note(arg, rank,
                      ccol_join_reduce(c, 7, &mine, 1, picky_combine,
                                       &(int){ -1 }, &out, &n),
                      c, t0);
    CHECK(out == NULL); /* no result on any rank */
}

/* A combine that is not pure fails on rank 1 only: rank 1's operation
 * fails, and the others' next one fails at once naming it. */
static void
impure_fail_body(ccol_comm *c, int rank, void *arg)
{
    void *out = NULL;
    size_t n = 0;
    char mine = (char)('a' + rank);
    ccol_status st = ccol_join_reduce(c, 7, &mine, 1, picky_combine, &rank,
                                      &out, &n);
    double t0 = ccol_test_now();

    ccol_free(out);
    if (rank == 1) {
        CHECK_STATUS(st, CCOL_ERR_PEER);
        CHECK_CONTAINS(ccol_comm_errmsg(c), "combining the contribution of "
                       "rank 1 failed (INVALID_ARG)");
        usleep(1000 * 1000); /* the others fail before this rank leaves */
        return;
    }
    CHECK_OK(st, c);
    ccol_outcome_note(arg, rank, ccol_barrier(c), c, t0);
}

CCOL_TEST(slot_failures_are_agreed)
{
    char want[160];
    ccol_outcome *o = run_verdicts(2, 5, 0, count_diverge_body);
    expect_agreed(o, 2, -1, CCOL_ERR_DIVERGED,
                  "ranks diverged: rank 1 is in guard g "
                  "(allreduce_i64(sum, n=2) #1) while rank 0 is in guard f "
                  "(allreduce_i64(sum, n=1) #1)");
    o = run_verdicts(2, 5, 2u, killed_body);
    CHECK_STATUS((ccol_status)o->status[0], CCOL_ERR_PEER);
    CHECK_CONTAINS(o->msg[0], "rank 1 (pid");
    CHECK_CONTAINS(o->msg[0], "died");
    CHECK(o->took[0] < ccol_test_scale(1.0));
    o = run_verdicts(3, 1, 0, stalled_body);
    /* the deadline is scaled by CCOL_TEST_TIMEOUT_MULT, and so is its text */
    snprintf(want, sizeof want, "step 2 (barrier #2) timed out after %.3g s; "
             "missing rank: 1 (last seen in step 1 (barrier #1))",
             ccol_test_scale(1));
    expect_agreed(o, 3, -1, CCOL_ERR_TIMEOUT, want);
    CHECK(o->took[0] < ccol_test_scale(1.0 + 1.0));
    o = run_verdicts(3, 5, 0, pure_fail_body);
    expect_agreed(o, 3, -1, CCOL_ERR_PEER,
                  "join_reduce #2: combining the contribution of rank 1 "
                  "failed (INVALID_ARG)");
    o = run_verdicts(3, 5, 0, impure_fail_body);
    for (int r = 0; r < 3; r += 2) {
        CHECK_STATUS((ccol_status)o->status[r], CCOL_ERR_PEER);
        CHECK_CONTAINS(o->msg[r], "rank 1 stopped after a failure of its "
                       "own");
        CHECK(o->took[r] < ccol_test_scale(0.8));
    }
}

/* A peer's start time is untrusted: an earlier one moves the deadline
 * sooner, never before a quarter of T, and no value overflows. */
CCOL_TEST(peer_start_times_move_deadlines_within_bounds)
{
    const int64_t t = 1000, mono = 5000, wall = 7000, dl = mono + t;

    CHECK_EQ(ccol__skewed_deadline(dl, mono, wall, wall + 50, t), dl);
    CHECK_EQ(ccol__skewed_deadline(dl, mono, wall, wall - 100, t),
             mono + t - 100);
    CHECK_EQ(ccol__skewed_deadline(dl, mono, wall, wall - 900, t),
             mono + t / 4);
    CHECK_EQ(ccol__skewed_deadline(dl, mono, wall, INT64_MIN, t),
             mono + t / 4);
    CHECK_EQ(ccol__skewed_deadline(dl, mono, INT64_MAX, INT64_MIN, t),
             mono + t / 4);
    CHECK_EQ(ccol__skewed_deadline(mono + 10, mono, wall, wall - 100, t),
             mono + 10);
}

/* A large allgatherv after a barrier: every slot says "large", then the
 * tree engine runs it over the rings, where rank 1's frame is dropped. */
static void
large_dropped_body(ccol_comm *c, int rank, void *arg)
{
    static char big[2048];
    void *out = NULL;
    size_t lens[3];
    double t0;

    ccol_comm_set_label(c, "step 1");
    CHECK_OK(ccol_barrier(c), c);
    ccol_comm_set_label(c, "step 2");
    t0 = ccol_test_now();
    ccol_outcome_note(arg, rank,
                      ccol_allgatherv(c, big, sizeof big, &out, lens), c,
                      t0);
    ccol_free(out);
}

/* The tree engine's timeout says what the slots last saw a rank doing
 * (it entered this very operation), not "never heard from". */
CCOL_TEST(tree_fallback_names_what_the_slots_saw)
{
    ccol_test_job job = { .size = 3, .transport = CCOL_TEST_SHM,
                          .timeout_s = 0.5, .may_die = ~0u };
    ccol_outcome *o = ccol_test_shared(sizeof *o);

    job.params.mask = CCOL_COMM_PARAM_FAULT;
    job.params.fault = "rank=1,msg=3,kind=drop"; /* its UP frame */
    ccol_test_ranks(&job, large_dropped_body, o);
    CHECK_STATUS((ccol_status)o->status[0], CCOL_ERR_TIMEOUT);
    CHECK_CONTAINS(o->msg[0], "missing rank: 1 (last seen in step 2 "
                              "(allgatherv");
    CHECK(strstr(o->msg[0], "never heard from") == NULL);
}

/* Rank 2 arrives around the deadline: whether it made it or not, every
 * rank tells the same story. */
static void
late_body(ccol_comm *c, int rank, void *arg)
{
    const double *late = arg;
    ccol_outcome *o = (ccol_outcome *)(void *)(late + 1);
    double t0;

    CHECK_OK(ccol_barrier(c), c);
    if (rank == 2)
        usleep((useconds_t)(*late * 1e6));
    t0 = ccol_test_now();
    ccol_outcome_note(o, rank, ccol_barrier(c), c, t0);
}

CCOL_TEST(a_rank_arriving_at_the_deadline_gets_one_story)
{
    const double lates[] = { 0.15, 0.19, 0.2, 0.21, 0.25 };
    double *arg = ccol_test_shared(sizeof(double) + sizeof(ccol_outcome));
    ccol_outcome *o = (ccol_outcome *)(void *)(arg + 1);

    for (size_t i = 0; i < sizeof lates / sizeof lates[0]; i++) {
        ccol_test_job job = { .size = 3, .transport = CCOL_TEST_SHM,
                              .timeout_s = 0.2 };
        *arg = lates[i];
        memset(o, 0, sizeof *o);
        ccol_test_ranks(&job, late_body, arg);
        for (int r = 1; r < 3; r++) {
            CHECK_STATUS((ccol_status)o->status[r],
                         (ccol_status)o->status[0]);
            CHECK_STR_EQ(o->msg[r], o->msg[0]);
        }
    }
}

CCOL_TEST_MAIN(CCOL_T(environment_selects_shm),
               CCOL_T(rank_restarted_while_joining_takes_its_line_back),
               CCOL_T(rank_killed_while_joining_is_named_at_the_deadline),
               CCOL_T(rank_0_gone_before_the_job_formed_is_named),
               CCOL_T(rank_0_giving_up_first_names_the_missing_rank),
               CCOL_T(a_rank_dead_after_the_job_formed_is_a_peer_to_a_late_rank_0),
               CCOL_T(failed_create_leaves_no_name),
               CCOL_T(segment_memory_grows_with_the_ranks_that_join),
               CCOL_T(tree_fallback_names_what_the_slots_saw),
               CCOL_T(peer_start_times_move_deadlines_within_bounds),
               CCOL_T(ring_reader_reassembles_across_wraps),
               CCOL_T(ring_reader_rejects_bad_bytes),
               CCOL_T(segment_names_are_clean),
               CCOL_T(sleeping_path_without_spinning),
               CCOL_T(spinning_path_with_a_long_budget),
               CCOL_T(spin_knob_is_validated),
               CCOL_T(segment_name_is_removed_after_joining),
               CCOL_T(stale_segment_of_a_crashed_job_is_replaced),
               CCOL_T(live_jobs_segment_is_refused),
               CCOL_T(segment_another_user_created_first_is_refused),
               CCOL_T(launcher_forgets_a_killed_jobs_segment_only),
               CCOL_T(sigterm_while_forming_removes_the_name),
               CCOL_T(sweep_removes_only_names_whose_rank_0_is_gone),
               CCOL_T(rank_claimed_twice_is_refused),
               CCOL_T(missing_rank_0_is_named_at_join),
               CCOL_T(slot_reader_rejects_bad_slots),
               CCOL_T(slots_carry_small_operations_and_hand_large_ones_over),
               CCOL_T(slot_failures_are_agreed),
               CCOL_T(a_rank_arriving_at_the_deadline_gets_one_story))
