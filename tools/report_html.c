/*
 * report_html.c - `ccol report DIR -o report.html`: one self-contained
 * page (inline CSS and SVG; no script, nothing fetched, and a Content
 * Security Policy that forbids fetching): the warnings first, then a
 * compile timeline of every rank on a shared time axis, the per-rank
 * summary, the frames with their decisions, witnesses and agreements, and
 * the agreements made outside any compile. All text
 * from trace files is HTML-escaped. Timeline marks are capped per rank to
 * bound the page size. Paths are shortened (report_paths.c), each with
 * its full text in a tooltip; the frames of torch, ccol and the standard
 * library are listed under the user frame that reached them.
 */
#include "report.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PLOT_X    80.0   /* left edge of the plot (labels before it) */
#define PLOT_W    1000.0 /* width of the plot */
#define ROW_H     22.0   /* height of one rank's row */
#define TOP       30.0   /* space above the first row (axis labels) */
#define MAX_MARKS 4000   /* timeline marks drawn per rank */

/* Writes s[0..n) HTML-escaped. */
static void
esc_n(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '&')
            fputs("&amp;", f);
        else if (c == '<')
            fputs("&lt;", f);
        else if (c == '>')
            fputs("&gt;", f);
        else if (c == '"')
            fputs("&quot;", f);
        else if (c == '\'')
            fputs("&#39;", f);
        else if (c == '\n')
            fputc('\n', f); /* kept: source snippets (pre-wrap) */
        else if (c < 0x20 || c == 0x7f)
            fputc('?', f);
        else
            fputc(c, f);
    }
}

/* Writes s HTML-escaped (at most max bytes, then "..."). */
static void
esc(FILE *f, const char *s, size_t max)
{
    size_t n = strnlen(s, max);

    esc_n(f, s, n);
    if (s[n] != '\0')
        fputs("...", f);
}

/* A piece of text: a shortened path in a span with its full text as the
 * tooltip. */
static void
html_piece(void *ctx, const char *s, size_t n, const char *full,
           size_t fulln)
{
    FILE *f = ctx;

    if (full == NULL) {
        esc_n(f, s, n);
        return;
    }
    fputs("<span class=\"path\" title=\"", f);
    esc_n(f, full, fulln);
    fputs("\">", f);
    esc_n(f, s, n);
    fputs("</span>", f);
}

/* Writes s as esc() does, its paths shortened with tooltips. */
static void
esc_paths(const tool_report *r, FILE *f, const char *s, size_t max)
{
    tool_report_pieces(r, s, max, html_piece, f);
}

/* A piece of text inside an SVG <title> (no markup there): shortened. */
static void
title_piece(void *ctx, const char *s, size_t n, const char *full,
            size_t fulln)
{
    (void)full;
    (void)fulln;
    esc_n(ctx, s, n);
}

/* Writes s as esc() does, its paths shortened, for an SVG tooltip. */
static void
esc_title(const tool_report *r, FILE *f, const char *s, size_t max)
{
    tool_report_pieces(r, s, max, title_piece, f);
}

