/*
 * report_analyze.c - finds where the ranks of a traced job diverge, the
 * situations that make SPMD jobs hang or slow down: different compile
 * counts, different decisions for the same frame and compile, different
 * sequences of collectives, ranks that stopped early, failed or left no
 * trace. Each finding is one warning line naming the ranks involved,
 * grouped ("ranks 0-6: ...; rank 7: ...") so 64 ranks stay readable.
 * An interrupt (Ctrl-C) is named by where it landed, not as an error.
 * Also builds the rows of the frames table (with the agreements of each
 * compile, why each rank compiled, and the user frame that reached a
 * frame of torch) and the agreements outside any compile, by site.
 */
#include "report.h"
#include "../src/core/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ranks that share one value of something. */
typedef struct group {
    char *key;  /* malloc'd value */
    int *ranks; /* ranks, ascending */
    size_t n;   /* their number */
    size_t cap; /* allocated ranks */
} group;

/* A list of groups in order of first appearance. */
typedef struct groups {
    group *v;   /* the groups */
    size_t n;   /* their number */
    size_t cap; /* allocated groups */
} groups;

/* Adds `rank` to the group of `key` (copied). */
static void
groups_add(groups *g, const char *key, int rank)
{
    group *gr = NULL;
    int *rs;

    for (size_t i = 0; i < g->n && gr == NULL; i++)
        if (strcmp(g->v[i].key, key) == 0)
            gr = &g->v[i];
    if (gr == NULL) {
        group *v = ccol__grow(g->v, &g->cap, g->n + 1, sizeof *v, 8);
        if (v == NULL)
            return;
        g->v = v;
        gr = &g->v[g->n];
        memset(gr, 0, sizeof *gr);
        gr->key = strdup(key);
        if (gr->key == NULL)
            return;
        g->n++;
    }
    rs = ccol__grow(gr->ranks, &gr->cap, gr->n + 1, sizeof *rs, 8);
    if (rs == NULL)
        return;
    gr->ranks = rs;
    gr->ranks[gr->n++] = rank;
}

static void
groups_free(groups *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free(g->v[i].key);
        free(g->v[i].ranks);
    }
    free(g->v);
    memset(g, 0, sizeof *g);
}

size_t
tool_report_world(const tool_report *r)
{
    return r->size > 0 && (size_t)r->size > r->nranks ? (size_t)r->size
                                                      : r->nranks;
}

char *
tool_report_join(const tool_strs *l, const char *empty)
{
    size_t n = 1;
    char *s;

    if (l->n == 0)
        return strdup(empty != NULL ? empty : "");
    for (size_t i = 0; i < l->n; i++)
        n += strlen(l->v[i]) + 2;
    s = malloc(n);
    if (s == NULL)
        return NULL;
    s[0] = '\0';
    for (size_t i = 0; i < l->n; i++) {
        if (i > 0)
            strcat(s, ", ");
        strcat(s, l->v[i]);
    }
    return s;
}

/* Writes "<ranks>: <key>; <ranks>: <key>" for every group into a warning
 * that starts with `head`. */
static void
warn_groups(tool_report *r, const char *head, const groups *g)
{
    size_t cap = 256, len;
    char *s, who[512];

    for (size_t i = 0; i < g->n; i++)
        cap += strlen(g->v[i].key) + sizeof who + 4;
    s = malloc(cap);
    if (s == NULL)
        return;
    len = (size_t)snprintf(s, cap, "%s: ", head);
    for (size_t i = 0; i < g->n; i++) {
        tool_report_ranks(who, sizeof who, g->v[i].ranks, g->v[i].n);
        len += (size_t)snprintf(s + len, cap - len, "%s%s: %s", i ? "; " : "",
                                who, g->v[i].key);
    }
    tool_strs_add(&r->warnings, "%s", s);
    free(s);
}

/* Ranks that wrote at least one good line. */
static bool
active(const tool_report *r, size_t i)
{
    return r->ranks[i].present && r->ranks[i].nevents > 0;
}

