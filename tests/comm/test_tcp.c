/*
 * test_tcp.c - the tcp transport in forked processes on loopback: star and
 * tree jobs, a late rank 0, and the failure contract of the rendezvous and
 * the data path. Fake peers built from raw sockets play a stranger with
 * the wrong token, a client or a rank 0 of another protocol version, a rank
 * claimed twice, a rank with another world size, and a rank that sends
 * garbage, truncated or oversized frames in the middle of a collective.
 * A rank killed with SIGKILL must be named quickly by the others. The links
 * of sub-communicators (tcp_sub.c) form among their members only, through
 * the listeners every rank keeps, and exchange frames over a small
 * up-and-down harness written against the link contract.
 */
#include "harness.h"

#include "comm/comm.h"
#include "comm/tcp_link.h"
#include "raw_peer.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ---- */

/* Params of a tcp rank outside the harness. */
static ccol_comm_params
tcp_params(int rank, int size, int port, double timeout)
{
    ccol_comm_params p;

    memset(&p, 0, sizeof p);
    p.mask = CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE |
             CCOL_COMM_PARAM_TRANSPORT | CCOL_COMM_PARAM_PORT |
             CCOL_COMM_PARAM_TIMEOUT;
    p.rank = rank;
    p.size = size;
    p.transport = CCOL_TRANSPORT_TCP;
    p.port = port;
    p.timeout_s = timeout;
    return p;
}

static void
tree_shape(ccol_comm_params *p)
{
    p->mask |= CCOL_COMM_PARAM_TREE_THRESHOLD | CCOL_COMM_PARAM_TREE_FANOUT;
    p->tree_threshold = 2;
    p->tree_fanout = 2;
}

/* Number of open file descriptors of this process: a communicator must
 * close every socket it opened, on success and on failure. */
static int
count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;

    if (d == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* Waits until *flag is set (by another process) or `s` seconds pass. */
static void
wait_flag(volatile int *flag, double s)
{
    double end = ccol_test_now() + s;
    while (!*flag && ccol_test_now() < end)
        usleep(2000);
}

/* What a hand-made peer says it is when it builds frames: a rank's
 * identity, the token it keys its answers with, its frames' sequence
 * number. */
typedef struct fake_rank {
    ccol__ident id;
    const char *token_str;
    uint64_t seq;
} fake_rank;

static fake_rank
fake_comm(int rank, int size, uint64_t comm_id, const char *token)
{
    fake_rank c;

    memset(&c, 0, sizeof c);
    c.id.rank = rank;
    c.id.size = size;
    c.id.comm_id = comm_id;
    c.id.max_payload = 1 << 20;
    c.token_str = token;
    return c;
}

/* Encodes a frame; with version != protocol, patches it in and fixes the
 * header checksum so only the version is wrong. */
static uint8_t *
make_frame(const fake_rank *c, uint16_t kind, uint16_t op, unsigned version,
           const void *payload, size_t len, size_t *flen)
{
    ccol__hdr h;
    uint8_t *f;

    ccol__hdr_init(&h, &c->id, kind, op, c->seq, 0, 0, "", 0);
    f = ccol__frame_encode(&h, payload, len, flen);
    if (f != NULL && version != CCOL_PROTOCOL_VERSION) {
        ccol__st16(f + 4, (uint16_t)version);
        ccol__st32(f + 68, ccol__crc32c(0, f, 68));
    }
    return f;
}

static bool
send_all(int fd, const void *p, size_t n)
{
    int err;
    return ccol__tcp_write(fd, p, n, ccol__tcp_deadline(5), &err) ==
           CCOL__IO_OK;
}

static ccol_status
read_msg(int fd, ccol__msg *m)
{
    char why[256];
    return ccol__tcp_read_frame(fd, 1 << 20, ccol__tcp_deadline(5), true, m,
                                NULL, why, sizeof why);
}

/* When set, fake_join's HELLO has its host rewritten after it was sealed,
 * as a process on the way between the ranks would. */
static const char *hello_rewrite;

/*
 * A hand-made client: connects to rank 0 at port, answers its challenge
 * with an HMAC of `token`, claiming `rank` of `size` in protocol `version`.
 * Returns the socket and the reply (WELCOME or REFUSE) in *reply, the
 * communicator id rank 0 used in *comm_id; -1 on failure.
 */
static int
fake_join(int port, int rank, int size, const char *token, unsigned version,
          ccol__msg *reply, uint64_t *comm_id)
{
    ccol__tcp_hello h;
    ccol__msg ch;
    fake_rank fc;
    uint8_t *pl, *f;
    size_t len, flen;
    char why[200];
    int fd = -1;

    CHECK_OK(ccol__tcp_connect("127.0.0.1", port, ccol__tcp_deadline(5), &fd,
                               why, sizeof why),
             NULL);
    if (fd < 0 || read_msg(fd, &ch) != CCOL_OK) {
        ccol_test_fail(__FILE__, __LINE__, "no challenge from rank 0");
        return -1;
    }
    CHECK_EQ(ch.h.kind, CCOL__K_CHALLENGE);
    CHECK_EQ(ch.h.len, CCOL__TCP_NONCE);
    *comm_id = ch.h.comm_id;
    fc = fake_comm(rank, size, ch.h.comm_id, token);
    memset(&h, 0, sizeof h);
    h.rank = (uint32_t)rank;
    h.size = (uint32_t)size;
    h.pid = (uint32_t)getpid();
    snprintf(h.host, sizeof h.host, "fakehost");
    CHECK(ccol__tcp_random(h.nonce, sizeof h.nonce));
    pl = ccol__tcp_hello_seal(&h, fc.token_str, ch.payload,
                              (uint32_t)rank, ch.h.comm_id, &len);
    free(ch.payload);
    if (hello_rewrite != NULL) { /* on the way: the host, the MAC kept */
        snprintf(h.host, sizeof h.host, "%s", hello_rewrite);
        free(pl);
        pl = ccol__tcp_hello_encode(&h, &len);
    }
    f = make_frame(&fc, CCOL__K_HELLO, CCOL__OP_RENDEZVOUS, version, pl, len,
                   &flen);
    CHECK(send_all(fd, f, flen));
    free(pl);
    free(f);
    CHECK_OK(read_msg(fd, reply), NULL);
    return fd;
}

typedef void (*proc_fn)(int rank, void *arg);

/* Runs fn(rank, arg) in n forked processes and collects their wait
 * statuses (-1: killed after `limit` seconds). */
static void
spawn(int n, proc_fn fn, void *arg, double limit, int *st)
{
    pid_t pid[16];
    double end = ccol_test_now() + ccol_test_scale(limit);

    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < n; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            fn(r, arg);
            fflush(stderr);
            _exit(ccol_test_failures() ? 1 : 0);
        }
    }
    for (int r = 0; r < n; r++) {
        st[r] = -1;
        while (waitpid(pid[r], &st[r], WNOHANG) == 0) {
            if (ccol_test_now() > end) {
                kill(pid[r], SIGKILL);
                waitpid(pid[r], NULL, 0);
                st[r] = -1;
                break;
            }
            usleep(2000);
        }
    }
}

