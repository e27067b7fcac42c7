/*
 * bench_comm.c - `ccol bench comm`: median and p90 latency of every
 * communicator operation for 2, 4 and 8 ranks over inproc (threads), tcp
 * and shm (forked processes), star vs tree at growing rank counts, Open MPI's
 * collectives measured in the same run as a baseline (ratio ccol/MPI).
 * Per call every rank passes a barrier, then times the operation; the cost
 * of a call is the maximum over ranks. Ranks write their samples straight
 * into a shared array (process-shared memory for tcp).
 */
#include "bench.h"
#include "bench_mpi.h"
#include "bench_util.h"
#include "launch.h"
#include "mpi_glue.h"

#include "ccol.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SIZES 8
#define MAX_BYTES ((size_t)16 << 20)
#define MAX_RANKS 64
#define MAX_ITERS 100000
#define MAX_CASES (3 * MAX_SIZES + 3)
#define NDOUBLES 16             /* the "small double array" */
#define WARMUP 5
#define OP_TIMEOUT_S 60.0
#define MPI_TIMEOUT_S 300.0
#define ERR_LEN 256

typedef enum op_kind {
    K_ALLGATHERV, K_BCAST, K_JOIN, K_ALLREDUCE_I64, K_ALLREDUCE_F64,
    K_BARRIER
} op_kind;

static const char *const kind_names[] = {
    "allgatherv", "bcast", "join_reduce", "allreduce_i64", "allreduce_f64",
    "barrier",
};

/* One timed row: an operation and its per-rank payload size. */
typedef struct bcase {
    op_kind kind; /* which operation */
    size_t bytes; /* payload per rank (allreduce: the array's bytes) */
} bcase;

/* Options of one invocation. */
typedef struct opts {
    int n;                    /* only this rank count, 0 = 2, 4, 8 */
    int transports;           /* bit 0: inproc, 1: tcp, 2: mpi (alone),
                                 3: shm */
    size_t sizes[MAX_SIZES];  /* payload sizes */
    int nsizes;
    int iters;                /* timed calls per row */
    bool json;                /* one JSON object on stdout */
    bool tree;                /* run the star vs tree comparison */
    bool mpi;                 /* run the MPI baseline */
    bool gloo;                /* run the torch.distributed gloo baseline */
    bool auth;                /* run the tcp token (tags) comparison */
} opts;

/* One measured configuration; every rank runs all its cases in order. */
typedef struct brun {
    ccol_transport transport; /* inproc, tcp or shm */
    int n;                    /* ranks */
    int threshold;            /* tree_threshold, 0 = default */
    const char *token;        /* job token, NULL for none */
    const bcase *cases;       /* rows */
    int ncases;
    int iters;                /* timed calls per row */
    int port;                 /* tcp rendezvous port */
    char name[64];            /* inproc group or shm job name */
    double *samples;          /* [case][iter][rank] seconds */
    char *errs;               /* [rank][ERR_LEN] first failure of a rank */
    size_t shared_len;        /* bytes of the samples+errs mapping */
} brun;

/* Arguments of one inproc rank thread. */
typedef struct rank_arg {
    brun *run;
    int rank;
} rank_arg;

/* Median and p90 of one row, in microseconds. */
typedef struct stat2 {
    double med, p90;
} stat2;

static unsigned group_counter; /* makes inproc group names unique */

static const char *
tname(ccol_transport t)
{
    return t == CCOL_TRANSPORT_TCP ? "tcp"
           : t == CCOL_TRANSPORT_SHM ? "shm" : "inproc";
}

/* ------------------------------------------------------------------ */
/* Operations                                                          */
/* ------------------------------------------------------------------ */

/* Join of two blobs: byte-wise maximum, the shorter one zero-extended.
 * Associative and commutative, as ccol_join_reduce requires. */
static ccol_status
max_combine(void *ud, const void *a, size_t alen, const void *b,
            size_t blen, void **out, size_t *out_len)
{
    const uint8_t *pa = a, *pb = b;
    size_t n = alen > blen ? alen : blen, m = alen < blen ? alen : blen;
    uint8_t *r = malloc(n > 0 ? n : 1);

    (void)ud;
    if (r == NULL)
        return CCOL_ERR_NO_MEMORY;
    /* The common part in blocks of 16 bytes without branches (so that
     * the compiler vectorises it at -O2, as MPI's MAX is), the rest byte
     * by byte, then the longer blob's tail. */
    size_t i = 0;
    for (; i + 16 <= m; i += 16)
        for (size_t k = 0; k < 16; k++)
            r[i + k] = pa[i + k] > pb[i + k] ? pa[i + k] : pb[i + k];
    for (; i < m; i++)
        r[i] = pa[i] > pb[i] ? pa[i] : pb[i];
    if (n > m)
        memcpy(r + m, alen > blen ? pa + m : pb + m, n - m);
    *out = r;
    *out_len = n;
    return CCOL_OK;
}

/* Runs one call of case `bc` on `comm` with `buf` as this rank's data. */
static ccol_status
one_call(ccol_comm *comm, const bcase *bc, uint8_t *buf, size_t *lens)
{
    void *out = NULL;
    size_t olen = 0;
    ccol_status st;

    switch (bc->kind) {
    case K_ALLGATHERV:
        st = ccol_allgatherv(comm, buf, bc->bytes, &out, lens);
        break;
    case K_BCAST:
        st = ccol_bcast(comm, 0, buf, bc->bytes, &out, &olen);
        break;
    case K_JOIN:
        st = ccol_join_reduce(comm, 1, buf, bc->bytes, max_combine, NULL,
                              &out, &olen);
        break;
    case K_ALLREDUCE_I64:
        st = ccol_allreduce_i64(comm, (int64_t *)(void *)buf, 1, CCOL_OP_SUM);
        break;
    case K_ALLREDUCE_F64:
        st = ccol_allreduce_f64(comm, (double *)(void *)buf, NDOUBLES,
                                CCOL_OP_MAX);
        break;
    default:
        st = ccol_barrier(comm);
        break;
    }
    ccol_free(out);
    return st;
}

