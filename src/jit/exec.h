/*
 * exec.h - the statement walker of .tl, shared by the eager interpreter
 * (interp.c) and the tracer (trace.c).
 *
 * One tree walk over the resolved AST owns the language's control flow,
 * scoping and error discipline: every evaluation returns a new reference
 * or NULL after recording the first error on the Interp, the innermost
 * node that saw a failure stamps its position, work is charged to the
 * step budget and C recursion is bounded. What a value operation does is
 * the caller's: a small table (WalkOps) applies operators, builtins and
 * calls symbolically (the tracer, which also inlines calls and ends the
 * walk at a graph break); an operation the table leaves NULL is the eager
 * interpreter's concrete one (the kernels, an ordinary call), so the
 * interpreter's table is empty.
 */
#ifndef CCOL_JIT_EXEC_H
#define CCOL_JIT_EXEC_H

#include "jit.h"

#define WALK_MAXNEST 16          /* if blocks whose position is recorded */

/* The outcome of a statement or block. */
typedef enum Exec {
    X_NEXT,     /* fall through to the next statement */
    X_RETURN,   /* a return statement ran */
    X_BREAK,    /* the walk stopped at a graph break (tracer) */
    X_ERROR     /* failed; the error is on the Interp */
} Exec;

typedef struct Walk Walk;

/* The value operations of a walk; NULL: the concrete operation. Each
 * returns NULL / false / -1 with the error recorded on w->in. */
typedef struct WalkOps {
    /* A call of user function fi with borrowed arguments (concrete:
     * jit__walk_call). */
    Value *(*call)(Walk *w, int fi, Value *const *args, int n);
    /* A call of builtin bi (a method's receiver is args[0]). */
    Value *(*builtin)(Walk *w, int bi, Value **args, int n);
    Value *(*binop)(Walk *w, BinOp op, Value *a, Value *b);
    Value *(*neg)(Walk *w, Value *a);
    /* 1 or 0, or -1 on error. */
    int (*truth)(Walk *w, Value *v);
    /* The code reads v (indexes it, iterates it, takes its shape): a
     * lazy input is realized here (concrete: every value is real). */
    bool (*use)(Walk *w, Value *v);
    /* The concrete value of an int or bool v the walk needs (a list
     * index, range() bounds; `what` names it in errors). */
    bool (*to_int)(Walk *w, Value *v, const char *what, int64_t *out);
    /* Consulted before each statement (NULL: never): true when it ran
     * the statement itself (a graph break), with the outcome in *x.
     * `level` is the statement's if-block depth, or WALK_MAXNEST when
     * the position is not recorded (a loop body, an inlined call, deeper
     * blocks). */
    bool (*stmt)(Walk *w, Value **slots, const Node *s, int level, Exec *x);
} WalkOps;

/* The state of one walk: evaluation state, operations and the position
 * of the statement being run. */
struct Walk {
    Interp *in;                 /* budget, depth, the first error */
    const WalkOps *ops;
    void *ud;                   /* the operations' own state */
    const Node **at;            /* receives the node being evaluated, for
                                   operations that record positions (may
                                   be NULL) */
    const Node *call;           /* the outermost call of a user function
                                   being run, or NULL */
    /* The recorded statement being run (the innermost outside loops and
     * calls): stmt[k] is its index, or that of its enclosing if, in each
     * of `depth` nested blocks (block 0: the function body). */
    int depth;
    int stmt[WALK_MAXNEST];
    int branch[WALK_MAXNEST];   /* 1: then, 0: else, of stmt[k]'s if */
};

/* Evaluates expression n; a new reference, or NULL with the error. */
Value *jit__walk_eval(Walk *w, Value **slots, const Node *n);
/* Evaluates the expressions of l into vals (new references); false on
 * error, with every value already evaluated released. */
bool jit__walk_args(Walk *w, Value **slots, const NodeList *l, Value **vals);
/* Calls user function fi: a frame of fresh slots holding the arguments,
 * its statements' positions not recorded. NULL on error or at a graph
 * break. */
Value *jit__walk_call(Walk *w, int fi, Value *const *args, int n);
/* The statement at a recorded position (as jit__walk_from's). */
const Node *jit__walk_stmt(const NodeList *body, int depth, const int *stmt,
                           const int *branch);
/* The call that is the whole of statement s (`f(...)`, `x = f(...)`,
 * `return f(...)`), or NULL. */
const Node *jit__walk_stmt_call(const Node *s);
/*
 * Runs a function body from a position: right after statement
 * stmt[depth - 1] of the innermost of `depth` nested if blocks (block
 * k + 1 is branch[k] of the if statement stmt[k] of block k), then the
 * rest of each enclosing block, outwards. depth 0: the whole body.
 */
Exec jit__walk_from(Walk *w, Value **slots, const NodeList *body, int depth,
                    const int *stmt, const int *branch, Value **ret);

/* The eager interpreter (interp.c): calls function `fi` with borrowed
 * args, every operation concrete; NULL on error (see in). */
Value *jit__jit_call_func(Interp *in, int fi, Value *const *args, int n);

#endif /* CCOL_JIT_EXEC_H */
