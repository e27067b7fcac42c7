/*
 * bench_scale_model.c - the cost model of `ccol bench scale`, calibrated on
 * the 2- and 4-rank jobs and a one-thread fold of the same run, and the
 * printing of measured and modelled rows side by side.
 *
 * Inputs, all measured in the run:
 *   hop    one empty message hop: half a 2-rank barrier (two hops);
 *   bw     bytes per second of one hop: 1 MiB / (2-rank bcast of 1 MiB
 *          less the barrier);
 *   dec    decoding and folding one payload, timed on one thread over 64
 *          payloads (the work a parent does per child, and the
 *          all-gather's local fold per rank);
 *   x_j    the join-reduce's fixed cost per exchange (encode, apply the
 *          result, bookkeeping): the 2-rank exchange less a barrier, the
 *          bytes' time and one dec;
 *   x_g    the same for the all-gather (less two decs);
 *   p_one, p_red  the join frames rank 0 and rank 1 receive at 2 ranks
 *          (one rank's payload, the reduced one); p_gat one payload's
 *          share of the all-gather frame; all less the slot bytes:
 *   s_j, s_g  within the star, inproc and shm ranks first meet in one-hop
 *          slots (docs/comm.md) and every rank reads every other rank's
 *          slot header and label: bytes per other rank, from the 2- and
 *          4-rank rows (0 when 4 ranks did not run as a star);
 *   T, k   the star threshold and fanout the communicator ran with;
 *   cores  processors online.
 * Shape: a star up to T ranks (depth 1, c = N - 1 children at the root);
 * above, a k-ary tree whose subtrees hold consecutive ranks, cut into k
 * nearly equal runs, longest first: depth D(N) = 1 + D(ceil((N - 1) / k)),
 * D(1) = 0, about log_k(N); c = k.
 * Bytes per rank per exchange:
 *   join:   star: median p_red + (N - 1) s_j, busiest (the root)
 *           (N - 1) (p_one + s_j); tree: median p_red (leaves receive the
 *           result only), busiest (k + 1) p_red (k partial results and the
 *           result): flat in N;
 *   gather: star: median and busiest N p_gat + (N - 1) s_g; tree: median
 *           N p_gat, busiest (N + ceil((N - 1) / k) - 1) p_gat (the root's
 *           first child also forwards its subtree's): linear in N.
 * Latency of one exchange, critical path with a core per rank:
 *   join:   D (2 hop + c (dec + 2 p_red / bw)) + x_j  (up and down each
 *           level, a parent folds its c children one after another);
 *   gather: D (2 hop + c N p_gat / bw) + N dec + x_g  (every level
 *           forwards all payloads to c children; every rank folds N).
 * With fewer cores than ranks the job's CPU is a floor: N (dec + x_j) /
 * cores for the join, N (N dec + x_g) / cores for the all-gather. The
 * "model" column is the larger of the two, "own core" the critical path
 * alone: what 10^4 and 10^5 ranks pay with a core each and this machine's
 * hop, bandwidth and fold costs.
 */
#include "bench_scale.h"

#include <math.h>
#include <stdio.h>

/* The model's inputs (see the file comment). */
typedef struct model {
    double hop;        /* seconds per empty hop */
    double bw;         /* bytes per second of one hop */
    double dec;        /* seconds to decode and fold one payload */
    double x[SC_N];    /* seconds of fixed cost per exchange */
    double p_one;      /* one rank's join payload frame, bytes */
    double p_red;      /* the reduced payload frame, bytes */
    double p_gat;      /* one payload's share of the all-gather frame */
    double slot[SC_N]; /* slot bytes read per other rank in a star */
    int t, k;          /* star threshold, fanout */
    int cores;         /* processors online */
} model;

/* One size's modelled figures. */
typedef struct point {
    int depth;           /* hops from the root to the deepest rank */
    double rx_med[SC_N]; /* bytes per rank, median */
    double rx_max[SC_N]; /* bytes per rank, busiest */
    double lat[SC_N];    /* seconds, with this machine's cores */
    double own[SC_N];    /* seconds, a core per rank */
} point;

static double
pos(double v)
{
    return v > 0 ? v : 0;
}

