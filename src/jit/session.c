/*
 * session.c - the tracing JIT's sessions: frames, their caches of compiled
 * entries, the compile protocol and the public API of ccol_jit_session.h.
 *
 * A call looks the frame's entries up in order (guards), agrees on the
 * outcome with the other ranks in lockstep mode (ccol_sync_guard), and on
 * a miss compiles: preflight trace -> compile collective at the first
 * graph emission -> restart the trace with the merged decisions -> finish.
 * Past the recompile limit, or when the frame cannot be traced, the frame
 * runs eagerly. A graph break runs print eagerly (or calls the function
 * whose print broke the graph as a frame) and continues in the resume
 * frame, a frame of its own.
 */
#include "exec.h"
#include "tracer.h"
#include "../core/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A frame: a function's code, or the rest of one after a graph break,
 * with the entries compiled for it. */
typedef struct Frame {
    char *code_id;              /* its name in events and introspection */
    FrameCode fc;               /* where its code starts */
    Entry **entries;            /* compiled entries, oldest first */
    int nentries;               /* their number */
    size_t cap;                 /* entries allocated */
    int compiles;               /* compiles of this frame so far */
    bool eager;                 /* runs eagerly from now on */
} Frame;

struct ccol_jit_session {
    ccol_jit_module *m;         /* the program (not owned) */
    ccol_comm *comm;            /* the job's ranks; NULL: one rank */
    ccol_sync *sync;            /* the compile collective's state */
    ccol_jit_session_params p;  /* with defaults filled in */
    Frame **frames;             /* every frame called, first call first */
    size_t nframes, cap;        /* frames used, and allocated */
    uint64_t compiles;          /* compiles over all frames */
    int64_t calls;              /* ccol_jit_session_call so far */
    int depth;                  /* frames called from eager runs */
    char errmsg[JIT_ERRMAX];    /* the last failure's message */
};

/* Formats a message into the session's errmsg; returns st. */
#define seterr(s, st, ...)                                                \
    jit__jit_errf((s)->errmsg, sizeof (s)->errmsg, (st), __VA_ARGS__)

static void
logf_(ccol_jit_session *s, const char *fmt, ...) JIT_PRINTF(2, 3);

static void
logf_(ccol_jit_session *s, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    if (s->p.log == NULL)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->p.log(s->p.log_ud, line);
}

/* This rank's index in the job, for messages (0 without a communicator). */
static int
my_rank(const ccol_jit_session *s)
{
    return s->comm ? ccol_comm_rank(s->comm) : 0;
}

/* A failed call of the compile collective: the session's error is the
 * collective's message. */
static ccol_status
sync_err(ccol_jit_session *s, ccol_status st)
{
    return seterr(s, st, "%s", ccol_sync_errmsg(s->sync));
}

/* A program or collective error of a trace or a run. */
static ccol_status
run_err(ccol_jit_session *s, const Interp *in)
{
    ccol_status st = jit__trace_report(s->m, in);
    ccol_sync_tracef(s->sync, "error", "code:s message:s",
                     ccol_status_name(st), ccol_jit_module_errmsg(s->m));
    return seterr(s, st, "%s", ccol_jit_module_errmsg(s->m));
}

/* ---- frames ---- */

/* Frames are found by code id (a function's name, or a resume frame's
 * "resume_in_f_at_N"), and made on first use; NULL when out of memory. */
static Frame *
frame_get(ccol_jit_session *s, const char *code_id, int func,
          const ResumePoint *rp)
{
    for (size_t i = 0; i < s->nframes; i++) {
        if (strcmp(s->frames[i]->code_id, code_id) == 0)
            return s->frames[i];
    }
    Frame **p = ccol__grow(s->frames, &s->cap, s->nframes + 1, sizeof(*p), 8);
    if (p == NULL)
        return NULL;
    s->frames = p;
    Frame *f = calloc(1, sizeof(*f));
    char *id = malloc(strlen(code_id) + 1);
    if (f == NULL || id == NULL) {
        free(f);
        free(id);
        return NULL;
    }
    strcpy(id, code_id);
    f->code_id = id;
    f->fc.func = func;
    f->fc.code_id = id;
    if (rp != NULL)
        f->fc.rp = *rp;
    s->frames[s->nframes++] = f;
    return f;
}

