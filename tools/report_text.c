/*
 * report_text.c - `ccol report DIR --text`: the same summary, frames (with
 * the agreements made during each compile), agreements outside a compile
 * and warnings as the HTML report, for a terminal. Text from trace files
 * is untrusted, so control bytes are shown as '?'. Paths are shortened
 * (report_paths.c); the header says to what.
 */
#include "report.h"

#include <stdlib.h>
#include <string.h>

/* Prints s[0..n) with control bytes replaced; a newline (a source
 * snippet under a message) continues on an indented line. */
static void
put_n(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n') {
            fputs("\n    ", f);
            continue;
        }
        fputc((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i], f);
    }
}

/* Prints s, at most `max` bytes (then "..."), as put_n does. */
static void
put_safe(FILE *f, const char *s, size_t max)
{
    size_t n = strnlen(s, max);

    put_n(f, s, n);
    if (s[n] != '\0')
        fputs("...", f);
}

static void
text_piece(void *ctx, const char *s, size_t n, const char *full,
           size_t fulln)
{
    (void)full;
    (void)fulln;
    put_n(ctx, s, n);
}

/* Prints s as put_safe does, with its paths shortened. */
static void
put_text(const tool_report *r, FILE *f, const char *s, size_t max)
{
    tool_report_pieces(r, s, max, text_piece, f);
}

static void
text_header(const tool_report *r, FILE *f)
{
    char counts[256];
    double secs = tool_report_counts(r, counts, sizeof counts);

    fprintf(f, "ccol report: %s, %.3f s\n", counts, secs);
    if (r->common != NULL) {
        fputs("paths: the user's files relative to ", f);
        put_safe(f, r->common, 1000);
        fputs(", packages' files from their package directory, the "
              "standard library's from its directory\n", f);
    }
}

/* A titled list; `r` shortens paths (NULL: shown as they are). */
static void
text_list(const tool_report *r, FILE *f, const char *title,
          const tool_strs *l, size_t extra, const char *prefix)
{
    if (l->n == 0)
        return;
    fprintf(f, "\n%s (%zu):\n", title, l->n + extra);
    for (size_t i = 0; i < l->n; i++) {
        fprintf(f, "  %s", prefix);
        if (r != NULL)
            put_text(r, f, l->v[i], 2000);
        else
            put_safe(f, l->v[i], 2000);
        fputc('\n', f);
    }
    if (extra > 0)
        fprintf(f, "  ... and %zu more\n", extra);
}

/* Milliseconds of a duration in ns. */
static double
ms(int64_t ns)
{
    return (double)ns / 1e6;
}

/* The agreement columns of a summary row ("" when `show` is false or
 * the rank is missing), into buf. */
static const char *
agree_cols(char *buf, size_t len, bool show, const tool_rep_rank *rk)
{
    buf[0] = '\0';
    if (show && rk == NULL)
        snprintf(buf, len, " %6s %9s", "-", "-");
    else if (show)
        snprintf(buf, len, " %6llu %9.3f",
                 (unsigned long long)rk->agreements, ms(rk->agree_ns));
    return buf;
}

/* One row per rank; the agreement columns only when a rank made one. */
static void
text_summary(const tool_report *r, FILE *f)
{
    size_t size = tool_report_world(r);
    bool show = tool_report_agreements(r) > 0;
    char ag[64];

    fprintf(f,
            "\nsummary:\n  %4s %8s %6s %9s %9s %8s %10s %6s %5s %6s%s  "
            "%s\n",
            "rank", "compiles", "failed", "exchanges", "guard h/m", "restarts",
            "recompiles", "breaks", "eager", "errors",
            show ? " agrees  agree ms" : "", "status");
    for (size_t i = 0; i < size; i++) {
        const tool_rep_rank *rk = i < r->nranks ? &r->ranks[i] : NULL;
        char gm[48];

        if (rk == NULL || !rk->present) {
            fprintf(f, "  %4zu %8s %6s %9s %9s %8s %10s %6s %5s %6s%s  %s\n",
                    i, "-", "-", "-", "-", "-", "-", "-", "-", "-",
                    agree_cols(ag, sizeof ag, show, NULL), "missing");
            continue;
        }
        snprintf(gm, sizeof gm, "%llu/%llu", (unsigned long long)rk->nhits,
                 (unsigned long long)rk->nmisses);
        fprintf(f,
                "  %4zu %8llu %6llu %9llu %9s %8llu %10llu %6llu %5llu "
                "%6llu%s  %s\n",
                i, (unsigned long long)rk->ncompiles,
                (unsigned long long)rk->nfailed,
                (unsigned long long)rk->nexchanges, gm,
                (unsigned long long)rk->nrestarts,
                (unsigned long long)rk->nrecompiles,
                (unsigned long long)rk->nbreaks, (unsigned long long)rk->neager,
                (unsigned long long)rk->nerrors,
                agree_cols(ag, sizeof ag, show, rk), tool_report_status(r, i));
    }
}

