/*
 * report_read.c - reads trace files (docs/trace-format.md) into the report
 * model: splits lines, checks each one (a JSON object, version 1, rank,
 * event, clock), and folds the events of each rank into compiles, counts,
 * timeline marks, agreements and the collective sequence, and notes where
 * an interrupt landed; then attaches each agreement to the compile that
 * was running when it ended. Every
 * problem is an error "file:line: what"; the line is skipped and reading
 * goes on. Trace text is untrusted: every string is scrubbed here, as it
 * is read (scrub()), so that no control byte reaches a terminal or a page
 * whichever output prints it.
 */
#include "report.h"
#include "../src/core/grow.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- string lists ---- */

void
tool_strs_add(tool_strs *l, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL, **v;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    v = ccol__grow(l->v, &l->cap, l->n + 1, sizeof *v, 8);
    if (v == NULL) {
        free(s);
        return;
    }
    l->v = v;
    l->v[l->n++] = s;
}

bool
tool_strs_has(const tool_strs *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0)
            return true;
    return false;
}

void
tool_strs_free(tool_strs *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- one line's context ---- */

/* Where a line came from and what it said. */
typedef struct line {
    tool_report *r;    /* the report */
    const char *name;   /* file name for messages */
    size_t no;          /* line number, from 1 */
    json_t *o;          /* the parsed object */
    const char *event;  /* its event name */
    int64_t t;          /* its wall clock */
    tool_rep_rank *rk; /* its rank */
} line;

/*
 * Makes untrusted text safe to print: every C0 control byte (ESC starts
 * the terminal's escape sequences) and DEL becomes a visible '?', as
 * report_text.c and report_html.c show them too. A newline is kept when
 * `keep_nl` (a source snippet under a message continues on its own
 * line), else it becomes '?' as well.
 */
static void
scrub(char *s, bool keep_nl)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c < 0x20 && !(c == '\n' && keep_nl)) || c == 0x7f)
            *s = '?';
    }
}

/* Does s hold a byte scrub() replaces (a newline excepted)? */
static bool
has_ctl(const char *s)
{
    for (; *s != '\0'; s++)
        if (((unsigned char)*s < 0x20 && *s != '\n') || *s == 0x7f)
            return true;
    return false;
}

/* The text of the JSON string v, scrubbed in the parsed object (so every
 * later read of it sees the same text); "" when out of memory. */
static const char *
str_value(json_t *v)
{
    const char *s = json_string_value(v);
    char *d;
    int bad;

    if (!has_ctl(s))
        return s;
    d = strdup(s);
    if (d == NULL)
        return "";
    scrub(d, true);
    bad = json_string_set(v, d);
    free(d);
    return bad != 0 ? "" : json_string_value(v);
}

