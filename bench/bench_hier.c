/*
 * bench_hier.c - `ccol bench hier`: the per-host hierarchy (tcp+shm)
 * against flat tcp in the same run. N forked ranks over H hosts, faked with
 * CCOL_HOST (ranks numbered consecutively per host, as launchers number
 * them), all on loopback: the hierarchy's gain here is shm replacing
 * loopback sockets within a host and rank 0 serving H leaders instead of
 * N ranks; across real hosts the network round trip comes on top of both.
 * Rounds alternate flat, hier, hier, flat so drifting load hits both
 * alike; per call every rank passes a barrier, then times the operation,
 * and a call costs the maximum over ranks. Medians over every call.
 */
#include "bench.h"
#include "bench_util.h"
#include "launch.h"

#include "ccol.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RANKS 64
#define NOPS 3
#define WARMUP 5
#define JOB_TIMEOUT_S 120.0

static const char *const op_names[NOPS] = { "barrier", "allreduce_i64",
                                            "allgatherv 64 B" };

typedef struct opts {
    int n;      /* ranks */
    int hosts;  /* fake hosts */
    int iters;  /* timed calls per op and round */
    int rounds; /* rounds of flat, hier, hier, flat */
} opts;

/* What the ranks of one job write: samples [op][iter][rank], a failure. */
typedef struct shared {
    char err[256];
    char transport[16];
    double s[];
} shared;

static size_t
shared_bytes(const opts *o)
{
    return sizeof(shared) +
           (size_t)NOPS * (size_t)o->iters * (size_t)o->n * sizeof(double);
}

static ccol_status
one_call(ccol_comm *c, int op, int rank)
{
    uint8_t blob[64], *all = NULL;
    size_t lens[MAX_RANKS];
    int64_t v = rank;
    ccol_status st;

    if (op == 0)
        return ccol_barrier(c);
    if (op == 1)
        return ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM);
    memset(blob, rank, sizeof blob);
    st = ccol_allgatherv(c, blob, sizeof blob, (void **)&all, lens);
    ccol_free(all);
    return st;
}

/* One rank of a job: joins as rank `rank` of host rank*H/N and times
 * every op. */
static int
rank_main(const opts *o, shared *sh, int rank, int port, bool hier)
{
    char host[32];
    ccol_comm_params p = { 0 };
    ccol_comm *c = NULL;
    ccol_status st;

    snprintf(host, sizeof host, "bench-host-%d", rank * o->hosts / o->n);
    setenv("CCOL_HOST", host, 1);
    setenv("CCOL_HIER", hier ? "1" : "0", 1);
    p.mask = CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE |
             CCOL_COMM_PARAM_TRANSPORT | CCOL_COMM_PARAM_PORT |
             CCOL_COMM_PARAM_TIMEOUT;
    p.rank = rank;
    p.size = o->n;
    p.transport = CCOL_TRANSPORT_TCP;
    p.port = port;
    p.timeout_s = 30;
    st = ccol_comm_create(&p, &c);
    if (rank == 0 && st == CCOL_OK)
        snprintf(sh->transport, sizeof sh->transport, "%s",
                 ccol_comm_transport(c));
    for (int op = 0; st == CCOL_OK && op < NOPS; op++)
        for (int it = -WARMUP; st == CCOL_OK && it < o->iters; it++) {
            double t0;
            st = ccol_barrier(c);
            t0 = ccol_bench_now();
            if (st == CCOL_OK)
                st = one_call(c, op, rank);
            if (it >= 0)
                sh->s[((size_t)op * (size_t)o->iters + (size_t)it) *
                          (size_t)o->n + (size_t)rank] =
                    ccol_bench_now() - t0;
        }
    if (st != CCOL_OK)
        snprintf(sh->err, sizeof sh->err, "rank %d: %s", rank,
                 c ? ccol_comm_errmsg(c) : "out of memory");
    ccol_comm_destroy(c);
    return st == CCOL_OK ? 0 : 1;
}

/* Waits for every rank until the deadline; kills them all after it. */
static bool
reap(const opts *o, pid_t *pids, shared *sh)
{
    double end = ccol_bench_now() + JOB_TIMEOUT_S;
    int left = o->n, status;
    bool ok = true;

    while (left > 0) {
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid == 0 && ccol_bench_now() < end) {
            usleep(2000);
            continue;
        }
        if (pid <= 0) {
            for (int r = 0; r < o->n; r++)
                if (pids[r] > 0)
                    kill(pids[r], SIGKILL);
            if (pid == 0)
                snprintf(sh->err, sizeof sh->err, "job ran past %.0f s",
                         JOB_TIMEOUT_S);
            while (waitpid(-1, NULL, 0) > 0)
                continue;
            return false;
        }
        for (int r = 0; r < o->n; r++)
            if (pids[r] == pid)
                pids[r] = 0;
        ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        left--;
    }
    return ok;
}