/* Prints a row's agreements on one line, "site #n (B, ms)" each (the
 * largest payload and the longest duration of the row's ranks), then one
 * line per failed one with its error. */
static void
text_row_agrees(const tool_report *r, FILE *f, const tool_rep_row *row,
                const char *in)
{
    if (row->nagrees == 0)
        return;
    fprintf(f, "%s    agreements (%zu, %.3f ms on the slowest rank):", in,
            row->nagrees + row->agrees_more, ms(row->agree_ns));
    for (size_t k = 0; k < row->nagrees; k++) {
        const tool_rep_ragree *g = &row->agrees[k];
        fputs(k > 0 ? ", " : " ", f);
        put_safe(f, g->site, 200);
        fprintf(f, " #%lld (%lld B, %.3f ms", (long long)g->aseq,
                (long long)g->bytes, ms(g->dur_ns));
        if (g->n < row->n)
            fprintf(f, ", %zu of %zu ranks", g->n, row->n);
        fputs(g->nfailed > 0 ? ", FAILED)" : ")", f);
    }
    if (row->agrees_more > 0)
        fprintf(f, ", ... and %zu more", row->agrees_more);
    fputc('\n', f);
    for (size_t k = 0; k < row->nagrees; k++) {
        const tool_rep_ragree *g = &row->agrees[k];
        if (g->nfailed == 0)
            continue;
        fprintf(f, "%s    FAILED ", in);
        put_safe(f, g->site, 200);
        fprintf(f, " #%lld for ", (long long)g->aseq);
        put_text(r, f, g->frame, 300);
        if (g->nfailed < row->n)
            fprintf(f, " on %zu of %zu ranks", g->nfailed, row->n);
        fputs(": ", f);
        put_safe(f, g->error ? g->error : "", 1000);
        fputc('\n', f);
    }
}

/* Why the ranks of a row compiled: one line when they agree, else one
 * line per reason with its ranks ("why: rank 1: recompile: ..."). */
static void
text_why(const tool_report *r, FILE *f, const tool_rep_row *row,
         const char *in)
{
    bool name = tool_report_why_ranks(row);
    char who[512];

    for (size_t k = 0; k < row->nreasons; k++) {
        fprintf(f, "%s    why: ", in);
        if (name) {
            tool_report_ranks(who, sizeof who, row->reasons[k].ranks,
                              row->reasons[k].n);
            fprintf(f, "%s: ", who);
        }
        put_text(r, f, row->reasons[k].text, 500);
        fputc('\n', f);
    }
}

/* One row of the frames list, indented by `in`. */
static void
text_row(const tool_report *r, FILE *f, const tool_rep_row *row,
         const char *in)
{
    char who[512];

    tool_report_ranks(who, sizeof who, row->ranks, row->n);
    fprintf(f, "%s%s", in, row->diverged ? "! " : "");
    put_text(r, f, row->frame, 200);
    if (row->where != NULL) {
        fputs(" at ", f);
        put_text(r, f, row->where, 300);
    }
    fprintf(f, " (compile %llu, %s) %s: ", (unsigned long long)row->index,
            tool_report_state(row->state), who);
    put_safe(f, row->decisions, 2000);
    fputc('\n', f);
    text_why(r, f, row, in);
    for (size_t k = 0; k < row->changes.n; k++) {
        fprintf(f, "%s    changed ", in);
        put_safe(f, row->changes.v[k], 500);
        fputc('\n', f);
    }
    for (size_t k = 0; k < row->why.n; k++) {
        fprintf(f, "%s    ", in);
        put_safe(f, row->why.v[k], 500);
        fputc('\n', f);
    }
    text_row_agrees(r, f, row, in);
}

/* The frames: the user's, and under the user frame that reached them
 * the frames of torch, ccol and the standard library. */