static void
check_missing(tool_report *r)
{
    size_t size = tool_report_world(r);
    int miss[TOOL_REPORT_MAX_RANKS];
    size_t n = 0;
    char who[512];

    for (size_t i = 0; i < size && n < TOOL_REPORT_MAX_RANKS; i++)
        if (i >= r->nranks || !active(r, i))
            miss[n++] = (int)i;
    if (n == 0)
        return;
    tool_report_ranks(who, sizeof who, miss, n);
    tool_strs_add(&r->warnings,
                   "%s of %zu left no trace events (never "
                   "started tracing, or the file is missing or empty)",
                   who, size);
}

/* Compile counts of the ranks of one domain (1 + its lowest rank, 0 for
 * the whole job); other domains compile other programs. */
static void
check_counts_in(tool_report *r, int domain)
{
    groups g = { 0 };
    char key[64];

    for (size_t i = 0; i < r->nranks; i++) {
        if (!active(r, i) || r->ranks[i].domain != domain)
            continue;
        snprintf(key, sizeof key, "%llu compile%s",
                 (unsigned long long)r->ranks[i].ncompiles,
                 r->ranks[i].ncompiles == 1 ? "" : "s");
        groups_add(&g, key, (int)i);
    }
    if (g.n > 1)
        warn_groups(r,
                    "compile counts differ (the ranks recompiled at "
                    "different times; collectives may not pair up)",
                    &g);
    groups_free(&g);
}

static void
check_counts(tool_report *r)
{
    for (size_t i = 0; i < r->nranks; i++) {
        int d = r->ranks[i].domain;
        bool first = true;
        for (size_t j = 0; j < i; j++)
            first = first && r->ranks[j].domain != d;
        if (first)
            check_counts_in(r, d);
    }
}

/* Groups the decisions for one frame and compile index of every rank of
 * one domain (1 + its lowest rank, 0 for the whole job): replicas of a
 * domain must decide alike, other domains compile their own. */
static void
check_one_compile(tool_report *r, const char *frame, uint64_t index,
                  int domain)
{
    groups g = { 0 };
    char head[512];

    for (size_t i = 0; i < r->nranks; i++) {
        const tool_rep_compile *c =
            tool_report_find(&r->ranks[i], frame, index);
        char *d;

        if (c == NULL || c->state == 0 || r->ranks[i].domain != domain)
            continue;
        d = tool_report_join(&c->dynamic, "all static");
        if (d != NULL)
            groups_add(&g, d, (int)i);
        free(d);
    }
    snprintf(head, sizeof head,
             "decisions differ for frame %.300s "
             "(compile %llu)",
             frame, (unsigned long long)index);
    if (g.n > 1)
        warn_groups(r, head, &g);
    groups_free(&g);
}

/* Has an earlier compile (on any rank of the same domain up to `rank`,
 * position `pos`) the same frame and index? Then it was already checked. */
static bool
seen_before(const tool_report *r, size_t rank, size_t pos)
{
    const tool_rep_compile *c = &r->ranks[rank].compiles[pos];

    for (size_t i = 0; i <= rank; i++) {
        if (r->ranks[i].domain != r->ranks[rank].domain)
            continue;
        size_t end = i == rank ? pos : r->ranks[i].ncomp;
        for (size_t k = 0; k < end; k++)
            if (r->ranks[i].compiles[k].index == c->index &&
                strcmp(r->ranks[i].compiles[k].frame, c->frame) == 0)
                return true;
    }
    return false;
}

static void
check_decisions(tool_report *r)
{
    for (size_t i = 0; i < r->nranks; i++)
        for (size_t k = 0; k < r->ranks[i].ncomp; k++)
            if (!seen_before(r, i, k))
                check_one_compile(r, r->ranks[i].compiles[k].frame,
                                  r->ranks[i].compiles[k].index,
                                  r->ranks[i].domain);
}

