/*
 * test_hier.c - tcp jobs across "hosts" (CCOL_HOST per forked rank): the
 * ranks of each host meet in shm, leaders speak tcp to rank 0. Every
 * operation over 3, 4, 5, 7 and 8 ranks in contiguous, uneven and
 * interleaved layouts and with k-ary host trees; when the hierarchy applies
 * and when it does not; a killed or stopped leader and a killed non-leader
 * named by every survivor within the deadline; the host table's codec and
 * the tree's shape as units.
 */
#include "harness.h"

#include "comm/hostplan.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAXR 16

/* What every rank of a job reads: its host, and the pids for the stop
 * test. */
typedef struct layout {
    char host[MAXR][8];  /* CCOL_HOST per rank, "" for the default */
    const char *transport; /* what ccol_comm_transport must say */
    const char *hier;      /* CCOL_HIER for every rank, or NULL */
    int victim;            /* rank that fails, -1 for none */
    int how;               /* 0 SIGKILL, 1 SIGSTOP */
    volatile int pid[MAXR];
    char seg[MAXR][128];   /* the host segment each rank mapped, "" none */
} layout;

static layout *lay;

/* Sets the rank's environment and joins; NULL on failure (checked). */
static ccol_comm *
join(ccol_test_job *job, int rank)
{
    ccol_comm_params p;
    ccol_comm *c = NULL;

    if (lay->host[rank][0])
        setenv("CCOL_HOST", lay->host[rank], 1);
    if (lay->hier)
        setenv("CCOL_HIER", lay->hier, 1);
    lay->pid[rank] = (int)getpid();
    ccol_test_params(job, rank, &p);
    CHECK_OK(ccol_comm_create(&p, &c), c);
    if (ccol_comm_status(c) == CCOL_OK)
        return c;
    ccol_comm_destroy(c);
    return NULL;
}

/* A commutative combine: the sum of little-endian int64s. */
static ccol_status
add_i64(void *ud, const void *a, size_t alen, const void *b, size_t blen,
        void **out, size_t *out_len)
{
    int64_t x = 0, y = 0, *s = malloc(sizeof *s);

    (void)ud;
    if (s == NULL)
        return CCOL_ERR_NO_MEMORY;
    if (alen == sizeof x)
        memcpy(&x, a, sizeof x);
    if (blen == sizeof y)
        memcpy(&y, b, sizeof y);
    *s = x + y;
    *out = s;
    *out_len = sizeof *s;
    return CCOL_OK;
}

/* Every operation, from every root, several times over. */
static void
exercise(ccol_comm *c, int rank)
{
    int size = ccol_comm_size(c);

    for (int round = 0; round < 3; round++) {
        uint8_t mine[40], *all = NULL, *b = NULL;
        size_t lens[MAXR], off = 0, blen = 0, jlen = 0;
        int64_t v = rank + 1, j = rank * 10 + round, *jr = NULL;
        double d = 0.25 * rank;

        memset(mine, rank + round, sizeof mine);
        CHECK_OK(ccol_allgatherv(c, mine, (size_t)(rank * 7 + round) % 40,
                                 (void **)&all, lens), c);
        for (int r = 0; r < size && all != NULL; r++) {
            CHECK_EQ(lens[r], (size_t)(r * 7 + round) % 40);
            for (size_t i = 0; i < lens[r]; i++)
                CHECK_EQ(all[off + i], r + round);
            off += lens[r];
        }
        CHECK_OK(ccol_bcast(c, (round + size - 1) % size, "root", 4,
                            (void **)&b, &blen), c);
        CHECK(blen == 4 && b != NULL && memcmp(b, "root", 4) == 0);
        CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
        CHECK_EQ(v, (int64_t)size * (size + 1) / 2);
        CHECK_OK(ccol_allreduce_f64(c, &d, 1, CCOL_OP_MAX), c);
        CHECK(d == 0.25 * (size - 1));
        CHECK_OK(ccol_join_reduce(c, 7, &j, sizeof j, add_i64, NULL,
                                  (void **)&jr, &jlen), c);
        CHECK(jlen == sizeof j && jr != NULL &&
              *jr == 10LL * size * (size - 1) / 2 + (int64_t)size * round);
        CHECK_OK(ccol_barrier(c), c);
        ccol_free(all);
        ccol_free(b);
        ccol_free(jr);
    }
}

