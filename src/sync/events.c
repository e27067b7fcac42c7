/*
 * events.c - the trace events of the compile collective (the rest of
 * src/sync calls these at each step, see docs/trace-format.md), written
 * through the trace writer of src/trace, and the public
 * ccol_sync_trace* functions a compiler uses to add its own events. Every
 * hook returns at once when the sync has no trace, so tracing off costs
 * one branch per step.
 */
#include "sync.h"

#include "../comm/comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *
mode_name(ccol_sync_mode m)
{
    return m == CCOL_SYNC_LOCKSTEP  ? "lockstep"
           : m == CCOL_SYNC_COMPILE ? "compile"
                                    : "off";
}

/* A sub-communicator's members as a JSON list of job ranks ("[2,3]"),
 * or NULL for a job's own communicator. */
static char *
domain_json(const ccol_comm *c)
{
    ccol__buf b = { 0 };

    if (c == NULL || c->job_rank == NULL)
        return NULL;
    for (int r = 0; r < c->id.size; r++)
        ccol__buf_printf(&b, "%c%d", r ? ',' : '[', c->job_rank[r]);
    ccol__buf_printf(&b, "]");
    return b.oom ? (ccol__buf_free(&b), NULL) : (char *)b.p;
}

/* The trace is the rank's in the job: a sync over a sub-communicator (a
 * pipeline stage's domain) writes the file of its job rank, never its
 * rank in the sub, and says which ranks its domain holds. */
void
ccol__sync_trace_open(ccol_sync *s)
{
    const ccol_comm *c = s->comm;
    int rank = c ? ccol__id_gr(&c->id, c->id.rank) : 0;
    int size = c ? (c->job_size > 0 ? c->job_size : c->id.size) : 1;
    char *domain = domain_json(c);

    s->trace = ccol__trace_from_env(rank, size);
    ccol__trace_emit(
        s->trace, "open", "mode:s collective:b transport:s version:s domain:j",
        mode_name(s->mode), ccol__sync_collective(s),
        c ? ccol_comm_transport(c) : "none", ccol_version_string(), domain);
    free(domain);
}

void
ccol__sync_trace_close(ccol_sync *s)
{
    ccol__trace_emit(s->trace, "close", "exchanges:u guards:u", s->xseq,
                     s->nguard);
    ccol__trace_close(s->trace);
    s->trace = NULL;
}

void
ccol__sync_trace_compile_begin(const ccol_compile *c)
{
    ccol__trace_emit(c->sync->trace, "compile_begin",
                     "frame:s index:u xseq:u reason:s", c->code_id, c->index,
                     c->sync->xseq + 1,
                     c->index == 1 ? "first compile" : "recompile");
}

void
ccol__sync_trace_observe(const ccol_compile *c, const char *source)
{
    const ccol__dyn_entry *e;
    ccol__buf b = { 0 };

    if (!ccol__trace_on(c->sync->trace))
        return;
    e = ccol__dyn_map_find(&c->x.obs, source);
    if (e == NULL)
        return;
    ccol__dyn_entry_render(e, &b);
    ccol__buf_u8(&b, 0);
    if (!b.oom)
        ccol__trace_emit(c->sync->trace, "observe",
                         "frame:s index:u source:s render:s", c->code_id,
                         c->index, source, (const char *)b.p);
    ccol__buf_free(&b);
}

void
ccol__sync_trace_span_begin(const ccol_sync *s, ccol__sync_span *sp)
{
    memset(sp, 0, sizeof *sp);
    if (!ccol__trace_on(s->trace))
        return;
    sp->t0 = ccol__now_ns();
    if (s->comm != NULL)
        ccol_comm_traffic(s->comm, &sp->sent, &sp->recv);
}

/* Emits an "error" event for a failed sync call. */
static void
trace_error(const ccol_sync *s, const char *frame, const char *where,
            ccol_status st)
{
    ccol__trace_emit(s->trace, "error", "code:s message:s frame:s where:s",
                     ccol_status_name(st), s->err.msg, frame, where);
}

void
ccol__sync_trace_exchange(const ccol_compile *c, const ccol__sync_span *sp,
                          ccol_status st)
{
    const ccol_sync *s = c->sync;
    uint64_t sent = 0, recv = 0;

    if (!ccol__trace_on(s->trace))
        return;
    if (s->comm != NULL)
        ccol_comm_traffic(s->comm, &sent, &recv);
    ccol__trace_emit(s->trace, "exchange",
                     "frame:s index:u xseq:u collective:b ranks:d "
                     "bytes_sent:u bytes_recv:u dur_ns:i ok:b error:s",
                     c->code_id, c->index, s->xseq + (st == CCOL_OK ? 0 : 1),
                     ccol__sync_collective(s),
                     s->comm ? ccol_comm_size(s->comm) : 1, sent - sp->sent,
                     recv - sp->recv, ccol__now_ns() - sp->t0, st == CCOL_OK,
                     st == CCOL_OK ? NULL : s->err.msg);
    if (st != CCOL_OK)
        trace_error(s, c->code_id, "exchange", st);
}

void
ccol__sync_trace_state_change(const ccol_compile *c, const char *source,
                              const char *before, const char *after)
{
    ccol__trace_emit(c->sync->trace, "state_change",
                     "frame:s index:u source:s before:s after:s", c->code_id,
                     c->index, source, before, after);
}

void
ccol__sync_trace_decision(const ccol_compile *c, const char *what,
                          ccol_decision d, const char *why)
{
    ccol__trace_emit(c->sync->trace, "decision",
                     "frame:s index:u what:s decision:s explain:s", c->code_id,
                     c->index, what,
                     d == CCOL_DYNAMIC ? "dynamic" : "specialized_01", why);
}

void
ccol__sync_trace_compile_end(const ccol_compile *c, bool ok, ccol_status st)
{
    ccol__trace_emit(c->sync->trace, "compile_end", "frame:s index:u ok:b",
                     c->code_id, c->index, ok && st == CCOL_OK);
    if (st != CCOL_OK)
        trace_error(c->sync, c->code_id, "finish", st);
}

void
ccol__sync_trace_guard(const ccol_sync *s, const char *code_id, bool hit,
                       bool all_hit, const ccol__sync_span *sp,
                       ccol_status st)
{
    if (!ccol__trace_on(s->trace) || code_id == NULL)
        return;
    ccol__trace_emit(s->trace, "guard",
                     "frame:s hit:b all_hit:b collective:b dur_ns:i ok:b",
                     code_id, hit, st == CCOL_OK ? all_hit : false,
                     s->mode == CCOL_SYNC_LOCKSTEP && ccol__sync_collective(s),
                     ccol__now_ns() - sp->t0, st == CCOL_OK);
    if (st != CCOL_OK)
        trace_error(s, code_id, "guard", st);
}

/* ---- public API (ccol.h, section 5) ---- */

ccol_status
ccol_sync_trace(ccol_sync *s, const char *event, const char *fields_json)
{
    if (s == NULL)
        return CCOL_ERR_INVALID_ARG;
    return ccol__trace_emit_json(s->trace, event, fields_json, &s->err);
}

void
ccol_sync_tracef(ccol_sync *s, const char *event, const char *fields, ...)
{
    va_list ap;

    if (s == NULL || !ccol__trace_on(s->trace))
        return;
    va_start(ap, fields);
    ccol__trace_vemit_checked(s->trace, event, fields, ap);
    va_end(ap);
}

bool
ccol_sync_tracing(const ccol_sync *s)
{
    return s != NULL && ccol__trace_on(s->trace);
}
