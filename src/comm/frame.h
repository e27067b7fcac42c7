/*
 * frame.h - the frame: the 72-byte header every message between ranks
 * carries, its encoding and its defensive decoding (frame.c). The bottom of
 * the communicator: links move frames, the tree engine makes and reads
 * them, and nothing here knows either.
 */
#ifndef CCOL_FRAME_H
#define CCOL_FRAME_H

#include "../core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CCOL__MAGIC 0x4C4F4343u /* "CCOL" little-endian */
#define CCOL__HDR_SIZE 72
/* A label's bytes on the wire (no NUL) and in a buffer (with its NUL). */
#define CCOL__LABEL_MAX CCOL_LABEL_MAX
#define CCOL__LABEL_BUF (CCOL_LABEL_MAX + 1)
/* "label (allreduce_i64(min, n=3) #11)": a label and an operation. */
#define CCOL__WHAT_MAX (CCOL__LABEL_BUF + 192)

/* Frame kinds. */
enum {
    CCOL__K_UP = 1,      /* a contribution travelling to rank 0 */
    CCOL__K_DOWN = 2,    /* the result travelling to every rank */
    CCOL__K_ERRUP = 3,   /* a failure seen below, travelling to rank 0 */
    CCOL__K_ABORT = 4,   /* a failure decided by rank 0, to every rank */
    CCOL__K_HELLO = 5,   /* tcp: a rank introduces itself */
    CCOL__K_WELCOME = 6, /* tcp: rendezvous result */
    CCOL__K_REFUSE = 7,  /* tcp: connection refused, payload says why */
    CCOL__K_CHALLENGE = 8, /* tcp: nonce to authenticate the token */
    CCOL__K_BYE = 9      /* a rank is leaving cleanly */
};

/* Operations. */
enum {
    CCOL__OP_NONE = 0,
    CCOL__OP_ALLGATHERV = 1,
    CCOL__OP_BCAST = 2,
    CCOL__OP_ALLREDUCE_I64 = 3,
    CCOL__OP_ALLREDUCE_F64 = 4,
    CCOL__OP_JOIN_REDUCE = 5,
    CCOL__OP_BARRIER = 6,
    CCOL__OP_RENDEZVOUS = 7
};

/*
 * The decoded frame header. Wire layout (little-endian, 72 bytes), then
 * the body: the payload (`len` bytes), then the sender's label (`label
 * length` bytes, no NUL):
 *   0  u32 magic        4  u16 version      6  u16 kind
 *   8  u32 from rank   12  u16 op          14  u16 label length (<= 512)
 *  16  u64 token digest 24 u64 comm id     32  u64 seq
 *  40  u64 arg (op fingerprint: root, count/op/type, user key)
 *  48  u64 sender wall clock at operation start (ns)
 *  56  u32 payload length 60 u32 body crc32c (payload, then label)
 *  64  u32 reserved (0)   68 u32 header crc32c (bytes 0-67)
 */
typedef struct ccol__hdr {
    uint16_t version;  /* CCOL_PROTOCOL_VERSION of the sender */
    uint16_t kind;     /* CCOL__K_* */
    uint32_t from;     /* sender's rank in the job (a sub-communicator's
                          and a host's links number ranks apart) */
    uint16_t op;       /* CCOL__OP_* */
    uint64_t token;    /* digest of the job token, 0 if none */
    uint64_t comm_id;  /* communicator id */
    uint64_t seq;      /* operation sequence number, from 1 */
    uint64_t arg;      /* operation fingerprint */
    int64_t started;   /* sender's wall clock when the operation started */
    uint32_t len;      /* payload bytes */
    uint32_t pcrc;     /* crc32c of the body: payload, then label */
    uint16_t label_len; /* label bytes on the wire */
    char label[CCOL__LABEL_BUF]; /* sender's label, NUL-terminated; once
                                    received, control characters are '?' */
} ccol__hdr;

/* A received frame: header and malloc'd body, whose first h.len bytes are
 * the payload (NULL when the body is empty). */
typedef struct ccol__msg {
    ccol__hdr h;
    uint8_t *payload;
} ccol__msg;

