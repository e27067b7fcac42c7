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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Frame {
    char *code_id;
    FrameCode fc;
    Entry **entries;
    int nentries, cap;
    int compiles;
    bool eager;
} Frame;

struct ccol_jit_session {
    ccol_jit_module *m;
    ccol_comm *comm;
    ccol_sync *sync;
    ccol_jit_session_params p;
    Frame **frames;
    size_t nframes, cap;
    uint64_t compiles;
    int64_t calls;              /* ccol_jit_session_call so far */
    int depth;                  /* frames called from eager runs */
    char errmsg[JIT_ERRMAX];
};

static ccol_status
seterr(ccol_jit_session *s, ccol_status st, const char *fmt, ...)
    JIT_PRINTF(3, 4);

static ccol_status
seterr(ccol_jit_session *s, ccol_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errmsg, sizeof s->errmsg, fmt, ap);
    va_end(ap);
    return st;
}

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

static int
my_rank(const ccol_jit_session *s)
{
    return s->comm ? ccol_comm_rank(s->comm) : 0;
}

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

static Frame *
frame_get(ccol_jit_session *s, const char *code_id, int func,
          const ResumePoint *rp)
{
    for (size_t i = 0; i < s->nframes; i++) {
        if (strcmp(s->frames[i]->code_id, code_id) == 0)
            return s->frames[i];
    }
    if (s->nframes == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        Frame **p = realloc(s->frames, cap * sizeof(*p));
        if (p == NULL)
            return NULL;
        s->frames = p;
        s->cap = cap;
    }
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

static void
frame_free(Frame *f)
{
    for (int i = 0; i < f->nentries; i++)
        jit__entry_free(f->entries[i]);
    free(f->entries);
    free(f->code_id);
    free(f);
}

static bool
frame_add(Frame *f, Entry *e)
{
    if (f->nentries == f->cap) {
        int cap = f->cap ? f->cap * 2 : 4;
        Entry **p = realloc(f->entries, (size_t)cap * sizeof(*p));
        if (p == NULL)
            return false;
        f->entries = p;
        f->cap = cap;
    }
    f->entries[f->nentries++] = e;
    return true;
}

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
    char id[TR_NAMEMAX];
    snprintf(id, sizeof id, "resume_in_%s_at_%d",
             s->m->funcs[f->fc.func]->name, e->resume.line);
    if (s->p.explain)
        logf_(s, "rank %d: frame %s (compile %d): graph break at line %d "
              "(print); the rest is frame %s", my_rank(s), f->code_id,
              f->compiles, e->resume.line, id);
    ccol_sync_tracef(s->sync, "graph_break",
                     "frame:s line:d reason:s resume:s", f->code_id,
                     e->resume.line, "print", id);
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
    trace_frame(s, f);
    jit__trace(&ctx, &f->fc, slots, nslots, &out);
    if (out.end == TR_ERROR || out.end == TR_SKIP)
        return trace_failed(s, f, c, &out);
    st = ccol_compile_exchange(c);
    if (st != CCOL_OK) {
        sync_err(s, st);
        ccol_compile_finish(c, false);
        return st;
    }
    ccol_sync_tracef(s->sync, "restart", "frame:s index:d reason:s",
                     f->code_id, f->compiles + 1,
                     "compile collective: retrace with merged decisions");
    ctx.preflight = false;
    jit__trace(&ctx, &f->fc, slots, nslots, &out);
    if (out.end == TR_ERROR || out.end == TR_SKIP)
        return trace_failed(s, f, c, &out);
    st = ccol_compile_finish(c, true);
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
        if (bad < 0)
            return f->entries[i];
    }
    why[0] = '\0';
    if (f->nentries > 0) {
        const Entry *e = f->entries[f->nentries - 1];
        Buf b = { 0 };
        if (bad < e->nguards)
            jit__guard_render(e, &e->guards[bad], &b);
        snprintf(why, cap, "guard failed: %s", b.p ? b.p : "input missing");
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
    ccol_sync_params sp = { .mask = CCOL_SYNC_PARAM_MODE |
                                    CCOL_SYNC_PARAM_COMM,
                            .mode = q.mode, .comm = comm };
    ccol_status st = ccol_sync_create(&sp, &s->sync);
    if (st != CCOL_OK) {
        free(s);
        return st;
    }
    s->m = m;
    s->comm = comm;
    s->p = q;
    *out = s;
    return CCOL_OK;
}

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

