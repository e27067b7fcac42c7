/*
 * test_profile.c - profiles (ccol_sync_profile_*, docs/protocol.md
 * "Profiles"): a profile saved after compiles that made a dim dynamic,
 * loaded into a fresh sync, makes the first compile dynamic (a toy
 * compiler compiles once instead of twice); malformed documents give named
 * errors with the byte offset and leave the sync unchanged; and the
 * agreement at 1, 2 and 3 ranks over inproc: every rank with the same
 * bytes, one rank without (it gets them), differing bytes (the lowest
 * rank's win, a warning on every rank whose bytes differed), garbage on
 * one rank (left out with a warning on that rank), no bytes anywhere (a
 * cold start). After the agreement every rank saves the same bytes, and
 * the first compile collective sees equal prior states.
 */
#include "harness.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXR 3
#define DOC_MAX 1024

/* ---- warnings, caught from the log on every rank ---- */

typedef struct caught {
    pthread_mutex_t mu;
    int nwarn[MAXR];          /* WARN lines per rank */
    char warn[MAXR][512];     /* the last one of each rank */
    int nprior;               /* "prior frame states differ" lines */
} caught;

static caught *logs;

/* Sync lines start "rank r/n: "; the rank says whose warning it is. */
static void
catch_log(void *ud, ccol_log_level level, const char *component,
          const char *msg)
{
    int r = -1, n = 0;

    (void)ud;
    (void)component;
    if (level != CCOL_LOG_WARN || sscanf(msg, "rank %d/%d", &r, &n) != 2 ||
        r < 0 || r >= MAXR)
        return;
    pthread_mutex_lock(&logs->mu);
    logs->nwarn[r]++;
    snprintf(logs->warn[r], sizeof logs->warn[r], "%s", msg);
    if (strstr(msg, "prior frame states differ") != NULL)
        logs->nprior++;
    pthread_mutex_unlock(&logs->mu);
}

static void
catch_start(void)
{
    logs = ccol_test_shared(sizeof *logs);
    pthread_mutex_init(&logs->mu, NULL);
    ccol_log_set(catch_log, NULL, CCOL_LOG_WARN);
}

/* ---- a toy compiler ---- */

static ccol_sync *
new_sync(ccol_comm *comm)
{
    ccol_sync_params p = { .mask = CCOL_SYNC_PARAM_COMM, .comm = comm };
    ccol_sync *s = NULL;

    CHECK_STATUS(ccol_sync_create(&p, &s), CCOL_OK);
    return s;
}

/* One compile of `frame` observing L['x'] of sizes {n, 10}; returns the
 * decision on size(0) after the exchange. */
static ccol_decision
compile_x(ccol_sync *s, const char *frame, int64_t n)
{
    ccol_compile *c = NULL;
    int64_t sz[2] = { n, 10 };
    ccol_decision d = CCOL_STATIC;

    CHECK_STATUS(ccol_compile_begin(s, frame, &c), CCOL_OK);
    CHECK_STATUS(ccol_compile_observe_tensor(c, "L['x']", 2, sz, NULL),
                 CCOL_OK);
    CHECK_STATUS(ccol_compile_exchange(c), CCOL_OK);
    CHECK_STATUS(ccol_compile_decide_size(c, "L['x']", 0, n, &d), CCOL_OK);
    CHECK_STATUS(ccol_compile_finish(c, true), CCOL_OK);
    return d;
}

/* Calls of frame f with L['x'] of sizes {ns[i], 10}: the cached entry
 * hits when its size(0) is dynamic or equals the size (its guard), else
 * the frame compiles. Returns the number of compiles; *first is the
 * decision of the first compile. */
static int
run_calls(ccol_sync *s, const int64_t *ns, int n, ccol_decision *first)
{
    int compiles = 0;
    bool cached = false, dyn = false;
    int64_t val = 0;

    for (int i = 0; i < n; i++) {
        if (cached && (dyn || val == ns[i]))
            continue;
        ccol_decision d = compile_x(s, "f", ns[i]);
        if (compiles++ == 0)
            *first = d;
        cached = true;
        dyn = d == CCOL_DYNAMIC;
        val = ns[i];
    }
    return compiles;
}

/* A profile's bytes, copied into a fixed buffer. */
typedef struct doc {
    size_t len;
    uint8_t b[DOC_MAX];
} doc;

static void
save(ccol_sync *s, doc *d)
{
    void *p = NULL;
    size_t n = 0;

    CHECK_STATUS(ccol_sync_profile_save(s, &p, &n), CCOL_OK);
    CHECK(n <= DOC_MAX);
    d->len = n < DOC_MAX ? n : DOC_MAX;
    memcpy(d->b, p, d->len);
    ccol_free(p);
}

