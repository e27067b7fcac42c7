/*
 * bench_buckets.c - `ccol bench buckets`: replays a trace of sequence
 * lengths through the shape-bucket agreement (ccol.h, "Shape buckets") on
 * N ranks (threads over inproc) and compares, in the same run, the extra
 * padding of the agreed buckets with the offline optimum for the same K on
 * the whole trace, power-of-two tiers and per-step padding to the longest
 * batch of any rank. Lengths are dealt round-robin to the ranks, B to a
 * rank-step; a rank-step's batch pads from its longest length L to the
 * policy's size S, and a policy's extra padding is sum(S - L) / sum(L).
 */
#include "bench.h"

#include "ccol.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_RANKS 256
#define MAX_TRACE (1L << 24) /* lengths read at most */

typedef struct opts {
    const char *trace;
    int ranks, per_rank, k, warmup, every, budget;
    uint32_t max_len;
    double margin;
    bool json;
} opts;

/* The run: the trace, each rank-step's longest length and what the
 * agreed buckets padded it to, and each rank's digests. */
typedef struct run {
    const opts *o;
    uint32_t *len, nlen, max_len;
    int steps, nagree;
    uint32_t *L, *S;      /* [step * ranks + rank] */
    uint64_t *digest;     /* [agreement * ranks + rank] */
    int *graphs, *outside; /* per rank: sizes used, sizes outside the set */
    int *agreed, *sets;   /* per rank: distinct sizes over every agreed
                             set, and how many sets (ccol_buckets_generation) */
    uint64_t *traffic;    /* per rank: bytes sent in agreements */
    char err[256];
    pthread_mutex_t mu;
} run;

/* ---- options and the trace ---- */

/* A whole number in [lo, hi], digits only (no sign, spaces or junk). */
static bool
whole(const char *s, long long lo, long long hi, long long *out)
{
    long long v = 0;

    if (s == NULL || *s == '\0')
        return false;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (hi - (*p - '0')) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    if (v < lo)
        return false;
    *out = v;
    return true;
}

static void
usage(FILE *f)
{
    fprintf(f, "usage: ccol bench buckets --trace FILE --ranks N --per-rank "
               "B --k K\n       [--max-len M] [--warmup STEPS] [--every "
               "STEPS] [--margin X] [--budget G]\n       [--json]\n"
               "  replays the lengths of FILE (one a line) dealt "
               "round-robin to N ranks,\n  B a rank-step, through the "
               "shape-bucket agreement (threads over inproc)\n");
}