static const char css[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}"
    "h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
    /* The page never scrolls sideways, from 1000 px wide up: a table
     * wider than the page scrolls inside itself, the timeline scales. */
    "table{border-collapse:collapse;margin:8px 0;display:block;"
    "max-width:100%;overflow-x:auto}svg{max-width:100%;height:auto}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;"
    "vertical-align:top}th{background:#f0f0f0}td.n{text-align:right}"
    ".warn{background:#fff0e0;border-left:6px solid #e06000;padding:8px 12px;"
    "margin:6px 0;font-weight:600;white-space:pre-wrap}"
    ".err{background:#fde8e8;border-left:6px solid #c00;padding:4px 12px;"
    "margin:4px 0;font-family:monospace}"
    ".good{background:#e8f6e8;border-left:6px solid #2a2;padding:8px 12px}"
    "tr.div td{background:#fff4e0}.why{font-family:monospace;color:#555;"
    "font-size:12px;white-space:pre-wrap}.st-ok{color:#2a2}.st-died,.st-failed,.st-stopped,"
    ".st-missing,.st-interrupted{color:#c00;font-weight:700}code{font-size:13px}"
    /* Long names wrap at spaces and, only when one word is wider than the
     * page allows, inside it: never one character per line in a table
     * column squeezed to its narrowest. */
    "code,.why,.loc,.warn,.fail{overflow-wrap:break-word;word-break:normal}"
    "#frames td:first-child{min-width:14em}"
    ".path{white-space:nowrap}"
    "tr.user td{background:#f6f6fb;font-weight:600}"
    "tr.internal td:first-child{padding-left:28px}"
    ".tag{font-size:11px;color:#666;font-weight:400}"
    ".legend span{display:inline-block;margin-right:14px}"
    ".sw{display:inline-block;width:12px;height:12px;margin-right:4px;"
    "vertical-align:-2px}.nw{white-space:nowrap}"
    ".loc{font-family:monospace;font-size:12px;color:#555}"
    ".agr{font-size:12px;min-width:18em}.fail{color:#c00;"
    "font-weight:600;white-space:normal}";

static void
html_head(const tool_report *r, const char *title, FILE *f)
{
    char counts[256];
    double span = tool_report_counts(r, counts, sizeof counts);

    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "\n<meta http-equiv=\"Content-Security-Policy\" content=\""
          "default-src 'none'; style-src 'unsafe-inline'; img-src data:\">"
          "\n<link rel=\"icon\" href=\"data:,\">\n<title>ccol report: ",
          f);
    esc(f, title, 300);
    fprintf(f,
            "</title>\n<style>%s</style></head>\n<body>\n"
            "<h1>ccol report: ",
            css);
    esc(f, title, 300);
    fprintf(f, "</h1>\n<p id=\"meta\">%s over %.3f s.</p>\n", counts, span);
    if (r->common != NULL) {
        fputs("<p id=\"paths\">Paths: the user's files relative to <code>",
              f);
        esc(f, r->common, 1000);
        fputs("</code>, packages' files from their package directory, the "
              "standard library's from its directory; hover a path for all "
              "of it.</p>\n", f);
    }
    if (r->t0 > 0) {
        time_t secs = (time_t)(r->t0 / 1000000000);
        struct tm tm;
        char when[64];

        if (gmtime_r(&secs, &tm) != NULL &&
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm) > 0)
            fprintf(f, "<p>Time 0 s of the timeline is %s.</p>\n", when);
    }
}

static void
html_warnings(const tool_report *r, FILE *f)
{
    fputs("<section id=\"warnings\"><h2>Divergence between ranks</h2>\n", f);
    if (r->warnings.n == 0)
        fputs("<p class=\"good\">No divergence between ranks found.</p>\n", f);
    for (size_t i = 0; i < r->warnings.n; i++) {
        fputs("<div class=\"warn\">&#9888; ", f);
        esc_paths(r, f, r->warnings.v[i], 4000);
        fputs("</div>\n", f);
    }
    fputs("</section>\n", f);
    if (r->errors.n == 0)
        return;
    fprintf(f,
            "<section id=\"errors\"><h2>Unreadable trace lines (%zu)"
            "</h2>\n",
            r->errors.n + r->nerrors_dropped);
    for (size_t i = 0; i < r->errors.n; i++) {
        fputs("<div class=\"err\">", f);
        esc(f, r->errors.v[i], 2000);
        fputs("</div>\n", f);
    }
    if (r->nerrors_dropped > 0)
        fprintf(f, "<div class=\"err\">... and %zu more</div>\n",
                r->nerrors_dropped);
    fputs("</section>\n", f);
}

/* The agreement cells of a rank's summary row: how many (and failed),
 * and their total time. */
static void
html_rank_agrees(const tool_rep_rank *k, FILE *f)
{
    fprintf(f, "<td class=\"n\">%llu", (unsigned long long)k->agreements);
    if (k->agree_failed > 0)
        fprintf(f, " <span class=\"fail\">(%llu failed)</span>",
                (unsigned long long)k->agree_failed);
    fprintf(f, "</td><td class=\"n\">%.3f ms</td>",
            (double)k->agree_ns / 1e6);
}

