/*
 * transport.c - the transport table (see transport.h): the one place that
 * knows every transport, so the communicator above knows none and no
 * transport knows another except the composite that is built from them.
 * A job's link is found by walking the table (`transports` below) for the
 * params' kind; the names CCOL_TRANSPORT accepts are the table's too.
 */
#include "transport.h"

#include "hier.h"
#include "inproc.h"
#include "oob.h"
#include "shm.h"
#include "tcp.h"

#include <stdio.h>
#include <string.h>

/* inproc: the group is named by params.name. */
static ccol_status
attach_inproc(const ccol_comm_params *p, ccol__link_cfg *cfg,
              ccol__shape *shape, ccol__link **out, ccol__err *err)
{
    char id[300];

    if (!(p->mask & CCOL_COMM_PARAM_NAME) || p->name == NULL || !p->name[0])
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "the inproc transport needs a group name");
    snprintf(id, sizeof id, "inproc:%s", p->name);
    cfg->id.comm_id = ccol__hash_str(id);
    return ccol__inproc_attach(cfg, shape, p->name, out, err);
}

/* shm: the job is named by params.name, else by the rendezvous port. */
/* The name a shm job of p goes by (before the token's digest): its name,
 * else its port; false when it has neither. */
static bool
shm_job_name(const ccol_comm_params *p, char *out, size_t len)
{
    if ((p->mask & CCOL_COMM_PARAM_NAME) && p->name != NULL && p->name[0])
        snprintf(out, len, "%s", p->name);
    else if ((p->mask & CCOL_COMM_PARAM_PORT) && p->port > 0)
        snprintf(out, len, "port-%d", p->port);
    else
        return false;
    return true;
}

int
ccol_shm_cleanup(const ccol_comm_params *p)
{
    char name[96];
    const char *token = NULL;

    if (p == NULL || !shm_job_name(p, name, sizeof name))
        return 0;
    if ((p->mask & CCOL_COMM_PARAM_TOKEN) && p->token != NULL && p->token[0])
        token = p->token;
    return ccol__shm_forget(name, token) ? 1 : 0;
}

static ccol_status
attach_shm(const ccol_comm_params *p, ccol__link_cfg *cfg,
           ccol__shape *shape, ccol__link **out, ccol__err *err)
{
    char name[96], id[128];
    bool named = shm_job_name(p, name, sizeof name);

    if (!named && cfg->id.size == 1)
        return CCOL_OK; /* a one-rank job needs no segment */
    if (!named)
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "the shm transport needs a job name (params.name) "
                            "or the job's port (params.port or MASTER_PORT)");
    snprintf(id, sizeof id, "shm:%s", name);
    cfg->id.comm_id = ccol__hash_str(id);
    return ccol__shm_attach(cfg, shape, name, out, err);
}

/* tcp, and tcp+shm when rank 0 grouped the ranks by host: the tcp link
 * then carries the edges between hosts and a host's shm link the rest. */
static ccol_status
attach_tcp(const ccol_comm_params *p, ccol__link_cfg *cfg,
           ccol__shape *shape, ccol__link **out, ccol__err *err)
{
    const char *addr = (p->mask & CCOL_COMM_PARAM_ADDR) && p->addr ? p->addr
                                                                   : "127.0.0.1";
    ccol__host_plan plan = { 0 };
    ccol__link *tcp = NULL;
    char id[300];
    ccol_status st;

    if (!(p->mask & CCOL_COMM_PARAM_PORT) || p->port <= 0)
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "the tcp transport needs the rendezvous port of "
                            "rank 0 (params.port or MASTER_PORT)");
    /* The port alone names the job: ranks may spell rank 0's host
     * differently ("localhost", "127.0.0.1", a host name). */
    snprintf(id, sizeof id, "tcp:%d", p->port);
    cfg->id.comm_id = ccol__hash_str(id);
    st = ccol__tcp_attach(cfg, shape, addr, p->port, &plan, &tcp, err);
    if (st != CCOL_OK || plan.nhosts == 0) {
        *out = tcp;
        return st;
    }
    return ccol__hier_attach(cfg, shape, &plan, tcp, out, err);
}

