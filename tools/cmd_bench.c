/*
 * cmd_bench.c - `ccol bench <suite>`: dispatches to the benchmark suites in
 * bench/. Each suite prints medians and ratios against a baseline measured
 * in the same run (these machines are noisy; absolute numbers move).
 * `ccol bench soak` reads CCOL_TIMEOUT here, as every entry point does
 * (docs/environment.md).
 */
#include "tools.h"

#include "bench.h"
#include "util.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The largest --timeout `ccol bench soak` takes (bench_soak.c), seconds. */
#define SOAK_MAX_TIMEOUT_S 86400.0

/*
 * Checks CCOL_TIMEOUT for `ccol bench soak`, with libccol's words when it
 * is malformed (set and not a plain decimal number of seconds in range),
 * or naming the soak's own limit when it is above it. Returns its text
 * (the environment's), NULL when it is unset; sets *bad after refusing it
 * on stderr.
 */
static char *
soak_env_timeout(bool *bad)
{
    char *s = getenv("CCOL_TIMEOUT");
    double v;

    *bad = false;
    if (s == NULL)
        return NULL;
    if (tool_parse_seconds(s, TOOL_MAX_SECONDS, &v) != 0) {
        fprintf(stderr, "ccol bench soak: CCOL_TIMEOUT='%.64s' is not a "
                "plain decimal number of seconds in [%g, %.0f] (like 30 or "
                "2.5)\n", s, TOOL_MIN_SECONDS, TOOL_MAX_SECONDS);
        *bad = true;
    } else if (v > SOAK_MAX_TIMEOUT_S) {
        fprintf(stderr, "ccol bench soak: CCOL_TIMEOUT='%.64s' is more "
                "than the soak's limit of %.0f s (as for --timeout)\n", s,
                SOAK_MAX_TIMEOUT_S);
        *bad = true;
    }
    return s;
}

/*
 * `ccol bench soak` with CCOL_TIMEOUT honoured: the soak gives its ranks
 * an explicit deadline (--timeout, else 60 s), so libccol never reads the
 * variable there; it is read here instead and passed on as --timeout,
 * unless one is given (which wins, as `ccol jit --timeout` does). A
 * malformed value is refused, exit status 2, before any rank starts.
 */
static int
bench_soak(int argc, char **argv)
{
    static char opt[] = "--timeout";
    bool bad;
    char *t = soak_env_timeout(&bad), **args;
    int rc;

    if (bad)
        return 2;
    /* Every option of the soak takes a value: options are at odd places. */
    for (int i = 1; t != NULL && i < argc; i += 2)
        if (strcmp(argv[i], opt) == 0)
            t = NULL;
    if (t == NULL)
        return ccol_bench_soak(argc, argv);
    args = malloc(((size_t)argc + 3) * sizeof *args);
    if (args == NULL) {
        fprintf(stderr, "ccol bench soak: out of memory\n");
        return 1;
    }
    memcpy(args, argv, (size_t)argc * sizeof *args);
    args[argc] = opt;
    args[argc + 1] = t;
    args[argc + 2] = NULL;
    rc = ccol_bench_soak(argc + 2, args);
    free(args);
    return rc;
}

static const tool_cmd suites[] = {
    { "comm", ccol_bench_comm, "latency of each communicator operation" },
    { "sync", ccol_bench_sync, "compile exchange: join-reduce vs all-gather" },
    { "soak", bench_soak, "10,000 exchanges and guards: memory stays flat" },
    { "faults", ccol_bench_faults, "random faults in real jobs: named errors" },
    { "jit", ccol_bench_jit, "cost of a cached frame call, with and without guards" },
    { "hier", ccol_bench_hier, "tcp+shm across hosts against flat tcp" },
    { "scale", ccol_bench_scale, "exchange to 1024 ranks, modelled to 10^5" },
    { "buckets", ccol_bench_buckets, "shape buckets agreed from a length trace" },
};

static void
usage(FILE *f)
{
    fprintf(f, "usage: ccol bench <suite> [options]\n\nsuites:\n");
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        fprintf(f, "  %-7s %s\n", suites[i].name, suites[i].summary);
}

int
cmd_bench(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        if (strcmp(argv[1], suites[i].name) == 0)
            return suites[i].main(argc - 1, argv + 1);
    fprintf(stderr, "ccol bench: unknown suite '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
