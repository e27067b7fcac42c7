/*
 * cmd_demo.c - `ccol demo`: a multi-rank demonstration on local processes
 * over the embedded tcp transport.
 *
 * Four ranks (each its own process, started with torchrun's variables) see
 * batches of different lengths, as ranks of a data-parallel job do. The demo
 * shows what a compiler on each rank would decide alone (divergent: some
 * ranks think the batch dim is static, others recompile), what the ranks
 * decide after exchanging their observations (identical everywhere), the
 * latency of the collectives that make that possible, and what happens when
 * one rank stalls: every other rank gets a TIMEOUT naming it, within the
 * deadline, instead of hanging.
 */
#include "tools.h"

#include "ccol.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEMO_MAX_RANKS 16
#define DEMO_STEPS 4
#define DEMO_ITERS 200

/* What each rank reports back to the parent. */
typedef struct rank_report {
    int done;                      /* finished the demo body */
    int alone_recompiles;          /* recompiles deciding alone */
    int alone_dynamic_at;          /* step where it went dynamic alone */
    int agreed_dynamic_at;         /* step where all ranks went dynamic */
    int64_t agreed_max_len;        /* max batch length over all ranks */
    double barrier_us;             /* median barrier latency */
    double allreduce_us;           /* median allreduce latency */
    double allgatherv_us;          /* median allgatherv latency */
    int fail_status;               /* status in the stall scenario */
    double fail_after_s;           /* how long until it was reported */
    char fail_msg[256];            /* the message it got */
} rank_report;

/* Batch length rank r sees at step s: rank 0 always sees 32 (so alone it
 * never recompiles), the others see their length change at different
 * steps. */
static int64_t
batch_len(int r, int s)
{
    if (r == 0)
        return 32;
    return s < r ? 32 : 32 + 8 * r + s;
}

static double
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double
median_us(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return 1e6 * (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

/* Deciding alone: the batch dim becomes dynamic the first time this rank
 * sees it change, as automatic dynamic shapes do. */
static void
decide_alone(int r, rank_report *rep)
{
    rep->alone_dynamic_at = -1;
    for (int s = 1; s < DEMO_STEPS; s++) {
        if (rep->alone_dynamic_at < 0 && batch_len(r, s) != batch_len(r, 0)) {
            rep->alone_dynamic_at = s;
            rep->alone_recompiles++;
        }
    }
}

/* Deciding together: at each step the ranks exchange the batch length they
 * observed; the dim is dynamic once any two observations differ. */
static int
decide_together(ccol_comm *c, int r, rank_report *rep)
{
    int64_t seen_min = INT64_MAX, seen_max = INT64_MIN;
    rep->agreed_dynamic_at = -1;
    for (int s = 0; s < DEMO_STEPS; s++) {
        int64_t v[2] = { batch_len(r, s), -batch_len(r, s) };
        char label[40];
        snprintf(label, sizeof label, "demo step %d", s);
        ccol_comm_set_label(c, label);
        if (ccol_allreduce_i64(c, v, 2, CCOL_OP_MAX) != CCOL_OK)
            return -1;
        if (v[0] > seen_max)
            seen_max = v[0];
        if (-v[1] < seen_min)
            seen_min = -v[1];
        if (rep->agreed_dynamic_at < 0 && seen_min != seen_max)
            rep->agreed_dynamic_at = s;
    }
    rep->agreed_max_len = seen_max;
    return 0;
}

/* Median latency of barrier, allreduce and a 1 KiB allgatherv. */
static int
measure(ccol_comm *c, rank_report *rep)
{
    static double t[3][DEMO_ITERS];
    char blob[1024] = { 0 };
    size_t lens[DEMO_MAX_RANKS];

    ccol_comm_set_label(c, "demo latency");
    for (int i = 0; i < DEMO_ITERS; i++) {
        int64_t v = i;
        void *out = NULL;
        double t0 = now_s();
        if (ccol_barrier(c) != CCOL_OK)
            return -1;
        double t1 = now_s();
        if (ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM) != CCOL_OK)
            return -1;
        double t2 = now_s();
        if (ccol_allgatherv(c, blob, sizeof blob, &out, lens) != CCOL_OK)
            return -1;
        t[0][i] = t1 - t0;
        t[1][i] = t2 - t1;
        t[2][i] = now_s() - t2;
        ccol_free(out);
    }
    rep->barrier_us = median_us(t[0], DEMO_ITERS);
    rep->allreduce_us = median_us(t[1], DEMO_ITERS);
    rep->allgatherv_us = median_us(t[2], DEMO_ITERS);
    return 0;
}

/* The stall scenario: the last rank sleeps past the 1 s deadline. */
static void
stall(ccol_comm *c, int r, int size, rank_report *rep)
{
    double t0 = now_s();
    ccol_comm_set_timeout(c, 1.0);
    ccol_comm_set_label(c, "demo step 4");
    if (r == size - 1) {
        usleep(1800 * 1000);
        rep->fail_status = CCOL_OK;
        snprintf(rep->fail_msg, sizeof rep->fail_msg, "(stalled on purpose)");
        return;
    }
    rep->fail_status = ccol_barrier(c);
    rep->fail_after_s = now_s() - t0;
    snprintf(rep->fail_msg, sizeof rep->fail_msg, "%s", ccol_comm_errmsg(c));
}

static int
rank_main(rank_report *reps)
{
    ccol_comm *c = NULL;
    int r, size;

    if (ccol_comm_create_env(NULL, &c) != CCOL_OK) {
        fprintf(stderr, "demo: %s\n", ccol_comm_errmsg(c));
        ccol_comm_destroy(c);
        return 1;
    }
    r = ccol_comm_rank(c);
    size = ccol_comm_size(c);
    decide_alone(r, &reps[r]);
    if (decide_together(c, r, &reps[r]) != 0 || measure(c, &reps[r]) != 0) {
        fprintf(stderr, "demo rank %d: %s\n", r, ccol_comm_errmsg(c));
        ccol_comm_destroy(c);
        return 1;
    }
    stall(c, r, size, &reps[r]);
    reps[r].done = 1;
    ccol_comm_destroy(c);
    return 0;
}

static int
free_port(void)
{
    struct sockaddr_in a = { 0 };
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

static void
set_env_int(const char *name, int v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%d", v);
    setenv(name, buf, 1);
}

/* Starts n ranks as processes with torchrun's variables. */
static int
spawn(int n, int port, rank_report *reps, pid_t *pids)
{
    fflush(stdout);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        if (pids[r] < 0)
            return -1;
        if (pids[r] == 0) {
            set_env_int("RANK", r);
            set_env_int("LOCAL_RANK", r);
            set_env_int("WORLD_SIZE", n);
            set_env_int("LOCAL_WORLD_SIZE", n);
            set_env_int("MASTER_PORT", port);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            _exit(rank_main(reps));
        }
    }
    return 0;
}

/* Waits for every rank for at most `limit` seconds; kills stragglers. */
static int
reap(int n, pid_t *pids, double limit)
{
    double end = now_s() + limit;
    int bad = 0, left = n;

    while (left > 0 && now_s() < end) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            left--;
            bad += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        } else {
            usleep(10000);
        }
    }
    for (int r = 0; left > 0 && r < n; r++)
        kill(pids[r], SIGKILL);
    while (left > 0 && waitpid(-1, NULL, 0) > 0)
        left--;
    return bad + left;
}