/* Creates this rank's communicator for the run. */
static ccol_status
rank_comm(const brun *run, int rank, ccol_comm **comm)
{
    ccol_comm_params p = { 0 };

    p.mask = CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE |
             CCOL_COMM_PARAM_TRANSPORT | CCOL_COMM_PARAM_TIMEOUT;
    p.rank = rank;
    p.size = run->n;
    p.transport = run->transport;
    p.timeout_s = OP_TIMEOUT_S;
    if (run->transport == CCOL_TRANSPORT_TCP) {
        p.mask |= CCOL_COMM_PARAM_ADDR | CCOL_COMM_PARAM_PORT;
        p.addr = "127.0.0.1";
        p.port = run->port;
    } else {
        p.mask |= CCOL_COMM_PARAM_NAME;
        p.name = run->name;
    }
    if (run->threshold > 0) {
        p.mask |= CCOL_COMM_PARAM_TREE_THRESHOLD;
        p.tree_threshold = run->threshold;
    }
    if (run->token != NULL) {
        p.mask |= CCOL_COMM_PARAM_TOKEN;
        p.token = run->token;
    }
    return ccol_comm_create(&p, comm);
}

static size_t
max_bytes(const brun *run)
{
    size_t m = NDOUBLES * sizeof(double);

    for (int i = 0; i < run->ncases; i++)
        if (run->cases[i].bytes > m)
            m = run->cases[i].bytes;
    return m;
}

/* Times every call of one case on this rank; false after a failure. */
static bool
time_case(brun *run, ccol_comm *comm, int c, int rank, uint8_t *buf,
          size_t *lens)
{
    const bcase *bc = &run->cases[c];
    char *err = run->errs + (size_t)rank * ERR_LEN;

    for (int it = -WARMUP; it < run->iters; it++) {
        ccol_status st;
        double t0;

        memset(buf, rank + 1, max_bytes(run));
        st = ccol_barrier(comm);
        t0 = ccol_bench_now();
        if (st == CCOL_OK)
            st = one_call(comm, bc, buf, lens);
        if (st != CCOL_OK) {
            snprintf(err, ERR_LEN, "rank %d, %s %zu B: %s", rank,
                     kind_names[bc->kind], bc->bytes, ccol_comm_errmsg(comm));
            return false;
        }
        if (it >= 0)
            run->samples[((size_t)c * (size_t)run->iters + (size_t)it) *
                             (size_t)run->n + (size_t)rank] =
                ccol_bench_now() - t0;
    }
    return true;
}

/* The body of one rank (thread or process): every case, in order. */
static bool
rank_main(brun *run, int rank)
{
    char *err = run->errs + (size_t)rank * ERR_LEN;
    ccol_comm *comm = NULL;
    uint8_t *buf = malloc(max_bytes(run));
    size_t *lens = calloc((size_t)run->n, sizeof *lens);
    bool ok = buf != NULL && lens != NULL;

    if (!ok)
        snprintf(err, ERR_LEN, "rank %d: out of memory", rank);
    if (ok && rank_comm(run, rank, &comm) != CCOL_OK) {
        snprintf(err, ERR_LEN, "rank %d: cannot create communicator: %s",
                 rank, comm != NULL ? ccol_comm_errmsg(comm) : "no memory");
        ok = false;
    }
    for (int c = 0; ok && c < run->ncases; c++)
        ok = time_case(run, comm, c, rank, buf, lens);
    ccol_comm_destroy(comm);
    free(buf);
    free(lens);
    return ok;
}

/* ------------------------------------------------------------------ */
/* Running a configuration                                             */
/* ------------------------------------------------------------------ */

static void *
rank_thread(void *p)
{
    rank_arg *a = p;

    rank_main(a->run, a->rank);
    return NULL;
}

/* Inproc: one thread per rank. */
static bool
run_threads(brun *run)
{
    pthread_t th[MAX_RANKS];
    rank_arg args[MAX_RANKS];
    int started = 0;

    snprintf(run->name, sizeof run->name, "bench-comm-%ld-%u",
             (long)getpid(), group_counter++);
    for (; started < run->n; started++) {
        args[started] = (rank_arg){ .run = run, .rank = started };
        if (pthread_create(&th[started], NULL, rank_thread,
                           &args[started]) != 0) {
            snprintf(run->errs + (size_t)started * ERR_LEN, ERR_LEN,
                     "cannot start thread for rank %d", started);
            break; /* the others time out on the missing rank */
        }
    }
    for (int r = 0; r < started; r++)
        pthread_join(th[r], NULL);
    return started == run->n;
}

/* Waits for every forked rank; a rank that died stops the others. */
static void
wait_procs(brun *run, pid_t *pids)
{
    int left = run->n, status;

    while (left > 0) {
        pid_t pid = waitpid(-1, &status, 0);
        int r;

        if (pid < 0 && errno == EINTR)
            continue;
        if (pid < 0)
            return;
        for (r = 0; r < run->n && pids[r] != pid; r++)
            continue;
        if (r == run->n)
            continue;
        pids[r] = 0;
        left--;
        if (status == 0)
            continue;
        if (WIFSIGNALED(status))
            snprintf(run->errs + (size_t)r * ERR_LEN, ERR_LEN,
                     "rank %d was killed by signal %d", r, WTERMSIG(status));
        for (int k = 0; k < run->n; k++)
            if (pids[k] > 0)
                kill(pids[k], SIGKILL);
    }
}

/* Tcp and shm: one forked process per rank, all on a fresh loopback
 * port (tcp) or a fresh job name (shm). */
