/*
 * report.h - `ccol report`: reads the per-rank trace files of a job
 * (DIR/rank-<r>.jsonl, docs/trace-format.md), aggregates them per rank
 * (compiles, exchanges, guards, decisions, ccol.torch's agreements and
 * the compiles they belong to, the collective sequence), finds
 * where ranks diverge, and renders the result as text or as one
 * self-contained HTML file. Frames of torch, ccol and the standard
 * library are shown under the user frame that reached them, paths are
 * shortened to what differs, and an interrupt (Ctrl-C) is named by what
 * the rank was doing when it landed. Trace files are untrusted: a bad line is an
 * error naming file and line, and the rest is still reported.
 */
#ifndef CCOL_REPORT_H
#define CCOL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Ranks above this are refused (a corrupt rank number must not make the
 * report allocate gigabytes). */
#define TOOL_REPORT_MAX_RANKS 4096
/* Largest trace file read. */
#define TOOL_REPORT_MAX_FILE (512u * 1024 * 1024)
/* Errors kept per report (later ones are counted, not kept). */
#define TOOL_REPORT_MAX_ERRORS 200
/* Agreements kept per rank, as timeline marks are drawn per rank: later
 * ones are counted in the rank's totals but not listed. */
#define TOOL_REPORT_MAX_AGREES 4000

/* A growable list of malloc'd strings. */
typedef struct tool_strs {
    char **v;   /* the strings */
    size_t n;   /* their number */
    size_t cap; /* allocated */
} tool_strs;

/* What a mark on the timeline is. */
enum {
    TOOL_MARK_EXCHANGE = 0,
    TOOL_MARK_GUARD_HIT,
    TOOL_MARK_GUARD_MISS,
    TOOL_MARK_RESTART,
    TOOL_MARK_RECOMPILE,
    TOOL_MARK_GRAPH_BREAK,
    TOOL_MARK_EAGER,
    TOOL_MARK_ERROR,
    TOOL_MARK_COLLECTIVE,
    TOOL_MARK_NKINDS
};

/* An instant or short span on a rank's timeline. */
typedef struct tool_rep_mark {
    int kind;       /* TOOL_MARK_* */
    int64_t t_ns;   /* start, wall clock */
    int64_t dur_ns; /* 0 for an instant */
    char *label;    /* malloc'd tooltip text */
} tool_rep_mark;

/*
 * One compile-time agreement of ccol.torch on one rank (an `agree` event).
 * It belongs to the compile that was running on that rank when its line
 * was written (its end): the compile whose [begin_ns, end_ns] holds that
 * wall clock time (an open compile, end_ns 0, holds every later time), the
 * latest begun if several do. Agreements that no compile holds (Inductor's
 * backward graphs, compiled after Dynamo's compile ended; a job that only
 * agrees) are outside any compile. tool_report_attach() decides.
 */
typedef struct tool_rep_agree {
    char *site;     /* malloc'd site name ("spmd_check.hash") */
    char *frame;    /* malloc'd graph key ("graph 0/0 of f ... (compile 1)") */
    char *error;    /* malloc'd error message when it failed, else NULL */
    int64_t aseq;   /* the site's sequence number on this rank, from 1 */
    int64_t bytes;  /* this rank's payload */
    int64_t recv;   /* bytes received */
    int64_t dur_ns; /* time this rank spent in it, waiting included */
    int64_t t_ns;   /* wall clock of its line: its end */
    bool ok;        /* it succeeded */
    long comp;      /* its compile's position in compiles, -1 for none */
} tool_rep_agree;

/* What one rank did with one graph under ccol.torch's compile once (a
 * `once` event, docs/trace-format.md). */
enum {
    TOOL_ONCE_SENT = 0, /* the owner compiled it and sent its files */
    TOOL_ONCE_FAILED,   /* the owner sent why there are no files */
    TOOL_ONCE_LOADED,   /* loaded the owner's files */
    TOOL_ONCE_FALLBACK, /* the owner did not deliver: compiled it here */
    TOOL_ONCE_DIVERGENT, /* the ranks' keys differ: compiled its own */
    TOOL_ONCE_BYPASSED, /* torch's caches refuse it: every rank compiles */
    TOOL_ONCE_ALONE,    /* no other rank lacked it: compiled here alone */
    TOOL_ONCE_STORED,   /* loaded from the job store (docs/store.md) */
    TOOL_ONCE_KEPT,     /* its files were kept in the job store */
    TOOL_ONCE_NKINDS
};