const char *
ccol_jit_session_errmsg(const ccol_jit_session *s)
{
    return s ? s->errmsg : "no session";
}

/* The function `fn` called with nargs args, or -1 with the error. */
static int
target(ccol_jit_session *s, const char *fn, ccol_jit_value *const *args,
       size_t nargs)
{
    const ccol_jit_module *m = s->m;
    if (!m->loaded)
        return seterr(s, CCOL_ERR_INVALID_ARG, "no program is loaded"), -1;
    for (int i = 0; i < m->nfuncs; i++) {
        const Func *f = m->funcs[i];
        if (strcmp(f->name, fn) != 0)
            continue;
        if (nargs != (size_t)f->nparams)
            return seterr(s, CCOL_ERR_INVALID_ARG,
                          "%s: %s() takes %d argument%s, got %zu", m->file,
                          f->name, f->nparams, f->nparams == 1 ? "" : "s",
                          nargs), -1;
        for (size_t k = 0; k < nargs; k++) {
            if (args[k] == NULL)
                return seterr(s, CCOL_ERR_INVALID_ARG,
                              "%s(): argument %zu is NULL", f->name, k + 1),
                       -1;
        }
        return i;
    }
    return seterr(s, CCOL_ERR_INVALID_ARG, "%s: no function named '%s'",
                  m->file, fn), -1;
}

ccol_status
ccol_jit_session_call(ccol_jit_session *s, const char *fn,
                      ccol_jit_value *const *args, size_t nargs,
                      ccol_jit_value **result)
{
    if (s == NULL)
        return CCOL_ERR_INVALID_ARG;
    if (fn == NULL || result == NULL || (args == NULL && nargs > 0))
        return seterr(s, CCOL_ERR_INVALID_ARG,
                      "ccol_jit_session_call: NULL argument");
    int fi = target(s, fn, args, nargs);
    if (fi < 0)
        return CCOL_ERR_INVALID_ARG;
    Frame *f = frame_get(s, fn, fi, NULL);
    if (f == NULL)
        return seterr(s, CCOL_ERR_NO_MEMORY, "out of memory");
    ccol_sync_tracef(s->sync, "call", "fn:s index:i", fn, ++s->calls);
    Value *r = NULL;
    ccol_status st = frame_call(s, f, args, (int)nargs, &r);
    if (st != CCOL_OK)
        return st;
    *result = r;
    s->errmsg[0] = '\0';
    return CCOL_OK;
}

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

uint64_t
ccol_jit_session_compiles(const ccol_jit_session *s)
{
    return s ? s->compiles : 0;
}

uint64_t
ccol_jit_session_exchanges(const ccol_jit_session *s)
{
    return s ? ccol_sync_exchanges(s->sync) : 0;
}

size_t
ccol_jit_session_nframes(const ccol_jit_session *s)
{
    return s ? s->nframes : 0;
}

static const Frame *
frame_at(const ccol_jit_session *s, size_t i)
{
    return s && i < s->nframes ? s->frames[i] : NULL;
}

const char *
ccol_jit_session_frame_name(const ccol_jit_session *s, size_t i)
{
    const Frame *f = frame_at(s, i);
    return f ? f->code_id : NULL;
}

int
ccol_jit_session_frame_compiles(const ccol_jit_session *s, size_t i)
{
    const Frame *f = frame_at(s, i);
    return f ? f->compiles : 0;
}

bool
ccol_jit_session_frame_eager(const ccol_jit_session *s, size_t i)
{
    const Frame *f = frame_at(s, i);
    return f ? f->eager : false;
}

static const Entry *
last_entry(const ccol_jit_session *s, size_t i)
{
    const Frame *f = frame_at(s, i);
    return f && f->nentries > 0 ? f->entries[f->nentries - 1] : NULL;
}

size_t
ccol_jit_session_frame_ndynamic(const ccol_jit_session *s, size_t i)
{
    const Entry *e = last_entry(s, i);
    return e ? e->ndyn : 0;
}

const char *
ccol_jit_session_frame_dynamic(const ccol_jit_session *s, size_t i,
                               size_t j)
{
    const Entry *e = last_entry(s, i);
    return e && j < e->ndyn ? e->dyn[j] : NULL;
}

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