/* ---- jobs that work ---- */

/* allgatherv of uneven blobs, bcast, allreduce and barrier. */
static void
exercise(ccol_comm *c, int rank, void *arg)
{
    int size = ccol_comm_size(c);
    uint8_t mine[16];
    size_t lens[16], off = 0, blen = 0;
    uint8_t *all = NULL, *b = NULL;
    int64_t v = rank + 1;

    (void)arg;
    memset(mine, rank, sizeof mine);
    CHECK_STR_EQ(ccol_comm_transport(c), "tcp");
    CHECK_OK(ccol_allgatherv(c, mine, (size_t)rank % 4, (void **)&all, lens),
             c);
    for (int r = 0; r < size && all != NULL; r++) {
        CHECK_EQ(lens[r], r % 4);
        for (size_t i = 0; i < lens[r]; i++)
            CHECK_EQ(all[off + i], r);
        off += lens[r];
    }
    CHECK_OK(ccol_bcast(c, size - 1, "root", 4, (void **)&b, &blen), c);
    CHECK(blen == 4 && b != NULL && memcmp(b, "root", 4) == 0);
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
    CHECK_EQ(v, (int64_t)size * (size + 1) / 2);
    CHECK_OK(ccol_barrier(c), c);
    ccol_free(all);
    ccol_free(b);
}

/* Runs `exercise` on size ranks; fanout 0 is a star, else a tree. */
static void
run_job(int size, int fanout)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = size;
    job.transport = CCOL_TEST_TCP;
    if (fanout > 0) {
        tree_shape(&job.params);
        job.params.tree_fanout = fanout;
    }
    CHECK_EQ(ccol_test_ranks(&job, exercise, NULL), 0);
}

CCOL_TEST(star_3)
{
    run_job(3, 0);
}

CCOL_TEST(tree_3)
{
    run_job(3, 2);
}

CCOL_TEST(tree_8)
{
    run_job(8, 2);
}

CCOL_TEST(tree_11_fanout_3)
{
    run_job(11, 3);
}

static void
big_body(ccol_comm *c, int rank, void *arg)
{
    int size = ccol_comm_size(c);
    int64_t v = rank;

    (void)arg;
    CHECK_OK(ccol_allreduce_i64(c, &v, 1, CCOL_OP_SUM), c);
    CHECK_EQ(v, (int64_t)size * (size - 1) / 2);
    CHECK_OK(ccol_barrier(c), c);
}

/* Many ranks joining at once (rank 0 serves 256 unauthenticated
 * connections at a time; test_tcp_dos.c fills them with strangers).
 * Star, then the default tree. */
CCOL_TEST(many_ranks)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 80;
    job.transport = CCOL_TEST_TCP;
    job.timeout_s = 30;
    job.params.mask = CCOL_COMM_PARAM_TREE_THRESHOLD;
    job.params.tree_threshold = 100;
    CHECK_EQ(ccol_test_ranks(&job, big_body, NULL), 0);
    job.params.mask = 0;
    CHECK_EQ(ccol_test_ranks(&job, big_body, NULL), 0);
}

static void
late_root_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;

    int fds = count_fds();

    (void)unused;
    ccol_test_params(job, rank, &p);
    if (rank == 0)
        usleep(1000 * 1000);
    CHECK_OK(ccol_comm_create(&p, &c), c);
    if (ccol_comm_status(c) == CCOL_OK)
        exercise(c, rank, NULL);
    ccol_comm_destroy(c);
    CHECK_EQ(count_fds(), fds);
}

/* Rank 0 starts 1 s after the others: they keep retrying. */
CCOL_TEST(late_root)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, late_root_body, &job), 0);
}

/* ---- rendezvous failures ---- */

typedef struct shared {
    volatile int flag; /* set by one process, awaited by another */
    volatile int pid[8];
} shared;

static shared *sh;

static void
token_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    ccol_status st;
    int fds = count_fds();

    (void)unused;
    ccol_test_params(job, rank, &p);
    p.size = 3;
    p.mask |= CCOL_COMM_PARAM_TOKEN;
    p.token = rank == 3 ? "not-the-job-token" : "job-token-1234";
    if (rank == 3)
        p.rank = 1; /* the stranger claims rank 1 before the real one */
    if (rank == 1)
        wait_flag(&sh->flag, 8);
    st = ccol_comm_create(&p, &c);
    if (rank == 3) {
        CHECK_STATUS(st, CCOL_ERR_PEER);
        CHECK_CONTAINS(ccol_comm_errmsg(c), "rank 0 at 127.0.0.1");
        CHECK_CONTAINS(ccol_comm_errmsg(c), "refused rank 1");
        CHECK_CONTAINS(ccol_comm_errmsg(c), "token");
        sh->flag = 1;
    } else {
        CHECK_OK(st, c);
        if (st == CCOL_OK)
            CHECK_OK(ccol_barrier(c), c);
    }
    ccol_comm_destroy(c);
    CHECK_EQ(count_fds(), fds);
}

/* A HELLO whose host was rewritten on the way (which would move the rank
 * to another host's group: tcp+shm turned into flat tcp) fails the
 * token's MAC and is refused; the rank's own untouched HELLO then joins. */
static void
rewrite_body(ccol_comm *unused, int rank, void *arg)
{
    static const char token[] = "job-token-rewrite";
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    ccol__msg m;
    uint64_t id;

    (void)unused;
    if (rank == 1) {
        int fd;
        hello_rewrite = "elsewhere";
        fd = fake_join(job->port, 1, 2, token, CCOL_PROTOCOL_VERSION, &m, &id);
        hello_rewrite = NULL;
        CHECK_EQ(m.h.kind, CCOL__K_REFUSE);
        CHECK(m.payload != NULL &&
              memmem(m.payload, m.h.len, "does not authenticate", 21) != NULL);
        free(m.payload);
        if (fd >= 0)
            close(fd);
    }
    ccol_test_params(job, rank, &p);
    p.mask |= CCOL_COMM_PARAM_TOKEN;
    p.token = token;
    CHECK_OK(ccol_comm_create(&p, &c), c);
    CHECK_OK(ccol_barrier(c), c);
    ccol_comm_destroy(c);
}