static bool
run_procs(brun *run)
{
    pid_t pids[MAX_RANKS] = { 0 };

    snprintf(run->name, sizeof run->name, "bench-%ld-%u", (long)getpid(),
             group_counter++);

    run->port = ccol_bench_free_port("127.0.0.1");
    if (run->port < 0) {
        snprintf(run->errs, ERR_LEN, "no free port: %s", strerror(errno));
        return false;
    }
    fflush(NULL);
    for (int r = 0; r < run->n; r++) {
        pids[r] = tool_launch_fork(false, NULL, 0);
        if (pids[r] == 0)
            _exit(rank_main(run, r) ? 0 : 1);
        if (pids[r] < 0) {
            pids[r] = 0;
            snprintf(run->errs + (size_t)r * ERR_LEN, ERR_LEN,
                     "cannot fork rank %d: %s", r, strerror(errno));
            for (int k = 0; k < r; k++)
                kill(pids[k], SIGKILL);
            break;
        }
    }
    wait_procs(run, pids);
    return true;
}

/* The first rank failure of a run, or NULL. */
static const char *
run_error(const brun *run)
{
    for (int r = 0; r < run->n; r++)
        if (run->errs[(size_t)r * ERR_LEN] != '\0')
            return run->errs + (size_t)r * ERR_LEN;
    return NULL;
}