static int
opt_int(const char *name, const char *v, long long lo, long long hi, int *out)
{
    long long x;

    if (v == NULL || !whole(v, lo, hi, &x)) {
        fprintf(stderr, "ccol bench buckets: %s wants a whole number in "
                        "%lld..%lld\n", name, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* --margin: a plain number in 0..100 (a fraction: 0.1 is 10%). */
static int
opt_margin(const char *v, double *out)
{
    char *end = NULL;
    double x = v != NULL ? strtod(v, &end) : -1;

    if (v == NULL || end == v || *end != '\0' || !(x >= 0 && x <= 100)) {
        fprintf(stderr, "ccol bench buckets: --margin wants a number in "
                        "0..100 (0.1: re-agree when the buckets pad 10%% "
                        "more than the best fit)\n");
        return -1;
    }
    *out = x;
    return 0;
}

static int
parse(int argc, char **argv, opts *o)
{
    int mx = 0, bad = 0;

    *o = (opts){ .warmup = 1, .every = 16, .margin = 0.05 };
    for (int i = 1; i < argc && !bad; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--json") == 0) {
            o->json = true;
            continue;
        }
        i++;
        if (strcmp(a, "--trace") == 0 && v != NULL)
            o->trace = v;
        else if (strcmp(a, "--ranks") == 0)
            bad = opt_int(a, v, 1, MAX_RANKS, &o->ranks);
        else if (strcmp(a, "--per-rank") == 0)
            bad = opt_int(a, v, 1, 1 << 16, &o->per_rank);
        else if (strcmp(a, "--k") == 0)
            bad = opt_int(a, v, 1, CCOL_BUCKETS_MAX_K, &o->k);
        else if (strcmp(a, "--max-len") == 0)
            bad = opt_int(a, v, 1, CCOL_BUCKETS_MAX_LEN, &mx);
        else if (strcmp(a, "--warmup") == 0)
            bad = opt_int(a, v, 1, 1 << 20, &o->warmup);
        else if (strcmp(a, "--every") == 0)
            bad = opt_int(a, v, 1, 1 << 20, &o->every);
        else if (strcmp(a, "--margin") == 0)
            bad = opt_margin(v, &o->margin);
        else if (strcmp(a, "--budget") == 0)
            bad = opt_int(a, v, 0, CCOL_BUCKETS_MAX_BINS, &o->budget);
        else {
            fprintf(stderr, "ccol bench buckets: bad option '%s'%s\n", a,
                    v != NULL && a[0] == '-' ? " or value" : "");
            bad = -1;
        }
    }
    o->max_len = (uint32_t)mx;
    if (!bad && (o->trace == NULL || !o->ranks || !o->per_rank || !o->k)) {
        fprintf(stderr, "ccol bench buckets: --trace, --ranks, --per-rank "
                        "and --k are required\n");
        bad = -1;
    }
    if (!bad && o->budget != 0 && o->budget < o->k) {
        fprintf(stderr, "ccol bench buckets: --budget %d is below --k %d "
                        "(0: no budget)\n", o->budget, o->k);
        bad = -1;
    }
    if (bad)
        usage(stderr);
    return bad ? -1 : 0;
}

/* One line of the trace: a whole number 1..CCOL_BUCKETS_MAX_LEN. */
static int
trace_line(const char *path, long no, char *line, uint32_t *out)
{
    long long v;

    line[strcspn(line, "\r\n")] = '\0';
    if (!whole(line, 1, CCOL_BUCKETS_MAX_LEN, &v)) {
        fprintf(stderr, "ccol bench buckets: %s:%ld: '%.40s' is not a "
                        "length (a whole number in 1..%u)\n", path, no, line,
                CCOL_BUCKETS_MAX_LEN);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

static int
read_trace(const char *path, run *r)
{
    FILE *f = fopen(path, "r");
    char line[64];
    uint32_t cap = 4096;
    long no = 0;

    if (f == NULL) {
        fprintf(stderr, "ccol bench buckets: cannot open %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    r->len = malloc(cap * sizeof *r->len);
    while (r->len != NULL && fgets(line, sizeof line, f) != NULL) {
        if (++no > MAX_TRACE || r->nlen == UINT32_MAX)
            break;
        if (r->nlen == cap) {
            uint32_t *p = realloc(r->len, 2u * cap * sizeof *p);

            if (p == NULL)
                break;
            r->len = p;
            cap *= 2;
        }
        if (trace_line(path, no, line, &r->len[r->nlen]) != 0) {
            fclose(f);
            return -1;
        }
        r->max_len = r->len[r->nlen] > r->max_len ? r->len[r->nlen]
                                                   : r->max_len;
        r->nlen++;
    }
    fclose(f);
    if (r->len == NULL || r->nlen == 0) {
        fprintf(stderr, "ccol bench buckets: %s holds no length\n", path);
        return -1;
    }
    return 0;
}

/* ---- the ranks ---- */

typedef struct rank_arg {
    run *r;
    int rank;
    char group[64];
} rank_arg;

static void
fail(run *r, int rank, const char *what, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    if (r->err[0] == '\0')
        snprintf(r->err, sizeof r->err, "rank %d: %s: %s", rank, what, msg);
    pthread_mutex_unlock(&r->mu);
}

/* Rank `rank`'s longest length at step t: its sequences are the trace's
 * rank, rank + N, rank + 2N, ..., B of them a step. */
static uint32_t
batch_max(const run *r, int rank, int t)
{
    const int n = r->o->ranks, b = r->o->per_rank;
    uint32_t m = 0;

    for (int j = 0; j < b; j++) {
        uint32_t x = r->len[((size_t)t * b + j) * n + rank];

        m = x > m ? x : m;
    }
    return m;
}

/* Whether step t agrees, after counting its batch and before padding it:
 * libccol's schedule (ccol_buckets_due). */
static bool
agrees_at(const opts *o, int t)
{
    return ccol_buckets_due((uint64_t)t, (uint32_t)o->warmup,
                            (uint32_t)o->every);
}

/* Whether `size` is one of the handle's buckets now. */
static bool
in_set(const ccol_buckets *b, uint32_t size)
{
    for (uint32_t i = 0; i < ccol_buckets_count(b); i++)
        if (ccol_buckets_size(b, i) == size)
            return true;
    return false;
}

/* Adds s to the distinct sizes in set[0..*n) (room for MAX_K * 8). */
static void
count_size(uint32_t *set, int *n, uint32_t s)
{
    for (int i = 0; i < *n; i++)
        if (set[i] == s)
            return;
    if (*n < CCOL_BUCKETS_MAX_K * 8)
        set[(*n)++] = s;
}

/* A new size this rank pads to: one graph more. */
static void
count_graph(run *r, int rank, uint32_t *used, int *nused, uint32_t s)
{
    count_size(used, nused, s);
    r->graphs[rank] = *nused;
}

static int
rank_steps(run *r, int rank, ccol_comm *comm, ccol_buckets *b)
{
    uint32_t used[CCOL_BUCKETS_MAX_K * 8], seen[CCOL_BUCKETS_MAX_K * 8];
    int nused = 0, nseen = 0, a = 0;
    bool agreed = false;

    for (int t = 0; t < r->steps; t++) {
        uint32_t l = batch_max(r, rank, t), s;
        uint64_t sent0, sent1, recv;

        if (ccol_buckets_observe(b, l) != CCOL_OK)
            return fail(r, rank, "observe", ccol_buckets_errmsg(b)), -1;
        if (agrees_at(r->o, t)) {
            ccol_comm_traffic(comm, &sent0, &recv);
            if (ccol_buckets_agree(comm, b, NULL) != CCOL_OK)
                return fail(r, rank, "agree", ccol_comm_errmsg(comm)), -1;
            ccol_comm_traffic(comm, &sent1, &recv);
            r->traffic[rank] += sent1 - sent0;
            r->digest[(size_t)a++ * r->o->ranks + rank] =
                ccol_buckets_digest(b);
            for (uint32_t i = 0; i < ccol_buckets_count(b); i++)
                count_size(seen, &nseen, ccol_buckets_size(b, i));
            r->agreed[rank] = nseen;
            r->sets[rank] = (int)ccol_buckets_generation(b);
            agreed = true;
        }
        if (ccol_buckets_pad(b, l, &s) != CCOL_OK)
            return fail(r, rank, "pad", ccol_buckets_errmsg(b)), -1;
        r->L[(size_t)t * r->o->ranks + rank] = l;
        r->S[(size_t)t * r->o->ranks + rank] = s;
        if (agreed && !in_set(b, s))
            r->outside[rank]++;
        count_graph(r, rank, used, &nused, s);
    }
    return 0;
}

static void *
rank_thread(void *p)
{
    rank_arg *ra = p;
    run *r = ra->r;
    ccol_comm_params cp = { 0 };
    ccol_comm *comm = NULL;
    ccol_buckets *b = NULL;

    cp.mask = CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE |
              CCOL_COMM_PARAM_TRANSPORT | CCOL_COMM_PARAM_TIMEOUT |
              CCOL_COMM_PARAM_NAME;
    cp.rank = ra->rank;
    cp.size = r->o->ranks;
    cp.transport = CCOL_TRANSPORT_INPROC;
    cp.timeout_s = 60;
    cp.name = ra->group;
    if (ccol_comm_create(&cp, &comm) != CCOL_OK)
        fail(r, ra->rank, "comm", comm ? ccol_comm_errmsg(comm) : "no memory");
    else if (ccol_buckets_new(r->max_len, (uint32_t)r->o->k, r->o->margin,
                              &b) != CCOL_OK)
        fail(r, ra->rank, "buckets", "bad parameters");
    else if (ccol_buckets_set_budget(b, (uint32_t)r->o->budget) != CCOL_OK)
        fail(r, ra->rank, "budget", ccol_buckets_errmsg(b));
    else
        rank_steps(r, ra->rank, comm, b);
    ccol_buckets_destroy(b);
    ccol_comm_destroy(comm);
    return NULL;
}

static int
run_ranks(run *r)
{
    static pthread_t th[MAX_RANKS];
    static rank_arg args[MAX_RANKS];
    int started = 0;

    for (int k = 0; k < r->o->ranks; k++) {
        args[k] = (rank_arg){ .r = r, .rank = k };
        snprintf(args[k].group, sizeof args[k].group, "bench-buckets-%ld",
                 (long)getpid());
        if (pthread_create(&th[k], NULL, rank_thread, &args[k]) != 0)
            break;
        started++;
    }
    for (int k = 0; k < started; k++)
        pthread_join(th[k], NULL);
    if (started < r->o->ranks)
        fail(r, started, "thread", "pthread_create failed");
    return r->err[0] ? -1 : 0;
}

/* ---- the policies ---- */

/* sum(S - L) / sum(L) of consensus (S as the ranks padded) */
static double
extra_consensus(const run *r)
{
    double pad = 0, real = 0;
    size_t n = (size_t)r->steps * r->o->ranks;

    for (size_t i = 0; i < n; i++) {
        pad += (double)(r->S[i] - r->L[i]);
        real += r->L[i];
    }
    return pad / real;
}

static double
extra_pow2(const run *r)
{
    double pad = 0, real = 0;
    size_t n = (size_t)r->steps * r->o->ranks;

    for (size_t i = 0; i < n; i++) {
        uint64_t s = 1;

        while (s < r->L[i])
            s <<= 1;
        pad += (double)((s > r->max_len ? r->max_len : s) - r->L[i]);
        real += r->L[i];
    }
    return pad / real;
}

/* every rank pads to the longest batch of the step */
static double
extra_step_max(const run *r)
{
    double pad = 0, real = 0;
    const int n = r->o->ranks;

    for (int t = 0; t < r->steps; t++) {
        uint32_t m = 0;

        for (int k = 0; k < n; k++)
            m = r->L[(size_t)t * n + k] > m ? r->L[(size_t)t * n + k] : m;
        for (int k = 0; k < n; k++) {
            pad += (double)(m - r->L[(size_t)t * n + k]);
            real += r->L[(size_t)t * n + k];
        }
    }
    return pad / real;
}

static int
cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* The optimum's table: distinct lengths v[], their counts as prefix sums,
 * and the rows of the dynamic program. */
typedef struct opt_dp {
    const uint32_t *v;
    const double *pre; /* pre[i] = count of v[0..i) */
    const double *prev;
    double *cur;
} opt_dp;

/* cost of padding v[a+1..i] to v[i], on top of prev[a] */
static double
opt_cost(const opt_dp *d, long a, long i)
{
    return d->prev[a] + (double)d->v[i] * (d->pre[i + 1] - d->pre[a + 1]);
}

/* Fills cur[lo..hi] knowing its best split lies in [alo, ahi] (the cost is
 * Monge: the best split moves right with i). */
static void
opt_fill(opt_dp *d, long lo, long hi, long alo, long ahi)
{
    long mid = lo + (hi - lo) / 2, best_a = alo;
    double best = 1e300;

    if (lo > hi)
        return;
    for (long a = alo; a <= ahi && a < mid; a++) {
        double c = opt_cost(d, a, mid);

        if (c < best) {
            best = c;
            best_a = a;
        }
    }
    d->cur[mid] = mid == 0 ? 1e300 : best;
    opt_fill(d, lo, mid - 1, alo, best_a);
    opt_fill(d, mid + 1, hi, best_a, ahi);
}

/* The offline optimum: K sizes, any lengths, chosen knowing every batch of
 * the trace; the least sum(S - L) / sum(L). */
static double
extra_optimal(const run *r)
{
    size_t n = (size_t)r->steps * r->o->ranks, nd = 0;
    uint32_t *v = malloc(n * sizeof *v);
    double *pre = malloc((n + 1) * sizeof *pre), *rows[2], real = 0, best;

    rows[0] = malloc(n * sizeof(double));
    rows[1] = malloc(n * sizeof(double));
    if (v == NULL || pre == NULL || rows[0] == NULL || rows[1] == NULL) {
        best = -1;
        goto out;
    }
    memcpy(v, r->L, n * sizeof *v);
    qsort(v, n, sizeof *v, cmp_u32);
    pre[0] = 0;
    for (size_t i = 0; i < n; i++) {
        real += v[i];
        if (nd > 0 && v[nd - 1] == v[i]) {
            pre[nd] += 1;
            continue;
        }
        v[nd] = v[i];
        pre[nd + 1] = pre[nd] + 1;
        nd++;
    }
    for (size_t i = 0; i < nd; i++) /* one size: everything pads to v[i] */
        rows[0][i] = (double)v[i] * pre[i + 1];
    best = rows[0][nd - 1];
    for (int j = 1; j < r->o->k && (size_t)j < nd; j++) {
        opt_dp d = { v, pre, rows[(j - 1) & 1], rows[j & 1] };

        opt_fill(&d, 0, (long)nd - 1, 0, (long)nd - 1);
        best = d.cur[nd - 1] < best ? d.cur[nd - 1] : best;
    }
    best = (best - real) / real;
out:
    free(v);
    free(pre);
    free(rows[0]);
    free(rows[1]);
    return best;
}

/* ---- the report ---- */

typedef struct result {
    double consensus, optimal, pow2, step_max;
    int graphs, outside, agreed, sets;
    bool digests_equal;
    double traffic;
} result;

static void
summarise(const run *r, result *x)
{
    const int n = r->o->ranks;

    *x = (result){ .consensus = extra_consensus(r),
                   .optimal = extra_optimal(r), .pow2 = extra_pow2(r),
                   .step_max = extra_step_max(r), .digests_equal = true,
                   .agreed = r->agreed[0], .sets = r->sets[0] };
    for (int k = 0; k < n; k++) {
        x->graphs = r->graphs[k] > x->graphs ? r->graphs[k] : x->graphs;
        x->digests_equal &= r->agreed[k] == r->agreed[0] &&
                            r->sets[k] == r->sets[0];
        x->outside += r->outside[k];
        x->traffic += (double)r->traffic[k] / n / (r->nagree ? r->nagree : 1);
        for (int a = 0; a < r->nagree; a++)
            x->digests_equal &= r->digest[(size_t)a * n + k] ==
                                r->digest[(size_t)a * n];
    }
}

/* bytes each rank puts into an agreement: 60 counts and 4 check sums */
#define RECORD_BYTES ((CCOL_BUCKETS_MAX_BINS + 4) * 8)

static void
print_json(const run *r, const result *x)
{
    printf("{\"ranks\": %d, \"per_rank\": %d, \"k\": %d, \"budget\": %d, "
           "\"max_len\": %u, "
           "\"steps\": %d, \"agreements\": %d, \"padding_consensus\": %.6f, "
           "\"padding_optimal\": %.6f, \"padding_pow2\": %.6f, "
           "\"padding_step_max\": %.6f, \"graphs_per_rank\": %d, "
           "\"sizes_agreed\": %d, \"bucket_sets\": %d, "
           "\"recompiles_after_agreement\": %d, "
           "\"bytes_per_rank_per_agreement\": %d, "
           "\"traffic_bytes_per_rank_per_agreement\": %.1f, "
           "\"digests_equal\": %s}\n",
           r->o->ranks, r->o->per_rank, r->o->k, r->o->budget, r->max_len,
           r->steps, r->nagree, x->consensus, x->optimal, x->pow2, x->step_max,
           x->graphs, x->agreed, x->sets, x->outside,
           RECORD_BYTES, x->traffic, x->digests_equal ? "true" : "false");
}

static void
print_table(const run *r, const result *x)
{
    printf("shape buckets: %d ranks, %d sequences a rank-step, K %d, "
           "max_len %u, %d steps, %d agreements\n\n", r->o->ranks,
           r->o->per_rank, r->o->k, r->max_len, r->steps, r->nagree);
    printf("  %-34s %14s %18s\n", "policy", "extra padding",
           "vs consensus");
    printf("  %-34s %13.1f%% %17.2fx\n", "consensus buckets (agreed)",
           100 * x->consensus, 1.0);
    printf("  %-34s %13.1f%% %17.2fx\n", "offline optimum, same K",
           100 * x->optimal, x->optimal / x->consensus);
    printf("  %-34s %13.1f%% %17.2fx\n", "power-of-two tiers", 100 * x->pow2,
           x->pow2 / x->consensus);
    printf("  %-34s %13.1f%% %17.2fx\n", "pad to the step's longest batch",
           100 * x->step_max, x->step_max / x->consensus);
    printf("\n  graphs per rank at most %d, of %d sizes in %d bucket sets "
           "agreed; sizes used outside\n  the agreed set: %d; bytes a rank "
           "puts into an agreement %d (sent per rank,\n  measured: %.0f); "
           "digests %s\n", x->graphs, x->agreed, x->sets, x->outside,
           RECORD_BYTES, x->traffic,
           x->digests_equal ? "equal on every rank at every agreement"
                            : "DIFFER");
}

static void
run_free(run *r)
{
    free(r->len);
    free(r->L);
    free(r->S);
    free(r->digest);
    free(r->graphs);
    free(r->agreed);
    free(r->sets);
    free(r->outside);
    free(r->traffic);
    pthread_mutex_destroy(&r->mu);
}

static int
setup(run *r, const opts *o)
{
    const size_t n = (size_t)o->ranks;

    r->o = o;
    if (o->max_len) {
        if (o->max_len < r->max_len) {
            fprintf(stderr, "ccol bench buckets: the trace holds %u, above "
                            "--max-len %u\n", r->max_len, o->max_len);
            return -1;
        }
        r->max_len = o->max_len;
    }
    r->steps = (int)(r->nlen / (n * (size_t)o->per_rank));
    if (r->steps < o->warmup) {
        fprintf(stderr, "ccol bench buckets: %u lengths make %d steps of %d "
                        "ranks x %d, fewer than --warmup %d\n", r->nlen,
                r->steps, o->ranks, o->per_rank, o->warmup);
        return -1;
    }
    for (int t = 0; t < r->steps; t++)
        r->nagree += agrees_at(o, t);
    r->L = calloc((size_t)r->steps * n, sizeof *r->L);
    r->S = calloc((size_t)r->steps * n, sizeof *r->S);
    r->digest = calloc((size_t)r->nagree * n + 1, sizeof *r->digest);
    r->graphs = calloc(n, sizeof *r->graphs);
    r->agreed = calloc(n, sizeof *r->agreed);
    r->sets = calloc(n, sizeof *r->sets);
    r->outside = calloc(n, sizeof *r->outside);
    r->traffic = calloc(n, sizeof *r->traffic);
    if (!r->L || !r->S || !r->digest || !r->graphs || !r->outside ||
        !r->agreed || !r->sets ||
        !r->traffic) {
        fprintf(stderr, "ccol bench buckets: out of memory\n");
        return -1;
    }
    return 0;
}

int
ccol_bench_buckets(int argc, char **argv)
{
    opts o;
    run r = { 0 };
    result x;
    int rc = 1;

    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (parse(argc, argv, &o) != 0)
        return 2;
    pthread_mutex_init(&r.mu, NULL);
    if (read_trace(o.trace, &r) != 0 || setup(&r, &o) != 0) {
        run_free(&r);
        return 2;
    }
    if (run_ranks(&r) != 0) {
        fprintf(stderr, "ccol bench buckets: %s\n", r.err);
    } else {
        summarise(&r, &x);
        (o.json ? print_json : print_table)(&r, &x);
        rc = x.digests_equal && x.outside == 0 ? 0 : 1;
    }
    run_free(&r);
    return rc;
}
