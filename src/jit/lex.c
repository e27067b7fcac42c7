/*
 * lex.c - the .tl lexer: source text to tokens, Python style.
 *
 * Indentation opens and closes blocks (INDENT/DEDENT; spaces only, tabs in
 * indentation are an error); newlines inside brackets are ignored; blank and
 * comment lines produce nothing. Every token keeps its line and column so
 * every later error can point at the source.
 */
#include "jit.h"
#include "../core/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME 256

/* The state of one tokenization, over the module's source copy. */
typedef struct Lexer {
    Load *ld;                   /* the load: module, tokens, error exit */
    const char *p, *end;        /* cursor and end of the source */
    const char *bol;            /* start of the current line */
    int line;                   /* 1-based line of the cursor */
    int indent[CCOL_JIT_MAX_NESTING + 1]; /* open indentation levels */
    int nindent;                /* indent[0..nindent] used; [0] is 0 */
    Token open[CCOL_JIT_MAX_NESTING];     /* unclosed brackets */
    int nopen;                  /* their number: newlines inside count not */
    bool at_bol;                /* at the start of a logical line */
} Lexer;

/* A spelling of a token kind: a keyword or a punctuation. */
typedef struct Spelling {
    const char *text;           /* as written in the source */
    TokKind kind;               /* the token it makes */
} Spelling;

static const Spelling keywords[] = {
    { "def", T_DEF },     { "return", T_RETURN }, { "if", T_IF },
    { "elif", T_ELIF },   { "else", T_ELSE },     { "for", T_FOR },
    { "in", T_IN },       { "and", T_AND },       { "or", T_OR },
    { "not", T_NOT },     { "True", T_TRUE },     { "False", T_FALSE },
    { "None", T_NONE },   { "pass", T_PASS },
};

/* Python keywords the language does not have: a clear error, not a
 * confusing parse error later. */
static const char *const unsupported[] = {
    "while", "break", "continue", "class", "lambda", "import", "from",
    "is", "try", "except", "finally", "with", "as", "global", "nonlocal",
    "del", "yield", "raise", "assert", "async", "await",
};

/* The caret diagnostic goes to the module, then the load unwinds to the
 * setjmp in api.c's compile(): everything allocated so far is in the
 * arena or on the Load, freed there. */