/* First position where two sequences differ. */
static size_t
first_diff(const tool_strs *a, const tool_strs *b)
{
    size_t k = 0;

    while (k < a->n && k < b->n && strcmp(a->v[k], b->v[k]) == 0)
        k++;
    return k;
}

/* Describes how rank `x`'s sequence departs from the reference `ref`. */
static void
describe_seq(tool_report *r, const group *gx, size_t ref, const group *gr)
{
    const tool_strs *a = &r->ranks[ref].seq;
    const tool_strs *b = &r->ranks[gx->ranks[0]].seq;
    size_t k = first_diff(a, b);
    char who[512], refwho[512];

    tool_report_ranks(who, sizeof who, gx->ranks, gx->n);
    tool_report_ranks(refwho, sizeof refwho, gr->ranks, gr->n);
    if (k < a->n && k < b->n)
        tool_strs_add(&r->warnings,
                       "collective sequences differ at "
                       "collective #%zu: %s ran '%s' while %s ran '%s' "
                       "(this is how jobs hang or time out)",
                       k + 1, who, b->v[k], refwho, a->v[k]);
    else
        tool_strs_add(&r->warnings,
                       "collective sequences differ: %s ran "
                       "%zu collectives, %s ran %zu; the first %zu agree, "
                       "then '%s'",
                       who, b->n, refwho, a->n, k,
                       k < a->n ? a->v[k] : b->v[k]);
}

/* The domain of the ranks of group x (they share one). */
static int
domain_of(const tool_report *r, const group *x)
{
    return r->ranks[x->ranks[0]].domain;
}

/* Ranks must run the same collectives only within their domain (a
 * pipeline's stages run their own): ranks are grouped by identical
 * sequences within a domain, and each other group of a domain is
 * described against that domain's first. */
static void
check_sequences(tool_report *r)
{
    groups g = { 0 };
    char key[32];

    for (size_t i = 0; i < r->nranks; i++) {
        size_t j = 0;
        if (!active(r, i))
            continue;
        for (; j < i; j++)
            if (active(r, j) && r->ranks[j].domain == r->ranks[i].domain &&
                r->ranks[j].seq.n == r->ranks[i].seq.n &&
                first_diff(&r->ranks[j].seq, &r->ranks[i].seq) ==
                    r->ranks[i].seq.n)
                break;
        snprintf(key, sizeof key, "%zu", j);
        groups_add(&g, key, (int)i);
    }
    for (size_t i = 1; i < g.n; i++)
        for (size_t k = 0; k < i; k++)
            if (domain_of(r, &g.v[k]) == domain_of(r, &g.v[i])) {
                describe_seq(r, &g.v[i], (size_t)g.v[k].ranks[0], &g.v[k]);
                break;
            }
    groups_free(&g);
}

/* The compiler stage of a frame "function (file:line)" by its torch
 * package directory, or NULL. */
static const char *
stage_of(const char *at)
{
    static const char *const dirs[][2] = {
        { "/torch/_inductor/", "Inductor" },
        { "/torch/_dynamo/", "Dynamo" },
        { "/torch/_functorch/", "AOTAutograd" },
    };

    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++)
        if (strstr(at, dirs[i][0]) != NULL)
            return dirs[i][1];
    return NULL;
}

