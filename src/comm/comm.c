/*
 * comm.c - creation of communicators and the public collective operations.
 *
 * Each operation is a thin layer over the tree engine (tree.c): it encodes
 * this rank's contribution, names the fingerprint every rank must agree on,
 * supplies how rank 0 turns the gathered blobs into the result, and decodes
 * that result defensively (it crossed the wire). A failed operation poisons
 * the communicator: later calls fail at once with the first failure's status.
 */
#include "comm.h"

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
static ccol_comm *
comm_alloc(void)
{
    ccol_comm *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    (void)pthread_once(&self_pid_once, self_pid_init);
    c->owner = (int)getpid();
    c->size = 1;
    c->parent = -1;
    c->timeout_s = CCOL__DEFAULT_TIMEOUT;
    c->max_payload = CCOL__DEFAULT_MAX_PAYLOAD;
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

/* The spin-then-block policy's budget. Yielding instead of pausing when
 * ranks outnumber processors: a spinning rank would otherwise hold the core
 * the rank it waits for needs. */
ccol_status
ccol__spin_setup(ccol_comm *c, int64_t *spin_ns, bool *yield)
{
    const char *v = getenv("CCOL_SPIN_US");
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    long long us;

    *spin_ns = CCOL__DEFAULT_SPIN_NS;
    *yield = ncpu > 0 && c->size > ncpu;
    if (v == NULL || v[0] == '\0')
        return CCOL_OK;
    if (!ccol__parse_int(v, 0, 1000000, &us))
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "CCOL_SPIN_US='%s' is not a number of "
                            "microseconds in [0, 1000000]",
                            v);
    *spin_ns = (int64_t)us * 1000;
    return CCOL_OK;
}

/* One wording for every transport's join timeout, so a launcher's log
 * looks the same whichever transport the ranks used. */
ccol_status
ccol__join_timeout(ccol_comm *c, const char *where,
                   bool (*absent)(const void *ud, int r), const void *ud)
{
    ccol__buf b = { 0 };

    for (int r = 0, n = 0; r < c->size; r++)
        if (absent(ud, r))
            ccol__buf_printf(&b, "%s%d", n++ ? ", " : "", ccol__gr(c, r));
    ccol__seterr(&c->err, CCOL_ERR_TIMEOUT,
                 "%s: ranks did not join within %.3g s; missing: %s", where,
                 c->timeout_s, b.p ? (char *)b.p : "?");
    ccol__buf_free(&b);
    return CCOL_ERR_TIMEOUT;
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
    c->size = size;
    c->rank = rank;
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
    c->token = ccol__ld64(d);
    if (c->token == 0)
        c->token = 1;
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
        c->max_payload = p->max_payload;
    if (m & CCOL_COMM_PARAM_TREE_THRESHOLD)
        c->threshold = p->tree_threshold;
    if (m & CCOL_COMM_PARAM_TREE_FANOUT)
        c->fanout = p->tree_fanout;
    if (m & CCOL_COMM_PARAM_INTERRUPT) {
        c->intr_fn = p->interrupt;
        c->intr_ud = p->interrupt_ud;
    }
}

/* shm: the job is named by params.name, else by the rendezvous port. */
static ccol_status
attach_shm(ccol_comm *c, const ccol_comm_params *p)
{
    uint64_t m = p->mask;
    char name[96], id[128];

    if ((m & CCOL_COMM_PARAM_NAME) && p->name != NULL && p->name[0])
        snprintf(name, sizeof name, "%s", p->name);
    else if ((m & CCOL_COMM_PARAM_PORT) && p->port > 0)
        snprintf(name, sizeof name, "port-%d", p->port);
    else if (c->size == 1)
        return CCOL_OK; /* a one-rank job needs no segment */
    else
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "the shm transport needs a job name (params.name) "
                            "or the job's port (params.port or MASTER_PORT)");
    snprintf(id, sizeof id, "shm:%s", name);
    c->comm_id = ccol__hash_str(id);
    return ccol__shm_attach(c, name);
}

