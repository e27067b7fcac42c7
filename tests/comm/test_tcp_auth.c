/*
 * test_tcp_auth.c - what the job token protects on tcp, in forked
 * processes on loopback. A process that takes rank 0's port first and
 * answers the joining ranks with what it could have captured (the WELCOME
 * of another connection, or the token digest older versions put in every
 * header) is refused by every joiner, by name. A proxy between two ranks
 * that changes one byte of a frame and fixes both checksums, as anyone on
 * the path could, makes the receiving rank fail with a PEER error naming
 * the sender; the same proxy changing nothing lets the job through.
 */
#include "harness.h"

#include "comm/tcp_link.h"
#include "raw_peer.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char TOKEN[] = "a-job-token-only-the-ranks-know";

/* A job with the token, from the harness's params. */
static void
job_params(const ccol_test_job *job, int rank, ccol_comm_params *p)
{
    ccol_test_params(job, rank, p);
    p->mask |= CCOL_COMM_PARAM_TOKEN;
    p->token = TOKEN;
}

/* ---- a rank 0 that does not know the token ---- */

typedef enum squat {
    SQ_REPLAY, /* replays a WELCOME a real rank 0 sent another joiner */
    SQ_DIGEST  /* sends the token digest as the old WELCOME carried it */
} squat;

static squat cur_squat;

/* A rank 0 of this job: its identity and the token it knows. */
typedef struct root_rank {
    ccol__ident id;
    const char *token_str;
} root_rank;

/* A rank 0 of this job (it knows the token: this is how the captured
 * bytes were made, not what the squatter knows). */
static root_rank
root_comm(int size, uint64_t comm_id)
{
    root_rank c;
    uint8_t d[32];

    memset(&c, 0, sizeof c);
    c.id.size = size;
    c.id.comm_id = comm_id;
    c.token_str = TOKEN;
    ccol__sha256(TOKEN, strlen(TOKEN), d);
    c.id.token = ccol__ld64(d);
    return c;
}

/* The WELCOME of a flat job with no listeners, as a real rank 0 sent it
 * to `rank` after the challenge ns answered with an earlier nonce. */
static uint8_t *
captured_welcome(const root_rank *c, const uint8_t *ns, int rank, size_t *len)
{
    static const uint8_t old_nj[CCOL__TCP_NONCE] = { 9, 9, 9 };
    const ccol__host_plan flat = { 0 };
    ccol__buf b = { 0 };
    ccol__tcp_key k;
    ccol__hdr h;
    uint8_t *f;

    ccol__buf_u32(&b, 0);
    ccol__host_plan_encode(c->id.size, &flat, &b);
    ccol__hdr_init(&h, &c->id, CCOL__K_WELCOME, CCOL__OP_RENDEZVOUS, 0, 0, 0,
                   "", 0);
    f = ccol__frame_encode(&h, b.p, b.len, len);
    ccol__buf_free(&b);
    if (f != NULL && cur_squat == SQ_REPLAY) {
        ccol__tcp_keys(c->token_str, ns, old_nj, (uint32_t)rank, true, &k);
        ccol__tcp_seal(&k, f, *len);
    }
    return f;
}

/* Serves one joiner the replayed challenge and WELCOME. */
static void
squat_one(int lfd, const root_rank *c)
{
    static const uint8_t ns[CCOL__TCP_NONCE] = { 4, 2 };
    ccol__hdr h;
    ccol__msg hello;
    uint8_t *ch, *w;
    size_t chlen, wlen;
    char why[200];
    int fd = raw_accept(lfd, 10000), err;

    CHECK(fd >= 0);
    if (fd < 0)
        return;
    ccol__hdr_init(&h, &c->id, CCOL__K_CHALLENGE, CCOL__OP_RENDEZVOUS, 0, 0, 0,
                   "", 0);
    h.token = 0;
    ch = ccol__frame_encode(&h, ns, sizeof ns, &chlen);
    CHECK(ccol__tcp_write(fd, ch, chlen, ccol__tcp_deadline(5), &err) ==
          CCOL__IO_OK);
    CHECK_STATUS(ccol__tcp_read_frame(fd, 1 << 16, ccol__tcp_deadline(5), true,
                                      &hello, NULL, why, sizeof why),
                 CCOL_OK);
    CHECK_EQ(hello.h.kind, CCOL__K_HELLO);
    w = captured_welcome(c, ns, (int)hello.h.from, &wlen);
    CHECK(ccol__tcp_write(fd, w, wlen, ccol__tcp_deadline(5), &err) ==
          CCOL__IO_OK);
    raw_drain(fd);
    close(fd);
    free(hello.payload);
    free(ch);
    free(w);
}

