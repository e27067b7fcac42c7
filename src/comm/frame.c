/*
 * frame.c - the frame header every message between ranks carries, with its
 * encoder and a defensive decoder. Layout in frame.h. Bytes from other ranks
 * are untrusted: the decoder checks magic, header checksum, version and the
 * payload bound before anything is allocated, and ccol__frame_check() checks
 * the job token digest, communicator id, sender and payload checksum.
 */
#include "frame.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fills a header for operation `seq`: every frame says which operation it
 * belongs to and what the caller called it. */
void
ccol__hdr_init(ccol__hdr *h, const ccol__ident *id, uint16_t kind,
               uint16_t op, uint64_t seq, uint64_t arg, int64_t started,
               const char *label, size_t label_len)
{
    memset(h, 0, sizeof *h);
    h->version = CCOL_PROTOCOL_VERSION;
    h->kind = kind;
    h->from = (uint32_t)ccol__id_gr(id, id->rank); /* its job rank */
    h->op = op;
    h->token = id->token;
    h->comm_id = id->comm_id;
    h->seq = seq;
    h->arg = arg;
    h->started = started;
    if (label_len > CCOL__LABEL_MAX)
        label_len = CCOL__LABEL_MAX;
    h->label_len = (uint16_t)label_len;
    memcpy(h->label, label, label_len);
    h->label[label_len] = '\0';
}

/* Header, payload and label in one buffer, so a transport writes a frame
 * with one call. The body checksum (payload, then label) is computed here
 * once; the header checksum covers bytes 0-67, the label length
 * included. The label goes last so that a reader's buffer for the body
 * starts with the payload, which it keeps as it is. */
uint8_t *
ccol__frame_encode(ccol__hdr *h, const void *payload, size_t len,
                   size_t *frame_len)
{
    size_t nl = strnlen(h->label, CCOL__LABEL_MAX);
    uint8_t *f;

    if (len > UINT32_MAX || len > SIZE_MAX - CCOL__HDR_SIZE - nl)
        return NULL;
    f = malloc(CCOL__HDR_SIZE + len + nl);
    if (f == NULL)
        return NULL;
    h->len = (uint32_t)len;
    h->label_len = (uint16_t)nl;
    h->pcrc = ccol__crc32c(ccol__crc32c(0, payload, len), h->label, nl);
    ccol__st32(f + 0, CCOL__MAGIC);
    ccol__st16(f + 4, h->version);
    ccol__st16(f + 6, h->kind);
    ccol__st32(f + 8, h->from);
    ccol__st16(f + 12, h->op);
    ccol__st16(f + 14, h->label_len);
    ccol__st64(f + 16, h->token);
    ccol__st64(f + 24, h->comm_id);
    ccol__st64(f + 32, h->seq);
    ccol__st64(f + 40, h->arg);
    ccol__st64(f + 48, (uint64_t)h->started);
    ccol__st32(f + 56, h->len);
    ccol__st32(f + 60, h->pcrc);
    ccol__st32(f + 64, 0);
    ccol__st32(f + 68, ccol__crc32c(0, f, 68));
    if (len > 0)
        memcpy(f + CCOL__HDR_SIZE, payload, len);
    memcpy(f + CCOL__HDR_SIZE + len, h->label, nl);
    *frame_len = CCOL__HDR_SIZE + len + nl;
    return f;
}

/* Checks in the order that keeps a hostile sender cheap to refuse: magic
 * and header checksum (is this a frame at all), version (a clear VERSION
 * error rather than garbage), then the payload bound, before the caller
 * allocates anything for the payload. */
