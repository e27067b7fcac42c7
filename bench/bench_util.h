/*
 * bench_util.h - helpers shared by the benchmark suites: a monotonic clock
 * in seconds, the median and percentiles of a sample array (sorted in place;
 * callers own them), and the process plumbing suites need to run a baseline
 * program (free ports, finding programs, capturing output with a deadline).
 */
#ifndef CCOL_BENCH_UTIL_H
#define CCOL_BENCH_UTIL_H

#include <stddef.h>

/* Monotonic time in seconds (CLOCK_MONOTONIC), for differences only. */
double ccol_bench_now(void);

/*
 * Median of v[0..n): the middle value, or the mean of the two middle
 * values for even n. Sorts v in place. Returns 0.0 for n == 0.
 */
double ccol_bench_median(double *v, size_t n);

/*
 * The p-th percentile (0 <= p <= 100) of v[0..n) by linear interpolation
 * between closest ranks (p = 50 is the median). Sorts v in place; p is
 * clamped to [0, 100]. Returns 0.0 for n == 0.
 */
double ccol_bench_pct(double *v, size_t n, double p);

/*
 * A free TCP port on `addr` (bind to port 0, read the port back, close), or
 * -1 with errno set. Another process may take it before it is used.
 */
int ccol_bench_free_port(const char *addr);

/* The directory of the running executable (/proc/self/exe), malloc'd, or
 * NULL. */
char *ccol_bench_exe_dir(void);

/* The full path of `prog` found in PATH (malloc'd), or NULL. */
char *ccol_bench_which(const char *prog);

/*
 * Runs argv[0] (a path) with stdout and stderr captured into one malloc'd,
 * NUL-terminated string (*out). Kills the child's process group when it runs
 * longer than timeout_s. Returns the exit status (128 + signal when killed
 * by a signal), -1 when it timed out, -2 when it could not be started.
 */
int ccol_bench_capture(char *const argv[], double timeout_s, char **out);

#endif /* CCOL_BENCH_UTIL_H */