void
jit__jit_syntax_error(Load *ld, int line, int col, const char *fmt, ...)
{
    char msg[JIT_MSGMAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    jit__jit_diag(ld->m, line, col, msg);
    longjmp(ld->jb, 1);
}

/* Arena memory lives as long as the module's program. */
void *
jit__jit_alloc(Load *ld, size_t n)
{
    void *p = jit__jit_arena_alloc(&ld->m->arena, n);
    if (p == NULL)
        jit__jit_syntax_error(ld, 1, 1, "out of memory");
    return p;
}

/* The 1-based byte column of p on the current line. */
static int
col_of(const Lexer *lx, const char *p)
{
    return (int)(p - lx->bol) + 1;
}

/* Appends a token at p and returns it for the caller to fill in. */
static Token *
push(Lexer *lx, TokKind kind, const char *p)
{
    Load *ld = lx->ld;
    Token *t = ccol__grow(ld->toks, &ld->cap, (size_t)ld->ntoks + 1,
                          sizeof(*t), 256);
    if (t == NULL)
        jit__jit_syntax_error(ld, lx->line, 1, "out of memory");
    ld->toks = t;
    t = &ld->toks[ld->ntoks++];
    memset(t, 0, sizeof(*t));
    t->kind = kind;
    t->line = lx->line;
    t->col = col_of(lx, p);
    return t;
}

/* The kind of the last token pushed; a NEWLINE before any, so the start of
 * the input begins a line. */
static TokKind
last_kind(const Lexer *lx)
{
    return lx->ld->ntoks ? lx->ld->toks[lx->ld->ntoks - 1].kind : T_NEWLINE;
}

/* Measures the indentation of a new line and emits INDENT/DEDENTs. */
static void
lex_indent(Lexer *lx)
{
    const char *p = lx->p;
    while (p < lx->end && *p == ' ')
        p++;
    if (p < lx->end && *p == '\t')
        jit__jit_syntax_error(lx->ld, lx->line, col_of(lx, p),
                               "tab in indentation; indent with spaces");
    lx->p = p;
    lx->at_bol = false;
    if (p == lx->end || *p == '\n' || *p == '\r' || *p == '#')
        return; /* a blank or comment line does not change blocks */
    int n = (int)(p - lx->bol);
    /* Deeper than the innermost open level opens one block; shallower
     * closes blocks until a level matches exactly, as Python's tokenizer
     * does. */
    if (n > lx->indent[lx->nindent]) {
        if (lx->nindent == CCOL_JIT_MAX_NESTING)
            jit__jit_syntax_error(lx->ld, lx->line, col_of(lx, p),
                                   "too many indentation levels (limit %d)",
                                   CCOL_JIT_MAX_NESTING);
        lx->indent[++lx->nindent] = n;
        push(lx, T_INDENT, p);
        return;
    }
    while (n < lx->indent[lx->nindent]) {
        lx->nindent--;
        push(lx, T_DEDENT, p);
    }
    if (n != lx->indent[lx->nindent])
        jit__jit_syntax_error(lx->ld, lx->line, col_of(lx, p),
                               "unindent does not match any outer "
                               "indentation level");
}

/* The first character of a name (ASCII letters and _). */
static bool
is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* An ASCII decimal digit. */
static bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Finds the end of a number literal at s; sets *is_float. */
static const char *
number_end(const Lexer *lx, const char *s, bool *is_float)
{
    const char *p = s;
    *is_float = false;
    while (p < lx->end && is_digit(*p))
        p++;
    if (p < lx->end && *p == '.') {
        *is_float = true;
        for (p++; p < lx->end && is_digit(*p);)
            p++;
    }
    /* An exponent counts only with digits after it ("1e" is the int 1
     * followed by a name, rejected by the caller). */
    if (p < lx->end && (*p == 'e' || *p == 'E')) {
        const char *e = p + 1;
        if (e < lx->end && (*e == '+' || *e == '-'))
            e++;
        if (e < lx->end && is_digit(*e)) {
            *is_float = true;
            for (p = e; p < lx->end && is_digit(*p);)
                p++;
        }
    }
    return p;
}

/* Scans an int or float literal starting at lx->p. */
static void
lex_number(Lexer *lx)
{
    const char *s = lx->p;
    bool is_float;
    const char *p = number_end(lx, s, &is_float);
    /* "12abc" is one bad literal, not a number and a name. */
    if (p < lx->end && (is_alpha(*p) || is_digit(*p)))
        jit__jit_syntax_error(lx->ld, lx->line, col_of(lx, s),
                               "invalid number literal");
    Token *t = push(lx, is_float ? T_FLOAT : T_INT, s);
    if (is_float) {
        char buf[128];
        size_t n = (size_t)(p - s);
        if (n >= sizeof buf)
            jit__jit_syntax_error(lx->ld, lx->line, t->col,
                                   "number literal too long");
        memcpy(buf, s, n);
        buf[n] = '\0';
        /* strtod needs a NUL-terminated copy: the source is not cut at the
         * literal. */
        t->fval = strtod(buf, NULL);
    } else {
        for (const char *q = s; q < p; q++) {
            /* Checked before the multiply: the literal must fit in int64. */
            if (t->ival > (INT64_MAX - (*q - '0')) / 10)
                jit__jit_syntax_error(lx->ld, lx->line, t->col,
                                       "integer literal too large");
            t->ival = t->ival * 10 + (*q - '0');
        }
    }
    lx->p = p;
}

/* Scans a name or keyword. */
static void
lex_name(Lexer *lx)
{
    const char *s = lx->p, *p = s;
    while (p < lx->end && (is_alpha(*p) || is_digit(*p)))
        p++;
    size_t n = (size_t)(p - s);
    int col = col_of(lx, s);
    if (n > MAX_NAME)
        jit__jit_syntax_error(lx->ld, lx->line, col,
                               "name too long (limit %d)", MAX_NAME);
    lx->p = p;
    for (size_t i = 0; i < sizeof keywords / sizeof keywords[0]; i++) {
        if (strlen(keywords[i].text) == n &&
            memcmp(keywords[i].text, s, n) == 0) {
            push(lx, keywords[i].kind, s);
            return;
        }
    }
    /* Python keywords the language lacks get a clear error here, rather
     * than a confusing parse error after they lex as names. */
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++) {
        if (strlen(unsupported[i]) == n && memcmp(unsupported[i], s, n) == 0)
            jit__jit_syntax_error(lx->ld, lx->line, col,
                                   "'%s' is not supported", unsupported[i]);
    }
    Token *t = push(lx, T_NAME, s);
    /* Token texts live in the arena: names are used by the AST for the
     * program's life. */
    char *text = jit__jit_alloc(lx->ld, n + 1);
    memcpy(text, s, n);
    t->text = text;
}