ccol_status
ccol__hdr_decode(const uint8_t *b, size_t max_payload, ccol__hdr *h,
                 char *why, size_t whylen)
{
    uint32_t magic = ccol__ld32(b);

    if (magic != CCOL__MAGIC) {
        snprintf(why, whylen, "bad magic 0x%08" PRIx32 " (not a ccol frame)",
                 magic);
        return CCOL_ERR_PEER;
    }
    if (ccol__ld32(b + 68) != ccol__crc32c(0, b, 68)) {
        snprintf(why, whylen, "header checksum mismatch (corrupt bytes)");
        return CCOL_ERR_PEER;
    }
    memset(h, 0, sizeof *h);
    h->version = ccol__ld16(b + 4);
    if (h->version != CCOL_PROTOCOL_VERSION) {
        snprintf(why, whylen,
                 "protocol version %u, this rank speaks version %u",
                 h->version, CCOL_PROTOCOL_VERSION);
        return CCOL_ERR_VERSION;
    }
    h->kind = ccol__ld16(b + 6);
    h->from = ccol__ld32(b + 8);
    h->op = ccol__ld16(b + 12);
    h->label_len = ccol__ld16(b + 14);
    h->token = ccol__ld64(b + 16);
    h->comm_id = ccol__ld64(b + 24);
    h->seq = ccol__ld64(b + 32);
    h->arg = ccol__ld64(b + 40);
    h->started = (int64_t)ccol__ld64(b + 48);
    h->len = ccol__ld32(b + 56);
    h->pcrc = ccol__ld32(b + 60);
    if (h->kind < CCOL__K_UP || h->kind > CCOL__K_BYE) {
        snprintf(why, whylen, "unknown frame kind %u", h->kind);
        return CCOL_ERR_PEER;
    }
    if (h->len > max_payload) {
        snprintf(why, whylen,
                 "payload of %" PRIu32 " bytes exceeds the limit of %zu",
                 h->len, max_payload);
        return CCOL_ERR_PEER;
    }
    if (h->label_len > CCOL__LABEL_MAX) {
        snprintf(why, whylen, "label of %u bytes exceeds the limit of %d",
                 h->label_len, CCOL__LABEL_MAX);
        return CCOL_ERR_PEER;
    }
    return CCOL_OK;
}

void
ccol__text_clean(char *out, const char *in, size_t n, bool keep_nl)
{
    size_t i;

    for (i = 0; i + 1 < n && in[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)in[i];
        out[i] = (ch < 0x20 && !(keep_nl && ch == '\n')) || ch == 0x7f
                     ? '?'
                     : (char)ch;
    }
    out[i] = '\0';
}

/* The label is the body's tail: h.label_len (bounded by the decoder)
 * bytes after the payload, cleaned once here so every message can show
 * it as it is. */
void
ccol__msg_take_body(ccol__msg *m, uint8_t *body)
{
    size_t n = m->h.label_len;

    m->payload = body;
    if (n == 0 || body == NULL) {
        m->h.label[0] = '\0';
        return;
    }
    memcpy(m->h.label, body + m->h.len, n);
    m->h.label[n] = '\0';
    ccol__text_clean(m->h.label, m->h.label, n + 1, false);
}

void
ccol__seen_note(ccol__seen *s, uint16_t op, uint64_t seq, uint64_t arg,
                const char *label)
{
    s->any = true;
    s->op = op;
    s->seq = seq;
    s->arg = arg;
    if (label[0] == '\0') {
        free(s->label);
        s->label = NULL;
    } else if (s->label == NULL || strcmp(s->label, label) != 0) {
        size_t n = strlen(label) + 1;
        char *copy = realloc(s->label, n);
        if (copy != NULL)
            memcpy(copy, label, n);
        else
            free(s->label); /* no memory: the message says less */
        s->label = copy;
    }
}

/* The checks that need to know the ranks: a frame of another job (token,
 * communicator id), a sender lying about its rank, a payload damaged on
 * the way. Each names the rank the frame came from. */
