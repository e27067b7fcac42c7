/*
 * test_report_agree.c - tests of the agreements in `ccol report`
 * (tools/report_*.c, compiled into this test as into the fuzz harness):
 * synthetic traces with ccol.torch's `agree` events inside and outside
 * compiles, nested and open compiles, ranks that agreed differently, failed
 * agreements, bad agree lines and the per-rank cap. The text output must
 * list each agreement under the compile it belongs to, with its cost, and
 * the HTML must hold the same; the command itself is run once on files.
 * Also ccol.torch's compile once (`once` events): one line per graph, a
 * warning for a rank that compiled alone, bad once lines named.
 */
#include "harness.h"

#include "report_analyze.c"
#include "report_html.c"
#include "report_once.c"
#include "report_paths.c"
#include "report_read.c"
#include "report_text.c"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define T0 1700000000000000000LL /* wall clock of time 0 ms */

/* A synthetic trace file being written into memory. */
typedef struct tfile {
    char *buf;  /* its bytes (open_memstream) */
    size_t len; /* their number */
    FILE *f;    /* the stream while writing */
    int rank;   /* the rank it holds */
} tfile;

static void
topen(tfile *t, int rank)
{
    memset(t, 0, sizeof *t);
    t->rank = rank;
    t->f = open_memstream(&t->buf, &t->len);
    CHECK(t->f != NULL);
}

/* Appends one line at `ms` milliseconds with the common fields and the
 * printf-formatted rest. */
