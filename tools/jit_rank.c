/*
 * jit_rank.c - one rank of a `ccol jit` job: loads the program, opens a
 * JIT session on the job's communicator (or, when the schedule has
 * domains, on a sub-communicator of this rank's domain, so a pipeline's
 * stages compile and agree apart), makes every call of the schedule
 * in order (stopping at the first failure), optionally checks each result
 * against an eager call, meets the other ranks at the end of the schedule,
 * and describes what happened as a JSON summary entry (docs/cli.md).
 */
#include "jit_rank.h"
#include "jit_args.h"
#include "jit_profile.h"
#include "jit_summary.h"
#include "util.h"

#include "ccol_jit_session.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* One rank's handles and the parts of its entry under construction. */
typedef struct rank_ctx {
    const jit_opts *o;
    ccol_comm *comm;       /* the job's */
    ccol_comm *dom;        /* the domain's: the job's, or a sub of it */
    int domain;            /* the schedule's domain index, or -1 */
    int rank;
    ccol_jit_module *m;
    ccol_jit_session *s;
    json_t *results;       /* results[k] of the calls made */
    json_t *compile_calls; /* calls during which this rank compiled */
    json_t *error;         /* the first failure, or NULL */
    FILE *print_to;        /* print() output: stdout, or stderr with --json */
    bool prefixed;         /* a launcher prefixes our lines (ccol run) */
    jit_profile prof;      /* --profile: loaded, frames, written */
} rank_ctx;

static void
set_error(rank_ctx *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when the rank made every call and nothing failed. */
static bool
rank_ok(const rank_ctx *c)
{
    return c->error == NULL &&
           json_array_size(c->results) == c->o->sched->ncalls;
}

/* Records the first failure of the rank; later ones are consequences. */
static void
set_error(rank_ctx *c, const char *code, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    if (c->error != NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* The message may quote the program's bytes (a source line): made
     * valid UTF-8 so the entry always serializes. */
    c->error = json_pack("{s:s, s:o*}", "code", code, "message",
                         jit_json_text(msg));
}

/* The error code of a failed call: a program's own mistakes (what the
 * JIT reports as an invalid argument) are PROGRAM, the rest keep the
 * status name (TIMEOUT, DIVERGED, PEER, ...). */
static const char *
code_of(ccol_status st)
{
    return st == CCOL_ERR_INVALID_ARG ? "PROGRAM" : ccol_status_name(st);
}

/* Length of a "[rank R] " prefix of this rank at the start of line, or
 * 0 when there is none. */
static size_t
rank_prefix_len(const char *line, int rank)
{
    char want[32];
    int n = snprintf(want, sizeof want, "[rank %d] ", rank);

    return strncmp(line, want, (size_t)n) == 0 ? (size_t)n : 0;
}

/* print() output: stdout, or stderr when stdout carries the JSON. Under
 * a launcher that prefixes every line with the rank (ccol run), the
 * JIT's own rank prefix is dropped so it is not printed twice. */
static void
print_line(void *ud, const char *line)
{
    const rank_ctx *c = ud;

    if (c->prefixed)
        line += rank_prefix_len(line, c->rank);
    fprintf(c->print_to, "%s\n", line);
    fflush(c->print_to);
}

static void
drop_line(void *ud, const char *line)
{
    (void)ud;
    (void)line;
}

/* Session log lines (decisions, warnings) go to stderr with the rank
 * once: "[rank R] " unless a launcher adds it, and a "rank R: " the line
 * starts with (after "warning: ") is dropped as said already. */
static void
log_line(void *ud, const char *line)
{
    const rank_ctx *c = ud;
    char own[32];
    const char *warn = strncmp(line, "warning: ", 9) == 0 ? "warning: " : "";
    int n = snprintf(own, sizeof own, "rank %d: ", c->rank);

    line += strlen(warn);
    if (strncmp(line, own, (size_t)n) == 0)
        line += n;
    if (c->prefixed)
        fprintf(stderr, "%s%s\n", warn, line);
    else
        fprintf(stderr, "[rank %d] %s%s\n", c->rank, warn, line);
}

/* Reads the program text, at most CCOL_JIT_MAX_SOURCE + 1 bytes (the
 * module reports a longer source itself). */
static char *
read_source(const char *path, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *buf;

    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open the program: %s", path,
                 strerror(errno));
        return NULL;
    }
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: is a directory, not a program", path);
        fclose(f);
        return NULL;
    }
    buf = malloc((size_t)CCOL_JIT_MAX_SOURCE + 2);
    if (buf != NULL) {
        *len = fread(buf, 1, (size_t)CCOL_JIT_MAX_SOURCE + 1, f);
        if (ferror(f)) {
            free(buf);
            buf = NULL;
        }
    }
    if (buf == NULL)
        snprintf(err, errlen, "%s: cannot read the program", path);
    fclose(f);
    return buf;
}

