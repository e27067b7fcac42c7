/*
 * test_lang.c - golden tests of the .tl language front end and the eager
 * interpreter: every language feature with its expected result or printed
 * output, and every diagnostic with its exact text, position and caret.
 */
#include "golden.h"

#include <math.h>

/* A program whose main() returns expression E. */
#define RET(e) "def main():\n    return " e "\n"
#define EXPR(e, w) { RET(e), NULL, w, NULL, NULL }
#define PROG(src, w) { src, NULL, w, NULL, NULL }
#define PRINTS(src, w, out) { src, NULL, w, out, NULL }
#define FAILS(src, err) { src, NULL, NULL, NULL, err }

static const golden numbers[] = {
    EXPR("7 // 2", "3"),
    EXPR("-7 // 2", "-4"),
    EXPR("7 % -2", "-1"),
    EXPR("-7 % 2", "1"),
    EXPR("7 / 2", "3.5"),
    EXPR("10 / 5", "2.0"),
    EXPR("1 + 2.0", "3.0"),
    EXPR("True + True", "2"),
    EXPR("True * 2.5", "2.5"),
    EXPR("2 * 3 - 4", "2"),
    EXPR("(2 + 3) * 4", "20"),
    EXPR("2 + 3 * 4", "14"),
    EXPR("7.5 // 2", "3.0"),
    EXPR("-7.5 % 2", "0.5"),
    EXPR("1e3", "1000.0"),
    EXPR("0.1 + 0.2", "0.30000000000000004"),
    EXPR("1 / 3", "0.3333333333333333"),
    EXPR("-(-3)", "3"),
    EXPR("+4", "4"),
    EXPR("- 2.5", "-2.5"),
    EXPR("1e16", "1e+16"),
    EXPR("1e15", "1000000000000000.0"),
    EXPR("1.5e-5", "1.5e-05"),
    EXPR(".5", "0.5"),
    EXPR("9223372036854775807", "9223372036854775807"),
    EXPR("-9223372036854775807 - 1", "-9223372036854775808"),
    EXPR("True", "True"),
    EXPR("None", "None"),
    EXPR("'it\\'s'", "'it's'"),
    EXPR("\"a\\tb\"", "'a\tb'"),
};

static const golden logic[] = {
    EXPR("1 < 2", "True"),
    EXPR("2 <= 1", "False"),
    EXPR("3 > 2.5", "True"),
    EXPR("2 >= 2", "True"),
    EXPR("1 == 1.0", "True"),
    EXPR("True == 1", "True"),
    EXPR("1 != 2", "True"),
    EXPR("'a' == 'a'", "True"),
    EXPR("'a' != 'b'", "True"),
    EXPR("None == None", "True"),
    EXPR("None == 0", "False"),
    EXPR("[1, 2] == [1, 2]", "True"),
    EXPR("[1] == [1, 2]", "False"),
    EXPR("[1, [2]] != [1, [3]]", "True"),
    EXPR("1 and 2", "2"),
    EXPR("0 and 2", "0"),
    EXPR("0 or 3", "3"),
    EXPR("None or 'x'", "'x'"),
    EXPR("not 0", "True"),
    EXPR("not [1]", "False"),
    EXPR("not []", "True"),
    EXPR("not 1 == 2", "True"),
    EXPR("1 < 2 and 2 < 3", "True"),
    EXPR("1 > 2 or not 0.0", "True"),
    EXPR("0 and 1 / 0", "0"),
    EXPR("1 or 1 / 0", "1"),
};

static const golden statements[] = {
    PROG("def main():\n    x = 1\n    x = x + 1\n    return x\n", "2"),
    PROG("def main():\n    x = 10\n    x += 5\n    x -= 1\n    x *= 2\n"
         "    x /= 4\n    return x\n", "7.0"),
    PROG("def f(n):\n    if n < 0:\n        return 'neg'\n    elif n == 0:\n"
         "        return 'zero'\n    elif n < 10:\n        return 'small'\n"
         "    else:\n        return 'big'\n"
         "def main():\n    return [f(-1), f(0), f(5), f(50)]\n",
         "['neg', 'zero', 'small', 'big']"),
    PROG("def main():\n    s = 0\n    for i in range(5):\n        s += i\n"
         "    return s\n", "10"),
    PROG("def main():\n    s = []\n    for i in range(2, 5):\n"
         "        s = [s, i]\n    return s\n", "[[[[], 2], 3], 4]"),
    PROG("def main():\n    s = 0\n    for i in range(10, 0, -3):\n"
         "        s = s * 100 + i\n    return s\n", "10070401"),
    PROG("def main():\n    n = 0\n    for i in range(3, 1):\n        n += 1\n"
         "    return n\n", "0"),
    PROG("def main():\n    s = 0\n    for x in [1, 2.5, True]:\n"
         "        s += x\n    return s\n", "4.5"),
    PROG("def main():\n    for i in range(10):\n        if i == 3:\n"
         "            return i\n    return -1\n", "3"),
    PROG("def main():\n    for i in range(3):\n        pass\n    return i\n",
         "2"),
    PROG("def main():\n    return\n", "None"),
    PROG("def main():\n    x = 1\n", "None"),
    PROG("def main(): return 3\n", "3"),
    PROG("def main():\n    if 1: return 'one'\n    return 'other'\n", "'one'"),
    PROG("# leading comment\n\ndef main():  # trailing\n\n    # inside\n"
         "    x = [1,\n         2,\n  3]\n\n    return len(x)\n", "3"),
    PROG("def main():\r\n    return 5\r\n", "5"),
    PROG("def main():\n    return 5", "5"),
    PROG("def fact(n):\n    if n <= 1:\n        return 1\n"
         "    return n * fact(n - 1)\ndef main():\n    return fact(20)\n",
         "2432902008176640000"),
    PROG("def main():\n    return helper(2) + 1\n"
         "def helper(x):\n    return x * 10\n", "21"),
    PROG("def main():\n    rank = rank()\n    return rank\n", "0"),
    PROG("def g(x, y,):\n    return x - y\ndef main():\n    return g(5, 2,)\n",
         "3"),
    PROG("def main():\n    xs = [1, 2, 3]\n    n = 0\n    for x in xs:\n"
         "        for y in xs:\n            n += x * y\n    return n\n", "36"),
};