CCOL_TEST(hello_rewritten_on_the_way_is_refused)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 2;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, rewrite_body, &job), 0);
}

/* A process with another token is refused; the real job still forms. */
CCOL_TEST(wrong_token)
{
    ccol_test_job job;

    sh = ccol_test_shared(sizeof *sh);
    memset(&job, 0, sizeof job);
    job.size = 4;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, token_body, &job), 0);
}

static void
stranger_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    static const char junk[] = "GET / HTTP/1.0\r\n\r\n"
                               "................................"
                               "................................"
                               "................................";
    ccol_comm_params p;
    ccol_comm *c = NULL;
    char why[200];
    int fd = -1;
    double t0;

    (void)unused;
    if (rank >= 2) {
        CHECK_OK(ccol__tcp_connect("127.0.0.1", job->port,
                                   ccol__tcp_deadline(5), &fd, why, sizeof why),
                 NULL);
        if (rank == 3)
            CHECK(send_all(fd, junk, sizeof junk));
        __atomic_add_fetch(&sh->flag, 1, __ATOMIC_SEQ_CST);
        raw_drain(fd);
        close(fd);
        return;
    }
    ccol_test_params(job, rank, &p);
    p.size = 2;
    while (rank == 1 && sh->flag < 2)
        usleep(2000);
    t0 = ccol_test_now();
    CHECK_OK(ccol_comm_create(&p, &c), c);
    if (ccol_comm_status(c) == CCOL_OK)
        CHECK_OK(ccol_barrier(c), c);
    CHECK(ccol_test_now() - t0 < ccol_test_scale(3.0));
    ccol_comm_destroy(c);
}

/* A silent stranger and one sending junk do not delay the real ranks. */
CCOL_TEST(strangers)
{
    ccol_test_job job;

    sh = ccol_test_shared(sizeof *sh);
    memset(&job, 0, sizeof job);
    job.size = 4;
    job.transport = CCOL_TEST_TCP;
    job.timeout_s = 10;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, stranger_body, &job), 0);
}

static void
version_client_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    ccol__msg m;
    uint64_t id;
    char v[32];
    int fd;

    (void)unused;
    if (rank == 1) {
        fd = fake_join(job->port, 1, 2, NULL, 99, &m, &id);
        CHECK_EQ(m.h.kind, CCOL__K_REFUSE);
        CHECK_EQ(-(int64_t)m.h.arg, CCOL_ERR_VERSION);
        CHECK(m.payload != NULL &&
              memmem(m.payload, m.h.len, "version 99", 10) != NULL);
        snprintf(v, sizeof v, "version %d ", CCOL_PROTOCOL_VERSION);
        CHECK(m.payload != NULL &&
              memmem(m.payload, m.h.len, v, strlen(v)) != NULL);
        free(m.payload);
        close(fd);
    }
    ccol_test_params(job, rank, &p);
    CHECK_OK(ccol_comm_create(&p, &c), c);
    if (ccol_comm_status(c) == CCOL_OK)
        CHECK_OK(ccol_barrier(c), c);
    ccol_comm_destroy(c);
}

/* A client of protocol version 99 is refused naming both versions; rank 0
 * goes on and the real rank 1 joins. */
CCOL_TEST(version_client)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 2;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, version_client_body, &job), 0);
}

/* A fake rank 0: challenges its first client in protocol `version` and
 * returns the socket (the HELLO, if any, is read into *hello). */
static int
fake_root(int port, unsigned version, ccol__msg *hello)
{
    fake_rank fc = fake_comm(0, 2, 42, NULL);
    uint8_t nonce[CCOL__TCP_NONCE] = { 1, 2, 3 }, *f;
    char why[200];
    size_t flen;
    int lfd, bound, fd;

    CHECK_OK(ccol__tcp_listen("127.0.0.1", port, &lfd, &bound, why, sizeof why),
             NULL);
    fd = raw_accept(lfd, 5000);
    close(lfd);
    CHECK(fd >= 0);
    f = make_frame(&fc, CCOL__K_CHALLENGE, CCOL__OP_RENDEZVOUS, version, nonce,
                   sizeof nonce, &flen);
    CHECK(send_all(fd, f, flen));
    free(f);
    memset(hello, 0, sizeof *hello);
    if (version == CCOL_PROTOCOL_VERSION)
        CHECK_OK(read_msg(fd, hello), NULL);
    return fd;
}

static void
version_root_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    ccol__msg m;

    (void)unused;
    if (rank == 0) {
        int fd = fake_root(job->port, 99, &m);
        raw_drain(fd);
        close(fd);
        return;
    }
    ccol_test_params(job, rank, &p);
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_VERSION);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "protocol version 99");
    CHECK_CONTAINS(ccol_comm_errmsg(c), "rank 0 at 127.0.0.1");
    ccol_comm_destroy(c);
}

/* A rank 0 speaking version 99 makes the client fail with VERSION. */
CCOL_TEST(version_root)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 2;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, version_root_body, &job), 0);
}

static void
secret_body(ccol_comm *unused, int rank, void *arg)
{
    static const char token[] = "s3cret-job-token-xyzzy";
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    ccol__tcp_hello h;
    ccol__msg m;
    uint8_t nonce[CCOL__TCP_NONCE] = { 1, 2, 3 }, mac[CCOL__TCP_MAC];
    fake_rank fc = fake_comm(0, 2, 0, token);

    (void)unused;
    if (rank == 0) {
        int fd = fake_root(job->port, CCOL_PROTOCOL_VERSION, &m);
        CHECK(m.payload == NULL ||
              memmem(m.payload, m.h.len, token, strlen(token)) == NULL);
        CHECK(ccol__tcp_hello_decode(m.payload, m.h.len, &h) == NULL);
        ccol__tcp_hello_mac(fc.token_str, nonce, m.payload,
                            m.h.len - CCOL__TCP_MAC, m.h.from, m.h.comm_id,
                            mac);
        CHECK(memcmp(mac, h.mac, sizeof mac) == 0);
        ccol__tcp_refuse(&fc.id, fd, CCOL_ERR_PEER, "seen enough");
        free(m.payload);
        raw_drain(fd);
        close(fd);
        return;
    }
    ccol_test_params(job, rank, &p);
    p.mask |= CCOL_COMM_PARAM_TOKEN;
    p.token = token;
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_PEER);
    /* a fake rank 0's refusal is shown as such: who, and unproven */
    CHECK_CONTAINS(ccol_comm_errmsg(c),
                   "refused rank 1 (unauthenticated): seen enough");
    ccol_comm_destroy(c);
}

