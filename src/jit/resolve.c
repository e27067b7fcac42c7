/*
 * resolve.c - binds names after parsing, before anything runs.
 *
 * Every variable becomes a slot of its function (parameters, assignment
 * targets and loop variables are locals, as in Python); every call is bound
 * to a user function or a builtin and its argument count checked. Functions
 * and variables live in separate namespaces: `rank = rank()` is fine.
 */
#include "jit.h"

#include <string.h>

#define MAX_LOCALS 4096
#define VARIADIC 64

static void resolve_expr(Load *ld, Func *f, Node *n);
static void resolve_block(Load *ld, Func *f, NodeList *b);

/* The slot of local `name` in f, or -1. */
static int
find_local(const Func *f, const char *name)
{
    for (int i = 0; i < f->nlocals; i++) {
        if (strcmp(f->locals[i], name) == 0)
            return i;
    }
    return -1;
}

/* A linear scan: programs have few functions and calls are bound once. */
int
jit__jit_find_func(Func *const *funcs, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(funcs[i]->name, name) == 0)
            return i;
    }
    return -1;
}

/* The function `name` of the program being loaded, or -1. */
static int
find_func(const Load *ld, const char *name)
{
    return jit__jit_find_func(ld->funcs, ld->nfuncs, name);
}

/* Adds a local (if new) and returns its slot. */
static int
add_local(Load *ld, Func *f, const Node *at, const char *name)
{
    int slot = find_local(f, name);
    if (slot >= 0)
        return slot;
    if (f->nlocals == MAX_LOCALS)
        jit__jit_syntax_error(ld, at->line, at->col,
                               "too many local variables (limit %d)",
                               MAX_LOCALS);
    /* The locals start with room for 64 (parse.c) and double in the arena
     * at each power of two. */
    if (f->nlocals >= 64 && (f->nlocals & (f->nlocals - 1)) == 0) {
        const char **l = jit__jit_alloc(ld, 2 * (size_t)f->nlocals *
                                                 sizeof(*l));
        memcpy(l, f->locals, (size_t)f->nlocals * sizeof(*l));
        f->locals = l;
    }
    f->locals[f->nlocals] = name;
    return f->nlocals++;
}

/* Collects assignment and loop targets of a block as locals. */
static void
collect_locals(Load *ld, Func *f, const NodeList *b)
{
    for (int i = 0; i < b->n; i++) {
        Node *s = b->items[i];
        if (s->kind == N_ASSIGN || s->kind == N_FOR)
            s->slot = add_local(ld, f, s, s->name);
        collect_locals(ld, f, &s->body);
        collect_locals(ld, f, &s->orelse);
    }
}

/* Fails the load when a call's argument count is outside min..max, with
 * Python's wording; max >= VARIADIC means no upper bound. */
static void
check_arity(Load *ld, const Node *n, int min, int max, int got)
{
    if (got >= min && got <= max)
        return;
    if (max >= VARIADIC)
        jit__jit_syntax_error(ld, n->line, n->col,
                               "%s() takes at least %d argument%s, got %d",
                               n->name, min, min == 1 ? "" : "s", got);
    if (min == max)
        jit__jit_syntax_error(ld, n->line, n->col,
                               "%s() takes %d argument%s, got %d", n->name,
                               min, min == 1 ? "" : "s", got);
    jit__jit_syntax_error(ld, n->line, n->col,
                           "%s() takes %d to %d arguments, got %d", n->name,
                           min, max, got);
}

/* A name read as a value must be a local; a function's name used as a value
 * gets its own message, since functions are not values here. */
static void
resolve_name(Load *ld, Func *f, Node *n)
{
    n->slot = find_local(f, n->name);
    if (n->slot >= 0)
        return;
    if (find_func(ld, n->name) >= 0 ||
        jit__jit_builtin_find(n->name, B_FUNC) >= 0)
        jit__jit_syntax_error(ld, n->line, n->col,
                               "function '%s' cannot be used as a value",
                               n->name);
    jit__jit_syntax_error(ld, n->line, n->col, "unknown name '%s'",
                           n->name);
}