static const golden lists[] = {
    EXPR("[]", "[]"),
    EXPR("[1, 2.5, 'a', None, True, [3]]", "[1, 2.5, 'a', None, True, [3]]"),
    EXPR("[10, 20, 30][1]", "20"),
    EXPR("[10, 20, 30][-1]", "30"),
    EXPR("[10, 20, 30][-3]", "10"),
    EXPR("[[1, 2], [3, 4]][1][0]", "3"),
    EXPR("len([1, 2, 3])", "3"),
    EXPR("len('abc')", "3"),
    EXPR("sum([1, 2, 3])", "6"),
    EXPR("sum([1, 2.5])", "3.5"),
    EXPR("sum([])", "0"),
    EXPR("[1, 2,]", "[1, 2]"),
    EXPR("[5, 6][True]", "6"),
};

static const golden tensors[] = {
    EXPR("ones(2, 3)", "tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])"),
    EXPR("zeros([2])", "tensor([0.0, 0.0])"),
    EXPR("ones([])", "tensor(1.0)"),
    EXPR("zeros(0, 3)", "tensor([])"),
    EXPR("arange(4)", "tensor([0.0, 1.0, 2.0, 3.0])"),
    EXPR("arange(2, 5)", "tensor([2.0, 3.0, 4.0])"),
    EXPR("arange(5, 2)", "tensor([])"),
    EXPR("tensor([[1, 2], [3, 4.5]])", "tensor([[1.0, 2.0], [3.0, 4.5]])"),
    EXPR("tensor(3.5)", "tensor(3.5)"),
    EXPR("tensor([])", "tensor([])"),
    EXPR("tensor([0.1])", "tensor([0.1])"),
    EXPR("ones(3, 4).shape", "[3, 4]"),
    EXPR("tensor(1).shape", "[]"),
    EXPR("ones(3, 4).size(1)", "4"),
    EXPR("ones(3, 4).size(-2)", "3"),
    EXPR("ones(3, 4).size()", "[3, 4]"),
    EXPR("ones(3, 4).stride(0)", "4"),
    EXPR("ones(3, 4).stride()", "[4, 1]"),
    EXPR("ones(2, 3).t().shape", "[3, 2]"),
    EXPR("ones(2, 3).t().stride()", "[1, 3]"),
    EXPR("arange(6).reshape(2, 3).t()",
         "tensor([[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])"),
    EXPR("transpose(ones(2, 3, 4), 0, 2).stride()", "[1, 4, 12]"),
    EXPR("ones(2, 3, 4).transpose(-1, 0).shape", "[4, 3, 2]"),
    EXPR("arange(3).t()", "tensor([0.0, 1.0, 2.0])"),
    EXPR("reshape(arange(6), 3, 2)",
         "tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])"),
    EXPR("arange(6).reshape([-1, 2]).shape", "[3, 2]"),
    EXPR("arange(6).reshape(2, -1).stride()", "[3, 1]"),
    EXPR("arange(6).reshape(2, 3).t().reshape(-1)",
         "tensor([0.0, 3.0, 1.0, 4.0, 2.0, 5.0])"),
    EXPR("arange(6).reshape(2, 3).t().reshape(6).stride()", "[1]"),
    EXPR("tensor(7).reshape(1, 1)", "tensor([[7.0]])"),
    EXPR("cat([arange(2), arange(3)])",
         "tensor([0.0, 1.0, 0.0, 1.0, 2.0])"),
    EXPR("cat([ones(2, 1), zeros(2, 2)], 1)",
         "tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])"),
    EXPR("cat([ones(1, 2), zeros(1, 2)], -2)",
         "tensor([[1.0, 1.0], [0.0, 0.0]])"),
    EXPR("cat([arange(4).reshape(2, 2).t(), ones(2, 1)], 1)",
         "tensor([[0.0, 2.0, 1.0], [1.0, 3.0, 1.0]])"),
    EXPR("relu(tensor([-1, 0, 2]))", "tensor([0.0, 0.0, 2.0])"),
    EXPR("tensor([-1.5]).relu()", "tensor([0.0])"),
    EXPR("relu(-3)", "0"),
    EXPR("relu(2.5)", "2.5"),
    EXPR("exp(tensor([0, 1]))", "tensor([1.0, 2.7182817])"),
    EXPR("exp(0)", "1.0"),
    EXPR("sum(arange(4))", "tensor(6.0)"),
    EXPR("sum(arange(6).reshape(2, 3), 0)", "tensor([3.0, 5.0, 7.0])"),
    EXPR("arange(6).reshape(2, 3).sum(1)", "tensor([3.0, 12.0])"),
    EXPR("arange(6).reshape(2, 3).sum(-1)", "tensor([3.0, 12.0])"),
    EXPR("arange(6).reshape(2, 3).t().sum(0)", "tensor([3.0, 12.0])"),
    EXPR("arange(4).sum()", "tensor(6.0)"),
    EXPR("mean(arange(4))", "tensor(1.5)"),
    EXPR("arange(6).reshape(2, 3).mean(0)", "tensor([1.5, 2.5, 3.5])"),
    EXPR("matmul(arange(4).reshape(2, 2), arange(4).reshape(2, 2))",
         "tensor([[2.0, 3.0], [6.0, 11.0]])"),
    EXPR("arange(6).reshape(2, 3) @ ones(3, 1)", "tensor([[3.0], [12.0]])"),
    EXPR("arange(3) @ arange(3)", "tensor(5.0)"),
    EXPR("arange(6).reshape(2, 3) @ arange(3)", "tensor([5.0, 14.0])"),
    EXPR("arange(2) @ arange(6).reshape(2, 3)", "tensor([3.0, 4.0, 5.0])"),
    EXPR("arange(6).reshape(3, 2).t() @ ones(3)", "tensor([6.0, 9.0])"),
    EXPR("arange(6).reshape(2, 3) + arange(3)",
         "tensor([[0.0, 2.0, 4.0], [3.0, 5.0, 7.0]])"),
    EXPR("arange(2).reshape(2, 1) * arange(3).reshape(1, 3)",
         "tensor([[0.0, 0.0, 0.0], [0.0, 1.0, 2.0]])"),
    EXPR("(arange(3) + 1).shape", "[3]"),
    EXPR("ones(2, 1, 40) - zeros(4, 1)", "tensor(shape=[2, 4, 40])"),
    EXPR("(ones(2, 1, 3) - zeros(4, 1)).shape", "[2, 4, 3]"),
    EXPR("2 * arange(3)", "tensor([0.0, 2.0, 4.0])"),
    EXPR("arange(3) / 2", "tensor([0.0, 0.5, 1.0])"),
    EXPR("1 - arange(3)", "tensor([1.0, 0.0, -1.0])"),
    EXPR("arange(3) + True", "tensor([1.0, 2.0, 3.0])"),
    EXPR("tensor([-7, 7]) // 2", "tensor([-4.0, 3.0])"),
    EXPR("tensor([-7, 7]) % 3", "tensor([2.0, 1.0])"),
    EXPR("tensor([1, 2]) / 0", "tensor([inf, inf])"),
    EXPR("arange(3) > 1", "tensor([0.0, 0.0, 1.0])"),
    EXPR("arange(3) == tensor([0, 5, 2])", "tensor([1.0, 0.0, 1.0])"),
    EXPR("arange(3) != 1", "tensor([1.0, 0.0, 1.0])"),
    EXPR("arange(3) <= 1", "tensor([1.0, 1.0, 0.0])"),
    EXPR("arange(3) >= 1", "tensor([0.0, 1.0, 1.0])"),
    EXPR("arange(3) < 1", "tensor([1.0, 0.0, 0.0])"),
    EXPR("-arange(2)", "tensor([-0.0, -1.0])"),
    EXPR("+arange(2)", "tensor([0.0, 1.0])"),
    EXPR("len(ones(4, 2))", "4"),
    EXPR("ones(2) * tensor(3)", "tensor([3.0, 3.0])"),
    EXPR("zeros(0, 3) + ones(3)", "tensor([])"),
    EXPR("arange(100)", "tensor(shape=[100])"),
};