/* Runs one job; adds each call's cost (max over ranks) to costs[op]. */
static bool
run_job(const opts *o, shared *sh, bool hier, double **costs, size_t *nc)
{
    pid_t pids[MAX_RANKS] = { 0 };
    int port = ccol_bench_free_port("127.0.0.1");

    memset(sh, 0, shared_bytes(o));
    if (port < 0) {
        snprintf(sh->err, sizeof sh->err, "no free port: %s",
                 strerror(errno));
        return false;
    }
    fflush(NULL);
    for (int r = 0; r < o->n; r++) {
        pids[r] = tool_launch_fork(false, NULL, 0);
        if (pids[r] == 0)
            _exit(rank_main(o, sh, r, port, hier));
    }
    if (!reap(o, pids, sh))
        return false;
    for (int op = 0; op < NOPS; op++)
        for (int it = 0; it < o->iters; it++) {
            double m = 0;
            for (int r = 0; r < o->n; r++) {
                double v = sh->s[((size_t)op * (size_t)o->iters +
                                  (size_t)it) * (size_t)o->n + (size_t)r];
                m = v > m ? v : m;
            }
            costs[op][nc[op]++] = m;
        }
    return true;
}

static bool
parse_int(const char *s, long lo, long hi, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *s == '\0' || *end != '\0' || v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

static int
usage(FILE *f)
{
    fprintf(f, "usage: ccol bench hier [-n N] [--hosts H] [--iters K] "
               "[--rounds R]\n\n"
               "Median latency of barrier, allreduce_i64 and a 64-byte "
               "allgatherv over N\nforked ranks (default 8) on H hosts "
               "faked with CCOL_HOST (default 2), as\ntcp+shm and as flat "
               "tcp (CCOL_HIER=0) in the same run; K timed calls per\nop "
               "and job (default 200), R rounds of flat, hier, hier, flat "
               "(default 2).\n");
    return f == stdout ? 0 : 2;
}

static int
parse_args(int argc, char **argv, opts *o)
{
    *o = (opts){ .n = 8, .hosts = 2, .iters = 200, .rounds = 2 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = v != NULL;
        if (strcmp(a, "--help") == 0)
            return usage(stdout) + 1;
        if (strcmp(a, "-n") == 0)
            ok = ok && parse_int(v, 2, MAX_RANKS, &o->n);
        else if (strcmp(a, "--hosts") == 0)
            ok = ok && parse_int(v, 2, MAX_RANKS, &o->hosts);
        else if (strcmp(a, "--iters") == 0)
            ok = ok && parse_int(v, 1, 100000, &o->iters);
        else if (strcmp(a, "--rounds") == 0)
            ok = ok && parse_int(v, 1, 100, &o->rounds);
        else
            ok = false;
        if (!ok) {
            fprintf(stderr, "ccol bench hier: bad option '%s'%s%s\n", a,
                    v ? " " : "", v ? v : "");
            return usage(stderr);
        }
        i++;
    }
    if (o->hosts >= o->n) {
        fprintf(stderr, "ccol bench hier: --hosts %d leaves no host with "
                        "two of the %d ranks\n", o->hosts, o->n);
        return 2;
    }
    return 0;
}

/* Prints medians and ratios; frees the samples. */
static void
report(const opts *o, double **costs[2], size_t nc[2][NOPS])
{
    printf("%d ranks on %d hosts (loopback, hosts faked with CCOL_HOST), "
           "median us over %zu calls each\n%-16s %10s %10s %10s\n",
           o->n, o->hosts, nc[0][0], "op", "flat tcp", "tcp+shm",
           "hier/flat");
    for (int op = 0; op < NOPS; op++) {
        double f = ccol_bench_median(costs[0][op], nc[0][op]) * 1e6;
        double h = ccol_bench_median(costs[1][op], nc[1][op]) * 1e6;
        printf("%-16s %10.1f %10.1f %9.2fx\n", op_names[op], f, h,
               f > 0 ? h / f : 0.0);
    }
}

int
ccol_bench_hier(int argc, char **argv)
{
    static const bool order[4] = { false, true, true, false };
    opts o;
    int rc = parse_args(argc, argv, &o);
    size_t per = (size_t)o.iters * 2 * (size_t)o.rounds, nc[2][NOPS] = { 0 };
    double **costs[2];
    shared *sh;
    bool ok = true;

    if (rc != 0)
        return rc == 1 ? 0 : rc;
    sh = mmap(NULL, shared_bytes(&o), PROT_READ | PROT_WRITE,
              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    costs[0] = calloc(NOPS, sizeof *costs[0]);
    costs[1] = calloc(NOPS, sizeof *costs[1]);
    for (int m = 0; m < 2 && costs[m] != NULL; m++)
        for (int op = 0; op < NOPS; op++)
            ok = ok && (costs[m][op] = calloc(per, sizeof(double))) != NULL;
    if (sh == MAP_FAILED || !ok || costs[0] == NULL || costs[1] == NULL) {
        fprintf(stderr, "ccol bench hier: out of memory\n");
        return 1;
    }
    for (int k = 0; ok && k < 4 * o.rounds; k++) {
        bool hier = order[k % 4];
        ok = run_job(&o, sh, hier, costs[hier], nc[hier]);
        if (ok && strcmp(sh->transport, hier ? "tcp+shm" : "tcp") != 0) {
            snprintf(sh->err, sizeof sh->err, "the job ran over %s",
                     sh->transport);
            ok = false;
        }
    }
    if (ok)
        report(&o, costs, nc);
    else
        fprintf(stderr, "ccol bench hier: %s\n", sh->err);
    for (int m = 0; m < 2; m++) {
        for (int op = 0; op < NOPS; op++)
            free(costs[m][op]);
        free(costs[m]);
    }
    munmap(sh, shared_bytes(&o));
    return ok ? 0 : 1;
}
