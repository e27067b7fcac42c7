/*
 * test_tcp_dos.c - the tcp rendezvous under a flood of strangers. A
 * flooder process opens a thousand silent connections to rank 0's port
 * and a couple of hundred that send garbage or answer the challenge with
 * the wrong token; the real ranks connect behind them. The job must form
 * (rank 0 evicts strangers past their time instead of resting while its
 * slots are full), the refusals must be logged at WARNING without
 * flooding the log, and a job that times out because a real rank is
 * missing must say how many strangers were refused and never blame a
 * rank that joined. A flood of strangers that each send one byte and
 * stall, from two addresses, must not keep the real ranks waiting either.
 */
#include "harness.h"

#include "comm/tcp_link.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define FLOOD_MAX 1400 /* connections one flooder may hold */
#define STALL_MAX 3000 /* one-byte stallers one flooder may hold */
#define LOG_LINES 64   /* warnings kept by the log callback */

/* What a stranger does once connected. */
typedef enum kind {
    K_SILENT,  /* nothing */
    K_GARBAGE, /* sends an HTTP request */
    K_TOKEN    /* answers the challenge with the wrong token */
} kind;

/* A flood: how many strangers of each kind, and the job around it. */
typedef struct flood {
    int silent, garbage, token;
    int stall;          /* strangers sending one byte, then nothing */
    int missing;        /* a real rank that never comes, or -1 */
    int nofile;         /* rank 0's descriptor limit, or 0 */
    double timeout;     /* of the communicator */
    volatile int ready; /* set by the flooder: every connect issued */
    volatile int done;  /* set by rank 0: the flooder may stop */
    double t_flood;     /* when the flooder began */
    double t_join[3];   /* per real rank: seconds in ccol_comm_create */
    double t_formed;    /* when rank 0's ccol_comm_create returned */
    char msg[2][1024];  /* ranks 0 and 1: error messages */
} flood;

static flood *fl;

/* ---- the flooder ---- */

/* Raises the descriptor limit for n sockets if it is lower (at most
 * to the hard limit). */