/* The token never crosses the wire; the HELLO carries its HMAC. */
CCOL_TEST(token_not_sent)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 2;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, secret_body, &job), 0);
}

static void
dup_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    char pid[32];
    ccol_status st;

    (void)unused;
    sh->pid[rank] = (int)getpid();
    ccol_test_params(job, rank, &p);
    p.timeout_s = 3;
    if (rank == 3)
        p.rank = 2; /* a second process claims rank 2 */
    st = ccol_comm_create(&p, &c);
    CHECK(st != CCOL_OK);
    if (rank == 0 || rank >= 2) {
        CHECK_STATUS(st, CCOL_ERR_PEER);
        CHECK_CONTAINS(ccol_comm_errmsg(c), "rank 2 was claimed twice");
        snprintf(pid, sizeof pid, "pid %d ", sh->pid[2]);
        CHECK_CONTAINS(ccol_comm_errmsg(c), pid);
        snprintf(pid, sizeof pid, "pid %d ", sh->pid[3]);
        CHECK_CONTAINS(ccol_comm_errmsg(c), pid);
    }
    ccol_comm_destroy(c);
}

/* Two processes claim rank 2 (rank 3 never comes): rank 0 fails naming
 * both, and refuses everyone. */
CCOL_TEST(duplicate_rank)
{
    ccol_test_job job;

    sh = ccol_test_shared(sizeof *sh);
    memset(&job, 0, sizeof job);
    job.size = 4;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, dup_body, &job), 0);
}

static void
size_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    ccol_status st;

    (void)unused;
    ccol_test_params(job, rank, &p);
    p.timeout_s = 3;
    if (rank == 2)
        p.size = 4;
    st = ccol_comm_create(&p, &c);
    CHECK(st != CCOL_OK);
    if (rank != 1) {
        CHECK_STATUS(st, CCOL_ERR_PEER);
        CHECK_CONTAINS(ccol_comm_errmsg(c),
                       "rank 2 says the world size is 4, rank 0 says 3");
    }
    ccol_comm_destroy(c);
}

CCOL_TEST(wrong_size)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, size_body, &job), 0);
}

/* Nobody at the other end: both sides time out with clear messages. */
CCOL_TEST(rendezvous_timeouts)
{
    int port = ccol_test_free_port();
    ccol_comm_params p = tcp_params(1, 3, port, 0.5);
    ccol_comm *c = NULL;
    char want[128];
    double t0 = ccol_test_now();
    int fds = count_fds();

    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_TIMEOUT);
    snprintf(want, sizeof want,
             "rank 0 at 127.0.0.1:%d did not accept within 0.5 s", port);
    CHECK_CONTAINS(ccol_comm_errmsg(c), want);
    ccol_comm_destroy(c);
    p = tcp_params(0, 3, port, 0.5);
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_TIMEOUT);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "rank(s) 1-2 did not join");
    ccol_comm_destroy(c);
    CHECK_EQ(count_fds(), fds);
    CHECK(ccol_test_now() - t0 < ccol_test_scale(2.5));
}

static void
missing_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;

    (void)unused;
    if (rank == 2)
        return; /* never joins */
    ccol_test_params(job, rank, &p);
    p.timeout_s = 1;
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_TIMEOUT);
    CHECK_CONTAINS(ccol_comm_errmsg(c), ": rendezvous timed out after 1.0 s: "
                                        "rank(s) 2 did not join (1 of 2 "
                                        "joined)");
    ccol_comm_destroy(c);
}

/* A rank that never comes is named by every rank that did. */
CCOL_TEST(missing_rank_named)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, missing_body, &job), 0);
}

/* ---- a fake peer that misbehaves in the middle of a collective ---- */

typedef enum bad {
    BAD_MAGIC,       /* 72 bytes that are not a frame */
    BAD_HDR_CRC,     /* a frame with one header byte flipped */
    BAD_PAYLOAD,     /* a frame whose payload does not match its crc */
    BAD_TRUNC_EOF,   /* half a header, then the connection closes */
    BAD_TRUNC_STALL, /* half a header, then silence */
    BAD_OVERSIZE,    /* a header announcing a 2 GiB payload */
    BAD_LABEL        /* a header announcing a 60000-byte label */
} bad;

static const char *const bad_want[] = {
    "rank 1 sent a bad frame: bad magic",
    "rank 1 sent a bad frame: header checksum mismatch",
    "rank 1 sent a corrupt payload",
    "rank 1 closed its connection in the middle of a frame",
    "rank 1 sent a truncated frame (60 of 72 header bytes",
    "exceeds the limit of 1048576",
    "label of 60000 bytes exceeds the limit of 512",
};

static bad cur_bad;

/* Sends rank 0 the misbehaving bytes of cur_bad. */
static void
misbehave(int fd, uint64_t comm_id)
{
    fake_rank fc = fake_comm(1, 2, comm_id, NULL);
    uint8_t junk[CCOL__HDR_SIZE], *f;
    size_t flen;

    fc.seq = 1;
    f = make_frame(&fc, CCOL__K_UP, CCOL__OP_BARRIER, CCOL_PROTOCOL_VERSION,
                   "payload", 7, &flen);
    memset(junk, 0xAB, sizeof junk);
    if (cur_bad == BAD_HDR_CRC)
        f[40] ^= 1;
    if (cur_bad == BAD_PAYLOAD)
        f[CCOL__HDR_SIZE + 2] ^= 1;
    if (cur_bad == BAD_OVERSIZE) {
        ccol__st32(f + 56, 0x7FFFFFF0u);
        ccol__st32(f + 68, ccol__crc32c(0, f, 68));
    }
    if (cur_bad == BAD_LABEL) {
        ccol__st16(f + 14, 60000);
        ccol__st32(f + 68, ccol__crc32c(0, f, 68));
    }
    if (cur_bad == BAD_MAGIC)
        CHECK(send_all(fd, junk, sizeof junk));
    else if (cur_bad == BAD_TRUNC_EOF || cur_bad == BAD_TRUNC_STALL)
        CHECK(send_all(fd, f, 60));
    else
        CHECK(send_all(fd, f, flen));
    free(f);
    if (cur_bad != BAD_TRUNC_EOF)
        raw_drain(fd);
}

