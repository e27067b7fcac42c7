/*
 * cmd_demo.c - `ccol demo`: the problem compiler collectives solve, shown
 * on a real job. Four local ranks (each its own process, over shm) train a
 * small MLP on variable-length batches, summing gradient-like values with
 * all_reduce; each rank's batch length changes at a different step. The
 * same job runs through the tracing JIT (the `ccol jit` machinery, called
 * in-process) with collectives off, compile and lockstep, side by side:
 * alone the ranks recompile at different steps into different graphs;
 * compile collectives without guard collectives turn the mismatch into a
 * named error instead of a hang; lockstep agrees. Last, one rank stalls
 * past the deadline and every other rank names it.
 */
#include "tools.h"
#include "util.h"

#include "jit_job.h"
#include "jit_summary.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEMO_MAX_RANKS 8
#define DEMO_STEPS 6
#define DEMO_TIMEOUT_S 2.0 /* collective deadline of the demo jobs */
#define CELL 20            /* width of a table column */

/* The program of the demo: examples/mlp.tl, byte for byte (CMake writes
 * it into demo_prog.h), so a diagnostic's line is the file's. */
#include "demo_prog.h"

/* Batch length rank r sees at step s: rank 0 never changes, rank r > 0
 * changes at step r (examples/mlp.json for 4 ranks). */
static int
batch_len(int r, int s)
{
    return r == 0 || s < r ? 32 : 32 + 8 * r + s;
}

/* What one mode's job gave. */
typedef struct demo_run {
    const char *title;
    json_t *job;   /* the job summary */
    double wall_s; /* wall time of the whole job */
} demo_run;

/* The schedule of the demo as JSON text, parsed like a user's file. */
static schedule *
demo_schedule(int n)
{
    char *text = malloc(65536), err[512];
    size_t off = 0;
    schedule *s = NULL;

    if (text == NULL)
        return NULL;
    off += (size_t)snprintf(text + off, 65536 - off, "{\"calls\": [");
    for (int st = 0; st < DEMO_STEPS; st++) {
        off += (size_t)snprintf(text + off, 65536 - off, "%s{\"fn\": "
                                "\"train_step\", \"per_rank\": [",
                                st ? ", " : "");
        for (int r = 0; r < n; r++)
            off += (size_t)snprintf(text + off, 65536 - off,
                                    "%s[{\"tensor\": [%d, 8]}, {\"tensor\": "
                                    "[8, 16]}, {\"tensor\": [16, 4]}, 0.01]",
                                    r ? ", " : "", batch_len(r, st));
        off += (size_t)snprintf(text + off, 65536 - off, "]}");
    }
    snprintf(text + off, 65536 - off, "]}");
    if (sched_parse(text, strlen(text), &s, err, sizeof err) != 0)
        fprintf(stderr, "demo: internal schedule: %s\n", err);
    free(text);
    return s;
}

static int
run_job(jit_opts *o, demo_run *d)
{
    char err[512];
    bool printer;
    double t0 = tool_now_s();

    if (jit_job_run(o, &d->job, &printer, err, sizeof err) != 0) {
        fprintf(stderr, "demo: %s\n", err);
        return -1;
    }
    d->wall_s = tool_now_s() - t0;
    return 0;
}

static json_t *
rank_entry(const demo_run *d, int r)
{
    return json_array_get(json_object_get(d->job, "ranks"), (size_t)r);
}

static json_int_t
rank_int(const demo_run *d, int r, const char *key)
{
    return json_integer_value(json_object_get(rank_entry(d, r), key));
}

/* "yes" when the rank's frame decided the batch dim dynamic. */
static bool
batch_dynamic(const demo_run *d, int r)
{
    json_t *fr = json_array_get(json_object_get(rank_entry(d, r), "frames"),
                                0);
    json_t *dyn = json_object_get(fr, "dynamic"), *v;
    size_t i;

    json_array_foreach(dyn, i, v)
        if (strcmp(json_string_value(v), "L['x'].size(0)") == 0)
            return true;
    return false;
}