/* Records the per-host segment this rank has mapped, read from its own
 * mappings: other jobs of the machine (tests run side by side) have
 * segments of the same kind, so the leak check names this job's. */
static void
record_segment(int rank)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    const char *at;

    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        at = strstr(line, "/dev/shm/");
        if (at == NULL || strstr(at, "-hier-") == NULL)
            continue;
        snprintf(lay->seg[rank], sizeof lay->seg[rank], "%.*s",
                 (int)strcspn(at, " \n"), at);
        break;
    }
    if (f != NULL)
        fclose(f);
}

static void
good_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_comm *c = join(arg, rank);

    (void)unused;
    if (c == NULL)
        return;
    CHECK_STR_EQ(ccol_comm_transport(c), lay->transport);
    record_segment(rank);
    exercise(c, rank);
    ccol_comm_destroy(c);
}

/* How many ranks of the job run on rank r's host. */
static int
host_ranks(int size, int r)
{
    int n = 0;

    for (int q = 0; q < size; q++)
        n += strcmp(lay->host[q], lay->host[r]) == 0;
    return n;
}

/* Every rank that shares its host in a grouped job mapped the host's
 * segment, and none of those names is left once the job has ended. */
static void
check_segments_removed(int size)
{
    bool grouped = strcmp(lay->transport, "tcp+shm") == 0;

    for (int r = 0; r < size; r++) {
        if (grouped && host_ranks(size, r) > 1)
            CHECK(lay->seg[r][0] != '\0');
        else
            CHECK_STR_EQ(lay->seg[r], "");
        if (lay->seg[r][0] != '\0')
            CHECK(access(lay->seg[r], F_OK) != 0);
    }
}

/* With a job token: every tcp frame between hosts is tagged. */
static const char *layout_token;

/* Hosts given as a string, one letter per rank ('.' for the default). */
static void
run_layout(const char *hosts, const char *transport, int threshold)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    memset((void *)lay, 0, sizeof *lay);
    job.size = (int)strlen(hosts);
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    if (threshold > 0) {
        job.params.mask = CCOL_COMM_PARAM_TREE_THRESHOLD |
                          CCOL_COMM_PARAM_TREE_FANOUT;
        job.params.tree_threshold = threshold;
        job.params.tree_fanout = 2;
    }
    if (layout_token != NULL) {
        job.params.mask |= CCOL_COMM_PARAM_TOKEN;
        job.params.token = layout_token;
    }
    for (int r = 0; r < job.size; r++)
        if (hosts[r] != '.')
            snprintf(lay->host[r], sizeof lay->host[r], "node-%c", hosts[r]);
    lay->transport = transport;
    lay->victim = -1;
    CHECK_EQ(ccol_test_ranks(&job, good_body, &job), 0);
    check_segments_removed(job.size);
}

CCOL_TEST(two_hosts_of_two)
{
    run_layout("aabb", "tcp+shm", 0);
}

/* Odd counts: 3 ranks (2 + 1), 8 ranks (3 + 3 + 2). */
CCOL_TEST(odd_and_uneven_hosts)
{
    run_layout("aab", "tcp+shm", 0);
    run_layout("aaabbbcc", "tcp+shm", 0);
}

/* The same shapes with a token: leaders, tree parents and flat ranks
 * authenticate both ways and tag their frames. */
CCOL_TEST(with_a_token)
{
    layout_token = "hier-job-token";
    run_layout("aaabbbcc", "tcp+shm", 0);
    run_layout("aaaabbb", "tcp+shm", 2);
    run_layout("ababa", "tcp", 0);
    run_layout("aaaaaaa", "tcp", 2);
    layout_token = NULL;
}

/* Hosts whose ranks are not consecutive would fold out of rank order:
 * flat tcp. */
