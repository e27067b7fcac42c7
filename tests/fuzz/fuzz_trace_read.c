/*
 * fuzz_trace_read.c - libFuzzer harness of the trace reader and aggregator
 * of `ccol report` (tools/report_*.c, included here because the tools are
 * not a library). The input is split at NUL bytes into up to 8 rank files;
 * any bytes must be read, analyzed and rendered as text and HTML without a
 * crash, and every problem must be an error naming its file.
 */
#include "report_analyze.c"
#include "report_html.c"
#include "report_once.c"
#include "report_paths.c"
#include "report_read.c"
#include "report_text.c"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tool_report r = { 0 };
    const char *p = (const char *)data, *end = p + size;
    char name[32];
    FILE *sink;
    int k = 0;

    while (p <= end && k < 8) {
        const char *z = memchr(p, '\0', (size_t)(end - p));
        size_t n = z != NULL ? (size_t)(z - p) : (size_t)(end - p);

        snprintf(name, sizeof name, "rank-%d.jsonl", k);
        /* Odd files accept any rank, as a file without a rank name. */
        tool_report_feed(&r, name, k % 2 ? -1 : k, p, n);
        k++;
        p += n + 1;
    }
    tool_report_analyze(&r);
    for (size_t i = 0; i < r.errors.n; i++)
        if (strncmp(r.errors.v[i], "rank-", 5) != 0)
            abort(); /* every error names its file */
    if (r.nranks > TOOL_REPORT_MAX_RANKS)
        abort();
    sink = fopen("/dev/null", "w");
    if (sink != NULL) {
        tool_report_text(&r, sink);
        tool_report_html(&r, "fuzz", sink);
        fclose(sink);
    }
    tool_report_free(&r);
    return 0;
}