static const golden types[] = {
    EXPR("isinstance(ones(1), 'tensor')", "True"),
    EXPR("isinstance(1, 'int')", "True"),
    EXPR("isinstance(True, 'int')", "True"),
    EXPR("isinstance(True, 'bool')", "True"),
    EXPR("isinstance(1, 'bool')", "False"),
    EXPR("isinstance(1.0, 'float')", "True"),
    EXPR("isinstance(1, 'float')", "False"),
    EXPR("isinstance([], 'list')", "True"),
    EXPR("isinstance(None, 'none')", "True"),
    EXPR("isinstance('s', 'str')", "True"),
    EXPR("isinstance(ones(1), 'list')", "False"),
    /* bare type names and tuples of them, as in Python */
    EXPR("isinstance(ones(1), tensor)", "True"),
    EXPR("isinstance(1, int)", "True"),
    EXPR("isinstance(True, int)", "True"),
    EXPR("isinstance(True, bool)", "True"),
    EXPR("isinstance(1, bool)", "False"),
    EXPR("isinstance(1.0, float)", "True"),
    EXPR("isinstance(1, float)", "False"),
    EXPR("isinstance([1], list)", "True"),
    EXPR("isinstance('s', str)", "True"),
    EXPR("isinstance(None, int)", "False"),
    EXPR("isinstance(2.5, (int, float))", "True"),
    EXPR("isinstance(2, (float, int))", "True"),
    EXPR("isinstance(False, (float, int))", "True"),
    EXPR("isinstance([], (int, float))", "False"),
    EXPR("isinstance(ones(2), (int, (list, (tensor,))))", "True"),
    EXPR("isinstance(1, ())", "False"),
    EXPR("isinstance(None, (int, 'none'))", "True"),
    EXPR("isinstance(1, (int,),)", "True"),
    EXPR("isinstance(1, (int, 'number'))", "True"), /* stops at a match */
    EXPR("[isinstance(3, int), (1 + 2) * 2, (3)]", "[True, 6, 3]"),
    /* a local variable shadows a type name, as in Python */
    PROG("def main():\n"
         "    int = 'float'\n"
         "    return isinstance(2.5, int)\n", "True"),
    EXPR("[rank(), world_size()]", "[0, 1]"),
    EXPR("all_reduce(arange(3))", "tensor([0.0, 1.0, 2.0])"),
    EXPR("all_reduce(4)", "4"),
    EXPR("all_reduce(0.5)", "0.5"),
};

static const golden truth[] = {
    PROG("def main():\n    if tensor([2]):\n        return 'yes'\n"
         "    return 'no'\n", "'yes'"),
    PROG("def main():\n    if sum(zeros(3)):\n        return 'yes'\n"
         "    return 'no'\n", "'no'"),
    PROG("def main():\n    if '':\n        return 1\n    return 2\n", "2"),
    PROG("def main():\n    if None:\n        return 1\n    return 2\n", "2"),
    PROG("def main():\n    x = ones(2)\n    if x.shape[0] == 2:\n"
         "        return 'two'\n    return 'other'\n", "'two'"),
};

static const golden printing[] = {
    PRINTS("def main():\n    print('hello', 3, 2.5, None, True)\n", "None",
           "[rank 0] hello 3 2.5 None True\n"),
    PRINTS("def main():\n    print([1, 'a', [2.0]])\n    print()\n"
           "    print(arange(3).reshape(3, 1))\n    return 1\n", "1",
           "[rank 0] [1, 'a', [2.0]]\n[rank 0]\n"
           "[rank 0] tensor([[0.0], [1.0], [2.0]])\n"),
    PRINTS("def main():\n    x = ones(2)\n    print('x', x)\n"
           "    return x * 2\n", "tensor([2.0, 2.0])",
           "[rank 0] x tensor([1.0, 1.0])\n"),
    PRINTS("def main():\n    for i in range(3):\n        print(i)\n",
           "None", "[rank 0] 0\n[rank 0] 1\n[rank 0] 2\n"),
};