/* The type names isinstance accepts, bare (`int`) or as strings ('int'),
 * as builtins.c's b_isinstance spells them. */
static bool
is_type_name(const char *name)
{
    static const char *const names[] = { "tensor", "int", "float", "bool",
                                         "list", "str" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(names[i], name) == 0)
            return true;
    }
    return false;
}

/* The type argument of isinstance, as Python takes it: a type, or a tuple
 * of them (nested tuples too). A bare type name that is not a local
 * variable becomes its string ('int'), a tuple becomes a list of them, so
 * the interpreter and the tracer see only constants. Anything else is an
 * ordinary expression whose value must be a type name string (or a list of
 * them) at run time. */
static void
resolve_type_arg(Load *ld, Func *f, Node *n)
{
    if (n->kind == N_NAME && find_local(f, n->name) < 0) {
        if (!is_type_name(n->name))
            jit__jit_syntax_error(ld, n->line, n->col,
                                   "isinstance(): '%s' is not a type "
                                   "(expected tensor, int, float, bool, "
                                   "list, str or a tuple of them)",
                                   n->name);
        n->kind = N_STR;
        return;
    }
    if (n->kind != N_TUPLE) {
        resolve_expr(ld, f, n);
        return;
    }
    n->kind = N_LIST;
    for (int i = 0; i < n->args.n; i++)
        resolve_type_arg(ld, f, n->args.items[i]);
}

/* A user function first (none is named like a builtin: check_func
 * forbids it), then a builtin; the callee is stored as fi >= 0, or as
 * -1 - the builtin's index. */
static void
resolve_call(Load *ld, Func *f, Node *n)
{
    int fi = find_func(ld, n->name);
    if (fi >= 0) {
        int np = ld->funcs[fi]->nparams;
        check_arity(ld, n, np, np, n->args.n);
        n->callee = fi;
        return;
    }
    if (strcmp(n->name, "range") == 0)
        jit__jit_syntax_error(ld, n->line, n->col,
                               "range() can only be used in a 'for' loop");
    int bi = jit__jit_builtin_find(n->name, B_FUNC);
    if (bi < 0 && find_local(f, n->name) >= 0)
        jit__jit_syntax_error(ld, n->line, n->col,
                               "'%s' is a variable, not a function", n->name);
    if (bi < 0)
        jit__jit_syntax_error(ld, n->line, n->col, "unknown function '%s'",
                               n->name);
    const Builtin *b = jit__jit_builtin(bi);
    check_arity(ld, n, b->min_args, b->max_args, n->args.n);
    n->callee = -1 - bi;
}

/* x.m(args) is builtin m with x as its first argument, so the arity counts
 * without the receiver. */
static void
resolve_method(Load *ld, Node *n)
{
    int bi = jit__jit_builtin_find(n->name, B_METHOD);
    if (bi < 0)
        jit__jit_syntax_error(ld, n->line, n->col, "unknown method '%s'",
                               n->name);
    const Builtin *b = jit__jit_builtin(bi);
    check_arity(ld, n, b->min_args - 1, b->max_args - 1, n->args.n);
    n->callee = -1 - bi;
}

/* x.shape is x.size(); any other attribute is an error. */
static void
resolve_attr(Load *ld, Node *n)
{
    if (strcmp(n->name, "shape") == 0) {
        n->callee = -1 - jit__jit_builtin_find("size", B_METHOD);
        return;
    }
    if (jit__jit_builtin_find(n->name, B_METHOD) >= 0)
        jit__jit_syntax_error(ld, n->line, n->col,
                               "method '%s' must be called: %s()", n->name,
                               n->name);
    jit__jit_syntax_error(ld, n->line, n->col, "unknown attribute '%s'",
                           n->name);
}