static void error_at(tool_report *r, const char *name, size_t no,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
error_at(tool_report *r, const char *name, size_t no, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (r->errors.n >= TOOL_REPORT_MAX_ERRORS) {
        r->nerrors_dropped++;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    scrub(msg, false); /* jansson's messages quote the line's bytes */
    if (no > 0)
        tool_strs_add(&r->errors, "%s:%zu: %s", name, no, msg);
    else
        tool_strs_add(&r->errors, "%s: %s", name, msg);
}

/* A string field, or NULL with an error when `need` and missing. */
static const char *
str_field(line *l, const char *key, bool need)
{
    json_t *v = json_object_get(l->o, key);

    if (json_is_string(v))
        return str_value(v);
    if (need || (v != NULL && !json_is_null(v)))
        error_at(l->r, l->name, l->no, "%s: field '%s' must be a string",
                 l->event, key);
    return NULL;
}

/* An integer field (0 when missing and not needed); false on error. */
static bool
int_field(line *l, const char *key, bool need, int64_t *out)
{
    json_t *v = json_object_get(l->o, key);

    *out = 0;
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    if (v == NULL && !need)
        return true;
    error_at(l->r, l->name, l->no, "%s: field '%s' must be an integer",
             l->event, key);
    return false;
}

/* A boolean field, `dflt` when missing. */
static bool
bool_field(line *l, const char *key, bool dflt)
{
    json_t *v = json_object_get(l->o, key);

    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* The rank slot for `rank`, growing the table; NULL when out of memory. */
static tool_rep_rank *
rank_slot(tool_report *r, int rank)
{
    if ((size_t)rank >= r->nranks) {
        size_t n = (size_t)rank + 1;
        tool_rep_rank *v = realloc(r->ranks, n * sizeof *v);
        if (v == NULL)
            return NULL;
        memset(v + r->nranks, 0, (n - r->nranks) * sizeof *v);
        r->ranks = v;
        r->nranks = n;
    }
    r->ranks[rank].present = true;
    return &r->ranks[rank];
}

static bool opt_str(line *l, const char *key, const char **out);
static char *dup_cut(const char *s, size_t max);
static void failed_coll(line *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- compiles and marks ---- */

const tool_rep_compile *
tool_report_find(const tool_rep_rank *rk, const char *frame, uint64_t index)
{
    for (size_t i = rk->ncomp; i-- > 0;)
        if (rk->compiles[i].index == index &&
            strcmp(rk->compiles[i].frame, frame) == 0)
            return &rk->compiles[i];
    return NULL;
}

static tool_rep_compile *
add_compile(tool_rep_rank *rk, const char *frame, uint64_t index)
{
    tool_rep_compile *c;

    c = ccol__grow(rk->compiles, &rk->capcomp, rk->ncomp + 1, sizeof *c, 8);
    if (c == NULL)
        return NULL;
    rk->compiles = c;
    c = &rk->compiles[rk->ncomp];
    memset(c, 0, sizeof *c);
    c->frame = strdup(frame);
    if (c->frame == NULL)
        return NULL;
    c->index = index;
    rk->ncomp++;
    return c;
}

static void add_mark(line *l, int kind, int64_t dur, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
add_mark(line *l, int kind, int64_t dur, const char *fmt, ...)
{
    tool_rep_rank *rk = l->rk;
    tool_rep_mark *m;
    va_list ap;
    char *label = NULL;

    m = ccol__grow(rk->marks, &rk->capmarks, rk->nmarks + 1, sizeof *m, 16);
    if (m == NULL)
        return;
    rk->marks = m;
    va_start(ap, fmt);
    if (vasprintf(&label, fmt, ap) < 0)
        label = NULL;
    va_end(ap);
    m = &rk->marks[rk->nmarks++];
    m->kind = kind;
    m->dur_ns = dur > 0 && dur < l->t ? dur : 0;
    m->t_ns = l->t - m->dur_ns;
    m->label = label;
}

/* The frame and compile index an event refers to; false after an error. */
static bool
frame_index(line *l, const char **frame, int64_t *index)
{
    *frame = str_field(l, "frame", true);
    if (*frame == NULL || !int_field(l, "index", true, index))
        return false;
    if (*index < 1) {
        error_at(l->r, l->name, l->no, "%s: index %lld is not >= 1", l->event,
                 (long long)*index);
        return false;
    }
    return true;
}

/* The compile an event refers to, created when its begin is missing
 * (a file that starts mid-compile). */
static tool_rep_compile *
event_compile(line *l)
{
    const char *frame;
    int64_t index;
    const tool_rep_compile *found;
    tool_rep_compile *c;

    if (!frame_index(l, &frame, &index))
        return NULL;
    found = tool_report_find(l->rk, frame, (uint64_t)index);
    if (found != NULL)
        return &l->rk->compiles[found - l->rk->compiles];
    c = add_compile(l->rk, frame, (uint64_t)index);
    if (c != NULL)
        c->begin_ns = l->t;
    return c;
}

/* ---- events ---- */

static void
on_compile_begin(line *l)
{
    const char *frame, *reason, *user;
    int64_t index;
    tool_rep_compile *c;

    if (!frame_index(l, &frame, &index))
        return;
    reason = str_field(l, "reason", false);
    if (!opt_str(l, "user", &user))
        user = NULL; /* an error named the line; the compile still counts */
    c = add_compile(l->rk, frame, (uint64_t)index);
    if (c == NULL)
        return;
    c->begin_ns = l->t;
    free(c->user);
    c->user = user != NULL ? strdup(user) : NULL;
    free(c->reason);
    c->reason = NULL;
    /* A recompile says why in the recompile event before it (the guard
     * that failed); the compile takes that reason. */
    if (l->rk->recompile_frame != NULL &&
        strcmp(l->rk->recompile_frame, frame) == 0 && index > 1) {
        c->reason = l->rk->recompile_reason;
        l->rk->recompile_reason = NULL;
    }
    if (c->reason == NULL && reason != NULL)
        c->reason = strdup(reason);
    free(l->rk->recompile_frame);
    free(l->rk->recompile_reason);
    l->rk->recompile_frame = l->rk->recompile_reason = NULL;
}

/* "frame" (written by a compiler such as ccol jit): where the code of the
 * latest compile of that frame is, as "file:line". */
static void
on_frame(line *l)
{
    const char *frame = str_field(l, "frame", true);
    const char *file = str_field(l, "file", true);
    int64_t no;
    char *where;

    if (frame == NULL || file == NULL || !int_field(l, "line", true, &no))
        return;
    for (size_t i = l->rk->ncomp; i-- > 0;) {
        tool_rep_compile *c = &l->rk->compiles[i];
        if (strcmp(c->frame, frame) != 0)
            continue;
        if (asprintf(&where, "%s:%lld", file, (long long)no) >= 0) {
            free(c->where);
            c->where = where;
        }
        return;
    }
}

static void
on_compile_end(line *l)
{
    tool_rep_compile *c = event_compile(l);
    json_t *dyn = json_object_get(l->o, "dynamic"), *v;
    size_t i;

    if (c == NULL)
        return;
    c->end_ns = l->t;
    c->state = bool_field(l, "ok", true) ? 1 : 2;
    if (c->state == 1)
        l->rk->ncompiles++;
    else
        l->rk->nfailed++;
    if (dyn != NULL && !json_is_array(dyn)) {
        error_at(l->r, l->name, l->no,
                 "compile_end: field 'dynamic' must "
                 "be an array of strings");
        return;
    }
    json_array_foreach(dyn, i, v)
    {
        if (json_is_string(v) && !tool_strs_has(&c->dynamic, str_value(v)))
            tool_strs_add(&c->dynamic, "%s", str_value(v));
    }
    if (c->dynamic.n > 1)
        qsort(c->dynamic.v, c->dynamic.n, sizeof(char *), cmp_str);
}

static void
on_decision(line *l)
{
    tool_rep_compile *c = event_compile(l);
    const char *what, *dec, *why;

    if (c == NULL)
        return;
    what = str_field(l, "what", true);
    dec = str_field(l, "decision", true);
    why = str_field(l, "explain", false);
    if (what == NULL || dec == NULL)
        return;
    if (strcmp(dec, "static") != 0 && !tool_strs_has(&c->dynamic, what)) {
        tool_strs_add(&c->dynamic, "%s", what);
        qsort(c->dynamic.v, c->dynamic.n, sizeof(char *), cmp_str);
    }
    if (why != NULL && !tool_strs_has(&c->why, why))
        tool_strs_add(&c->why, "%s", why);
}

static void
on_state_change(line *l)
{
    tool_rep_compile *c = event_compile(l);
    const char *src, *before, *after;

    if (c == NULL)
        return;
    src = str_field(l, "source", true);
    before = str_field(l, "before", false);
    after = str_field(l, "after", true);
    if (src != NULL && after != NULL && c->changes.n < 256)
        tool_strs_add(&c->changes, "%s: %s -> %s", src,
                       before ? before : "(new)", after);
}

static void
on_exchange(line *l)
{
    const char *frame;
    int64_t index, sent, recv, dur;
    bool coll;

    if (!frame_index(l, &frame, &index) ||
        !int_field(l, "bytes_sent", false, &sent) ||
        !int_field(l, "bytes_recv", false, &recv) ||
        !int_field(l, "dur_ns", false, &dur))
        return;
    coll = bool_field(l, "collective", true);
    if (!bool_field(l, "ok", true))
        failed_coll(l, "the exchange for compile %lld of %s", (long long)index,
                    frame);
    add_mark(l, TOOL_MARK_EXCHANGE, dur,
             "%s exchange %s (compile %lld): %lld B sent, %lld B received, "
             "%.3f ms%s",
             coll ? "collective" : "local", frame, (long long)index,
             (long long)sent, (long long)recv, (double)dur / 1e6,
             bool_field(l, "ok", true) ? "" : ", FAILED");
    /* A local exchange (mode off, one rank) pairs with nothing and is not
     * a compile collective. */
    if (!coll)
        return;
    l->rk->nexchanges++;
    tool_strs_add(&l->rk->seq, "exchange %s (compile %lld)", frame,
                   (long long)index);
}

static void
on_guard(line *l)
{
    const char *frame = str_field(l, "frame", true);
    bool hit = bool_field(l, "hit", true);
    bool all = bool_field(l, "all_hit", hit);
    bool coll = bool_field(l, "collective", false);
    const char *then;
    int64_t dur;

    if (frame == NULL || !int_field(l, "dur_ns", false, &dur))
        return;
    if (!bool_field(l, "ok", true))
        failed_coll(l, "the guard collective at %s", frame);
    if (all)
        l->rk->nhits++;
    else
        l->rk->nmisses++;
    /* A call only this rank makes (collective false) answers for this
     * rank alone. */
    if (coll)
        then = all ? "all ranks hit" : "recompile on every rank";
    else
        then = hit ? "on this rank alone" : "recompile on this rank alone";
    add_mark(l, all ? TOOL_MARK_GUARD_HIT : TOOL_MARK_GUARD_MISS, dur,
             "guard %s: %s here, %s", frame, hit ? "hit" : "miss", then);
    if (coll)
        tool_strs_add(&l->rk->seq, "guard %s", frame);
}

/* restart, recompile, graph_break, eager_fallback: a counted mark. */
static void
on_compiler(line *l, int kind, uint64_t *count)
{
    const char *frame = str_field(l, "frame", false);
    const char *reason = str_field(l, "reason", false);
    int64_t lno = 0;
    char at[40] = "";

    if (int_field(l, "line", false, &lno) && lno > 0)
        snprintf(at, sizeof at, " line %lld", (long long)lno);
    if (kind == TOOL_MARK_RECOMPILE && frame != NULL && reason != NULL) {
        free(l->rk->recompile_frame);
        free(l->rk->recompile_reason);
        l->rk->recompile_frame = strdup(frame);
        l->rk->recompile_reason = malloc(strlen(reason) + 12);
        if (l->rk->recompile_reason != NULL)
            sprintf(l->rk->recompile_reason, "recompile: %s", reason);
    }
    (*count)++;
    add_mark(l, kind, 0, "%s %s%s%s%s", l->event, frame ? frame : "", at,
             reason ? ": " : "", reason ? reason : "");
}

/* Notes that the collective this event reports failed (for an interrupt
 * that follows: it landed in that collective). */
static void
failed_coll(line *l, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    free(l->rk->failed_coll);
    l->rk->failed_coll = s;
}

/* A wait that went on past its first progress line: "in guard collective
 * at f (a.py:3): rank 0 is running (not compiling), waited 40 s of 1800 s"
 * (what its `awaited` says). A trace whose last event is one ends in an
 * unfinished wait. */
static void
on_wait(line *l)
{
    const char *what = str_field(l, "what", true);
    const char *awaited = str_field(l, "awaited", true);
    int64_t waited;
    char *s = NULL;

    if (what == NULL || awaited == NULL ||
        !int_field(l, "waited_s", true, &waited))
        return;
    if (waited < 0 || asprintf(&s, "%s: %s", what, awaited) < 0)
        s = NULL;
    free(l->rk->waiting);
    l->rk->waiting = s != NULL ? dup_cut(s, 600) : NULL;
    free(s);
}

/* Is an error event an interrupt (Ctrl-C)? Its code says so. */
static bool
interrupt_code(const char *code)
{
    return code != NULL && (strcmp(code, "INTERRUPTED") == 0 ||
                            strcmp(code, "KeyboardInterrupt") == 0);
}

/* The open compile of a rank (begun, not ended), the latest begun. */
static const tool_rep_compile *
open_compile(const tool_rep_rank *rk)
{
    for (size_t i = rk->ncomp; i-- > 0;)
        if (rk->compiles[i].state == 0)
            return &rk->compiles[i];
    return NULL;
}

/*
 * Where the rank's first interrupt landed: the error's `during` (and
 * `at`), written by ccol.torch; else, for older traces, a collective when
 * the event before it reported a failed collective, the compile that was
 * open, or the user's code.
 */
static void
on_interrupt(line *l)
{
    static const char *const words[] = { "compile", "collective",
                                         "user code" };
    tool_rep_rank *rk = l->rk;
    const char *during, *at;
    const tool_rep_compile *c = open_compile(rk);

    rk->ninterrupts++;
    if (rk->landed != TOOL_LANDED_NONE)
        return;
    if (!opt_str(l, "during", &during) || !opt_str(l, "at", &at))
        during = at = NULL;
    rk->landed = TOOL_LANDED_UNKNOWN;
    for (int k = 0; during != NULL && k < 3; k++)
        if (strcmp(during, words[k]) == 0)
            rk->landed = TOOL_LANDED_COMPILE + k;
    if (during == NULL)
        rk->landed = rk->failed_coll != NULL ? TOOL_LANDED_COLLECTIVE
                     : c != NULL             ? TOOL_LANDED_COMPILE
                                             : TOOL_LANDED_USER;
    if (rk->landed == TOOL_LANDED_COLLECTIVE && rk->failed_coll != NULL) {
        rk->landed_what = rk->failed_coll;
        rk->failed_coll = NULL;
    } else if (rk->landed == TOOL_LANDED_COMPILE && c != NULL &&
               asprintf(&rk->landed_what, "compile %llu of %s",
                        (unsigned long long)c->index, c->frame) < 0) {
        rk->landed_what = NULL;
    }
    rk->landed_at = at != NULL ? strdup(at) : NULL;
}

static void
on_error(line *l)
{
    const char *code = str_field(l, "code", false);
    const char *msg = str_field(l, "message", false);
    char *text = NULL;

    l->rk->nerrors++;
    if (asprintf(&text, "%s%s%s", code ? code : "", code && msg ? ": " : "",
                 msg ? msg : "") < 0)
        text = NULL;
    add_mark(l, TOOL_MARK_ERROR, 0, "error %s", text ? text : "");
    if (interrupt_code(code)) {
        on_interrupt(l);
        free(text);
        return;
    }
    free(l->rk->last_error);
    l->rk->last_error = text;
}

static void
on_collective(line *l)
{
    const char *name = str_field(l, "name", true);
    int64_t dur;

    if (name == NULL || !int_field(l, "dur_ns", false, &dur))
        return;
    add_mark(l, TOOL_MARK_COLLECTIVE, dur, "collective %s", name);
    tool_strs_add(&l->rk->seq, "collective %s", name);
}

/* ---- agreements ---- */

/* A non-negative integer field (0 when missing and not needed); false
 * after an error. */
static bool
count_field(line *l, const char *key, bool need, int64_t *out)
{
    if (!int_field(l, key, need, out))
        return false;
    if (*out >= 0)
        return true;
    error_at(l->r, l->name, l->no, "%s: field '%s' is negative (%lld)",
             l->event, key, (long long)*out);
    return false;
}

/* A boolean field that must be there; false after an error. */
static bool
need_bool(line *l, const char *key, bool *out)
{
    json_t *v = json_object_get(l->o, key);

    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return true;
    }
    error_at(l->r, l->name, l->no, "%s: field '%s' must be a boolean",
             l->event, key);
    return false;
}

/* A string field that may be missing or null (*out NULL); false when it
 * has another type. */
static bool
opt_str(line *l, const char *key, const char **out)
{
    json_t *v = json_object_get(l->o, key);

    *out = str_field(l, key, false);
    return *out != NULL || v == NULL || json_is_null(v);
}

/* The strings of an agree line, borrowed from its JSON object. */
typedef struct agree_strs {
    const char *site;  /* site name */
    const char *frame; /* graph key */
    const char *error; /* error message when it failed, else NULL */
} agree_strs;

/* Checks the fields of an agree event into *a and *s; false after an
 * error, and the line is then skipped. */
static bool
agree_fields(line *l, tool_rep_agree *a, agree_strs *s)
{
    int64_t ranks;
    const char *err;

    s->site = str_field(l, "site", true);
    if (s->site == NULL)
        return false;
    s->frame = str_field(l, "frame", true);
    if (s->frame == NULL || !int_field(l, "aseq", true, &a->aseq) ||
        !count_field(l, "dur_ns", true, &a->dur_ns) ||
        !count_field(l, "bytes", false, &a->bytes) ||
        !count_field(l, "bytes_recv", false, &a->recv) ||
        !count_field(l, "ranks", false, &ranks) ||
        !need_bool(l, "ok", &a->ok) || !opt_str(l, "error", &err))
        return false;
    if (a->aseq < 1) {
        error_at(l->r, l->name, l->no, "agree: aseq %lld is not >= 1",
                 (long long)a->aseq);
        return false;
    }
    s->error = a->ok ? NULL : err != NULL ? err : "(no message)";
    return true;
}

/* A malloc'd copy of at most `max` bytes of s, cut at a UTF-8 character
 * boundary and ending in "..." when cut; NULL when out of memory. */
static char *
dup_cut(const char *s, size_t max)
{
    size_t n = strlen(s);
    char *d;

    if (n <= max)
        return strdup(s);
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        max--;
    d = malloc(max + 4);
    if (d != NULL) {
        memcpy(d, s, max);
        memcpy(d + max, "...", 4);
    }
    return d;
}

/* Keeps a copy of the checked agreement `a` with the strings `s` in the
 * rank's list, unless the list is full (then it is only counted). */
static void
keep_agree(tool_rep_rank *rk, const tool_rep_agree *a, const agree_strs *s)
{
    tool_rep_agree *v, *k;

    if (rk->nagrees >= TOOL_REPORT_MAX_AGREES)
        return;
    v = ccol__grow(rk->agrees, &rk->capagrees, rk->nagrees + 1, sizeof *v,
                   16);
    if (v == NULL)
        return;
    rk->agrees = v;
    k = &v[rk->nagrees];
    *k = *a;
    k->comp = -1;
    k->site = dup_cut(s->site, 200);
    k->frame = dup_cut(s->frame, 1000);
    k->error = s->error != NULL ? dup_cut(s->error, 2000) : NULL;
    if (k->site == NULL || k->frame == NULL ||
        (s->error != NULL && k->error == NULL)) {
        free(k->site);
        free(k->frame);
        free(k->error);
        return;
    }
    rk->nagrees++;
}

/* A compile-time agreement of ccol.torch (spmd_check.hash, autotune.gemm,
 * ...): kept for the compile it belongs to (tool_report_attach), counted
 * in the rank's totals, a span on the timeline and a step of the
 * collective sequence, so ranks that agreed differently are named at that
 * agreement. */
static void
on_agree(line *l)
{
    tool_rep_agree a = { 0 };
    agree_strs s;
    tool_rep_rank *rk = l->rk;

    if (!agree_fields(l, &a, &s))
        return;
    a.t_ns = l->t;
    rk->agreements++;
    rk->agree_failed += !a.ok;
    rk->agree_ns = tool_report_add_ns(rk->agree_ns, a.dur_ns);
    if (!a.ok)
        failed_coll(l, "the agreement %s #%lld for %s", s.site,
                    (long long)a.aseq, s.frame);
    add_mark(l, TOOL_MARK_COLLECTIVE, a.dur_ns,
             "agreement %s #%lld for %s: %lld B sent, %lld B received, "
             "%.3f ms%s%s",
             s.site, (long long)a.aseq, s.frame, (long long)a.bytes,
             (long long)a.recv, (double)a.dur_ns / 1e6,
             a.ok ? "" : ", FAILED: ", a.ok ? "" : s.error);
    tool_strs_add(&rk->seq, "agreement %s #%lld for %s", s.site,
                  (long long)a.aseq, s.frame);
    keep_agree(rk, &a, &s);
}

/* ---- compile once ---- */

/* The owner field of a once event: a rank, or -1 when missing or null;
 * false after an error. */
static bool
owner_field(line *l, int64_t *owner)
{
    json_t *v = json_object_get(l->o, "owner");

    *owner = -1;
    if (v == NULL || json_is_null(v))
        return true;
    if (!count_field(l, "owner", true, owner))
        return false;
    if (*owner < TOOL_REPORT_MAX_RANKS)
        return true;
    error_at(l->r, l->name, l->no, "once: owner %lld is not a rank",
             (long long)*owner);
    return false;
}

/* Keeps a copy of the checked event `o` with its strings `frame` and
 * `err` (NULL: none) in the rank's list, unless the list is full (then it
 * is only counted). */
static void
keep_once(tool_rep_rank *rk, const tool_rep_once *o, const char *frame,
          const char *err)
{
    tool_rep_once *v, *k;

    if (rk->nonces >= TOOL_REPORT_MAX_AGREES)
        return;
    v = ccol__grow(rk->onces, &rk->caponces, rk->nonces + 1, sizeof *v, 8);
    if (v == NULL)
        return;
    rk->onces = v;
    k = &v[rk->nonces];
    *k = *o;
    k->frame = dup_cut(frame, 1000);
    k->error = err != NULL ? dup_cut(err, 2000) : NULL;
    if (k->frame == NULL || (err != NULL && k->error == NULL)) {
        free(k->frame);
        free(k->error);
        return;
    }
    rk->nonces++;
}

/* What one rank did with one graph under compile once: kept for the
 * report's compile once table, and a span on the timeline. */
static void
on_once(line *l)
{
    tool_rep_once o = { 0 };
    const char *frame = str_field(l, "frame", true), *outcome, *err;

    outcome = frame != NULL ? str_field(l, "outcome", true) : NULL;
    if (outcome == NULL || !owner_field(l, &o.owner) ||
        !count_field(l, "bytes", false, &o.bytes) ||
        !count_field(l, "dur_ns", false, &o.dur_ns) ||
        !opt_str(l, "error", &err))
        return;
    for (o.outcome = 0; o.outcome < TOOL_ONCE_NKINDS; o.outcome++)
        if (strcmp(outcome, tool_once_outcomes[o.outcome]) == 0)
            break;
    if (o.outcome == TOOL_ONCE_NKINDS) {
        error_at(l->r, l->name, l->no, "once: unknown outcome '%.60s'",
                 outcome);
        return;
    }
    add_mark(l, TOOL_MARK_COLLECTIVE, o.dur_ns, "compile once of %s: %s, "
             "%lld B, %.3f ms%s%s", frame, outcome, (long long)o.bytes,
             (double)o.dur_ns / 1e6, err ? ": " : "", err ? err : "");
    keep_once(l->rk, &o, frame, err);
}

/* One compile's span, for finding the compile around a time. */
typedef struct span {
    int64_t begin; /* begin_ns */
    int64_t end;   /* end_ns, INT64_MAX while open */
    int64_t reach; /* the latest end of this span and all sorted before */
    size_t pos;    /* position in the rank's compiles */
} span;

static int
cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;

    if (x->begin != y->begin)
        return (x->begin > y->begin) - (x->begin < y->begin);
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The position of the latest begun compile whose span holds t, or -1.
 * `sp` is sorted by begin; the search stops where no earlier compile
 * reaches t, so compiles long finished are not scanned again. */
static long
span_find(const span *sp, size_t n, int64_t t)
{
    size_t lo = 0, hi = n; /* first span that begins after t */

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sp[mid].begin <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i-- > 0 && sp[i].reach >= t;)
        if (sp[i].end >= t)
            return (long)sp[i].pos;
    return -1;
}

/* The spans of a rank's compiles, sorted by begin; NULL when none (or
 * out of memory: every agreement is then outside a compile). */
static span *
rank_spans(const tool_rep_rank *rk)
{
    span *sp = rk->ncomp > 0 ? malloc(rk->ncomp * sizeof *sp) : NULL;
    int64_t reach = INT64_MIN;

    if (sp == NULL)
        return NULL;
    for (size_t i = 0; i < rk->ncomp; i++) {
        const tool_rep_compile *c = &rk->compiles[i];
        sp[i] = (span){ .begin = c->begin_ns,
                        .end = c->end_ns != 0 ? c->end_ns : INT64_MAX,
                        .pos = i };
    }
    qsort(sp, rk->ncomp, sizeof *sp, cmp_span);
    for (size_t i = 0; i < rk->ncomp; i++) {
        if (sp[i].end > reach)
            reach = sp[i].end;
        sp[i].reach = reach;
    }
    return sp;
}

void
tool_report_attach(tool_report *r)
{
    for (size_t i = 0; i < r->nranks; i++) {
        tool_rep_rank *rk = &r->ranks[i];
        span *sp = rank_spans(rk);

        for (size_t k = 0; k < rk->ncomp; k++) {
            rk->compiles[k].nagrees = 0;
            rk->compiles[k].agree_ns = 0;
        }
        for (size_t k = 0; k < rk->nagrees; k++) {
            tool_rep_agree *a = &rk->agrees[k];
            tool_rep_compile *c;

            a->comp = sp != NULL ? span_find(sp, rk->ncomp, a->t_ns) : -1;
            if (a->comp < 0)
                continue;
            c = &rk->compiles[a->comp];
            c->nagrees++;
            c->agree_ns = tool_report_add_ns(c->agree_ns, a->dur_ns);
        }
        free(sp);
    }
}

/* The counted compiler events: their mark kind and counter. */
static const struct {
    const char *event;    /* the event's name */
    int kind;             /* TOOL_MARK_* */
    size_t count;         /* offset of its counter in tool_rep_rank */
} compilers[] = {
    { "restart", TOOL_MARK_RESTART, offsetof(tool_rep_rank, nrestarts) },
    { "recompile", TOOL_MARK_RECOMPILE,
      offsetof(tool_rep_rank, nrecompiles) },
    { "graph_break", TOOL_MARK_GRAPH_BREAK,
      offsetof(tool_rep_rank, nbreaks) },
    { "eager_fallback", TOOL_MARK_EAGER, offsetof(tool_rep_rank, neager) },
};

/* The handlers of the other events. */
/* "open": the ranks of this rank's domain when its sync ran over a
 * sub-communicator (untrusted: job ranks in increasing order, this rank
 * among them); none means the whole job. */
static void
on_open(line *l)
{
    json_t *d = json_object_get(l->o, "domain"), *v;
    int me = (int)(l->rk - l->r->ranks), prev = -1, first = -1;
    bool mine = false;
    size_t i;

    if (d == NULL || json_is_null(d))
        return;
    if (!json_is_array(d) || json_array_size(d) == 0) {
        error_at(l->r, l->name, l->no,
                 "open: field 'domain' must be a list of ranks");
        return;
    }
    json_array_foreach(d, i, v)
    {
        json_int_t r = json_is_integer(v) ? json_integer_value(v) : -1;
        if (r <= prev || r >= TOOL_REPORT_MAX_RANKS) {
            error_at(l->r, l->name, l->no,
                     "open: 'domain'[%zu] must be a rank above the one "
                     "before it",
                     i);
            return;
        }
        first = first < 0 ? (int)r : first;
        prev = (int)r;
        mine = mine || r == me;
    }
    if (!mine) {
        error_at(l->r, l->name, l->no,
                 "open: rank %d is not in its own 'domain'", me);
        return;
    }
    l->rk->domain = first + 1;
}

static const struct {
    const char *event;    /* the event's name */
    void (*on)(line *l);  /* its handler */
} handlers[] = {
    { "open", on_open },
    { "compile_begin", on_compile_begin },
    { "compile_end", on_compile_end },
    { "frame", on_frame },
    { "decision", on_decision },
    { "state_change", on_state_change },
    { "exchange", on_exchange },
    { "guard", on_guard },
    { "error", on_error },
    { "collective", on_collective },
    { "agree", on_agree },
    { "once", on_once },
    { "wait", on_wait },
};

/* Folds one checked line into its rank. Other events (open, observe,
 * trace_dropped, ...) only count. */
static void
dispatch(line *l)
{
    const char *e = l->event;

    /* A failed collective is remembered for the error event right after
     * it (an interrupt that landed there); any other event forgets it. */
    if (strcmp(e, "error") != 0) {
        free(l->rk->failed_coll);
        l->rk->failed_coll = NULL;
    }
    /* A wait is unfinished until the rank writes anything else. */
    if (strcmp(e, "wait") != 0) {
        free(l->rk->waiting);
        l->rk->waiting = NULL;
    }

    for (size_t i = 0; i < sizeof handlers / sizeof handlers[0]; i++)
        if (strcmp(e, handlers[i].event) == 0) {
            handlers[i].on(l);
            return;
        }
    for (size_t i = 0; i < sizeof compilers / sizeof compilers[0]; i++)
        if (strcmp(e, compilers[i].event) == 0) {
            on_compiler(l, compilers[i].kind,
                        (uint64_t *)((char *)l->rk + compilers[i].count));
            return;
        }
    if (strcmp(e, "close") == 0)
        l->rk->closed = true;
}

/* Checks the fields every line has; fills l->event, l->t and l->rk. */
static bool
check_header(line *l, int file_rank)
{
    int64_t v, rank, size, pid;

    if (!int_field(l, "v", true, &v))
        return false;
    if (v != 1) {
        error_at(l->r, l->name, l->no,
                 "unsupported trace version %lld "
                 "(this ccol reads version 1)",
                 (long long)v);
        return false;
    }
    l->event = str_field(l, "event", true);
    if (l->event == NULL || !int_field(l, "rank", true, &rank) ||
        !int_field(l, "wall_ns", true, &l->t) ||
        !int_field(l, "size", false, &size))
        return false;
    if (rank < 0 || rank >= TOOL_REPORT_MAX_RANKS ||
        (file_rank >= 0 && rank != file_rank)) {
        error_at(l->r, l->name, l->no,
                 "rank %lld does not belong in this "
                 "file",
                 (long long)rank);
        return false;
    }
    if (size > 0 && size <= TOOL_REPORT_MAX_RANKS && size > l->r->size)
        l->r->size = (int)size;
    l->rk = rank_slot(l->r, (int)rank);
    if (l->rk != NULL && int_field(l, "pid", false, &pid) && pid > 0) {
        if (l->rk->pid == 0)
            l->rk->pid = pid;
        else if (pid != l->rk->pid)
            l->rk->other_pid = pid;
    }
    return l->rk != NULL;
}

/* Parses and folds the line text p[0..n). */
static void
feed_line(line *l, int file_rank, const char *p, size_t n)
{
    json_error_t je;

    l->o = json_loadb(p, n, JSON_REJECT_DUPLICATES, &je);
    if (l->o == NULL || !json_is_object(l->o)) {
        error_at(l->r, l->name, l->no, "not a JSON object: %s",
                 l->o == NULL ? je.text : "another JSON value");
        json_decref(l->o);
        return;
    }
    l->event = "line";
    if (check_header(l, file_rank)) {
        tool_report *r = l->r;
        l->rk->nevents++;
        r->nlines++;
        if (r->t0 == 0 || l->t < r->t0)
            r->t0 = l->t;
        if (l->t > r->t1)
            r->t1 = l->t;
        if (l->rk->first_ns == 0 || l->t < l->rk->first_ns)
            l->rk->first_ns = l->t;
        if (l->t >= l->rk->last_ns) {
            l->rk->last_ns = l->t;
            snprintf(l->rk->last_event, sizeof l->rk->last_event, "%s",
                     l->event);
        }
        dispatch(l);
    }
    json_decref(l->o);
}

void
tool_report_feed(tool_report *r, const char *name, int file_rank,
                  const char *data, size_t len)
{
    line l = { .r = r, .name = name };
    size_t off = 0;

    r->nfiles++;
    if (file_rank >= 0 && rank_slot(r, file_rank) != NULL &&
        r->ranks[file_rank].file == NULL)
        r->ranks[file_rank].file = strdup(name);
    if (len == 0) {
        error_at(r, name, 0, "empty trace file (the rank wrote no event)");
        return;
    }
    while (off < len) {
        const char *p = data + off;
        const char *nl = memchr(p, '\n', len - off);
        size_t n = nl != NULL ? (size_t)(nl - p) : len - off;

        l.no++;
        off += n + (nl != NULL);
        if (nl == NULL) {
            error_at(r, name, l.no,
                     "truncated line (no newline at the end "
                     "of the file: the rank may have died while writing)");
            if (file_rank >= 0 && (size_t)file_rank < r->nranks)
                r->ranks[file_rank].truncated = true;
            break;
        }
        if (n == 0 || (n == 1 && p[0] == '\r'))
            continue;
        feed_line(&l, file_rank, p, n);
    }
}

/* ---- files ---- */

/* Is `name` "rank-<digits>.jsonl"? Sets *rank. */
static bool
trace_name(const char *name, int *rank)
{
    const char *p = name + 5;
    long v = 0;

    if (strncmp(name, "rank-", 5) != 0 || *p < '0' || *p > '9')
        return false;
    while (*p >= '0' && *p <= '9' && v < TOOL_REPORT_MAX_RANKS)
        v = v * 10 + (*p++ - '0');
    if (strcmp(p, ".jsonl") != 0 || v >= TOOL_REPORT_MAX_RANKS)
        return false;
    *rank = (int)v;
    return true;
}

/* Reads one file (at most TOOL_REPORT_MAX_FILE bytes) and feeds it. */
static void
read_file(tool_report *r, const char *path, int rank)
{
    struct stat st;
    FILE *f;
    char *buf;
    size_t n = 0, cap = 1 << 16, got;

    /* Only regular files: a FIFO or a device must not hang the report. */
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
        error_at(r, path, 0, "not a regular file");
        return;
    }
    f = fopen(path, "rb");
    if (f == NULL) {
        error_at(r, path, 0, "cannot open: %s", strerror(errno));
        return;
    }
    buf = malloc(cap);
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap && cap < TOOL_REPORT_MAX_FILE) {
            char *b = ccol__grow(buf, &cap, n + 1, 1, 1);
            if (b == NULL)
                break;
            buf = b;
        } else if (n == cap) {
            error_at(r, path, 0,
                     "larger than %u MiB: only the start is "
                     "read",
                     TOOL_REPORT_MAX_FILE >> 20);
            break;
        }
    }
    if (ferror(f))
        error_at(r, path, 0, "read error: %s", strerror(errno));
    fclose(f);
    if (buf == NULL)
        error_at(r, path, 0, "out of memory");
    else
        tool_report_feed(r, path, rank, buf, n);
    free(buf);
}