/* Maps the shared sample and error arrays (visible to forked ranks). */
static bool
run_alloc(brun *run)
{
    size_t ns = (size_t)run->ncases * (size_t)run->iters * (size_t)run->n;
    void *p;

    run->shared_len = ns * sizeof(double) + (size_t)run->n * ERR_LEN;
    p = mmap(NULL, run->shared_len, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return false;
    run->samples = p;
    run->errs = (char *)p + ns * sizeof(double);
    return true;
}

static void
run_free(brun *run)
{
    if (run->samples != NULL)
        munmap(run->samples, run->shared_len);
    run->samples = NULL;
}

/*
 * Runs every case of `run` and writes the per-call cost (max over ranks,
 * seconds) of case c, call i to out[c * stride + i]. Returns false and
 * prints the first failure when a rank failed.
 */
static bool
measure_raw(brun *run, double *out, size_t stride)
{
    bool ok = run_alloc(run);

    if (ok)
        ok = run->transport != CCOL_TRANSPORT_INPROC ? run_procs(run)
                                                     : run_threads(run);
    if (ok && run_error(run) != NULL)
        ok = false;
    if (!ok)
        fprintf(stderr, "ccol bench comm: %s, %d ranks: %s\n",
                tname(run->transport), run->n, run->samples == NULL
                    ? "out of memory" : run_error(run) != NULL
                    ? run_error(run) : "could not start ranks");
    for (int c = 0; ok && c < run->ncases; c++) {
        for (int it = 0; it < run->iters; it++) {
            const double *s = run->samples +
                ((size_t)c * (size_t)run->iters + (size_t)it) * (size_t)run->n;
            double m = s[0];

            for (int r = 1; r < run->n; r++)
                m = s[r] > m ? s[r] : m;
            out[(size_t)c * stride + (size_t)it] = m;
        }
    }
    run_free(run);
    return ok;
}

/* Median and p90 in microseconds of each case's `n` costs (sorted). */
static void
stats_of(double *costs, size_t stride, size_t n, int ncases, stat2 *stats)
{
    for (int c = 0; c < ncases; c++) {
        double *v = costs + (size_t)c * stride;

        stats[c].med = ccol_bench_pct(v, n, 50.0) * 1e6;
        stats[c].p90 = ccol_bench_pct(v, n, 90.0) * 1e6;
    }
}

/* Measures every case of `run` and fills stats[case]. */
static bool
measure(brun *run, stat2 *stats)
{
    size_t n = (size_t)run->iters;
    double *costs = malloc((size_t)run->ncases * n * sizeof *costs);
    bool ok = costs != NULL && measure_raw(run, costs, n);

    if (costs == NULL)
        fprintf(stderr, "ccol bench comm: out of memory\n");
    if (ok)
        stats_of(costs, n, n, run->ncases, stats);
    free(costs);
    return ok;
}

/* ------------------------------------------------------------------ */
/* MPI baseline                                                        */
/* ------------------------------------------------------------------ */

/* MPI's figures for one rank count, by case (negative: none). */
typedef struct mpi_rows {
    double med[MAX_CASES];
    double p90[MAX_CASES];
} mpi_rows;


/* Parses "<tag> <op> <bytes> <median_us> <p90_us> <iters>" lines, tag
 * "mpi_coll" (ccol-mpi-coll) or "gloo" (bench_gloo.py). */
static int
mpi_parse(const char *text, const char *tag, const bcase *cases, int ncases,
          mpi_rows *m)
{
    int found = 0;

    for (const char *l = text; l != NULL && *l != '\0';) {
        char op[32], who[16];
        size_t bytes;
        double med, p90;
        const char *nl = strchr(l, '\n');

        if (sscanf(l, "%15s %31s %zu %lf %lf", who, op, &bytes, &med,
                   &p90) == 5 && strcmp(who, tag) == 0 && isfinite(med) &&
            isfinite(p90) &&
            med >= 0 && p90 >= 0) {
            for (int c = 0; c < ncases; c++) {
                const char *nm = kind_names[cases[c].kind];

                if (strcmp(nm, op) == 0 &&
                    bytes == cases[c].bytes && m->med[c] < 0) {
                    m->med[c] = med;
                    m->p90[c] = p90;
                    found++;
                }
            }
        }
        l = nl != NULL ? nl + 1 : NULL;
    }
    return found;
}

/* Formats the --sizes list for ccol-mpi-coll. */
static void
sizes_arg(const opts *o, char *buf, size_t len)
{
    size_t k = 0;

    buf[0] = '\0';
    for (int i = 0; i < o->nsizes && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%zu", i ? "," : "",
                              o->sizes[i]);
}

/*
 * Runs ccol-mpi-coll under mpirun with n ranks. Returns true with m filled;
 * false with *why set when MPI is unavailable or the run failed.
 */
static bool
mpi_measure(const opts *o, int n, const bcase *cases, int ncases,
            mpi_rows *m, const char **why)
{
    static char msg[512];
    char *dir = ccol_bench_exe_dir(), *mpirun = ccol_bench_which("mpirun");
    char prog[4200], nbuf[16], ibuf[16], sbuf[256], dbuf[16], *out = NULL;
    int rc = -2;

    for (int c = 0; c < MAX_CASES; c++)
        m->med[c] = m->p90[c] = -1;
    snprintf(prog, sizeof prog, "%s/ccol-mpi-coll", dir ? dir : ".");
    *why = "not available (install openmpi-bin libopenmpi-dev)";
    if (mpirun != NULL && dir != NULL && access(prog, X_OK) == 0) {
        char root[] = "--allow-run-as-root", over[] = "--oversubscribe";
        char nflag[] = "-n", sflag[] = "--sizes", iflag[] = "--iters";
        char dflag[] = "--doubles";
        char *argv[] = { mpirun, root, over, nflag, nbuf, prog, sflag, sbuf,
                         iflag, ibuf, dflag, dbuf, NULL };

        snprintf(nbuf, sizeof nbuf, "%d", n);
        snprintf(ibuf, sizeof ibuf, "%d", o->iters);
        snprintf(dbuf, sizeof dbuf, "%d", NDOUBLES);
        sizes_arg(o, sbuf, sizeof sbuf);
        rc = ccol_bench_capture(argv, MPI_TIMEOUT_S, &out);
        if (rc == 0 && mpi_parse(out, "mpi_coll", cases, ncases, m) > 0)
            *why = NULL;
        else {
            snprintf(msg, sizeof msg, "mpirun -n %d failed (%s): %.300s", n,
                     rc == -1 ? "timed out" : "status or output",
                     out != NULL ? out : "");
            *why = msg;
        }
    }
    free(out);
    free(dir);
    free(mpirun);
    return *why == NULL;
}

/* The Python that runs the gloo baseline: $CCOL_PYTHON, else the source
 * tree's .venv (make python), else python3 on the PATH. */
static char *
gloo_python(void)
{
    const char *env = getenv("CCOL_PYTHON");
    char venv[4200];

    if (env != NULL && env[0] != '\0')
        return strdup(env);
    snprintf(venv, sizeof venv, "%s/bin/python", CCOL_BENCH_VENV);
    if (access(venv, X_OK) == 0)
        return strdup(venv);
    return ccol_bench_which("python3");
}

/*
 * Runs bench/python/bench_gloo.py with n ranks: torch.distributed's gloo
 * timed like ccol. True with g filled; false with *why set otherwise.
 */
static bool
gloo_measure(const opts *o, int n, const bcase *cases, int ncases,
             mpi_rows *g, const char **why)
{
    static char msg[512];
    char *py = gloo_python(), script[4200], nbuf[16], ibuf[16], sbuf[256];
    char dbuf[16], *out = NULL;
    int rc;

    for (int c = 0; c < MAX_CASES; c++)
        g->med[c] = g->p90[c] = -1;
    snprintf(script, sizeof script, "%s/bench_gloo.py", CCOL_BENCH_PYDIR);
    *why = "not available (python3 with torch==2.13.0: make python)";
    if (py != NULL && access(script, R_OK) == 0) {
        char nflag[] = "-n", sflag[] = "--sizes", iflag[] = "--iters";
        char dflag[] = "--doubles";
        char *argv[] = { py, script, nflag, nbuf, sflag, sbuf, iflag, ibuf,
                         dflag, dbuf, NULL };

        snprintf(nbuf, sizeof nbuf, "%d", n);
        snprintf(ibuf, sizeof ibuf, "%d", o->iters);
        snprintf(dbuf, sizeof dbuf, "%d", NDOUBLES);
        sizes_arg(o, sbuf, sizeof sbuf);
        rc = ccol_bench_capture(argv, MPI_TIMEOUT_S, &out);
        if (rc == 0 && mpi_parse(out, "gloo", cases, ncases, g) > 0)
            *why = NULL;
        else if (rc != 3) {
            snprintf(msg, sizeof msg, "%.150s -n %d failed (%s): %.300s",
                     script,
                     n, rc == -1 ? "timed out" : "status or output",
                     out != NULL ? out : "");
            *why = msg;
        }
    }
    free(out);
    free(py);
    return *why == NULL;
}

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: ccol bench comm [-n N] [--transport inproc|tcp|shm|mpi] "
            "[--sizes 64,1024,65536]\n"
            "                       [--iters K] [--json] [--no-tree] "
            "[--no-mpi] [--no-gloo]\n"
            "                       [--no-auth]\n\n"
            "Median and p90 latency of allgatherv, bcast, join_reduce, "
            "allreduce\n(one int64; %d doubles) and barrier for 2, 4 and 8 "
            "ranks (or only N),\nstar vs tree at 8-64 ranks, tcp without "
            "vs with a token (2 and 4\nranks, or N), and Open MPI "
            "and torch.distributed's gloo\n(bench/python/bench_gloo.py; "
            "$CCOL_PYTHON, else .venv, else python3)\nin the same run when "
            "installed.\n"
            "  -n N          only N ranks (2..%d)\n"
            "  --transport T inproc (threads), tcp or shm (processes); "
            "default all three;\n"
            "                mpi: ccol over MPI against raw MPI in the "
            "same mpirun job\n"
            "                (starts `mpirun -n N` itself when not under "
            "mpirun;\n"
            "                the default under mpirun when built with "
            "MPI)\n"
            "  --sizes LIST  payload bytes per rank, up to %d sizes "
            "(default 64,1024,65536)\n"
            "  --iters K     timed calls per row (default 200)\n"
            "  --json        print one JSON object\n"
            "  --no-tree     skip the star vs tree comparison\n"
            "  --no-mpi      skip the MPI baseline\n"
            "  --no-gloo     skip the gloo baseline\n"
            "  --no-auth     skip the tcp token comparison\n",
            NDOUBLES, MAX_RANKS, MAX_SIZES);
}

static bool
parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    if (s == NULL || *s < '0' || *s > '9')
        return false;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Parses "64,1024,65536" into o->sizes; false on anything else. */
