/*
 * hier.c - the tcp+shm link: the ranks of a host meet in shared memory,
 * one leader per host carries the host's part over tcp (see hostplan.h for
 * the shape and hier.h for the contract).
 *
 * The link is a composite of two link instances and routes every frame by
 * its peer: a rank of this host through the host's shm link (numbered
 * 0..n-1 in rank order, whose messages name ranks of the whole job through
 * its global_of), any other rank through the tcp link. Only rank 0 ever
 * waits on both at once (its shm children and the other hosts' leaders);
 * it then alternates a look at the sockets (the tcp link's ready, which
 * does not wait) with a wait on the rings for a slice growing from 50 us
 * to 1 ms. A frame from its own host wakes it at once (the ring's
 * doorbell), one from another host is taken within a slice; and since a
 * leader sends only after its own host's ranks reached it, rank 0's host
 * has usually arrived by then and rank 0 waits on the sockets alone.
 */
#include "hier.h"

#include "shm.h"
#include "tcp.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLICE_MIN_NS 50000
#define SLICE_MAX_NS 1000000

typedef struct hlink {
    ccol__link base;  /* job numbering; counts both parts' traffic */
    int *host;        /* per rank, its host (the plan's) */
    int *local_of;    /* per rank, its index on its host */
    int *global_of;   /* per index on this host, its rank in this link */
    int *named_of;    /* per index on this host, the rank messages name
                         (its rank in the job: a sub-communicator's link
                         numbers its members apart from the job) */
    ccol__link *shm;  /* this host's ranks, or NULL when alone */
    ccol__link *tcp;  /* the other hosts (job numbering) */
    int *want_l;      /* scratch: wanted ranks of this host (local) */
    int *want_r;      /* scratch: wanted ranks of other hosts */
} hlink;

/* The composite's traffic: what its two parts moved. */
static void
count_traffic(hlink *h)
{
    h->base.sent = h->tcp->sent + (h->shm != NULL ? h->shm->sent : 0);
    h->base.received =
        h->tcp->received + (h->shm != NULL ? h->shm->received : 0);
}

static bool
is_local(const hlink *h, int r)
{
    return h->host[r] == h->host[h->base.id.rank];
}

static ccol_status
hier_send(ccol__link *l, int peer, const uint8_t *frame, size_t len,
          int64_t deadline, ccol__err *err)
{
    hlink *h = (hlink *)l;
    ccol_status st;

    if (!is_local(h, peer))
        st = h->tcp->ops->send(h->tcp, peer, frame, len, deadline, err);
    else
        st = h->shm->ops->send(h->shm, h->local_of[peer], frame, len,
                               deadline, err);
    count_traffic(h);
    return st;
}

/* Waits on this host's ranks only (local indices in want_l); the shm
 * link's failures name ranks of the job already. */
static ccol_status
recv_local(hlink *h, int n, int64_t deadline, int *from, ccol__msg *msg,
           ccol__err *err)
{
    int lfrom = -1;
    ccol_status st = h->shm->ops->recv(h->shm, h->want_l, n, deadline,
                                       &lfrom, msg, err);

    if (lfrom >= 0)
        *from = h->global_of[lfrom];
    count_traffic(h);
    return st;
}

static ccol_status
recv_remote(hlink *h, int n, int64_t deadline, int *from, ccol__msg *msg,
            ccol__err *err)
{
    ccol_status st = h->tcp->ops->recv(h->tcp, h->want_r, n, deadline, from,
                                       msg, err);

    count_traffic(h);
    return st;
}

/* Is a frame, an end or an error of the wanted ranks of other hosts
 * waiting? Looks without waiting. */
static bool
remote_ready(const hlink *h, int n)
{
    return h->tcp->ops->ready(h->tcp, h->want_r, n);
}

/* Waits on both sides: a look at the sockets, then a wait on the rings
 * for a slice, until a frame, a failure or the deadline. */