/* Frame and slot sizes from the 2-rank row and, if it ran as a star, the
 * 4-rank row: rank 1 of 2 receives p + s, the middle ranks of 4 p + 3 s
 * (join) or 2 p + s and 4 p + 3 s (all-gather). */
static void
calibrate_bytes(const scale_row *rows, int n, model *m)
{
    const scale_row *r2 = &rows[0];
    const scale_row *r4 = n > 1 && rows[1].size == 4 && !rows[1].err[0] &&
                                  m->t >= 4 ? &rows[1] : NULL;
    double j1 = 2 * r2->rx_med[SC_JOIN] - r2->rx_root[SC_JOIN];
    double g1 = 2 * r2->rx_med[SC_GATHER] - r2->rx_root[SC_GATHER];

    m->slot[SC_JOIN] = r4 ? pos(r4->rx_med[SC_JOIN] - j1) / 2 : 0;
    m->slot[SC_GATHER] = r4 ? pos(r4->rx_med[SC_GATHER] - 2 * g1) : 0;
    m->p_red = j1 - m->slot[SC_JOIN];
    m->p_one = r2->rx_root[SC_JOIN] - m->slot[SC_JOIN];
    m->p_gat = (g1 - m->slot[SC_GATHER]) / 2;
}

static void
calibrate(const scale_row *rows, int n, const scale_inputs *in, model *m)
{
    const scale_row *r2 = &rows[0];
    double big = pos(in->bcast2 - in->barrier2);

    m->t = in->threshold;
    m->k = in->fanout;
    m->cores = in->cores > 0 ? in->cores : 1;
    calibrate_bytes(rows, n, m);
    m->hop = in->barrier2 / 2;
    m->bw = big > 0 ? SCALE_BW_BYTES / big : 1e12;
    m->dec = in->fold1;
    m->x[SC_JOIN] = pos(r2->lat[SC_JOIN] - in->barrier2 -
                        (m->p_one + m->p_red) / m->bw - m->dec);
    m->x[SC_GATHER] = pos(r2->lat[SC_GATHER] - in->barrier2 -
                          3 * m->p_gat / m->bw - 2 * m->dec);
}

static double
max2(double a, double b)
{
    return a > b ? a : b;
}

/* Depth of the tree over n ranks (see the file comment). */
static int
depth(int n, const model *m)
{
    int d = 0;

    if (n <= 1)
        return 0;
    if (n <= m->t)
        return 1;
    for (; n > 1; d++)
        n = (n - 1 + m->k - 1) / m->k;
    return d;
}

/* Bytes per rank for n ranks (see the file comment). */
static void
predict_bytes(const model *m, int n, point *p)
{
    double N = n, first = ceil((N - 1) / m->k);
    const double *s = m->slot;

    if (n > m->t) {
        p->rx_med[SC_JOIN] = m->p_red;
        p->rx_max[SC_JOIN] = (m->k + 1) * m->p_red;
        p->rx_med[SC_GATHER] = N * m->p_gat;
        p->rx_max[SC_GATHER] = (N + first - 1) * m->p_gat;
    } else if (n == 2) {
        p->rx_med[SC_JOIN] = (m->p_one + m->p_red) / 2 + s[SC_JOIN];
        p->rx_max[SC_JOIN] = max2(m->p_one, m->p_red) + s[SC_JOIN];
        p->rx_med[SC_GATHER] = 1.5 * m->p_gat + s[SC_GATHER];
        p->rx_max[SC_GATHER] = 2 * m->p_gat + s[SC_GATHER];
    } else {
        p->rx_med[SC_JOIN] = m->p_red + (N - 1) * s[SC_JOIN];
        p->rx_max[SC_JOIN] = (N - 1) * (m->p_one + s[SC_JOIN]);
        p->rx_med[SC_GATHER] = N * m->p_gat + (N - 1) * s[SC_GATHER];
        p->rx_max[SC_GATHER] = p->rx_med[SC_GATHER];
    }
}