/* Chooses the transport and joins the other ranks. */
static ccol_status
attach(ccol_comm *c, const ccol_comm_params *p)
{
    uint64_t m = p->mask;
    ccol_transport t = (m & CCOL_COMM_PARAM_TRANSPORT) ? p->transport
                                                       : CCOL_TRANSPORT_DEFAULT;
    const char *addr = (m & CCOL_COMM_PARAM_ADDR) && p->addr ? p->addr
                                                             : "127.0.0.1";
    char id[300];

    if (t == CCOL_TRANSPORT_INPROC) {
        if (!(m & CCOL_COMM_PARAM_NAME) || p->name == NULL || !p->name[0])
            return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "the inproc transport needs a group name");
        snprintf(id, sizeof id, "inproc:%s", p->name);
        c->comm_id = ccol__hash_str(id);
        return ccol__inproc_attach(c, p->name);
    }
    if (t == CCOL_TRANSPORT_SHM)
        return attach_shm(c, p);
    if (t != CCOL_TRANSPORT_DEFAULT && t != CCOL_TRANSPORT_TCP)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "transport %d is not supported by "
                            "ccol_comm_create",
                            (int)t);
    if (c->size == 1 && t == CCOL_TRANSPORT_DEFAULT)
        return CCOL_OK; /* a one-rank job needs no network */
    if (!(m & CCOL_COMM_PARAM_PORT) || p->port <= 0)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "the tcp transport needs the rendezvous port of "
                            "rank 0 (params.port or MASTER_PORT)");
    /* The port alone names the job: ranks may spell rank 0's host
     * differently ("localhost", "127.0.0.1", a host name). */
    snprintf(id, sizeof id, "tcp:%d", p->port);
    c->comm_id = ccol__hash_str(id);
    return ccol__tcp_attach(c, addr, p->port);
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
    *out = c = comm_alloc();
    if (c == NULL)
        return CCOL_ERR_NO_MEMORY;
    st = check_params(c, p);
    if (st == CCOL_OK)
        apply_params(c, p);
    if (st == CCOL_OK && (p->mask & CCOL_COMM_PARAM_TOKEN))
        st = set_token(c, p->token);
    if (st == CCOL_OK) {
        c->seen = calloc((unsigned)c->size, sizeof *c->seen);
        if (c->seen == NULL)
            st = ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    if (st == CCOL_OK)
        st = (p->mask & CCOL_COMM_PARAM_FAULT)
                 ? ccol__fault_setup(c, p->fault, NULL)
                 : ccol__fault_setup(c, getenv("CCOL_FAULT"), "CCOL_FAULT");
    if (st == CCOL_OK)
        st = ccol__tree_setup(c);
    if (st == CCOL_OK) {
        ccol__intr prev = ccol__intr_begin(c->intr_fn, c->intr_ud);
        st = attach(c, p);
        if (ccol__intr_end(prev) && st != CCOL_OK)
            st = ccol__seterr(&c->err, CCOL_ERR_INTERRUPTED,
                              "rank %d/%d: joining the job was interrupted "
                              "by the caller",
                              c->rank, c->size);
    }
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
        c->rank = oob->rank;
        c->size = oob->size;
        free(c->seen);
        c->seen = calloc((unsigned)c->size, sizeof *c->seen);
        c->comm_id = ccol__hash_str((p.mask & CCOL_COMM_PARAM_NAME) && p.name
                                        ? p.name
                                        : "oob");
        st = c->seen ? ccol__oob_attach(c, oob)
                     : ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY,
                                    "out of memory");
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
    c->foreign = c->owner != (int)getpid();
    if (c->ops != NULL)
        c->ops->destroy(c);
    ccol__fault_free(c);
    free(c->children);
    free(c->heights);
    for (int r = 0; c->seen != NULL && r < c->size; r++)
        free(c->seen[r].label);
    free(c->seen);
    free(c->slots_seen.label);
    free(c->token_str);
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
    return c ? c->rank : 0;
}

int
ccol_comm_size(const ccol_comm *c)
{
    return c ? c->size : 1;
}

const char *
ccol_comm_transport(const ccol_comm *c)
{
    return c && c->ops ? c->ops->name : "local";
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
        *sent = c ? c->sent : 0;
    if (received)
        *received = c ? c->received : 0;
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
                        c->owner, c->rank, me);
}

/* Every public operation ends here: refuse a forked child, fail fast when
 * poisoned, bound the contribution, run the transport's engine with the
 * interrupt hook installed, and turn a wait the hook stopped into
 * INTERRUPTED. */