/* Frees a frame with its entries. */
static void
frame_free(Frame *f)
{
    for (int i = 0; i < f->nentries; i++)
        jit__entry_free(f->entries[i]);
    free(f->entries);
    free(f->code_id);
    free(f);
}

/* Appends a compiled entry; lookups try the entries in the order they were
 * compiled. */
static bool
frame_add(Frame *f, Entry *e)
{
    Entry **p = ccol__grow(f->entries, &f->cap, (size_t)f->nentries + 1,
                           sizeof(*p), 4);
    if (p == NULL)
        return false;
    f->entries = p;
    f->entries[f->nentries++] = e;
    return true;
}

/* A fresh Interp for one run or check, with the module's full budget. */
static Interp
interp(const ccol_jit_session *s)
{
    return (Interp){ .m = s->m, .comm = s->comm,
                     .steps_left = s->m->params.max_steps };
}

static ccol_status frame_call(ccol_jit_session *s, Frame *f,
                              Value *const *slots, int nslots,
                              Value **result);

/* ---- eager runs ---- */

/* A call of user function `func` from an eager run: a frame itself. */
static ccol_status
call_frame(void *ud, int func, Value *const *args, int n, Value **out)
{
    ccol_jit_session *s = ud;
    const Func *fn = s->m->funcs[func];
    /* Eager callees are frames, so recursion is bounded here rather than by
     * the interpreter's depth. */
    if (s->depth >= s->m->params.max_depth)
        return seterr(s, CCOL_ERR_INVALID_ARG, "%s: recursion depth limit "
                      "exceeded (%d calls deep, in '%s')", s->m->file,
                      s->depth, fn->name);
    Frame *f = frame_get(s, fn->name, func, NULL);
    if (f == NULL)
        return seterr(s, CCOL_ERR_NO_MEMORY, "out of memory");
    s->depth++;
    ccol_status st = frame_call(s, f, args, n, out);
    s->depth--;
    return st;
}

/* Runs the frame's statements eagerly; callees are frames of their own,
 * as when Dynamo skips a frame. */
static ccol_status
run_eager(ccol_jit_session *s, Frame *f, Value *const *slots, int nslots,
          Value **result)
{
    TraceCtx ctx = { .m = s->m, .comm = s->comm, .sync = s->sync,
                     .eager = true, .call = call_frame, .call_ud = s };
    TraceOut out;
    jit__trace(&ctx, &f->fc, slots, nslots, &out);
    *result = out.result;
    if (out.end == TR_RETURN)
        return CCOL_OK;
    return out.nested ? out.in.status : run_err(s, &out.in);
}

/* From now on the frame runs eagerly: a warning on the session's log, and
 * an event in the trace. */
static void
go_eager(ccol_jit_session *s, Frame *f, const char *why)
{
    f->eager = true;
    ccol_sync_tracef(s->sync, "eager_fallback", "frame:s reason:s",
                     f->code_id, why);
    logf_(s, "warning: rank %d: frame %s: %s; it runs eagerly from now on",
          my_rank(s), f->code_id, why);
}

/* ---- compiles ---- */

/* A trace that did not reach a graph: an error, or a frame to skip. */
static ccol_status
trace_failed(ccol_jit_session *s, Frame *f, ccol_compile *c,
             const TraceOut *out)
{
    ccol_compile_finish(c, false);
    if (out->end != TR_SKIP)
        return run_err(s, &out->in);
    go_eager(s, f, out->in.msg);
    return CCOL_OK;
}