CCOL_TEST(interleaved_hosts)
{
    run_layout("ababa", "tcp", 0);
    run_layout("aabbaa", "tcp", 0);
}

/* More ranks on a host than the threshold: a k-ary tree within it. */
CCOL_TEST(kary_host_trees)
{
    run_layout("aaaabbb", "tcp+shm", 2);
}

/* One host, or one rank per host, or more hosts than the threshold:
 * plain tcp. */
CCOL_TEST(flat_when_it_does_not_apply)
{
    run_layout("aaa", "tcp", 0);
    run_layout("abc", "tcp", 0);
    run_layout("...", "tcp", 0);
    run_layout("aabbc", "tcp", 2);
}

CCOL_TEST(hier_switched_off)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    memset((void *)lay, 0, sizeof *lay);
    job.size = 4;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    for (int r = 0; r < 4; r++)
        snprintf(lay->host[r], sizeof lay->host[r], "node-%c", "aabb"[r]);
    lay->hier = "0";
    lay->transport = "tcp";
    CHECK_EQ(ccol_test_ranks(&job, good_body, &job), 0);
}

static void
bad_env_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_comm_params p;
    ccol_comm *c = NULL;

    (void)unused;
    ccol_test_params(arg, rank, &p);
    setenv("CCOL_HIER", "yes", 1);
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_HIER='yes'");
    ccol_comm_destroy(c);
    c = NULL;
    unsetenv("CCOL_HIER");
    setenv("CCOL_HOST", "node a", 1);
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "CCOL_HOST='node a'");
    ccol_comm_destroy(c);
}

/* Each rank checks its own environment before it waits for anyone. */
CCOL_TEST(bad_environment_named)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 2;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, bad_env_body, &job), 0);
}

/* ---- failures ---- */

/* The victim dies or stops at its second barrier; every survivor's
 * barrier fails naming it, within the deadline and its graces. Rank 0
 * then ends a stopped victim. */
static void
fail_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm *c = join(job, rank);
    char name[32];
    double t0;
    ccol_status st;

    (void)unused;
    if (c == NULL)
        return;
    CHECK_STR_EQ(ccol_comm_transport(c), "tcp+shm");
    CHECK_OK(ccol_barrier(c), c);
    if (rank == lay->victim)
        raise(lay->how == 0 ? SIGKILL : SIGSTOP);
    t0 = ccol_test_now();
    st = ccol_barrier(c);
    CHECK(st == CCOL_ERR_PEER || st == CCOL_ERR_TIMEOUT);
    /* "rank 2 (pid 4711) died ..." or "missing rank: 2 and the ranks
     * below it" */
    snprintf(name, sizeof name, "rank %d", lay->victim);
    if (strstr(ccol_comm_errmsg(c), name) == NULL)
        snprintf(name, sizeof name, "rank: %d", lay->victim);
    CHECK_CONTAINS(ccol_comm_errmsg(c), name);
    CHECK(ccol_test_now() - t0 <
          ccol_test_scale(lay->how == 0 ? 2.0 : job->timeout_s + 3.0));
    if (rank == 0 && lay->how == 1)
        kill(lay->pid[lay->victim], SIGKILL);
    ccol_comm_destroy(c);
}

static void
run_failure(const char *hosts, int victim, int how)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    memset((void *)lay, 0, sizeof *lay);
    job.size = (int)strlen(hosts);
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    job.timeout_s = 1.5;
    job.may_die = 1u << victim;
    for (int r = 0; r < job.size; r++)
        snprintf(lay->host[r], sizeof lay->host[r], "node-%c", hosts[r]);
    lay->victim = victim;
    lay->how = how;
    CHECK_EQ(ccol_test_ranks(&job, fail_body, &job), 1); /* the victim */
}

CCOL_TEST(killed_leader)
{
    run_failure("aabbb", 2, 0);
}

CCOL_TEST(killed_non_leader)
{
    run_failure("aabbb", 4, 0);
    run_failure("aabbb", 1, 0);
}

CCOL_TEST(stopped_leader)
{
    run_failure("aabb", 2, 1);
}

/* ---- units ---- */