/* A one-rank job asked for no transport in particular: it needs no
 * network, so it gets no link. */
static ccol_status
attach_default(const ccol_comm_params *p, ccol__link_cfg *cfg,
               ccol__shape *shape, ccol__link **out, ccol__err *err)
{
    if (cfg->id.size == 1)
        return CCOL_OK;
    return attach_tcp(p, cfg, shape, out, err);
}

typedef ccol_status (*attach_fn)(const ccol_comm_params *p,
                                 ccol__link_cfg *cfg, ccol__shape *shape,
                                 ccol__link **out, ccol__err *err);

/* The transports ccol_comm_create joins, in the order messages list
 * their names; a row without a name is one CCOL_TRANSPORT cannot ask
 * for. The oob transport has its own entry (ccol__transport_attach_oob)
 * and a job's sub-communicators go through its link (link.h's sub). */
static const struct transport {
    ccol_transport kind; /* params.transport */
    const char *name;    /* CCOL_TRANSPORT's spelling, or NULL */
    attach_fn attach;    /* joins the job; *out NULL for no link */
} transports[] = {
    { CCOL_TRANSPORT_INPROC, "inproc", attach_inproc },
    { CCOL_TRANSPORT_TCP, "tcp", attach_tcp },
    { CCOL_TRANSPORT_SHM, "shm", attach_shm },
    { CCOL_TRANSPORT_DEFAULT, NULL, attach_default },
};

#define NTRANSPORTS (sizeof transports / sizeof transports[0])

ccol_status
ccol__transport_attach(const ccol_comm_params *p, ccol__link_cfg *cfg,
                       ccol__shape *shape, ccol__link **out, ccol__err *err)
{
    ccol_transport t = (p->mask & CCOL_COMM_PARAM_TRANSPORT)
                           ? p->transport
                           : CCOL_TRANSPORT_DEFAULT;

    *out = NULL;
    for (size_t i = 0; i < NTRANSPORTS; i++) {
        if (transports[i].kind == t)
            return transports[i].attach(p, cfg, shape, out, err);
    }
    return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                        "transport %d is not supported by "
                        "ccol_comm_create",
                        (int)t);
}

bool
ccol__transport_named(const char *name, ccol_transport *out)
{
    for (size_t i = 0; i < NTRANSPORTS; i++) {
        if (transports[i].name != NULL &&
            strcmp(transports[i].name, name) == 0) {
            *out = transports[i].kind;
            return true;
        }
    }
    return false;
}

void
ccol__transport_names(char *out, size_t n)
{
    size_t left = 0, at = 0;

    for (size_t i = 0; i < NTRANSPORTS; i++)
        left += transports[i].name != NULL;
    out[0] = '\0';
    for (size_t i = 0; i < NTRANSPORTS && at < n; i++) {
        if (transports[i].name == NULL)
            continue;
        left--;
        at += (size_t)snprintf(out + at, n - at, "%s%s", transports[i].name,
                               left == 0 ? "" : left == 1 ? " or " : ", ");
    }
}

ccol_status
ccol__transport_attach_oob(const ccol_oob *oob, const char *name,
                           ccol__link_cfg *cfg, ccol__link **out,
                           ccol__err *err)
{
    cfg->id.comm_id = ccol__hash_str(name != NULL ? name : "oob");
    return ccol__oob_attach(cfg, oob, out, err);
}

ccol_status
ccol__transport_attach_sub(ccol__link *job, const ccol__link_cfg *cfg,
                           ccol__shape *shape, const int *members,
                           ccol__link **out, ccol__err *err)
{
    *out = NULL;
    if (cfg->id.size == 1)
        return CCOL_OK; /* a sub of one rank needs no link */
    if (job == NULL || job->ops->sub == NULL)
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "a %s communicator has no sub-communicators: "
                            "create one over the sub-group's own all-gather "
                            "(ccol_comm_create_oob)",
                            job != NULL ? job->ops->name : "local");
    return job->ops->sub(job, cfg, shape, members, out, err);
}