static void
squatter_body(ccol_comm *unused, int rank, void *arg)
{
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    char where[64], why[200];
    int lfd, bound;

    (void)unused;
    if (rank == 0) {
        char id[32];
        root_rank rc;

        snprintf(id, sizeof id, "tcp:%d", job->port);
        rc = root_comm(job->size, ccol__hash_str(id));
        CHECK_OK(ccol__tcp_listen("127.0.0.1", job->port, &lfd, &bound, why,
                                  sizeof why),
                 NULL);
        for (int r = 1; r < job->size; r++)
            squat_one(lfd, &rc);
        close(lfd);
        return;
    }
    job_params(job, rank, &p);
    CHECK_STATUS(ccol_comm_create(&p, &c), CCOL_ERR_PEER);
    snprintf(where, sizeof where, "rank 0 at 127.0.0.1:%d did not prove",
             job->port);
    CHECK_CONTAINS(ccol_comm_errmsg(c), where);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "knows the job token");
    ccol_comm_destroy(c);
}

static void
run_squatter(squat s)
{
    ccol_test_job job;

    cur_squat = s;
    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, squatter_body, &job), 0);
}

/* A squatter replaying a WELCOME captured from another connection is
 * refused by every joiner: the tag is for nonces that are not theirs. */
CCOL_TEST(squatter_replaying_a_welcome)
{
    run_squatter(SQ_REPLAY);
}

/* A squatter sending the token digest (all that older versions checked)
 * is refused by every joiner. */
CCOL_TEST(squatter_with_the_digest)
{
    run_squatter(SQ_DIGEST);
}

/* ---- a proxy on the path ---- */

/* Which direction the proxy tampers with: none, rank 0 to rank 1, or
 * rank 1 to rank 0. */
typedef enum tamper {
    T_NONE, T_DOWN, T_UP, T_DOWN_VERSION,
    T_DOWN_PLAIN /* T_DOWN in a job without a token */
} tamper;

static tamper cur_tamper;

/* One direction of the proxy: the bytes of the frame being read. */
typedef struct pipe_ {
    int in, out;       /* read from, write to */
    uint8_t buf[4096]; /* the frame so far */
    size_t got, need;  /* bytes in buf, bytes of the whole frame */
    int frames;        /* frames forwarded */
    bool flip;         /* change the first data frame */
} pipe_;

/* Changes one payload byte of a whole frame (or, for T_DOWN_VERSION, its
 * protocol version) and fixes both checksums, so only the tag can tell. */
static void
forge(uint8_t *f, size_t len)
{
    uint32_t plen = ccol__ld32(f + 56);

    CHECK(plen > 0);
    if (cur_tamper == T_DOWN_VERSION)
        ccol__st16(f + 4, (uint16_t)(ccol__ld16(f + 4) + 1));
    else
        f[CCOL__HDR_SIZE] ^= 0x20;
    ccol__st32(f + 60, ccol__crc32c(0, f + CCOL__HDR_SIZE,
                                    len - CCOL__HDR_SIZE));
    ccol__st32(f + 68, ccol__crc32c(0, f, 68));
}

/* Reads what is there; forwards each whole frame, the first data frame
 * (after the handshake's `skip` frames) forged. False when the
 * connection ended. */
static bool
pump(pipe_ *p, int skip)
{
    ssize_t n = recv(p->in, p->buf + p->got, p->need - p->got, 0);
    int err;

    if (n <= 0)
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    p->got += (size_t)n;
    if (p->got == CCOL__HDR_SIZE && p->need == CCOL__HDR_SIZE)
        p->need += ccol__ld32(p->buf + 56) + ccol__ld16(p->buf + 14);
    CHECK(p->need <= sizeof p->buf);
    if (p->got < p->need)
        return true;
    if (p->flip && p->frames == skip)
        forge(p->buf, p->got);
    ccol__tcp_write(p->out, p->buf, p->got, ccol__tcp_deadline(5), &err);
    p->frames++;
    p->got = 0;
    p->need = CCOL__HDR_SIZE;
    return true;
}

/* Rank 1 reaches rank 0 through here: 127.0.0.2 on the job's port. */
static void
proxy(int port)
{
    pipe_ down = { 0 }, up = { 0 };
    char why[200];
    int lfd, bound, a, b = -1;
    double end = ccol_test_now() + ccol_test_scale(20);

    CHECK_OK(ccol__tcp_listen("127.0.0.2", port, &lfd, &bound, why,
                              sizeof why),
             NULL);
    a = raw_accept(lfd, 10000);
    close(lfd);
    CHECK_OK(ccol__tcp_connect("127.0.0.1", port, ccol__tcp_deadline(10), &b,
                               why, sizeof why),
             NULL);
    up = (pipe_){ .in = a, .out = b, .need = CCOL__HDR_SIZE,
                  .flip = cur_tamper == T_UP };
    down = (pipe_){ .in = b, .out = a, .need = CCOL__HDR_SIZE,
                    .flip = cur_tamper == T_DOWN ||
                            cur_tamper == T_DOWN_VERSION ||
                            cur_tamper == T_DOWN_PLAIN };
    while (a >= 0 && b >= 0 && ccol_test_now() < end) {
        struct pollfd pf[2] = { { .fd = a, .events = POLLIN },
                                { .fd = b, .events = POLLIN } };
        if (poll(pf, 2, 100) <= 0)
            continue;
        /* skip the handshake: HELLO up; CHALLENGE and WELCOME down */
        if (pf[0].revents != 0 && !pump(&up, 1))
            break;
        if (pf[1].revents != 0 && !pump(&down, 2))
            break;
    }
    if (a >= 0)
        close(a);
    if (b >= 0)
        close(b);
}

