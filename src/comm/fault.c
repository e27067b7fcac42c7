/*
 * fault.c - fault injection in the transports, for tests and the fault
 * campaign. A spec (ccol_comm_params.fault or CCOL_FAULT) lists faults
 * separated by ';', each a comma-separated list of key=value:
 *
 *   rank=R       the rank that misbehaves (required)
 *   op=K         at its K-th operation (1-based), or
 *   msg=K        at the K-th frame it sends (1-based)
 *   kind=drop | delay | truncate | corrupt | close | kill | stall
 *   ms=N         delay length (delay, default 200) or stall length
 *                (stall, default twice the deadline)
 *
 * e.g. CCOL_FAULT="rank=1,op=3,kind=stall" or "rank=0,msg=2,kind=corrupt".
 * drop, delay, truncate and corrupt act on one frame; close shuts every
 * connection as a crash would; kill ends the process with SIGKILL; stall
 * sleeps past the deadline. Each fault fires once.
 *
 * A shm slot (the one-hop path of small operations) counts as one message:
 * a dropped one is never published, a delayed one later, a truncated one
 * is replaced by a shutdown (the rank leaves without publishing), a
 * corrupt one carries a length no slot can hold.
 */
#include "comm.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum fkind {
    F_DROP,
    F_DELAY,
    F_TRUNCATE,
    F_CORRUPT,
    F_CLOSE,
    F_KILL,
    F_STALL
} fkind;

struct ccol__fault {
    int rank;      /* misbehaving rank */
    uint64_t op;   /* operation number, 0 if msg is used */
    uint64_t msg;  /* frame number, 0 if op is used */
    fkind kind;
    long ms;       /* delay or stall length, -1 for the default */
    bool fired;
};

static const char *const kinds[] = { "drop",  "delay", "truncate", "corrupt",
                                     "close", "kill",  "stall" };

/* Sets one key of a fault from its text; false for an unknown key or a
 * bad value. */
static bool
set_field(struct ccol__fault *f, const char *key, const char *val)
{
    long long v;
    if (strcmp(key, "kind") == 0) {
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if (strcmp(val, kinds[i]) == 0) {
                f->kind = (fkind)i;
                return true;
            }
        return false;
    }
    if (!ccol__parse_int(val, 0, (1ll << 40), &v))
        return false;
    if (strcmp(key, "rank") == 0)
        f->rank = (int)v;
    else if (strcmp(key, "op") == 0 && v > 0)
        f->op = (uint64_t)v;
    else if (strcmp(key, "msg") == 0 && v > 0)
        f->msg = (uint64_t)v;
    else if (strcmp(key, "ms") == 0)
        f->ms = (long)v;
    else
        return false;
    return true;
}

/* Parses one fault "k=v,k=v" (modified in place). */
static bool
parse_one(char *text, struct ccol__fault *f)
{
    char *save = NULL;
    bool have_kind = false;

    memset(f, 0, sizeof *f);
    f->rank = -1;
    f->ms = -1;
    for (char *kv = strtok_r(text, ",", &save); kv != NULL;
         kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL)
            return false;
        *eq = '\0';
        if (!set_field(f, kv, eq + 1))
            return false;
        have_kind = have_kind || strcmp(kv, "kind") == 0;
    }
    return have_kind && f->rank >= 0 && (f->op > 0) != (f->msg > 0);
}

/* Parses the whole spec at creation: a typo is an INVALID_ARG then,
 * not a fault that silently never fires. `from` names the variable the
 * spec came from (NULL: params.fault), so the message names it. */
ccol_status
ccol__fault_setup(ccol_comm *c, const char *spec, const char *from)
{
    char *copy, *save = NULL;
    int n = 0;

    if (spec == NULL || spec[0] == '\0')
        return CCOL_OK;
    copy = ccol__strdup(spec);
    c->faults = calloc(strlen(spec) / 2 + 1, sizeof *c->faults);
    if (copy == NULL || c->faults == NULL) {
        free(copy);
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    for (char *one = strtok_r(copy, ";", &save); one != NULL;
         one = strtok_r(NULL, ";", &save)) {
        if (!parse_one(one, &c->faults[n])) {
            free(copy);
            return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "%s%sbad fault spec '%s': expected "
                                "rank=R,op=K|msg=K,kind=drop|delay|truncate|"
                                "corrupt|close|kill|stall[,ms=N]",
                                from ? from : "", from ? ": " : "", spec);
        }
        n++;
    }
    free(copy);
    c->nfaults = n;
    return CCOL_OK;
}

/* Drops the parsed faults. */
void
ccol__fault_free(ccol_comm *c)
{
    free(c->faults);
    c->faults = NULL;
    c->nfaults = 0;
}

