/*
 * fuzz_schedule.c - libFuzzer harness of the `ccol jit` schedule loader:
 * any bytes must give a schedule or a clear error, never a crash, and a
 * parsed schedule must answer every per-rank question consistently.
 *
 * The replay build links only libccol and jansson, so the loader is
 * compiled into this harness directly.
 */
#include "schedule.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Walks an argument like the runner does: storage of every tensor, and
 * the deterministic values at its ends. */
static void
walk(const sched_arg *a, size_t k, size_t pos)
{
    if (a->kind == SARG_TENSOR) {
        size_t n = sched_storage(a);
        if (n > SCHED_MAX_NUMEL)
            abort();
        if (n > 0 && (sched_value(0, k, pos, n - 1) > 2.0f ||
                      sched_value(3, k, pos, 0) < -2.0f))
            abort();
    }
    for (size_t i = 0; a->kind == SARG_LIST && i < a->nitems; i++)
        walk(&a->items[i], k, pos);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    schedule *s = NULL;
    char err[512];

    err[0] = '\0';
    if (sched_parse((const char *)data, size, &s, err, sizeof err) != 0) {
        if (s != NULL || err[0] == '\0')
            abort(); /* a failure must leave nothing and say why */
        return 0;
    }
    for (int world = 1; world <= 4; world++) {
        int covered = sched_check(s, world, err, sizeof err) == 0;
        for (size_t k = 0; k < s->ncalls; k++) {
            for (int r = 0; r < world; r++) {
                const char *fn;
                const sched_args *args;
                int rc = sched_for_rank(s, k, r, world, &fn, &args, err,
                                        sizeof err);
                if (covered && rc != 0)
                    abort();
                for (size_t i = 0; rc == 0 && i < args->n; i++)
                    walk(&args->v[i], k, i);
            }
        }
    }
    sched_free(s);
    return 0;
}
