/*
 * env.c - creating a communicator from the launcher's environment.
 *
 * Sources in order (the first complete set wins): torchrun's RANK and
 * WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_RANK/SIZE, PMI's PMI_RANK/PMI_SIZE,
 * Slurm's SLURM_PROCID/SLURM_NTASKS. Slurm comes last because a launcher
 * started inside a batch step inherits the step's values, which are wrong
 * for its children; for the same reason a disagreeing Slurm set is ignored,
 * while any other two complete sets that disagree are an error naming both.
 */
#include "comm.h"
#include "transport.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct env_set {
    const char *rank_var; /* variable holding the rank */
    const char *size_var; /* variable holding the world size */
    const char *who;      /* launcher name for messages */
} env_set;

static const env_set sets[] = {
    { "RANK", "WORLD_SIZE", "torchrun" },
    { "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI" },
    { "PMI_RANK", "PMI_SIZE", "PMI" },
    { "SLURM_PROCID", "SLURM_NTASKS", "Slurm" },
};

#define NSETS (sizeof sets / sizeof sets[0])

/* Reads one set: 0 absent, 1 found, -1 malformed (message in err). */
static int
read_set(const env_set *s, ccol__err *err, int *rank, int *size)
{
    const char *r = getenv(s->rank_var), *n = getenv(s->size_var);
    long long rv, nv;

    if (r == NULL && n == NULL)
        return 0;
    if (r == NULL || n == NULL) {
        ccol__seterr(err, CCOL_ERR_INVALID_ARG, "%s is set but %s is not",
                     r ? s->rank_var : s->size_var,
                     r ? s->size_var : s->rank_var);
        return -1;
    }
    if (!ccol__parse_int(n, 1, 1 << 20, &nv)) {
        ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                     "%s='%s' is not a world size in [1, %d]", s->size_var,
                     n, 1 << 20);
        return -1;
    }
    if (!ccol__parse_int(r, 0, nv - 1, &rv)) {
        ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                     "%s='%s' is not a rank in [0, %lld]", s->rank_var, r,
                     nv - 1);
        return -1;
    }
    *rank = (int)rv;
    *size = (int)nv;
    return 1;
}

/* Resolves rank and size; returns the index of the set used or -1. */
static ccol_status
resolve_rank(ccol__err *err, int *rank, int *size, int *used)
{
    *used = -1;
    for (size_t i = 0; i < NSETS; i++) {
        int r = 0, n = 0, got = read_set(&sets[i], err, &r, &n);
        if (got < 0 && *used < 0)
            return err->code;
        if (got <= 0)
            continue;
        if (*used < 0) {
            *used = (int)i;
            *rank = r;
            *size = n;
        } else if ((r != *rank || n != *size) &&
                   strcmp(sets[i].who, "Slurm") != 0) {
            return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                                "launcher variables disagree: %s says rank "
                                "%d of %d (%s/%s), %s says rank %d of %d "
                                "(%s/%s)",
                                sets[*used].who, *rank, *size,
                                sets[*used].rank_var, sets[*used].size_var,
                                sets[i].who, r, n, sets[i].rank_var,
                                sets[i].size_var);
        }
    }
    return CCOL_OK;
}

/* Reads CCOL_TRANSPORT into p (unset or empty: the default); an unknown
 * name is an error naming it and the accepted ones. */
static ccol_status
read_transport(ccol__err *err, ccol_comm_params *p)
{
    const char *v = getenv("CCOL_TRANSPORT");
    char names[128] = "";

    if (v == NULL || v[0] == '\0')
        return CCOL_OK;
    if (ccol__transport_named(v, &p->transport)) {
        p->mask |= CCOL_COMM_PARAM_TRANSPORT;
        return CCOL_OK;
    }
    ccol__transport_names(names, sizeof names);
    if (strcmp(v, "mpi") == 0)
        return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                            "CCOL_TRANSPORT='mpi': libccol joins MPI jobs "
                            "through the MPI adapter (ccol_comm_create_mpi), "
                            "not from the environment; use %s here", names);
    return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                        "CCOL_TRANSPORT='%.64s' is not a transport: use %s "
                        "(or leave it unset for the default)", v, names);
}

/* Reads CCOL_TIMEOUT, CCOL_TOKEN, MASTER_ADDR, MASTER_PORT into p. */
static ccol_status
read_knobs(ccol__err *err, ccol_comm_params *p)
{
    const char *t = getenv("CCOL_TIMEOUT"), *tok = getenv("CCOL_TOKEN");
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    long long pv;

    if (t != NULL) {
        if (!ccol__parse_seconds(t, &p->timeout_s))
            return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                                "CCOL_TIMEOUT='%.64s' is not a plain "
                                "decimal number of seconds in [%g, %.0f] "
                                "(like 30 or 2.5)",
                                t, CCOL__MIN_SECONDS, CCOL__MAX_SECONDS);
        p->mask |= CCOL_COMM_PARAM_TIMEOUT;
    }
    if (tok != NULL && tok[0]) {
        p->token = tok;
        p->mask |= CCOL_COMM_PARAM_TOKEN;
    }
    if (addr != NULL && addr[0]) {
        p->addr = addr;
        p->mask |= CCOL_COMM_PARAM_ADDR;
    }
    if (port != NULL) {
        if (!ccol__parse_int(port, 1, 65535, &pv))
            return ccol__seterr(err, CCOL_ERR_INVALID_ARG,
                                "MASTER_PORT='%s' is not a port in [1, 65535]",
                                port);
        p->port = (int)pv;
        p->mask |= CCOL_COMM_PARAM_PORT;
    }
    return CCOL_OK;
}