static void
more_fds(rlim_t n)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= n + 64)
        return;
    rl.rlim_cur = rl.rlim_max < n + 64 ? rl.rlim_max : n + 64;
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* A non-blocking connect to 127.0.0.1:port from address `from` (host
 * order; 0: the kernel's choice); -1 when no socket is left. */
static int
open_stranger(int port, uint32_t from)
{
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct sockaddr_in b = { .sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(from) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    if ((from != 0 && bind(fd, (struct sockaddr *)&b, sizeof b) != 0) ||
        (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 &&
         errno != EINPROGRESS)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Answers a challenge waiting on fd with a HELLO claiming rank 1 but
 * keyed with another token. */
static void
wrong_hello(int fd)
{
    ccol__tcp_hello h;
    ccol__msg ch;
    ccol__ident fc;
    ccol__hdr hd;
    uint8_t *pl, *f;
    size_t len, flen;
    char why[200];
    int err;

    if (ccol__tcp_read_frame(fd, CCOL__TCP_HS_MAX, ccol__tcp_deadline(2), true,
                             &ch, NULL, why, sizeof why) != CCOL_OK)
        return;
    memset(&fc, 0, sizeof fc);
    fc.rank = 1;
    fc.size = 3;
    fc.comm_id = ch.h.comm_id;
    memset(&h, 0, sizeof h);
    h.rank = 1;
    h.size = 3;
    snprintf(h.host, sizeof h.host, "intruder");
    if (ch.h.kind == CCOL__K_CHALLENGE && ch.h.len == CCOL__TCP_NONCE)
        pl = ccol__tcp_hello_seal(&h, "not-the-token", ch.payload, 1,
                                  fc.comm_id, &len);
    else
        pl = ccol__tcp_hello_encode(&h, &len);
    free(ch.payload);
    ccol__hdr_init(&hd, &fc, CCOL__K_HELLO, CCOL__OP_RENDEZVOUS, 0, 0, 0, "",
                   0);
    f = ccol__frame_encode(&hd, pl, len, &flen);
    if (f != NULL)
        ccol__tcp_write(fd, f, flen, ccol__tcp_deadline(2), &err);
    free(pl);
    free(f);
}

/* Plays its part on a stranger socket that became ready. Returns false
 * when it has nothing more to do there. */
static bool
stranger_step(int fd, kind k, short revents)
{
    /* Longer than a frame header, so rank 0 reads and rejects it. */
    static const char junk[] = "GET / HTTP/1.0\r\nHost: ccol\r\n\r\n"
                               "................................"
                               "................................";
    int err;

    if (k == K_GARBAGE && (revents & POLLOUT)) {
        ccol__tcp_write(fd, junk, sizeof junk - 1, ccol__tcp_deadline(1),
                        &err);
        return false;
    }
    if (k == K_TOKEN && (revents & POLLIN)) {
        wrong_hello(fd);
        return false;
    }
    return (revents & (POLLERR | POLLHUP)) == 0;
}

/* Opens the flood: silent connections with a garbage or wrong-token one
 * mixed in every few, so the talking ones are spread over the backlog. */
static int
open_flood(int port, int *fd, kind *k)
{
    int n = fl->silent + fl->garbage + fl->token, ng = 0, nt = 0, got = 0;

    for (int i = 0; i < n && got < FLOOD_MAX; i++) {
        kind want = K_SILENT;

        if (ng < fl->garbage && i % 6 == 2)
            want = K_GARBAGE, ng++;
        else if (nt < fl->token && i % 6 == 5)
            want = K_TOKEN, nt++;
        else if (i - ng - nt >= fl->silent)
            want = ng < fl->garbage ? (ng++, K_GARBAGE) : (nt++, K_TOKEN);
        fd[got] = open_stranger(port, 0);
        k[got] = want;
        got += fd[got] >= 0;
    }
    return got;
}

/* Plays the garbage and wrong-token strangers among the n sockets
 * until rank 0 is done (or `end`); the silent ones are just held. */
static void
play(const int *fd, kind *k, int n, double end)
{
    while (!fl->done && ccol_test_now() < end) {
        int active = 0;

        for (int i = 0; i < n; i++) {
            struct pollfd pf = { .fd = fd[i] };

            if (k[i] == K_SILENT)
                continue;
            active++;
            pf.events = k[i] == K_GARBAGE ? POLLOUT : POLLIN;
            if (poll(&pf, 1, 0) == 1 && !stranger_step(fd[i], k[i],
                                                        pf.revents))
                k[i] = K_SILENT; /* done its part: now just hold it */
        }
        usleep(active > 0 ? 1000 : 20000);
    }
}

/* Whether staller i sends its byte as soon as it is connected (before
 * its challenge while it waits in the backlog) or once its challenge
 * came, and its address: 127.0.0.1 or 127.0.0.2, so that each address
 * has both kinds. */
static bool
stall_early(int i)
{
    return (i / 2) % 2 == 0;
}

static uint32_t
stall_from(int i)
{
    return INADDR_LOOPBACK + (uint32_t)(i % 2);
}

/* Opens n stallers; returns how many connected, and in *n2 how many of
 * them from 127.0.0.2. */
static int
open_stallers(int port, int *fd, int n, int *n2)
{
    int got = 0;

    *n2 = 0;
    for (int i = 0; i < n; i++) {
        fd[i] = open_stranger(port, stall_from(i));
        got += fd[i] >= 0;
        *n2 += fd[i] >= 0 && stall_from(i) != INADDR_LOOPBACK;
    }
    return got;
}

/* Sends each staller's one byte: the first of a frame header ('C' of the
 * magic), when stall_early says. Returns how many are still to send. */
static int
stall_send(const int *fd, bool *sent, int n)
{
    static struct pollfd pf[STALL_MAX];
    static int who[STALL_MAX];
    int m = 0;

    for (int i = 0; i < n; i++) {
        if (sent[i])
            continue;
        pf[m] = (struct pollfd){ .fd = fd[i],
                                 .events = stall_early(i) ? POLLOUT : POLLIN };
        who[m++] = i;
    }
    if (m == 0 || poll(pf, (nfds_t)m, 10) <= 0)
        return m;
    for (int j = 0; j < m; j++) {
        if (pf[j].revents == 0)
            continue;
        if ((pf[j].revents & (POLLERR | POLLHUP)) == 0)
            (void)send(pf[j].fd, "C", 1, MSG_NOSIGNAL);
        sent[who[j]] = true;
        m--;
    }
    return m;
}

/* The one-byte flood: opens the stallers, sends their bytes and holds
 * them until rank 0 is done (or `end`). */
static void
stall_flood(int port, double end)
{
    static int fd[STALL_MAX];
    static bool sent[STALL_MAX];
    int n = fl->stall < STALL_MAX ? fl->stall : STALL_MAX, n2;

    CHECK(open_stallers(port, fd, n, &n2) > n * 9 / 10);
    CHECK(n2 > n * 9 / 20); /* 127.0.0.2 binds on Linux loopback */
    for (int i = 0; i < n; i++)
        sent[i] = fd[i] < 0;
    fl->ready = 1;
    while (!fl->done && ccol_test_now() < end) {
        if (stall_send(fd, sent, n) == 0)
            usleep(20000);
    }
    for (int i = 0; i < n; i++) {
        if (fd[i] >= 0)
            close(fd[i]);
    }
}

/* The flooder: waits for rank 0's listener, opens the flood and plays
 * it until rank 0 is done. */
static void
flooder(int port)
{
    static int fd[FLOOD_MAX];
    static kind k[FLOOD_MAX];
    char why[200];
    int first = -1, n;

    if (fl->silent + fl->garbage + fl->token + fl->stall == 0) {
        fl->ready = 1; /* no flood: the job alone, for comparison */
        return;
    }
    more_fds(fl->stall > 0 ? STALL_MAX : FLOOD_MAX);
    CHECK_OK(ccol__tcp_connect("127.0.0.1", port, ccol__tcp_deadline(10),
                               &first, why, sizeof why),
             NULL);
    fl->t_flood = ccol_test_now();
    if (fl->stall > 0) {
        stall_flood(port, ccol_test_now() + ccol_test_scale(40));
        close(first);
        return;
    }
    n = open_flood(port, fd, k);
    CHECK(n > fl->silent / 2);
    fl->ready = 1;
    play(fd, k, n, ccol_test_now() + ccol_test_scale(40));
    for (int i = 0; i < n; i++)
        close(fd[i]);
    close(first);
}

/* ---- the job ---- */

typedef struct logbuf {
    int n;                     /* warnings received */
    char line[LOG_LINES][512]; /* the first LOG_LINES of them */
} logbuf;

static logbuf logs;

static void
keep_log(void *ud, ccol_log_level level, const char *component,
         const char *msg)
{
    (void)ud;
    (void)component;
    if (level <= CCOL_LOG_WARN && logs.n < LOG_LINES)
        snprintf(logs.line[logs.n], sizeof logs.line[0], "%s", msg);
    if (level <= CCOL_LOG_WARN)
        logs.n++;
}

/* The WARNING line summing up the refusals, or NULL. */
static const char *
summary_line(void)
{
    for (int i = 0; i < logs.n && i < LOG_LINES; i++) {
        if (strstr(logs.line[i], "unauthenticated connections") != NULL)
            return logs.line[i];
    }
    return NULL;
}

/* Rank 0 of a job that formed: the refusals were logged, a few of them
 * one by one and then one summary, not one line per stranger. */
static void
check_logs(void)
{
    const char *sum = summary_line();
    int refused = 0;

    CHECK(logs.n >= 2);
    CHECK(logs.n <= 12);
    CHECK_CONTAINS(logs.line[0], "refused 127.0.0.1:");
    CHECK(sum != NULL);
    if (sum == NULL)
        return;
    CHECK_CONTAINS(sum, "from 127.0.0.1 during the rendezvous");
    CHECK(sscanf(strstr(sum, "refused "), "refused %d", &refused) == 1);
    CHECK(refused >= 100);
    printf("# rank 0: %s\n", sum);
}

/* Rank 0 of a job that formed under the one-byte flood: the stallers
 * were refused as such, counted by address, and the log stayed short. */
static void
check_stall_logs(void)
{
    const char *sum = summary_line();
    int refused = 0;

    CHECK(logs.n >= 2);
    CHECK(logs.n <= 12);
    CHECK(sum != NULL);
    if (sum == NULL)
        return;
    CHECK_CONTAINS(sum, " stalled mid-HELLO");
    CHECK_CONTAINS(sum, "127.0.0.1 (");
    CHECK_CONTAINS(sum, "127.0.0.2 (");
    CHECK(sscanf(strstr(sum, "refused "), "refused %d", &refused) == 1);
    CHECK(refused >= fl->stall / 2);
    printf("# rank 0: %s\n", sum);
}

/* What real rank `rank` got from ccol_comm_create: the job formed, or
 * (with a rank missing) a timeout whose message is kept for the test. */
static void
check_outcome(ccol_comm *c, int rank, ccol_status st)
{
    if (fl->missing < 0) {
        CHECK_OK(st, c);
        if (st == CCOL_OK)
            CHECK_OK(ccol_barrier(c), c);
        if (rank == 0 && fl->stall > 0)
            check_stall_logs();
        else if (rank == 0 && fl->silent > 0)
            check_logs();
        else if (rank == 0)
            CHECK_EQ(logs.n, 0); /* nobody strange, nothing logged */
    } else if (rank < 2) {
        CHECK_STATUS(st, CCOL_ERR_TIMEOUT);
        snprintf(fl->msg[rank], sizeof fl->msg[0], "%s", ccol_comm_errmsg(c));
    }
}

/* Lowers this process's descriptor limit to n. */
static void
fewer_fds(rlim_t n)
{
    struct rlimit rl;

    CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    rl.rlim_cur = n;
    CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0);
}

/* A real rank (0-2) of the 3-rank job; rank 3 of the harness job is
 * the flooder. Ranks 1 and 2 start once the flood is in place. */
static void
dos_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    ccol_status st;
    double t0, end = ccol_test_now() + ccol_test_scale(30);

    (void)unused;
    if (rank == 3) {
        flooder(job->port);
        return;
    }
    if (rank == fl->missing)
        return;
    if (rank == 0 && fl->nofile > 0)
        fewer_fds((rlim_t)fl->nofile);
    if (rank == 0)
        ccol_log_set(keep_log, NULL, CCOL_LOG_WARN);
    ccol_test_params(job, rank, &p);
    p.size = 3;
    while (rank > 0 && !fl->ready && ccol_test_now() < end)
        usleep(2000);
    t0 = ccol_test_now();
    st = ccol_comm_create(&p, &c);
    fl->t_join[rank] = ccol_test_now() - t0;
    if (rank == 0)
        fl->t_formed = ccol_test_now();
    check_outcome(c, rank, st);
    if (rank == 0)
        fl->done = 1;
    ccol_log_set(NULL, NULL, CCOL_LOG_ERROR);
    ccol_comm_destroy(c);
}

/* Runs the 3-rank job (fl) with the flooder as a fourth process. */
static void
run_job(double timeout)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 4;
    job.transport = CCOL_TEST_TCP;
    job.timeout_s = timeout;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, dos_body, &job), 0);
}

