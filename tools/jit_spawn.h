/*
 * jit_spawn.h - the local ranks of a `ccol jit -n N` job (jit_spawn.c):
 * one forked process per rank over tcp, each rank's summary entry sent to
 * the parent through a pipe, so a rank that crashes or is killed cannot
 * take the summary down.
 */
#ifndef CCOL_JIT_SPAWN_H
#define CCOL_JIT_SPAWN_H

#include "jit_opts.h"

#include <jansson.h>

/* Starts o->nranks ranks as processes and collects their entries (every
 * entries[r] set on success). */
int jit_spawn_run(const jit_opts *o, json_t **entries, char *err,
                  size_t errlen);

#endif /* CCOL_JIT_SPAWN_H */
