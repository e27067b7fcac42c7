/*
 * comm.c - the public communicator: creation from params (the transport
 * table joins the job), its accessors, and the one path every operation
 * takes (ccol__comm_run): the owner and poison checks, the sequence number,
 * the injected faults of an operation's start, then the link's own run or
 * the tree engine. A failed operation poisons the communicator: later
 * calls fail at once with the first failure's status. The operations
 * themselves are in comm_ops.c.
 */
#include "comm.h"

#include "fault.h"
#include "transport.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* This process's pid, for the owner check of every operation: getpid()
 * is a system call (about 0.2 us), a noticeable share of a barrier over
 * shm, so it is cached and refreshed in every child fork() creates. A
 * child made some other way (a raw clone) keeps the parent's value and is
 * not caught here; ccol_comm_destroy asks getpid() itself. */
static _Atomic int self_pid;
static pthread_once_t self_pid_once = PTHREAD_ONCE_INIT;

static void
self_pid_refresh(void)
{
    atomic_store_explicit(&self_pid, (int)getpid(), memory_order_relaxed);
}

static void
self_pid_init(void)
{
    self_pid_refresh();
    (void)pthread_atfork(NULL, NULL, self_pid_refresh);
}

/* A one-rank communicator with every default, owned by this process:
 * creation fills in the rest and, on any failure, returns it poisoned so
 * the caller can read why. */
ccol_comm *
ccol__comm_alloc(void)
{
    ccol_comm *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    (void)pthread_once(&self_pid_once, self_pid_init);
    c->owner = (int)getpid();
    c->id.size = 1;
    c->id.max_payload = CCOL__DEFAULT_MAX_PAYLOAD;
    c->shape.parent = -1;
    c->timeout_s = CCOL__DEFAULT_TIMEOUT;
    c->threshold = CCOL__DEFAULT_TREE_THRESHOLD;
    c->fanout = CCOL__DEFAULT_TREE_FANOUT;
    return c;
}

/* Records the failure and poisons: every later operation fails at once
 * with this status (check_usable) instead of waiting on ranks that have
 * already given up. */
ccol_status
ccol__comm_fail(ccol_comm *c, ccol_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ccol__vseterr(&c->err, st, fmt, ap);
    va_end(ap);
    c->poisoned = true;
    return st;
}

/* Checks params against their documented ranges. */
static ccol_status
check_params(ccol_comm *c, const ccol_comm_params *p)
{
    uint64_t m = p->mask;
    int size = (m & CCOL_COMM_PARAM_SIZE) ? p->size : 1;
    int rank = (m & CCOL_COMM_PARAM_RANK) ? p->rank : 0;

    if (size < 1 || size > (1 << 20))
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "size %d is out of range [1, %d]", size, 1 << 20);
    if (rank < 0 || rank >= size)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "rank %d is out of range for size %d", rank, size);
    if ((m & CCOL_COMM_PARAM_TIMEOUT) &&
        !(p->timeout_s > 0 && p->timeout_s <= 1e7))
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "timeout %g s is not in (0, 1e7]", p->timeout_s);
    if ((m & CCOL_COMM_PARAM_MAX_PAYLOAD) &&
        (p->max_payload < 64 || p->max_payload > UINT32_MAX))
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "max_payload %zu is not in [64, 2^32)",
                            p->max_payload);
    if ((m & CCOL_COMM_PARAM_TREE_FANOUT) && p->tree_fanout < 2)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "tree_fanout %d is below 2", p->tree_fanout);
    if ((m & CCOL_COMM_PARAM_TREE_THRESHOLD) && p->tree_threshold < 1)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "tree_threshold %d is below 1", p->tree_threshold);
    if ((m & CCOL_COMM_PARAM_PORT) && (p->port < 0 || p->port > 65535))
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "port %d is out of range", p->port);
    c->id.size = size;
    c->id.rank = rank;
    return CCOL_OK;
}

/* The token is never kept in a frame: frames carry 8 bytes of its digest;
 * the tcp rendezvous proves knowledge of the token with an HMAC. */
