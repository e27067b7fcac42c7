/*
 * harness.h - the in-repo test harness.
 *
 * Each test runs in a forked child with a timeout, so a crash or a hang
 * (the usual symptom of a multi-rank bug) fails that test by name and the
 * suite goes on. ccol_test_ranks() runs one function on N ranks: threads
 * over the inproc transport, or forked processes over tcp on loopback or
 * over shared memory, and
 * joins them with a timeout. Assertions print both values with file, line
 * and rank. The runner ends with the line "N passed, N failed".
 *
 * A test file:
 *     CCOL_TEST(test_name) { CHECK_EQ(1 + 1, 2); }
 *     CCOL_TEST_MAIN(test_name, other_test)
 * Run: ./test_x [--list] [name...]; CCOL_TEST_TIMEOUT_MULT scales timeouts.
 */
#ifndef CCOL_TEST_HARNESS_H
#define CCOL_TEST_HARNESS_H

#include "ccol.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef struct ccol_test_case {
    const char *name;
    void (*fn)(void);
    int timeout_s; /* 0: the default (60 s) */
} ccol_test_case;

int ccol_test_main(int argc, char **argv, const ccol_test_case *tests,
                   size_t n);

#define CCOL_TEST(name) static void name(void)
#define CCOL_T(name) { #name, name, 0 }
#define CCOL_T_TIMEOUT(name, s) { #name, name, s }
#define CCOL_TEST_MAIN(...)                                                   \
    int main(int argc, char **argv)                                           \
    {                                                                         \
        static const ccol_test_case tests_[] = { __VA_ARGS__ };               \
        return ccol_test_main(argc, argv, tests_,                             \
                              sizeof tests_ / sizeof tests_[0]);              \
    }

/* Failure reporting; `rank` is the current rank or -1. */
void ccol_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Number of failed checks so far in this process (test child). */
int ccol_test_failures(void);
/* Rank of the calling thread (set by ccol_test_ranks), -1 outside. */
int ccol_test_rank(void);
/* Skips the current test with a reason (counts as passed, says SKIP). */
void ccol_test_skip(const char *why);
/* Multiplies a timeout by CCOL_TEST_TIMEOUT_MULT. */
double ccol_test_scale(double seconds);

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond))                                                          \
            ccol_test_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond);    \
    } while (0)

#define CHECK_EQ(a, b)                                                        \
    do {                                                                      \
        long long a_ = (long long)(a), b_ = (long long)(b);                   \
        if (a_ != b_)                                                         \
            ccol_test_fail(__FILE__, __LINE__, "%s == %s: %lld != %lld", #a,  \
                           #b, a_, b_);                                       \
    } while (0)

#define CHECK_STATUS(st, want)                                                \
    do {                                                                      \
        ccol_status s_ = (st), w_ = (want);                                   \
        if (s_ != w_)                                                         \
            ccol_test_fail(__FILE__, __LINE__, "%s: got %s, want %s", #st,    \
                           ccol_status_name(s_), ccol_status_name(w_));       \
    } while (0)

/* CHECK_OK(call, comm): the status must be OK; prints the errmsg if not. */
#define CHECK_OK(st, comm)                                                    \
    do {                                                                      \
        ccol_status s_ = (st);                                                \
        if (s_ != CCOL_OK)                                                    \
            ccol_test_fail(__FILE__, __LINE__, "%s: %s: %s", #st,             \
                           ccol_status_name(s_), ccol_comm_errmsg(comm));     \
    } while (0)

#define CHECK_STR_EQ(a, b)                                                    \
    do {                                                                      \
        const char *a_ = (a), *b_ = (b);                                      \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                  \
            ccol_test_fail(__FILE__, __LINE__, "%s == %s:\n  got  \"%s\"\n"   \
                           "  want \"%s\"", #a, #b, a_ ? a_ : "(null)",       \
                           b_ ? b_ : "(null)");                               \
    } while (0)

#define CHECK_CONTAINS(hay, needle)                                           \
    do {                                                                      \
        const char *h_ = (hay), *n_ = (needle);                               \
        if (h_ == NULL || strstr(h_, n_) == NULL)                             \
            ccol_test_fail(__FILE__, __LINE__, "%s does not contain \"%s\":"  \
                           "\n  \"%s\"", #hay, n_, h_ ? h_ : "(null)");       \
    } while (0)

/* ---- multi-rank ---- */

typedef enum ccol_test_transport {
    CCOL_TEST_INPROC = 0, /* threads as ranks */
    CCOL_TEST_TCP = 1,    /* forked processes over loopback */
    CCOL_TEST_SHM = 2     /* forked processes over shared memory */
} ccol_test_transport;

/* A rank's body. `comm` is NULL when `base->mask` has
 * CCOL_TEST_NO_COMM: the body creates its own communicator then. */
typedef void (*ccol_rank_fn)(ccol_comm *comm, int rank, void *arg);

typedef struct ccol_test_job {
    int size;                    /* number of ranks */
    ccol_test_transport transport;
    double timeout_s;            /* communicator deadline (default 10) */
    double join_s;               /* time to join all ranks (default 60) */
    bool no_comm;                /* the body creates its own comm */
    unsigned may_die;            /* bit r: rank r may die (fault tests);
                                    its death is counted, not reported */
    ccol_comm_params params;     /* extra params (mask bits honoured) */
    int port;                    /* OUT for no_comm bodies: tcp port */
    char name[64];               /* OUT for no_comm bodies: inproc name */
} ccol_test_job;

/* Runs fn on job->size ranks and waits for all of them (join_s). Returns
 * the number of ranks that failed a check, crashed or did not finish; each
 * is reported. Every rank's comm is created and destroyed by the harness
 * unless no_comm is set. */
int ccol_test_ranks(ccol_test_job *job, ccol_rank_fn fn, void *arg);

/* Fills params for rank `rank` of `job` (transport, size, port/name,
 * timeout); used by no_comm bodies. */
void ccol_test_params(const ccol_test_job *job, int rank,
                      ccol_comm_params *p);

/* Memory visible to every rank, threads or forked processes alike; zeroed.
 * Allocate before ccol_test_ranks(); freed at process exit. */
void *ccol_test_shared(size_t size);

/* A free TCP port on 127.0.0.1, from a block of ports this process holds
 * alone (ports.c). */
int ccol_test_free_port(void);

/* Seconds since an arbitrary start, monotonic. */
double ccol_test_now(void);

#endif /* CCOL_TEST_HARNESS_H */