static void
bad_peer_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    ccol__msg m;
    uint64_t id;
    double t0;

    (void)unused;
    if (rank == 1) {
        int fd =
            fake_join(job->port, 1, 2, NULL, CCOL_PROTOCOL_VERSION, &m, &id);
        CHECK_EQ(m.h.kind, CCOL__K_WELCOME);
        free(m.payload);
        misbehave(fd, id);
        close(fd);
        return;
    }
    ccol_test_params(job, rank, &p);
    p.mask |= CCOL_COMM_PARAM_MAX_PAYLOAD;
    p.max_payload = 1 << 20;
    CHECK_OK(ccol_comm_create(&p, &c), c);
    t0 = ccol_test_now();
    CHECK_STATUS(ccol_barrier(c), CCOL_ERR_PEER);
    CHECK_CONTAINS(ccol_comm_errmsg(c), bad_want[cur_bad]);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "rank 1");
    CHECK(ccol_test_now() - t0 <
          ccol_test_scale(cur_bad == BAD_TRUNC_STALL ? 3.0 : 1.0));
    ccol_comm_destroy(c);
}

static void
run_bad(bad b)
{
    ccol_test_job job;

    cur_bad = b;
    memset(&job, 0, sizeof job);
    job.size = 2;
    job.transport = CCOL_TEST_TCP;
    job.timeout_s = b == BAD_TRUNC_STALL ? 1.5 : 10;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, bad_peer_body, &job), 0);
}

CCOL_TEST(peer_bad_magic)
{
    run_bad(BAD_MAGIC);
}

CCOL_TEST(peer_bad_header_crc)
{
    run_bad(BAD_HDR_CRC);
}

CCOL_TEST(peer_corrupt_payload)
{
    run_bad(BAD_PAYLOAD);
}

CCOL_TEST(peer_truncated_eof)
{
    run_bad(BAD_TRUNC_EOF);
}

CCOL_TEST(peer_truncated_stall)
{
    run_bad(BAD_TRUNC_STALL);
}

CCOL_TEST(peer_oversized)
{
    run_bad(BAD_OVERSIZE);
}

CCOL_TEST(peer_oversized_label)
{
    run_bad(BAD_LABEL);
}

/* ---- a rank killed mid-collective ---- */

typedef struct kill_job {
    int size;
    int victim;
    int port;
    bool tree;
} kill_job;

static void
killed_body(int rank, void *arg)
{
    kill_job *k = arg;
    ccol_comm_params p = tcp_params(rank, k->size, k->port, 10);
    ccol_comm *c = NULL;
    char name[32];
    ccol_status st;
    double t0;

    if (k->tree)
        tree_shape(&p);
    CHECK_OK(ccol_comm_create(&p, &c), c);
    CHECK_OK(ccol_barrier(c), c);
    if (rank == k->victim)
        raise(SIGKILL);
    t0 = ccol_test_now();
    st = ccol_barrier(c);
    CHECK(st == CCOL_ERR_PEER || st == CCOL_ERR_TIMEOUT);
    snprintf(name, sizeof name, "rank %d ", k->victim);
    CHECK_CONTAINS(ccol_comm_errmsg(c), name);
    CHECK(ccol_test_now() - t0 < ccol_test_scale(2.0));
    ccol_comm_destroy(c);
}

static void
run_killed(int size, int victim, bool tree)
{
    kill_job k = { size, victim, ccol_test_free_port(), tree };
    int st[16];

    spawn(size, killed_body, &k, 30, st);
    for (int r = 0; r < size; r++) {
        if (r == victim) {
            CHECK(st[r] != -1 && WIFSIGNALED(st[r]) &&
                  WTERMSIG(st[r]) == SIGKILL);
            continue;
        }
        if (st[r] == -1 || !WIFEXITED(st[r]) || WEXITSTATUS(st[r]) != 0)
            ccol_test_fail(__FILE__, __LINE__, "rank %d failed (status %d)", r,
                           st[r]);
    }
}

CCOL_TEST(killed_rank_star)
{
    run_killed(3, 2, false);
}

CCOL_TEST(killed_rank_tree)
{
    run_killed(8, 7, true);
}

/* An inner node of the tree (rank 1: parent of 3 and 4) dies. */
CCOL_TEST(killed_inner_rank_tree)
{
    run_killed(8, 1, true);
}

/* ---- a job without a token where others can reach it ---- */

static int no_token_warnings;

static void
count_no_token(void *ud, ccol_log_level level, const char *component,
               const char *msg)
{
    (void)ud;
    (void)component;
    if (level == CCOL_LOG_WARN && strstr(msg, "has no token") != NULL &&
        strstr(msg, "CCOL_TOKEN") != NULL)
        no_token_warnings++;
}

/* One rank of a tcp job at addr, with or without a token. */
static void
one_rank_job(const char *addr, const char *token)
{
    ccol_comm_params p = tcp_params(0, 1, ccol_test_free_port(), 5);
    ccol_comm *c = NULL;

    p.mask |= CCOL_COMM_PARAM_ADDR;
    p.addr = addr;
    if (token != NULL) {
        p.mask |= CCOL_COMM_PARAM_TOKEN;
        p.token = token;
    }
    CHECK_OK(ccol_comm_create(&p, &c), c);
    ccol_comm_destroy(c);
}

/* Warned once per process, only without a token and off loopback. */
CCOL_TEST(no_token_off_loopback_is_warned_once)
{
    pid_t pid;
    int st;

    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        ccol_log_set(count_no_token, NULL, CCOL_LOG_WARN);
        one_rank_job("127.0.0.1", NULL);
        one_rank_job("0.0.0.0", "a secret");
        st = no_token_warnings == 0;
        one_rank_job("0.0.0.0", NULL);
        one_rank_job("0.0.0.0", NULL);
        st = st && no_token_warnings == 1 && ccol_test_failures() == 0;
        _exit(st ? 0 : 1);
    }
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
          WEXITSTATUS(st) == 0);
}

/* ---- sub-communicators' links ---- */

/* A sub-communicator of the job communicator c: members[0..n-1] (job
 * ranks), its own comm_id, the job's token and tree parameters. */
typedef struct sub_comm {
    ccol__link *link;  /* its tcp link, NULL when the formation failed */
    ccol__shape shape; /* its tree */
    ccol__err err;     /* why the formation failed */
    ccol_status st;    /* the formation's status */
    double took;       /* seconds the formation took */
} sub_comm;