static ccol_status
run_op(ccol_comm *c, ccol__coll *op)
{
    ccol__intr prev;
    ccol_status st = check_owner(c);
    if (st == CCOL_OK)
        st = check_usable(c);
    if (st != CCOL_OK)
        return st;
    if (op->len > c->max_payload)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "a %zu-byte contribution exceeds max_payload "
                            "(%zu)",
                            op->len, c->max_payload);
    ccol__clrerr(&c->err);
    prev = ccol__intr_begin(c->intr_fn, c->intr_ud);
    if (c->ops != NULL && c->ops->run != NULL)
        st = c->ops->run(c, op);
    else
        st = ccol__tree_run(c, op);
    if (ccol__intr_end(prev) && st != CCOL_OK) {
        char what[CCOL__WHAT_MAX];
        ccol__op_describe_labeled(op->op, op->arg, c->seq, c->label, what,
                                  sizeof what);
        st = ccol__comm_fail(c, CCOL_ERR_INTERRUPTED,
                             "%s interrupted by the caller on rank %d", what,
                             c->rank);
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

/* ---- allgatherv: result = u32 count, u64 lens[count], data ---- */

/* The result every rank decodes: the rank count, each rank's length,
 * then the contributions back to back in rank order. */
static ccol_status
finish_allgatherv(ccol_comm *c, void *ud, const uint8_t *const *blobs,
                  const size_t *lens, uint8_t **out, size_t *out_len)
{
    ccol__buf b = { 0 };
    size_t total = 4 + 8 * (size_t)c->size;
    (void)ud;
    for (int r = 0; r < c->size; r++)
        total += lens[r];
    ccol__buf_reserve(&b, total); /* one allocation, no regrowth */
    ccol__buf_u32(&b, (uint32_t)c->size);
    for (int r = 0; r < c->size; r++)
        ccol__buf_u64(&b, lens[r]);
    for (int r = 0; r < c->size; r++)
        ccol__buf_put(&b, blobs[r], lens[r]);
    if (b.oom) {
        ccol__buf_free(&b);
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    *out = ccol__buf_take(&b, out_len);
    return CCOL_OK;
}

/* Checks the result before trusting any length in it: it may have come
 * through another process (the star's rank 0). */
static ccol_status
decode_allgatherv(ccol_comm *c, const uint8_t *p, size_t len, void **out,
                  size_t *lens)
{
    ccol__rd rd;
    size_t total = 0;
    uint8_t *data = NULL;

    ccol__rd_init(&rd, p, len);
    if (ccol__rd_u32(&rd) != (uint32_t)c->size)
        return ccol__comm_fail(c, CCOL_ERR_PEER,
                               "allgatherv result has the wrong rank count");
    for (int r = 0; r < c->size; r++) {
        uint64_t n = ccol__rd_u64(&rd);
        if (n > len) {
            ccol__rd_fail(&rd, "length out of range");
            break;
        }
        total += (size_t)n;
    }
    if (!ccol__rd_ok(&rd) || ccol__rd_left(&rd) != total)
        return ccol__comm_fail(c, CCOL_ERR_PEER,
                               "allgatherv result is malformed");
    if (total > 0 && (data = malloc(total)) == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (total > 0)
        memcpy(data, p + len - total, total);
    for (int r = 0; r < c->size; r++)
        lens[r] = (size_t)ccol__ld64(p + 4 + 8 * (size_t)r);
    *out = data;
    return CCOL_OK;
}

/* Ranks may contribute different lengths, so they are not part of the
 * fingerprint; everything else is checked by the engine. */
ccol_status
ccol_allgatherv(ccol_comm *c, const void *data, size_t len, void **out,
                size_t *lens)
{
    ccol__coll op = { .op = CCOL__OP_ALLGATHERV, .mode = CCOL__UP_CONCAT,
                      .finish = finish_allgatherv, .data = data, .len = len };
    ccol_status st;

    if (c == NULL || out == NULL || lens == NULL || (data == NULL && len))
        return c ? ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "allgatherv: NULL argument")
                 : CCOL_ERR_INVALID_ARG;
    st = run_op(c, &op);
    if (st == CCOL_OK)
        st = decode_allgatherv(c, op.result, op.result_len, out, lens);
    free(op.result);
    return st;
}

/* ---- bcast ---- */

/* The root's contribution is the result; every other rank contributed
 * nothing. */
static ccol_status
finish_bcast(ccol_comm *c, void *ud, const uint8_t *const *blobs,
             const size_t *lens, uint8_t **out, size_t *out_len)
{
    int root = *(const int *)ud;
    (void)c;
    *out = NULL;
    *out_len = lens[root];
    if (lens[root] == 0)
        return CCOL_OK;
    *out = malloc(lens[root]);
    if (*out == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    memcpy(*out, blobs[root], lens[root]);
    return CCOL_OK;
}

/* The root is the fingerprint: ranks naming different roots diverge. */
ccol_status
ccol_bcast(ccol_comm *c, int root, const void *data, size_t len, void **out,
           size_t *out_len)
{
    ccol__coll op = { .op = CCOL__OP_BCAST, .mode = CCOL__UP_CONCAT,
                      .finish = finish_bcast, .finish_ud = &root };
    ccol_status st;

    if (c == NULL || out == NULL || out_len == NULL)
        return c ? ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "bcast: NULL argument")
                 : CCOL_ERR_INVALID_ARG;
    if (root < 0 || root >= c->size)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "bcast: root %d is out of range for size %d",
                            root, c->size);
    if (c->rank == root && data == NULL && len > 0)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "bcast: NULL data");
    op.arg = (uint64_t)root;
    op.data = c->rank == root ? data : NULL;
    op.len = c->rank == root ? len : 0;
    st = run_op(c, &op);
    if (st == CCOL_OK) {
        *out = op.result;
        *out_len = op.result_len;
        if (op.result_len == 0) {
            free(op.result);
            *out = NULL;
        }
    }
    return st;
}