/* Logs (explain) and traces a compiled graph break. */
static void
graph_break_event(ccol_jit_session *s, const Frame *f, const Entry *e)
{
    const Func *fn = s->m->funcs[f->fc.func];
    const Node *at = jit__walk_stmt(&fn->body, e->resume.depth,
                                    e->resume.stmt, e->resume.branch);
    const Node *call = jit__walk_stmt_call(at);
    char id[TR_NAMEMAX], reason[TR_NAMEMAX];

    /* The break is print itself, or a call whose callee prints; after
     * `return f(...)` nothing is left to resume. */
    if (call == NULL || call->callee < 0)
        snprintf(reason, sizeof reason, "print");
    else
        snprintf(reason, sizeof reason, "call of %s",
                 s->m->funcs[call->callee]->name);
    if (at->kind == N_RETURN)
        id[0] = '\0';
    else
        snprintf(id, sizeof id, "resume_in_%s_at_%d", fn->name,
                 e->resume.line);
    if (s->p.explain)
        logf_(s, "rank %d: frame %s (compile %d): graph break at line %d "
              "(%s); %s%s", my_rank(s), f->code_id, f->compiles,
              e->resume.line, reason,
              id[0] ? "the rest is frame " : "the frame returns its result",
              id);
    ccol_sync_tracef(s->sync, "graph_break",
                     "frame:s line:d reason:s resume:s", f->code_id,
                     e->resume.line, reason, id);
}

/* Trace event "frame": where the frame's code is, so a report can show
 * it (a function's def line; a resume frame's print line). */
static void
trace_frame(ccol_jit_session *s, const Frame *f)
{
    int line = f->fc.rp.line > 0 ? f->fc.rp.line
                                 : s->m->funcs[f->fc.func]->line;
    ccol_sync_tracef(s->sync, "frame", "frame:s file:s line:d", f->code_id,
                     s->m->file ? s->m->file : "<input>", line);
}