/* Every diagnostic: lexer, parser, resolver, then run-time errors. */
static const golden errors[] = {
    FAILS("def main():\n"
          "\tx = 1\n",
          "t.tl:2:1: error: tab in indentation; indent with spaces\n"
          "\tx = 1\n"
          "^"),
    FAILS("def main():\n"
          "        x = 1\n"
          "    return x\n",
          "t.tl:3:5: error: unindent does not match any outer indentation "
          "level\n"
          "    return x\n"
          "    ^"),
    FAILS("def main():\n"
          "    return 1 $ 2\n",
          "t.tl:2:14: error: unexpected character '$'\n"
          "    return 1 $ 2\n"
          "             ^"),
    FAILS("def main():\n"
          "    return 'abc\n",
          "t.tl:2:12: error: unterminated string literal\n"
          "    return 'abc\n"
          "           ^"),
    FAILS("def main():\n"
          "    return 'a\\qb'\n",
          "t.tl:2:14: error: unknown escape sequence in string\n"
          "    return 'a\\qb'\n"
          "             ^"),
    FAILS("def main():\n"
          "    return 99999999999999999999\n",
          "t.tl:2:12: error: integer literal too large\n"
          "    return 99999999999999999999\n"
          "           ^"),
    FAILS("def main():\n"
          "    return 1abc\n",
          "t.tl:2:12: error: invalid number literal\n"
          "    return 1abc\n"
          "           ^"),
    FAILS("def main():\n"
          "    return (1 + 2\n",
          "t.tl:2:12: error: '(' was never closed\n"
          "    return (1 + 2\n"
          "           ^"),
    FAILS("def main():\n"
          "    return 1 + 2)\n",
          "t.tl:2:17: error: unmatched ')'\n"
          "    return 1 + 2)\n"
          "                ^"),
    FAILS("def main():\n"
          "    while 1:\n"
          "        pass\n",
          "t.tl:2:5: error: 'while' is not supported\n"
          "    while 1:\n"
          "    ^"),
    FAILS("def main():\n"
          "    return 1 + \\\n"
          " 2\n",
          "t.tl:2:16: error: line continuation with '\\' is not supported; "
          "use brackets\n"
          "    return 1 + \\\n"
          "               ^"),
    FAILS("def main()\n"
          "    return 1\n",
          "t.tl:1:11: error: expected ':' after the parameter list, found "
          "end of line\n"
          "def main()\n"
          "          ^"),
    FAILS("def main():\n"
          "    return 1 +\n",
          "t.tl:2:15: error: expected an expression, found end of line\n"
          "    return 1 +\n"
          "              ^"),
    FAILS("x = 1\n",
          "t.tl:1:1: error: only function definitions ('def') are allowed at "
          "the top level\n"
          "x = 1\n"
          "^"),
    FAILS("    def main():\n"
          "        return 1\n",
          "t.tl:1:5: error: unexpected indent\n"
          "    def main():\n"
          "    ^"),
    FAILS("def main():\n"
          "    def inner():\n"
          "        return 1\n"
          "    return 2\n",
          "t.tl:2:5: error: nested functions are not supported\n"
          "    def inner():\n"
          "    ^"),
    FAILS("def main():\n"
          "    1 = 2\n",
          "t.tl:2:5: error: can only assign to a name\n"
          "    1 = 2\n"
          "    ^"),
    FAILS("def main():\n"
          "    return 1 < 2 < 3\n",
          "t.tl:2:18: error: chained comparisons are not supported; use 'and'\n"
          "    return 1 < 2 < 3\n"
          "                 ^"),
    FAILS("def main():\n"
          "    return sum(x=1)\n",
          "t.tl:2:17: error: keyword arguments are not supported\n"
          "    return sum(x=1)\n"
          "                ^"),
    FAILS("def main():\n"
          "    return (1)(2)\n",
          "t.tl:2:15: error: only functions and methods can be called\n"
          "    return (1)(2)\n"
          "              ^"),
    FAILS("def main():\n"
          "    return 1\n"
          "  return 2\n",
          "t.tl:3:3: error: unindent does not match any outer indentation "
          "level\n"
          "  return 2\n"
          "  ^"),
    FAILS("def main():\n"
          "return 1\n",
          "t.tl:2:1: error: expected an indented block, found 'return'\n"
          "return 1\n"
          "^"),
    FAILS("def main():\n"
          "    else:\n"
          "        return 1\n",
          "t.tl:2:5: error: unexpected 'else'\n"
          "    else:\n"
          "    ^"),
    FAILS("def main():\n"
          "    return [1, 2\n"
          "    ]]\n",
          "t.tl:3:6: error: unmatched ']'\n"
          "    ]]\n"
          "     ^"),
    FAILS("def main():\n"
          "    return y\n",
          "t.tl:2:12: error: unknown name 'y'\n"
          "    return y\n"
          "           ^"),
    FAILS("def main():\n"
          "    return foo(1)\n",
          "t.tl:2:12: error: unknown function 'foo'\n"
          "    return foo(1)\n"
          "           ^"),
    FAILS("def f(a, b):\n"
          "    return a\n"
          "def main():\n"
          "    return f(1)\n",
          "t.tl:4:12: error: f() takes 2 arguments, got 1\n"
          "    return f(1)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return relu(1, 2)\n",
          "t.tl:2:12: error: relu() takes 1 argument, got 2\n"
          "    return relu(1, 2)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return reshape(ones(2))\n",
          "t.tl:2:12: error: reshape() takes at least 2 arguments, got 1\n"
          "    return reshape(ones(2))\n"
          "           ^"),
    FAILS("def main():\n"
          "    return cat()\n",
          "t.tl:2:12: error: cat() takes 1 to 2 arguments, got 0\n"
          "    return cat()\n"
          "           ^"),
    FAILS("def main():\n"
          "    x = range(3)\n"
          "    return x\n",
          "t.tl:2:9: error: range() can only be used in a 'for' loop\n"
          "    x = range(3)\n"
          "        ^"),
    FAILS("def f():\n"
          "    return 1\n"
          "def main():\n"
          "    return f + 1\n",
          "t.tl:4:12: error: function 'f' cannot be used as a value\n"
          "    return f + 1\n"
          "           ^"),
    FAILS("def main():\n"
          "    return ones(2).foo()\n",
          "t.tl:2:20: error: unknown method 'foo'\n"
          "    return ones(2).foo()\n"
          "                   ^"),
    FAILS("def main():\n"
          "    return ones(2).bar\n",
          "t.tl:2:20: error: unknown attribute 'bar'\n"
          "    return ones(2).bar\n"
          "                   ^"),
    FAILS("def main():\n"
          "    return ones(2).t\n",
          "t.tl:2:20: error: method 't' must be called: t()\n"
          "    return ones(2).t\n"
          "                   ^"),
    FAILS("def f():\n"
          "    return 1\n"
          "def f():\n"
          "    return 2\n",
          "t.tl:3:5: error: function 'f' is already defined at line 1\n"
          "def f():\n"
          "    ^"),
    FAILS("def sum(x):\n"
          "    return x\n",
          "t.tl:1:5: error: 'sum' is a builtin and cannot be redefined\n"
          "def sum(x):\n"
          "    ^"),
    FAILS("def f(a, a):\n"
          "    return a\n",
          "t.tl:1:5: error: duplicate parameter 'a' in 'f'\n"
          "def f(a, a):\n"
          "    ^"),
    FAILS("def main():\n"
          "    return x(1)\n",
          "t.tl:2:12: error: unknown function 'x'\n"
          "    return x(1)\n"
          "           ^"),
    FAILS("def main():\n"
          "    x = 1\n"
          "    return x(1)\n",
          "t.tl:3:12: error: 'x' is a variable, not a function\n"
          "    return x(1)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return ones(2, 3) + ones(4)\n",
          "t.tl:2:23: error: shape mismatch: [2, 3] and [4] cannot be "
          "broadcast (dimension 1: 3 vs 4)\n"
          "    return ones(2, 3) + ones(4)\n"
          "                      ^"),
    FAILS("def main():\n"
          "    return ones(2, 3) @ ones(2, 3)\n",
          "t.tl:2:23: error: shape mismatch: matmul [2, 3] @ [2, 3] (3 != 2)\n"
          "    return ones(2, 3) @ ones(2, 3)\n"
          "                      ^"),
    FAILS("def main():\n"
          "    return ones(2, 3, 4) @ ones(4)\n",
          "t.tl:2:26: error: matmul needs 1-d or 2-d tensors, got [2, 3, 4] "
          "@ [4]\n"
          "    return ones(2, 3, 4) @ ones(4)\n"
          "                         ^"),
    FAILS("def main():\n"
          "    return ones(2) @ 3\n",
          "t.tl:2:20: error: unsupported operand types for @: 'tensor' and "
          "'int'\n"
          "    return ones(2) @ 3\n"
          "                   ^"),
    FAILS("def main():\n"
          "    return [1] + 2\n",
          "t.tl:2:16: error: unsupported operand types for +: 'list' and "
          "'int'\n"
          "    return [1] + 2\n"
          "               ^"),
    FAILS("def main():\n"
          "    return 'a' * ones(2)\n",
          "t.tl:2:16: error: unsupported operand types for *: 'str' and "
          "'tensor'\n"
          "    return 'a' * ones(2)\n"
          "               ^"),
    FAILS("def main():\n"
          "    return 1 // 0\n",
          "t.tl:2:14: error: integer division by zero\n"
          "    return 1 // 0\n"
          "             ^"),
    FAILS("def main():\n"
          "    return 1 % 0\n",
          "t.tl:2:14: error: integer modulo by zero\n"
          "    return 1 % 0\n"
          "             ^"),
    FAILS("def main():\n"
          "    return 5 / 0\n",
          "t.tl:2:14: error: division by zero\n"
          "    return 5 / 0\n"
          "             ^"),
    FAILS("def main():\n"
          "    return 5.0 / 0\n",
          "t.tl:2:16: error: float division by zero\n"
          "    return 5.0 / 0\n"
          "               ^"),
    FAILS("def main():\n"
          "    return 5.0 // 0.0\n",
          "t.tl:2:16: error: float floor division by zero\n"
          "    return 5.0 // 0.0\n"
          "               ^"),
    FAILS("def main():\n"
          "    return 5.5 % 0\n",
          "t.tl:2:16: error: float modulo by zero\n"
          "    return 5.5 % 0\n"
          "               ^"),
    FAILS("def main():\n"
          "    return 9223372036854775807 + 1\n",
          "t.tl:2:32: error: integer overflow in +\n"
          "    return 9223372036854775807 + 1\n"
          "                               ^"),
    FAILS("def main():\n"
          "    return -9223372036854775807 * 2\n",
          "t.tl:2:33: error: integer overflow in *\n"
          "    return -9223372036854775807 * 2\n"
          "                                ^"),
    FAILS("def main():\n"
          "    x = -9223372036854775807 - 1\n"
          "    return -x\n",
          "t.tl:3:12: error: integer overflow in unary -\n"
          "    return -x\n"
          "           ^"),
    FAILS("def main():\n"
          "    x = -9223372036854775807 - 1\n"
          "    return x // -1\n",
          "t.tl:3:14: error: integer overflow in //\n"
          "    return x // -1\n"
          "             ^"),
    FAILS("def main():\n"
          "    return [1, 2][2]\n",
          "t.tl:2:18: error: list index 2 out of range for a list of 2 items\n"
          "    return [1, 2][2]\n"
          "                 ^"),
    FAILS("def main():\n"
          "    return [1, 2][-3]\n",
          "t.tl:2:18: error: list index -3 out of range for a list of 2 items\n"
          "    return [1, 2][-3]\n"
          "                 ^"),
    FAILS("def main():\n"
          "    return [1, 2][1.0]\n",
          "t.tl:2:18: error: list indices must be ints, got float\n"
          "    return [1, 2][1.0]\n"
          "                 ^"),
    FAILS("def main():\n"
          "    return ones(3)[0]\n",
          "t.tl:2:19: error: only lists can be indexed, got tensor\n"
          "    return ones(3)[0]\n"
          "                  ^"),
    FAILS("def main():\n"
          "    if 0:\n"
          "        y = 1\n"
          "    return y\n",
          "t.tl:4:12: error: local variable 'y' is used before it is assigned\n"
          "    return y\n"
          "           ^"),
    FAILS("def main():\n"
          "    y += 1\n"
          "    return y\n",
          "t.tl:2:5: error: local variable 'y' is used before it is assigned\n"
          "    y += 1\n"
          "    ^"),
    FAILS("def main():\n"
          "    if ones(2):\n"
          "        return 1\n",
          "t.tl:2:8: error: the truth value of a tensor with 2 elements is "
          "ambiguous\n"
          "    if ones(2):\n"
          "       ^"),
    FAILS("def main():\n"
          "    return ones(2) and 1\n",
          "t.tl:2:20: error: the truth value of a tensor with 2 elements is "
          "ambiguous\n"
          "    return ones(2) and 1\n"
          "                   ^"),
    FAILS("def main():\n"
          "    return main()\n",
          "t.tl:2:12: error: recursion depth limit exceeded (64 calls deep, "
          "in 'main')\n"
          "    return main()\n"
          "           ^"),
    FAILS("def main():\n"
          "    x = 0\n"
          "    for i in range(100000000):\n"
          "        x += i\n"
          "    return x\n",
          "t.tl:4:9: error: step budget exhausted (limit 1000000 steps)\n"
          "        x += i\n"
          "        ^"),
    FAILS("def main():\n"
          "    return arange(6).reshape(4, -1)\n",
          "t.tl:2:22: error: reshape: cannot view a tensor of shape [6] (6 "
          "elements) with the requested shape\n"
          "    return arange(6).reshape(4, -1)\n"
          "                     ^"),
    FAILS("def main():\n"
          "    return arange(6).reshape(-1, -1)\n",
          "t.tl:2:22: error: reshape: invalid size -1 (only one -1 is "
          "allowed)\n"
          "    return arange(6).reshape(-1, -1)\n"
          "                     ^"),
    FAILS("def main():\n"
          "    return cat([ones(2, 3), ones(2, 4)])\n",
          "t.tl:2:12: error: shape mismatch: cat of [2, 3] and [2, 4] (item "
          "1) along dimension 0\n"
          "    return cat([ones(2, 3), ones(2, 4)])\n"
          "           ^"),
    FAILS("def main():\n"
          "    return cat([ones(2), 1])\n",
          "t.tl:2:12: error: cat(): item 1 is int, not a tensor\n"
          "    return cat([ones(2), 1])\n"
          "           ^"),
    FAILS("def main():\n"
          "    return cat([])\n",
          "t.tl:2:12: error: cat needs at least one tensor\n"
          "    return cat([])\n"
          "           ^"),
    FAILS("def main():\n"
          "    return cat(ones(2))\n",
          "t.tl:2:12: error: cat(): argument 1 must be a list of tensors, "
          "got tensor\n"
          "    return cat(ones(2))\n"
          "           ^"),
    FAILS("def main():\n"
          "    return ones(2).sum(1)\n",
          "t.tl:2:20: error: dimension 1 out of range for a 1-d tensor "
          "(expected -1 to 0)\n"
          "    return ones(2).sum(1)\n"
          "                   ^"),
    FAILS("def main():\n"
          "    return ones(2, 2).transpose(0, 2)\n",
          "t.tl:2:23: error: dimension 2 out of range for a 2-d tensor "
          "(expected -2 to 1)\n"
          "    return ones(2, 2).transpose(0, 2)\n"
          "                      ^"),
    FAILS("def main():\n"
          "    return tensor(1).size(0)\n",
          "t.tl:2:22: error: dimension 0 out of range for a 0-d tensor\n"
          "    return tensor(1).size(0)\n"
          "                     ^"),
    FAILS("def main():\n"
          "    return ones(100000, 100000)\n",
          "t.tl:2:12: error: tensor too large (limit 67108864 elements)\n"
          "    return ones(100000, 100000)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return ones(-1)\n",
          "t.tl:2:12: error: negative size -1 in dimension 0\n"
          "    return ones(-1)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return ones(1, 1, 1, 1, 1, 1, 1, 1, 1)\n",
          "t.tl:2:12: error: ones(): tensors have at most 8 dimensions\n"
          "    return ones(1, 1, 1, 1, 1, 1, 1, 1, 1)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return ones(2.5)\n",
          "t.tl:2:12: error: ones(): sizes must be ints, got float\n"
          "    return ones(2.5)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return isinstance(1, 'number')\n",
          "t.tl:2:12: error: isinstance(): unknown type name 'number' "
          "(expected tensor, int, float, bool, list, str or none)\n"
          "    return isinstance(1, 'number')\n"
          "           ^"),
    FAILS("def main():\n"
          "    return isinstance(1, 2)\n",
          "t.tl:2:12: error: isinstance(): argument 2 must be a type, a type "
          "name string or a tuple of them, got int\n"
          "    return isinstance(1, 2)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return isinstance(1, (float, 2.5))\n",
          "t.tl:2:12: error: isinstance(): argument 2 must be a type, a type "
          "name string or a tuple of them, got float\n"
          "    return isinstance(1, (float, 2.5))\n"
          "           ^"),
    FAILS("def main():\n"
          "    return isinstance(1, None)\n",
          "t.tl:2:12: error: isinstance(): argument 2 must be a type, a type "
          "name string or a tuple of them, got none\n"
          "    return isinstance(1, None)\n"
          "           ^"),
    FAILS("def main(v):\n"
          "    return isinstance(v, foo)\n",
          "t.tl:2:26: error: isinstance(): 'foo' is not a type (expected "
          "tensor, int, float, bool, list, str or a tuple of them)\n"
          "    return isinstance(v, foo)\n"
          "                         ^"),
    FAILS("def main(v):\n"
          "    return isinstance(v, (int, relu))\n",
          "t.tl:2:32: error: isinstance(): 'relu' is not a type (expected "
          "tensor, int, float, bool, list, str or a tuple of them)\n"
          "    return isinstance(v, (int, relu))\n"
          "                               ^"),
    FAILS("def main():\n"
          "    return isinstance(1, (float, 'number'))\n",
          "t.tl:2:12: error: isinstance(): unknown type name 'number' "
          "(expected tensor, int, float, bool, list, str or none)\n"
          "    return isinstance(1, (float, 'number'))\n"
          "           ^"),
    FAILS("def main():\n"
          "    return (1, 2)\n",
          "t.tl:2:12: error: tuples are not supported (only as the type "
          "argument of isinstance)\n"
          "    return (1, 2)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return [isinstance(1, int), ()]\n",
          "t.tl:2:33: error: tuples are not supported (only as the type "
          "argument of isinstance)\n"
          "    return [isinstance(1, int), ()]\n"
          "                                ^"),
    FAILS("def main():\n"
          "    return isinstance(1, (int float))\n",
          "t.tl:2:31: error: expected ')' to close '(', found name 'float'\n"
          "    return isinstance(1, (int float))\n"
          "                              ^"),
    FAILS("def main():\n"
          "    for x in ones(3):\n"
          "        pass\n",
          "t.tl:2:14: error: a for loop iterates over range(...) or a list, "
          "not tensor\n"
          "    for x in ones(3):\n"
          "             ^"),
    FAILS("def main():\n"
          "    for i in range(1.5):\n"
          "        pass\n",
          "t.tl:2:20: error: range() arguments must be ints, got float\n"
          "    for i in range(1.5):\n"
          "                   ^"),
    FAILS("def main():\n"
          "    for i in range(0, 5, 0):\n"
          "        pass\n",
          "t.tl:2:14: error: range() step must not be zero\n"
          "    for i in range(0, 5, 0):\n"
          "             ^"),
    FAILS("def main():\n"
          "    return ones(2, 2, 2).t()\n",
          "t.tl:2:26: error: t() needs a tensor of at most 2 dimensions, got "
          "3\n"
          "    return ones(2, 2, 2).t()\n"
          "                         ^"),
    FAILS("def main():\n"
          "    return relu('a')\n",
          "t.tl:2:12: error: relu(): argument 1 must be a tensor or a "
          "number, got str\n"
          "    return relu('a')\n"
          "           ^"),
    FAILS("def main():\n"
          "    return exp([1])\n",
          "t.tl:2:12: error: exp(): argument 1 must be a tensor or a number, "
          "got list\n"
          "    return exp([1])\n"
          "           ^"),
    FAILS("def main():\n"
          "    return len(tensor(1))\n",
          "t.tl:2:12: error: len() of a 0-d tensor\n"
          "    return len(tensor(1))\n"
          "           ^"),
    FAILS("def main():\n"
          "    return len(3)\n",
          "t.tl:2:12: error: len(): argument 1 must be a list, a tensor or a "
          "string, got int\n"
          "    return len(3)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return tensor([[1, 2], [3]])\n",
          "t.tl:2:12: error: tensor(): nested lists must be rectangular "
          "lists of numbers\n"
          "    return tensor([[1, 2], [3]])\n"
          "           ^"),
    FAILS("def main():\n"
          "    return tensor(['a'])\n",
          "t.tl:2:12: error: tensor(): argument 1 must be a number or a "
          "nested list of numbers, got str\n"
          "    return tensor(['a'])\n"
          "           ^"),
    FAILS("def main():\n"
          "    return -'a'\n",
          "t.tl:2:12: error: bad operand type for unary -: 'str'\n"
          "    return -'a'\n"
          "           ^"),
    FAILS("def main():\n"
          "    return +None\n",
          "t.tl:2:12: error: bad operand type for unary +: 'none'\n"
          "    return +None\n"
          "           ^"),
    FAILS("def main():\n"
          "    return 'a' < 'b'\n",
          "t.tl:2:16: error: unsupported operand types for <: 'str' and 'str'\n"
          "    return 'a' < 'b'\n"
          "               ^"),
    FAILS("def main():\n"
          "    return [ones(1)] == [ones(1)]\n",
          "t.tl:2:22: error: cannot compare lists holding tensors with ==\n"
          "    return [ones(1)] == [ones(1)]\n"
          "                     ^"),
    FAILS("def main():\n"
          "    return mean([1, 2])\n",
          "t.tl:2:12: error: mean(): argument 1 must be a tensor, got list\n"
          "    return mean([1, 2])\n"
          "           ^"),
    FAILS("def main():\n"
          "    return sum([1, 'a'])\n",
          "t.tl:2:12: error: unsupported operand types for +: 'int' and 'str'\n"
          "    return sum([1, 'a'])\n"
          "           ^"),
    FAILS("def main():\n"
          "    return ones(2).shape.shape\n",
          "t.tl:2:26: error: '.shape' needs a tensor, got list\n"
          "    return ones(2).shape.shape\n"
          "                         ^"),
    FAILS("def main():\n"
          "    return [1].shape\n",
          "t.tl:2:16: error: '.shape' needs a tensor, got list\n"
          "    return [1].shape\n"
          "               ^"),
    FAILS("def main():\n"
          "    return transpose(ones(2), 0, 'a')\n",
          "t.tl:2:12: error: transpose(): argument 3 must be an int, got str\n"
          "    return transpose(ones(2), 0, 'a')\n"
          "           ^"),
    FAILS("def main():\n"
          "    return arange(1, 2.5)\n",
          "t.tl:2:12: error: arange(): argument 2 must be an int, got float\n"
          "    return arange(1, 2.5)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return arange(0, 100000000)\n",
          "t.tl:2:12: error: arange(): tensor too large (limit 67108864 "
          "elements)\n"
          "    return arange(0, 100000000)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return matmul(ones(2), 1)\n",
          "t.tl:2:12: error: matmul(): argument 2 must be a tensor, got int\n"
          "    return matmul(ones(2), 1)\n"
          "           ^"),
    FAILS("def main():\n"
          "    return all_reduce('a')\n",
          "t.tl:2:12: error: all_reduce(): argument 1 must be a tensor, an "
          "int or a float, got str\n"
          "    return all_reduce('a')\n"
          "           ^"),
    FAILS("def main():\n"
          "    xs = []\n"
          "    for i in range(200):\n"
          "        xs = [xs]\n"
          "    return xs\n",
          "t.tl:4:14: error: lists nested too deeply (limit 100)\n"
          "        xs = [xs]\n"
          "             ^"),
};

