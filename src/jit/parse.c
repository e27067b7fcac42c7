/*
 * parse.c - recursive-descent parser for .tl: tokens to functions of AST.
 *
 * Each parse function is named after the grammar rule in the comment above
 * it. Recursion is bounded by CCOL_JIT_MAX_NESTING and expression trees by
 * MAX_HEIGHT, so neither the parser nor later tree walks can exhaust the C
 * stack. Errors longjmp to the loader with a caret diagnostic.
 */
#include "jit.h"

#include <stdio.h>
#include <string.h>

#define MAX_HEIGHT 1000
#define MAX_ARGS 64

static Node *parse_expr(Load *ld);
static NodeList parse_block(Load *ld);

/* The current token, not consumed. */
static Token *
peek(Load *ld)
{
    return &ld->toks[ld->pos];
}

/* Consumes the current token and returns it; EOF is never passed, so
 * lookahead past the end stays on it. */
static Token *
next(Load *ld)
{
    Token *t = &ld->toks[ld->pos];
    if (t->kind != T_EOF)
        ld->pos++;
    return t;
}

/* Consumes the current token when it is k. */
static bool
accept(Load *ld, TokKind k)
{
    if (peek(ld)->kind != k)
        return false;
    next(ld);
    return true;
}

/* Describes a token for "found ..." in messages. */
static const char *
describe(const Token *t, char *buf, size_t n)
{
    if (t->kind == T_NAME)
        snprintf(buf, n, "name '%s'", t->text);
    else
        snprintf(buf, n, "%s", jit__jit_tokname(t->kind));
    return buf;
}

/* Consumes a token of kind k, or fails the load with "expected k<context>,
 * found ..." at the token found. */
static Token *
expect(Load *ld, TokKind k, const char *context)
{
    Token *t = peek(ld);
    char buf[300];
    if (t->kind != k)
        jit__jit_syntax_error(ld, t->line, t->col, "expected %s%s, found %s",
                               jit__jit_tokname(k), context,
                               describe(t, buf, sizeof buf));
    return next(ld);
}

/* Counts one more level of statement or expression nesting; the limit keeps
 * the recursive descent (and every recursion over the AST later) within the
 * C stack. */
static void
enter(Load *ld, const Token *t)
{
    if (++ld->depth > CCOL_JIT_MAX_NESTING)
        jit__jit_syntax_error(ld, t->line, t->col,
                               "nesting too deep (limit %d)",
                               CCOL_JIT_MAX_NESTING);
}

/* A node at token t's position; op and slot -1 until set, height 1 (a
 * leaf). */
static Node *
new_node(Load *ld, NodeKind kind, const Token *t)
{
    Node *n = jit__jit_alloc(ld, sizeof(*n));
    n->kind = kind;
    n->line = t->line;
    n->col = t->col;
    n->op = -1;
    n->slot = -1;
    n->height = 1;
    return n;
}

/* Accounts child `c` in the height of `n`; too tall is an error. */
static void
grow(Load *ld, Node *n, const Node *c)
{
    if (c != NULL && c->height + 1 > n->height)
        n->height = c->height + 1;
    if (n->height > MAX_HEIGHT)
        jit__jit_syntax_error(ld, n->line, n->col,
                               "expression too complex (depth limit %d)",
                               MAX_HEIGHT);
}

/* Appends to a list whose capacity is the next power of two. */
static void
list_push(Load *ld, NodeList *l, Node *n)
{
    if ((l->n & (l->n - 1)) == 0) {
        size_t cap = l->n ? (size_t)l->n * 2 : 1;
        Node **items = jit__jit_alloc(ld, cap * sizeof(*items));
        if (l->n)
            memcpy(items, l->items, (size_t)l->n * sizeof(*items));
        l->items = items;
    }
    l->items[l->n++] = n;
}