/* Rank i's row of the summary, with the agreement cells if `show`. */
static void
html_summary_row(const tool_report *r, size_t i, bool show, FILE *f)
{
    static const tool_rep_rank none;
    const tool_rep_rank *k = i < r->nranks ? &r->ranks[i] : &none;
    const char *st = tool_report_status(r, i);

    fprintf(f,
            "<tr><td>%zu</td><td class=\"n\">%llu</td>"
            "<td class=\"n\">%llu</td><td class=\"n\">%llu</td>"
            "<td class=\"n\">%llu</td><td class=\"n\">%llu</td>"
            "<td class=\"n\">%llu</td><td class=\"n\">%llu</td>"
            "<td class=\"n\">%llu</td><td class=\"n\">%llu</td>"
            "<td class=\"n\">%llu</td>",
            i, (unsigned long long)k->ncompiles, (unsigned long long)k->nfailed,
            (unsigned long long)k->nexchanges, (unsigned long long)k->nhits,
            (unsigned long long)k->nmisses, (unsigned long long)k->nrestarts,
            (unsigned long long)k->nrecompiles, (unsigned long long)k->nbreaks,
            (unsigned long long)k->neager, (unsigned long long)k->nerrors);
    if (show)
        html_rank_agrees(k, f);
    fprintf(f, "<td class=\"n\">%zu</td><td class=\"st-%s\">%s</td>",
            k->nevents, st, st);
    if (k->nevents > 0) {
        fprintf(f, "<td class=\"nw\">+%.3f s ",
                (double)(k->last_ns - r->t0) / 1e9);
        esc(f, k->last_event, 80);
        fputs("</td>", f);
    } else {
        fputs("<td></td>", f);
    }
    fputs("</tr>\n", f);
}

/* One row per rank; the agreement columns only when a rank made one. */
static void
html_summary(const tool_report *r, FILE *f)
{
    bool show = tool_report_agreements(r) > 0;

    fputs("<section id=\"summary\"><h2>Summary per rank</h2>\n<table>"
          "<tr><th>rank</th><th>compiles</th><th>failed</th><th>exchanges"
          "</th><th>guard hits</th><th>guard misses</th><th>restarts</th>"
          "<th>recompiles</th><th>graph breaks</th><th>eager</th>"
          "<th>errors</th>",
          f);
    if (show)
        fputs("<th>agreements</th><th>agreement time</th>", f);
    fputs("<th>events</th><th>status</th><th>last event</th></tr>\n", f);
    for (size_t i = 0; i < tool_report_world(r); i++)
        html_summary_row(r, i, show, f);
    fputs("</table></section>\n", f);
}

/* ---- the timeline ---- */

/* x coordinate of wall clock t. */
static double
xof(const tool_report *r, int64_t t)
{
    double span = r->t1 > r->t0 ? (double)(r->t1 - r->t0) : 1.0;
    double x = (double)(t - r->t0) / span;

    if (x < 0)
        x = 0;
    if (x > 1)
        x = 1;
    return PLOT_X + x * PLOT_W;
}

/* Mark colours, indexed by TOOL_MARK_*. */
static const char *const mark_color[TOOL_MARK_NKINDS] = {
    "#f0a000", "#50b050", "#d00000", "#8040c0", "#c04080",
    "#000000", "#805020", "#ff0000", "#00a0a0"
};
static const char *const mark_name[TOOL_MARK_NKINDS] = {
    "exchange",       "guard hit", "guard miss",
    "restart",        "recompile", "graph break",
    "eager fallback", "error",     "collective or agreement"
};