ccol_status
ccol__frame_check(const ccol__ident *id, int from, const ccol__msg *m,
                  ccol__err *err)
{
    int who = ccol__id_gr(id, from); /* the sender's rank in the job */

    if (m->h.token != id->token)
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "rank %d presented a different job token "
                            "(CCOL_TOKEN differs)",
                            who);
    if (m->h.comm_id != id->comm_id)
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "rank %d sent a frame of communicator %016" PRIx64
                            ", expected %016" PRIx64,
                            who, m->h.comm_id, id->comm_id);
    if (m->h.from != (uint32_t)who)
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "a frame from rank %d claims to come from rank "
                            "%" PRIu32,
                            who, m->h.from);
    if (ccol__crc32c(0, m->payload, ccol__hdr_body(&m->h)) != m->h.pcrc)
        return ccol__seterr(err, CCOL_ERR_PEER,
                            "rank %d sent a corrupt payload (checksum "
                            "mismatch in %s #%" PRIu64 ")",
                            who, ccol__op_name(m->h.op), m->h.seq);
    return CCOL_OK;
}

/* Names as the public API spells them, for messages. */
const char *
ccol__op_name(uint16_t op)
{
    switch (op) {
    case CCOL__OP_ALLGATHERV: return "allgatherv";
    case CCOL__OP_BCAST: return "bcast";
    case CCOL__OP_ALLREDUCE_I64: return "allreduce_i64";
    case CCOL__OP_ALLREDUCE_F64: return "allreduce_f64";
    case CCOL__OP_JOIN_REDUCE: return "join_reduce";
    case CCOL__OP_BARRIER: return "barrier";
    case CCOL__OP_RENDEZVOUS: return "rendezvous";
    default: return "unknown-op";
    }
}

static const char *const reduce_ops[] = { "sum", "min", "max", "and", "or" };

/* The operation alone: "barrier #3", "bcast(root 1) #4". */
static void
op_describe(uint16_t op, uint64_t arg, uint64_t seq, char *out,
            size_t outlen)
{
    const char *name = ccol__op_name(op);
    unsigned rop = (unsigned)((arg >> 48) & 0xFF);

    switch (op) {
    case CCOL__OP_BCAST:
        snprintf(out, outlen, "%s(root %" PRIu64 ") #%" PRIu64, name, arg,
                 seq);
        break;
    case CCOL__OP_ALLREDUCE_I64:
    case CCOL__OP_ALLREDUCE_F64:
        snprintf(out, outlen, "%s(%s, n=%" PRIu64 ") #%" PRIu64, name,
                 rop < 5 ? reduce_ops[rop] : "?",
                 (uint64_t)(arg & 0xFFFFFFFFFFFFu),
                 seq);
        break;
    default: /* join_reduce's key is a fingerprint, not a name: the
              * caller's label says what the exchange is */
        snprintf(out, outlen, "%s #%" PRIu64, name, seq);
        break;
    }
}

void
ccol__err_from_peer(ccol__err *err, int32_t code, const char *text, size_t n)
{
    size_t i;

    if (code >= 0 ||
        strcmp(ccol_status_name((ccol_status)code), "UNKNOWN") == 0)
        code = CCOL_ERR_PEER; /* not a failure, or an unknown one */
    err->code = (ccol_status)code;
    for (i = 0; i < n && i + 1 < sizeof err->msg && text[i] != '\0'; i++) {
        unsigned char ch = (unsigned char)text[i];
        err->msg[i] = (ch < 0x20 && ch != '\n') || ch == 0x7f ? '?'
                                                              : (char)ch;
    }
    err->msg[i] = '\0';
}

/* The caller's label leads (it says what the operation was for), the
 * operation follows in parentheses; without a label, the operation alone. */
void
ccol__op_describe_labeled(uint16_t op, uint64_t arg, uint64_t seq,
                          const char *label, char *out, size_t outlen)
{
    char d[128];

    op_describe(op, arg, seq, d, sizeof d);
    if (label != NULL && label[0] != '\0')
        snprintf(out, outlen, "%s (%s)", label, d);
    else
        snprintf(out, outlen, "%s", d);
}
