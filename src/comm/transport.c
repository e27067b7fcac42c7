/*
 * transport.c - the transport table (see transport.h): the one place that
 * knows every transport, so the communicator above knows none and no
 * transport knows another except the composite that is built from them.
 */
#include "transport.h"

#include "hier.h"
#include "inproc.h"
#include "oob.h"
#include "shm.h"
#include "tcp.h"

#include <stdio.h>

/* inproc: the group is named by params.name. */
static ccol_status
attach_inproc(const ccol_comm_params *p, ccol__link_cfg *cfg,
              const ccol__shape *shape, ccol__link **out, ccol__err *err)
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
static ccol_status
attach_shm(const ccol_comm_params *p, ccol__link_cfg *cfg,
           const ccol__shape *shape, ccol__link **out, ccol__err *err)
{
    uint64_t m = p->mask;
    char name[96], id[128];

    if ((m & CCOL_COMM_PARAM_NAME) && p->name != NULL && p->name[0])
        snprintf(name, sizeof name, "%s", p->name);
    else if ((m & CCOL_COMM_PARAM_PORT) && p->port > 0)
        snprintf(name, sizeof name, "port-%d", p->port);
    else if (cfg->id.size == 1)
        return CCOL_OK; /* a one-rank job needs no segment */
    else
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

ccol_status
ccol__transport_attach(const ccol_comm_params *p, ccol__link_cfg *cfg,
                       ccol__shape *shape, ccol__link **out, ccol__err *err)
{
    ccol_transport t = (p->mask & CCOL_COMM_PARAM_TRANSPORT)
                           ? p->transport
                           : CCOL_TRANSPORT_DEFAULT;

    *out = NULL;
    if (t == CCOL_TRANSPORT_INPROC)
        return attach_inproc(p, cfg, shape, out, err);
    if (t == CCOL_TRANSPORT_SHM)
        return attach_shm(p, cfg, shape, out, err);
    if (t != CCOL_TRANSPORT_DEFAULT && t != CCOL_TRANSPORT_TCP)
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "transport %d is not supported by "
                            "ccol_comm_create",
                            (int)t);
    if (cfg->id.size == 1 && t == CCOL_TRANSPORT_DEFAULT)
        return CCOL_OK; /* a one-rank job needs no network */
    return attach_tcp(p, cfg, shape, out, err);
}

ccol_status
ccol__transport_attach_oob(const ccol_oob *oob, const char *name,
                           ccol__link_cfg *cfg, ccol__link **out,
                           ccol__err *err)
{
    cfg->id.comm_id = ccol__hash_str(name != NULL ? name : "oob");
    return ccol__oob_attach(cfg, oob, out, err);
}
