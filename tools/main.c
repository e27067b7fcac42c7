/*
 * main.c - the `ccol` command: dispatches to a subcommand.
 */
#include "store.h"
#include "tools.h"

#include "ccol.h"

#include <stdio.h>
#include <string.h>

static int cmd_version(int argc, char **argv);

static const tool_cmd commands[] = {
    { "demo", cmd_demo, "run the demonstration job on local ranks" },
    { "run", cmd_run, "start N local ranks of a command (like torchrun)" },
    { "jit", cmd_jit, "run a .tl program's schedule through the JIT" },
    { "dyn", cmd_dyn, "merge per-rank observation files (lattice)" },
    { "report", cmd_report, "HTML or text report of a trace directory" },
    { "store", cmd_store, "list or check a job's compile store" },
    { "bench", cmd_bench, "benchmarks (comm, sync, ...)" },
    { "version", cmd_version, "print library and protocol versions" },
};

static int
cmd_version(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("ccol %s (protocol %u)\n", ccol_version_string(),
           ccol_protocol_version());
    return 0;
}

static void
usage(FILE *f)
{
    fprintf(f, "usage: ccol <command> [options]\n"
               "       ccol --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun `ccol <command> --help` for a command's options.\n");
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)
        return cmd_version(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].main(argc - 1, argv + 1);
    fprintf(stderr, "ccol: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