/* Forms this rank's link of the sub-communicator with the given members
 * and id, with the deadline `timeout` (0: the job's). */
static void
sub_form(ccol_comm *c, const int *members, int n, uint64_t comm_id,
         double timeout, sub_comm *s)
{
    ccol__link_cfg cfg;
    int me = -1;
    double t0 = ccol_test_now();

    memset(s, 0, sizeof *s);
    for (int i = 0; i < n; i++)
        me = members[i] == c->id.rank ? i : me;
    CHECK(me >= 0);
    memset(&cfg, 0, sizeof cfg);
    cfg.id = c->id;
    cfg.id.rank = me;
    cfg.id.size = n;
    cfg.id.comm_id = comm_id;
    cfg.id.global_of = members;
    cfg.timeout_s = timeout > 0 ? timeout : c->timeout_s;
    cfg.token_str = c->token_str;
    cfg.threshold = c->threshold;
    cfg.fanout = c->fanout;
    cfg.owner = (int)getpid();
    CHECK_OK(ccol__shape_setup(&s->shape, me, n, c->threshold, c->fanout,
                               &s->err),
             NULL);
    s->st = ccol__tcp_attach_sub(&cfg, &s->shape, c->link, members, NULL,
                                 &s->link, &s->err);
    s->took = ccol_test_now() - t0;
}

static void
sub_free(sub_comm *s)
{
    ccol__link_destroy(s->link, false);
    ccol__shape_free(&s->shape);
}

/* Sends peer one frame of operation op (sequence seq) carrying v. */
static ccol_status
sub_send(ccol__link *l, int peer, uint16_t kind, uint16_t op, uint64_t seq,
         int64_t v, ccol__err *err)
{
    ccol__hdr h;
    uint8_t pl[8], *f;
    size_t flen;
    ccol_status st;

    ccol__st64(pl, (uint64_t)v);
    ccol__hdr_init(&h, &l->id, kind, op, seq, 0, ccol__wall_ns(), "", 0);
    f = ccol__frame_encode(&h, pl, sizeof pl, &flen);
    if (f == NULL)
        return CCOL_ERR_NO_MEMORY;
    st = l->ops->send(l, peer, f, flen, ccol__tcp_deadline(5), err);
    free(f);
    return st;
}

/* Receives one frame of kind/op/seq from one of peers[0..n-1] and adds
 * its value to *v. */
static ccol_status
sub_recv(ccol__link *l, const int *peers, int n, uint16_t kind, uint16_t op,
         uint64_t seq, int64_t *v, ccol__err *err)
{
    ccol__msg m;
    int from = -1;
    ccol_status st;

    st = l->ops->recv(l, peers, n, ccol__tcp_deadline(5), &from, &m, err);
    if (st != CCOL_OK)
        return st;
    CHECK_EQ(m.h.kind, kind);
    CHECK_EQ(m.h.op, op);
    CHECK_EQ(m.h.seq, seq);
    CHECK_EQ(m.h.len, 8);
    if (m.h.len == 8)
        *v += (int64_t)ccol__ld64(m.payload);
    free(m.payload);
    return CCOL_OK;
}

/* A sum over the sub's tree: one UP frame from each child to its parent,
 * one DOWN frame back. A barrier is the sum of nothing. */
static int64_t
sub_sum(sub_comm *s, uint16_t op, uint64_t seq, int64_t v)
{
    const ccol__shape *sh = &s->shape;
    ccol__link *l = s->link;
    ccol__err err;
    int64_t down = 0;

    for (int i = 0; i < sh->nchildren; i++)
        CHECK_OK(sub_recv(l, sh->children, sh->nchildren, CCOL__K_UP, op, seq,
                          &v, &err),
                 NULL);
    if (sh->parent >= 0) {
        CHECK_OK(sub_send(l, sh->parent, CCOL__K_UP, op, seq, v, &err), NULL);
        CHECK_OK(sub_recv(l, &sh->parent, 1, CCOL__K_DOWN, op, seq, &down,
                          &err),
                 NULL);
        v = down;
    }
    for (int i = 0; i < sh->nchildren; i++)
        CHECK_OK(sub_send(l, sh->children[i], CCOL__K_DOWN, op, seq, v, &err),
                 NULL);
    return v;
}

/* A barrier, then an allreduce of each member's job rank + 1. */
static void
sub_exercise(sub_comm *s, int job_rank, const int *members)
{
    int64_t want = 0;

    for (int i = 0; i < s->shape.size; i++)
        want += members[i] + 1;
    CHECK_EQ(sub_sum(s, CCOL__OP_BARRIER, 1, 0), 0);
    CHECK_EQ(sub_sum(s, CCOL__OP_ALLREDUCE_I64, 2, job_rank + 1), want);
}

static const int sub_02[] = { 0, 2 };

static void
skip_body(ccol_comm *c, int rank, void *arg)
{
    sub_comm s;
    int fds = count_fds();

    (void)arg;
    if (rank == 1) { /* not a member: sleeps, then leaves */
        usleep(1500 * 1000);
        return;
    }
    sub_form(c, sub_02, 2, 0x5B02, 0, &s);
    CHECK_OK(s.st, NULL);
    if (s.st == CCOL_OK)
        sub_exercise(&s, rank, sub_02);
    CHECK(s.took < ccol_test_scale(1.0));
    sub_free(&s);
    CHECK_EQ(count_fds(), fds);
}

/* Ranks 0 and 2 form a sub-communicator while rank 1 sleeps: it forms
 * at once and runs a barrier and an allreduce without rank 1. */
CCOL_TEST(sub_without_a_rank)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    CHECK_EQ(ccol_test_ranks(&job, skip_body, NULL), 0);
}

static const int sub_01[] = { 0, 1 }, sub_12[] = { 1, 2 };

/* Forms sub {0,1} (id 0xA) and {1,2} (id 0xB) on each of their members,
 * rank 1 in the order *arg says (0: {0,1} first). */
static void
two_subs_body(ccol_comm *c, int rank, void *arg)
{
    bool b_first = *(const int *)arg != 0;
    sub_comm a, b;

    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (rank == 1 && b_first)
        sub_form(c, sub_12, 2, 0xB, 0, &b);
    if (rank <= 1)
        sub_form(c, sub_01, 2, 0xA, 0, &a);
    if (rank >= 1 && !(rank == 1 && b_first))
        sub_form(c, sub_12, 2, 0xB, 0, &b);
    if (rank <= 1) {
        CHECK_OK(a.st, NULL);
        if (a.st == CCOL_OK)
            sub_exercise(&a, rank, sub_01);
    }
    if (rank >= 1) {
        CHECK_OK(b.st, NULL);
        if (b.st == CCOL_OK)
            sub_exercise(&b, rank, sub_12);
    }
    sub_free(&a);
    sub_free(&b);
}