static void
svg_axis(const tool_report *r, FILE *f, double h)
{
    double span = r->t1 > r->t0 ? (double)(r->t1 - r->t0) / 1e9 : 0.0;
    double step = 1e-6;

    while (span / step > 10)
        step *= (span / step > 50) ? 10 : 2;
    for (double s = 0; span > 0 && s <= span + 1e-12; s += step) {
        double x = PLOT_X + s / span * PLOT_W;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                "stroke=\"#ddd\"/><text x=\"%.1f\" y=\"%.1f\" "
                "font-size=\"10\" text-anchor=\"middle\">%.4g s</text>\n",
                x, TOP - 4, x, h, x, TOP - 8, s);
    }
}

static void
svg_compiles(const tool_report *r, const tool_rep_rank *k, double y, FILE *f)
{
    for (size_t c = 0; c < k->ncomp; c++) {
        const tool_rep_compile *cp = &k->compiles[c];
        int64_t end = cp->end_ns ? cp->end_ns : k->last_ns;
        double x0 = xof(r, cp->begin_ns), x1 = xof(r, end);
        const char *fill = cp->state == 1   ? "#4a7fd0"
                           : cp->state == 2 ? "#d04040"
                                            : "#a0a0a0";

        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                "height=\"12\" fill=\"%s\" opacity=\"0.75\"><title>compile ",
                x0, y + 5, x1 - x0 < 1.5 ? 1.5 : x1 - x0, fill);
        esc_title(r, f, cp->frame, 200);
        fprintf(f, " (compile %llu) %s%s%.3f ms", (unsigned long long)cp->index,
                cp->state == 1   ? "ok"
                : cp->state == 2 ? "failed"
                                 : "open",
                ", ", (double)(end - cp->begin_ns) / 1e6);
        if (cp->reason) {
            fputs(": ", f);
            esc_title(r, f, cp->reason, 300);
        }
        if (cp->nagrees > 0)
            fprintf(f, "; %zu agreement%s, %.3f ms", cp->nagrees,
                    cp->nagrees == 1 ? "" : "s", (double)cp->agree_ns / 1e6);
        fputs("</title></rect>\n", f);
    }
}

static void
svg_marks(const tool_report *r, const tool_rep_rank *k, double y, FILE *f)
{
    for (size_t m = 0; m < k->nmarks && m < MAX_MARKS; m++) {
        const tool_rep_mark *mk = &k->marks[m];
        double x0 = xof(r, mk->t_ns), x1 = xof(r, mk->t_ns + mk->dur_ns);
        const char *col = mark_color[mk->kind];

        if (mk->kind == TOOL_MARK_EXCHANGE ||
            mk->kind == TOOL_MARK_COLLECTIVE)
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                    "height=\"6\" fill=\"%s\">",
                    x0, y + 8, x1 - x0 < 2 ? 2 : x1 - x0, col);
        else if (mk->kind == TOOL_MARK_ERROR)
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"5\" fill=\"%s\">",
                    x0, y + 11, col);
        else
            fprintf(f, "<path d=\"M%.1f %.1f l-4 -6 h8 z\" fill=\"%s\">", x0,
                    y + 8, col);
        fputs("<title>", f);
        esc_title(r, f, mk->label ? mk->label : mark_name[mk->kind], 400);
        fputs(mk->kind == TOOL_MARK_EXCHANGE ||
                      mk->kind == TOOL_MARK_COLLECTIVE
                  ? "</title></rect>\n"
              : mk->kind == TOOL_MARK_ERROR ? "</title></circle>\n"
                                             : "</title></path>\n",
              f);
    }
}