/* CHECK_OK for an internal call that reports into an error record. */
#define CHECK_OK_ERR(st, e)                                                   \
    do {                                                                      \
        ccol_status s_ = (st);                                                \
        if (s_ != CCOL_OK)                                                    \
            ccol_test_fail(__FILE__, __LINE__, "%s: %s: %s", #st,             \
                           ccol_status_name(s_), (e)->msg);                   \
    } while (0)

/* A tree shape with no edges yet, for the tree function. */
static ccol__shape
fake(int rank, int size, int threshold, int fanout)
{
    ccol__shape s;

    memset(&s, 0, sizeof s);
    s.rank = rank;
    s.size = size;
    s.threshold = threshold;
    s.fanout = fanout;
    s.parent = -1;
    return s;
}

/* Visits rank r's subtree in combine order, appending ranks to out. */
static void
preorder(const int *const *kids, const int *nkids, int r, int *out, int *n)
{
    out[(*n)++] = r;
    for (int i = 0; i < nkids[r]; i++)
        preorder(kids, nkids, kids[r][i], out, n);
}

/* The height of rank r's subtree, from the children lists. */
static int
height(int *const *kids, const int *nkids, int r)
{
    int h = 0;

    for (int i = 0; i < nkids[r]; i++) {
        int c = 1 + height(kids, nkids, kids[r][i]);
        h = c > h ? c : h;
    }
    return h;
}

/* For hosts given one letter per rank: every rank's tree agrees with its
 * neighbours', covers every rank once, has the heights it claims, and
 * folds in rank order when each host's ranks are consecutive. */
static void
check_tree(const char *hosts, int threshold, int fanout)
{
    int n = (int)strlen(hosts), nk[MAXR], par[MAXR], order[MAXR], m = 0;
    int *kids[MAXR], hostidx[MAXR], nh = 0, ht[MAXR][MAXR];
    char seen[MAXR + 1] = "";
    ccol__host_plan p = { 0 };
    ccol__err err = { 0 };
    bool consecutive = true;

    for (int r = 0; r < n; r++) {
        char *at = strchr(seen, hosts[r]);
        if (at == NULL) {
            seen[nh] = hosts[r];
            seen[nh + 1] = '\0';
            at = &seen[nh++];
        }
        hostidx[r] = (int)(at - seen);
        consecutive = consecutive && (r == 0 || hostidx[r] >= hostidx[r - 1]);
    }
    p.nhosts = nh;
    p.host = hostidx;
    for (int r = 0; r < n; r++) {
        ccol__shape s = fake(r, n, threshold, fanout);
        CHECK_OK_ERR(ccol__host_plan_tree(&s, &p, &err), &err);
        par[r] = s.parent;
        nk[r] = s.nchildren;
        kids[r] = s.children;
        CHECK(s.heights != NULL);
        if (s.heights != NULL)
            memcpy(ht[r], s.heights, (size_t)n * sizeof *s.heights);
        free(s.heights);
    }
    for (int r = 0; r < n; r++) {
        for (int i = 0; i < nk[r]; i++)
            CHECK_EQ(par[kids[r][i]], r);
        for (int q = 0; q < n; q++) /* every rank sees the same heights */
            CHECK_EQ(ht[r][q], height(kids, nk, q));
    }
    preorder((const int *const *)kids, nk, 0, order, &m);
    CHECK_EQ(m, n);
    for (int i = 0; i < m && consecutive; i++)
        CHECK_EQ(order[i], i);
    for (int r = 0; r < n; r++)
        free(kids[r]);
}

CCOL_TEST(tree_shapes)
{
    check_tree("aabb", 64, 4);
    check_tree("aaabbbcc", 64, 4);
    check_tree("aaaaaaabbbbbbbbb", 3, 2);
    check_tree("ababab", 64, 4);
    check_tree("abcabcaab", 3, 2);
    check_tree("aaaaaaaaaaaaaaaa", 3, 3);
}

/* Encodes a plan and decodes it back, then every damaged variant must be
 * refused (never crash, never accepted half-way). */