/* ---- allreduce: reduced in rank order on rank 0 ---- */

typedef struct reduce_args {
    bool is_f64; /* double or int64 values */
    ccol_op op;
    size_t n;
} reduce_args;

/* Integer reductions; sums wrap (computed unsigned) rather than being
 * undefined on overflow. */
static int64_t
reduce_i64(ccol_op op, int64_t a, int64_t b)
{
    switch (op) {
    case CCOL_OP_SUM: return (int64_t)((uint64_t)a + (uint64_t)b);
    case CCOL_OP_MIN: return a < b ? a : b;
    case CCOL_OP_MAX: return a > b ? a : b;
    case CCOL_OP_AND: return a & b;
    case CCOL_OP_OR: return a | b;
    }
    return a;
}

/* Double reductions. min and max skip a NaN accumulator, so one NaN does
 * not hide the other ranks' values. */
static double
reduce_f64(ccol_op op, double a, double b)
{
    switch (op) {
    case CCOL_OP_SUM: return a + b;
    case CCOL_OP_MIN: return isnan(a) || b < a ? b : a;
    case CCOL_OP_MAX: return isnan(a) || b > a ? b : a;
    case CCOL_OP_AND: return (a != 0 && b != 0) ? 1.0 : 0.0;
    case CCOL_OP_OR: return (a != 0 || b != 0) ? 1.0 : 0.0;
    }
    return a;
}

/* Applies one rank's blob to the accumulator `acc`. */
static void
fold_blob(const reduce_args *a, uint8_t *acc, const uint8_t *blob)
{
    for (size_t i = 0; i < a->n; i++) {
        uint64_t x = ccol__ld64(acc + 8 * i), y = ccol__ld64(blob + 8 * i);
        if (a->is_f64) {
            double dx, dy, dr;
            memcpy(&dx, &x, 8);
            memcpy(&dy, &y, 8);
            dr = reduce_f64(a->op, dx, dy);
            memcpy(&x, &dr, 8);
        } else {
            x = (uint64_t)reduce_i64(a->op, (int64_t)x, (int64_t)y);
        }
        ccol__st64(acc + 8 * i, x);
    }
}

/* Reduces in rank order from rank 0's values, so double sums are
 * bit-identical on every rank and in every run. */