/* Without a token, rank 1 finds the changed result undecodable (its rank
 * count is off) and tells rank 0 why before it goes: rank 0's next
 * operation fails with rank 1's words, not with a closed connection. */
static void
plain_after(ccol_comm *c, int rank, ccol_status st)
{
    if (rank == 1) {
        CHECK_STATUS(st, CCOL_ERR_PEER);
        CHECK_CONTAINS(ccol_comm_errmsg(c), "wrong rank count");
        return;
    }
    CHECK_OK(st, c);
    CHECK_STATUS(ccol_barrier(c), CCOL_ERR_PEER);
    CHECK_CONTAINS(ccol_comm_errmsg(c), "rank 1");
    CHECK_CONTAINS(ccol_comm_errmsg(c), "wrong rank count");
}

static void
proxy_body(ccol_comm *unused, int rank, void *arg)
{
    static const char blob[2][9] = { "from-r0!", "from-r1!" };
    ccol_test_job *job = arg;
    ccol_comm_params p;
    ccol_comm *c = NULL;
    size_t lens[2];
    void *out = NULL;
    ccol_status st;

    (void)unused;
    if (rank == 2) {
        proxy(job->port);
        return;
    }
    if (cur_tamper == T_DOWN_PLAIN)
        ccol_test_params(job, rank, &p);
    else
        job_params(job, rank, &p);
    p.size = 2;
    p.mask |= CCOL_COMM_PARAM_ADDR;
    p.addr = rank == 0 ? "127.0.0.1" : "127.0.0.2";
    CHECK_OK(ccol_comm_create(&p, &c), c);
    st = ccol_allgatherv(c, blob[rank], 8, &out, lens);
    if (cur_tamper == T_DOWN_PLAIN) {
        plain_after(c, rank, st);
    } else if (cur_tamper == T_NONE) {
        CHECK_OK(st, c);
        CHECK(out != NULL && memcmp(out, "from-r0!from-r1!", 16) == 0);
    } else if ((cur_tamper != T_UP) == (rank == 1)) {
        /* the receiving side of the forged frame names its sender */
        CHECK_STATUS(st, CCOL_ERR_PEER);
        CHECK_CONTAINS(ccol_comm_errmsg(c), rank == 1 ? "from rank 0"
                                                      : "from rank 1");
        CHECK_CONTAINS(ccol_comm_errmsg(c), "fails authentication");
    } else if (st == CCOL_OK) { /* the sender of the forged frame */
        CHECK(memcmp(out, "from-r0!from-r1!", 16) == 0);
    }
    ccol_free(out);
    ccol_comm_destroy(c);
}

static void
run_proxy(tamper t)
{
    ccol_test_job job;

    cur_tamper = t;
    memset(&job, 0, sizeof job);
    job.size = 3;
    job.transport = CCOL_TEST_TCP;
    job.timeout_s = 5;
    job.no_comm = true;
    CHECK_EQ(ccol_test_ranks(&job, proxy_body, &job), 0);
}

/* The proxy itself changes nothing when told not to. */
CCOL_TEST(proxy_passes_a_job)
{
    run_proxy(T_NONE);
}

/* A byte changed in rank 0's result, checksums fixed: rank 1 refuses it. */
CCOL_TEST(byte_changed_towards_a_joiner)
{
    run_proxy(T_DOWN);
}

/* The version field of rank 0's result changed, checksums fixed: the
 * handshake proved both sides' version, so rank 1 says the frame fails
 * authentication (not that rank 0 speaks another version). */
CCOL_TEST(version_changed_towards_a_joiner)
{
    run_proxy(T_DOWN_VERSION);
}

/* The same change without a token: the rank that cannot decode the
 * result says why to the others (ERRUP), as a job with a token does. */
CCOL_TEST(byte_changed_towards_a_joiner_without_a_token)
{
    run_proxy(T_DOWN_PLAIN);
}

/* A byte changed in rank 1's contribution: rank 0 refuses it. */
CCOL_TEST(byte_changed_towards_rank_0)
{
    run_proxy(T_UP);
}

CCOL_TEST_MAIN(CCOL_T(version_changed_towards_a_joiner),
               CCOL_T(squatter_replaying_a_welcome),
               CCOL_T(squatter_with_the_digest), CCOL_T(proxy_passes_a_job),
               CCOL_T(byte_changed_towards_a_joiner),
               CCOL_T(byte_changed_towards_a_joiner_without_a_token),
               CCOL_T(byte_changed_towards_rank_0))