static bool
same_doc(const doc *a, const doc *b)
{
    return a->len == b->len && memcmp(a->b, b->b, a->len) == 0;
}

/* The profile of one rank alone that compiled f with sizes n0 then n1
 * (size(0) dynamic when they differ). */
static void
make_profile(int64_t n0, int64_t n1, doc *out)
{
    ccol_sync *s = new_sync(NULL);

    compile_x(s, "f", n0);
    if (n1 != n0)
        compile_x(s, "f", n1);
    save(s, out);
    ccol_sync_destroy(s);
}

static char *
render(ccol_sync *s)
{
    char *r = NULL;

    CHECK_STATUS(ccol_sync_render(s, "f", &r), CCOL_OK);
    return r;
}

/* ---- save and load ---- */

CCOL_TEST(save_load_first_compile_dynamic)
{
    static const int64_t ns[] = { 5, 6, 7, 5 };
    ccol_sync *a = new_sync(NULL), *b = new_sync(NULL);
    ccol_decision first = CCOL_DYNAMIC;
    char *ra, *rb;
    doc da, db;

    CHECK_EQ(run_calls(a, ns, 4, &first), 2); /* static, then dynamic */
    CHECK_EQ(first, CCOL_STATIC);
    save(a, &da);
    CHECK_EQ(da.b[0], 0xE3); /* the wire format's state document */
    CHECK(!ccol_sync_profile_loaded(b));
    CHECK_STATUS(ccol_sync_profile_load(b, da.b, da.len), CCOL_OK);
    CHECK(ccol_sync_profile_loaded(b));
    CHECK_EQ(ccol_sync_profile_frames(b), 1);
    CHECK_EQ(run_calls(b, ns, 4, &first), 1); /* dynamic at once */
    CHECK_EQ(first, CCOL_DYNAMIC);
    ra = render(a);
    rb = render(b);
    CHECK_STR_EQ(rb, ra);
    CHECK_STR_EQ(rb, "L['x']: tensor size=[?, 10] stride=[S(1), 1]\n");
    save(b, &db);
    CHECK(same_doc(&db, &da));
    ccol_free(ra);
    ccol_free(rb);
    ccol_sync_destroy(a);
    ccol_sync_destroy(b);
}

/* Loading joins: what the sync knew stays, the profile's frames come in;
 * an empty profile (a run that compiled nothing) loads too. */
CCOL_TEST(load_joins)
{
    ccol_sync *s = new_sync(NULL), *empty = new_sync(NULL);
    doc p, e;

    make_profile(5, 6, &p);
    save(empty, &e);
    CHECK_EQ(e.len, 6);
    CHECK_STATUS(ccol_sync_profile_load(s, e.b, e.len), CCOL_OK);
    CHECK(ccol_sync_profile_loaded(s));
    CHECK_EQ(ccol_sync_profile_frames(s), 0);
    CHECK_EQ(compile_x(s, "g", 3), CCOL_STATIC);
    CHECK_STATUS(ccol_sync_profile_load(s, p.b, p.len), CCOL_OK);
    CHECK_EQ(ccol_sync_profile_frames(s), 2);
    CHECK_EQ(compile_x(s, "f", 9), CCOL_DYNAMIC);
    CHECK_EQ(compile_x(s, "g", 3), CCOL_STATIC);
    ccol_sync_destroy(s);
    ccol_sync_destroy(empty);
}

/* A bad document: `want`, a message naming `has`, the sync unchanged. */
static void
load_bad(ccol_sync *s, const void *p, size_t n, ccol_status want,
         const char *has)
{
    doc before, after;

    save(s, &before);
    CHECK_STATUS(ccol_sync_profile_check(s, p, n), want);
    CHECK_STATUS(ccol_sync_profile_load(s, p, n), want);
    CHECK_CONTAINS(ccol_sync_errmsg(s), has);
    save(s, &after);
    CHECK(same_doc(&before, &after));
    CHECK(!ccol_sync_profile_loaded(s));
}