static void
html_timeline(const tool_report *r, FILE *f)
{
    size_t n = tool_report_world(r);
    double h = TOP + ROW_H * (double)n + 10;

    fputs("<section id=\"timeline\"><h2>Compile timeline</h2>\n"
          "<p class=\"legend\"><span><i class=\"sw\" style=\"background:"
          "#4a7fd0\"></i>compile</span><span><i class=\"sw\" style=\""
          "background:#d04040\"></i>failed compile</span>",
          f);
    for (int k = 0; k < TOOL_MARK_NKINDS; k++)
        fprintf(f,
                "<span><i class=\"sw\" style=\"background:%s\"></i>%s"
                "</span>",
                mark_color[k], mark_name[k]);
    fprintf(f,
            "</p>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
            "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
            "font-family=\"sans-serif\">\n",
            PLOT_X + PLOT_W + 20, h, PLOT_X + PLOT_W + 20, h);
    svg_axis(r, f, h);
    for (size_t i = 0; i < n; i++) {
        double y = TOP + ROW_H * (double)i;
        const char *st = tool_report_status(r, i);
        bool bad = strcmp(st, "ok") != 0 && strcmp(st, "running") != 0;

        fprintf(f,
                "<text x=\"4\" y=\"%.1f\" font-size=\"12\" fill=\"%s\">"
                "rank %zu</text><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                "y2=\"%.1f\" stroke=\"#eee\"/>\n",
                y + 15, bad ? "#c00" : "#222", i, PLOT_X, y + 11,
                PLOT_X + PLOT_W, y + 11);
        if (i >= r->nranks || !r->ranks[i].present)
            continue;
        svg_compiles(r, &r->ranks[i], y, f);
        svg_marks(r, &r->ranks[i], y, f);
    }
    fputs("</svg></section>\n", f);
}

/* ---- frames ---- */

/* One agreement of a row: "site #n: B, ms", how many of the row's ranks
 * made it when not all, and the error of a failed one. */
static void
html_ragree(const tool_report *r, const tool_rep_row *row,
            const tool_rep_ragree *g, FILE *f)
{
    fputs("<div class=\"agr\"><code>", f);
    esc(f, g->site, 200);
    fprintf(f, " #%lld</code> %lld B, %.3f ms", (long long)g->aseq,
            (long long)g->bytes, (double)g->dur_ns / 1e6);
    if (g->n < row->n)
        fprintf(f, " (%zu of %zu ranks)", g->n, row->n);
    if (g->nfailed > 0) {
        fputs("<div class=\"fail\">FAILED for ", f);
        esc_paths(r, f, g->frame, 300);
        if (g->nfailed < row->n)
            fprintf(f, " on %zu of %zu ranks", g->nfailed, row->n);
        fputs(": ", f);
        esc(f, g->error ? g->error : "", 1000);
        fputs("</div>", f);
    }
    fputs("</div>", f);
}

/* The agreements cell of a frames row, with the row's total first. */
static void
html_row_agrees(const tool_report *r, const tool_rep_row *row, FILE *f)
{
    fputs("<td>", f);
    if (row->nagrees > 0)
        fprintf(f, "<div class=\"agr\"><b>%zu, %.3f ms</b> on the slowest "
                   "rank</div>",
                row->nagrees + row->agrees_more,
                (double)row->agree_ns / 1e6);
    for (size_t k = 0; k < row->nagrees; k++)
        html_ragree(r, row, &row->agrees[k], f);
    if (row->agrees_more > 0)
        fprintf(f, "<div class=\"agr\">... and %zu more</div>",
                row->agrees_more);
    fputs("</td>", f);
}

/* Writes each of l's first 50 strings and a line break. */
static void
html_lines(const tool_strs *l, FILE *f)
{
    for (size_t k = 0; k < l->n && k < 50; k++) {
        esc(f, l->v[k], 600);
        fputs("<br>", f);
    }
}

/* Why the ranks of a row compiled: the reason when they agree, else each
 * reason after its ranks. */
static void
html_why(const tool_report *r, const tool_rep_row *row, FILE *f)
{
    bool name = tool_report_why_ranks(row);
    char who[512];

    for (size_t k = 0; k < row->nreasons; k++) {
        if (name) {
            tool_report_ranks(who, sizeof who, row->reasons[k].ranks,
                              row->reasons[k].n);
            fprintf(f, "<b>%s:</b> ", who);
        }
        esc_paths(r, f, row->reasons[k].text, 600);
        fputs("<br>", f);
    }
}

/* The header row of the frames of torch, ccol and the standard library
 * that one user frame reached. */