char *
tool_report_landed(const tool_rep_rank *rk)
{
    const char *what = rk->landed_what, *at = rk->landed_at;
    const char *stage = at != NULL ? stage_of(at) : NULL;
    char *s = NULL;
    int n = -1;

    if (rk->landed == TOOL_LANDED_COMPILE)
        n = asprintf(&s, "during %s, outside any collective%s%s%s%s%s",
                     what ? what : "a compile", at ? " (" : "",
                     stage ? "in " : "", stage ? stage : "",
                     at ? (stage ? " at " : "at ") : "", at ? at : "");
    else if (rk->landed == TOOL_LANDED_COLLECTIVE)
        n = asprintf(&s, "in a collective%s%s", what ? ": " : "",
                     what ? what : "");
    else if (rk->landed == TOOL_LANDED_USER)
        n = asprintf(&s, "in the user's code, outside any compile%s%s",
                     at ? " (at " : "", at ? at : "");
    else if (rk->landed == TOOL_LANDED_UNKNOWN)
        n = asprintf(&s, "(the trace does not say where)");
    if (n < 0)
        return NULL;
    /* The parenthesis opened before `at`. */
    if (at != NULL && rk->landed != TOOL_LANDED_COLLECTIVE &&
        rk->landed != TOOL_LANDED_UNKNOWN) {
        char *t = realloc(s, (size_t)n + 2);
        if (t == NULL) {
            free(s);
            return NULL;
        }
        memcpy(t + n, ")", 2);
        s = t;
    }
    return s;
}

/* Interrupted ranks, grouped by where the interrupt landed: "ranks 0, 1
 * were interrupted (Ctrl-C) during compile 1 of f (a.py:3), outside any
 * collective". */
static void
check_interrupts(tool_report *r)
{
    groups g = { 0 };
    char who[512];

    for (size_t i = 0; i < r->nranks; i++) {
        char *w = r->ranks[i].ninterrupts > 0
                      ? tool_report_landed(&r->ranks[i])
                      : NULL;
        if (w != NULL)
            groups_add(&g, w, (int)i);
        free(w);
    }
    for (size_t i = 0; i < g.n; i++) {
        tool_report_ranks(who, sizeof who, g.v[i].ranks, g.v[i].n);
        tool_strs_add(&r->warnings, "%s %s interrupted (Ctrl-C) %s", who,
                      g.v[i].n == 1 ? "was" : "were", g.v[i].key);
    }
    groups_free(&g);
}

/* Ranks whose trace ends inside a wait (a job that hung, or was killed
 * while it waited): what each waited for, as its last progress line said. */
static void
check_waits(tool_report *r)
{
    for (size_t i = 0; i < r->nranks; i++)
        if (r->ranks[i].waiting != NULL && !r->ranks[i].closed)
            tool_strs_add(&r->warnings,
                          "rank %zu's trace ends in an unfinished wait: %s",
                          i, r->ranks[i].waiting);
}

/* Ranks that died, failed, or stopped before the others. */
static void
check_stops(tool_report *r)
{
    bool any_closed = false;

    for (size_t i = 0; i < r->nranks; i++)
        any_closed |= active(r, i) && r->ranks[i].closed;
    for (size_t i = 0; i < r->nranks; i++) {
        const tool_rep_rank *rk = &r->ranks[i];
        if (!active(r, i))
            continue;
        if (rk->truncated)
            tool_strs_add(&r->warnings,
                           "rank %zu stopped early: its "
                           "trace ends inside a line (it died while "
                           "writing)",
                           i);
        else if (any_closed && !rk->closed)
            tool_strs_add(&r->warnings,
                           "rank %zu stopped early: its "
                           "trace ends at +%.3f s without the close event "
                           "other ranks wrote (crashed or killed?)",
                           i, (double)(rk->last_ns - r->t0) / 1e9);
        if (rk->other_pid != 0)
            tool_strs_add(&r->warnings,
                           "rank %zu's trace holds lines of several "
                           "processes (pids %lld and %lld): did several "
                           "jobs write to this directory? Use a fresh one "
                           "per job",
                           i, (long long)rk->pid, (long long)rk->other_pid);
        /* Interrupts are named by check_interrupts(), not as errors. */
        if (rk->nerrors > rk->ninterrupts)
            tool_strs_add(&r->warnings,
                           "rank %zu reported %llu error%s; "
                           "last: %.400s",
                           i, (unsigned long long)(rk->nerrors -
                                                   rk->ninterrupts),
                           rk->nerrors - rk->ninterrupts == 1 ? "" : "s",
                           rk->last_error ? rk->last_error : "");
    }
}