static void ev(tfile *t, int64_t ms, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
ev(tfile *t, int64_t ms, const char *fmt, ...)
{
    va_list ap;

    fprintf(t->f,
            "{\"v\":1,\"wall_ns\":%lld,\"mono_ns\":1,\"rank\":%d,"
            "\"size\":2,\"pid\":%d,\"seq\":0,",
            (long long)(T0 + ms * 1000000), t->rank, 100 + t->rank);
    va_start(ap, fmt);
    vfprintf(t->f, fmt, ap);
    va_end(ap);
    fputs("}\n", t->f);
}

/* compile_begin (and compile_end unless `end_ms` < 0) of frame/index. */
static void
compile(tfile *t, const char *frame, int index, int64_t begin_ms,
        int64_t end_ms)
{
    ev(t, begin_ms,
       "\"event\":\"compile_begin\",\"frame\":\"%s\",\"index\":%d,"
       "\"xseq\":1,\"reason\":\"first compile\"",
       frame, index);
    if (end_ms >= 0)
        ev(t, end_ms,
           "\"event\":\"compile_end\",\"frame\":\"%s\",\"index\":%d,"
           "\"ok\":true",
           frame, index);
}

/* An agree event ending at `ms`; `error` NULL for one that succeeded. */
static void
agree(tfile *t, int64_t ms, const char *site, int aseq, const char *graph,
      int bytes, int64_t dur_us, const char *error)
{
    ev(t, ms,
       "\"event\":\"agree\",\"site\":\"%s\",\"frame\":\"%s\",\"aseq\":%d,"
       "\"ranks\":2,\"bytes\":%d,\"bytes_recv\":%d,\"dur_ns\":%lld,"
       "\"ok\":%s,\"error\":%s%s%s",
       site, graph, aseq, bytes, 2 * bytes, (long long)dur_us * 1000,
       error ? "false" : "true", error ? "\"" : "", error ? error : "null",
       error ? "\"" : "");
}

/* Closes t and feeds it to r as rank-<r>.jsonl. */
static void
tfeed(tool_report *r, tfile *t)
{
    char name[32];

    fclose(t->f);
    snprintf(name, sizeof name, "rank-%d.jsonl", t->rank);
    tool_report_feed(r, name, t->rank, t->buf, t->len);
    free(t->buf);
}

/* The text report of r (malloc'd), after the analysis. */
static char *
text_of(tool_report *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    tool_report_analyze(r);
    tool_report_text(r, f);
    fclose(f);
    return buf;
}

/* The HTML report of an analyzed r (malloc'd). */
static char *
html_of(const tool_report *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    CHECK_EQ(tool_report_html(r, "t", f), 0);
    fclose(f);
    return buf;
}

/* The lines of the frames row that starts with `head` (its first line
 * and the indented lines under it), malloc'd; "" when there is none. */
static char *
row_of(const char *text, const char *head)
{
    const char *p = strstr(text, head), *e;

    if (p == NULL)
        return strdup("");
    e = strchr(p, '\n');
    while (e != NULL && strncmp(e + 1, "      ", 6) == 0)
        e = strchr(e + 1, '\n');
    return strndup(p, e != NULL ? (size_t)(e - p) : strlen(p));
}

/* Two ranks: f's compile holds two agreements (rank 1 slower, a larger
 * payload), then an agreement after f ended (a backward graph), then
 * g's compile (never ended) holds the last one. */
static void
two_ranks(tool_report *r)
{
    static const char *gf = "graph 0/0 of f (t.py:3) (compile 1)";
    tfile t;

    for (int k = 0; k < 2; k++) {
        topen(&t, k);
        ev(&t, 0, "\"event\":\"open\",\"mode\":\"compile\"");
        compile(&t, "f", 1, 1, 10);
        agree(&t, 3, "spmd_check.hash", 1, gf, 8, 400 + 100 * k, NULL);
        agree(&t, 5, "partitioner.saved", 1, gf, 120 + k, 1200, NULL);
        agree(&t, 12, "partitioner.saved", 2, "graph 0/1", 60, 700, NULL);
        compile(&t, "g", 1, 20, -1);
        agree(&t, 25, "autotune.gemm", 1, "graph 1/0", 16, 2000, NULL);
        tfeed(r, &t);
    }
}

CCOL_TEST(test_agreements_listed_under_their_compile)
{
    tool_report r = { 0 };
    char *text, *f, *g;

    two_ranks(&r);
    text = text_of(&r);
    f = row_of(text, "  f (compile 1, ok) ranks 0, 1");
    g = row_of(text, "  g (compile 1, open) ranks 0, 1");
    /* largest payload and longest duration of the row's ranks; the total
     * is the slowest rank's */
    CHECK_CONTAINS(f, "\n      agreements (2, 1.700 ms on the slowest "
                      "rank): spmd_check.hash #1 (8 B, 0.500 ms), "
                      "partitioner.saved #1 (121 B, 1.200 ms)");
    CHECK(strstr(f, "autotune") == NULL && strstr(f, "#2") == NULL);
    CHECK_CONTAINS(g, "agreements (1, 2.000 ms on the slowest rank): "
                      "autotune.gemm #1 (16 B, 2.000 ms)");
    CHECK_CONTAINS(text, "\nagreements outside a compile (");
    CHECK_CONTAINS(text, "\n  partitioner.saved: 1 each on ranks 0, 1, "
                         "total 0.700 ms, median 0.700 ms\n"
                         "      graphs: graph 0/1\n");
    CHECK_CONTAINS(text, "no divergence between ranks found");
    /* the summary: 4 agreements, 4.3 and 4.4 ms */
    CHECK_CONTAINS(text, "agrees  agree ms  status\n");
    CHECK_CONTAINS(text, "      0      4     4.300  running\n");
    CHECK_CONTAINS(text, "      0      4     4.400  running\n");
    CHECK_EQ(r.ranks[0].agreements, 4);
    CHECK_EQ(r.ranks[0].agrees[2].comp, -1);
    CHECK_EQ(r.ranks[0].compiles[0].nagrees, 2);
    CHECK_EQ(r.ranks[1].compiles[1].nagrees, 1);
    free(f);
    free(g);
    free(text);
    tool_report_free(&r);
}

CCOL_TEST(test_innermost_open_and_bounds)
{
    tool_report r = { 0 };
    tfile t;

    topen(&t, 0);
    compile(&t, "outer", 1, 10, 50);
    compile(&t, "inner", 1, 20, 30);
    agree(&t, 10, "a.begin", 1, "g", 1, 1, NULL);  /* at outer's begin */
    agree(&t, 25, "a.inner", 1, "g", 1, 1, NULL);  /* both hold: inner */
    agree(&t, 30, "a.end", 1, "g", 1, 1, NULL);    /* at inner's end */
    agree(&t, 40, "a.outer", 1, "g", 1, 1, NULL);  /* inner ended */
    agree(&t, 60, "a.after", 1, "g", 1, 1, NULL);  /* none */
    agree(&t, 5, "a.before", 1, "g", 1, 1, NULL);  /* out of order */
    compile(&t, "late", 1, 70, -1);
    agree(&t, 99, "a.open", 1, "g", 1, 1, NULL);   /* still running */
    tfeed(&r, &t);
    tool_report_attach(&r);
    tool_report_attach(&r); /* idempotent */
    {
        static const long want[] = { 0, 1, 1, 0, -1, -1, 2 };
        CHECK_EQ(r.ranks[0].nagrees, 7);
        for (size_t i = 0; i < 7; i++)
            CHECK_EQ(r.ranks[0].agrees[i].comp, want[i]);
    }
    CHECK_EQ(r.ranks[0].compiles[0].nagrees, 2);
    CHECK_EQ(r.ranks[0].compiles[1].nagrees, 2);
    CHECK_EQ(r.ranks[0].compiles[1].agree_ns, 2000);
    CHECK_EQ(r.errors.n, 0);
    tool_report_free(&r);
}

CCOL_TEST(test_failed_and_partial_agreements)
{
    tool_report r = { 0 };
    char *text, *row, *html;
    tfile t;

    for (int k = 0; k < 2; k++) {
        topen(&t, k);
        compile(&t, "f", 1, 1, 10);
        agree(&t, 3, "spmd_check.hash", 1, "graph 0/0", 8, 300, NULL);
        if (k == 1) /* only rank 1 made this one, and it failed */
            agree(&t, 4, "estimates.align", 1, "graph 0/0", 77, 50,
                  "ranks agree on <different> graphs");
        tfeed(&r, &t);
    }
    text = text_of(&r);
    row = row_of(text, "  f (compile 1, ok) ranks 0, 1");
    CHECK_CONTAINS(row, "spmd_check.hash #1 (8 B, 0.300 ms), "
                        "estimates.align #1 (77 B, 0.050 ms, 1 of 2 ranks, "
                        "FAILED)\n      FAILED ");
    CHECK_CONTAINS(row, "\n      FAILED estimates.align #1 for graph 0/0 "
                        "on 1 of 2 ranks: ranks agree on <different> "
                        "graphs");
    /* the sequences differ at that agreement, and the warning says so */
    CHECK_CONTAINS(text, "rank 1 ran 2 collectives, rank 0 ran 1; the "
                         "first 1 agree, then 'agreement estimates.align #1 "
                         "for graph 0/0'");
    html = html_of(&r);
    CHECK_CONTAINS(html, "<div class=\"fail\">FAILED for graph 0/0 on 1 of "
                         "2 ranks: ranks agree on &lt;different&gt; graphs"
                         "</div>");
    CHECK_CONTAINS(html, "<td class=\"n\">2 <span class=\"fail\">(1 failed)"
                         "</span></td><td class=\"n\">0.350 ms</td>");
    CHECK(strstr(html, "id=\"outside\"") == NULL);
    free(row);
    free(text);
    free(html);
    tool_report_free(&r);
}

CCOL_TEST(test_divergent_agreement_named)
{
    tool_report r = { 0 };
    char *text;
    tfile t;

    for (int k = 0; k < 2; k++) {
        topen(&t, k);
        agree(&t, 1, "estimates.align", 1, "graph 0/0", 77, 100, NULL);
        agree(&t, 2, "estimates.align", 2, k ? "graph 2/0" : "graph 1/0",
              77, 100, "rank 1 is at estimates.align #2 for graph 2/0");
        tfeed(&r, &t);
    }
    text = text_of(&r);
    CHECK_CONTAINS(text, "collective sequences differ at collective #2: "
                         "rank 1 ran 'agreement estimates.align #2 for "
                         "graph 2/0' while rank 0 ran 'agreement "
                         "estimates.align #2 for graph 1/0'");
    CHECK_CONTAINS(text, "  estimates.align: 2 each on ranks 0, 1, total "
                         "0.200 ms, median 0.100 ms, 2 failed\n"
                         "      graphs: graph 0/0, graph 1/0, graph 2/0\n"
                         "      FAILED #2 for graph 1/0 on rank 0: rank 1 "
                         "is at");
    CHECK_CONTAINS(text, "      FAILED #2 for graph 2/0 on rank 1: ");
    CHECK(strstr(text, "\nframes:") == NULL);
    free(text);
    tool_report_free(&r);
}

/* Bad agree lines and the error each must give. */
static const struct {
    const char *fields; /* the line's event fields */
    const char *error;  /* the error expected for it */
} bad[] = {
    { "\"frame\":\"g\",\"aseq\":1,\"dur_ns\":1,\"ok\":true",
      "agree: field 'site' must be a string" },
    { "\"site\":7,\"frame\":\"g\",\"aseq\":1,\"dur_ns\":1,\"ok\":true",
      "agree: field 'site' must be a string" },
    { "\"site\":\"s\",\"aseq\":1,\"dur_ns\":1,\"ok\":true",
      "agree: field 'frame' must be a string" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":\"1\",\"dur_ns\":1,"
      "\"ok\":true", "agree: field 'aseq' must be an integer" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":0,\"dur_ns\":1,\"ok\":true",
      "agree: aseq 0 is not >= 1" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":1,\"ok\":true",
      "agree: field 'dur_ns' must be an integer" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":1,\"dur_ns\":-5,"
      "\"ok\":true", "agree: field 'dur_ns' is negative (-5)" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":1,\"dur_ns\":1.5,"
      "\"ok\":true", "agree: field 'dur_ns' must be an integer" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":1,\"dur_ns\":1,"
      "\"bytes\":\"8\",\"ok\":true",
      "agree: field 'bytes' must be an integer" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":1,\"dur_ns\":1,"
      "\"bytes_recv\":-1,\"ok\":true",
      "agree: field 'bytes_recv' is negative (-1)" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":1,\"dur_ns\":1",
      "agree: field 'ok' must be a boolean" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":1,\"dur_ns\":1,\"ok\":1",
      "agree: field 'ok' must be a boolean" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":1,\"dur_ns\":1,"
      "\"ok\":false,\"error\":[1]",
      "agree: field 'error' must be a string" },
    { "\"site\":\"s\",\"frame\":\"g\",\"aseq\":1,\"dur_ns\":1,"
      "\"ranks\":\"2\",\"ok\":true",
      "agree: field 'ranks' must be an integer" },
};

/* Bad agree lines: each is one error naming file and line, the line is
 * skipped (not counted, not in the sequence), and reading goes on. */
CCOL_TEST(test_bad_agree_lines)
{
    size_t n = sizeof bad / sizeof bad[0];
    tool_report r = { 0 };
    char want[256], *text;
    tfile t;

    topen(&t, 0);
    agree(&t, 1, "good.first", 1, "g", 1, 1, NULL);
    for (size_t i = 0; i < n; i++)
        ev(&t, 2, "\"event\":\"agree\",%s", bad[i].fields);
    /* a failed agreement without a message is not an error */
    ev(&t, 3,
       "\"event\":\"agree\",\"site\":\"good.last\",\"frame\":\"g\","
       "\"aseq\":1,\"dur_ns\":1,\"ok\":false");
    tfeed(&r, &t);
    CHECK_EQ(r.errors.n, n);
    for (size_t i = 0; i < n && i < r.errors.n; i++) {
        snprintf(want, sizeof want, "rank-0.jsonl:%zu: %s", i + 2,
                 bad[i].error);
        CHECK_STR_EQ(r.errors.v[i], want);
    }
    CHECK_EQ(r.ranks[0].agreements, 2);
    CHECK_EQ(r.ranks[0].agree_failed, 1);
    CHECK_EQ(r.ranks[0].seq.n, 2);
    text = text_of(&r);
    CHECK_CONTAINS(text, "FAILED #1 for g on rank 0: (no message)");
    free(text);
    tool_report_free(&r);
}

/* Hostile values: huge durations saturate, long strings are cut, HTML
 * is escaped. */
CCOL_TEST(test_hostile_agreements)
{
    tool_report r = { 0 };
    char *text, *html, big[6000];
    tfile t;

    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    topen(&t, 0);
    compile(&t, "f", 1, 1, 10);
    ev(&t, 2,
       "\"event\":\"agree\",\"site\":\"<b>s\",\"frame\":\"%s\",\"aseq\":1,"
       "\"dur_ns\":9223372036854775807,\"ok\":true",
       big);
    ev(&t, 3,
       "\"event\":\"agree\",\"site\":\"<b>s\",\"frame\":\"g\",\"aseq\":2,"
       "\"dur_ns\":9223372036854775807,\"ok\":true");
    tfeed(&r, &t);
    text = text_of(&r);
    html = html_of(&r);
    CHECK_EQ(r.errors.n, 0);
    CHECK_EQ(r.ranks[0].agree_ns, INT64_MAX);
    CHECK_EQ(r.ranks[0].compiles[0].agree_ns, INT64_MAX);
    CHECK_EQ(strlen(r.ranks[0].agrees[0].frame), 1003);
    CHECK_CONTAINS(html, "<code>&lt;b&gt;s #1</code>");
    CHECK(strstr(html, "<b>s") == NULL);
    free(text);
    free(html);
    tool_report_free(&r);
}

/* Past TOOL_REPORT_MAX_AGREES a rank's agreements are counted, not
 * listed, and the report says how many. */
CCOL_TEST(test_agreements_capped)
{
    tool_report r = { 0 };
    char *text;
    tfile t;

    topen(&t, 0);
    for (int i = 1; i <= TOOL_REPORT_MAX_AGREES + 100; i++)
        agree(&t, i, "estimates.comms", i, "graph 0/0", 4, 10, NULL);
    tfeed(&r, &t);
    text = text_of(&r);
    CHECK_EQ(r.ranks[0].nagrees, TOOL_REPORT_MAX_AGREES);
    CHECK_EQ(r.ranks[0].agreements, TOOL_REPORT_MAX_AGREES + 100);
    CHECK_CONTAINS(text, "\n100 agreements not listed (a rank made more "
                         "than 4000; the summary counts them)\n");
    CHECK_CONTAINS(text, "  estimates.comms: 4000 each on rank 0, total "
                         "40.000 ms, median 0.010 ms\n");
    CHECK_CONTAINS(text, "   4100    41.000  running\n");
    free(text);
    tool_report_free(&r);
}

/* More than 64 agreements in one compile: the row lists 64. */
CCOL_TEST(test_row_capped)
{
    tool_report r = { 0 };
    tool_rep_row *rows;
    size_t n;
    tfile t;

    topen(&t, 0);
    compile(&t, "f", 1, 1, 1000);
    for (int i = 1; i <= 70; i++)
        agree(&t, 1 + i, "autotune.gemm", i, "graph 0/0", 4, 10, NULL);
    tfeed(&r, &t);
    tool_report_analyze(&r);
    n = tool_report_rows(&r, &rows);
    CHECK_EQ(n, 1);
    if (n == 1) {
        CHECK_EQ(rows[0].nagrees, 64);
        CHECK_EQ(rows[0].agrees_more, 6);
        CHECK_EQ(rows[0].agree_ns, 700000);
    }
    tool_report_rows_free(rows, n);
    tool_report_free(&r);
}

/* A once event at `ms`; `error` NULL for none. */
static void
once(tfile *t, int64_t ms, const char *graph, const char *outcome, int owner,
     int bytes, const char *error)
{
    ev(t, ms,
       "\"event\":\"once\",\"frame\":\"%s\",\"outcome\":\"%s\","
       "\"owner\":%d,\"key\":\"k\",\"bytes\":%d,\"files\":3,"
       "\"dur_ns\":2000000,\"error\":%s%s%s",
       graph, outcome, owner, bytes, error ? "\"" : "",
       error ? error : "null", error ? "\"" : "");
}

/* Three ranks, five graphs: one shared (rank 1 owns it), one whose
 * owner failed (rank 2 compiled alone), one with divergent keys, one
 * torch's caches refuse, one only rank 2 lacked (and kept in the job
 * store), one every rank loaded from the job store. */
CCOL_TEST(test_compile_once)
{
    tool_report r = { 0 };
    char *text, *html;
    tfile t;

    for (int k = 0; k < 3; k++) {
        topen(&t, k);
        once(&t, 1, "compile 1 of f (a.py:3)", k == 1 ? "sent" : "loaded", 1,
             2048, NULL);
        once(&t, 2, "compile 1 of g (a.py:9)", k == 0 ? "failed" :
             k == 2 ? "fallback" : "loaded", 0, k == 1 ? 10 : 0,
             k == 0 ? "its compile raised RuntimeError: x" : NULL);
        ev(&t, 3, "\"event\":\"once\",\"frame\":\"compile 2 of f\","
           "\"outcome\":\"divergent\",\"ranks\":[2],\"key\":null");
        ev(&t, 4, "\"event\":\"once\",\"frame\":\"compile 3 of f\","
           "\"outcome\":\"bypassed\",\"error\":\"fakify_first_call\"");
        if (k == 2)
            ev(&t, 5, "\"event\":\"once\",\"frame\":\"compile 4 of f\","
               "\"outcome\":\"alone\"");
        if (k == 2)
            ev(&t, 6, "\"event\":\"once\",\"frame\":\"compile 4 of f\","
               "\"outcome\":\"kept\"");
        ev(&t, 7, "\"event\":\"once\",\"frame\":\"compile 5 of f\","
           "\"outcome\":\"stored\"");
        tfeed(&r, &t);
    }
    text = text_of(&r);
    html = html_of(&r);
    CHECK_EQ(r.errors.n, 0);
    CHECK_CONTAINS(text, "\ncompile once (per graph: the owner and what "
                         "the others did):\n  compile 1 of f (a.py:3): rank 1 "
                         "compiled it and sent it (2048 B, 0.002 s to send); "
                         "loaded on ranks 0, 2\n");
    CHECK_CONTAINS(text, "  compile 1 of g (a.py:9): rank 0, the owner, sent "
                         "no files; loaded on rank 1; compiled alone (the "
                         "owner did not deliver) on rank 2: its compile "
                         "raised RuntimeError: x\n");
    CHECK_CONTAINS(text, "  compile 2 of f: compiled its own (the keys "
                         "differ) on ranks 0-2\n");
    CHECK_CONTAINS(text, "WARNING: compile once of compile 1 of g (a.py:9): "
                         "rank 2 compiled it alone: the owner, rank 0, did "
                         "not deliver (its compile raised RuntimeError: x)");
    CHECK_CONTAINS(text, "WARNING: compile once of compile 2 of f: the cache "
                         "keys differ between ranks (reported by ranks 0-2)");
    CHECK_CONTAINS(text, "  compile 3 of f: bypassed (torch's caches "
                         "refuse it) on ranks 0-2: fakify_first_call\n");
    CHECK_CONTAINS(text, "WARNING: compile once of compile 3 of f: "
                         "torch's caches refuse it on ranks 0-2, so each "
                         "compiled it (fakify_first_call)");
    CHECK_CONTAINS(text, "  compile 4 of f: compiled alone (no other rank "
                         "lacked it) on rank 2; kept in the job store on "
                         "rank 2\n");
    CHECK_CONTAINS(text, "  compile 5 of f: loaded from the job store on "
                         "ranks 0-2\n");
    CHECK(strstr(text, "compile once of compile 5 of f") == NULL);
    CHECK(strstr(text, "compile once of compile 4 of f") == NULL);
    CHECK(strstr(text, "compile once of compile 1 of f (a.py:3):") == NULL);
    CHECK_CONTAINS(html, "<section id=\"once\"><h2>Compile once</h2>");
    CHECK_CONTAINS(html, "<tr><td><code>compile 1 of f (a.py:3)</code></td>"
                         "<td class=\"n\">1</td><td class=\"n\">2048</td>");
    free(text);
    free(html);
    tool_report_free(&r);
}

/* Bad once lines are errors naming file, line and field; nothing is
 * kept from them. */
CCOL_TEST(test_compile_once_bad_lines)
{
    static const char *const bad[] = {
        "\"event\":\"once\",\"outcome\":\"sent\"",
        "\"event\":\"once\",\"frame\":\"f\",\"outcome\":\"won\"",
        "\"event\":\"once\",\"frame\":\"f\",\"outcome\":\"sent\","
        "\"owner\":-1",
        "\"event\":\"once\",\"frame\":\"f\",\"outcome\":\"sent\","
        "\"owner\":99999",
        "\"event\":\"once\",\"frame\":\"f\",\"outcome\":\"sent\","
        "\"bytes\":\"2\"",
        "\"event\":\"once\",\"frame\":\"f\",\"outcome\":\"sent\","
        "\"error\":7",
    };
    static const char *const says[] = {
        "rank-0.jsonl:1: once: field 'frame' must be a string",
        "rank-0.jsonl:2: once: unknown outcome 'won'",
        "rank-0.jsonl:3: once: field 'owner' is negative (-1)",
        "rank-0.jsonl:4: once: owner 99999 is not a rank",
        "rank-0.jsonl:5: once: field 'bytes' must be an integer",
        "rank-0.jsonl:6: once: field 'error' must be a string",
    };
    tool_report r = { 0 };
    char *text;
    tfile t;

    topen(&t, 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ev(&t, 1, "%s", bad[i]);
    tfeed(&r, &t);
    text = text_of(&r);
    CHECK_EQ(r.ranks[0].nonces, 0);
    for (size_t i = 0; i < sizeof says / sizeof says[0]; i++)
        CHECK_CONTAINS(text, says[i]);
    CHECK(strstr(text, "compile once (") == NULL);
    free(text);
    tool_report_free(&r);
}

/* Writes t's bytes to dir/rank-<r>.jsonl. */
static void
twrite(const char *dir, tfile *t)
{
    char path[256];
    FILE *f;

    fclose(t->f);
    snprintf(path, sizeof path, "%s/rank-%d.jsonl", dir, t->rank);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (f != NULL) {
        fwrite(t->buf, 1, t->len, f);
        fclose(f);
    }
    free(t->buf);
}

/* The output (stdout and stderr) of the shell command `cmd`, malloc'd. */
static char *
run_out(const char *cmd)
{
    char *buf = NULL, chunk[4096];
    size_t len = 0, got;
    FILE *out = open_memstream(&buf, &len), *p = popen(cmd, "r");

    CHECK(p != NULL);
    while (p != NULL && (got = fread(chunk, 1, sizeof chunk, p)) > 0)
        fwrite(chunk, 1, got, out);
    if (p != NULL)
        pclose(p);
    fclose(out);
    return buf;
}

/* The command: the text on stdout, a bad agree line on stderr and status
 * 1, the HTML file with the section of agreements outside a compile. */
CCOL_TEST(test_command)
{
    char dir[] = "/tmp/ccol-test-agree.XXXXXX", cmd[512], *out;
    tfile t;

    CHECK(mkdtemp(dir) != NULL);
    for (int k = 0; k < 2; k++) {
        topen(&t, k);
        compile(&t, "f", 1, 1, 10);
        agree(&t, 3, "partitioner.saved", 1, "graph 0/0", 64, 1500, NULL);
        agree(&t, 12, "partitioner.saved", 2, "graph 0/1", 64, 500, NULL);
        if (k == 1)
            ev(&t, 13, "\"event\":\"agree\",\"site\":\"x\"");
        twrite(dir, &t);
    }
    snprintf(cmd, sizeof cmd,
             "'%s' report '%s' --text -o '%s/r.html' 2>&1; echo status=$?",
             CCOL_TOOL, dir, dir);
    out = run_out(cmd);
    CHECK_CONTAINS(out, "\nstatus=1\n");
    CHECK_CONTAINS(out, "/rank-1.jsonl:5: agree: field 'frame' must be a "
                        "string\n");
    CHECK_CONTAINS(out, "\n      agreements (1, 1.500 ms on the slowest "
                        "rank): partitioner.saved #1 (64 B, 1.500 ms)\n");
    CHECK_CONTAINS(out, "\n  partitioner.saved: 1 each on ranks 0, 1, "
                        "total 0.500 ms, median 0.500 ms\n");
    free(out);
    snprintf(cmd, sizeof cmd,
             "grep -q '<section id=\"outside\"><h2>Agreements outside a "
             "compile' '%s/r.html' && rm -r '%s'",
             dir, dir);
    CHECK_EQ(system(cmd), 0);
}

CCOL_TEST_MAIN(CCOL_T(test_agreements_listed_under_their_compile),
               CCOL_T(test_innermost_open_and_bounds),
               CCOL_T(test_failed_and_partial_agreements),
               CCOL_T(test_divergent_agreement_named),
               CCOL_T(test_bad_agree_lines), CCOL_T(test_hostile_agreements),
               CCOL_T(test_agreements_capped), CCOL_T(test_row_capped),
               CCOL_T(test_compile_once),
               CCOL_T(test_compile_once_bad_lines), CCOL_T(test_command))