static bool
parse_sizes(const char *s, opts *o)
{
    char item[32];

    o->nsizes = 0;
    while (s != NULL && *s != '\0') {
        const char *comma = strchr(s, ',');
        size_t len = comma != NULL ? (size_t)(comma - s) : strlen(s);
        long v;

        if (len == 0 || len >= sizeof item || o->nsizes == MAX_SIZES)
            return false;
        memcpy(item, s, len);
        item[len] = '\0';
        if (!parse_long(item, 0, (long)MAX_BYTES, &v))
            return false;
        o->sizes[o->nsizes++] = (size_t)v;
        s = comma != NULL ? comma + 1 : NULL;
        if (s != NULL && *s == '\0')
            return false; /* trailing comma */
    }
    return o->nsizes > 0;
}

/* Applies option argv[*i] (with its value); false on a bad one. */
static bool
parse_opt(int argc, char **argv, int *i, opts *o)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    long x;

    if (strcmp(a, "--json") == 0 || strcmp(a, "--no-tree") == 0 ||
        strcmp(a, "--no-mpi") == 0 || strcmp(a, "--no-gloo") == 0 ||
        strcmp(a, "--no-auth") == 0) {
        o->json |= a[2] == 'j';
        o->tree &= strcmp(a, "--no-tree") != 0;
        o->auth &= strcmp(a, "--no-auth") != 0;
        o->mpi &= strcmp(a, "--no-mpi") != 0;
        o->gloo &= strcmp(a, "--no-gloo") != 0;
        return true;
    }
    if (v == NULL) {
        fprintf(stderr, "ccol bench comm: bad or incomplete option '%s'\n",
                a);
        return false;
    }
    ++*i;
    if (strcmp(a, "-n") == 0 && parse_long(v, 2, MAX_RANKS, &x))
        o->n = (int)x;
    else if (strcmp(a, "--iters") == 0 && parse_long(v, 1, MAX_ITERS, &x))
        o->iters = (int)x;
    else if (strcmp(a, "--sizes") == 0 && parse_sizes(v, o))
        ;
    else if (strcmp(a, "--transport") == 0 && strcmp(v, "inproc") == 0)
        o->transports = 1;
    else if (strcmp(a, "--transport") == 0 && strcmp(v, "tcp") == 0)
        o->transports = 2;
    else if (strcmp(a, "--transport") == 0 && strcmp(v, "mpi") == 0)
        o->transports = 4;
    else if (strcmp(a, "--transport") == 0 && strcmp(v, "shm") == 0)
        o->transports = 8;
    else {
        fprintf(stderr, "ccol bench comm: bad value '%s' for %s\n", v, a);
        return false;
    }
    return true;
}

/* Returns 0, 2 for a usage error, or -1 for --help. */
static int
parse_args(int argc, char **argv, opts *o)
{
    *o = (opts){ .transports = 11, .sizes = { 64, 1024, 65536 },
                 .nsizes = 3, .iters = 200, .tree = true, .mpi = true,
                 .gloo = true, .auth = true };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return -1;
        if (!parse_opt(argc, argv, &i, o))
            return 2;
    }
    return 0;
}

/* Lists the rows of the main table for the chosen sizes. */
static int
build_cases(const opts *o, bcase *cases)
{
    int k = 0;
    static const op_kind sized[] = { K_ALLGATHERV, K_BCAST, K_JOIN };

    for (size_t j = 0; j < sizeof sized / sizeof sized[0]; j++)
        for (int i = 0; i < o->nsizes; i++)
            cases[k++] = (bcase){ sized[j], o->sizes[i] };
    cases[k++] = (bcase){ K_ALLREDUCE_I64, sizeof(int64_t) };
    cases[k++] = (bcase){ K_ALLREDUCE_F64, NDOUBLES * sizeof(double) };
    cases[k++] = (bcase){ K_BARRIER, 0 };
    return k;
}

/* ------------------------------------------------------------------ */
/* The main table                                                      */
/* ------------------------------------------------------------------ */

/* A JSON number rounded to 0.001 (microseconds: nanosecond resolution). */
static json_t *
jnum(double v)
{
    return json_real(round(v * 1000.0) / 1000.0);
}

/* Prints a baseline's median and ccol's ratio to it, or dashes. */
static void
print_base(double med, double base)
{
    if (base >= 0)
        printf(" %9.1f %8.2f", base, base > 0 ? med / base : 0);
    else
        printf(" %9s %8s", "-", "-");
}

/* Emits one row as text or into the JSON array. */
static void
emit_row(const opts *o, json_t *rows, ccol_transport t, int n,
         const bcase *bc, const stat2 *s, double mpi_med, double gloo_med)
{
    if (o->json) {
        json_t *row = json_pack(
            "{s:s, s:i, s:s, s:I, s:o, s:o, s:o, s:o}", "transport",
            tname(t), "ranks", n, "op", kind_names[bc->kind], "bytes",
            (json_int_t)bc->bytes, "median_us", jnum(s->med), "p90_us",
            jnum(s->p90), "mpi_median_us",
            mpi_med >= 0 ? jnum(mpi_med) : json_null(), "ratio",
            mpi_med > 0 ? jnum(s->med / mpi_med) : json_null());
        if (o->gloo) {
            json_object_set_new(row, "gloo_median_us", gloo_med >= 0
                                ? jnum(gloo_med) : json_null());
            json_object_set_new(row, "gloo_ratio", gloo_med > 0
                                ? jnum(s->med / gloo_med) : json_null());
        }
        json_array_append_new(rows, row);
        return;
    }
    printf("%-9s %5d %-14s %8zu %9.1f %9.1f", tname(t), n,
           kind_names[bc->kind], bc->bytes, s->med, s->p90);
    print_base(s->med, mpi_med);
    if (o->gloo)
        print_base(s->med, gloo_med);
    printf("\n");
}