CCOL_TEST(test_numbers)
{
    GOLDEN_TABLE(numbers);
}

CCOL_TEST(test_logic)
{
    GOLDEN_TABLE(logic);
}

CCOL_TEST(test_statements)
{
    GOLDEN_TABLE(statements);
}

CCOL_TEST(test_lists)
{
    GOLDEN_TABLE(lists);
}

CCOL_TEST(test_tensors)
{
    GOLDEN_TABLE(tensors);
}

CCOL_TEST(test_types)
{
    GOLDEN_TABLE(types);
}

CCOL_TEST(test_truth)
{
    GOLDEN_TABLE(truth);
}

CCOL_TEST(test_print)
{
    GOLDEN_TABLE(printing);
}

CCOL_TEST(test_errors)
{
    GOLDEN_TABLE(errors);
}

/* Builds a program text of `n` repetitions of `unit` between `pre` and
 * `post` (for limit tests). */
static char *
repeat(const char *pre, const char *unit, int n, const char *post)
{
    size_t len = strlen(pre) + strlen(unit) * (size_t)n + strlen(post) + 1;
    char *s = malloc(len);
    strcpy(s, pre);
    for (int i = 0; i < n; i++)
        strcat(s, unit);
    strcat(s, post);
    return s;
}

/* Loads src and checks that the load (or the call of main) fails with a
 * message containing `want`. */