/* args = (expr ("," expr)* ","?)? ")"   (after the opening bracket) */
static void
parse_args(Load *ld, Node *call, TokKind close)
{
    while (!accept(ld, close)) {
        Node *a = parse_expr(ld);
        if (peek(ld)->kind == T_ASSIGN)
            jit__jit_syntax_error(ld, peek(ld)->line, peek(ld)->col,
                                   "keyword arguments are not supported");
        if (call->args.n == MAX_ARGS && close == T_RPAREN)
            jit__jit_syntax_error(ld, a->line, a->col,
                                   "too many arguments (limit %d)", MAX_ARGS);
        list_push(ld, &call->args, a);
        grow(ld, call, a);
        if (!accept(ld, T_COMMA)) {
            expect(ld, close, " or ','");
            break;
        }
    }
}

/* primary = INT | FLOAT | STR | "True" | "False" | "None" | NAME
 *         | "(" expr ")" | "(" ")" | "(" expr "," args | "[" args "]" */
static Node *
parse_primary(Load *ld)
{
    Token *t = next(ld);
    Node *n;
    char buf[300];
    switch (t->kind) {
    case T_INT:
        n = new_node(ld, N_INT, t);
        n->ival = t->ival;
        return n;
    case T_FLOAT:
        n = new_node(ld, N_FLOAT, t);
        n->fval = t->fval;
        return n;
    case T_STR:
        n = new_node(ld, N_STR, t);
        n->name = t->text;
        return n;
    case T_TRUE:
    case T_FALSE:
        n = new_node(ld, N_BOOL, t);
        n->ival = t->kind == T_TRUE;
        return n;
    case T_NONE:
        return new_node(ld, N_NONE, t);
    case T_NAME:
        n = new_node(ld, N_NAME, t);
        n->name = t->text;
        return n;
    case T_LPAREN:
        if (peek(ld)->kind == T_RPAREN) { /* () */
            next(ld);
            return new_node(ld, N_TUPLE, t);
        }
        n = parse_expr(ld);
        if (peek(ld)->kind != T_COMMA) {
            expect(ld, T_RPAREN, " to close '('");
            return n;
        }
        next(ld); /* (a, ...) is a tuple: the rest as arguments */
        Node *tup = new_node(ld, N_TUPLE, t);
        list_push(ld, &tup->args, n);
        grow(ld, tup, n);
        parse_args(ld, tup, T_RPAREN);
        return tup;
    case T_LBRACK:
        n = new_node(ld, N_LIST, t);
        parse_args(ld, n, T_RBRACK);
        return n;
    default:
        jit__jit_syntax_error(ld, t->line, t->col,
                               "expected an expression, found %s",
                               describe(t, buf, sizeof buf));
    }
}

/* A call on `fn`: name(args) or receiver.name(args). */
static Node *
make_call(Load *ld, Node *fn, const Token *paren)
{
    Node *n;
    if (fn->kind == N_NAME) {
        n = new_node(ld, N_CALL, &(Token){ .line = fn->line, .col = fn->col });
    } else if (fn->kind == N_ATTR) {
        n = new_node(ld, N_METHOD, &(Token){ .line = fn->line,
                                             .col = fn->col });
        n->lhs = fn->lhs;
        grow(ld, n, fn->lhs);
    } else {
        jit__jit_syntax_error(ld, paren->line, paren->col,
                               "only functions and methods can be called");
    }
    n->name = fn->name;
    parse_args(ld, n, T_RPAREN);
    return n;
}

/* postfix = primary ("(" args | "[" expr "]" | "." NAME)* */
static Node *
parse_postfix(Load *ld)
{
    Node *n = parse_primary(ld);
    for (;;) {
        Token *t = peek(ld);
        Node *p;
        if (accept(ld, T_LPAREN)) {
            p = make_call(ld, n, t);
        } else if (accept(ld, T_LBRACK)) {
            p = new_node(ld, N_INDEX, t);
            p->lhs = n;
            p->rhs = parse_expr(ld);
            grow(ld, p, p->rhs);
            expect(ld, T_RBRACK, " to close '['");
        } else if (accept(ld, T_DOT)) {
            Token *name = expect(ld, T_NAME, " after '.'");
            p = new_node(ld, N_ATTR, name);
            p->lhs = n;
            p->name = name->text;
        } else {
            return n;
        }
        grow(ld, p, n);
        n = p;
    }
}