CCOL_TEST(load_malformed)
{
    ccol_sync *s = new_sync(NULL);
    ccol_compile *c = NULL;
    doc p, q;

    make_profile(5, 6, &p);
    compile_x(s, "g", 4);
    load_bad(s, "hello", 5, CCOL_ERR_PEER, "not a profile: bad state "
             "document: format byte 0x68, want 0xe3 (at byte 0)");
    load_bad(s, p.b, p.len - 1, CCOL_ERR_PEER, "at byte");
    q = p;
    q.b[q.len++] = 0;
    load_bad(s, q.b, q.len, CCOL_ERR_PEER, "trailing bytes");
    q = p;
    q.b[1] = 2;
    load_bad(s, q.b, q.len, CCOL_ERR_VERSION, "version 2, this build "
             "reads version 1 (at byte 1)");
    q = p;
    q.b[6] = 0xff; /* the first frame's code id: 255 bytes announced */
    load_bad(s, q.b, q.len, CCOL_ERR_PEER, "at byte");
    load_bad(s, NULL, 3, CCOL_ERR_INVALID_ARG, "NULL data");
    load_bad(s, NULL, 0, CCOL_ERR_PEER, "at byte 0");
    CHECK_STATUS(ccol_sync_profile_check(s, p.b, p.len), CCOL_OK);
    CHECK_EQ(ccol_sync_profile_frames(s), 1); /* checked, not loaded */
    CHECK_STATUS(ccol_compile_begin(s, "g", &c), CCOL_OK);
    CHECK_STATUS(ccol_sync_profile_load(s, p.b, p.len), CCOL_ERR_BUSY);
    CHECK_CONTAINS(ccol_sync_errmsg(s), "load profiles before compiling");
    CHECK_STATUS(ccol_sync_profile_agree(s, p.b, p.len), CCOL_ERR_BUSY);
    CHECK_STATUS(ccol_compile_finish(c, false), CCOL_OK);
    CHECK_STATUS(ccol_sync_profile_load(NULL, p.b, p.len),
                 CCOL_ERR_INVALID_ARG);
    ccol_sync_destroy(s);
}

/* ---- the agreement ---- */

enum {
    A_SAME,      /* every rank passes P */
    A_ONE_NULL,  /* rank 0 passes nothing, the others P */
    A_DIFFER,    /* rank r passes its own Q[r] */
    A_LOW_NULL,  /* rank 0 nothing, ranks >= 1 their own Q[r] */
    A_GARBAGE,   /* rank 0 garbage, the others P */
    A_NONE       /* no rank has bytes */
};

/* What one rank got. */
typedef struct agreed {
    int st;
    bool loaded;
    size_t frames;
    doc saved;                /* after the agreement */
    ccol_decision first;      /* first compile of f after it */
} agreed;

typedef struct agree_case {
    int id;
    doc p;                    /* P: size(0) dynamic */
    doc q[MAXR];              /* Q[r]: distinct static profiles */
    agreed out[MAXR];
} agree_case;

/* What rank `rank` passes in case `id`. */
static const doc *
input(const agree_case *a, int rank, doc *garbage)
{
    switch (a->id) {
    case A_SAME:
        return &a->p;
    case A_ONE_NULL:
        return rank == 0 ? NULL : &a->p;
    case A_DIFFER:
        return &a->q[rank];
    case A_LOW_NULL:
        return rank == 0 ? NULL : &a->q[rank];
    case A_GARBAGE:
        if (rank != 0)
            return &a->p;
        *garbage = a->p;
        garbage->b[6] = 0xff; /* the first code id announces 255 bytes */
        return garbage;
    default:
        return NULL;
    }
}

static void
agree_rank(ccol_comm *comm, int rank, void *arg)
{
    agree_case *a = arg;
    agreed *o = &a->out[rank];
    ccol_sync *s = new_sync(comm);
    doc garbage;
    const doc *in = input(a, rank, &garbage);

    o->st = ccol_sync_profile_agree(s, in ? in->b : NULL, in ? in->len : 0);
    if (o->st != CCOL_OK)
        ccol_test_fail(__FILE__, __LINE__, "rank %d: %s", rank,
                       ccol_sync_errmsg(s));
    o->loaded = ccol_sync_profile_loaded(s);
    o->frames = ccol_sync_profile_frames(s);
    save(s, &o->saved);
    o->first = compile_x(s, "f", 7);
    ccol_sync_destroy(s);
}

/* Runs case `id` on `size` ranks; returns the case for its checks. */
static agree_case *
agree_run(int id, int size)
{
    agree_case *a = ccol_test_shared(sizeof *a);
    ccol_test_job job = { .size = size, .transport = CCOL_TEST_INPROC };

    memset(logs->nwarn, 0, sizeof logs->nwarn);
    logs->nprior = 0;
    a->id = id;
    make_profile(5, 6, &a->p);
    for (int r = 0; r < MAXR; r++)
        make_profile(20 + r, 20 + r, &a->q[r]);
    CHECK_EQ(ccol_test_ranks(&job, agree_rank, a), 0);
    CHECK_EQ(logs->nprior, 0); /* every rank started from one state */
    return a;
}

