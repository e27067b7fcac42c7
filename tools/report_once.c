/*
 * report_once.c - ccol.torch's compile once in `ccol report`: gathers the
 * `once` events of every rank by graph (who owned it, who loaded it, who
 * compiled it alone and why), describes each graph in one line for the
 * text and HTML reports, and warns where a graph was not shared: its owner
 * did not deliver, the ranks' keys differed, or torch's caches refuse it.
 */
#include "report.h"
#include "../src/core/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most graphs listed; the others are counted. */
#define ONCE_MAX_ROWS 256

const char *const tool_once_outcomes[TOOL_ONCE_NKINDS] = {
    [TOOL_ONCE_SENT] = "sent",
    [TOOL_ONCE_FAILED] = "failed",
    [TOOL_ONCE_LOADED] = "loaded",
    [TOOL_ONCE_FALLBACK] = "fallback",
    [TOOL_ONCE_DIVERGENT] = "divergent",
    [TOOL_ONCE_BYPASSED] = "bypassed",
    [TOOL_ONCE_ALONE] = "alone",
    [TOOL_ONCE_STORED] = "stored",
    [TOOL_ONCE_KEPT] = "kept",
};

/* The row of `frame`, appended when new; NULL past the cap. */
static tool_rep_oncerow *
once_row_of(tool_rep_oncerow **v, size_t *n, size_t *cap, const char *frame)
{
    tool_rep_oncerow *row;

    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i].frame, frame) == 0)
            return &(*v)[i];
    if (*n >= ONCE_MAX_ROWS ||
        (row = ccol__grow(*v, cap, *n + 1, sizeof *row, 8)) == NULL)
        return NULL;
    *v = row;
    row = &row[(*n)++];
    *row = (tool_rep_oncerow){ .frame = frame, .owner = -1 };
    return row;
}

/* Adds event `o` of `rank` to its row (ranks come in ascending order; a
 * rank is listed once per outcome). */
static void
once_row_add(tool_rep_oncerow *row, const tool_rep_once *o, int rank)
{
    int k = o->outcome, *rs;

    if (row->owner < 0)
        row->owner = o->owner;
    if (o->bytes > row->bytes)
        row->bytes = o->bytes;
    if (k == TOOL_ONCE_SENT || k == TOOL_ONCE_FAILED)
        row->owner_ns = o->dur_ns;
    if (row->error == NULL && o->error != NULL && k != TOOL_ONCE_LOADED)
        row->error = o->error;
    if (row->n[k] > 0 && row->ranks[k][row->n[k] - 1] == rank)
        return;
    rs = ccol__grow(row->ranks[k], &row->cap[k], row->n[k] + 1, sizeof *rs,
                    8);
    if (rs == NULL)
        return;
    row->ranks[k] = rs;
    rs[row->n[k]++] = rank;
}

size_t
tool_report_oncerows(const tool_report *r, tool_rep_oncerow **out,
                     size_t *more)
{
    tool_rep_oncerow *v = NULL, *row;
    size_t n = 0, cap = 0;

    *more = 0;
    for (size_t i = 0; i < r->nranks; i++) {
        const tool_rep_rank *rk = &r->ranks[i];

        for (size_t k = 0; k < rk->nonces; k++) {
            row = once_row_of(&v, &n, &cap, rk->onces[k].frame);
            if (row != NULL)
                once_row_add(row, &rk->onces[k], (int)i);
            else
                (*more)++;
        }
    }
    *out = v;
    return n;
}

void
tool_report_oncerows_free(tool_rep_oncerow *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < TOOL_ONCE_NKINDS; k++)
            free(rows[i].ranks[k]);
    free(rows);
}

/* Appends "; <what> on <ranks>" for outcome k when any rank had it. */
static void
once_says_ranks(char *out, size_t len, const tool_rep_oncerow *row, int k,
           const char *what)
{
    char who[512];
    size_t at = strlen(out);

    if (row->n[k] == 0 || at >= len)
        return;
    tool_report_ranks(who, sizeof who, row->ranks[k], row->n[k]);
    snprintf(out + at, len - at, "%s%s on %s", at > 0 ? "; " : "", what,
             who);
}

char *
tool_report_once_says(const tool_rep_oncerow *row)
{
    char buf[4096] = "";

    if (row->n[TOOL_ONCE_SENT] > 0)
        snprintf(buf, sizeof buf, "rank %lld compiled it and sent it (%lld "
                 "B, %.3f s to send)", (long long)row->owner, (long long)row->bytes,
                 (double)row->owner_ns / 1e9);
    else if (row->n[TOOL_ONCE_FAILED] > 0)
        snprintf(buf, sizeof buf, "rank %lld, the owner, sent no files",
                 (long long)row->owner);
    once_says_ranks(buf, sizeof buf, row, TOOL_ONCE_LOADED, "loaded");
    once_says_ranks(buf, sizeof buf, row, TOOL_ONCE_FALLBACK,
               "compiled alone (the owner did not deliver)");
    once_says_ranks(buf, sizeof buf, row, TOOL_ONCE_DIVERGENT,
               "compiled its own (the keys differ)");
    once_says_ranks(buf, sizeof buf, row, TOOL_ONCE_BYPASSED,
               "bypassed (torch's caches refuse it)");
    once_says_ranks(buf, sizeof buf, row, TOOL_ONCE_ALONE,
               "compiled alone (no other rank lacked it)");
    once_says_ranks(buf, sizeof buf, row, TOOL_ONCE_STORED,
               "loaded from the job store");
    once_says_ranks(buf, sizeof buf, row, TOOL_ONCE_KEPT,
               "kept in the job store");
    if (row->error != NULL) {
        size_t at = strlen(buf);
        snprintf(buf + at, sizeof buf - at, ": %.1000s", row->error);
    }
    return strdup(buf);
}

/* The ranks of `row` with outcome k, as text in who[len]. */
static const char *
once_who(char *who, size_t len, const tool_rep_oncerow *row, int k)
{
    tool_report_ranks(who, len, row->ranks[k], row->n[k]);
    return who;
}

void
tool_report_check_once(tool_report *r)
{
    tool_rep_oncerow *rows;
    size_t more, n = tool_report_oncerows(r, &rows, &more);
    char who[512];

    for (size_t i = 0; i < n; i++) {
        const tool_rep_oncerow *row = &rows[i];
        const char *why = row->error != NULL ? row->error : "no reason given";

        if (row->n[TOOL_ONCE_FALLBACK] > 0)
            tool_strs_add(&r->warnings, "compile once of %.300s: %s "
                          "compiled it alone: the owner, rank %lld, did not "
                          "deliver (%.400s)", row->frame,
                          once_who(who, sizeof who, row, TOOL_ONCE_FALLBACK),
                          (long long)row->owner, why);
        if (row->n[TOOL_ONCE_BYPASSED] > 0)
            tool_strs_add(&r->warnings, "compile once of %.300s: torch's "
                          "caches refuse it on %s, so each compiled it "
                          "(%.400s)", row->frame,
                          once_who(who, sizeof who, row, TOOL_ONCE_BYPASSED),
                          why);
        if (row->n[TOOL_ONCE_DIVERGENT] > 0)
            tool_strs_add(&r->warnings, "compile once of %.300s: the cache "
                          "keys differ between ranks (reported by %s), so "
                          "every rank compiled its own", row->frame,
                          once_who(who, sizeof who, row,
                                   TOOL_ONCE_DIVERGENT));
    }
    tool_report_oncerows_free(rows, n);
}