static ccol_status
finish_reduce(ccol_comm *c, void *ud, const uint8_t *const *blobs,
              const size_t *lens, uint8_t **out, size_t *out_len)
{
    const reduce_args *a = ud;
    uint8_t *acc;

    for (int r = 0; r < c->size; r++)
        if (lens[r] != a->n * 8)
            return ccol__seterr(&c->err, CCOL_ERR_PEER,
                                "rank %d contributed %zu bytes to an "
                                "allreduce of %zu values",
                                r, lens[r], a->n);
    acc = malloc(a->n * 8 + 1);
    if (acc == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    if (a->n > 0)
        memcpy(acc, blobs[0], a->n * 8);
    for (int r = 1; r < c->size; r++)
        fold_blob(a, acc, blobs[r]);
    *out = acc;
    *out_len = a->n * 8;
    return CCOL_OK;
}

/* The most values one allreduce may carry: a frame going up holds, for
 * each rank it stands for, an 8-byte record header and the values (one
 * rank per frame in the star, a whole subtree in the tree). */
static size_t
allreduce_max(const ccol_comm *c)
{
    size_t span = c->size <= c->threshold ? 1 : (size_t)c->size;
    size_t per = c->max_payload / span;

    return per > 8 ? (per - 8) / 8 : 0;
}

/* Values travel as little-endian 64-bit words; the fingerprint holds the
 * operation and the count, so ranks disagreeing on either diverge by name. */
static ccol_status
allreduce(ccol_comm *c, void *values, size_t n, ccol_op op, bool is_f64)
{
    reduce_args a = { is_f64, op, n };
    ccol__coll co = { .op = is_f64 ? CCOL__OP_ALLREDUCE_F64
                                   : CCOL__OP_ALLREDUCE_I64,
                      .mode = CCOL__UP_CONCAT, .finish = finish_reduce,
                      .finish_ud = &a };
    uint8_t *buf;
    ccol_status st;

    if (c == NULL || (values == NULL && n > 0))
        return c ? ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "allreduce: NULL values")
                 : CCOL_ERR_INVALID_ARG;
    if ((unsigned)op > CCOL_OP_OR)
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "allreduce: op %d is not sum, min, max, and or "
                            "or", (int)op);
    if (n > allreduce_max(c))
        return ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                            "allreduce of %zu values (%zu bytes) is over "
                            "the payload limit: at most %zu values per call "
                            "on %d ranks with max_payload %zu bytes; split "
                            "it into several calls", n, n * 8,
                            allreduce_max(c), c->size, c->max_payload);
    buf = malloc(n * 8 + 1);
    if (buf == NULL)
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (size_t i = 0; i < n; i++)
        ccol__st64(buf + 8 * i, ((const uint64_t *)values)[i]);
    co.arg = ((uint64_t)op << 48) | (uint64_t)n;
    co.data = buf;
    co.len = n * 8;
    st = run_op(c, &co);
    free(buf);
    if (st == CCOL_OK && co.result_len != n * 8)
        st = ccol__comm_fail(c, CCOL_ERR_PEER,
                             "allreduce result has %zu bytes, expected %zu",
                             co.result_len, n * 8);
    for (size_t i = 0; st == CCOL_OK && i < n; i++)
        ((uint64_t *)values)[i] = ccol__ld64(co.result + 8 * i);
    free(co.result);
    return st;
}

ccol_status
ccol_allreduce_i64(ccol_comm *c, int64_t *values, size_t n, ccol_op op)
{
    return allreduce(c, values, n, op, false);
}

ccol_status
ccol_allreduce_f64(ccol_comm *c, double *values, size_t n, ccol_op op)
{
    _Static_assert(sizeof(double) == 8, "doubles are 8 bytes");
    return allreduce(c, values, n, op, true);
}

/* ---- join-reduce and barrier ---- */

/* The key is the fingerprint; the combine runs in rank order (on rank 0
 * of the star, or on every rank of the shm slots). */
ccol_status
ccol_join_reduce(ccol_comm *c, uint64_t key, const void *data, size_t len,
                 ccol_combine_fn combine, void *ud, void **out,
                 size_t *out_len)
{
    ccol__coll op = { .op = CCOL__OP_JOIN_REDUCE, .arg = key,
                      .mode = CCOL__UP_JOIN, .combine = combine,
                      .combine_ud = ud, .data = data, .len = len };
    ccol_status st;

    if (c == NULL || combine == NULL || out == NULL || out_len == NULL ||
        (data == NULL && len > 0))
        return c ? ccol__seterr(&c->err, CCOL_ERR_INVALID_ARG,
                                "join_reduce: NULL argument")
                 : CCOL_ERR_INVALID_ARG;
    st = run_op(c, &op);
    if (st == CCOL_OK) {
        *out = op.result;
        *out_len = op.result_len;
    }
    return st;
}

/* A barrier carries nothing: a rank that sent bytes is misbehaving. */
static ccol_status
finish_barrier(ccol_comm *c, void *ud, const uint8_t *const *blobs,
               const size_t *lens, uint8_t **out, size_t *out_len)
{
    (void)ud;
    (void)blobs;
    for (int r = 0; r < c->size; r++)
        if (lens[r] != 0)
            return ccol__seterr(&c->err, CCOL_ERR_PEER,
                                "rank %d sent data in a barrier", r);
    *out = NULL;
    *out_len = 0;
    return CCOL_OK;
}

/* An operation like the others, with an empty contribution: its
 * completion is the barrier. */
ccol_status
ccol_barrier(ccol_comm *c)
{
    ccol__coll op = { .op = CCOL__OP_BARRIER, .mode = CCOL__UP_CONCAT,
                      .finish = finish_barrier };
    ccol_status st;

    if (c == NULL)
        return CCOL_ERR_INVALID_ARG;
    st = run_op(c, &op);
    free(op.result);
    return st;
}
