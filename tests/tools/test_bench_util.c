/*
 * test_bench_util.c - tests of the benchmark helpers (bench/bench_util.c):
 * medians and percentiles, the clock, free ports, PATH lookup and running a
 * program with captured output and a deadline. The helpers are compiled into
 * this test directly, as they are into the `ccol` command.
 */
#include "harness.h"

#include "../../bench/bench_util.c"

CCOL_TEST(test_median_odd_even)
{
    double a[] = { 5, 1, 3 };
    double b[] = { 4, 1, 3, 2 };
    double c[] = { 7 };

    CHECK(ccol_bench_median(a, 3) == 3.0);
    CHECK(ccol_bench_median(b, 4) == 2.5);
    CHECK(ccol_bench_median(c, 1) == 7.0);
    CHECK(ccol_bench_median(NULL, 0) == 0.0);
    CHECK(a[0] == 1.0 && a[2] == 5.0); /* sorted in place */
}

CCOL_TEST(test_percentiles)
{
    double v[11];

    for (int i = 0; i < 11; i++)
        v[i] = (double)(10 - i) * 10.0; /* 100, 90, ..., 0 */
    CHECK(ccol_bench_pct(v, 11, 0.0) == 0.0);
    CHECK(ccol_bench_pct(v, 11, 100.0) == 100.0);
    CHECK(ccol_bench_pct(v, 11, 90.0) == 90.0);
    CHECK(ccol_bench_pct(v, 11, 95.0) == 95.0); /* interpolated */
    CHECK(ccol_bench_pct(v, 11, -5.0) == 0.0);  /* clamped */
    CHECK(ccol_bench_pct(v, 11, 250.0) == 100.0);
    CHECK(ccol_bench_pct(v, 11, 50.0) == ccol_bench_median(v, 11));
}

CCOL_TEST(test_clock)
{
    double t0 = ccol_bench_now(), t1;
    struct timespec ts = { 0, 20 * 1000 * 1000 };

    nanosleep(&ts, NULL);
    t1 = ccol_bench_now();
    CHECK(t1 - t0 >= 0.019);
    CHECK(t1 - t0 < 5.0);
}

CCOL_TEST(test_free_port_and_which)
{
    int port = ccol_bench_free_port("127.0.0.1");
    char *sh = ccol_bench_which("sh");
    char *dir = ccol_bench_exe_dir();

    CHECK(port > 0 && port < 65536);
    CHECK_EQ(ccol_bench_free_port("no such host name."), -1);
    CHECK(sh != NULL && sh[0] == '/');
    CHECK(ccol_bench_which("ccol-no-such-program-here") == NULL);
    CHECK(dir != NULL && dir[0] == '/');
    free(sh);
    free(dir);
}

CCOL_TEST(test_capture)
{
    char sh[] = "/bin/sh", c[] = "-c";
    char ok[] = "echo out; echo err >&2; exit 3";
    char slow[] = "sleep 30";
    char *a1[] = { sh, c, ok, NULL };
    char *a2[] = { sh, c, slow, NULL };
    char missing[] = "/nonexistent/program";
    char *a3[] = { missing, NULL };
    char *out = NULL;
    double t0;

    CHECK_EQ(ccol_bench_capture(a1, 10.0, &out), 3);
    CHECK_CONTAINS(out, "out\n");
    CHECK_CONTAINS(out, "err\n");
    free(out);
    t0 = ccol_bench_now();
    CHECK_EQ(ccol_bench_capture(a2, 0.3, &out), -1);
    CHECK(ccol_bench_now() - t0 < 5.0);
    free(out);
    CHECK_EQ(ccol_bench_capture(a3, 10.0, &out), 127);
    CHECK_CONTAINS(out, "cannot execute");
    free(out);
}

CCOL_TEST_MAIN(CCOL_T(test_median_odd_even), CCOL_T(test_percentiles),
               CCOL_T(test_clock), CCOL_T(test_free_port_and_which),
               CCOL_T(test_capture))