static void
print_step_table(int n)
{
    printf("Batch length each rank sees per step (frame `train_step`, "
           "input L['batch'] dim 0):\n\n        ");
    for (int s = 0; s < DEMO_STEPS; s++)
        printf("  step %d", s);
    printf("\n");
    for (int r = 0; r < n; r++) {
        printf("rank %d ", r);
        for (int s = 0; s < DEMO_STEPS; s++)
            printf("  %6lld", (long long)batch_len(r, s));
        printf("\n");
    }
    printf("\n");
}

static void
print_report(int n, const rank_report *reps)
{
    print_step_table(n);
    printf("%-7s| %-24s| %-26s| %s\n", "", "deciding alone",
           "deciding together (ccol)", "collective latency (median)");
    printf("%-7s| %-24s| %-26s| %s\n", "rank", "L['batch'].size(0)",
           "L['batch'].size(0)", "barrier  allreduce  allgatherv 1K");
    for (int r = 0; r < n; r++) {
        char alone[40], together[40];
        const rank_report *p = &reps[r];
        if (p->alone_dynamic_at < 0)
            snprintf(alone, sizeof alone, "static (0 recompiles)");
        else
            snprintf(alone, sizeof alone, "dynamic at step %d",
                     p->alone_dynamic_at);
        snprintf(together, sizeof together, "dynamic at step %d",
                 p->agreed_dynamic_at);
        printf("rank %-2d| %-24s| %-26s| %5.0f us %6.0f us %8.0f us\n", r,
               alone, together, p->barrier_us, p->allreduce_us,
               p->allgatherv_us);
    }
    printf("\nAlone, ranks disagree about the graph and recompile at "
           "different steps;\nwhile one recompiles, the others wait in "
           "their next collective.\nTogether, every rank makes the same "
           "decision at the same step.\n\n");
    printf("Rank %d stalls past a 1 s deadline; what each other rank gets:"
           "\n", n - 1);
    for (int r = 0; r < n - 1; r++)
        printf("  rank %d after %.2f s: %s: %s\n", r, reps[r].fail_after_s,
               ccol_status_name((ccol_status)reps[r].fail_status),
               reps[r].fail_msg);
}

int
ccol_cmd_demo(int argc, char **argv)
{
    int n = 4, port;
    rank_report *reps;
    pid_t pids[DEMO_MAX_RANKS];

    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("usage: ccol demo [-n N]   (2 <= N <= %d, default 4)\n",
               DEMO_MAX_RANKS);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "-n") == 0)
        n = atoi(argv[2]);
    if ((argc != 1 && argc != 3) || n < 2 || n > DEMO_MAX_RANKS) {
        fprintf(stderr, "usage: ccol demo [-n N]   (2 <= N <= %d)\n",
                DEMO_MAX_RANKS);
        return 2;
    }
    port = free_port();
    reps = mmap(NULL, sizeof *reps * DEMO_MAX_RANKS, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (port < 0 || reps == MAP_FAILED) {
        fprintf(stderr, "demo: cannot set up local ranks\n");
        return 1;
    }
    memset(reps, 0, sizeof *reps * DEMO_MAX_RANKS);
    printf("ccol demo: %d ranks, each its own process, tcp on "
           "127.0.0.1:%d\n\n", n, port);
    if (spawn(n, port, reps, pids) != 0 || reap(n, pids, 60) != 0) {
        fprintf(stderr, "demo: a rank failed (see above)\n");
        return 1;
    }
    print_report(n, reps);
    return 0;
}