static int
load_program(rank_ctx *c)
{
    ccol_jit_params p = { .mask = CCOL_JIT_PARAM_PRINT };
    char err[512];
    size_t len = 0;
    char *src;
    ccol_status st;

    p.print = c->o->quiet ? drop_line : print_line;
    p.print_ud = c;
    c->print_to = c->o->json ? stderr : stdout;
    if (ccol_jit_module_create(&p, &c->m) != CCOL_OK) {
        set_error(c, "NO_MEMORY", "cannot create the JIT module");
        return -1;
    }
    if (c->o->prog_src != NULL) {
        st = ccol_jit_module_load(c->m, c->o->prog_src, c->o->prog_len,
                                  c->o->prog);
    } else {
        if ((src = read_source(c->o->prog, &len, err, sizeof err)) == NULL) {
            set_error(c, "PROGRAM", "%s", err);
            return -1;
        }
        st = ccol_jit_module_load(c->m, src, len, c->o->prog);
        free(src);
    }
    if (st != CCOL_OK) {
        set_error(c, code_of(st), "%s", ccol_jit_module_errmsg(c->m));
        return -1;
    }
    return 0;
}

int
jit_program_check(const jit_opts *o, char *err, size_t errlen)
{
    ccol_jit_params p = { .mask = CCOL_JIT_PARAM_PRINT, .print = drop_line };
    ccol_jit_module *m = NULL;
    size_t len = 0;
    char *src = NULL;
    ccol_status st;

    if (o->prog_src == NULL &&
        (src = read_source(o->prog, &len, err, errlen)) == NULL)
        return -1;
    if (ccol_jit_module_create(&p, &m) != CCOL_OK) {
        free(src);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    st = src != NULL ? ccol_jit_module_load(m, src, len, o->prog)
                     : ccol_jit_module_load(m, o->prog_src, o->prog_len,
                                            o->prog);
    if (st != CCOL_OK)
        snprintf(err, errlen, "%s", ccol_jit_module_errmsg(m));
    ccol_jit_module_destroy(m);
    free(src);
    return st == CCOL_OK ? 0 : -1;
}

/* A schedule with domains: this rank's domain gets a sub-communicator of
 * its own, formed by its ranks alone, over which the session compiles and
 * the program's collectives run. */
static int
open_domain(rank_ctx *c)
{
    const sched_domain *d;
    char name[32];
    ccol_status st;

    c->domain = sched_domain_of(c->o->sched, c->rank, &d);
    if (c->domain < 0)
        return 0;
    snprintf(name, sizeof name, "domain %d", c->domain);
    st = ccol_comm_create_sub(c->comm, d->ranks, (int)d->n, name, &c->dom);
    if (st == CCOL_OK)
        return 0;
    set_error(c, code_of(st), "cannot form domain %d: %s", c->domain,
              c->dom ? ccol_comm_errmsg(c->dom) : ccol_comm_errmsg(c->comm));
    ccol_comm_destroy(c->dom);
    c->dom = c->comm;
    return -1;
}

static int
open_session(rank_ctx *c)
{
    ccol_jit_session_params p = { 0 };
    ccol_status st;

    p.mask = CCOL_JIT_SESSION_PARAM_MODE | CCOL_JIT_SESSION_PARAM_EXPLAIN;
    p.mode = (ccol_sync_mode)jit_mode_resolve(c->o->mode,
                                              ccol_comm_size(c->dom));
    p.explain = c->o->explain;
    if (c->o->recompile_limit > 0) {
        p.mask |= CCOL_JIT_SESSION_PARAM_RECOMPILE_LIMIT;
        p.recompile_limit = c->o->recompile_limit;
    }
    if (!c->o->quiet) {
        p.mask |= CCOL_JIT_SESSION_PARAM_LOG;
        p.log = log_line;
        p.log_ud = c;
    }
    st = ccol_jit_session_create(c->m, c->dom, &p, &c->s);
    if (st != CCOL_OK) {
        set_error(c, code_of(st), "cannot start the JIT session: %s",
                  c->s ? ccol_jit_session_errmsg(c->s)
                       : ccol_status_str(st));
        ccol_jit_session_destroy(c->s);
        c->s = NULL;
        return -1;
    }
    return 0;
}

/* A number as JSON: null for None (and strings, which have no number),
 * "nan" / "inf" / "-inf" for what JSON cannot spell. */
static json_t *
number(double v, bool none)
{
    if (none)
        return json_null();
    if (isnan(v))
        return json_string("nan");
    if (isinf(v))
        return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

/* Reduces a result to one number (docs/cli.md). */
static void
reduce(const ccol_jit_value *v, double *out, bool *none)
{
    *none = false;
    if (ccol_jit_value_reduce(v, out, none) != CCOL_OK) {
        *out = NAN;
        *none = true;
    }
}

/* --check: the same call made eagerly must give the same number. */
static int
check_call(rank_ctx *c, size_t k, const char *fn, ccol_jit_value **vals,
           size_t n, double got, bool got_none)
{
    ccol_jit_value *res = NULL;
    double want;
    bool want_none, same;
    ccol_status st = ccol_jit_call(c->m, fn, vals, n, c->dom, &res);

    if (st != CCOL_OK) {
        set_error(c, code_of(st), "call %zu (%s) on rank %d: the eager "
                  "check failed: %s", k, fn, c->rank,
                  ccol_jit_module_errmsg(c->m));
        return -1;
    }
    reduce(res, &want, &want_none);
    ccol_jit_value_release(res);
    same = got_none == want_none &&
           (got_none || (isnan(got) && isnan(want)) || got == want ||
            fabs(got - want) <= 1e-4 * (1 + fabs(want)));
    if (!same) {
        set_error(c, "MISMATCH", "call %zu (%s) on rank %d: compiled "
                  "result %.9g differs from the eager result %.9g", k, fn,
                  c->rank, got_none ? (double)NAN : got,
                  want_none ? (double)NAN : want);
        return -1;
    }
    return 0;
}

/* The test hooks: die or stall in the middle of the schedule (the
 * skew hook acts on the result, in call_with). */
static void
maybe_fault(const rank_ctx *c, size_t k)
{
    const jit_opts *o = c->o;

    if (o->fault == JIT_FAULT_NONE || o->fault == JIT_FAULT_SKEW ||
        o->fault_rank != c->rank ||
        k != o->sched->ncalls / 2)
        return;
    fflush(NULL);
    if (o->fault == JIT_FAULT_KILL)
        raise(SIGKILL);
    if (o->fault == JIT_FAULT_EXIT && o->leave != NULL)
        o->leave(3);
    if (o->fault == JIT_FAULT_EXIT)
        _exit(3);
    if (o->fault == JIT_FAULT_STALL) {
        struct timespec ts = { .tv_sec = (time_t)o->fault_s };
        ts.tv_nsec = (long)((o->fault_s - (double)ts.tv_sec) * 1e9);
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            continue;
    }
}

/* Makes the session call and records its result; 0 on success. */
static int
call_with(rank_ctx *c, size_t k, const char *fn, ccol_jit_value **vals,
          size_t n)
{
    ccol_jit_value *res = NULL;
    uint64_t before = ccol_jit_session_compiles(c->s);
    ccol_status st = ccol_jit_session_call(c->s, fn, vals, n, &res);
    double v;
    bool none;

    if (ccol_jit_session_compiles(c->s) != before)
        json_array_append_new(c->compile_calls, json_integer((json_int_t)k));
    if (st != CCOL_OK) {
        set_error(c, code_of(st), "call %zu (%s): %s", k, fn,
                  ccol_jit_session_errmsg(c->s));
        return -1;
    }
    reduce(res, &v, &none);
    ccol_jit_value_release(res);
    if (c->o->fault == JIT_FAULT_SKEW && c->o->fault_rank == c->rank &&
        k == c->o->sched->ncalls / 2)
        v += 1; /* the test hook that proves --check can fail */
    json_array_append_new(c->results, number(v, none));
    return c->o->check ? check_call(c, k, fn, vals, n, v, none) : 0;
}

static int
run_call(rank_ctx *c, size_t k)
{
    int world = ccol_comm_size(c->comm);
    const char *fn;
    const sched_args *args;
    ccol_jit_value **vals;
    char err[512];
    size_t bad = 0;
    int rc;

    if (sched_for_rank(c->o->sched, k, c->rank, world, &fn, &args, err,
                       sizeof err) != 0) {
        set_error(c, "SCHEDULE", "%s", err);
        return -1;
    }
    maybe_fault(c, k);
    if ((vals = calloc(args->n + 1, sizeof *vals)) == NULL) {
        set_error(c, "NO_MEMORY", "call %zu (%s): out of memory", k, fn);
        return -1;
    }
    if (jit_args_build(c->m, args, c->rank, k, vals, &bad) != CCOL_OK) {
        set_error(c, "SCHEDULE", "call %zu (%s): argument %zu: %s", k, fn,
                  bad, ccol_jit_module_errmsg(c->m));
        free(vals);
        return -1;
    }
    rc = call_with(c, k, fn, vals, args->n);
    jit_args_release(vals, args->n);
    free(vals);
    return rc;
}

/* "[rank R] " before this rank's own lines, or "" when a launcher adds
 * the rank already. */
static const char *
rank_tag(const rank_ctx *c, char *buf, size_t size)
{
    if (c->prefixed)
        return "";
    snprintf(buf, size, "[rank %d] ", c->rank);
    return buf;
}

/* --profile: reads the file and agrees on a profile with the session's
 * other ranks before the first call; a failed agreement (a collective
 * that failed) stops the rank like a failed call. */
static int
start_profile(rank_ctx *c)
{
    char tag[32], err[CCOL_ERRMSG_MAX];
    ccol_status st;

    if (c->o->profile == NULL)
        return 0;
    st = jit_profile_start(c->o, ccol_jit_session_sync(c->s), c->rank,
                           rank_tag(c, tag, sizeof tag), &c->prof, err,
                           sizeof err);
    if (st == CCOL_OK)
        return 0;
    set_error(c, ccol_status_name(st), "%s", err);
    return -1;
}

/* --profile: after the end of the schedule, every rank of the job takes
 * part in writing the job's profile (when every rank succeeded). With
 * compile collectives the ranks of a domain hold equal states, so only
 * the domain's lowest rank contributes its own. */
static void
end_profile(rank_ctx *c)
{
    int size = ccol_comm_size(c->dom);
    bool coll = jit_mode_resolve(c->o->mode, size) != CCOL_SYNC_OFF &&
                size > 1;
    char tag[32];

    if (c->o->profile == NULL)
        return;
    jit_profile_finish(c->o, c->comm,
                       c->s ? ccol_jit_session_sync(c->s) : NULL,
                       rank_ok(c), !coll || ccol_comm_rank(c->dom) == 0,
                       rank_tag(c, tag, sizeof tag), &c->prof);
}

/* Every rank meets the others once its schedule is done (or failed), so
 * a rank that died or went elsewhere is named on every rank. */
static void
finish(rank_ctx *c)
{
    ccol_status st;

    if (ccol_comm_size(c->comm) < 2)
        return;
    ccol_comm_set_label(c->comm, "end of schedule");
    st = ccol_barrier(c->comm);
    if (st != CCOL_OK)
        set_error(c, ccol_status_name(st), "end of schedule: %s",
                  ccol_comm_errmsg(c->comm));
}

static json_t *
frame_entry(const ccol_jit_session *s, size_t i)
{
    json_t *dyn = json_array();
    size_t nd = ccol_jit_session_frame_ndynamic(s, i);

    for (size_t j = 0; j < nd; j++)
        json_array_append_new(dyn,
            jit_json_text(ccol_jit_session_frame_dynamic(s, i, j)));
    jit_sort_strings(dyn);
    return json_pack("{s:o*, s:I, s:o, s:b}", "name",
                     jit_json_text(ccol_jit_session_frame_name(s, i)),
                     "compiles",
                     (json_int_t)ccol_jit_session_frame_compiles(s, i),
                     "dynamic", dyn, "eager",
                     (int)ccol_jit_session_frame_eager(s, i));
}

/* Assembles the entry in the order of docs/cli.md, then the internal
 * fields the demo reads. */
static json_t *
entry_of(rank_ctx *c, double wall_s)
{
    json_t *frames = json_array();
    json_int_t compiles = 0, exchanges = 0;

    if (c->s != NULL) {
        compiles = (json_int_t)ccol_jit_session_compiles(c->s);
        /* Compile collectives: with collectives off, or alone, the
         * session's exchanges only fold this rank's observations. */
        if (jit_mode_resolve(c->o->mode, ccol_comm_size(c->dom)) !=
                CCOL_SYNC_OFF && ccol_comm_size(c->dom) > 1)
            exchanges = (json_int_t)ccol_jit_session_exchanges(c->s);
        for (size_t i = 0; i < ccol_jit_session_nframes(c->s); i++)
            json_array_append_new(frames, frame_entry(c->s, i));
    }
    return json_pack("{s:i, s:o*, s:b, s:o, s:I, s:I, s:o, s:o, s:o, s:f, "
                     "s:o*}", "rank", c->rank, "domain",
                     c->domain >= 0 ? json_integer(c->domain) : NULL,
                     "ok", (int)rank_ok(c), "error",
                     c->error ? json_incref(c->error) : json_null(),
                     "compiles", compiles, "exchanges", exchanges, "frames",
                     frames, "results", json_incref(c->results),
                     "compile_calls", json_incref(c->compile_calls),
                     "wall_s", wall_s, "profile",
                     c->o->profile ? jit_profile_json(&c->prof) : NULL);
}

json_t *
jit_rank_run(const jit_opts *o, ccol_comm *comm)
{
    const char *run = getenv("CCOL_RUN");
    rank_ctx c = { .o = o, .comm = comm, .dom = comm, .domain = -1,
                   .rank = ccol_comm_rank(comm),
                   .prefixed = o->nranks == 0 && run != NULL &&
                               strcmp(run, "1") == 0 };
    double t0 = tool_now_s();
    json_t *entry;

    c.results = json_array();
    c.compile_calls = json_array();
    if (load_program(&c) == 0 && open_domain(&c) == 0 &&
        open_session(&c) == 0 && start_profile(&c) == 0)
        for (size_t k = 0; k < o->sched->ncalls; k++)
            if (run_call(&c, k) != 0)
                break;
    if (o->sched->ncalls == 0)
        maybe_fault(&c, 0);
    /* A rank is ok only if every call ran: never report success for a
     * schedule that stopped early without a recorded reason. */
    if (json_array_size(c.results) != o->sched->ncalls)
        set_error(&c, "INTERNAL", "only %zu of the %zu calls ran",
                  json_array_size(c.results), o->sched->ncalls);
    finish(&c);
    end_profile(&c);
    entry = entry_of(&c, tool_now_s() - t0);
    ccol_jit_session_destroy(c.s);
    if (c.dom != c.comm)
        ccol_comm_destroy(c.dom);
    ccol_jit_module_destroy(c.m);
    json_decref(c.results);
    json_decref(c.compile_calls);
    json_decref(c.error);
    return entry;
}

json_t *
jit_rank_failed(int rank, const char *code, const char *msg)
{
    return json_pack("{s:i, s:b, s:{s:s, s:s}, s:i, s:i, s:[], s:[], "
                     "s:[], s:f}", "rank", rank, "ok", 0, "error", "code",
                     code, "message", msg, "compiles", 0, "exchanges", 0,
                     "frames", "results", "compile_calls", "wall_s", 0.0);
}