/* Resolves each expression of a list. */
static void
resolve_list(Load *ld, Func *f, NodeList *l)
{
    for (int i = 0; i < l->n; i++)
        resolve_expr(ld, f, l->items[i]);
}

/* Resolves an expression tree; isinstance's second argument is a type, not
 * a value, and tuples are allowed only there. */
static void
resolve_expr(Load *ld, Func *f, Node *n)
{
    if (n == NULL)
        return;
    switch (n->kind) {
    case N_NAME:
        resolve_name(ld, f, n);
        return;
    case N_CALL:
        resolve_call(ld, f, n);
        if (n->callee == -1 - jit__jit_builtin_find("isinstance", B_FUNC)) {
            resolve_expr(ld, f, n->args.items[0]);
            resolve_type_arg(ld, f, n->args.items[1]);
            return;
        }
        break;
    case N_TUPLE:
        jit__jit_syntax_error(ld, n->line, n->col,
                               "tuples are not supported (only as the type "
                               "argument of isinstance)");
    case N_METHOD:
        resolve_method(ld, n);
        break;
    case N_ATTR:
        resolve_attr(ld, n);
        break;
    default:
        break;
    }
    resolve_expr(ld, f, n->lhs);
    resolve_expr(ld, f, n->rhs);
    resolve_list(ld, f, &n->args);
}

/* for NAME in range(...) is the counted loop; any other iterable must be a
 * list at run time. */
static void
resolve_for(Load *ld, Func *f, Node *s)
{
    Node *it = s->rhs;
    /* range() is the loop's own form unless the program defines a function
     * range. */
    if (it->kind == N_CALL && strcmp(it->name, "range") == 0 &&
        find_func(ld, "range") < 0) {
        check_arity(ld, it, 1, 3, it->args.n);
        s->is_range = true;
        resolve_list(ld, f, &it->args);
    } else {
        resolve_expr(ld, f, it);
    }
    resolve_block(ld, f, &s->body);
}

/* Resolves the statements of a block and the blocks they contain. */
static void
resolve_block(Load *ld, Func *f, NodeList *b)
{
    for (int i = 0; i < b->n; i++) {
        Node *s = b->items[i];
        if (s->kind == N_FOR) {
            resolve_for(ld, f, s);
            continue;
        }
        resolve_expr(ld, f, s->lhs);
        resolve_expr(ld, f, s->rhs);
        resolve_block(ld, f, &s->body);
        resolve_block(ld, f, &s->orelse);
    }
}

/* Rejects duplicate functions, functions named like builtins and
 * duplicate parameters. */
static void
check_func(Load *ld, int fi)
{
    Func *f = ld->funcs[fi];
    int prev = find_func(ld, f->name);
    if (prev != fi)
        jit__jit_syntax_error(ld, f->line, f->col,
                               "function '%s' is already defined at line %d",
                               f->name, ld->funcs[prev]->line);
    if (jit__jit_builtin_find(f->name, B_FUNC) >= 0 ||
        strcmp(f->name, "range") == 0)
        jit__jit_syntax_error(ld, f->line, f->col,
                               "'%s' is a builtin and cannot be redefined",
                               f->name);
    for (int i = 1; i < f->nparams; i++) {
        if (find_local(f, f->locals[i]) != i)
            jit__jit_syntax_error(ld, f->line, f->col,
                                   "duplicate parameter '%s' in '%s'",
                                   f->locals[i], f->name);
    }
}

/* Per function: its checks, then its locals (all assignments, wherever they
 * are, as in Python), then the names of its body. */
void
jit__jit_resolve(Load *ld)
{
    for (int i = 0; i < ld->nfuncs; i++) {
        Func *f = ld->funcs[i];
        check_func(ld, i);
        collect_locals(ld, f, &f->body);
        resolve_block(ld, f, &f->body);
    }
}