CCOL_TEST(host_table_codec)
{
    int hosts[5] = { 0, 0, 1, 1, 2 };
    ccol__host_plan p = { 3, hosts, "0123456789abcdef" }, back;
    ccol__err err = { 0 };
    ccol__buf b = { 0 };
    ccol__rd r;

    ccol__host_plan_encode(5, &p, &b);
    CHECK(!b.oom);
    ccol__rd_init(&r, b.p, b.len);
    CHECK_OK_ERR(ccol__host_plan_decode(5, 64, &r, &back, &err), &err);
    CHECK_EQ(back.nhosts, 3);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(back.host[i], hosts[i]);
    CHECK_STR_EQ(back.nonce, "0123456789abcdef");
    ccol__host_plan_free(&back);
    for (size_t cut = 1; cut < b.len; cut++) {
        ccol__rd_init(&r, b.p, cut);
        CHECK_STATUS(ccol__host_plan_decode(5, 64, &r, &back, &err),
                     CCOL_ERR_PEER);
        CHECK(back.host == NULL && back.nhosts == 0);
    }
    hosts[3] = 3; /* an index before its turn */
    ccol__buf_free(&b);
    ccol__host_plan_encode(5, &p, &b);
    ccol__rd_init(&r, b.p, b.len);
    CHECK_STATUS(ccol__host_plan_decode(5, 64, &r, &back, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "host indices out of order");
    hosts[3] = 0; /* host 0 again after host 1 */
    ccol__buf_free(&b);
    ccol__host_plan_encode(5, &p, &b);
    ccol__rd_init(&r, b.p, b.len);
    CHECK_STATUS(ccol__host_plan_decode(5, 64, &r, &back, &err),
                 CCOL_ERR_PEER);
    CHECK_CONTAINS(err.msg, "not consecutive");
    ccol__buf_free(&b);
    p.nhosts = 0; /* a flat job: the count alone */
    ccol__host_plan_encode(5, &p, &b);
    ccol__rd_init(&r, b.p, b.len);
    CHECK_OK_ERR(ccol__host_plan_decode(5, 64, &r, &back, &err), &err);
    CHECK_EQ(back.nhosts, 0);
    ccol__buf_free(&b);
}

CCOL_TEST(host_identity)
{
    char id[300], name[64];
    ccol__err err = { 0 };
    uint64_t k1, k2;

    setenv("CCOL_HOST", "node-7", 1);
    CHECK_OK_ERR(ccol__host_id(id, sizeof id, &err), &err);
    k1 = ccol__host_key(id, name, sizeof name);
    CHECK_STR_EQ(name, "node-7");
    unsetenv("CCOL_HOST");
    CHECK_OK_ERR(ccol__host_id(id, sizeof id, &err), &err);
    k2 = ccol__host_key(id, name, sizeof name);
    CHECK(k1 != k2);
    CHECK(strchr(name, '#') == NULL);
    /* a HELLO without a digest groups by its whole text */
    CHECK(ccol__host_key("plain", name, sizeof name) ==
          ccol__host_key("plain", name, sizeof name));
    CHECK_STR_EQ(name, "plain");
    CHECK(ccol__host_key("x#0123456789abcdeZ", name, sizeof name) !=
          0x0123456789abcdeULL);
}

int
main(int argc, char **argv)
{
    static const ccol_test_case tests[] = {
        CCOL_T(two_hosts_of_two), CCOL_T(odd_and_uneven_hosts),
        CCOL_T(with_a_token), CCOL_T(interleaved_hosts),
        CCOL_T(kary_host_trees),
        CCOL_T(flat_when_it_does_not_apply), CCOL_T(hier_switched_off),
        CCOL_T(bad_environment_named), CCOL_T(killed_leader),
        CCOL_T(killed_non_leader), CCOL_T(stopped_leader),
        CCOL_T(tree_shapes), CCOL_T(host_table_codec),
        CCOL_T(host_identity)
    };

    lay = ccol_test_shared(sizeof *lay);
    return ccol_test_main(argc, argv, tests, sizeof tests / sizeof tests[0]);
}