static void
check_limit(const char *src, const char *want)
{
    printed p = { { 0 }, 0 };
    ccol_jit_module *m = golden_module(&p);
    ccol_jit_value *r = NULL;
    ccol_status st = ccol_jit_module_load(m, src, strlen(src), "t.tl");
    if (st == CCOL_OK)
        st = ccol_jit_call(m, "main", NULL, 0, NULL, &r);
    CHECK(st != CCOL_OK);
    CHECK_CONTAINS(ccol_jit_module_errmsg(m), want);
    ccol_jit_value_release(r);
    ccol_jit_module_destroy(m);
}

CCOL_TEST(test_limits)
{
    char *s = repeat("def main():\n    return ", "(", 150, "1\n");
    check_limit(s, "t.tl:2:112: error: brackets nested too deeply (limit "
                   "100)");
    free(s);
    s = repeat("def main():\n    return ", "-", 150, "1\n");
    check_limit(s, "error: nesting too deep (limit 100)");
    free(s);
    s = repeat("def main():\n    return 1", " + 1", 1500, "\n");
    check_limit(s, "error: expression too complex (depth limit 1000)");
    free(s);
    s = repeat("def main():\n    x = ones(2)\n    return x", ".t()", 1200,
               "\n");
    check_limit(s, "error: expression too complex");
    free(s);
    char name[300];
    memset(name, 'a', 299);
    name[299] = '\0';
    s = repeat("def ", name, 1, "():\n    return 1\n");
    check_limit(s, "t.tl:1:5: error: name too long (limit 256)");
    free(s);
}