/* The job under a flood of silent, garbage and wrong-token strangers
 * (rank 0 with `nofile` descriptors, unless 0). */
static void
run_flood_fds(int silent, int garbage, int token, int missing,
              double timeout, int nofile)
{
    fl = ccol_test_shared(sizeof *fl);
    fl->nofile = nofile;
    fl->silent = silent;
    fl->garbage = garbage;
    fl->token = token;
    fl->missing = missing;
    run_job(timeout);
}

static void
run_flood(int silent, int garbage, int token, int missing, double timeout)
{
    run_flood_fds(silent, garbage, token, missing, timeout, 0);
}

/* 1,000 silent strangers and 200 talking ones ahead of ranks 1 and 2:
 * the job forms, well within its deadline. */
CCOL_TEST(flood_job_forms)
{
    run_flood(1000, 100, 100, -1, 20);
    printf("# flood: ranks 1 and 2 joined in %.2f s and %.2f s, rank 0 "
           "formed the job %.2f s after the flood began\n",
           fl->t_join[1], fl->t_join[2], fl->t_formed - fl->t_flood);
    CHECK(fl->t_join[1] < ccol_test_scale(15));
    CHECK(fl->t_join[2] < ccol_test_scale(15));
}

/* The same job without the flood, for the comparison in
 * docs/reliability.md. */