/* unary = ("-" | "+") unary | postfix */
static Node *
parse_unary(Load *ld)
{
    Token *t = peek(ld);
    if (t->kind != T_MINUS && t->kind != T_PLUS)
        return parse_postfix(ld);
    next(ld);
    enter(ld, t);
    Node *n = new_node(ld, t->kind == T_MINUS ? N_NEG : N_POS, t);
    n->lhs = parse_unary(ld);
    grow(ld, n, n->lhs);
    ld->depth--;
    return n;
}

/* The BinOp of a token in `ops` (a T_-terminated list), or -1. */
static int
binop_of(TokKind k)
{
    switch (k) {
    case T_PLUS:
        return OP_ADD;
    case T_MINUS:
        return OP_SUB;
    case T_STAR:
        return OP_MUL;
    case T_SLASH:
        return OP_DIV;
    case T_DSLASH:
        return OP_FLOORDIV;
    case T_PERCENT:
        return OP_MOD;
    case T_AT:
        return OP_MATMUL;
    case T_EQ:
        return OP_EQ;
    case T_NE:
        return OP_NE;
    case T_LT:
        return OP_LT;
    case T_LE:
        return OP_LE;
    case T_GT:
        return OP_GT;
    case T_GE:
        return OP_GE;
    default:
        return -1;
    }
}

/* lhs op rhs at operator token t; its height bounds the AST's depth. */
static Node *
make_binary(Load *ld, int op, const Token *t, Node *lhs, Node *rhs)
{
    Node *n = new_node(ld, N_BINARY, t);
    n->op = op;
    n->lhs = lhs;
    n->rhs = rhs;
    grow(ld, n, lhs);
    grow(ld, n, rhs);
    return n;
}

/* The two left-associative levels of binary operators, ops lo..hi:
 *   term  = unary (("*" | "/" | "//" | "%" | "@") unary)*
 *   arith = term (("+" | "-") term)* */
static Node *
parse_binary(Load *ld, int lo, int hi)
{
    bool arith = lo == OP_ADD;
    Node *n = arith ? parse_binary(ld, OP_MUL, OP_MATMUL) : parse_unary(ld);
    for (;;) {
        Token *t = peek(ld);
        int op = binop_of(t->kind);
        if (op < lo || op > hi)
            return n;
        next(ld);
        Node *rhs = arith ? parse_binary(ld, OP_MUL, OP_MATMUL)
                          : parse_unary(ld);
        n = make_binary(ld, op, t, n, rhs);
    }
}

/* arith, the looser of the two binary levels (parse_binary). */
static Node *
parse_arith(Load *ld)
{
    return parse_binary(ld, OP_ADD, OP_SUB);
}

/* comparison = arith (("==" | "!=" | "<" | "<=" | ">" | ">=") arith)? */
static Node *
parse_comparison(Load *ld)
{
    Node *n = parse_arith(ld);
    Token *t = peek(ld);
    int op = binop_of(t->kind);
    if (op < OP_EQ)
        return n;
    next(ld);
    n = make_binary(ld, op, t, n, parse_arith(ld));
    t = peek(ld);
    if (binop_of(t->kind) >= OP_EQ)
        jit__jit_syntax_error(ld, t->line, t->col,
                               "chained comparisons are not supported; "
                               "use 'and'");
    return n;
}

/* not_expr = "not" not_expr | comparison */
static Node *
parse_not(Load *ld)
{
    Token *t = peek(ld);
    if (!accept(ld, T_NOT))
        return parse_comparison(ld);
    enter(ld, t);
    Node *n = new_node(ld, N_NOT, t);
    n->lhs = parse_not(ld);
    grow(ld, n, n->lhs);
    ld->depth--;
    return n;
}