void
tool_report_analyze(tool_report *r)
{
    tool_report_attach(r);
    tool_strs_free(&r->warnings);
    check_missing(r);
    check_counts(r);
    check_decisions(r);
    check_sequences(r);
    check_interrupts(r);
    check_waits(r);
    check_stops(r);
    tool_report_check_once(r);
    tool_report_common(r);
}

/* ---- rows of the frames table ---- */

/* The row of `c`'s frame, index, state and decisions `d`, or NULL. */
static tool_rep_row *
find_row(tool_rep_row *rows, size_t n, const tool_rep_compile *c,
         const char *d)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].index == c->index && rows[i].state == c->state &&
            strcmp(rows[i].frame, c->frame) == 0 &&
            strcmp(rows[i].decisions, d) == 0)
            return &rows[i];
    return NULL;
}

/* Adds `rank` to the ranks that gave `reason` in a row (a new reason
 * while there are fewer than 16). */
static void
row_reason(tool_rep_row *row, const char *reason, int rank)
{
    tool_rep_reason *g = NULL, *v;
    int *rs;

    for (size_t i = 0; i < row->nreasons && g == NULL; i++)
        if (strcmp(row->reasons[i].text, reason) == 0)
            g = &row->reasons[i];
    if (g == NULL && row->nreasons < 16 &&
        (v = ccol__grow(row->reasons, &row->capreasons, row->nreasons + 1,
                        sizeof *v, 4)) != NULL) {
        row->reasons = v;
        g = &v[row->nreasons];
        *g = (tool_rep_reason){ .text = strdup(reason) };
        if (g->text == NULL)
            return;
        row->nreasons++;
    }
    if (g == NULL || (g->n > 0 && g->ranks[g->n - 1] == rank))
        return;
    rs = ccol__grow(g->ranks, &g->cap, g->n + 1, sizeof *rs, 8);
    if (rs != NULL) {
        g->ranks = rs;
        rs[g->n++] = rank;
    }
}

bool
tool_report_why_ranks(const tool_rep_row *row)
{
    return row->nreasons > 1 ||
           (row->nreasons == 1 && row->reasons[0].n < row->n);
}

/* Adds the witnesses, state changes, reason and rank of compile `c` to
 * its row. */
static void
row_take(tool_rep_row *row, const tool_rep_compile *c, int rank)
{
    int *rs;

    if (row->where == NULL)
        row->where = c->where;
    if (row->n == 0) {
        row->user = c->user;
        row->internal = tool_report_internal(c);
    }
    for (size_t k = 0; k < c->why.n && row->why.n < 64; k++)
        if (!tool_strs_has(&row->why, c->why.v[k]))
            tool_strs_add(&row->why, "%s", c->why.v[k]);
    for (size_t k = 0; k < c->changes.n && row->changes.n < 64; k++)
        if (!tool_strs_has(&row->changes, c->changes.v[k]))
            tool_strs_add(&row->changes, "%s", c->changes.v[k]);
    if (c->reason != NULL)
        row_reason(row, c->reason, rank);
    if (c->agree_ns > row->agree_ns)
        row->agree_ns = c->agree_ns;
    rs = ccol__grow(row->ranks, &row->cap, row->n + 1, sizeof *rs, 8);
    if (rs != NULL) {
        row->ranks = rs;
        rs[row->n++] = rank;
    }
}

/* Appends a row, or adds `rank` (and its witnesses) to the row of the
 * same compile with the same decisions. Returns the row's position, or
 * SIZE_MAX when out of memory. */
static size_t
add_row(tool_rep_row **rows, size_t *n, size_t *cap, const tool_rep_compile *c,
        int rank)
{
    char *d = tool_report_join(&c->dynamic, "all static");
    tool_rep_row *row, *v;

    if (d == NULL)
        return SIZE_MAX;
    row = find_row(*rows, *n, c, d);
    if (row == NULL &&
        (v = ccol__grow(*rows, cap, *n + 1, sizeof *v, 16)) != NULL) {
        *rows = v;
        row = &v[(*n)++];
        *row = (tool_rep_row){ .frame = c->frame,
                                .where = c->where,
                                .index = c->index,
                                .state = c->state,
                                .decisions = d };
        d = NULL;
    }
    free(d);
    if (row == NULL)
        return SIZE_MAX;
    row_take(row, c, rank);
    return (size_t)(row - *rows);
}

