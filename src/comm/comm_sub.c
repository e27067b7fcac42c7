/*
 * comm_sub.c - sub-communicators: some ranks of a communicator as a
 * communicator of their own, formed by exactly those ranks from a member
 * list they all know, so ranks that run other code never wait for it (a
 * pipeline stage's replicas agreeing while the other stages compute).
 *
 * The sub takes its parent's limits, token and tree parameters, has a
 * communicator id of its own (the parent's, the name and the members,
 * hashed), and numbers its members 0..n-1 in member order while every
 * message names them by their rank in the job. Its link comes from the
 * transport table (transport.c): a group, a segment or connections of the
 * members' own. The two never share a failure: each is poisoned and
 * destroyed on its own.
 */
#include "comm.h"

#include "transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A name travels into the communicator id and messages: bounded and
 * printable. */
#define SUB_NAME_MAX 64

/* Checks the member list against the parent: sorted, in range, this rank
 * among them; *me is this rank's index. */
static ccol_status
check_members(ccol_comm *parent, const int *members, int n, int *me)
{
    *me = -1;
    if (members == NULL || n < 1 || n > parent->id.size)
        return ccol__seterr(&parent->err, CCOL_ERR_INVALID_ARG,
                            "create_sub: %d members is out of range [1, %d]",
                            members == NULL ? 0 : n, parent->id.size);
    for (int i = 0; i < n; i++) {
        if (members[i] < 0 || members[i] >= parent->id.size ||
            (i > 0 && members[i] <= members[i - 1]))
            return ccol__seterr(&parent->err, CCOL_ERR_INVALID_ARG,
                                "create_sub: members[%d] = %d: members are "
                                "distinct ranks of the communicator (0 to "
                                "%d) in increasing order",
                                i, members[i], parent->id.size - 1);
        if (members[i] == parent->id.rank)
            *me = i;
    }
    if (*me < 0)
        return ccol__seterr(&parent->err, CCOL_ERR_INVALID_ARG,
                            "create_sub: rank %d is not among the members: "
                            "only the members call it",
                            ccol__id_gr(&parent->id, parent->id.rank));
    return CCOL_OK;
}

static ccol_status
check_name(ccol_comm *parent, const char *name)
{
    size_t n = strnlen(name, SUB_NAME_MAX + 1);
    bool printable = true;

    for (size_t i = 0; i < n; i++)
        printable = printable && (unsigned char)name[i] >= 0x20 &&
                    name[i] != 0x7f;
    if (printable && n <= SUB_NAME_MAX)
        return CCOL_OK;
    return ccol__seterr(&parent->err, CCOL_ERR_INVALID_ARG,
                        "create_sub: the name is not up to %d printable "
                        "bytes",
                        SUB_NAME_MAX);
}

/* The sub's communicator id: the parent's, the name and the members. */
static uint64_t
sub_id(const ccol_comm *parent, const char *name, const int *members, int n)
{
    ccol__buf b = { 0 };
    uint64_t id;

    ccol__buf_printf(&b, "sub:%016llx:%s:",
                     (unsigned long long)parent->id.comm_id, name);
    for (int i = 0; i < n; i++)
        ccol__buf_printf(&b, "%d,", members[i]);
    id = b.oom ? ccol__hash_str(name) : ccol__hash_str((const char *)b.p);
    ccol__buf_free(&b);
    return id;
}

/* The sub's own state, before its link: the parent's settings, its
 * numbering, the job ranks its messages name, its tree. */
static ccol_status
sub_state(ccol_comm *c, const ccol_comm *parent, const int *members, int n,
          int me)
{
    c->id.rank = me;
    c->id.size = n;
    c->id.token = parent->id.token;
    c->id.max_payload = parent->id.max_payload;
    c->timeout_s = parent->timeout_s;
    c->threshold = parent->threshold;
    c->fanout = parent->fanout;
    c->intr_fn = parent->intr_fn;
    c->intr_ud = parent->intr_ud;
    c->job_rank = calloc((size_t)n, sizeof *c->job_rank);
    if (c->job_rank == NULL || (parent->token_str != NULL &&
                                (c->token_str = ccol__strdup(
                                     parent->token_str)) == NULL))
        return ccol__seterr(&c->err, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int i = 0; i < n; i++)
        c->job_rank[i] = ccol__id_gr(&parent->id, members[i]);
    c->id.global_of = c->job_rank;
    c->job_size = parent->id.size;
    return ccol__comm_ranks_setup(c);
}

/* Forms the sub's link among the members: the only step that waits for
 * them (and may be interrupted). */
static ccol_status
sub_attach(ccol_comm *c, ccol_comm *parent, const int *members)
{
    ccol__link_cfg cfg = ccol__comm_link_cfg(c);
    ccol__intr prev = ccol__intr_begin(c->intr_fn, c->intr_ud);
    ccol_status st = ccol__transport_attach_sub(parent->link, &cfg,
                                                &c->shape, members,
                                                &c->link, &c->err);

    if (ccol__intr_end(prev) && st != CCOL_OK)
        st = ccol__seterr(&c->err, CCOL_ERR_INTERRUPTED,
                          "rank %d: forming a sub-communicator was "
                          "interrupted by the caller",
                          ccol__id_gr(&c->id, c->id.rank));
    return st;
}

/* The parent must be a job's communicator usable by this process; its
 * own failure does not stop the members from forming a sub (a stage whose
 * neighbour died). A sub of a sub is refused: its members are ranks of
 * the job, so it is made from the job's communicator. */
static ccol_status
check_parent(ccol_comm *parent)
{
    if (parent->job_rank != NULL)
        return ccol__seterr(&parent->err, CCOL_ERR_INVALID_ARG,
                            "create_sub: this is a sub-communicator; make "
                            "the new one from the job's communicator, "
                            "naming its members by their job ranks");
    if (parent->owner != (int)getpid())
        return ccol__seterr(&parent->err, CCOL_ERR_INVALID_ARG,
                            "create_sub: this communicator belongs to "
                            "process %d; a forked child cannot use it",
                            parent->owner);
    return CCOL_OK;
}

ccol_status
ccol_comm_create_sub(ccol_comm *parent, const int *members, int n,
                     const char *name, ccol_comm **out)
{
    ccol_comm *c;
    int me;
    ccol_status st;

    if (out == NULL || parent == NULL)
        return CCOL_ERR_INVALID_ARG;
    *out = NULL;
    if (name == NULL)
        name = "";
    st = check_parent(parent);
    if (st == CCOL_OK)
        st = check_members(parent, members, n, &me);
    if (st == CCOL_OK)
        st = check_name(parent, name);
    if (st != CCOL_OK)
        return st;
    *out = c = ccol__comm_alloc();
    if (c == NULL)
        return CCOL_ERR_NO_MEMORY;
    c->id.comm_id = sub_id(parent, name, members, n);
    st = sub_state(c, parent, members, n, me);
    if (st == CCOL_OK)
        st = sub_attach(c, parent, members);
    if (st != CCOL_OK)
        c->poisoned = true;
    return st;
}