static ccol_status
recv_both(hlink *h, int nl, int nr, int64_t deadline, int *from,
          ccol__msg *msg, ccol__err *err)
{
    int64_t slice = SLICE_MIN_NS;

    for (;;) {
        int64_t now = ccol__now_ns();
        ccol_status st;

        if (remote_ready(h, nr))
            return recv_remote(h, nr, deadline, from, msg, err);
        st = recv_local(h, nl, now + slice < deadline ? now + slice
                                                      : deadline,
                        from, msg, err);
        if (st != CCOL_ERR_TIMEOUT)
            return st;
        if (ccol__past(deadline))
            return remote_ready(h, nr)
                       ? recv_remote(h, nr, deadline, from, msg, err)
                       : CCOL_ERR_TIMEOUT;
        slice = slice * 2 < SLICE_MAX_NS ? slice * 2 : SLICE_MAX_NS;
    }
}

/* One frame from any of `peers`: from one side alone when all are there,
 * else from whichever side has one first. */
static ccol_status
hier_recv(ccol__link *l, const int *peers, int n, int64_t deadline,
          int *from, ccol__msg *msg, ccol__err *err)
{
    hlink *h = (hlink *)l;
    int nl = 0, nr = 0;

    for (int k = 0; k < n; k++) {
        if (is_local(h, peers[k]))
            h->want_l[nl++] = h->local_of[peers[k]];
        else
            h->want_r[nr++] = peers[k];
    }
    if (nr == 0)
        return recv_local(h, nl, deadline, from, msg, err);
    if (nl == 0)
        return recv_remote(h, nr, deadline, from, msg, err);
    return recv_both(h, nl, nr, deadline, from, msg, err);
}

/* Frees the link; the host's shm link departs (waking its ranks), the
 * sockets close (peers on other hosts see it at once). In a forked child
 * (`foreign`) both only release this process's copy. */
static void
link_free(hlink *h, bool foreign)
{
    ccol__link_destroy(h->tcp, foreign);
    ccol__link_destroy(h->shm, foreign);
    free(h->host);
    free(h->local_of);
    free(h->global_of);
    free(h->named_of);
    free(h->want_l);
    free(h->want_r);
    free(h);
}

static void
hier_destroy(ccol__link *l)
{
    link_free((hlink *)l, l->foreign);
}

/* Breaks both parts at once, as a crash would. */
static void
hier_shutdown(ccol__link *l)
{
    hlink *h = (hlink *)l;

    if (h->tcp->ops->shutdown != NULL)
        h->tcp->ops->shutdown(h->tcp);
    if (h->shm != NULL && h->shm->ops->shutdown != NULL)
        h->shm->ops->shutdown(h->shm);
}

/* The members' hosts, numbered again from 0 in member order (hosts hold
 * consecutive ranks, so members' hosts are consecutive too); returns the
 * number of hosts. */
static int
sub_hosts(const int *job_host, const int *members, int n, int *host)
{
    int nh = 0;

    for (int r = 0; r < n; r++) {
        if (r > 0 && job_host[members[r]] != job_host[members[r - 1]])
            nh++;
        host[r] = nh;
    }
    return nh + 1;
}

/* Whether grouping by host pays: two hosts or more, within the tree
 * threshold, one of them with two members or more. */
static bool
sub_grouped(const int *host, int n, int nhosts, int threshold)
{
    bool shared = false;

    for (int r = 1; r < n; r++)
        shared = shared || host[r] == host[r - 1];
    return shared && nhosts >= 2 && nhosts <= threshold;
}

/* A sub-communicator's link: shm alone when its members share one host,
 * tcp+shm across hosts when some host holds two members, flat tcp
 * otherwise (over the job's tcp part). */
static ccol_status
hier_sub(ccol__link *job, const ccol__link_cfg *cfg, ccol__shape *shape,
         const int *members, ccol__link **out, ccol__err *err)
{
    hlink *h = (hlink *)job;
    ccol__host_plan plan = { 0 };
    ccol__link *sub = NULL;
    int n = cfg->id.size, nhosts;
    char name[64];
    ccol_status st;

    plan.host = calloc((size_t)n, sizeof *plan.host);
    if (plan.host == NULL)
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    nhosts = sub_hosts(h->host, members, n, plan.host);
    ccol__link_sub_name(cfg, name, sizeof name);
    if (nhosts == 1) {
        ccol__host_plan_free(&plan);
        return ccol__shm_attach(cfg, shape, name, out, err);
    }
    if (!sub_grouped(plan.host, n, nhosts, cfg->threshold)) {
        ccol__host_plan_free(&plan);
        return ccol__tcp_attach_sub(cfg, shape, h->tcp, members, NULL, out,
                                    err);
    }
    plan.nhosts = nhosts;
    snprintf(plan.nonce, sizeof plan.nonce, "%016" PRIx64,
             ccol__hash_str(name));
    st = ccol__host_plan_tree(shape, &plan, err);
    if (st == CCOL_OK)
        st = ccol__tcp_attach_sub(cfg, shape, h->tcp, members, plan.host,
                                  &sub, err);
    if (st != CCOL_OK) {
        ccol__host_plan_free(&plan);
        return st;
    }
    return ccol__hier_attach(cfg, shape, &plan, sub, out, err);
}

