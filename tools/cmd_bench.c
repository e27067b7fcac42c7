/*
 * cmd_bench.c - `ccol bench <suite>`: dispatches to the benchmark suites in
 * bench/. Each suite prints medians and ratios against a baseline measured
 * in the same run (these machines are noisy; absolute numbers move).
 */
#include "tools.h"

#include "bench.h"

#include <stdio.h>
#include <string.h>

static const tool_cmd suites[] = {
    { "comm", ccol_bench_comm, "latency of each communicator operation" },
    { "sync", ccol_bench_sync, "compile exchange: join-reduce vs all-gather" },
    { "soak", ccol_bench_soak, "10,000 exchanges and guards: memory stays flat" },
    { "faults", ccol_bench_faults, "random faults in real jobs: named errors" },
    { "jit", ccol_bench_jit, "cost of a cached frame call, with and without guards" },
    { "hier", ccol_bench_hier, "tcp+shm across hosts against flat tcp" },
    { "scale", ccol_bench_scale, "exchange to 1024 ranks, modelled to 10^5" },
};

static void
usage(FILE *f)
{
    fprintf(f, "usage: ccol bench <suite> [options]\n\nsuites:\n");
    for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++)
        fprintf(f, "  %-6s %s\n", suites[i].name, suites[i].summary);
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