/* Every rank loaded `want` (NULL: nothing) and decided `first`. */
static void
agree_expect(const agree_case *a, int size, const doc *want,
             ccol_decision first)
{
    for (int r = 0; r < size; r++) {
        const agreed *o = &a->out[r];
        CHECK_STATUS((ccol_status)o->st, CCOL_OK);
        CHECK_EQ(o->loaded, want != NULL);
        CHECK_EQ(o->frames, want != NULL);
        CHECK_EQ(o->first, first);
        if (want != NULL && !same_doc(&o->saved, want))
            ccol_test_fail(__FILE__, __LINE__, "rank %d saved another "
                           "profile than the agreed one", r);
    }
}

CCOL_TEST(agree_same_bytes)
{
    catch_start();
    for (int size = 1; size <= MAXR; size++) {
        agree_case *a = agree_run(A_SAME, size);
        /* one compile at 7 after the profile's 5 and 6: dynamic on every
         * rank (and without peers: the profile alone) */
        agree_expect(a, size, &a->p, CCOL_DYNAMIC);
        for (int r = 0; r < size; r++)
            CHECK_EQ(logs->nwarn[r], 0);
    }
}

CCOL_TEST(agree_rank_without_bytes)
{
    catch_start();
    for (int size = 1; size <= MAXR; size++) {
        agree_case *a = agree_run(A_ONE_NULL, size);
        /* alone without bytes: a cold start, static */
        agree_expect(a, size, size > 1 ? &a->p : NULL,
                     size > 1 ? CCOL_DYNAMIC : CCOL_STATIC);
        for (int r = 0; r < size; r++)
            CHECK_EQ(logs->nwarn[r], 0);
    }
}

CCOL_TEST(agree_differing_bytes)
{
    catch_start();
    for (int size = 1; size <= MAXR; size++) {
        agree_case *a = agree_run(A_DIFFER, size);
        /* Q[0] has f at 20; the compile at 7 makes it dynamic */
        agree_expect(a, size, &a->q[0], CCOL_DYNAMIC);
        CHECK_EQ(logs->nwarn[0], 0);
        for (int r = 1; r < size; r++) {
            CHECK_EQ(logs->nwarn[r], 1);
            CHECK_CONTAINS(logs->warn[r], "differs from rank 0's");
            CHECK_CONTAINS(logs->warn[r], "every rank loads rank 0's");
        }
    }
    /* the lowest rank that has bytes is the source */
    agree_case *a = agree_run(A_LOW_NULL, 3);
    agree_expect(a, 3, &a->q[1], CCOL_DYNAMIC);
    CHECK_EQ(logs->nwarn[0] + logs->nwarn[1], 0);
    CHECK_EQ(logs->nwarn[2], 1);
    CHECK_CONTAINS(logs->warn[2], "differs from rank 1's");
}

CCOL_TEST(agree_garbage_on_one_rank)
{
    catch_start();
    for (int size = 1; size <= MAXR; size++) {
        agree_case *a = agree_run(A_GARBAGE, size);
        agree_expect(a, size, size > 1 ? &a->p : NULL,
                     size > 1 ? CCOL_DYNAMIC : CCOL_STATIC);
        CHECK_EQ(logs->nwarn[0], 1);
        CHECK_CONTAINS(logs->warn[0], "profile agreement: not a profile: "
                       "bad state document");
        CHECK_CONTAINS(logs->warn[0], "at byte");
        CHECK_CONTAINS(logs->warn[0], "takes part without its profile");
        for (int r = 1; r < size; r++)
            CHECK_EQ(logs->nwarn[r], 0);
    }
}

CCOL_TEST(agree_no_bytes)
{
    catch_start();
    for (int size = 1; size <= MAXR; size++) {
        agree_case *a = agree_run(A_NONE, size);
        agree_expect(a, size, NULL, CCOL_STATIC);
        for (int r = 0; r < size; r++)
            CHECK_EQ(a->out[r].saved.len, 6); /* still an empty state */
    }
}

CCOL_TEST_MAIN(CCOL_T(save_load_first_compile_dynamic), CCOL_T(load_joins),
               CCOL_T(load_malformed), CCOL_T(agree_same_bytes),
               CCOL_T(agree_rank_without_bytes),
               CCOL_T(agree_differing_bytes),
               CCOL_T(agree_garbage_on_one_rank), CCOL_T(agree_no_bytes))
