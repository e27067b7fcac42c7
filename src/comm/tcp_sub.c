/*
 * tcp_sub.c - the tcp link of a sub-communicator: new connections among
 * its members only, so no rank outside them takes part or is waited for.
 * Every rank of a job keeps its rendezvous listener and the job's table
 * of listener addresses in its job link (tcp_rendezvous.c); here each
 * member dials its parent in the sub's tree at the parent's address in
 * that table and authenticates with the job token exactly as the
 * rendezvous does, under the sub's rank, size and communicator id, and
 * each member accepts its children on its own listener (tcp_server.c
 * checks the sub's id, size and ranks). No table is sent: the addresses
 * are known, and a parent sends its children the empty WELCOME.
 *
 * One listener serves one communicator at a time, so a member may dial a
 * rank that is still forming another sub-communicator: that rank refuses
 * it as "another communicator" (CCOL__TCP_RETRY), and the member closes
 * and dials again after a pause growing from 10 to 50 ms. Any other
 * refusal ends the formation, and one deadline (cfg->timeout_s) bounds
 * all of it; a member that never comes is named by its rank in the job.
 */
#include "tcp_link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAUSE_MIN_NS (10 * 1000000LL)
#define PAUSE_MAX_NS (50 * 1000000LL)
#define NAME_LEN     (CCOL__TCP_ADDR_MAX + 32)

/* One member's formation of a sub-communicator's link. */
typedef struct sub {
    const ccol__link_cfg *cfg; /* the sub's identity, deadline, token */
    const ccol__shape *shape;  /* its tree */
    const ccol__tcp *job;      /* the job's link: listener and table */
    const int *members;        /* per sub rank, its rank in the job link */
    const int *host;           /* per sub rank, its host, or NULL */
    ccol__tcp *t;              /* the link being formed */
    int64_t deadline;          /* of the whole formation */
    ccol__err *err;            /* where a failure is reported */
} sub;

/* Sub rank r as messages name it: its rank in the job. */
static int
gr(const sub *s, int r)
{
    return ccol__id_gr(&s->cfg->id, r);
}

/* Whether sub ranks a and b are joined over tcp (not on one host). */
static bool
remote(const sub *s, int a, int b)
{
    return s->host == NULL || s->host[a] != s->host[b];
}

/* The caller's arguments agree with each other and with the job link. */
static ccol_status
check_args(const sub *s)
{
    const ccol__ident *id = &s->cfg->id;

    if (id->size < 1 || id->rank < 0 || id->rank >= id->size ||
        s->shape->rank != id->rank || s->shape->size != id->size)
        return ccol__seterr(s->err, CCOL_ERR_INTERNAL,
                            "sub-communicator rank %d of %d does not match "
                            "its tree (rank %d of %d)",
                            id->rank, id->size, s->shape->rank,
                            s->shape->size);
    for (int r = 0; r < id->size; r++) {
        if (s->members[r] < 0 || s->members[r] >= s->job->size)
            return ccol__seterr(s->err, CCOL_ERR_INTERNAL,
                                "sub-communicator rank %d is rank %d of a "
                                "job of %d",
                                r, s->members[r], s->job->size);
    }
    return CCOL_OK;
}

/* The listener of sub rank r, from the job's table; NULL with err set
 * when the job link has none for it. */
static const ccol__tcp_addr *
address_of(const sub *s, int r)
{
    int jr = s->members[r];

    if (s->job->table != NULL && s->job->table[jr].port != 0)
        return &s->job->table[jr];
    ccol__seterr(s->err, CCOL_ERR_INTERNAL,
                 "rank %d has no address for rank %d's listener in the job's "
                 "table (the job's tcp link formed without it)",
                 gr(s, s->cfg->id.rank), gr(s, r));
    return NULL;
}

/* The deadline passed while the parent kept refusing this rank for
 * another communicator: a TIMEOUT naming the parent, with its reason. */
static ccol_status
kept_out(const sub *s, const char *name)
{
    char last[CCOL__ERRMSG_MAX];

    snprintf(last, sizeof last, "%s", s->err->msg);
    return ccol__seterr(s->err, CCOL_ERR_TIMEOUT,
                        "%s did not admit rank %d within %.1f s: it was "
                        "forming another communicator until the deadline "
                        "(last refusal: %s)",
                        name, gr(s, s->cfg->id.rank), s->cfg->timeout_s,
                        last);
}

/* Dials this rank's parent (when it is on another host) and
 * authenticates, dialing again after a pause while the parent's listener
 * serves another communicator. */
static ccol_status
dial_parent(sub *s)
{
    char name[NAME_LEN];
    int p = s->shape->parent, me = s->cfg->id.rank;
    int64_t pause = PAUSE_MIN_NS;
    const ccol__tcp_addr *a;

    if (p < 0 || !remote(s, me, p))
        return CCOL_OK;
    a = address_of(s, p);
    if (a == NULL)
        return s->err->code;
    snprintf(name, sizeof name, "rank %d at %s:%d", gr(s, p), a->ip, a->port);
    for (;;) {
        bool retry = false;
        ccol_status st = ccol__tcp_join_peer(
            s->cfg, p, name, a->ip, a->port, s->deadline, &retry,
            &s->t->fd[p], &s->t->key[p], s->err);

        if (st == CCOL_OK || !retry)
            return st;
        if (ccol__past(s->deadline))
            return kept_out(s, name);
        ccol__tcp_nap(pause, ccol__intr_wake(s->deadline));
        pause = pause * 2 > PAUSE_MAX_NS ? PAUSE_MAX_NS : pause * 2;
    }
}

/* Accepts this rank's children (those on other hosts) on the listener it
 * keeps from the job's rendezvous on. */
static ccol_status
accept_children(sub *s)
{
    int n = 0, me = s->cfg->id.rank, *kids;
    ccol_status st;

    kids = malloc((size_t)(s->shape->nchildren + 1) * sizeof *kids);
    if (kids == NULL)
        return ccol__seterr(s->err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < s->shape->nchildren; i++) {
        int c = s->shape->children[i];
        if (c > 0 && c < s->cfg->id.size && remote(s, me, c))
            kids[n++] = c;
    }
    if (n == 0)
        st = CCOL_OK;
    else if (s->job->lfd < 0)
        st = ccol__seterr(s->err, CCOL_ERR_INTERNAL,
                          "rank %d keeps no listener for its children in a "
                          "sub-communicator (the job's tcp link formed "
                          "without one)",
                          gr(s, me));
    else
        st = ccol__tcp_accept_peers(s->cfg, s->job->lfd, kids, n, true,
                                    s->deadline, s->t, s->err);
    free(kids);
    return st;
}

ccol_status
ccol__tcp_sub_connect(const ccol__link_cfg *cfg, const ccol__shape *shape,
                      const ccol__tcp *job, const int *members,
                      const int *host, ccol__tcp *t, ccol__err *err)
{
    sub s = { .cfg = cfg, .shape = shape, .job = job, .members = members,
              .host = host, .t = t, .err = err };
    ccol_status st = check_args(&s);

    if (st != CCOL_OK)
        return st;
    s.deadline = ccol__tcp_deadline(cfg->timeout_s);
    st = dial_parent(&s);
    if (st == CCOL_OK)
        st = accept_children(&s);
    return st;
}
