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
#include "fault.h"

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

struct fault {
    int rank;      /* misbehaving rank */
    uint64_t op;   /* operation number, 0 if msg is used */
    uint64_t msg;  /* frame number, 0 if op is used */
    fkind kind;
    long ms;       /* delay or stall length, -1 for the default */
    bool fired;
};

/* The parsed faults of one communicator and what they count. */
struct ccol__faults {
    int rank;           /* this rank: only its faults fire */
    int size;           /* for messages */
    struct fault *f;    /* the faults */
    int n;              /* their number */
    uint64_t nsent;     /* messages sent, for msg-numbered faults */
};

static const char *const kinds[] = { "drop",  "delay", "truncate", "corrupt",
                                     "close", "kill",  "stall" };

/* Sets one key of a fault from its text; false for an unknown key or a
 * bad value. */
static bool
set_field(struct fault *f, const char *key, const char *val)
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
parse_one(char *text, struct fault *f)
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
ccol__fault_setup(ccol__faults **out, int rank, int size, const char *spec,
                  const char *from, ccol__err *err)
{
    char *copy, *save = NULL;
    ccol__faults *fs;

    *out = NULL;
    if (spec == NULL || spec[0] == '\0')
        return CCOL_OK;
    copy = ccol__strdup(spec);
    fs = calloc(1, sizeof *fs);
    if (fs != NULL)
        fs->f = calloc(strlen(spec) / 2 + 1, sizeof *fs->f);
    if (copy == NULL || fs == NULL || fs->f == NULL) {
        free(copy);
        ccol__fault_free(fs);
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    fs->rank = rank;
    fs->size = size;
    for (char *one = strtok_r(copy, ";", &save); one != NULL;
         one = strtok_r(NULL, ";", &save)) {
        if (!parse_one(one, &fs->f[fs->n])) {
            free(copy);
            ccol__fault_free(fs);
            return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                                "%s%sbad fault spec '%s': expected "
                                "rank=R,op=K|msg=K,kind=drop|delay|truncate|"
                                "corrupt|close|kill|stall[,ms=N]",
                                from ? from : "", from ? ": " : "", spec);
        }
        fs->n++;
    }
    free(copy);
    *out = fs;
    return CCOL_OK;
}

/* Drops the parsed faults. */
void
ccol__fault_free(ccol__faults *fs)
{
    if (fs == NULL)
        return;
    free(fs->f);
    free(fs);
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
static struct fault *
match(ccol__faults *fs, bool by_op, uint64_t n)
{
    for (int i = 0; i < fs->n; i++) {
        struct fault *f = &fs->f[i];
        if (f->fired || f->rank != fs->rank)
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
ccol__fault_on_op(ccol__faults *fs, ccol__link *l, uint64_t seq,
                  double timeout_s)
{
    struct fault *f;

    if (fs == NULL || (f = match(fs, true, seq)) == NULL)
        return;
    if (f->kind != F_KILL && f->kind != F_STALL && f->kind != F_CLOSE)
        return; /* per-frame faults wait for the first frame of the op */
    f->fired = true;
    ccol__log(CCOL_LOG_WARN, "comm", "rank %d/%d: injected fault: %s at "
              "operation %llu", fs->rank, fs->size, kinds[f->kind],
              (unsigned long long)seq);
    if (f->kind == F_KILL)
        raise(SIGKILL);
    else if (f->kind == F_STALL)
        sleep_ms(f->ms >= 0 ? f->ms : (long)(timeout_s * 2000));
    else if (l != NULL && l->ops->shutdown != NULL)
        l->ops->shutdown(l);
}

/* Applies a per-frame fault; returns the status of the (maybe) send. */
static ccol_status
apply(ccol__link *l, struct fault *f, int peer, const uint8_t *frame,
      size_t len, int64_t deadline, ccol__err *err)
{
    uint8_t *bad;
    ccol_status st;

    f->fired = true;
    switch (f->kind) {
    case F_DROP:
        return CCOL_OK;
    case F_DELAY:
        sleep_ms(f->ms >= 0 ? f->ms : 200);
        return l->ops->send(l, peer, frame, len, deadline, err);
    case F_TRUNCATE:
        st = l->ops->send(l, peer, frame, len / 2, deadline, err);
        if (l->ops->shutdown != NULL)
            l->ops->shutdown(l);
        return st;
    default: /* F_CORRUPT: flip a payload byte, or a header byte */
        bad = malloc(len);
        if (bad == NULL)
            return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
        memcpy(bad, frame, len);
        bad[len > CCOL__HDR_SIZE ? len - 1 : 20] ^= 0x5a;
        st = l->ops->send(l, peer, bad, len, deadline, err);
        free(bad);
        return st;
    }
}

/* Counts one more message and finds the per-message fault that matches
 * it (by message number, else by operation `seq`), or NULL. */
static struct fault *
match_message(ccol__faults *fs, uint64_t seq)
{
    struct fault *f = NULL;

    if (fs == NULL)
        return NULL;
    fs->nsent++;
    f = match(fs, false, fs->nsent);
    if (f == NULL)
        f = match(fs, true, seq);
    if (f == NULL || f->kind == F_KILL || f->kind == F_STALL ||
        f->kind == F_CLOSE)
        return NULL; /* operation faults fire in ccol__fault_on_op */
    return f;
}

/* Every frame of every engine goes through here. */
ccol_status
ccol__fault_send(ccol__link *l, int peer, const uint8_t *frame, size_t len,
                 uint64_t seq, int64_t deadline, ccol__err *err)
{
    struct fault *f = match_message(l->faults, seq);

    if (f == NULL)
        return l->ops->send(l, peer, frame, len, deadline, err);
    ccol__log(CCOL_LOG_WARN, "comm", "rank %d/%d: injected fault: %s of "
              "frame %llu to rank %d", l->faults->rank, l->faults->size,
              kinds[f->kind], (unsigned long long)l->faults->nsent, peer);
    return apply(l, f, peer, frame, len, deadline, err);
}

/* The slot counterpart of ccol__fault_send. */
int
ccol__fault_publish(ccol__link *l, uint64_t seq)
{
    struct fault *f = match_message(l->faults, seq);

    if (f == NULL)
        return CCOL__FAULT_NONE;
    f->fired = true;
    ccol__log(CCOL_LOG_WARN, "comm", "rank %d/%d: injected fault: %s of "
              "message %llu (a shm slot)", l->faults->rank, l->faults->size,
              kinds[f->kind], (unsigned long long)l->faults->nsent);
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