/* Measures one transport at one rank count and emits its rows. */
static bool
main_config(const opts *o, ccol_transport t, int n, const bcase *cases,
            int ncases, const mpi_rows *m, const mpi_rows *g, json_t *rows)
{
    stat2 stats[MAX_CASES];
    brun run = { .transport = t, .n = n, .cases = cases, .ncases = ncases,
                 .iters = o->iters };

    if (!measure(&run, stats))
        return false;
    for (int c = 0; c < ncases; c++)
        emit_row(o, rows, t, n, &cases[c], &stats[c],
                 m != NULL ? m->med[c] : -1, g != NULL ? g->med[c] : -1);
    return true;
}

/*
 * Runs the MPI baseline for each rank count before any table is printed.
 * Returns how many rank counts have figures; says once why not otherwise.
 */
static int
mpi_all(const opts *o, const int *ns, int nn, const bcase *cases,
        int ncases, mpi_rows *m, bool *have, json_t *mpi_json)
{
    const char *why = NULL;
    int got = 0;

    for (int i = 0; i < nn; i++) {
        have[i] = o->mpi && mpi_measure(o, ns[i], cases, ncases, &m[i], &why);
        got += have[i];
        if (!have[i] && why != NULL && strncmp(why, "not", 3) == 0)
            break; /* not installed: no use trying other sizes */
    }
    json_object_set_new(mpi_json, "available", json_boolean(got > 0));
    if (why != NULL) {
        json_object_set_new(mpi_json, "note", json_string(why));
        fprintf(o->json ? stderr : stdout, "MPI baseline: %s\n", why);
    } else if (!o->mpi) {
        json_object_set_new(mpi_json, "note", json_string("skipped"));
    }
    return got;
}

/* The gloo baseline for each rank count, like mpi_all(). */
static void
gloo_all(const opts *o, const int *ns, int nn, const bcase *cases,
         int ncases, mpi_rows *g, bool *have, json_t *gloo_json)
{
    const char *why = NULL;
    int got = 0;

    for (int i = 0; i < nn && o->gloo; i++) {
        have[i] = gloo_measure(o, ns[i], cases, ncases, &g[i], &why);
        got += have[i];
        if (!have[i] && why != NULL && strncmp(why, "not", 3) == 0)
            break;
    }
    json_object_set_new(gloo_json, "available", json_boolean(got > 0));
    if (why != NULL) {
        json_object_set_new(gloo_json, "note", json_string(why));
        fprintf(o->json ? stderr : stdout, "gloo baseline: %s\n", why);
    } else if (!o->gloo) {
        json_object_set_new(gloo_json, "note", json_string("skipped"));
    }
}

/* The main table: every transport at every rank count. */
static bool
main_table(const opts *o, json_t *root)
{
    int ns[3] = { 2, 4, 8 }, nn = o->n ? 1 : 3;
    bcase cases[MAX_CASES];
    int ncases = build_cases(o, cases);
    mpi_rows m[3], g[3];
    bool have[3] = { false, false, false }, ok = true;
    bool ghave[3] = { false, false, false };
    json_t *rows = json_array(), *mpi_json = json_object();
    json_t *gloo_json = json_object();

    if (o->n)
        ns[0] = o->n;
    json_object_set_new(root, "rows", rows);
    json_object_set_new(root, "mpi", mpi_json);
    json_object_set_new(root, "gloo", gloo_json);
    mpi_all(o, ns, nn, cases, ncases, m, have, mpi_json);
    gloo_all(o, ns, nn, cases, ncases, g, ghave, gloo_json);
    if (!o->json)
        printf("\n%-9s %5s %-14s %8s %9s %9s %9s %8s%s\n", "transport",
               "ranks", "op", "bytes", "median", "p90", "MPI", "ccol/MPI",
               o->gloo ? "      gloo ccol/gloo" : "");
    for (int i = 0; i < nn; i++) {
        for (int t = 1; t <= 8; t <<= 1) {
            if (!(o->transports & t) || t == 4)
                continue;
            ok = main_config(o, t == 1   ? CCOL_TRANSPORT_INPROC
                                : t == 2 ? CCOL_TRANSPORT_TCP
                                         : CCOL_TRANSPORT_SHM,
                             ns[i], cases, ncases, have[i] ? &m[i] : NULL,
                             ghave[i] ? &g[i] : NULL, rows) && ok;
        }
    }
    return ok;
}

/* ------------------------------------------------------------------ */
/* Star vs tree                                                        */
/* ------------------------------------------------------------------ */

/* The rows of the comparison: the operations a compile exchange uses. */
static const bcase tree_cases[] = {
    { K_ALLGATHERV, 64 }, { K_ALLREDUCE_I64, 8 }, { K_BARRIER, 0 },
};
#define NTREE_CASES 3

/* One configuration of the comparison. */
typedef struct tree_cfg {
    ccol_transport t; /* transport */
    int n;            /* ranks */
} tree_cfg;

static const tree_cfg tree_cfgs[] = {
    { CCOL_TRANSPORT_INPROC, 8 }, { CCOL_TRANSPORT_INPROC, 16 },
    { CCOL_TRANSPORT_INPROC, 32 }, { CCOL_TRANSPORT_INPROC, 64 },
    { CCOL_TRANSPORT_TCP, 8 }, { CCOL_TRANSPORT_SHM, 8 },
};
#define NTREE_CFGS 6

/* Calls per row: fewer at large rank counts, whose calls are slower. */
static int
tree_iters(const opts *o, int n)
{
    int k = n > 16 ? o->iters * 16 / n : o->iters;

    return k < 20 ? (o->iters < 20 ? o->iters : 20) : k;
}

/* Emits one comparison row. */
static void
tree_row(const opts *o, json_t *rows, const tree_cfg *cfg, const bcase *bc,
         double star, double tree)
{
    if (o->json) {
        json_array_append_new(rows, json_pack(
            "{s:s, s:i, s:s, s:I, s:o, s:o, s:o}", "transport",
            tname(cfg->t), "ranks", cfg->n, "op", kind_names[bc->kind],
            "bytes", (json_int_t)bc->bytes, "star_us", jnum(star),
            "tree_us", jnum(tree), "ratio",
            jnum(star > 0 ? tree / star : 0.0)));
        return;
    }
    printf("%-9s %5d %-14s %8zu %9.1f %9.1f %9.2f\n", tname(cfg->t), cfg->n,
           kind_names[bc->kind], bc->bytes, star, tree,
           star > 0 ? tree / star : 0.0);
}

