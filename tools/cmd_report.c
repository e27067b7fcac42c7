/*
 * cmd_report.c - `ccol report DIR [-o report.html] [--text] [--check]`:
 * reads the trace files a job wrote with CCOL_TRACE=DIR (or ccol jit
 * --trace DIR) and writes a self-contained HTML report and/or prints the
 * summary and warnings. Unreadable lines are reported (file:line) on
 * stderr and in the report; everything else is still reported.
 * Exit status: 0 ok, 1 unreadable lines or no trace at all, 2 usage,
 * 3 with --check when ranks diverge.
 */
#include "report.h"
#include "tools.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void
usage(FILE *f)
{
    fprintf(f, "usage: ccol report DIR [-o FILE.html] [--text] [--title T] "
               "[--check]\n"
               "  DIR          a trace directory (rank-<r>.jsonl files)\n"
               "  -o FILE      write a self-contained HTML report to FILE\n"
               "  --text       print the summary and warnings (the default "
               "without -o)\n"
               "  --title T    title of the HTML page (default: DIR)\n"
               "  --check      exit with status 3 when ranks diverge\n");
}

/* Parsed command line. */
typedef struct opts {
    const char *dir;   /* the trace directory */
    const char *out;   /* HTML output, NULL for none */
    const char *title; /* page title */
    bool text;         /* print text */
    bool check;        /* exit 3 on warnings */
} opts;

/* Returns -1 to continue, else an exit status. */
static int
parse(int argc, char **argv, opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--title") == 0) &&
                   i + 1 < argc) {
            *(a[1] == 'o' ? &o->out : &o->title) = argv[++i];
        } else if (strcmp(a, "--text") == 0) {
            o->text = true;
        } else if (strcmp(a, "--check") == 0) {
            o->check = true;
        } else if (a[0] == '-' || o->dir != NULL) {
            fprintf(stderr, "ccol report: unexpected argument '%s'%s\n", a,
                    a[0] == '-' ? " (or missing value)" : "");
            usage(stderr);
            return 2;
        } else {
            o->dir = a;
        }
    }
    if (o->dir == NULL) {
        fprintf(stderr, "ccol report: missing the trace directory\n");
        usage(stderr);
        return 2;
    }
    if (o->out == NULL)
        o->text = true;
    return -1;
}

/* Writes the HTML report to o->out; 0 or 1 (with a message). */
static int
write_html(const tool_report *r, const opts *o)
{
    FILE *f = fopen(o->out, "w");
    int bad;

    if (f == NULL) {
        fprintf(stderr, "ccol report: cannot write %s: %s\n", o->out,
                strerror(errno));
        return 1;
    }
    bad = tool_report_html(r, o->title ? o->title : o->dir, f);
    if (fclose(f) != 0 || bad) {
        fprintf(stderr, "ccol report: error writing %s\n", o->out);
        return 1;
    }
    fprintf(stderr, "ccol report: wrote %s\n", o->out);
    return 0;
}

int
cmd_report(int argc, char **argv)
{
    tool_report r = { 0 };
    opts o = { 0 };
    int st = parse(argc, argv, &o);

    if (st >= 0)
        return st;
    if (tool_report_read_dir(&r, o.dir) != 0) {
        for (size_t i = 0; i < r.errors.n; i++)
            fprintf(stderr, "ccol report: %s\n", r.errors.v[i]);
        tool_report_free(&r);
        return 1;
    }
    tool_report_analyze(&r);
    for (size_t i = 0; i < r.errors.n; i++)
        fprintf(stderr, "ccol report: error: %s\n", r.errors.v[i]);
    st = r.errors.n > 0 ? 1 : 0;
    if (o.out != NULL && write_html(&r, &o) != 0)
        st = 1;
    if (o.text)
        tool_report_text(&r, stdout);
    if (st == 0 && o.check && r.warnings.n > 0)
        st = 3;
    tool_report_free(&r);
    return st;
}