/* Sleeps through signals: a stall must last as long as asked. */
static void
sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Finds an unfired fault of this rank matching the op or frame number. */
static struct ccol__fault *
match(ccol_comm *c, bool by_op, uint64_t n)
{
    for (int i = 0; i < c->nfaults; i++) {
        struct ccol__fault *f = &c->faults[i];
        if (f->fired || f->rank != c->rank)
            continue;
        if ((by_op && f->op == n) || (!by_op && f->msg == n))
            return f;
    }
    return NULL;
}

/* Operation faults fire as the operation starts, before any message:
 * kill as a crash, stall as a hung rank, close as a rank whose
 * connections break. */
void
ccol__fault_on_op(ccol_comm *c)
{
    struct ccol__fault *f;

    if (c->nfaults == 0 || (f = match(c, true, c->seq)) == NULL)
        return;
    if (f->kind != F_KILL && f->kind != F_STALL && f->kind != F_CLOSE)
        return; /* per-frame faults wait for the first frame of the op */
    f->fired = true;
    ccol__log(CCOL_LOG_WARN, "comm", "rank %d/%d: injected fault: %s at "
              "operation %llu", c->rank, c->size, kinds[f->kind],
              (unsigned long long)c->seq);
    if (f->kind == F_KILL)
        raise(SIGKILL);
    else if (f->kind == F_STALL)
        sleep_ms(f->ms >= 0 ? f->ms : (long)(c->timeout_s * 2000));
    else if (c->ops != NULL && c->ops->shutdown != NULL)
        c->ops->shutdown(c);
}

/* Applies a per-frame fault; returns the status of the (maybe) send. */
static ccol_status
apply(ccol_comm *c, struct ccol__fault *f, int peer, const uint8_t *frame,
      size_t len)
{
    uint8_t *bad;
    ccol_status st;

    f->fired = true;
    switch (f->kind) {
    case F_DROP:
        return CCOL_OK;
    case F_DELAY:
        sleep_ms(f->ms >= 0 ? f->ms : 200);
        return c->ops->send(c, peer, frame, len);
    case F_TRUNCATE:
        st = c->ops->send(c, peer, frame, len / 2);
        if (c->ops->shutdown != NULL)
            c->ops->shutdown(c);
        return st;
    default: /* F_CORRUPT: flip a payload byte, or a header byte */
        bad = malloc(len);
        if (bad == NULL)
            return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
        memcpy(bad, frame, len);
        bad[len > CCOL__HDR_SIZE ? len - 1 : 20] ^= 0x5a;
        st = c->ops->send(c, peer, bad, len);
        free(bad);
        return st;
    }
}

/* Counts one more message and finds the per-message fault that matches
 * it (by message number, else by operation), or NULL. */
static struct ccol__fault *
match_message(ccol_comm *c)
{
    struct ccol__fault *f = NULL;

    c->nsent++;
    if (c->nfaults > 0) {
        f = match(c, false, c->nsent);
        if (f == NULL)
            f = match(c, true, c->seq);
    }
    if (f == NULL || f->kind == F_KILL || f->kind == F_STALL ||
        f->kind == F_CLOSE)
        return NULL; /* operation faults fire in ccol__fault_on_op */
    return f;
}

/* Every frame of every engine goes through here. */
ccol_status
ccol__fault_send(ccol_comm *c, int peer, const uint8_t *frame, size_t len)
{
    struct ccol__fault *f = match_message(c);

    if (f == NULL)
        return c->ops->send(c, peer, frame, len);
    ccol__log(CCOL_LOG_WARN, "comm", "rank %d/%d: injected fault: %s of "
              "frame %llu to rank %d", c->rank, c->size, kinds[f->kind],
              (unsigned long long)c->nsent, peer);
    return apply(c, f, peer, frame, len);
}

/* The slot counterpart of ccol__fault_send. */
int
ccol__fault_publish(ccol_comm *c)
{
    struct ccol__fault *f = match_message(c);

    if (f == NULL)
        return CCOL__FAULT_NONE;
    f->fired = true;
    ccol__log(CCOL_LOG_WARN, "comm", "rank %d/%d: injected fault: %s of "
              "message %llu (a shm slot)", c->rank, c->size, kinds[f->kind],
              (unsigned long long)c->nsent);
    switch (f->kind) {
    case F_DROP:
        return CCOL__FAULT_DROP;
    case F_DELAY:
        sleep_ms(f->ms >= 0 ? f->ms : 200);
        return CCOL__FAULT_NONE;
    case F_TRUNCATE:
        return CCOL__FAULT_TRUNCATE;
    default:
        return CCOL__FAULT_CORRUPT;
    }
}