static void
html_user_row(const tool_report *r, const tool_rep_row *row, bool show,
              FILE *f)
{
    fprintf(f, "<tr class=\"user\"><td colspan=\"%d\"><code>",
            show ? 9 : 8);
    if (row->user != NULL)
        esc_paths(r, f, row->user, 300);
    else
        fputs("(a user frame the trace does not name)", f);
    fputs("</code> called into:</td></tr>\n", f);
}

/* One row of the frames table, with the agreements cell if `show`. */
static void
html_frame_row(const tool_report *r, const tool_rep_row *row, bool show,
               FILE *f)
{
    char who[512];

    tool_report_ranks(who, sizeof who, row->ranks, row->n);
    fprintf(f, "<tr class=\"%s%s\"><td><code>",
            row->internal ? "internal" : "frame",
            row->diverged ? " div" : "");
    esc_paths(r, f, row->frame, 300);
    fputs("</code>", f);
    if (row->internal)
        fputs(" <span class=\"tag\">(not the user's code)</span>", f);
    if (row->where != NULL) {
        fputs("<br><span class=\"loc\">", f);
        esc_paths(r, f, row->where, 300);
        fputs("</span>", f);
    }
    fprintf(f,
            "</td><td class=\"n\">%llu</td><td>%s%s</td>"
            "<td>%s</td><td class=\"why\">",
            (unsigned long long)row->index, row->diverged ? "&#9888; " : "",
            who, tool_report_state(row->state));
    html_why(r, row, f);
    fputs("</td><td><code>", f);
    esc(f, row->decisions, 4000);
    fputs("</code></td><td class=\"why\">", f);
    html_lines(&row->changes, f);
    fputs("</td><td class=\"why\">", f);
    html_lines(&row->why, f);
    fputs("</td>", f);
    if (show)
        html_row_agrees(r, row, f);
    fputs("</tr>\n", f);
}

/* The frames table; its agreements column only when a rank made one. */
static void
html_frames(const tool_report *r, FILE *f)
{
    tool_rep_row *rows;
    size_t n = tool_report_rows(r, &rows), *order;
    bool show = tool_report_agreements(r) > 0;
    const tool_rep_row *prev = NULL;

    fputs("<section id=\"frames\"><h2>Frames and decisions</h2>\n"
          "<p>The frames of torch, ccol and the standard library are listed "
          "under the user frame that reached them; where the ranks compiled "
          "for different reasons, each reason follows its ranks.</p>\n"
          "<table>"
          "<tr><th>frame</th><th>compile</th><th>ranks</th><th>state</th>"
          "<th>why it compiled</th>"
          "<th>dynamic decisions</th><th>state changes</th>"
          "<th>witnesses</th>",
          f);
    if (show)
        fputs("<th>agreements (bytes and time: the largest of the row's "
              "ranks)</th>",
              f);
    fputs("</tr>\n", f);
    order = malloc((n > 0 ? n : 1) * sizeof *order);
    if (order != NULL)
        tool_report_order(rows, n, order);
    for (size_t k = 0; order != NULL && k < n; k++) {
        const tool_rep_row *row = &rows[order[k]];
        if (row->internal &&
            (prev == NULL || !prev->internal ||
             !tool_report_same_user(prev, row)))
            html_user_row(r, row, show, f);
        html_frame_row(r, row, show, f);
        prev = row;
    }
    fputs("</table></section>\n", f);
    free(order);
    tool_report_rows_free(rows, n);
}

/* One row of the outside-a-compile table. */
static void
html_site(const tool_report *r, const tool_rep_site *s, FILE *f)
{
    char who[512];

    tool_report_ranks(who, sizeof who, s->ranks, s->n);
    fputs("<tr><td><code>", f);
    esc(f, s->site, 200);
    fprintf(f, "</code></td><td>%s</td><td class=\"n\">", who);
    if (s->least != s->most)
        fprintf(f, "%zu-", s->least);
    fprintf(f,
            "%zu</td><td class=\"n\">%.3f ms</td><td class=\"n\">"
            "%.3f ms</td><td class=\"why\">",
            s->most, (double)s->total_ns / 1e6, (double)s->median_ns / 1e6);
    for (size_t k = 0; k < s->graphs.n; k++) {
        esc_paths(r, f, s->graphs.v[k], 300);
        fputs("<br>", f);
    }
    fprintf(f, "</td><td class=\"n\">%zu</td><td>", s->nfailed);
    for (size_t k = 0; k < s->errors.n; k++) {
        fputs("<div class=\"fail\">", f);
        esc_paths(r, f, s->errors.v[k], 1000);
        fputs("</div>", f);
    }
    fputs("</td></tr>\n", f);
}