/* Two sub-communicators sharing rank 1 form at the same time, whichever
 * rank 1 forms first. */
CCOL_TEST(two_subs_either_order)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    for (int order = 0; order < 2; order++)
        CHECK_EQ(ccol_test_ranks(&job, two_subs_body, &order), 0);
}

static int other_comm_refusals;

static void
count_other_comm(void *ud, ccol_log_level level, const char *component,
                 const char *msg)
{
    (void)ud;
    (void)component;
    if (level == CCOL_LOG_INFO && strstr(msg, "communicator id") != NULL)
        other_comm_refusals++;
}

/* Rank 0 forms {0,1} (rank 1 comes late), then {0,2}; rank 2 dials rank
 * 0 for {0,2} at once, is refused as another communicator's rank while
 * rank 0 serves {0,1}, and dials again until it is admitted. */
static void
shared_listener_body(ccol_comm *c, int rank, void *arg)
{
    sub_comm a, b;

    (void)arg;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (rank == 0)
        ccol_log_set(count_other_comm, NULL, CCOL_LOG_INFO);
    if (rank == 1)
        usleep(500 * 1000);
    if (rank <= 1) {
        sub_form(c, sub_01, 2, 0xA, 0, &a);
        CHECK_OK(a.st, NULL);
        if (a.st == CCOL_OK)
            sub_exercise(&a, rank, sub_01);
    }
    if (rank != 1) {
        sub_form(c, sub_02, 2, 0xB, 0, &b);
        CHECK_OK(b.st, NULL);
        if (b.st == CCOL_OK)
            sub_exercise(&b, rank, sub_02);
    }
    if (rank == 0) {
        CHECK(other_comm_refusals > 0);
        ccol_log_set(NULL, NULL, CCOL_LOG_WARN);
    }
    sub_free(&a);
    sub_free(&b);
}

CCOL_TEST(sub_waits_for_a_busy_listener)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    CHECK_EQ(ccol_test_ranks(&job, shared_listener_body, NULL), 0);
}

/* Rank 0 serves {0,2} and rank 2 dials rank 1 for {1,2}; neither rank 2
 * nor rank 1 forms the other: both time out naming the absent member by
 * its job rank, within the deadline. */
static void
missing_member_body(ccol_comm *c, int rank, void *arg)
{
    char want[64];
    sub_comm s;

    (void)arg;
    if (rank == 1) {
        usleep(2500 * 1000);
        return;
    }
    if (rank == 0)
        sub_form(c, sub_02, 2, 0xC, 1.0, &s);
    else
        sub_form(c, sub_12, 2, 0xD, 1.0, &s);
    CHECK_STATUS(s.st, CCOL_ERR_TIMEOUT);
    CHECK(s.link == NULL);
    if (rank == 0) {
        CHECK_CONTAINS(s.err.msg, "rank(s) 2 did not join");
    } else {
        snprintf(want, sizeof want, "rank 1 at 127.0.0.1:");
        CHECK_CONTAINS(s.err.msg, want);
        CHECK_CONTAINS(s.err.msg, "within 1.0 s");
    }
    CHECK(s.took >= 0.9 && s.took < ccol_test_scale(1.5));
    sub_free(&s);
}

CCOL_TEST(sub_missing_member_named)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    CHECK_EQ(ccol_test_ranks(&job, missing_member_body, NULL), 0);
}

/* Rank 2 dies after sub {0,2} formed: rank 0's next receive names it
 * by its job rank (2), not its rank in the sub (1). */
static void
sub_killed_body(ccol_comm *c, int rank, void *arg)
{
    ccol__msg m;
    ccol__err err;
    sub_comm s;
    int peer = 1, from = -1;

    (void)arg;
    if (rank == 1)
        return;
    sub_form(c, sub_02, 2, 0xF, 0, &s);
    CHECK_OK(s.st, NULL);
    if (s.st != CCOL_OK)
        return;
    sub_exercise(&s, rank, sub_02);
    if (rank == 2)
        raise(SIGKILL);
    CHECK_STATUS(s.link->ops->recv(s.link, &peer, 1, ccol__tcp_deadline(5),
                                   &from, &m, &err),
                 CCOL_ERR_PEER);
    CHECK_EQ(from, 1);
    CHECK_CONTAINS(err.msg, "rank 2 closed its connection");
    sub_free(&s);
}

CCOL_TEST(sub_killed_member_named_by_job_rank)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    job.may_die = 1u << 2;
    CHECK_EQ(ccol_test_ranks(&job, sub_killed_body, NULL), 1); /* its death */
}

static const int sub_all[] = { 0, 2, 3, 4, 5 };

/* With a token, the sub's connections are new ones, authenticated and
 * tagged; over a tree (threshold 2, fanout 2) of 5 of 6 ranks. */
static void
tagged_body(ccol_comm *c, int rank, void *arg)
{
    const ccol__tcp *t;
    sub_comm s;

    (void)arg;
    CHECK(c->token_str != NULL);
    if (rank == 1)
        return;
    sub_form(c, sub_all, 5, 0xE, 0, &s);
    CHECK_OK(s.st, NULL);
    if (s.st != CCOL_OK)
        return;
    t = (const ccol__tcp *)s.link;
    CHECK(t->lfd < 0 && t->table == NULL);
    for (int r = 0; r < t->size; r++) {
        bool edge = r == s.shape.parent;
        for (int i = 0; i < s.shape.nchildren; i++)
            edge = edge || s.shape.children[i] == r;
        CHECK_EQ(t->fd[r] >= 0, edge);
        if (edge)
            CHECK(t->key[r].on && t->key[r].nsend + t->key[r].nrecv == 1);
    }
    sub_exercise(&s, rank, sub_all);
    sub_free(&s);
}

CCOL_TEST(sub_token_tagged_tree)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 6;
    job.transport = CCOL_TEST_TCP;
    tree_shape(&job.params);
    job.params.mask |= CCOL_COMM_PARAM_TOKEN;
    job.params.token = "sub-token-5678";
    CHECK_EQ(ccol_test_ranks(&job, tagged_body, NULL), 0);
}