/* Adds agreement `a` of `rank` to its row: to the row's agreement of the
 * same site and sequence number (the largest payload and duration
 * count), or as a new one (at most 64 per row). */
static void
row_agree(tool_rep_row *row, const tool_rep_agree *a, int rank)
{
    tool_rep_ragree *g = NULL, *v;

    for (size_t i = 0; i < row->nagrees && g == NULL; i++)
        if (row->agrees[i].aseq == a->aseq &&
            strcmp(row->agrees[i].site, a->site) == 0)
            g = &row->agrees[i];
    if (g == NULL && row->nagrees >= 64) {
        row->agrees_more++;
        return;
    }
    if (g == NULL) {
        v = ccol__grow(row->agrees, &row->capagrees, row->nagrees + 1,
                       sizeof *v, 8);
        if (v == NULL)
            return;
        row->agrees = v;
        g = &v[row->nagrees++];
        *g = (tool_rep_ragree){ .site = a->site, .frame = a->frame,
                                .aseq = a->aseq, .last = -1 };
    }
    g->bytes = a->bytes > g->bytes ? a->bytes : g->bytes;
    g->dur_ns = a->dur_ns > g->dur_ns ? a->dur_ns : g->dur_ns;
    if (g->last != rank)
        g->n++;
    g->last = rank;
    if (!a->ok && g->nfailed++ == 0)
        g->error = a->error;
}

/* Adds the compiles of rank `rank` to the rows, then each of its
 * agreements to the row of the compile it belongs to. */
static void
rank_rows(tool_rep_row **rows, size_t *n, size_t *cap,
          const tool_rep_rank *rk, int rank)
{
    size_t *at = rk->ncomp > 0 ? malloc(rk->ncomp * sizeof *at) : NULL;

    for (size_t k = 0; k < rk->ncomp; k++) {
        size_t row = add_row(rows, n, cap, &rk->compiles[k], rank);
        if (at != NULL)
            at[k] = row;
    }
    for (size_t k = 0; at != NULL && k < rk->nagrees; k++) {
        const tool_rep_agree *a = &rk->agrees[k];
        if (a->comp >= 0 && (size_t)a->comp < rk->ncomp &&
            at[a->comp] != SIZE_MAX)
            row_agree(&(*rows)[at[a->comp]], a, rank);
    }
    free(at);
}

/* Orders rows by first appearance of their (frame, index), keeping the
 * rows of one compile together, and flags compiles split over rows. */
static void
flag_diverged(tool_rep_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (rows[j].index == rows[i].index &&
                strcmp(rows[j].frame, rows[i].frame) == 0) {
                rows[i].diverged = rows[j].diverged = true;
                if (j > i + 1) { /* move row j right after row i */
                    tool_rep_row t = rows[j];
                    memmove(&rows[i + 2], &rows[i + 1], (j - i - 1) * sizeof t);
                    rows[i + 1] = t;
                }
            }
}

size_t
tool_report_rows(const tool_report *r, tool_rep_row **out)
{
    tool_rep_row *rows = NULL;
    size_t n = 0, cap = 0;

    for (size_t i = 0; i < r->nranks; i++)
        rank_rows(&rows, &n, &cap, &r->ranks[i], (int)i);
    flag_diverged(rows, n);
    *out = rows;
    return n;
}

bool
tool_report_same_user(const tool_rep_row *a, const tool_rep_row *b)
{
    if (a->user == NULL || b->user == NULL)
        return a->user == b->user;
    return strcmp(a->user, b->user) == 0;
}