/* The steps at which rank r compiled, after its first compile. */
static void
recompile_steps(const demo_run *d, int r, char *out, size_t len)
{
    json_t *calls = json_object_get(rank_entry(d, r), "compile_calls"), *v;
    size_t i, off = 0;

    out[0] = '\0';
    json_array_foreach(calls, i, v)
        if (i > 0 && off < len)
            off += (size_t)snprintf(out + off, len - off, "%s%lld",
                                    off ? "," : "",
                                    (long long)json_integer_value(v));
    if (off == 0)
        snprintf(out, len, "-");
}

/* One row of the table: per mode, one short value per rank. */
static void
row(const char *label, const demo_run *runs, int n,
    void (*cell)(const demo_run *, int, char *, size_t))
{
    printf("%-18s", label);
    for (int m = 0; m < 3; m++) {
        char buf[CELL + 1] = "", one[32];
        size_t off = 0;
        for (int r = 0; r < n && off < sizeof buf; r++) {
            cell(&runs[m], r, one, sizeof one);
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s",
                                    r ? " " : "", one);
        }
        printf(" %-*s", CELL, buf);
    }
    printf("\n");
}

static void
cell_compiles(const demo_run *d, int r, char *out, size_t len)
{
    snprintf(out, len, "%lld", (long long)rank_int(d, r, "compiles"));
}

static void
cell_exchanges(const demo_run *d, int r, char *out, size_t len)
{
    snprintf(out, len, "%lld", (long long)rank_int(d, r, "exchanges"));
}

static void
cell_dynamic(const demo_run *d, int r, char *out, size_t len)
{
    snprintf(out, len, "%s", batch_dynamic(d, r) ? "D" : "S");
}

static void
cell_recompiled(const demo_run *d, int r, char *out, size_t len)
{
    recompile_steps(d, r, out, len);
}

static void
cell_ok(const demo_run *d, int r, char *out, size_t len)
{
    json_t *err = json_object_get(rank_entry(d, r), "error");
    const char *code = json_string_value(json_object_get(err, "code"));
    snprintf(out, len, "%s", code ? code : "ok");
}

/* The outcome row: one word when every rank ended the same way. */
static void
row_outcome(const demo_run *runs, int n)
{
    printf("%-18s", "outcome");
    for (int m = 0; m < 3; m++) {
        char first[CELL - 7], one[CELL - 7], buf[CELL + 1];
        bool same = true;
        cell_ok(&runs[m], 0, first, sizeof first);
        for (int r = 1; r < n; r++) {
            cell_ok(&runs[m], r, one, sizeof one);
            same = same && strcmp(one, first) == 0;
        }
        snprintf(buf, sizeof buf, "%s%s", same ? first : "mixed",
                 same ? " on all" : "");
        printf(" %-*s", CELL, buf);
    }
    printf("\n");
}

/* Prints `lead`, then text wrapped before 79 columns with continuation
 * lines indented by `indent` spaces. Lines after the first (a source line
 * and its caret under a message) are printed as they are, indented. */
static void
wrap(const char *lead, size_t indent, const char *text)
{
    size_t col = strlen(lead), start = col, width = 78;
    const char *p = text, *nl = strchr(text, '\n');
    size_t first = nl ? (size_t)(nl - text) : strlen(text);

    fputs(lead, stdout);
    while (p < text + first) {
        size_t w = strcspn(p, " \n");
        if (col > start && col + 1 + w > width) {
            printf("\n%*s", (int)indent, "");
            col = start = indent;
        } else if (col > start) {
            putchar(' ');
            col++;
        }
        printf("%.*s", (int)w, p);
        col += w;
        p += w;
        p += strspn(p, " ");
    }
    putchar('\n');
    for (p = nl; p != NULL; p = strchr(p, '\n')) {
        p++;
        printf("%*s%.*s\n", (int)indent, "", (int)strcspn(p, "\n"), p);
    }
}

static void
print_batches(int n)
{
    printf("Batch length each rank feeds to train_step(x, w1, w2, lr) "
           "(L['x'] dim 0):\n\n        ");
    for (int s = 0; s < DEMO_STEPS; s++)
        printf(" step %d", s);
    printf("\n");
    for (int r = 0; r < n; r++) {
        printf("rank %d  ", r);
        for (int s = 0; s < DEMO_STEPS; s++)
            printf(" %6d", batch_len(r, s));
        printf("\n");
    }
    printf("\n");
}