static const ccol__link_ops hier_ops = {
    .name = "tcp+shm", .run = NULL, .send = hier_send, .recv = hier_recv,
    .ready = NULL, .destroy = hier_destroy, .shutdown = hier_shutdown,
    .sub = hier_sub
};

/* The host's own shm link: its ranks numbered in rank order, the job's
 * limits, token and id, messages naming ranks of the job. Faults apply to
 * the composite's frames already, so the part carries none. */
static ccol_status
join_host(const ccol__link_cfg *cfg, hlink *h, const char *nonce,
          int nlocal, ccol__err *err)
{
    ccol__link_cfg local = *cfg;
    ccol__shape shape = { .parent = -1 };
    ccol__link *shm = NULL;
    char name[64];
    int me = cfg->id.rank;
    ccol_status st;

    local.id.rank = h->local_of[me];
    local.id.size = nlocal;
    local.id.global_of = h->named_of;
    local.faults = NULL;
    st = ccol__shape_setup(&shape, local.id.rank, nlocal, cfg->threshold,
                           cfg->fanout, err);
    snprintf(name, sizeof name, "hier-%s-%d", nonce, h->host[me]);
    if (st == CCOL_OK)
        st = ccol__shm_attach(&local, &shape, name, &shm, err);
    h->shm = shm; /* also after a failed join: freed with the link */
    ccol__shape_free(&shape);
    return st;
}

/* Numbers this host's ranks. */
static ccol_status
number_ranks(int size, int me, hlink *h, int *nlocal, ccol__err *err)
{
    int *count = calloc((size_t)size, sizeof *count), mine = h->host[me];

    h->local_of = calloc((size_t)size, sizeof *h->local_of);
    h->global_of = calloc((size_t)size, sizeof *h->global_of);
    h->named_of = calloc((size_t)size, sizeof *h->named_of);
    h->want_l = calloc((size_t)size, sizeof *h->want_l);
    h->want_r = calloc((size_t)size, sizeof *h->want_r);
    if (count == NULL || h->local_of == NULL || h->global_of == NULL ||
        h->named_of == NULL || h->want_l == NULL || h->want_r == NULL) {
        free(count);
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    for (int r = 0; r < size; r++) {
        h->local_of[r] = count[h->host[r]]++;
        if (h->host[r] == mine) {
            h->global_of[h->local_of[r]] = r;
            h->named_of[h->local_of[r]] = ccol__id_gr(&h->base.id, r);
        }
    }
    *nlocal = count[mine];
    free(count);
    return CCOL_OK;
}

ccol_status
ccol__hier_attach(const ccol__link_cfg *cfg, const ccol__shape *shape,
                  ccol__host_plan *p, ccol__link *tcp, ccol__link **out,
                  ccol__err *err)
{
    hlink *h = calloc(1, sizeof *h);
    int nlocal = 0;
    ccol_status st;

    (void)shape; /* the tree engine runs over it; the parts route by host */
    *out = NULL;
    if (h == NULL) {
        ccol__link_destroy(tcp, false);
        ccol__host_plan_free(p);
        return ccol__seterr(err, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    ccol__link_init(&h->base, &hier_ops, cfg);
    h->tcp = tcp;
    h->host = p->host;
    p->host = NULL;
    st = number_ranks(cfg->id.size, cfg->id.rank, h, &nlocal, err);
    if (st == CCOL_OK && nlocal > 1)
        st = join_host(cfg, h, p->nonce, nlocal, err);
    ccol__host_plan_free(p);
    if (st != CCOL_OK) {
        link_free(h, false);
        return st;
    }
    count_traffic(h);
    *out = &h->base;
    return CCOL_OK;
}
