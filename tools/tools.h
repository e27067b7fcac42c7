/*
 * tools.h - the subcommands of the `ccol` command. Each lives in its own
 * file (cmd_<name>.c) and takes argv with argv[0] being the subcommand name.
 * Exit status 0 means success; usage errors exit 2.
 */
#ifndef CCOL_TOOLS_H
#define CCOL_TOOLS_H

typedef struct tool_cmd {
    const char *name;                   /* subcommand word */
    int (*main)(int argc, char **argv); /* its entry point */
    const char *summary;                /* one line for `ccol help` */
} tool_cmd;

int cmd_demo(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_dyn(int argc, char **argv);
int cmd_jit(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_report(int argc, char **argv);

#endif /* CCOL_TOOLS_H */