/* The character an escape sequence \c stands for, or -1. */
static int
unescape(char c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case '\\':
    case '\'':
    case '"':
        return c;
    default:
        return -1;
    }
}

/* Scans a '...' or "..." string literal on one line. */
static void
lex_string(Lexer *lx)
{
    const char *s = lx->p, *p = s + 1;
    Token *t = push(lx, T_STR, s);
    char *text = jit__jit_alloc(lx->ld, (size_t)(lx->end - s));
    size_t n = 0;
    for (; p < lx->end && *p != *s && *p != '\n'; p++) {
        if (*p == '\0')
            break;
        if (*p != '\\') {
            text[n++] = *p;
            continue;
        }
        int c = p + 1 < lx->end ? unescape(p[1]) : -1;
        if (c < 0)
            jit__jit_syntax_error(lx->ld, lx->line, col_of(lx, p),
                                   "unknown escape sequence in string");
        text[n++] = (char)c;
        p++;
    }
    if (p == lx->end || *p != *s)
        jit__jit_syntax_error(lx->ld, lx->line, t->col,
                               "unterminated string literal");
    text[n] = '\0';
    t->text = text;
    lx->p = p + 1;
}

static const Spelling puncts[] = {
    { "//", T_DSLASH },    { "==", T_EQ },         { "!=", T_NE },
    { "<=", T_LE },        { ">=", T_GE },         { "+=", T_ADD_ASSIGN },
    { "-=", T_SUB_ASSIGN }, { "*=", T_MUL_ASSIGN }, { "/=", T_DIV_ASSIGN },
    { "(", T_LPAREN },     { ")", T_RPAREN },      { "[", T_LBRACK },
    { "]", T_RBRACK },     { ",", T_COMMA },       { ":", T_COLON },
    { ".", T_DOT },        { "=", T_ASSIGN },      { "+", T_PLUS },
    { "-", T_MINUS },      { "*", T_STAR },        { "/", T_SLASH },
    { "%", T_PERCENT },    { "@", T_AT },          { "<", T_LT },
    { ">", T_GT },
};

/* Tracks bracket nesting so newlines inside brackets are ignored and an
 * unbalanced bracket is reported where it was opened. */
static void
track_bracket(Lexer *lx, Token *t)
{
    if (t->kind == T_LPAREN || t->kind == T_LBRACK) {
        if (lx->nopen == CCOL_JIT_MAX_NESTING)
            jit__jit_syntax_error(lx->ld, t->line, t->col,
                                   "brackets nested too deeply (limit %d)",
                                   CCOL_JIT_MAX_NESTING);
        lx->open[lx->nopen++] = *t;
        return;
    }
    if (t->kind != T_RPAREN && t->kind != T_RBRACK)
        return;
    TokKind want = t->kind == T_RPAREN ? T_LPAREN : T_LBRACK;
    if (lx->nopen == 0 || lx->open[lx->nopen - 1].kind != want)
        jit__jit_syntax_error(lx->ld, t->line, t->col, "unmatched %s",
                               jit__jit_tokname(t->kind));
    lx->nopen--;
}

