/*
 * ast.h - tokens and the syntax tree of the .tl language.
 *
 * The lexer turns source text into a token array (with INDENT/DEDENT for
 * blocks); the parser builds Nodes in the module's arena; the resolver then
 * binds every name to a local slot, a user function or a builtin, so the
 * interpreter never looks names up by string.
 */
#ifndef CCOL_JIT_AST_H
#define CCOL_JIT_AST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum TokKind {
    T_EOF, T_NEWLINE, T_INDENT, T_DEDENT, T_NAME, T_INT, T_FLOAT, T_STR,
    /* keywords */
    T_DEF, T_RETURN, T_IF, T_ELIF, T_ELSE, T_FOR, T_IN, T_AND, T_OR, T_NOT,
    T_TRUE, T_FALSE, T_NONE, T_PASS,
    /* punctuation */
    T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK, T_COMMA, T_COLON, T_DOT,
    T_ASSIGN, T_ADD_ASSIGN, T_SUB_ASSIGN, T_MUL_ASSIGN, T_DIV_ASSIGN,
    T_PLUS, T_MINUS, T_STAR, T_SLASH, T_DSLASH, T_PERCENT, T_AT,
    T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE
} TokKind;

typedef struct Token {
    TokKind kind;
    int line;           /* 1-based */
    int col;            /* 1-based byte column */
    const char *text;   /* NUL-terminated copy (names, strings) or NULL */
    int64_t ival;       /* T_INT */
    double fval;        /* T_FLOAT */
} Token;

/* Binary operators, shared by the parser, interpreter and tensor code;
 * the comparisons come last (ops.c tests op >= OP_EQ). */
typedef enum BinOp {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_MATMUL,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE
} BinOp;

typedef enum NodeKind {
    /* expressions */
    N_INT, N_FLOAT, N_STR, N_BOOL, N_NONE, N_NAME, N_LIST,
    N_TUPLE,  /* (a, b, ...): only as the type argument of isinstance; the
                 resolver turns it into an N_LIST of type names */
    N_NEG, N_POS, N_NOT, N_BINARY, N_AND, N_OR,
    N_CALL,   /* name(args): user function or builtin */
    N_METHOD, /* lhs.name(args) */
    N_ATTR,   /* lhs.name (only .shape) */
    N_INDEX,  /* lhs[rhs] */
    /* statements */
    N_ASSIGN, /* name = rhs, or name op= rhs when op >= 0 */
    N_RETURN, N_IF, N_FOR, N_EXPR, N_PASS
} NodeKind;

typedef struct Node Node;

/* A sequence of statements (a block) or of expressions (arguments). */
typedef struct NodeList {
    Node **items;
    int n;
} NodeList;

struct Node {
    NodeKind kind;
    int line, col;      /* where diagnostics point */
    int height;         /* 1 + height of the tallest child (bounded) */
    int op;             /* BinOp for N_BINARY and op-assignments, else -1 */
    int64_t ival;       /* N_INT, N_BOOL */
    double fval;        /* N_FLOAT */
    const char *name;   /* N_NAME, N_CALL, N_METHOD, N_ATTR, N_STR text,
                           N_ASSIGN and N_FOR target */
    int slot;           /* N_NAME, N_ASSIGN, N_FOR: local slot */
    int callee;         /* N_CALL: function index, or -1 - builtin index */
    Node *lhs, *rhs;    /* operands; N_IF/N_FOR: rhs is condition/iter */
    NodeList args;      /* N_CALL/N_METHOD arguments, N_LIST/N_TUPLE
                           items */
    NodeList body;      /* N_IF then-block, N_FOR body */
    NodeList orelse;    /* N_IF else-block (elif is a nested N_IF) */
    bool is_range;      /* N_FOR over range(...) (args in rhs->args) */
};

typedef struct Func {
    const char *name;
    int line, col;
    int nparams;        /* parameters are slots 0..nparams-1 */
    int nlocals;        /* parameters and assigned names */
    const char **locals;
    NodeList body;
} Func;

#endif /* CCOL_JIT_AST_H */
