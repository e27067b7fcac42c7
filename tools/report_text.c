/*
 * report_text.c - `ccol report DIR --text`: the same summary, frames and
 * warnings as the HTML report, for a terminal. Text from trace files is
 * untrusted, so control bytes are shown as '?'.
 */
#include "report.h"

#include <stdlib.h>
#include <string.h>

/* Prints s with control bytes replaced, at most `max` bytes; a newline
 * (a source snippet under a message) continues on an indented line. */
static void
put_safe(FILE *f, const char *s, size_t max)
{
    size_t i = 0;

    for (; s[i] != '\0' && i < max; i++) {
        if (s[i] == '\n') {
            fputs("\n    ", f);
            continue;
        }
        fputc((unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i], f);
    }
    if (s[i] != '\0')
        fputs("...", f);
}

static void
text_header(const tool_report *r, FILE *f)
{
    char counts[256];
    double secs = tool_report_counts(r, counts, sizeof counts);

    fprintf(f, "ccol report: %s, %.3f s\n", counts, secs);
}

static void
text_list(FILE *f, const char *title, const tool_strs *l, size_t extra,
          const char *prefix)
{
    if (l->n == 0)
        return;
    fprintf(f, "\n%s (%zu):\n", title, l->n + extra);
    for (size_t i = 0; i < l->n; i++) {
        fprintf(f, "  %s", prefix);
        put_safe(f, l->v[i], 2000);
        fputc('\n', f);
    }
    if (extra > 0)
        fprintf(f, "  ... and %zu more\n", extra);
}

static void
text_summary(const tool_report *r, FILE *f)
{
    size_t size = tool_report_world(r);

    fprintf(f,
            "\nsummary:\n  %4s %8s %6s %9s %9s %8s %10s %6s %5s %6s  "
            "%s\n",
            "rank", "compiles", "failed", "exchanges", "guard h/m", "restarts",
            "recompiles", "breaks", "eager", "errors", "status");
    for (size_t i = 0; i < size; i++) {
        const tool_rep_rank *rk = i < r->nranks ? &r->ranks[i] : NULL;
        char gm[48];

        if (rk == NULL || !rk->present) {
            fprintf(f, "  %4zu %8s %6s %9s %9s %8s %10s %6s %5s %6s  %s\n", i,
                    "-", "-", "-", "-", "-", "-", "-", "-", "-", "missing");
            continue;
        }
        snprintf(gm, sizeof gm, "%llu/%llu", (unsigned long long)rk->nhits,
                 (unsigned long long)rk->nmisses);
        fprintf(f,
                "  %4zu %8llu %6llu %9llu %9s %8llu %10llu %6llu %5llu "
                "%6llu  %s\n",
                i, (unsigned long long)rk->ncompiles,
                (unsigned long long)rk->nfailed,
                (unsigned long long)rk->nexchanges, gm,
                (unsigned long long)rk->nrestarts,
                (unsigned long long)rk->nrecompiles,
                (unsigned long long)rk->nbreaks, (unsigned long long)rk->neager,
                (unsigned long long)rk->nerrors, tool_report_status(r, i));
    }
}

static void
text_frames(const tool_report *r, FILE *f)
{
    tool_rep_row *rows;
    size_t n = tool_report_rows(r, &rows);
    char who[512];

    if (n > 0)
        fprintf(f, "\nframes:\n");
    for (size_t i = 0; i < n; i++) {
        tool_report_ranks(who, sizeof who, rows[i].ranks, rows[i].n);
        fprintf(f, "  %s", rows[i].diverged ? "! " : "");
        put_safe(f, rows[i].frame, 200);
        if (rows[i].where != NULL) {
            fputs(" at ", f);
            put_safe(f, rows[i].where, 300);
        }
        fprintf(f,
                " (compile %llu, %s) %s: ", (unsigned long long)rows[i].index,
                tool_report_state(rows[i].state), who);
        put_safe(f, rows[i].decisions, 2000);
        fputc('\n', f);
        for (size_t k = 0; k < rows[i].reasons.n; k++) {
            fprintf(f, "      why: ");
            put_safe(f, rows[i].reasons.v[k], 500);
            fputc('\n', f);
        }
        for (size_t k = 0; k < rows[i].changes.n; k++) {
            fprintf(f, "      changed ");
            put_safe(f, rows[i].changes.v[k], 500);
            fputc('\n', f);
        }
        for (size_t k = 0; k < rows[i].why.n; k++) {
            fprintf(f, "      ");
            put_safe(f, rows[i].why.v[k], 500);
            fputc('\n', f);
        }
    }
    tool_report_rows_free(rows, n);
}

void
tool_report_text(const tool_report *r, FILE *f)
{
    text_header(r, f);
    /* Divergence first, as the HTML report shows it (docs/trace-format.md). */
    if (r->warnings.n == 0)
        fprintf(f, "\nno divergence between ranks found\n");
    text_list(f, "warnings", &r->warnings, 0, "WARNING: ");
    text_list(f, "errors", &r->errors, r->nerrors_dropped, "");
    text_summary(r, f);
    text_frames(r, f);
}