typedef struct tool_rep_once {
    char *frame;    /* malloc'd "compile 1 of f (a.py:3)" */
    char *error;    /* malloc'd failure or reason, or NULL */
    int outcome;    /* TOOL_ONCE_* */
    int64_t owner;  /* the owner's rank, -1 when none was named */
    int64_t bytes;  /* bytes sent or received */
    int64_t dur_ns; /* time in the broadcast (and, loaded, the load) */
} tool_rep_once;

/* One compile of a frame on one rank. */
typedef struct tool_rep_compile {
    char *frame;        /* malloc'd frame name (code id) */
    uint64_t index;     /* per-frame compile index */
    char *reason;       /* malloc'd, may be NULL */
    char *where;        /* malloc'd "file:line" of the frame's code, or NULL */
    char *user;         /* malloc'd user frame that reached it (compile_begin's
                         * `user`), or NULL when the trace does not say */
    int64_t begin_ns;   /* wall clock of compile_begin */
    int64_t end_ns;     /* of compile_end, 0 while open */
    int state;          /* 0 open, 1 ok, 2 failed */
    tool_strs dynamic; /* sorted dynamic decisions ("L['x'].size(0)") */
    tool_strs why;     /* explanations with witnesses, in order */
    tool_strs changes; /* state changes "L['x']: before -> after" */
    size_t nagrees;    /* agreements that belong to it */
    int64_t agree_ns;  /* their total duration */
} tool_rep_compile;

/* Where an interrupt landed: what the rank was doing. */
enum {
    TOOL_LANDED_NONE = 0,   /* no interrupt */
    TOOL_LANDED_COMPILE,    /* in a compile, outside its collectives */
    TOOL_LANDED_COLLECTIVE, /* in a collective */
    TOOL_LANDED_USER,       /* in the user's code, outside any compile */
    TOOL_LANDED_UNKNOWN     /* the trace cannot tell */
};

/* Everything read about one rank. */
typedef struct tool_rep_rank {
    bool present;         /* a file or a line named this rank */
    int domain;           /* 1 + the lowest rank of its domain (the ranks
                           * of a sub-communicator that agree among
                           * themselves, from its "open" event), 0 when
                           * the whole job is one */
    char *file;           /* malloc'd file name, NULL if none */
    size_t nevents;       /* good lines */
    int64_t first_ns;     /* earliest wall clock, 0 if none */
    int64_t last_ns;      /* latest */
    bool closed;          /* saw the "close" event */
    bool truncated;       /* the file ended inside a line */
    uint64_t ncompiles;   /* compiles finished successfully */
    uint64_t nfailed;     /* compiles finished with ok=false */
    uint64_t nexchanges;  /* compile collectives (exchanges with peers) */
    uint64_t nhits;       /* guard hits */
    uint64_t nmisses;     /* guard misses */
    uint64_t nrestarts;   /* restarts */
    uint64_t nrecompiles; /* recompiles */
    uint64_t nbreaks;     /* graph breaks */
    uint64_t neager;      /* eager fallbacks */
    uint64_t nerrors;     /* error events */
    char *last_error;     /* malloc'd message of the last error event that
                           * is not an interrupt */
    uint64_t ninterrupts; /* error events of an interrupt (Ctrl-C) */
    int landed;           /* where the first interrupt landed: TOOL_LANDED_* */
    char *landed_what;    /* malloc'd what ran there ("compile 1 of f (a.py:3)",
                           * "the exchange for compile 1 of f"), or NULL */
    char *landed_at;      /* malloc'd the frame it landed in, or NULL */
    char *failed_coll;    /* malloc'd the collective that failed in the
                           * event just before, or NULL */
    char *waiting;        /* malloc'd the wait of the latest event when it
                           * is a "wait" (unfinished so far), or NULL */
    char last_event[72];  /* name of the latest event (by wall clock) */
    int64_t pid;          /* process id of the first line (0: none) */
    int64_t other_pid;    /* another process id seen in the file, or 0 */
    tool_rep_compile *compiles; /* in begin order */
    size_t ncomp, capcomp;
    tool_rep_mark *marks; /* timeline marks in file order */
    size_t nmarks, capmarks;
    tool_strs seq; /* collective sequence ("exchange f #1") */
    tool_rep_agree *agrees; /* agreements in file order, capped */
    size_t nagrees, capagrees;
    uint64_t agreements;   /* agree events, also those past the cap */
    uint64_t agree_failed; /* of which failed */
    int64_t agree_ns;      /* their total duration */
    tool_rep_once *onces;   /* compile once events in file order, capped */
    size_t nonces, caponces;
    char *recompile_frame;  /* malloc'd frame of the last recompile event */
    char *recompile_reason; /* malloc'd its reason, until a compile takes it */
} tool_rep_rank;