CCOL_TEST(no_flood_job_forms)
{
    run_flood(0, 0, 0, -1, 20);
    printf("# no flood: ranks 1 and 2 joined in %.2f s and %.2f s\n",
           fl->t_join[1], fl->t_join[2]);
}

/* Rank 2 never comes while strangers flood: ranks 0 and 1 time out
 * naming rank 2 and the refused strangers, and rank 1, which joined, is
 * not blamed (a wrong-token stranger even claimed to be rank 1). */
CCOL_TEST(flood_missing_rank)
{
    char want[128];

    run_flood(300, 30, 30, 2, 4);
    /* the deadline is scaled by CCOL_TEST_TIMEOUT_MULT, and so is its text */
    snprintf(want, sizeof want, "rendezvous timed out after %.1f s: rank(s) "
             "2 did not join (1 of 2 joined); refused ", ccol_test_scale(4));
    for (int r = 0; r < 2; r++) {
        const char *m = fl->msg[r];

        CHECK_CONTAINS(m, want);
        CHECK_CONTAINS(m, " unauthenticated connections (");
        /* Not exact counts: on a loaded machine a wrong-token stranger
         * may answer late and be evicted as silent. */
        CHECK_CONTAINS(m, " with the wrong token");
        CHECK_CONTAINS(m, " sending garbage");
        CHECK_CONTAINS(m, ") from 127.0.0.1");
        CHECK(strstr(m, "rank 1") == NULL);
        CHECK(strstr(m, "rank(s) 1") == NULL);
        CHECK(strstr(m, "reset") == NULL);
    }
    printf("# %s\n", fl->msg[0]);
}