static void
text_frames(const tool_report *r, FILE *f)
{
    tool_rep_row *rows;
    size_t n = tool_report_rows(r, &rows);
    size_t *order = malloc((n > 0 ? n : 1) * sizeof *order);
    const tool_rep_row *prev = NULL;

    if (n > 0 && order != NULL) {
        fprintf(f, "\nframes (torch's, ccol's and the standard library's "
                   "under the user frame that reached them):\n");
        tool_report_order(rows, n, order);
    }
    for (size_t k = 0; order != NULL && k < n; k++) {
        const tool_rep_row *row = &rows[order[k]];
        if (row->internal &&
            (prev == NULL || !prev->internal ||
             !tool_report_same_user(prev, row))) {
            fputs("  ", f);
            if (row->user != NULL) {
                put_text(r, f, row->user, 300);
                fputs(" called into:\n", f);
            } else {
                fputs("(a user frame the trace does not name) called "
                      "into:\n", f);
            }
        }
        text_row(r, f, row, row->internal ? "    " : "  ");
        prev = row;
    }
    free(order);
    tool_report_rows_free(rows, n);
}

/* One site's agreements outside a compile: how many per rank, on which
 * ranks, the largest total of one rank, the median, graphs and errors. */
static void
text_site(const tool_report *r, FILE *f, const tool_rep_site *s)
{
    char who[512], each[48];

    tool_report_ranks(who, sizeof who, s->ranks, s->n);
    if (s->least == s->most)
        snprintf(each, sizeof each, "%zu", s->most);
    else
        snprintf(each, sizeof each, "%zu-%zu", s->least, s->most);
    fputs("  ", f);
    put_safe(f, s->site, 200);
    fprintf(f, ": %s each on %s, total %.3f ms, median %.3f ms", each, who,
            ms(s->total_ns), ms(s->median_ns));
    if (s->nfailed > 0)
        fprintf(f, ", %zu failed", s->nfailed);
    fputs("\n      graphs: ", f);
    for (size_t k = 0; k < s->graphs.n; k++) {
        fputs(k > 0 ? ", " : "", f);
        put_text(r, f, s->graphs.v[k], 300);
    }
    fputc('\n', f);
    for (size_t k = 0; k < s->errors.n; k++) {
        fputs("      FAILED ", f);
        put_text(r, f, s->errors.v[k], 1000);
        fputc('\n', f);
    }
}

static void
text_outside(const tool_report *r, FILE *f)
{
    tool_rep_site *sites;
    size_t more, n = tool_report_outside(r, &sites, &more);
    uint64_t unlisted = tool_report_agrees_unlisted(r);

    if (n > 0)
        fprintf(f,
                "\nagreements outside a compile (per site: agreements per "
                "rank, the largest total of one rank, the median):\n");
    for (size_t i = 0; i < n; i++)
        text_site(r, f, &sites[i]);
    if (more > 0)
        fprintf(f, "  ... and %zu more at other sites\n", more);
    if (unlisted > 0)
        fprintf(f,
                "\n%llu agreements not listed (a rank made more than %d; "
                "the summary counts them)\n",
                (unsigned long long)unlisted, TOOL_REPORT_MAX_AGREES);
    tool_report_sites_free(sites, n);
}

/* One line per graph under ccol.torch's compile once. */
static void
text_once(const tool_report *r, FILE *f)
{
    tool_rep_oncerow *rows;
    size_t more, n = tool_report_oncerows(r, &rows, &more);

    if (n > 0)
        fprintf(f, "\ncompile once (per graph: the owner and what the "
                   "others did):\n");
    for (size_t i = 0; i < n; i++) {
        char *says = tool_report_once_says(&rows[i]);

        fputs("  ", f);
        put_text(r, f, rows[i].frame, 300);
        fputs(": ", f);
        put_text(r, f, says != NULL ? says : "", 5000);
        fputc('\n', f);
        free(says);
    }
    if (more > 0)
        fprintf(f, "  ... and %zu events of other graphs\n", more);
    tool_report_oncerows_free(rows, n);
}

void
tool_report_text(const tool_report *r, FILE *f)
{
    text_header(r, f);
    /* Divergence first, as the HTML report shows it (docs/trace-format.md). */
    if (r->warnings.n == 0)
        fprintf(f, "\nno divergence between ranks found\n");
    text_list(r, f, "warnings", &r->warnings, 0, "WARNING: ");
    text_list(NULL, f, "errors", &r->errors, r->nerrors_dropped, "");
    text_summary(r, f);
    text_frames(r, f);
    text_outside(r, f);
    text_once(r, f);
}