/* and_expr = not_expr ("and" not_expr)*
 * or_expr  = and_expr ("or" and_expr)* */
static Node *
parse_logic(Load *ld, bool is_or)
{
    Node *n = is_or ? parse_logic(ld, false) : parse_not(ld);
    for (;;) {
        Token *t = peek(ld);
        if (!accept(ld, is_or ? T_OR : T_AND))
            return n;
        Node *p = new_node(ld, is_or ? N_OR : N_AND, t);
        p->lhs = n;
        p->rhs = is_or ? parse_logic(ld, false) : parse_not(ld);
        grow(ld, p, p->lhs);
        grow(ld, p, p->rhs);
        n = p;
    }
}

/* expr = or_expr */
static Node *
parse_expr(Load *ld)
{
    enter(ld, peek(ld));
    Node *n = parse_logic(ld, true);
    ld->depth--;
    return n;
}

/* simple_stmt = "return" expr? | "pass"
 *             | expr (("=" | "+=" | "-=" | "*=" | "/=") expr)? */
static Node *
parse_simple(Load *ld)
{
    Token *t = peek(ld);
    Node *n;
    if (accept(ld, T_RETURN)) {
        n = new_node(ld, N_RETURN, t);
        if (peek(ld)->kind != T_NEWLINE)
            n->lhs = parse_expr(ld);
        return n;
    }
    if (accept(ld, T_PASS))
        return new_node(ld, N_PASS, t);
    Node *e = parse_expr(ld);
    Token *op = peek(ld);
    /* An expression statement, unless an assignment operator follows (=,
     * +=, -=, *=, /= are consecutive TokKinds). */
    if (op->kind < T_ASSIGN || op->kind > T_DIV_ASSIGN) {
        n = new_node(ld, N_EXPR, t);
        n->lhs = e;
        return n;
    }
    next(ld);
    if (e->kind != N_NAME)
        jit__jit_syntax_error(ld, e->line, e->col,
                               "can only assign to a name");
    /* x op= e keeps the operator (-1 for plain =) for the interpreter. */
    static const int ops[] = { -1, OP_ADD, OP_SUB, OP_MUL, OP_DIV };
    n = new_node(ld, N_ASSIGN, op);
    n->op = ops[op->kind - T_ASSIGN];
    n->name = e->name;
    n->line = e->line;
    n->col = e->col;
    n->rhs = parse_expr(ld);
    return n;
}

/* if_stmt = "if" expr ":" block ("elif" expr ":" block)*
 *           ("else" ":" block)?     (after "if" or "elif") */
static Node *
parse_if(Load *ld, const Token *t)
{
    Node *n = new_node(ld, N_IF, t);
    n->rhs = parse_expr(ld);
    expect(ld, T_COLON, " after the condition");
    n->body = parse_block(ld);
    Token *e = peek(ld);
    if (accept(ld, T_ELIF)) {
        list_push(ld, &n->orelse, parse_if(ld, e));
    } else if (accept(ld, T_ELSE)) {
        expect(ld, T_COLON, " after 'else'");
        n->orelse = parse_block(ld);
    }
    return n;
}

/* for_stmt = "for" NAME "in" expr ":" block   (after "for") */
static Node *
parse_for(Load *ld, const Token *t)
{
    Node *n = new_node(ld, N_FOR, t);
    Token *name = expect(ld, T_NAME, " after 'for'");
    n->name = name->text;
    n->line = name->line;
    n->col = name->col;
    expect(ld, T_IN, " after the loop variable");
    n->rhs = parse_expr(ld);
    expect(ld, T_COLON, " after the loop iterable");
    n->body = parse_block(ld);
    return n;
}