/* 3,000 strangers that each send one byte of a frame and stall, half
 * from 127.0.0.1 and half from 127.0.0.2, half as soon as connected and
 * half once challenged, queued ahead of ranks 1 and 2: rank 0 evicts a
 * staller as soon as a silent one when its slots are wanted (one that
 * spoke before its challenge at once), so the job forms well within its
 * 20 s deadline (before, each staller held its slot 2 s: 128 a second). */
CCOL_TEST(stall_flood_job_forms)
{
    struct rlimit rl;

    /* the flooder raises its limit to the hard one, if need be */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max < STALL_MAX + 64) {
        ccol_test_skip("the descriptor limit is below 3,064");
        return;
    }
    fl = ccol_test_shared(sizeof *fl);
    fl->stall = STALL_MAX;
    fl->missing = -1;
    run_job(20);
    printf("# one-byte flood: ranks 1 and 2 joined in %.2f s and %.2f s, "
           "rank 0 formed the job %.2f s after the flood began\n",
           fl->t_join[1], fl->t_join[2], fl->t_formed - fl->t_flood);
    CHECK(fl->t_join[1] < ccol_test_scale(8));
    CHECK(fl->t_join[2] < ccol_test_scale(8));
}

/* The flood of flood_job_forms on a rank 0 that may open only 128
 * descriptors: out of them, its table counts as full, so the silent
 * strangers are evicted for the ones behind them instead of holding
 * every descriptor until the deadline. */
CCOL_TEST(flood_few_fds)
{
    run_flood_fds(1000, 100, 100, -1, 20, 128);
    printf("# flood, 128 descriptors: ranks 1 and 2 joined in %.2f s and "
           "%.2f s\n", fl->t_join[1], fl->t_join[2]);
    CHECK(fl->t_join[1] < ccol_test_scale(10));
    CHECK(fl->t_join[2] < ccol_test_scale(10));
}

CCOL_TEST_MAIN(CCOL_T_TIMEOUT(flood_job_forms, 90),
               CCOL_T_TIMEOUT(stall_flood_job_forms, 90),
               CCOL_T_TIMEOUT(flood_few_fds, 90),
               CCOL_T_TIMEOUT(no_flood_job_forms, 60),
               CCOL_T_TIMEOUT(flood_missing_rank, 60))