/* Sets a run up as variant 0 or 1 of an A/B comparison. */
typedef void (*ab_variant)(brun *run, int v);

#define AB_MAX_CASES 4

/*
 * Measures the cases of `base` in variants 0 and 1, in the order 0, 1, 1,
 * 0 with half of `iters` calls each, so drifting machine load hits both
 * alike; st[v][c] is case c's median and p90 in variant v.
 */
static bool
ab_measure(const brun *base, int iters, ab_variant set,
           stat2 st[2][AB_MAX_CASES])
{
    static const int order[4] = { 0, 1, 1, 0 };
    int half = (iters + 1) / 2;
    size_t stride = 2 * (size_t)half;
    double *costs[2];
    bool ok;

    costs[0] = malloc((size_t)base->ncases * stride * sizeof(double));
    costs[1] = malloc((size_t)base->ncases * stride * sizeof(double));
    ok = costs[0] != NULL && costs[1] != NULL;
    for (int k = 0; ok && k < 4; k++) {
        brun run = *base;

        run.iters = half;
        set(&run, order[k]);
        ok = measure_raw(&run, costs[order[k]] + (k < 2 ? 0 : half), stride);
    }
    for (int v = 0; ok && v < 2; v++)
        stats_of(costs[v], stride, stride, base->ncases, st[v]);
    free(costs[0]);
    free(costs[1]);
    return ok;
}

/* Variant 0 a star (tree_threshold = ranks), 1 a tree (threshold 1). */
static void
star_or_tree(brun *run, int v)
{
    run->threshold = v ? 1 : run->n;
}

/*
 * Measures one configuration as a star and as a tree (ab_measure). *ratio
 * is the tree/star ratio of the summed medians. False on failure.
 */
static bool
tree_config(const opts *o, const tree_cfg *cfg, json_t *rows, double *ratio)
{
    brun base = { .transport = cfg->t, .n = cfg->n, .cases = tree_cases,
                  .ncases = NTREE_CASES };
    stat2 st[2][AB_MAX_CASES];
    double ss = 0, ts = 0;

    if (!ab_measure(&base, tree_iters(o, cfg->n), star_or_tree, st))
        return false;
    for (int c = 0; c < NTREE_CASES; c++) {
        tree_row(o, rows, cfg, &tree_cases[c], st[0][c].med, st[1][c].med);
        ss += st[0][c].med;
        ts += st[1][c].med;
    }
    *ratio = ss > 0 ? ts / ss : 0;
    return true;
}

/*
 * The smallest measured inproc rank count from which the tree is faster at
 * every larger measured count, or 0 when the star wins throughout.
 */
static int
crossover(const double *ratio, const bool *done)
{
    int from = 0;

    for (int i = NTREE_CFGS - 1; i >= 0; i--) {
        if (tree_cfgs[i].t != CCOL_TRANSPORT_INPROC || !done[i])
            continue;
        if (ratio[i] >= 1.0)
            break;
        from = tree_cfgs[i].n;
    }
    return from;
}

/* Records tree/star of the summed medians of every configuration. */
static void
tree_summary(const opts *o, json_t *tj, const double *ratio,
             const bool *done)
{
    json_t *sum = json_array();

    json_object_set_new(tj, "summary", sum);
    if (!o->json)
        printf("tree/star of the summed medians:");
    for (int i = 0; i < NTREE_CFGS; i++) {
        if (!done[i])
            continue;
        json_array_append_new(sum, json_pack("{s:s, s:i, s:o}", "transport",
                                             tname(tree_cfgs[i].t), "ranks",
                                             tree_cfgs[i].n, "ratio",
                                             jnum(ratio[i])));
        if (!o->json)
            printf(" %s %d: %.2f;", tname(tree_cfgs[i].t), tree_cfgs[i].n,
                   ratio[i]);
    }
    if (!o->json)
        printf("\n");
}

/* Prints (or records) what the comparison says about the threshold 16. */
static void
tree_verdict(const opts *o, json_t *tj, const double *ratio,
             const bool *done)
{
    int from = crossover(ratio, done), n_inproc = 0;
    const char *v;

    for (int i = 0; i < NTREE_CFGS; i++)
        n_inproc += done[i] && tree_cfgs[i].t == CCOL_TRANSPORT_INPROC;
    if (n_inproc == 0)
        v = "no inproc measurement";
    else if (from == 32)
        v = "supported: star is faster up to 16 ranks, tree above";
    else if (from == 0)
        v = "star faster at the largest measured size (the tree never "
            "takes over): a higher threshold fits";
    else if (from < 32)
        v = "tree already faster at or below 16 ranks: a lower threshold "
            "fits";
    else
        v = "tree faster only from 64 ranks: a higher threshold fits";
    tree_summary(o, tj, ratio, done);
    json_object_set_new(tj, "default_threshold", json_integer(16));
    json_object_set_new(tj, "tree_faster_from", from ? json_integer(from)
                                                     : json_null());
    json_object_set_new(tj, "verdict", json_string(v));
    if (o->json)
        return;
    if (from)
        printf("inproc: tree faster from %d ranks on\n", from);
    printf("default tree_threshold 16 (inproc): %s\n", v);
}

