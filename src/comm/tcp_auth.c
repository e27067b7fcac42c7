/*
 * tcp_auth.c - what the job token proves on a tcp connection, in both
 * directions.
 *
 * The accepting side (rank 0, or a tree parent) sends a fresh nonce Ns in
 * its CHALLENGE; the joining rank answers with a HELLO that carries its
 * own fresh nonce Nj among its fields (rank, world size, pid, host,
 * listen port) and, last, HMAC-SHA-256(token, "ccol hello" || Ns || every
 * field before the MAC || the frame's sender and communicator id): none
 * of what the acceptor learns from the HELLO can be rewritten on the way
 * (a rewritten host would move a rank to another host's group). The
 * header's version is checked before (a different one is refused as
 * such) and the label binds this purpose. Both sides then
 * derive one key per direction from the token and both nonces, and with a
 * token every later frame on the connection carries a tag: the first 8
 * bytes of HMAC-SHA-256(key, frame number || header || payload), in the
 * header's token field. The first tagged frame is the accepting side's
 * WELCOME, which is how a joining rank knows that the side it reached
 * knows the token too: a process that took the port first and replays
 * what it captured of another connection cannot tag for this one, since
 * Nj is new. The frame number is not sent: each side counts the frames of
 * a direction, so a frame replayed, dropped or reordered within the
 * connection fails as surely as a changed byte. The token itself, and
 * nothing that would let a listener join a later connection, crosses the
 * wire.
 *
 * Without a token there is nothing to prove: frames carry no tag and the
 * token field holds the (empty) token's digest as on every transport.
 */
#include "tcp_link.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

/* Domain separation: a value computed for one purpose is never valid for
 * another. */
static const char HELLO_LABEL[] = "ccol hello";
static const char UP_LABEL[] = "ccol key: joiner to acceptor";
static const char DOWN_LABEL[] = "ccol key: acceptor to joiner";

/* HMAC-SHA-256(token, label || Ns || Nj || u32 rank); no token (NULL)
 * keys with the empty string. */
static void
derive(const char *token, const char *label, const uint8_t *ns,
       const uint8_t *nj, uint32_t rank, uint8_t out[CCOL__TCP_MAC])
{
    const char *key = token ? token : "";
    uint8_t r[4];
    ccol__hmac m;

    ccol__st32(r, rank);
    ccol__hmac_init(&m, key, strlen(key));
    ccol__hmac_update(&m, label, strlen(label) + 1);
    ccol__hmac_update(&m, ns, CCOL__TCP_NONCE);
    ccol__hmac_update(&m, nj, CCOL__TCP_NONCE);
    ccol__hmac_update(&m, r, sizeof r);
    ccol__hmac_final(&m, out);
}

bool
ccol__tcp_random(uint8_t *p, size_t n)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = getrandom(p + got, n - got, 0);
        if (r > 0)
            got += (size_t)r;
        else if (r < 0 && errno != EINTR)
            return false;
    }
    return true;
}

void
ccol__tcp_hello_mac(const char *token, const uint8_t *ns, const uint8_t *body,
                    size_t len, uint32_t from, uint64_t comm_id,
                    uint8_t out[CCOL__TCP_MAC])
{
    const char *key = token ? token : "";
    uint8_t head[12];
    ccol__hmac m;

    ccol__st32(head, from);
    ccol__st64(head + 4, comm_id);
    ccol__hmac_init(&m, key, strlen(key));
    ccol__hmac_update(&m, HELLO_LABEL, sizeof HELLO_LABEL);
    ccol__hmac_update(&m, ns, CCOL__TCP_NONCE);
    ccol__hmac_update(&m, body, len);
    ccol__hmac_update(&m, head, sizeof head);
    ccol__hmac_final(&m, out);
}

void
ccol__tcp_keys(const char *token, const uint8_t *ns, const uint8_t *nj,
               uint32_t rank, bool acceptor, ccol__tcp_key *k)
{
    uint8_t up[CCOL__TCP_MAC], down[CCOL__TCP_MAC];

    memset(k, 0, sizeof *k);
    if (token == NULL)
        return;
    derive(token, UP_LABEL, ns, nj, rank, up);
    derive(token, DOWN_LABEL, ns, nj, rank, down);
    ccol__hmac_init(&k->send, acceptor ? down : up, CCOL__TCP_MAC);
    ccol__hmac_init(&k->recv, acceptor ? up : down, CCOL__TCP_MAC);
    k->on = true;
}

/* The tag of frame number n: the header without its token field (where
 * the tag goes) and its checksum (which covers the tag), then the body. */
static uint64_t
tag(const ccol__hmac *key, uint64_t n, const uint8_t *hdr,
    const uint8_t *body, size_t blen)
{
    ccol__hmac m = *key;
    uint8_t num[8], out[CCOL__TCP_MAC];

    ccol__st64(num, n);
    ccol__hmac_update(&m, num, sizeof num);
    ccol__hmac_update(&m, hdr, 16);
    ccol__hmac_update(&m, hdr + 24, 68 - 24);
    ccol__hmac_update(&m, body, blen);
    ccol__hmac_final(&m, out);
    return ccol__ld64(out);
}

void
ccol__tcp_seal(ccol__tcp_key *k, uint8_t *frame, size_t len)
{
    uint64_t t = tag(&k->send, k->nsend++, frame, frame + CCOL__HDR_SIZE,
                     len - CCOL__HDR_SIZE);

    ccol__st64(frame + 16, t);
    ccol__st32(frame + 68, ccol__crc32c(0, frame, 68));
}

bool
ccol__tcp_open(ccol__tcp_key *k, const uint8_t *hdr, const uint8_t *body,
               size_t blen)
{
    uint8_t want[8], got[8];

    ccol__st64(want, tag(&k->recv, k->nrecv++, hdr, body, blen));
    memcpy(got, hdr + 16, sizeof got);
    return ccol__ct_equal(want, got, sizeof want);
}