/* Agreements no compile holds (e.g. Inductor's backward graphs, compiled
 * after Dynamo's compile ended), by site; nothing when there are none. */
static void
html_outside(const tool_report *r, FILE *f)
{
    tool_rep_site *sites;
    size_t more, n = tool_report_outside(r, &sites, &more);
    uint64_t unlisted = tool_report_agrees_unlisted(r);

    if (n > 0)
        fputs("<section id=\"outside\"><h2>Agreements outside a compile"
              "</h2>\n<table><tr><th>site</th><th>ranks</th>"
              "<th>per rank</th><th>total (largest of one rank)</th>"
              "<th>median</th><th>graphs</th><th>failed</th>"
              "<th>first failures</th></tr>\n",
              f);
    for (size_t i = 0; i < n; i++)
        html_site(r, &sites[i], f);
    if (n > 0)
        fputs("</table>\n", f);
    if (more > 0)
        fprintf(f, "<p>... and %zu more at other sites.</p>\n", more);
    if (n > 0)
        fputs("</section>\n", f);
    if (unlisted > 0)
        fprintf(f,
                "<p>%llu agreements not listed (a rank made more than %d; "
                "the summary counts them).</p>\n",
                (unsigned long long)unlisted, TOOL_REPORT_MAX_AGREES);
    tool_report_sites_free(sites, n);
}

/* ccol.torch's compile once, one row per graph; nothing when unused. */
static void
html_once(const tool_report *r, FILE *f)
{
    tool_rep_oncerow *rows;
    size_t more, n = tool_report_oncerows(r, &rows, &more);

    if (n > 0)
        fputs("<section id=\"once\"><h2>Compile once</h2>\n<table><tr>"
              "<th>graph</th><th>owner</th><th>bytes</th>"
              "<th>what the ranks did</th></tr>\n", f);
    for (size_t i = 0; i < n; i++) {
        char *says = tool_report_once_says(&rows[i]);
        bool alone = rows[i].n[TOOL_ONCE_FALLBACK] > 0 ||
                     rows[i].n[TOOL_ONCE_DIVERGENT] > 0;

        fputs("<tr><td><code>", f);
        esc_paths(r, f, rows[i].frame, 300);
        fputs("</code></td><td class=\"n\">", f);
        if (rows[i].owner >= 0)
            fprintf(f, "%lld", (long long)rows[i].owner);
        fprintf(f, "</td><td class=\"n\">%lld</td><td%s>",
                (long long)rows[i].bytes, alone ? " class=\"fail\"" : "");
        esc_paths(r, f, says != NULL ? says : "", 5000);
        fputs("</td></tr>\n", f);
        free(says);
    }
    if (n > 0)
        fputs("</table>\n", f);
    if (more > 0)
        fprintf(f, "<p>... and %zu events of other graphs.</p>\n", more);
    if (n > 0)
        fputs("</section>\n", f);
    tool_report_oncerows_free(rows, n);
}

int
tool_report_html(const tool_report *r, const char *title, FILE *f)
{
    html_head(r, title, f);
    html_warnings(r, f);
    html_timeline(r, f);
    html_summary(r, f);
    html_frames(r, f);
    html_outside(r, f);
    html_once(r, f);
    fputs("<footer><p>Generated by ccol report from trace format version 1 "
          "(docs/trace-format.md).</p></footer>\n</body></html>\n",
          f);
    return ferror(f) ? -1 : 0;
}