CCOL_TEST(test_run_limits)
{
    /* 101 nested ifs: indentation levels exceed the nesting limit. */
    char *src = malloc(200000);
    strcpy(src, "def main():\n");
    for (int i = 1; i <= 101; i++) {
        size_t n = strlen(src);
        memset(src + n, ' ', (size_t)i);
        strcpy(src + n + (size_t)i, "if 1:\n");
    }
    check_limit(src, "error: too many indentation levels (limit 100)");
    free(src);
    /* The deepest recursion allowed by params, then one more. */
    check_limit("def f(n):\n    return f(n + 1)\ndef main():\n"
                "    return f(0)\n",
                "recursion depth limit exceeded (64 calls deep, in 'f')");
    check_limit("def main():\n    return ones(8192, 8193)\n",
                "tensor too large (limit 67108864 elements)");
    /* A big tensor costs budget in proportion to its size. */
    check_limit("def main():\n    x = 0\n    for i in range(10000):\n"
                "        x = ones(1000, 1000)\n    return x\n",
                "step budget exhausted (limit 1000000 steps)");
}

CCOL_TEST(test_source_limits)
{
    ccol_jit_module *m = NULL;
    CHECK_STATUS(ccol_jit_module_create(NULL, &m), CCOL_OK);
    size_t big = CCOL_JIT_MAX_SOURCE + 1;
    char *s = malloc(big);
    memset(s, '\n', big);
    CHECK_STATUS(ccol_jit_module_load(m, s, big, "big.tl"),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m),
                 "big.tl: source is 1048577 bytes, the limit is 1048576");
    /* Blank source is a valid empty program. */
    CHECK_STATUS(ccol_jit_module_load(m, s, 100, "blank.tl"), CCOL_OK);
    CHECK_EQ(ccol_jit_module_nfuncs(m), 0);
    free(s);
    CHECK_STATUS(ccol_jit_module_load(m, "def f(:)\n", 9, NULL),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STR_EQ(ccol_jit_module_errmsg(m),
                 "<input>:1:7: error: expected name (a parameter name), "
                 "found ':'\ndef f(:)\n      ^");
    /* A NUL byte in the source is an error, not the end of the text. */
    CHECK_STATUS(ccol_jit_module_load(m, "def f():\n    return 1\0\n", 23,
                                      "nul.tl"), CCOL_ERR_INVALID_ARG);
    CHECK_CONTAINS(ccol_jit_module_errmsg(m),
                   "nul.tl:2:13: error: unexpected byte 0x00");
    CHECK_STATUS(ccol_jit_module_load(m, NULL, 3, "x.tl"),
                 CCOL_ERR_INVALID_ARG);
    CHECK_STATUS(ccol_jit_module_load(NULL, "", 0, "x.tl"),
                 CCOL_ERR_INVALID_ARG);
    ccol_jit_module_destroy(m);
    ccol_jit_params bad = { .mask = CCOL_JIT_PARAM_MAX_DEPTH,
                            .max_depth = 1000 };
    CHECK_STATUS(ccol_jit_module_create(&bad, &m), CCOL_ERR_INVALID_ARG);
    CHECK(m == NULL);
    CHECK_STATUS(ccol_jit_module_create(NULL, NULL), CCOL_ERR_INVALID_ARG);
    ccol_jit_module_destroy(NULL);
}

CCOL_TEST_MAIN(CCOL_T(test_errors), CCOL_T(test_limits),
               CCOL_T(test_run_limits), CCOL_T(test_source_limits),
               CCOL_T(test_numbers), CCOL_T(test_logic),
               CCOL_T(test_statements), CCOL_T(test_lists),
               CCOL_T(test_tensors), CCOL_T(test_types), CCOL_T(test_truth),
               CCOL_T(test_print))