/* The modelled figures for n ranks. */
static void
predict(const model *m, int n, point *p)
{
    double N = n, c = n <= m->t ? n - 1 : m->k, D;

    p->depth = depth(n, m);
    D = p->depth;
    predict_bytes(m, n, p);
    p->own[SC_JOIN] = D * (2 * m->hop + c * (m->dec + 2 * m->p_red / m->bw)) +
                      m->x[SC_JOIN];
    p->own[SC_GATHER] = D * (2 * m->hop + c * N * m->p_gat / m->bw) +
                        N * m->dec + m->x[SC_GATHER];
    p->lat[SC_JOIN] = max2(p->own[SC_JOIN],
                           N * (m->dec + m->x[SC_JOIN]) / m->cores);
    p->lat[SC_GATHER] = max2(p->own[SC_GATHER],
                             N * (N * m->dec + m->x[SC_GATHER]) / m->cores);
}

/* Model error in percent of the measured value. */
static double
err(double model_v, double measured)
{
    return measured > 0 ? 100 * (model_v - measured) / measured : 0;
}

/* The job sizes modelled beyond the measured ones. */
static const int far_sizes[] = { 10000, 100000 };
#define N_FAR 2

static void
print_bytes(const scale_row *rows, int n, const model *m)
{
    point p;

    printf("bytes received per rank per exchange (headers included): "
           "measured | model\n");
    printf("%6s %5s | %9s %9s | %9s %9s | %11s %11s | %11s %11s\n",
           "ranks", "depth", "join med", "join max", "model med",
           "model max", "gather med", "gather max", "model med",
           "model max");
    for (int i = 0; i < n + N_FAR; i++) {
        const scale_row *w = i < n ? &rows[i] : NULL;
        predict(m, w ? w->size : far_sizes[i - n], &p);
        if (w && w->err[0])
            continue;
        if (w)
            printf("%6d %5d | %9.0f %9.0f | %9.0f %9.0f | %11.0f %11.0f | "
                   "%11.0f %11.0f\n", w->size, p.depth, w->rx_med[SC_JOIN],
                   w->rx_max[SC_JOIN], p.rx_med[SC_JOIN], p.rx_max[SC_JOIN],
                   w->rx_med[SC_GATHER], w->rx_max[SC_GATHER],
                   p.rx_med[SC_GATHER], p.rx_max[SC_GATHER]);
        else
            printf("%6d %5d | %9s %9s | %9.0f %9.0f | %11s %11s | "
                   "%11.0f %11.0f\n", far_sizes[i - n], p.depth, "-", "-",
                   p.rx_med[SC_JOIN], p.rx_max[SC_JOIN], "-", "-",
                   p.rx_med[SC_GATHER], p.rx_max[SC_GATHER]);
    }
}

static void
print_lat(const scale_row *rows, int n, const model *m)
{
    point p;

    printf("\nlatency of one exchange, ms (median over iterations of the "
           "slowest rank): measured | model\n"
           "model: max(critical path, job CPU / %d cores); own core: the "
           "critical path alone; iters: join/all-gather\n", m->cores);
    printf("%6s %7s | %9s %9s %6s | %10s %10s %6s | %9s %10s\n", "ranks",
           "iters", "join", "model", "err%", "gather", "model", "err%",
           "join own", "gather own");
    for (int i = 0; i < n + N_FAR; i++) {
        const scale_row *w = i < n ? &rows[i] : NULL;
        predict(m, w ? w->size : far_sizes[i - n], &p);
        if (w && w->err[0]) {
            printf("%6d failed: %s\n", w->size, w->err);
            continue;
        }
        if (w)
            printf("%6d %3d/%-3d | %9.2f %9.2f %6.0f | %10.2f %10.2f %6.0f "
                   "| %9.2f %10.2f\n", w->size, w->iters[SC_JOIN],
                   w->iters[SC_GATHER], w->lat[SC_JOIN] * 1e3,
                   p.lat[SC_JOIN] * 1e3, err(p.lat[SC_JOIN], w->lat[SC_JOIN]),
                   w->lat[SC_GATHER] * 1e3, p.lat[SC_GATHER] * 1e3,
                   err(p.lat[SC_GATHER], w->lat[SC_GATHER]),
                   p.own[SC_JOIN] * 1e3, p.own[SC_GATHER] * 1e3);
        else
            printf("%6d %7s | %9s %9.2f %6s | %10s %10.0f %6s | %9.2f "
                   "%10.2f\n", far_sizes[i - n], "model", "-",
                   p.lat[SC_JOIN] * 1e3, "", "-", p.lat[SC_GATHER] * 1e3,
                   "", p.own[SC_JOIN] * 1e3, p.own[SC_GATHER] * 1e3);
    }
}