/* Every rank of a job keeps a listener and the whole table, star mode
 * included (ranks without children used to have none). */
static void
table_body(ccol_comm *c, int rank, void *arg)
{
    const ccol__tcp *t = (const ccol__tcp *)c->link;

    (void)arg;
    CHECK(t->lfd >= 0);
    CHECK(t->table != NULL);
    for (int r = 0; t->table != NULL && r < t->size; r++) {
        CHECK_STR_EQ(t->table[r].ip, "127.0.0.1");
        CHECK(t->table[r].port > 0);
    }
    if (t->table != NULL) {
        int port;
        char ip[64];
        CHECK(ccol__tcp_name(t->lfd, false, ip, sizeof ip, &port));
        CHECK_EQ(port, t->table[rank].port);
    }
}

CCOL_TEST(every_rank_keeps_a_listener)
{
    ccol_test_job job;

    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    CHECK_EQ(ccol_test_ranks(&job, table_body, NULL), 0);
}

/* The listener table of a WELCOME is untrusted: every entry is checked. */
CCOL_TEST(welcome_table_codec)
{
    ccol__tcp_addr tab[4];
    ccol__buf b = { 0 };
    ccol__rd r;

    ccol__buf_u32(&b, 2);
    ccol__buf_u32(&b, 0);
    ccol__buf_str(&b, "10.0.0.1");
    ccol__buf_u32(&b, 4000);
    ccol__buf_u32(&b, 3);
    ccol__buf_str(&b, "fe80::1%eth0");
    ccol__buf_u32(&b, 65535);
    ccol__rd_init(&r, b.p, b.len);
    CHECK(ccol__tcp_table_decode(&r, 4, tab) == NULL);
    CHECK_STR_EQ(tab[0].ip, "10.0.0.1");
    CHECK_EQ(tab[0].port, 4000);
    CHECK_EQ(tab[1].port, 0);
    CHECK_STR_EQ(tab[3].ip, "fe80::1%eth0");
    for (size_t cut = 0; cut < b.len; cut++) {
        ccol__rd_init(&r, b.p, cut);
        CHECK(ccol__tcp_table_decode(&r, 4, tab) != NULL);
    }
    ccol__rd_init(&r, b.p, b.len);
    CHECK_STR_EQ(ccol__tcp_table_decode(&r, 3, tab),
                 "a listener's rank is out of range");
    ccol__rd_init(&r, b.p, b.len);
    CHECK_STR_EQ(ccol__tcp_table_decode(&r, 1, tab),
                 "more listeners than ranks");
    ccol__st32(b.p + 20, 0); /* rank 0's port */
    ccol__rd_init(&r, b.p, b.len);
    CHECK_STR_EQ(ccol__tcp_table_decode(&r, 4, tab),
                 "a listener's port is out of range 1-65535");
    ccol__st32(b.p + 20, 4000);
    ccol__st32(b.p + 24, 0); /* the second entry says rank 0 again */
    ccol__rd_init(&r, b.p, b.len);
    CHECK_STR_EQ(ccol__tcp_table_decode(&r, 4, tab),
                 "a rank's listener is listed twice");
    ccol__st32(b.p + 24, 3);
    b.p[12] = ' '; /* "10.0.0.1" -> " 0.0.0.1" */
    ccol__rd_init(&r, b.p, b.len);
    CHECK_STR_EQ(ccol__tcp_table_decode(&r, 4, tab),
                 "a listener's address is not numeric");
    ccol__buf_free(&b);
}

/* ---- units ---- */

CCOL_TEST(hello_codec)
{
    ccol__tcp_hello h, back;
    uint8_t *p;
    size_t len;

    memset(&h, 0, sizeof h);
    h.rank = 7;
    h.size = 9;
    h.pid = 1234;
    h.port = 4321;
    snprintf(h.host, sizeof h.host, "node\x01-3");
    memset(h.nonce, 0xA5, sizeof h.nonce);
    memset(h.mac, 0x5A, sizeof h.mac);
    p = ccol__tcp_hello_encode(&h, &len);
    CHECK(ccol__tcp_hello_decode(p, len, &back) == NULL);
    CHECK_EQ(back.rank, 7);
    CHECK_EQ(back.size, 9);
    CHECK_EQ(back.pid, 1234);
    CHECK_EQ(back.port, 4321);
    CHECK_STR_EQ(back.host, "node?-3");
    CHECK(memcmp(back.nonce, h.nonce, sizeof h.nonce) == 0);
    CHECK(memcmp(back.mac, h.mac, sizeof h.mac) == 0);
    for (size_t cut = 0; cut < len; cut++)
        CHECK(ccol__tcp_hello_decode(p, cut, &back) != NULL);
    ccol__st32(p + len - CCOL__TCP_MAC - CCOL__TCP_NONCE - 4, 70000);
    CHECK_STR_EQ(ccol__tcp_hello_decode(p, len, &back),
                 "listen port out of range");
    free(p);
}

CCOL_TEST_MAIN(CCOL_T(star_3), CCOL_T(tree_3), CCOL_T(tree_8),
               CCOL_T(tree_11_fanout_3), CCOL_T(late_root), CCOL_T(many_ranks),
               CCOL_T(wrong_token), CCOL_T(hello_rewritten_on_the_way_is_refused),
               CCOL_T(strangers), CCOL_T(version_client),
               CCOL_T(version_root), CCOL_T(token_not_sent),
               CCOL_T(duplicate_rank), CCOL_T(wrong_size),
               CCOL_T(rendezvous_timeouts), CCOL_T(missing_rank_named),
               CCOL_T(peer_bad_magic), CCOL_T(peer_bad_header_crc),
               CCOL_T(peer_corrupt_payload), CCOL_T(peer_truncated_eof),
               CCOL_T(peer_truncated_stall), CCOL_T(peer_oversized),
               CCOL_T(peer_oversized_label),
               CCOL_T(killed_rank_star), CCOL_T(killed_rank_tree),
               CCOL_T(killed_inner_rank_tree), CCOL_T(hello_codec),
               CCOL_T(no_token_off_loopback_is_warned_once),
               CCOL_T(every_rank_keeps_a_listener),
               CCOL_T(welcome_table_codec), CCOL_T(sub_without_a_rank),
               CCOL_T(two_subs_either_order),
               CCOL_T(sub_waits_for_a_busy_listener),
               CCOL_T(sub_missing_member_named),
               CCOL_T(sub_killed_member_named_by_job_rank),
               CCOL_T(sub_token_tagged_tree))
