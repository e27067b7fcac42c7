/*
 * schedule.h - the call schedule of `ccol jit` (docs/design.md, "ccol
 * jit"): which function every rank calls, in order, with which arguments.
 *
 *   {"calls": [
 *     {"fn": "f", "args": [ARG, ...]},                  same on every rank
 *     {"fn": "f", "per_rank": [[ARG, ...], [ARG, ...]]}, rank r's arguments
 *     {"fn": ["f", "g"], "args": [...]}                  a name per rank
 *   ],
 *   "domains": [[0, 1], [2, 3]]}    optional: ranks that agree among
 *                                   themselves (a pipeline's stages)
 *   ARG: a number, true/false/null, {"tensor": [d0, ...], "stride": [...],
 *        "mark_dynamic": [dims], "mark_static": [dims]}, {"list": [ARG, ...]}
 *
 * The file is untrusted: every malformed part is an error naming the call,
 * the argument and what was expected.
 */
#ifndef CCOL_SCHEDULE_H
#define CCOL_SCHEDULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SCHED_MAX_NDIM 8          /* tensor dimensions */
#define SCHED_MAX_NUMEL (1 << 24) /* elements of one tensor argument */
#define SCHED_MAX_CALLS 100000    /* calls in a schedule */
#define SCHED_MAX_ITEMS 4096      /* arguments, list items, ranks */
#define SCHED_MAX_DEPTH 16        /* nesting of lists */
#define SCHED_MAX_TOTAL_ARGS (1 << 20) /* arguments + list items in all */
#define SCHED_MAX_CALL_NUMEL (1 << 26) /* tensor storage of one call */

typedef enum sched_kind {
    SARG_NONE = 0,
    SARG_BOOL,
    SARG_INT,
    SARG_FLOAT,
    SARG_TENSOR,
    SARG_LIST
} sched_kind;

typedef struct sched_arg {
    sched_kind kind;
    bool b;                          /* SARG_BOOL */
    int64_t i;                       /* SARG_INT */
    double f;                        /* SARG_FLOAT */
    int ndim;                        /* SARG_TENSOR: number of dims */
    int64_t sizes[SCHED_MAX_NDIM];   /* its sizes */
    int64_t strides[SCHED_MAX_NDIM]; /* its strides (if has_stride) */
    bool has_stride;                 /* strides given, else contiguous */
    uint32_t mark_dynamic;           /* bit d: mark_dynamic(d) */
    uint32_t mark_static;            /* bit d: mark_static(d) */
    struct sched_arg *items;         /* SARG_LIST: its items */
    size_t nitems;
} sched_arg;

typedef struct sched_args {
    sched_arg *v; /* arguments in order */
    size_t n;
} sched_args;

typedef struct sched_call {
    char **fn;           /* one name, or one per rank */
    size_t nfn;
    sched_args common;   /* used when per_rank is absent */
    sched_args *per_rank; /* argument lists per rank, or NULL */
    size_t nranks;
} sched_call;

/* Ranks that agree among themselves: their compiles, guards and the
 * program's collectives run over a sub-communicator of theirs. */
typedef struct sched_domain {
    int *ranks; /* increasing */
    size_t n;
} sched_domain;

typedef struct schedule {
    sched_call *calls;
    size_t ncalls;
    sched_domain *domains; /* NULL: the whole job is one domain */
    size_t ndomains;
} schedule;

/* Parses schedule text. On failure returns -1 with a message in err such
 * as "call 2: argument 1: \"tensor\" must be a list of sizes". */
int sched_parse(const char *text, size_t len, schedule **out, char *err,
                size_t errlen);
/* Reads and parses a file; errors name the file. */
int sched_load(const char *path, schedule **out, char *err, size_t errlen);
void sched_free(schedule *s);

/* Rank `rank` of `world`'s function name and arguments for call k. Fails
 * (message in err) when the schedule does not cover that rank. */
int sched_for_rank(const schedule *s, size_t k, int rank, int world,
                   const char **fn, const sched_args **args, char *err,
                   size_t errlen);

/* Checks that every call covers `world` ranks (a name per rank and
 * per_rank lists have exactly `world` entries). Fails naming the first call
 * that does not. */
int sched_check(const schedule *s, int world, char *err, size_t errlen);
/* The number of ranks the schedule is written for (the length of its
 * first "per_rank" or list of "fn", else the ranks of its domains), or 0
 * when it fits any number. */
int sched_world(const schedule *s);
/* The domain holding `rank` (its index, and its ranks in *d), or -1 when
 * the schedule has no domains. sched_check made sure every rank of the
 * world is in exactly one. */
int sched_domain_of(const schedule *s, int rank, const sched_domain **d);

/* Number of storage elements a tensor argument needs (its strides may
 * skip or overlap elements). */
size_t sched_storage(const sched_arg *a);
/* The deterministic value of storage element `i` of argument `pos` of
 * call `k` on rank `rank`: small values, so sums are exact enough. */
float sched_value(int rank, size_t k, size_t pos, size_t i);

#endif /* CCOL_SCHEDULE_H */