static int
cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;

    return (x > y) - (x < y);
}

int
tool_report_read_dir(tool_report *r, const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int ranks[TOOL_REPORT_MAX_RANKS], rank;
    size_t n = 0;
    char path[4096];

    if (d == NULL) {
        error_at(r, dir, 0, "cannot read the trace directory: %s",
                 strerror(errno));
        return -1;
    }
    while ((de = readdir(d)) != NULL && n < TOOL_REPORT_MAX_RANKS)
        if (trace_name(de->d_name, &rank))
            ranks[n++] = rank;
    closedir(d);
    if (n == 0) {
        error_at(r, dir, 0,
                 "no trace files (rank-<r>.jsonl) in the "
                 "directory");
        return -1;
    }
    qsort(ranks, n, sizeof ranks[0], cmp_int);
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/rank-%d.jsonl", dir, ranks[i]);
        read_file(r, path, ranks[i]);
    }
    return 0;
}

static void
free_rank(tool_rep_rank *rk)
{
    for (size_t i = 0; i < rk->ncomp; i++) {
        free(rk->compiles[i].frame);
        free(rk->compiles[i].reason);
        free(rk->compiles[i].where);
        free(rk->compiles[i].user);
        tool_strs_free(&rk->compiles[i].dynamic);
        tool_strs_free(&rk->compiles[i].why);
        tool_strs_free(&rk->compiles[i].changes);
    }
    for (size_t i = 0; i < rk->nmarks; i++)
        free(rk->marks[i].label);
    for (size_t i = 0; i < rk->nagrees; i++) {
        free(rk->agrees[i].site);
        free(rk->agrees[i].frame);
        free(rk->agrees[i].error);
    }
    free(rk->agrees);
    for (size_t i = 0; i < rk->nonces; i++) {
        free(rk->onces[i].frame);
        free(rk->onces[i].error);
    }
    free(rk->onces);
    free(rk->compiles);
    free(rk->marks);
    free(rk->file);
    free(rk->last_error);
    free(rk->landed_what);
    free(rk->landed_at);
    free(rk->failed_coll);
    free(rk->waiting);
    free(rk->recompile_frame);
    free(rk->recompile_reason);
    tool_strs_free(&rk->seq);
}

void
tool_report_free(tool_report *r)
{
    for (size_t i = 0; i < r->nranks; i++)
        free_rank(&r->ranks[i]);
    free(r->ranks);
    free(r->common);
    tool_strs_free(&r->errors);
    tool_strs_free(&r->warnings);
    memset(r, 0, sizeof *r);
}