void
tool_report_order(const tool_rep_row *rows, size_t n, size_t *order)
{
    size_t k = 0;
    bool *done = calloc(n > 0 ? n : 1, sizeof *done);

    if (done == NULL) { /* out of memory: the rows as they are */
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        order[k++] = i;
        done[i] = true;
        if (!rows[i].internal)
            continue;
        for (size_t j = i + 1; j < n; j++)
            if (!done[j] && rows[j].internal &&
                tool_report_same_user(&rows[i], &rows[j])) {
                order[k++] = j;
                done[j] = true;
            }
    }
    free(done);
}

void
tool_report_rows_free(tool_rep_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rows[i].decisions);
        free(rows[i].ranks);
        tool_strs_free(&rows[i].why);
        tool_strs_free(&rows[i].changes);
        for (size_t k = 0; k < rows[i].nreasons; k++) {
            free(rows[i].reasons[k].text);
            free(rows[i].reasons[k].ranks);
        }
        free(rows[i].reasons);
        free(rows[i].agrees);
    }
    free(rows);
}

/* ---- agreements outside a compile ---- */

/* The entry of `site`, appended when new (at most 64); NULL past that. */
static tool_rep_site *
site_of(tool_rep_site **v, size_t *n, size_t *cap, const char *site)
{
    tool_rep_site *s;

    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i].site, site) == 0)
            return &(*v)[i];
    if (*n >= 64 || (s = ccol__grow(*v, cap, *n + 1, sizeof *s, 8)) == NULL)
        return NULL;
    *v = s;
    s = &s[(*n)++];
    *s = (tool_rep_site){ .site = site };
    return s;
}

/* Closes the current rank's count and total of site s. */
static void
site_fold(tool_rep_site *s)
{
    if (s->cur_n == 0)
        return;
    if (s->cur_n > s->most)
        s->most = s->cur_n;
    if (s->least == 0 || s->cur_n < s->least)
        s->least = s->cur_n;
    if (s->cur_ns > s->total_ns)
        s->total_ns = s->cur_ns;
    s->cur_n = 0;
    s->cur_ns = 0;
}

/* Adds agreement `a` of `rank` to its site (ranks come in order). */
static void
site_add(tool_rep_site *s, const tool_rep_agree *a, int rank)
{
    int64_t *d;
    int *rs;

    if (s->n == 0 || s->ranks[s->n - 1] != rank) {
        site_fold(s);
        rs = ccol__grow(s->ranks, &s->cap, s->n + 1, sizeof *rs, 8);
        if (rs == NULL)
            return;
        s->ranks = rs;
        rs[s->n++] = rank;
    }
    s->cur_n++;
    s->cur_ns = tool_report_add_ns(s->cur_ns, a->dur_ns);
    d = ccol__grow(s->durs, &s->capdurs, s->ndurs + 1, sizeof *d, 16);
    if (d != NULL) {
        s->durs = d;
        d[s->ndurs++] = a->dur_ns;
    }
    if (s->graphs.n < 8 && !tool_strs_has(&s->graphs, a->frame))
        tool_strs_add(&s->graphs, "%s", a->frame);
    if (!a->ok && s->nfailed++ < 4)
        tool_strs_add(&s->errors, "#%lld for %s on rank %d: %s",
                      (long long)a->aseq, a->frame, rank,
                      a->error ? a->error : "");
}

static int
cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Finishes site s: the last rank's totals and the median duration. */
static void
site_finish(tool_rep_site *s)
{
    size_t m = s->ndurs / 2;

    site_fold(s);
    if (s->ndurs == 0)
        return;
    qsort(s->durs, s->ndurs, sizeof *s->durs, cmp_i64);
    s->median_ns = s->ndurs % 2 ? s->durs[m]
                                : s->durs[m - 1] / 2 + s->durs[m] / 2;
    free(s->durs);
    s->durs = NULL;
    s->ndurs = s->capdurs = 0;
}

