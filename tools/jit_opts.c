/*
 * jit_opts.c - the collective modes of `ccol jit` by name, and the
 * environment a rank of the job is given (see jit_opts.h).
 */
#include "jit_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const mode_names[] = { "off", "compile", "lockstep" };

const char *
jit_mode_name(int mode)
{
    return mode >= 0 && mode <= 2 ? mode_names[mode] : "default";
}

int
jit_mode_parse(const char *s)
{
    for (int i = 0; i <= 2; i++)
        if (strcmp(s, mode_names[i]) == 0)
            return i;
    return -1;
}

int
jit_mode_resolve(int mode, int world)
{
    if (mode != JIT_MODE_DEFAULT)
        return mode;
    return world > 1 ? CCOL_SYNC_LOCKSTEP : CCOL_SYNC_OFF;
}

static void
set_env_double(const char *name, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.17g", v);
    setenv(name, buf, 1);
}

void
jit_rank_env(const jit_opts *o)
{
    if (o->timeout_s > 0)
        set_env_double("CCOL_TIMEOUT", o->timeout_s);
    if (o->trace_dir != NULL)
        setenv("CCOL_TRACE", o->trace_dir, 1);
}
