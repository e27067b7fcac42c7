/*
 * bench.h - benchmark suites run by `ccol bench <suite>`, and the small
 * statistics helpers they share (medians over repeated samples).
 */
#ifndef CCOL_BENCH_H
#define CCOL_BENCH_H

#include <stddef.h>

int ccol_bench_comm(int argc, char **argv);
int ccol_bench_sync(int argc, char **argv);
int ccol_bench_soak(int argc, char **argv);
int ccol_bench_faults(int argc, char **argv);
int ccol_bench_jit(int argc, char **argv);
int ccol_bench_hier(int argc, char **argv);
int ccol_bench_scale(int argc, char **argv);
int ccol_bench_buckets(int argc, char **argv);

#endif /* CCOL_BENCH_H */