static void
print_table(const demo_run *runs, int n)
{
    printf("%-18s", "per rank");
    for (int m = 0; m < 3; m++)
        printf(" %-*s", CELL, runs[m].title);
    printf("\n");
    row("compiles", runs, n, cell_compiles);
    row("recompiled at step", runs, n, cell_recompiled);
    row("compile exchanges", runs, n, cell_exchanges);
    row("batch dim (S/D)", runs, n, cell_dynamic);
    row_outcome(runs, n);
    printf("%-18s", "wall time");
    for (int m = 0; m < 3; m++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.2f s", runs[m].wall_s);
        printf(" %-*s", CELL, buf);
    }
    printf("\n\n");
}

/* What happened with collectives off: who recompiled when, and whether
 * the ranks ended with different graphs. */
static void
explain_off(const demo_run *d, int n)
{
    char text[1024], steps[64];
    size_t off = 0;
    int nstatic = 0;

    off += (size_t)snprintf(text, sizeof text, "each rank decides alone:");
    for (int r = 0, first = 1; r < n && off < sizeof text; r++) {
        recompile_steps(d, r, steps, sizeof steps);
        if (strcmp(steps, "-") == 0)
            continue;
        off += (size_t)snprintf(text + off, sizeof text - off,
                                "%s rank %d recompiled at step %s",
                                first ? "" : ",", r, steps);
        first = 0;
    }
    for (int r = 0; r < n; r++)
        nstatic += !batch_dynamic(d, r);
    if (nstatic > 0 && nstatic < n && off < sizeof text)
        off += (size_t)snprintf(text + off, sizeof text - off,
                                "; %d rank%s kept a static batch dim while "
                                "%d went dynamic: different graphs",
                                nstatic, nstatic == 1 ? "" : "s",
                                n - nstatic);
    if (off < sizeof text)
        snprintf(text + off, sizeof text - off, ". In a real job each of "
                 "those recompiles stalls the other ranks in their next "
                 "all_reduce.");
    wrap("off:      ", 10, text);
}

static void
explain_compile(const demo_run *d)
{
    json_t *err = json_object_get(rank_entry(d, 0), "error");
    char text[2048];

    if (err == NULL || json_is_null(err)) {
        printf("compile:  every rank succeeded.\n");
        return;
    }
    snprintf(text, sizeof text, "compile collectives without guard "
             "collectives: one rank's recompile met the others' all_reduce. "
             "Paired by position (as PyTorch does) that is a hang or a "
             "silent mix-up; ccol names it on every rank. Rank 0 got %s: %s",
             json_string_value(json_object_get(err, "code")),
             json_string_value(json_object_get(err, "message")));
    wrap("compile:  ", 10, text);
}

static void
explain_lockstep(const demo_run *d, int n)
{
    char steps[64];
    int same = 1;

    recompile_steps(d, 0, steps, sizeof steps);
    for (int r = 1; r < n; r++) {
        char other[64];
        recompile_steps(d, r, other, sizeof other);
        same = same && strcmp(steps, other) == 0 &&
               batch_dynamic(d, r) == batch_dynamic(d, 0);
    }
    if (same && jit_summary_ok(d->job)) {
        char text[256];
        snprintf(text, sizeof text, "guard collectives keep the ranks "
                 "together: every rank recompiled at step %s and made the "
                 "same decisions, one graph everywhere.", steps);
        wrap("lockstep: ", 10, text);
    } else {
        wrap("lockstep: ", 10, "the ranks did not agree.");
    }
}

/* "CODE: message" of rank r's error into buf. */
static void
error_text(const demo_run *d, int r, char *buf, size_t len)
{
    json_t *err = json_object_get(rank_entry(d, r), "error");

    snprintf(buf, len, "%s: %s",
             json_is_object(err)
                 ? json_string_value(json_object_get(err, "code"))
                 : "ok",
             json_is_object(err)
                 ? json_string_value(json_object_get(err, "message"))
                 : "(no error: the stall was not noticed)");
}

/* The errors of ranks 0..n-1, each distinct one once after the ranks
 * that got it ("ranks 0-2: TIMEOUT: ..."). */