/* The star vs tree comparison. */
static bool
tree_table(const opts *o, json_t *root)
{
    double ratio[NTREE_CFGS] = { 0 };
    bool done[NTREE_CFGS] = { false }, ok = true;
    json_t *tj = json_object(), *rows = json_array();

    json_object_set_new(root, "tree", tj);
    json_object_set_new(tj, "fanout", json_integer(4));
    json_object_set_new(tj, "rows", rows);
    if (!o->json)
        printf("\nstar (tree_threshold = ranks) vs tree (tree_threshold = 1,"
               " fanout 4), median us\n%-9s %5s %-14s %8s %9s %9s %9s\n",
               "transport", "ranks", "op", "bytes", "star", "tree",
               "tree/star");
    for (int i = 0; i < NTREE_CFGS; i++) {
        int bit = tree_cfgs[i].t == CCOL_TRANSPORT_TCP   ? 2
                  : tree_cfgs[i].t == CCOL_TRANSPORT_SHM ? 8 : 1;

        if (!(o->transports & bit))
            continue;
        done[i] = tree_config(o, &tree_cfgs[i], rows, &ratio[i]);
        ok = ok && done[i];
    }
    tree_verdict(o, tj, ratio, done);
    return ok;
}

/* ------------------------------------------------------------------ */
/* tcp without and with a token                                        */
/* ------------------------------------------------------------------ */

/* The rows: the small operations of a compile exchange, and one large
 * payload, where the tag's hashing shows most. */
static const bcase auth_cases[] = {
    { K_ALLGATHERV, 64 }, { K_ALLREDUCE_I64, 8 }, { K_BARRIER, 0 },
    { K_ALLGATHERV, 65536 },
};
#define NAUTH_CASES 4

/* Variant 0 without a token, 1 with one: every frame tagged. */
static void
plain_or_tagged(brun *run, int v)
{
    run->token = v ? "bench-token-0123456789abcdef" : NULL;
}

/* Emits one row of the token comparison. */
static void
auth_row(const opts *o, json_t *rows, int n, const bcase *bc, double plain,
         double tagged)
{
    if (o->json) {
        json_array_append_new(rows, json_pack(
            "{s:s, s:i, s:s, s:I, s:o, s:o, s:o}", "transport", "tcp",
            "ranks", n, "op", kind_names[bc->kind], "bytes",
            (json_int_t)bc->bytes, "plain_us", jnum(plain), "tagged_us",
            jnum(tagged), "ratio", jnum(plain > 0 ? tagged / plain : 0.0)));
        return;
    }
    printf("%-9s %5d %-14s %8zu %9.1f %9.1f %9.2f\n", "tcp", n,
           kind_names[bc->kind], bc->bytes, plain, tagged,
           plain > 0 ? tagged / plain : 0.0);
}

/* tcp at 2 and 4 ranks (or -n) without and with a token. */
static bool
auth_table(const opts *o, json_t *root)
{
    static const int counts[2] = { 2, 4 };
    json_t *rows = json_array();
    bool ok = true;

    json_object_set_new(root, "auth", rows);
    if (!o->json)
        printf("\ntcp without a token vs with one (every frame tagged), "
               "median us\n%-9s %5s %-14s %8s %9s %9s %9s\n", "transport",
               "ranks", "op", "bytes", "plain", "tagged", "tag/plain");
    for (int i = 0; i < 2 && ok; i++) {
        int n = o->n ? o->n : counts[i];
        brun base = { .transport = CCOL_TRANSPORT_TCP, .n = n,
                      .cases = auth_cases, .ncases = NAUTH_CASES };
        stat2 st[2][AB_MAX_CASES];

        if (o->n && i > 0)
            break;
        ok = ab_measure(&base, o->iters, plain_or_tagged, st);
        for (int c = 0; ok && c < NAUTH_CASES; c++)
            auth_row(o, rows, n, &auth_cases[c], st[0][c].med, st[1][c].med);
    }
    return ok;
}

/* ------------------------------------------------------------------ */
/* Entry point                                                         */
/* ------------------------------------------------------------------ */

static void
print_intro(const opts *o, json_t *root)
{
    json_t *sizes = json_array();

    for (int i = 0; i < o->nsizes; i++)
        json_array_append_new(sizes, json_integer((json_int_t)o->sizes[i]));
    json_object_set_new(root, "suite", json_string("comm"));
    json_object_set_new(root, "iters", json_integer(o->iters));
    json_object_set_new(root, "warmup", json_integer(WARMUP));
    json_object_set_new(root, "sizes", sizes);
    json_object_set_new(root, "unit", json_string("us"));
    if (o->json)
        return;
    printf("ccol bench comm: %d timed calls per row after %d warm-up "
           "calls.\nPer call: barrier, then the timed operation; cost = "
           "max over ranks;\nmedian and p90 in microseconds. inproc ranks "
           "are threads, tcp and shm ranks\nprocesses; MPI is Open MPI via "
           "mpirun (processes); gloo is torch.distributed\n(processes, "
           "all_gather for allgatherv). allreduce_f64: %d doubles.\n"
           "join_reduce combines by byte-wise max; its MPI and gloo rows "
           "are an\nall-reduce MAX on unsigned bytes.\n",
           o->iters, WARMUP, NDOUBLES);
}

int
ccol_bench_comm(int argc, char **argv)
{
    opts o;
    int rc = parse_args(argc, argv, &o);
    json_t *root;
    bool ok;

    if (rc != 0) {
        usage(rc < 0 ? stdout : stderr);
        return rc < 0 ? 0 : rc;
    }
    if (o.transports == 11 && mpi_glue_auto())
        o.transports = 4; /* under mpirun: no --transport means mpi */
    if (o.transports == 4) {
        bench_mpi_opts m = { o.n, o.sizes, o.nsizes, o.iters, o.json };
        return ccol_bench_comm_mpi(&m, argc, argv);
    }
    root = json_object();
    if (root == NULL)
        return 1;
    print_intro(&o, root);
    ok = main_table(&o, root);
    if (o.tree)
        ok = tree_table(&o, root) && ok;
    if (o.auth && (o.transports & 2))
        ok = auth_table(&o, root) && ok;
    json_object_set_new(root, "ok", json_boolean(ok));
    if (o.json) {
        char *s = json_dumps(root, JSON_INDENT(1));

        if (s != NULL)
            printf("%s\n", s);
        free(s);
    }
    json_decref(root);
    return ok ? 0 : 1;
}