size_t
tool_report_outside(const tool_report *r, tool_rep_site **out, size_t *more)
{
    tool_rep_site *v = NULL, *s;
    size_t n = 0, cap = 0;

    *more = 0;
    for (size_t i = 0; i < r->nranks; i++)
        for (size_t k = 0; k < r->ranks[i].nagrees; k++) {
            const tool_rep_agree *a = &r->ranks[i].agrees[k];
            if (a->comp >= 0)
                continue;
            s = site_of(&v, &n, &cap, a->site);
            if (s == NULL)
                (*more)++;
            else
                site_add(s, a, (int)i);
        }
    for (size_t i = 0; i < n; i++)
        site_finish(&v[i]);
    *out = v;
    return n;
}

void
tool_report_sites_free(tool_rep_site *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(s[i].ranks);
        free(s[i].durs);
        tool_strs_free(&s[i].graphs);
        tool_strs_free(&s[i].errors);
    }
    free(s);
}

uint64_t
tool_report_agreements(const tool_report *r)
{
    uint64_t n = 0;

    for (size_t i = 0; i < r->nranks; i++)
        n += r->ranks[i].agreements;
    return n;
}

uint64_t
tool_report_agrees_unlisted(const tool_report *r)
{
    uint64_t n = 0;

    for (size_t i = 0; i < r->nranks; i++)
        n += r->ranks[i].agreements - r->ranks[i].nagrees;
    return n;
}

const char *
tool_report_state(int state)
{
    static const char *const words[] = { "open", "ok", "failed" };

    return state >= 0 && state <= 2 ? words[state] : "?";
}

/* " (domains: ranks 0, 1 | ranks 2, 3)" when ranks agreed in domains of
 * their own, else nothing. */
static void
domains_text(const tool_report *r, char *out, size_t len)
{
    int *ranks = calloc(r->nranks + 1, sizeof *ranks);
    size_t at = 0;

    out[0] = '\0';
    for (size_t d = 1; ranks != NULL && d <= r->nranks; d++) {
        size_t n = 0;
        char who[256];
        for (size_t i = 0; i < r->nranks; i++)
            if (r->ranks[i].domain == (int)d)
                ranks[n++] = (int)i;
        if (n == 0)
            continue;
        tool_report_ranks(who, sizeof who, ranks, n);
        at += (size_t)snprintf(out + at, at < len ? len - at : 0, "%s%s",
                               at == 0 ? " (domains: " : " | ", who);
    }
    if (at > 0 && at < len)
        snprintf(out + at, len - at, ")");
    free(ranks);
}

double
tool_report_counts(const tool_report *r, char *out, size_t len)
{
    size_t nactive = 0;
    char domains[512];

    for (size_t i = 0; i < r->nranks; i++)
        nactive += r->ranks[i].nevents > 0;
    domains_text(r, domains, sizeof domains);
    snprintf(out, len,
             "%zu rank%s traced (world size %d), %zu file%s, %zu events%s",
             nactive, nactive == 1 ? "" : "s", (int)tool_report_world(r),
             r->nfiles, r->nfiles == 1 ? "" : "s", r->nlines, domains);
    return r->t1 > r->t0 ? (double)(r->t1 - r->t0) / 1e9 : 0.0;
}

const char *
tool_report_status(const tool_report *r, size_t i)
{
    bool any_closed = false;

    if (i >= r->nranks || !r->ranks[i].present || r->ranks[i].nevents == 0)
        return "missing";
    if (r->ranks[i].truncated)
        return "died";
    if (r->ranks[i].nerrors > r->ranks[i].ninterrupts)
        return "failed";
    if (r->ranks[i].ninterrupts > 0)
        return "interrupted";
    if (r->ranks[i].closed)
        return "ok";
    if (r->ranks[i].waiting != NULL)
        return "waiting";
    for (size_t k = 0; k < r->nranks; k++)
        any_closed |= r->ranks[k].closed;
    return any_closed ? "stopped" : "running";
}