static void
print_errors_grouped(const demo_run *d, int n)
{
    char text[2048], other[2048], lead[160], line[2400];
    int ranks[JIT_MAX_RANKS];
    bool done[JIT_MAX_RANKS] = { false };

    for (int r = 0; r < n && r < JIT_MAX_RANKS; r++) {
        int m = 0;
        FILE *f;
        if (done[r])
            continue;
        error_text(d, r, text, sizeof text);
        for (int q = r; q < n && q < JIT_MAX_RANKS; q++) {
            error_text(d, q, other, sizeof other);
            if (!done[q] && strcmp(text, other) == 0) {
                done[q] = true;
                ranks[m++] = q;
            }
        }
        f = fmemopen(lead, sizeof lead, "w");
        if (f == NULL)
            continue;
        fputs("  ", f);
        jit_print_ranks(f, ranks, (size_t)m);
        fputs(": ", f);
        fclose(f);
        /* The lead is part of the first line, not of the indentation. */
        snprintf(line, sizeof line, "%s%s", lead + 2, text);
        wrap("  ", 4, line);
    }
}

/* The stall scenario: the last rank sleeps past the deadline in the
 * middle of the schedule; every other rank gets an error naming it. */
static int
stall(jit_opts *o, int n)
{
    demo_run d = { "stall", NULL, 0 };

    o->mode = CCOL_SYNC_LOCKSTEP;
    o->timeout_s = 1.0;
    o->fault = JIT_FAULT_STALL;
    o->fault_rank = n - 1;
    o->fault_s = 2.5;
    if (run_job(o, &d) != 0)
        return -1;
    printf("\nRank %d stalls for %.1f s at step %d, past the 1 s deadline. "
           "What each other\nrank gets (%.2f s for the whole job):\n", n - 1,
           o->fault_s, DEMO_STEPS / 2, d.wall_s);
    print_errors_grouped(&d, n - 1);
    json_decref(d.job);
    return 0;
}

/* Runs the job in the three modes, prints the table and what it shows,
 * then the stall scenario. */
static int
run_modes(jit_opts *o, demo_run *runs, int n)
{
    for (int m = 0; m < 3; m++) {
        o->mode = m; /* CCOL_SYNC_OFF, _COMPILE, _LOCKSTEP */
        if (run_job(o, &runs[m]) != 0)
            return -1;
    }
    print_table(runs, n);
    printf("What goes wrong without ccol, and what ccol does:\n\n");
    explain_off(&runs[0], n);
    explain_compile(&runs[1]);
    explain_lockstep(&runs[2], n);
    return stall(o, n);
}

static int
parse_n(int argc, char **argv, int *n)
{
    char *end;

    if (argc == 1)
        return 0;
    if (argc != 3 || strcmp(argv[1], "-n") != 0)
        return -1;
    *n = (int)strtol(argv[2], &end, 10);
    return *end == '\0' && *n >= 2 && *n <= DEMO_MAX_RANKS ? 0 : -1;
}

int
cmd_demo(int argc, char **argv)
{
    demo_run runs[3] = { { "off (alone)", NULL, 0 },
                         { "compile", NULL, 0 },
                         { "lockstep", NULL, 0 } };
    jit_opts o = { .prog = "examples/mlp.tl", .prog_src = demo_prog,
                   .prog_len = sizeof demo_prog - 1, .quiet = true,
                   .timeout_s = DEMO_TIMEOUT_S };
    schedule *s;
    int n = 4, rc = 0;

    if (argc > 1 && strcmp(argv[1], "--help") == 0) {
        printf("usage: ccol demo [-n N]   (2 <= N <= %d, default 4)\n",
               DEMO_MAX_RANKS);
        return 0;
    }
    if (parse_n(argc, argv, &n) != 0) {
        fprintf(stderr, "usage: ccol demo [-n N]   (2 <= N <= %d)\n",
                DEMO_MAX_RANKS);
        return 2;
    }
    if ((s = demo_schedule(n)) == NULL)
        return 1;
    o.sched = s;
    o.nranks = n;
    printf("ccol demo: %s on %d local ranks (processes over shm), "
           "through the tracing JIT\n\n", o.prog, n);
    print_batches(n);
    rc = run_modes(&o, runs, n);
    if (rc == 0 && !jit_summary_ok(runs[2].job))
        rc = 1;
    for (int m = 0; m < 3; m++)
        json_decref(runs[m].job);
    sched_free(s);
    return rc == 0 ? 0 : 1;
}