static ccol_status
set_token(ccol_comm *c, const char *token)
{
    uint8_t d[32];

    if (token == NULL || token[0] == '\0')
        return CCOL_OK;
    c->token_str = ccol__strdup(token);
    if (c->token_str == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    ccol__sha256(token, strlen(token), d);
    c->id.token = ccol__ld64(d);
    if (c->id.token == 0)
        c->id.token = 1;
    return CCOL_OK;
}

/* Copies the optional params that passed check_params; fields whose mask
 * bit is clear keep comm_alloc's defaults. */
static void
apply_params(ccol_comm *c, const ccol_comm_params *p)
{
    uint64_t m = p->mask;
    if (m & CCOL_COMM_PARAM_TIMEOUT)
        c->timeout_s = p->timeout_s;
    if (m & CCOL_COMM_PARAM_MAX_PAYLOAD)
        c->id.max_payload = p->max_payload;
    if (m & CCOL_COMM_PARAM_TREE_THRESHOLD)
        c->threshold = p->tree_threshold;
    if (m & CCOL_COMM_PARAM_TREE_FANOUT)
        c->fanout = p->tree_fanout;
    if (m & CCOL_COMM_PARAM_INTERRUPT) {
        c->intr_fn = p->interrupt;
        c->intr_ud = p->interrupt_ud;
    }
}

/* What the transport is told: the communicator's identity and the
 * parameters every rank must share. */
ccol__link_cfg
ccol__comm_link_cfg(const ccol_comm *c)
{
    ccol__link_cfg cfg = { .id = c->id, .timeout_s = c->timeout_s,
                           .token_str = c->token_str,
                           .threshold = c->threshold, .fanout = c->fanout,
                           .owner = c->owner, .faults = c->faults };
    return cfg;
}

/* Joins the other ranks through the transport table; the only step of
 * creation that waits for them (and may be interrupted). */
static ccol_status
attach(ccol_comm *c, const ccol_comm_params *p)
{
    ccol__link_cfg cfg = ccol__comm_link_cfg(c);
    ccol__intr prev = ccol__intr_begin(c->intr_fn, c->intr_ud);
    ccol_status st = ccol__transport_attach(p, &cfg, &c->shape, &c->link,
                                            &c->err);

    c->id.comm_id = cfg.id.comm_id;
    if (ccol__intr_end(prev) && st != CCOL_OK)
        st = ccol__seterr(&c->err, CCOL_ERR_INTERRUPTED,
                          "rank %d/%d: joining the job was interrupted "
                          "by the caller",
                          c->id.rank, c->id.size);
    return st;
}

/* Forgets what each rank last said. */
static void
seen_free(ccol_comm *c)
{
    for (int r = 0; c->seen != NULL && r < c->id.size; r++)
        free(c->seen[r].label);
    free(c->seen);
    c->seen = NULL;
}

/* Per-rank bookkeeping for the current rank and size: what each rank
 * last said, and the tree. */
ccol_status
ccol__comm_ranks_setup(ccol_comm *c)
{
    c->seen = calloc((unsigned)c->id.size, sizeof *c->seen);
    if (c->seen == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    return ccol__shape_setup(&c->shape, c->id.rank, c->id.size, c->threshold,
                             c->fanout, &c->err);
}

/* Creation order: check params (nothing allocated yet), token digest,
 * per-rank bookkeeping, injected faults, tree shape, then the transport's
 * join, the only step that waits for other ranks (and may be interrupted). */
ccol_status
ccol_comm_create(const ccol_comm_params *params, ccol_comm **out)
{
    static const ccol_comm_params none = { 0 };
    const ccol_comm_params *p = params ? params : &none;
    ccol_comm *c;
    ccol_status st;

    if (out == NULL)
        return CCOL_ERR_INVALID_ARG;
    *out = c = ccol__comm_alloc();
    if (c == NULL)
        return CCOL_ERR_NO_MEMORY;
    st = check_params(c, p);
    if (st == CCOL_OK)
        apply_params(c, p);
    if (st == CCOL_OK && (p->mask & CCOL_COMM_PARAM_TOKEN))
        st = set_token(c, p->token);
    if (st == CCOL_OK)
        st = ccol__comm_ranks_setup(c);
    if (st == CCOL_OK)
        st = (p->mask & CCOL_COMM_PARAM_FAULT)
                 ? ccol__fault_setup(&c->faults, c->id.rank, c->id.size,
                                     p->fault, NULL, &c->err)
                 : ccol__fault_setup(&c->faults, c->id.rank, c->id.size,
                                     getenv("CCOL_FAULT"), "CCOL_FAULT",
                                     &c->err);
    if (st == CCOL_OK)
        st = attach(c, p);
    if (st != CCOL_OK)
        c->poisoned = true;
    return st;
}

/* The caller's oob table must be complete: a missing function would
 * only show up as a crash in the middle of a collective. */
static ccol_status
check_oob(ccol_comm *c, const ccol_oob *oob)
{
    if (oob == NULL || oob->allgather == NULL || oob->test == NULL ||
        oob->free == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "the oob table needs allgather, test and free");
    if (oob->size < 1 || oob->size > (1 << 20) || oob->rank < 0 ||
        oob->rank >= oob->size)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "oob rank %d / size %d are out of range",
                            oob->rank, oob->size);
    return CCOL_OK;
}

/* An oob communicator is a one-rank shell (only the params that make
 * sense without a transport are kept) whose rank, size and links are then
 * taken from the caller's table. */
ccol_status
ccol_comm_create_oob(const ccol_oob *oob, const ccol_comm_params *params,
                     ccol_comm **out)
{
    ccol_comm_params p = { 0 };
    ccol_comm *c;
    ccol_status st;
    const uint64_t keep = CCOL_COMM_PARAM_TIMEOUT | CCOL_COMM_PARAM_TOKEN |
                          CCOL_COMM_PARAM_MAX_PAYLOAD | CCOL_COMM_PARAM_NAME;

    if (out == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (params != NULL)
        p = *params;
    p.mask &= keep;
    st = ccol_comm_create(&p, out); /* a one-rank shell to fill in */
    c = *out;
    if (st != CCOL_OK)
        return st;
    st = check_oob(c, oob);
    if (st == CCOL_OK) {
        seen_free(c);
        c->id.rank = oob->rank;
        c->id.size = oob->size;
        st = ccol__comm_ranks_setup(c);
    }
    if (st == CCOL_OK) {
        ccol__link_cfg cfg = ccol__comm_link_cfg(c);
        st = ccol__transport_attach_oob(
            oob, (p.mask & CCOL_COMM_PARAM_NAME) ? p.name : NULL, &cfg,
            &c->link, &c->err);
        c->id.comm_id = cfg.id.comm_id;
    }
    if (st != CCOL_OK)
        c->poisoned = true;
    return st;
}

/* The transport goes first: it tells the other ranks this one left
 * (a departure flag, a closed socket) before the memory goes. In another
 * process than the owner (a forked child's copy, destroyed by its
 * finalizers or at exit) the transport frees only what this process
 * holds: the owner's job goes on undisturbed. */
void
ccol_comm_destroy(ccol_comm *c)
{
    if (c == NULL)
        return;
    ccol__link_destroy(c->link, c->owner != (int)getpid());
    ccol__fault_free(c->faults);
    ccol__shape_free(&c->shape);
    seen_free(c);
    free(c->slots_seen.label);
    free(c->token_str);
    free(c->job_rank);
    free(c);
}

const char *
ccol_comm_errmsg(const ccol_comm *c)
{
    return c ? c->err.msg : "no communicator (out of memory)";
}

ccol_status
ccol_comm_status(const ccol_comm *c)
{
    return c ? c->err.code : CCOL_ERR_NO_MEMORY;
}

int
ccol_comm_rank(const ccol_comm *c)
{
    return c ? c->id.rank : 0;
}

int
ccol_comm_size(const ccol_comm *c)
{
    return c ? c->id.size : 1;
}

const char *
ccol_comm_transport(const ccol_comm *c)
{
    return c && c->link ? c->link->ops->name : "local";
}

double
ccol_comm_timeout(const ccol_comm *c)
{
    return c ? c->timeout_s : CCOL__DEFAULT_TIMEOUT;
}

/* A new deadline applies from the next operation on; the range is the
 * one ccol_comm_create accepts. */
ccol_status
ccol_comm_set_timeout(ccol_comm *c, double seconds)
{
    if (c == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (!(seconds > 0 && seconds <= 1e7))
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "timeout %g s is not in (0, 1e7]", seconds);
    c->timeout_s = seconds;
    return CCOL_OK;
}

/* The label travels with every frame and slot (at most CCOL_LABEL_MAX
 * bytes), so it is bounded here, once, rather than at every send: a
 * longer one is cut with "..." at its end, never silently. */
void
ccol_comm_set_label(ccol_comm *c, const char *label)
{
    size_t n;

    if (c == NULL)
        return;
    if (label == NULL)
        label = "";
    n = ccol__utf8_cut(label, CCOL__LABEL_MAX);
    if (label[n] != '\0')
        n = ccol__utf8_cut(label, CCOL__LABEL_MAX - 3);
    memcpy(c->label, label, n);
    c->label[n] = '\0';
    if (label[n] != '\0') {
        memcpy(c->label + n, "...", 4);
        n += 3;
    }
    c->label_len = n;
}

uint64_t
ccol_comm_seq(const ccol_comm *c)
{
    return c ? c->seq : 0;
}

void
ccol_comm_traffic(const ccol_comm *c, uint64_t *sent, uint64_t *received)
{
    if (sent)
        *sent = c && c->link ? c->link->sent : 0;
    if (received)
        *received = c && c->link ? c->link->received : 0;
}

/* Fails fast on a poisoned communicator, keeping the first failure. */
static ccol_status
check_usable(ccol_comm *c)
{
    char first[CCOL__ERRMSG_MAX];
    const char *prefix = "communicator unusable after an earlier failure: ";

    if (!c->poisoned)
        return CCOL_OK;
    if (strncmp(c->err.msg, prefix, strlen(prefix)) != 0) {
        size_t n = strlen(prefix);
        memcpy(first, c->err.msg, sizeof first);
        memcpy(c->err.msg, prefix, n);
        memcpy(c->err.msg + n, first, sizeof c->err.msg - n - 1);
        c->err.msg[sizeof c->err.msg - 1] = '\0';
    }
    return c->err.code != CCOL_OK ? c->err.code : CCOL_ERR_CLOSED;
}

/* A forked child's copy shares the parent's segment and sockets: any
 * frame or slot it wrote would corrupt the parent's job, so it fails
 * before touching anything (and poisons nothing, not even the copy). */
static ccol_status
check_owner(ccol_comm *c)
{
    int me = atomic_load_explicit(&self_pid, memory_order_relaxed);

    if (c->owner == me)
        return CCOL_OK;
    return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                        "this communicator belongs to process %d (rank %d); "
                        "a forked child (process %d) cannot use it: create "
                        "its own",
                        c->owner, c->id.rank, me);
}

/* The link runs the whole operation when it can (oob, the one-hop
 * slots), else, or when it declines, the tree engine does. */
static ccol_status
dispatch(ccol_comm *c, ccol__coll *op)
{
    ccol__engine e = { &c->id, c->link, &c->shape, c->seen, &c->slots_seen,
                       &c->err };
    bool ran = false;
    ccol_status st = CCOL_OK;

    if (c->link != NULL && c->link->ops->run != NULL)
        st = c->link->ops->run(c->link, op, &ran, &c->err);
    return ran ? st : ccol__tree_exec(&e, op);
}

void
ccol__comm_report(ccol_comm *c, ccol__coll *op)
{
    ccol__engine e = { &c->id, c->link, &c->shape, c->seen, &c->slots_seen,
                       &c->err };

    char msg[sizeof c->err.msg];

    /* the same words on every rank, naming the rank that failed */
    snprintf(msg, sizeof msg, "%s", c->err.msg);
    ccol__seterr(&c->err, c->err.code, "rank %d could not use the result: "
                 "%s", ccol__id_gr(&c->id, c->id.rank), msg);
    /* a link that runs operations itself (shm's slots) never reads an
     * ERRUP between operations: only tree runs are told */
    if (c->link != NULL && c->link->ops->run == NULL)
        ccol__tree_report(&e, op);
}

/* Every public operation ends here: refuse a forked child, fail fast when
 * poisoned, bound the contribution, run it with the interrupt hook
 * installed, and turn a wait the hook stopped into INTERRUPTED. */
ccol_status
ccol__comm_run(ccol_comm *c, ccol__coll *op)
{
    ccol__intr prev;
    ccol_status st = check_owner(c);
    if (st == CCOL_OK)
        st = check_usable(c);
    if (st != CCOL_OK)
        return st;
    if (op->len > c->id.max_payload)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "a %zu-byte contribution exceeds max_payload "
                            "(%zu)",
                            op->len, c->id.max_payload);
    ccol__clrerr(&c->err);
    op->seq = ++c->seq;
    op->label = c->label;
    op->label_len = c->label_len;
    op->timeout_s = c->timeout_s;
    op->slots_seen = &c->slots_seen;
    prev = ccol__intr_begin(c->intr_fn, c->intr_ud);
    ccol__fault_on_op(c->faults, c->link, op->seq, c->timeout_s);
    st = dispatch(c, op);
    if (st != CCOL_OK) {
        free(op->result);
        op->result = NULL;
        op->result_len = 0;
        c->poisoned = true;
    }
    if (ccol__intr_end(prev) && st != CCOL_OK) {
        char what[CCOL__WHAT_MAX];
        ccol__op_describe_labeled(op->op, op->arg, c->seq, c->label, what,
                                  sizeof what);
        st = ccol__comm_fail(c, CCOL_ERR_INTERRUPTED,
                             "%s interrupted by the caller on rank %d", what,
                             c->id.rank);
    }
    return st;
}

void
ccol_comm_set_interrupt(ccol_comm *c, ccol_interrupt_fn fn, void *ud)
{
    if (c == NULL)
        return;
    c->intr_fn = fn;
    c->intr_ud = ud;
}