/* Scans one punctuation token. */
static void
lex_punct(Lexer *lx)
{
    const char *p = lx->p;
    for (size_t i = 0; i < sizeof puncts / sizeof puncts[0]; i++) {
        size_t n = strlen(puncts[i].text);
        if ((size_t)(lx->end - p) >= n && memcmp(p, puncts[i].text, n) == 0) {
            Token *t = push(lx, puncts[i].kind, p);
            lx->p = p + n;
            track_bracket(lx, t);
            return;
        }
    }
    unsigned char c = (unsigned char)*p;
    if (c >= 0x21 && c < 0x7f)
        jit__jit_syntax_error(lx->ld, lx->line, col_of(lx, p),
                               "unexpected character '%c'", c);
    jit__jit_syntax_error(lx->ld, lx->line, col_of(lx, p),
                           "unexpected byte 0x%02x", c);
}

/* Handles a newline character at lx->p. */
static void
lex_newline(Lexer *lx)
{
    if (lx->nopen == 0 && last_kind(lx) != T_NEWLINE)
        push(lx, T_NEWLINE, lx->p);
    lx->p++;
    lx->bol = lx->p;
    lx->line++;
    lx->at_bol = lx->nopen == 0;
}

/* Scans the next token (or whitespace/comment/newline) at lx->p. */
static void
lex_one(Lexer *lx)
{
    char c = *lx->p;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\f') {
        lx->p++;
    } else if (c == '#') {
        while (lx->p < lx->end && *lx->p != '\n')
            lx->p++;
    } else if (c == '\n') {
        lex_newline(lx);
    } else if (c == '\\') {
        jit__jit_syntax_error(lx->ld, lx->line, col_of(lx, lx->p),
                               "line continuation with '\\' is not "
                               "supported; use brackets");
    } else if (is_digit(c) ||
               (c == '.' && lx->p + 1 < lx->end && is_digit(lx->p[1]))) {
        lex_number(lx);
    } else if (is_alpha(c)) {
        lex_name(lx);
    } else if (c == '"' || c == '\'') {
        lex_string(lx);
    } else {
        lex_punct(lx);
    }
}

/* Lexes line starts (indentation) and tokens until the end, then closes
 * what is open: an unclosed bracket is an error at the bracket; the last
 * line and the open blocks end with NEWLINE and DEDENTs, as Python's
 * tokenizer does. */
void
jit__jit_lex(Load *ld)
{
    Lexer lx = { .ld = ld, .p = ld->m->src, .end = ld->m->src + ld->m->len,
                 .bol = ld->m->src, .line = 1, .at_bol = true };
    while (lx.p < lx.end) {
        if (lx.at_bol)
            lex_indent(&lx);
        else
            lex_one(&lx);
    }
    if (lx.nopen > 0) {
        Token *o = &lx.open[lx.nopen - 1];
        jit__jit_syntax_error(ld, o->line, o->col, "%s was never closed",
                               jit__jit_tokname(o->kind));
    }
    if (last_kind(&lx) != T_NEWLINE)
        push(&lx, T_NEWLINE, lx.p);
    for (; lx.nindent > 0; lx.nindent--)
        push(&lx, T_DEDENT, lx.p);
    push(&lx, T_EOF, lx.p);
}

/* The names follow TokKind's order (checked at compile time). */
const char *
jit__jit_tokname(TokKind k)
{
    static const char *const names[] = {
        "end of input", "end of line", "indent", "dedent", "name",
        "integer", "float", "string", "'def'", "'return'", "'if'", "'elif'",
        "'else'", "'for'", "'in'", "'and'", "'or'", "'not'", "'True'",
        "'False'", "'None'", "'pass'", "'('", "')'", "'['", "']'", "','",
        "':'", "'.'", "'='", "'+='", "'-='", "'*='", "'/='", "'+'", "'-'",
        "'*'", "'/'", "'//'", "'%'", "'@'", "'=='", "'!='", "'<'", "'<='",
        "'>'", "'>='",
    };
    _Static_assert(sizeof names / sizeof names[0] == T_GE + 1,
                   "token names");
    return names[k];
}