/* A whole report. Zeroed is empty. */
typedef struct tool_report {
    tool_rep_rank *ranks;  /* indexed by rank, nranks entries */
    size_t nranks;          /* highest rank seen + 1 */
    int size;               /* world size claimed by the lines (max) */
    size_t nfiles;          /* files read */
    size_t nlines;          /* good lines */
    int64_t t0, t1;         /* wall clock range of all events */
    tool_strs errors;      /* "file:line: what is wrong" */
    size_t nerrors_dropped; /* errors past the cap */
    tool_strs warnings;    /* divergences, after analyze */
    char *common;           /* malloc'd directory prefix of the user's paths,
                             * stripped when shown (after analyze), or NULL */
} tool_report;

/* ---- report_read.c ---- */

/* Appends a printf-style string to a list (ignores running out of
 * memory, which only shortens the report). */
void tool_strs_add(tool_strs *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool tool_strs_has(const tool_strs *l, const char *s);
void tool_strs_free(tool_strs *l);

/*
 * Parses the trace lines of one file (`len` bytes, not NUL-terminated)
 * named `name` in messages, expected to hold rank `file_rank` (-1: any)
 * and adds them to r. Bad lines become errors "name:line: what".
 */
void tool_report_feed(tool_report *r, const char *name, int file_rank,
                       const char *data, size_t len);

/*
 * Reads every rank-<r>.jsonl file of `dir` into r. Returns 0, or -1 when
 * the directory cannot be read or holds no trace file (a message is then
 * in r->errors).
 */
int tool_report_read_dir(tool_report *r, const char *dir);

/* Decides which compile each agreement of each rank belongs to (see
 * tool_rep_agree): sets their `comp` and the compiles' agreement counts
 * and times. Idempotent; tool_report_analyze() calls it. */
void tool_report_attach(tool_report *r);

/* Frees everything in r and zeroes it. */
void tool_report_free(tool_report *r);

/* a + b for durations >= 0, saturating instead of overflowing (the
 * durations are untrusted). */
static inline int64_t
tool_report_add_ns(int64_t a, int64_t b)
{
    return b > 0 && a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* ---- report_analyze.c ---- */

/* Attaches the agreements to their compiles (tool_report_attach) and
 * fills r->warnings with every divergence between ranks: compile counts,
 * decisions for the same frame and compile, collective sequences, ranks
 * that stopped early or are missing, errors. */
void tool_report_analyze(tool_report *r);

/* The number of ranks to show: the world size the lines claim, or the
 * highest rank seen + 1 if that is larger. */
size_t tool_report_world(const tool_report *r);

/* The first compile of `frame` with `index` on rank `rk`, or NULL. */
const tool_rep_compile *tool_report_find(const tool_rep_rank *rk,
                                           const char *frame, uint64_t index);

/* Joins a list as "a, b, c" into a malloc'd string ("static" if empty
 * and `empty` given). */
char *tool_report_join(const tool_strs *l, const char *empty);

/* One agreement in a row of the frames table: the same site and
 * sequence number on the row's ranks, its cost the largest of theirs. */
typedef struct tool_rep_ragree {
    const char *site;  /* borrowed site name */
    const char *frame; /* borrowed graph key of the first rank */
    const char *error; /* borrowed error of the first rank it failed on */
    int64_t aseq;      /* sequence number of the site */
    int64_t bytes;     /* largest payload of those ranks */
    int64_t dur_ns;    /* longest duration of those ranks */
    size_t n;          /* ranks of the row that made it */
    size_t nfailed;    /* ranks on which it failed */
    int last;          /* the rank counted last (counts each rank once) */
} tool_rep_ragree;

/* Why some ranks of a row compiled: one reason and the ranks that gave
 * it. */
typedef struct tool_rep_reason {
    char *text; /* malloc'd reason */
    int *ranks; /* malloc'd ranks, ascending */
    size_t n;   /* their number */
    size_t cap; /* allocated */
} tool_rep_reason;

/* One row of the frames table: the ranks that made the same decisions
 * for one frame and compile index, with their witnesses and the
 * agreements made during that compile. */
typedef struct tool_rep_row {
    const char *frame;  /* borrowed from the report */
    const char *where;  /* borrowed "file:line" of its code, or NULL */
    uint64_t index;     /* compile index */
    int state;          /* 0 open, 1 ok, 2 failed */
    char *decisions;    /* malloc'd "L['x'].size(0), ..." or "all static" */
    tool_strs why;      /* distinct explanations of those ranks, in order */
    tool_strs changes;  /* distinct state changes of those ranks */
    tool_rep_reason *reasons; /* distinct reasons those ranks compiled,
                               * each with its ranks (at most 16) */
    size_t nreasons;    /* their number */
    size_t capreasons;  /* allocated */
    const char *user;   /* borrowed user frame that reached it, or NULL */
    bool internal;      /* the frame is torch's, ccol's or the standard
                         * library's, not the user's */
    int *ranks;         /* malloc'd ranks, ascending */
    size_t n;           /* their number */
    size_t cap;         /* ranks allocated */
    bool diverged;      /* another row has the same frame and index */
    tool_rep_ragree *agrees; /* malloc'd agreements, in order */
    size_t nagrees;     /* their number */
    size_t capagrees;   /* allocated */
    size_t agrees_more; /* agreements past the cap (64), not listed */
    int64_t agree_ns;   /* the largest total of one rank in this compile */
} tool_rep_row;

/* Builds the rows in order of first appearance. Returns their number
 * (*out malloc'd, free with tool_report_rows_free). */
size_t tool_report_rows(const tool_report *r, tool_rep_row **out);
void tool_report_rows_free(tool_rep_row *rows, size_t n);

/* The agreements of one site made outside any compile, over all ranks. */
typedef struct tool_rep_site {
    const char *site;  /* borrowed site name */
    size_t most;       /* the most agreements one rank made there */
    size_t least;      /* the fewest, over the ranks that made any */
    int *ranks;        /* malloc'd ranks that made one, ascending */
    size_t n;          /* their number */
    size_t cap;        /* ranks allocated */
    int64_t total_ns;  /* the largest total duration of one rank */
    int64_t median_ns; /* median duration over every rank's agreements */
    size_t nfailed;    /* failed agreements, all ranks */
    tool_strs graphs;  /* distinct graph keys (at most 8) */
    tool_strs errors;  /* the first failures (at most 4), with rank */
    int64_t *durs;     /* while building: every duration */
    size_t ndurs;      /* their number */
    size_t capdurs;    /* allocated */
    size_t cur_n;      /* while building: the current rank's count */
    int64_t cur_ns;    /* and its total */
} tool_rep_site;

/* Gathers the agreements outside any compile by site, in order of first
 * appearance (at most 64 sites; *more counts the agreements of the
 * others). Returns their number (*out malloc'd, free with
 * tool_report_sites_free). */
size_t tool_report_outside(const tool_report *r, tool_rep_site **out,
                           size_t *more);
void tool_report_sites_free(tool_rep_site *s, size_t n);

/* All agreements of all ranks (the summary shows agreement columns only
 * when there are any). */
uint64_t tool_report_agreements(const tool_report *r);

/* Agreements not listed because a rank made more than
 * TOOL_REPORT_MAX_AGREES, over all ranks. */
uint64_t tool_report_agrees_unlisted(const tool_report *r);

/* A word for how rank i's trace ended: "ok" (closed), "running" (no close
 * event; none of the ranks wrote one, or the job is still going),
 * "stopped" (others closed, this one did not), "waiting" (no close, and
 * the last event is a wait's progress line), "died" (ends inside a
 * line), "failed" (error events), "missing" (no events). */
const char *tool_report_status(const tool_report *r, size_t i);
/* The word for a compile's state (0 open, 1 ok, 2 failed). */
const char *tool_report_state(int state);
/* Writes "N ranks traced (world size W), F files, E events" to out (at
 * most len bytes) and returns the seconds the traces span. */
double tool_report_counts(const tool_report *r, char *out, size_t len);

/* The order to show rows in: user frames in order of appearance; the
 * internal frames reached from one user frame together, where the first
 * of them appears. Fills order[0..n). */
void tool_report_order(const tool_rep_row *rows, size_t n, size_t *order);

/* Are two rows reached from the same user frame (or both from one the
 * trace does not name)? */
bool tool_report_same_user(const tool_rep_row *a, const tool_rep_row *b);

/* Does a row's reason need its ranks named: the row's ranks gave
 * different reasons (or some gave none)? */
bool tool_report_why_ranks(const tool_rep_row *row);

/* The words for where rank i's first interrupt landed ("during compile 1
 * of f (a.py:3), outside any collective (in Inductor at g (b.py:9))"),
 * malloc'd; NULL when it was not interrupted. */
char *tool_report_landed(const tool_rep_rank *rk);

/* ---- report_paths.c ---- */

/* Is the file at `path` (len bytes) torch's, ccol's or the standard
 * library's by the path alone (docs/trace-format.md)? */
bool tool_report_internal_path(const char *path, size_t len);

/* Is the frame "function (file:line)" of compile c the user's? By its
 * `user` field when the trace has one, else by the path. */
bool tool_report_internal(const tool_rep_compile *c);

/* Finds the directory prefix of the user's paths the report shows
 * (r->common). tool_report_analyze() calls it. */
void tool_report_common(tool_report *r);

/* Called for each piece of a string: plain text (full NULL) or a path
 * shortened to s[0..n), whose full text is full[0..fulln). */
typedef void (*tool_piece_fn)(void *ctx, const char *s, size_t n,
                              const char *full, size_t fulln);

/* Cuts s (at most max bytes, then "...") into plain pieces and paths,
 * each path shortened (tool_report_internal_path: from its package or
 * the standard library's directory; the user's: without r->common). */
void tool_report_pieces(const tool_report *r, const char *s, size_t max,
                        tool_piece_fn fn, void *ctx);

/* Writes "rank 3", "ranks 0, 2" or "ranks 0-3, 7" for ranks[0..n) into
 * out (a run of two ranks is written as two ranks). */
void tool_report_ranks(char *out, size_t outlen, const int *ranks, size_t n);

/* ---- report_once.c ---- */

/* The outcome names of `once` events, indexed by TOOL_ONCE_*. */
extern const char *const tool_once_outcomes[TOOL_ONCE_NKINDS];

/* One graph under compile once, over all ranks. */
typedef struct tool_rep_oncerow {
    const char *frame;  /* borrowed graph name */
    int64_t owner;      /* the owner named by the first event, or -1 */
    int64_t bytes;      /* the largest artifact sent or received */
    int64_t owner_ns;   /* the owner's time in the broadcast */
    int *ranks[TOOL_ONCE_NKINDS]; /* malloc'd ranks per outcome */
    size_t n[TOOL_ONCE_NKINDS];   /* their number */
    size_t cap[TOOL_ONCE_NKINDS]; /* allocated */
    const char *error;  /* borrowed first failure or reason, or NULL */
} tool_rep_oncerow;

/* Gathers the once events by graph, in order of first appearance (at most
 * 256 graphs; *more counts the others). Returns their number (*out
 * malloc'd, free with tool_report_oncerows_free). */
size_t tool_report_oncerows(const tool_report *r, tool_rep_oncerow **out,
                            size_t *more);
void tool_report_oncerows_free(tool_rep_oncerow *rows, size_t n);

/* Adds a warning for every graph that some rank compiled itself because
 * the owner did not deliver, or whose keys differed between ranks. */
void tool_report_check_once(tool_report *r);

/* One line describing a row: "rank 0 compiled it and sent it (2028343 B,
 * 0.012 s to send); loaded on rank 1" (malloc'd, NULL when out of
 * memory). */
char *tool_report_once_says(const tool_rep_oncerow *row);

/* ---- report_text.c, report_html.c ---- */

/* Prints the summary, the frames and the warnings as text. */
void tool_report_text(const tool_report *r, FILE *f);

/* Writes one self-contained HTML page (inline CSS and SVG, no scripts,
 * nothing fetched). Returns 0, or -1 on a write error. */
int tool_report_html(const tool_report *r, const char *title, FILE *f);

/* Where the part after the last "/site-packages/" or "/dist-packages/" of
 * p[0..len) begins (a package's files from their package directory on),
 * or NULL (report_paths.c; `ccol store show` shortens paths with it too). */
const char *tool_after_packages(const char *p, size_t len);

#endif /* CCOL_REPORT_H */