/* stmt = if_stmt | for_stmt | simple_stmt NEWLINE */
static Node *
parse_stmt(Load *ld)
{
    Token *t = peek(ld);
    char buf[300];
    if (accept(ld, T_IF))
        return parse_if(ld, t);
    if (accept(ld, T_FOR))
        return parse_for(ld, t);
    if (t->kind == T_DEF)
        jit__jit_syntax_error(ld, t->line, t->col,
                               "nested functions are not supported");
    if (t->kind == T_INDENT || t->kind == T_ELSE || t->kind == T_ELIF)
        jit__jit_syntax_error(ld, t->line, t->col, "unexpected %s",
                               describe(t, buf, sizeof buf));
    Node *n = parse_simple(ld);
    expect(ld, T_NEWLINE, " at the end of the statement");
    return n;
}

/* block = simple_stmt NEWLINE | NEWLINE INDENT stmt+ DEDENT */
static NodeList
parse_block(Load *ld)
{
    NodeList l = { 0 };
    Token *t = peek(ld);
    enter(ld, t);
    /* A block is one simple statement on the same line, or an indented run
     * of statements. */
    if (!accept(ld, T_NEWLINE)) {
        list_push(ld, &l, parse_simple(ld));
        expect(ld, T_NEWLINE, " at the end of the statement");
    } else {
        Token *in = peek(ld);
        char buf[300];
        if (in->kind != T_INDENT)
            jit__jit_syntax_error(ld, in->line, in->col,
                                   "expected an indented block, found %s",
                                   describe(in, buf, sizeof buf));
        next(ld);
        while (!accept(ld, T_DEDENT))
            list_push(ld, &l, parse_stmt(ld));
    }
    ld->depth--;
    return l;
}

/* funcdef = "def" NAME "(" (NAME ("," NAME)* ","?)? ")" ":" block */
static Func *
parse_funcdef(Load *ld)
{
    Func *f = jit__jit_alloc(ld, sizeof(*f));
    Token *name = expect(ld, T_NAME, " after 'def'");
    const char *params[MAX_ARGS];
    f->name = name->text;
    f->line = name->line;
    f->col = name->col;
    expect(ld, T_LPAREN, " after the function name");
    while (!accept(ld, T_RPAREN)) {
        Token *p = expect(ld, T_NAME, " (a parameter name)");
        if (f->nparams == MAX_ARGS)
            jit__jit_syntax_error(ld, p->line, p->col,
                                   "too many parameters (limit %d)",
                                   MAX_ARGS);
        params[f->nparams++] = p->text;
        if (!accept(ld, T_COMMA)) {
            expect(ld, T_RPAREN, " or ','");
            break;
        }
    }
    /* The parameters are the first locals; the resolver appends the other
     * variables. */
    f->locals = jit__jit_alloc(ld, (size_t)MAX_ARGS * sizeof(char *));
    memcpy(f->locals, params, (size_t)f->nparams * sizeof(char *));
    f->nlocals = f->nparams;
    expect(ld, T_COLON, " after the parameter list");
    f->body = parse_block(ld);
    return f;
}

/* The function table lives in the arena too and doubles, copying, when
 * full. */
static void
add_func(Load *ld, Func *f)
{
    if (ld->nfuncs == ld->capfuncs) {
        int cap = ld->capfuncs ? ld->capfuncs * 2 : 16;
        Func **fs = jit__jit_alloc(ld, (size_t)cap * sizeof(*fs));
        if (ld->nfuncs)
            memcpy(fs, ld->funcs, (size_t)ld->nfuncs * sizeof(*fs));
        ld->funcs = fs;
        ld->capfuncs = cap;
    }
    ld->funcs[ld->nfuncs++] = f;
}

/* program = (NEWLINE | funcdef)* EOF */
void
jit__jit_parse(Load *ld)
{
    for (;;) {
        Token *t = next(ld);
        if (t->kind == T_EOF)
            return;
        if (t->kind == T_NEWLINE)
            continue;
        if (t->kind == T_DEF) {
            add_func(ld, parse_funcdef(ld));
            continue;
        }
        jit__jit_syntax_error(ld, t->line, t->col,
                               t->kind == T_INDENT ? "unexpected indent"
                               : "only function definitions ('def') are "
                                 "allowed at the top level");
    }
}