/* What a rank last told us: used to say what a missing rank was doing. */
typedef struct ccol__seen {
    bool any;          /* a frame was ever received from this rank */
    uint16_t op;       /* its last operation */
    uint64_t seq;      /* its sequence number */
    uint64_t arg;      /* its fingerprint */
    char *label;       /* its label (malloc'd), NULL when none */
} ccol__seen;

/* Who this rank is among the ranks of a communicator or a link, and what
 * every frame between them carries: what frames are checked against and
 * how messages name ranks. */
typedef struct ccol__ident {
    int rank;             /* this rank, in this numbering */
    int size;             /* ranks in this numbering */
    uint64_t token;       /* digest of the job token, 0 if none */
    uint64_t comm_id;     /* communicator id carried by every frame */
    size_t max_payload;   /* largest accepted payload */
    const int *global_of; /* per rank of this numbering, the rank messages
                             name (its rank in the whole job), or NULL when
                             they are the same */
} ccol__ident;

/* The rank messages name for rank r of this numbering. */
static inline int
ccol__id_gr(const ccol__ident *id, int r)
{
    return id->global_of != NULL && r >= 0 && r < id->size ? id->global_of[r]
                                                            : r;
}

/* Fills a header for a frame of operation `seq` (its label, at most
 * CCOL__LABEL_MAX bytes, is the caller's). */
void ccol__hdr_init(ccol__hdr *h, const ccol__ident *id, uint16_t kind,
                    uint16_t op, uint64_t seq, uint64_t arg, int64_t started,
                    const char *label, size_t label_len);
/* Encodes header + payload + label into one malloc'd frame (sets len,
 * label_len and pcrc). */
uint8_t *ccol__frame_encode(ccol__hdr *h, const void *payload, size_t len,
                            size_t *frame_len);
/* Decodes and validates a header from CCOL__HDR_SIZE bytes: magic, header
 * checksum, version (CCOL_ERR_VERSION), payload and label bounds. On
 * failure writes a reason into why. The label is not read yet. */
ccol_status ccol__hdr_decode(const uint8_t *b, size_t max_payload,
                             ccol__hdr *h, char *why, size_t whylen);
/* Bytes that follow a decoded header: payload, then label. */
static inline size_t
ccol__hdr_body(const ccol__hdr *h)
{
    return (size_t)h->len + h->label_len;
}
/* Takes a received body (ccol__hdr_body(&m->h) bytes, malloc'd, or NULL
 * when that is 0) into m: the buffer becomes m->payload and the label at
 * its end is copied into m->h.label, control characters replaced. */
void ccol__msg_take_body(ccol__msg *m, uint8_t *body);
/* Copies at most n - 1 bytes of `in` up to a NUL into out (n bytes),
 * replacing control characters (newlines too unless keep_nl). */
void ccol__text_clean(char *out, const char *in, size_t n, bool keep_nl);
/* Remembers in s what a frame header (or this rank's own slot) said:
 * operation, sequence number, fingerprint and label. */
void ccol__seen_note(ccol__seen *s, uint16_t op, uint64_t seq, uint64_t arg,
                     const char *label);
/* Checks a decoded frame from rank `from` (of id's numbering) against id:
 * token digest, communicator id, sender, payload checksum. On failure err
 * names the sender by its job rank. */
ccol_status ccol__frame_check(const ccol__ident *id, int from,
                              const ccol__msg *m, ccol__err *err);
/* Fills err from a failure another rank reported (untrusted bytes): its
 * code, or PEER when that is no known failure, and its text (up to n
 * bytes or a NUL) with control characters other than newlines replaced. */
void ccol__err_from_peer(ccol__err *err, int32_t code, const char *text,
                         size_t n);
/* Describes an operation for messages: "barrier #3", "bcast(root 1) #4",
 * led by the caller's label when there is one, so messages say what the
 * operation was for: "guard collective of f (allreduce_i64(min, n=3)
 * #11)". */
void ccol__op_describe_labeled(uint16_t op, uint64_t arg, uint64_t seq,
                               const char *label, char *out, size_t outlen);
const char *ccol__op_name(uint16_t op);

#endif /* CCOL_FRAME_H */