/* Preflight, exchange, retrace, finish; *e NULL when the frame skips. */
static ccol_status
compile(ccol_jit_session *s, Frame *f, Value *const *slots, int nslots,
        Entry **e)
{
    ccol_compile *c = NULL;
    ccol_status st = ccol_compile_begin(s->sync, f->code_id, &c);
    TraceCtx ctx = { .m = s->m, .comm = s->comm, .sync = s->sync, .c = c,
                     .preflight = true, .explain = s->p.explain,
                     .log = s->p.log, .log_ud = s->p.log_ud };
    TraceOut out;
    *e = NULL;
    if (st != CCOL_OK)
        return sync_err(s, st);
    /* The preflight traces to the first graph emission, observing inputs,
     * so that every rank brings its observations to the exchange. */
    trace_frame(s, f);
    jit__trace(&ctx, &f->fc, slots, nslots, &out);
    if (out.end == TR_ERROR || out.end == TR_SKIP)
        return trace_failed(s, f, c, &out);
    /* The compile collective: all ranks merge their observations and get
     * the same decisions (static or dynamic, per size and scalar). */
    st = ccol_compile_exchange(c);
    if (st != CCOL_OK) {
        sync_err(s, st);
        ccol_compile_finish(c, false);
        return st;
    }
    ccol_sync_tracef(s->sync, "restart", "frame:s index:d reason:s",
                     f->code_id, f->compiles + 1,
                     "compile collective: retrace with merged decisions");
    /* The retrace builds the entry with the merged decisions; its graph is
     * the one kept. */
    ctx.preflight = false;
    ResumePoint at_call = out.at_call; /* out is rewritten */
    ctx.at_call = &at_call;
    jit__trace(&ctx, &f->fc, slots, nslots, &out);
    if (out.end == TR_ERROR || out.end == TR_SKIP)
        return trace_failed(s, f, c, &out);
    st = ccol_compile_finish(c, true);
    /* The compile is finished (committed) on every rank before the entry is
     * cached. */
    if (st != CCOL_OK || !frame_add(f, out.e)) {
        jit__entry_free(out.e);
        return st != CCOL_OK ? sync_err(s, st)
                             : seterr(s, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    f->compiles++;
    s->compiles++;
    *e = out.e;
    if (out.e->brk)
        graph_break_event(s, f, out.e);
    return CCOL_OK;
}

/* ---- runs ---- */

/* print(...) of a graph break, eagerly, with the rank prefix. */
static ccol_status
run_print(ccol_jit_session *s, Value **args, int n)
{
    Interp in = interp(s);
    int bi = jit__jit_builtin_find("print", B_FUNC);
    in.cur = "print";
    Value *r = jit__jit_builtin(bi)->fn(&in, args, n);
    jit__v_unref(r);
    return r ? CCOL_OK : run_err(s, &in);
}

/* The call a graph break stopped at: print, or a user function (a print
 * inside it), run as a frame of its own; *r its result. */
static ccol_status
run_break(ccol_jit_session *s, const Node *call, Value **args, int n,
          Value **r)
{
    *r = NULL;
    if (call->callee < 0)
        return run_print(s, args, n);
    return call_frame(s, call->callee, args, n, r);
}

/* After a graph break: the call it stopped at, then the resume frame on
 * the live locals (the call's result assigned, if the statement does;
 * a returned result is the frame's). */
static ccol_status
resume(ccol_jit_session *s, Frame *f, const Entry *e, Value **vals,
       Value **result)
{
    const Func *fn = s->m->funcs[f->fc.func];
    const Node *at = jit__walk_stmt(&fn->body, e->resume.depth,
                                    e->resume.stmt, e->resume.branch);
    Value *args[64], **slots, *r;
    /* The broken-at call's arguments are the first outputs; the resume
     * frame's slots follow. */
    for (int i = 0; i < e->nprint && i < 64; i++)
        args[i] = vals[e->outs[i]];
    ccol_status st = run_break(s, jit__walk_stmt_call(at), args,
                               e->nprint < 64 ? e->nprint : 64, &r);
    if (st != CCOL_OK || at->kind == N_RETURN) {
        *result = r;
        return st;
    }
    slots = calloc((size_t)fn->nlocals + 1, sizeof(*slots));
    if (slots == NULL) {
        jit__v_unref(r);
        return seterr(s, CCOL_ERR_NO_MEMORY, "out of memory");
    }
    for (int j = 0; j < fn->nlocals; j++) {
        int o = e->outs[e->nprint + j];
        slots[j] = o >= 0 ? jit__v_ref(vals[o]) : NULL;
    }
    if (at->kind == N_ASSIGN) {
        jit__v_unref(slots[at->slot]);
        slots[at->slot] = r;
    } else {
        jit__v_unref(r);
    }
    char id[TR_NAMEMAX];
    snprintf(id, sizeof id, "resume_in_%s_at_%d", fn->name, e->resume.line);
    Frame *rf = frame_get(s, id, f->fc.func, &e->resume);
    st = rf ? frame_call(s, rf, slots, fn->nlocals, result)
            : seterr(s, CCOL_ERR_NO_MEMORY, "out of memory");
    for (int j = 0; j < fn->nlocals; j++)
        jit__v_unref(slots[j]);
    free(slots);
    return st;
}

/* Runs a compiled entry: its inputs resolved from the frame's slots, the
 * needed nodes evaluated, then the output, or the graph break (print, then
 * the resume frame). */
static ccol_status
run_entry(ccol_jit_session *s, Frame *f, const Entry *e,
          Value *const *slots, int nslots, Value **result)
{
    Value **inputs = calloc((size_t)e->g.nin + 1, sizeof(*inputs));
    Value **vals = calloc((size_t)e->g.n + 1, sizeof(*vals));
    Interp in = interp(s);
    ccol_status st = CCOL_OK;
    if (inputs == NULL || vals == NULL)
        st = seterr(s, CCOL_ERR_NO_MEMORY, "out of memory");
    else if (!jit__g_resolve(&e->g, slots, nslots, inputs))
        st = seterr(s, CCOL_ERR_INTERNAL, "internal: unresolved input");
    else if (!jit__g_eval(&e->g, e->run_need, &in, inputs, vals, s->sync))
        st = run_err(s, &in);
    else if (!e->brk)
        *result = jit__v_ref(vals[e->outs[0]]);
    else
        st = resume(s, f, e, vals, result);
    if (vals != NULL)
        jit__g_release(&e->g, vals);
    free(vals);
    free(inputs);
    return st;
}

/* The first entry whose guards hold; on a miss, `why` names the guard
 * of the most recent entry that failed. */
static Entry *
lookup(ccol_jit_session *s, const Frame *f, Value *const *slots, int nslots,
       char *why, size_t cap)
{
    Interp in = interp(s);
    int bad = -1;
    for (int i = 0; i < f->nentries; i++) {
        bad = jit__guard_check(f->entries[i], &in, slots, nslots);
        if (bad == -1)
            return f->entries[i];
    }
    why[0] = '\0';
    if (f->nentries > 0) {
        const Entry *e = f->entries[f->nentries - 1];
        Buf b = { 0 };
        if (bad >= 0 && bad < e->nguards)
            jit__guard_render(e, &e->guards[bad], &b);
        /* a check out of memory misses too, but no guard failed */
        if (bad == JIT_GUARD_NOMEM)
            snprintf(why, cap, "out of memory checking the guards");
        else
            snprintf(why, cap, "guard failed: %s",
                     b.p ? b.p : "input missing");
        free(b.p);
    }
    return NULL;
}

/* The cached entry to run (NULL: recompile), agreed with the other ranks
 * in lockstep mode. */
static ccol_status
cache_lookup(ccol_jit_session *s, Frame *f, Value *const *slots, int nslots,
             Entry **out, char *why, size_t cap)
{
    Entry *e = lookup(s, f, slots, nslots, why, cap);
    *out = NULL;
    if (f->nentries == 0)
        return CCOL_OK;
    bool all = false;
    /* In lockstep mode every rank must hit or miss together: one rank's
     * miss makes all ranks recompile, since the compile is a collective. */
    ccol_status st = ccol_sync_guard(s->sync, f->code_id, e != NULL, &all);
    if (st != CCOL_OK)
        return sync_err(s, st);
    if (!all && e != NULL)
        snprintf(why, cap, "another rank missed (guard collective)");
    if (all) {
        *out = e;
        return CCOL_OK;
    }
    if (s->p.explain)
        logf_(s, "rank %d: frame %s: recompile %d: %s", my_rank(s),
              f->code_id, f->compiles + 1, why);
    return CCOL_OK;
}

/* One call of a frame: a cached entry whose guards hold (agreed by all
 * ranks in lockstep mode), else a compile, else an eager run when the frame
 * is eager or past its recompile limit. */
static ccol_status
frame_call(ccol_jit_session *s, Frame *f, Value *const *slots, int nslots,
           Value **result)
{
    Entry *e = NULL;
    ccol_status st = CCOL_OK;
    char why[512] = "";
    if (!f->eager)
        st = cache_lookup(s, f, slots, nslots, &e, why, sizeof why);
    if (st != CCOL_OK)
        return st;
    if (!f->eager && e == NULL && f->compiles >= s->p.recompile_limit) {
        char limit[96];
        snprintf(limit, sizeof limit, "recompile_limit (%d) reached",
                 s->p.recompile_limit);
        go_eager(s, f, limit);
    }
    if (!f->eager && e == NULL) {
        if (f->nentries > 0)
            ccol_sync_tracef(s->sync, "recompile", "frame:s entries:d "
                             "reason:s", f->code_id, f->nentries, why);
        st = compile(s, f, slots, nslots, &e);
        if (st != CCOL_OK)
            return st;
    }
    if (f->eager || e == NULL)
        return run_eager(s, f, slots, nslots, result);
    return run_entry(s, f, e, slots, nslots, result);
}

/* ---- public API ---- */

/* Defaults: lockstep when the communicator has more than one rank, 8
 * recompiles per frame, no explain, no log. */
ccol_status
ccol_jit_session_create(ccol_jit_module *m, ccol_comm *comm,
                        const ccol_jit_session_params *p,
                        ccol_jit_session **out)
{
    if (out == NULL || m == NULL)
        return CCOL_ERR_INVALID_ARG;
    *out = NULL;
    ccol_jit_session_params q = { 0 };
    if (p != NULL)
        q = *p;
    if (!(q.mask & CCOL_JIT_SESSION_PARAM_MODE))
        q.mode = comm && ccol_comm_size(comm) > 1 ? CCOL_SYNC_LOCKSTEP
                                                  : CCOL_SYNC_OFF;
    if (!(q.mask & CCOL_JIT_SESSION_PARAM_RECOMPILE_LIMIT))
        q.recompile_limit = 8;
    if (!(q.mask & CCOL_JIT_SESSION_PARAM_EXPLAIN))
        q.explain = false;
    if (!(q.mask & CCOL_JIT_SESSION_PARAM_LOG))
        q.log = NULL;
    if (q.recompile_limit < 0 || (unsigned)q.mode > CCOL_SYNC_LOCKSTEP)
        return CCOL_ERR_INVALID_ARG;
    ccol_jit_session *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return CCOL_ERR_NO_MEMORY;
    s->m = m;
    s->comm = comm;
    s->p = q;
    ccol_sync_params sp = { .mask = CCOL_SYNC_PARAM_MODE |
                                    CCOL_SYNC_PARAM_COMM,
                            .mode = q.mode, .comm = comm };
    ccol_status st = ccol_sync_create(&sp, &s->sync);
    if (st == CCOL_OK)
        *out = s;
    else
        free(s);
    return st;
}

/* Frees the frames and their entries, then the compile collective's state. */
void
ccol_jit_session_destroy(ccol_jit_session *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i < s->nframes; i++)
        frame_free(s->frames[i]);
    free(s->frames);
    ccol_sync_destroy(s->sync);
    free(s);
}

ccol_sync *
ccol_jit_session_sync(ccol_jit_session *s)
{
    return s ? s->sync : NULL;
}

/* The last failure's message ("" before any). */
const char *
ccol_jit_session_errmsg(const ccol_jit_session *s)
{
    return s ? s->errmsg : "no session";
}

/* The called function is a frame of its own, looked up (or made) by name. */
ccol_status
ccol_jit_session_call(ccol_jit_session *s, const char *fn,
                      ccol_jit_value *const *args, size_t nargs,
                      ccol_jit_value **result)
{
    if (s == NULL)
        return CCOL_ERR_INVALID_ARG;
    int fi = jit__jit_call_target(s->m, "ccol_jit_session_call", fn, args,
                                  nargs, result, s->errmsg,
                                  sizeof s->errmsg);
    if (fi < 0)
        return CCOL_ERR_INVALID_ARG;
    Frame *f = frame_get(s, fn, fi, NULL);
    if (f == NULL)
        return seterr(s, CCOL_ERR_NO_MEMORY, "out of memory");
    /* Each call is an event in the trace, numbered, so reports can align
     * ranks. */
    ccol_sync_tracef(s->sync, "call", "fn:s index:i", fn, ++s->calls);
    Value *r = NULL;
    ccol_status st = frame_call(s, f, args, (int)nargs, &r);
    if (st != CCOL_OK)
        return st;
    *result = r;
    s->errmsg[0] = '\0';
    return CCOL_OK;
}

/* A barrier, so no rank leaves while another still needs it in a
 * collective. */
ccol_status
ccol_jit_session_end(ccol_jit_session *s)
{
    if (s == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (s->comm == NULL || ccol_comm_size(s->comm) < 2)
        return CCOL_OK;
    ccol_status st = ccol_barrier(s->comm);
    if (st != CCOL_OK)
        return seterr(s, st, "%s", ccol_comm_errmsg(s->comm));
    return CCOL_OK;
}

/* A dim is marked dynamic or static, not both: the later mark wins. */
ccol_status
ccol_jit_tensor_mark(ccol_jit_value *v, int dim, bool dynamic)
{
    if (v == NULL || v->kind != CCOL_JIT_TENSOR || dim < 0 ||
        dim >= v->u.t.ndim)
        return CCOL_ERR_INVALID_ARG;
    uint32_t bit = 1u << dim;
    if (dynamic) {
        v->u.t.mark_dynamic |= bit;
        v->u.t.mark_static &= ~bit;
    } else {
        v->u.t.mark_static |= bit;
        v->u.t.mark_dynamic &= ~bit;
    }
    return CCOL_OK;
}

/* Compiles so far, over all frames. */
uint64_t
ccol_jit_session_compiles(const ccol_jit_session *s)
{
    return s ? s->compiles : 0;
}

/* Exchanges of the compile collective so far. */
uint64_t
ccol_jit_session_exchanges(const ccol_jit_session *s)
{
    return s ? ccol_sync_exchanges(s->sync) : 0;
}

/* Frames made so far, in the order they were first called. */
size_t
ccol_jit_session_nframes(const ccol_jit_session *s)
{
    return s ? s->nframes : 0;
}

/* Frame i, or NULL when out of range. */
static const Frame *
frame_at(const ccol_jit_session *s, size_t i)
{
    return s && i < s->nframes ? s->frames[i] : NULL;
}

/* Frame i's code id. */
const char *
ccol_jit_session_frame_name(const ccol_jit_session *s, size_t i)
{
    const Frame *f = frame_at(s, i);
    return f ? f->code_id : NULL;
}

/* Frame i's compiles. */
int
ccol_jit_session_frame_compiles(const ccol_jit_session *s, size_t i)
{
    const Frame *f = frame_at(s, i);
    return f ? f->compiles : 0;
}

/* True once frame i runs eagerly. */
bool
ccol_jit_session_frame_eager(const ccol_jit_session *s, size_t i)
{
    const Frame *f = frame_at(s, i);
    return f ? f->eager : false;
}

/* The most recent entry of frame i, whose decisions and graph the
 * introspection functions report. */
static const Entry *
last_entry(const ccol_jit_session *s, size_t i)
{
    const Frame *f = frame_at(s, i);
    return f && f->nentries > 0 ? f->entries[f->nentries - 1] : NULL;
}

/* The dynamic decisions of frame i's latest entry. */
size_t
ccol_jit_session_frame_ndynamic(const ccol_jit_session *s, size_t i)
{
    const Entry *e = last_entry(s, i);
    return e ? e->ndyn : 0;
}

/* Decision j of frame i's latest entry ("L['x'].size(0)"). */
const char *
ccol_jit_session_frame_dynamic(const ccol_jit_session *s, size_t i,
                               size_t j)
{
    const Entry *e = last_entry(s, i);
    return e && j < e->ndyn ? e->dyn[j] : NULL;
}

/* The latest entry's guards and graph as text (malloc'd), NULL when there
 * is none or out of memory. */
char *
ccol_jit_session_frame_graph(const ccol_jit_session *s, size_t i)
{
    const Entry *e = last_entry(s, i);
    Buf b = { 0 };
    if (e == NULL)
        return NULL;
    jit__entry_render(e, &b);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