/* Copies the fields set in `o` over `p`. */
static void
overlay(ccol_comm_params *p, const ccol_comm_params *o)
{
    static const struct {
        uint64_t bit;
        size_t off, len;
    } f[] = {
#define F(bit, field)                                                         \
    { bit, offsetof(ccol_comm_params, field),                                 \
      sizeof(((ccol_comm_params *)0)->field) }
        F(CCOL_COMM_PARAM_RANK, rank), F(CCOL_COMM_PARAM_SIZE, size),
        F(CCOL_COMM_PARAM_TRANSPORT, transport), F(CCOL_COMM_PARAM_ADDR, addr),
        F(CCOL_COMM_PARAM_PORT, port), F(CCOL_COMM_PARAM_TIMEOUT, timeout_s),
        F(CCOL_COMM_PARAM_MAX_PAYLOAD, max_payload),
        F(CCOL_COMM_PARAM_TOKEN, token), F(CCOL_COMM_PARAM_NAME, name),
        F(CCOL_COMM_PARAM_TREE_THRESHOLD, tree_threshold),
        F(CCOL_COMM_PARAM_TREE_FANOUT, tree_fanout),
        F(CCOL_COMM_PARAM_FAULT, fault),
        /* The hook and its argument travel together under one bit. */
        F(CCOL_COMM_PARAM_INTERRUPT, interrupt),
        F(CCOL_COMM_PARAM_INTERRUPT, interrupt_ud),
#undef F
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (!(o->mask & f[i].bit))
            continue;
        memcpy((char *)p + f[i].off, (const char *)o + f[i].off, f[i].len);
        p->mask |= f[i].bit;
    }
}

/* Returns a poisoned communicator carrying `err`, as ccol_comm_create does
 * on failure. */
static ccol_status
fail_env(const ccol__err *err, ccol_comm **out)
{
    ccol_comm_params none = { 0 };
    ccol_status st = ccol_comm_create(&none, out);
    if (st != CCOL_OK)
        return st;
    (*out)->err = *err;
    (*out)->poisoned = true;
    return err->code;
}

/* Environment first, then the caller's overrides on top: a field set
 * in the overrides always wins over what the launcher exported. */
ccol_status
ccol_comm_create_env(const ccol_comm_params *overrides, ccol_comm **out)
{
    ccol_comm_params p = { 0 };
    ccol__err err = { 0 };
    int rank = 0, size = 1, used = -1;

    bool given = overrides != NULL &&
                 (overrides->mask & CCOL_COMM_PARAM_RANK) &&
                 (overrides->mask & CCOL_COMM_PARAM_SIZE);

    if (out == NULL)
        return CCOL_ERR_INVALID_ARG;
    /* Rank and size given by the caller: the launcher's variables are
     * not consulted (they would be overridden anyway). */
    if ((!given && resolve_rank(&err, &rank, &size, &used) != CCOL_OK) ||
        read_knobs(&err, &p) != CCOL_OK ||
        read_transport(&err, &p) != CCOL_OK)
        return fail_env(&err, out);
    p.rank = rank;
    p.size = size;
    p.mask |= CCOL_COMM_PARAM_RANK | CCOL_COMM_PARAM_SIZE;
    if (overrides != NULL)
        overlay(&p, overrides);
    if ((p.mask & CCOL_COMM_PARAM_TRANSPORT) &&
        p.transport == CCOL_TRANSPORT_INPROC &&
        !((p.mask & CCOL_COMM_PARAM_NAME) && p.name != NULL && p.name[0])) {
        p.name = "env"; /* the threads of this process meet in one group */
        p.mask |= CCOL_COMM_PARAM_NAME;
    }
    if (p.size > 1 && !(p.mask & CCOL_COMM_PARAM_PORT) &&
        !((p.mask & CCOL_COMM_PARAM_TRANSPORT) &&
          (p.transport == CCOL_TRANSPORT_INPROC ||
           p.transport == CCOL_TRANSPORT_SHM))) {
        ccol__seterr(&err, CCOL_ERR_INVALID_ARG,
                     "%s says rank %d of %d but MASTER_PORT is not set: "
                     "the tcp transport needs MASTER_ADDR/MASTER_PORT of "
                     "rank 0 (or use the MPI adapter)",
                     used >= 0 ? sets[used].who : "the caller", p.rank,
                     p.size);
        return fail_env(&err, out);
    }
    return ccol_comm_create(&p, out);
}