static void
print_inputs(const model *m)
{
    printf("\nmodel inputs (2 inproc ranks, this run): hop %.1f us, "
           "bandwidth %.2f GB/s,\n  join payload %.0f B, reduced %.0f B, "
           "all-gather share %.0f B,\n  slot reads %.0f/%.0f B per other "
           "rank (join/all-gather), fold %.1f us/payload, fixed %.1f/%.1f "
           "us per exchange,\n  star up to %d ranks, then fanout %d\n",
           m->hop * 1e6, m->bw / 1e9, m->p_one, m->p_red, m->p_gat,
           m->slot[SC_JOIN],
           m->slot[SC_GATHER], m->dec * 1e6, m->x[SC_JOIN] * 1e6,
           m->x[SC_GATHER] * 1e6, m->t, m->k);
}

static void
json_point(const char *kind, const scale_row *w, const point *p, int k)
{
    printf("\"%s\": {", kind);
    if (w)
        printf("\"iters\": %d, \"rx_median\": %.0f, \"rx_max\": %.0f, "
               "\"median_us\": %.3f, ", w->iters[k], w->rx_med[k],
               w->rx_max[k], w->lat[k] * 1e6);
    printf("\"model\": {\"rx_median\": %.0f, \"rx_max\": %.0f, "
           "\"us\": %.3f, \"us_own_core\": %.3f}}", p->rx_med[k],
           p->rx_max[k], p->lat[k] * 1e6, p->own[k] * 1e6);
}

static void
json_row(const scale_row *w, int size, const model *m, bool first)
{
    point p;

    predict(m, size, &p);
    printf("%s\n  {\"ranks\": %d, \"depth\": %d, \"measured\": %s, ",
           first ? "" : ",", size, p.depth, w ? "true" : "false");
    if (w && w->err[0]) {
        printf("\"ok\": false, \"error\": \"");
        for (const char *s = w->err; *s; s++)
            printf(*s == '"' || *s == '\\' ? "\\%c" : "%c",
                   (unsigned char)*s < 0x20 ? '?' : *s);
        printf("\"}");
        return;
    }
    printf("\"ok\": true, ");
    json_point("join", w, &p, SC_JOIN);
    printf(", ");
    json_point("gather", w, &p, SC_GATHER);
    printf("}");
}

static void
print_json(const scale_row *rows, int n, const model *m)
{
    printf("{\"suite\": \"scale\", \"transport\": \"inproc\", \"sources\": "
           "20, \"cores\": %d, \"model_inputs\": {\"hop_us\": %.3f, "
           "\"bandwidth_Bps\": %.0f, \"payload_B\": %.0f, \"reduced_B\": "
           "%.0f, \"gather_share_B\": %.0f, \"slot_join_B\": %.0f, "
           "\"slot_gather_B\": %.0f, \"fold_us\": %.3f, "
           "\"fixed_join_us\": %.3f, \"fixed_gather_us\": %.3f, "
           "\"tree_threshold\": %d, \"tree_fanout\": %d}, "
           "\"results\": [", m->cores, m->hop * 1e6, m->bw, m->p_one,
           m->p_red, m->p_gat, m->slot[SC_JOIN], m->slot[SC_GATHER],
           m->dec * 1e6, m->x[SC_JOIN] * 1e6, m->x[SC_GATHER] * 1e6, m->t,
           m->k);
    for (int i = 0; i < n; i++)
        json_row(&rows[i], rows[i].size, m, i == 0);
    for (int i = 0; i < N_FAR; i++)
        json_row(NULL, far_sizes[i], m, n == 0 && i == 0);
    printf("\n]}\n");
}

void
scale_print(const scale_row *rows, int n, const scale_inputs *in, bool json)
{
    model m;

    calibrate(rows, n, in, &m);
    if (rows[0].err[0])
        fprintf(stderr, "ccol bench scale: the 2-rank job failed, so the "
                "model is not calibrated\n");
    if (json) {
        print_json(rows, n, &m);
        return;
    }
    printf("compile exchange at scale, %d sources: join-reduce (ccol) vs "
           "all-gather + local fold (PyTorch), inproc threads\n\n", 20);
    print_bytes(rows, n, &m);
    print_lat(rows, n, &m);
    print_inputs(&m);
}
