"""Ordinary code keeps its ordinary verdict: a table of HumanEval-style, assert-list, unittest and stdin/stdout
rows, each with correct and subtly wrong solutions (off-by-one, wrong type, wrong case, too slow, too deep,
large and unicode output, trailing whitespace), run through the real ``code`` reward and the real sandbox.

The expected status of every row is what a plain ``python`` run of the same solution and tests gives (pass,
a failed assert, a crash, a hang); the hardening of the sandbox must not flip any of them. Fails on the code
before this change: a function returning a million numbers timed out (or passed the judge's reply limit), and
recursion to just under the default limit failed (the sandbox's own frames counted against it), and a large
module-level global (a 300 MB table) was copied to the judge before any test and scored ``memory``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from harness import get_reward


def _he(body: str) -> str:
    return "def check(candidate):\n" + "".join(f"    {line}\n" for line in body.strip("\n").split("\n"))


# HumanEval style: (entry point, check body, {solution: expected status})
HUMANEVAL = [
    (
        "add",
        "assert candidate(2, 3) == 5\nassert candidate(-1, 1) == 0\nassert candidate(10**20, 1) == 10**20 + 1",
        {
            "def add(a, b):\n    return a + b": "pass",
            "def add(a, b):\n    return a - b": "fail",
            "def add(a, b):\n    return str(a + b)": "fail",  # wrong type
            "def add(a, b):\n    return float(a + b)": "fail",  # 1e20 + 1 is not exact in a float
        },
    ),
    (
        "below_zero",
        "assert candidate([1, 2, -3]) is False\nassert candidate([1, 2, -4, 5]) is True\nassert candidate([]) is False",
        {
            "def below_zero(ops):\n    b = 0\n    for o in ops:\n        b += o\n        if b < 0:\n            return True\n    return False": "pass",
            "def below_zero(ops):\n    b = 0\n    for o in ops:\n        b += o\n        if b <= 0:\n            return True\n    return False": "fail",
            "def below_zero(ops):\n    b = 0\n    for o in ops:\n        b += o\n        if b < 0:\n            return 1\n    return 0": "fail",  # 1 is not True
        },
    ),
    (
        "fib",
        "assert candidate(1) == 1\nassert candidate(10) == 55\nassert candidate(90) == 2880067194370816120",
        {
            "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a": "pass",
            "def fib(n):\n    a, b = 0, 1\n    for _ in range(n - 1):\n        a, b = b, a + b\n    return a": "fail",  # off by one
            "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)": "time_limit",  # exponential
        },
    ),
    (
        "mean_abs_dev",
        "assert abs(candidate([1.0, 2.0, 3.0, 4.0]) - 1.0) < 1e-6\nassert abs(candidate([1.0, 2.0, 3.0]) - 2.0 / 3.0) < 1e-6",
        {
            "def mean_abs_dev(xs):\n    m = sum(xs) / len(xs)\n    return sum(abs(x - m) for x in xs) / len(xs)": "pass",
            "import statistics\ndef mean_abs_dev(xs):\n    m = statistics.median(xs)\n    return sum(abs(x - m) for x in xs) / (len(xs) - 1)": "fail",
            "import numpy as np\ndef mean_abs_dev(xs):\n    a = np.array(xs)\n    return np.abs(a - a.mean()).mean()": "pass",  # numpy scalar
        },
    ),
    (
        "intersperse",
        "assert candidate([], 7) == []\nassert candidate([5, 6, 3, 2], 8) == [5, 8, 6, 8, 3, 8, 2]",
        {
            "def intersperse(xs, d):\n    out = []\n    for i, x in enumerate(xs):\n        if i:\n            out.append(d)\n        out.append(x)\n    return out": "pass",
            "def intersperse(xs, d):\n    out = []\n    for x in xs:\n        out += [x, d]\n    return out": "fail",  # trailing delimiter
            "def intersperse(xs, d):\n    return tuple(intersperse_list(xs, d))\ndef intersperse_list(xs, d):\n    out = []\n    for i, x in enumerate(xs):\n        out += [d, x] if i else [x]\n    return out": "fail",  # tuple
        },
    ),
    (
        "longest",
        "assert candidate([]) is None\nassert candidate(['x', 'yyy', 'zzz']) == 'yyy'",
        {
            "def longest(xs):\n    if not xs:\n        return None\n    return max(xs, key=len)": "pass",
            "def longest(xs):\n    return max(xs, key=len, default='')": "fail",
            "def longest(xs):\n    return sorted(xs, key=len)[-1] if xs else None": "fail",  # the last of the longest
        },
    ),
    (
        "count_distinct",
        "assert candidate('xyzXYZ') == 3\nassert candidate('Jerry jERRY JeRRRY') == 5",
        {
            "def count_distinct(s):\n    return len(set(s.lower()))": "pass",
            "def count_distinct(s):\n    return len(set(s))": "fail",
        },
    ),
    (
        "factorize",
        "assert candidate(2) == [2]\nassert candidate(57) == [3, 19]\nassert candidate(3 * 2 * 3) == [2, 3, 3]",
        {
            "def factorize(n):\n    out, d = [], 2\n    while d * d <= n:\n        while n % d == 0:\n            out.append(d)\n            n //= d\n        d += 1\n    if n > 1:\n        out.append(n)\n    return out": "pass",
            "def factorize(n):\n    out, d = [], 2\n    while d * d <= n:\n        while n % d == 0:\n            out.append(d)\n            n //= d\n        d += 1\n    return out": "fail",
        },
    ),
    (
        "flip_case",
        "assert candidate('') == ''\nassert candidate('Hello!') == 'hELLO!'\nassert candidate('ÄbÇ ß') == 'äBç SS'",
        {
            "def flip_case(s):\n    return s.swapcase()": "pass",
            "def flip_case(s):\n    return ''.join(c.lower() if c.isupper() else c.upper() for c in s)": "pass",
            "def flip_case(s):\n    return s.swapcase().strip()": "pass",
            "def flip_case(s):\n    return s.lower()": "fail",
        },
    ),
    (
        "sort_in_place",
        "xs = [3, 1, 2]\nassert candidate(xs) is None\nassert xs == [1, 2, 3]",
        {
            "def sort_in_place(xs):\n    xs.sort()": "pass",
            "def sort_in_place(xs):\n    return sorted(xs)": "fail",
        },
    ),
    (
        "safe_div",
        "try:\n    candidate(1, 0)\n    assert False, 'no error'\nexcept ZeroDivisionError:\n    pass\nassert candidate(6, 3) == 2",
        {
            "def safe_div(a, b):\n    return a // b": "pass",
            "def safe_div(a, b):\n    return a // b if b else 0": "fail",
            "def safe_div(a, b):\n    if not b:\n        raise ValueError('b')\n    return a // b": "fail",  # an unexpected exception
        },
    ),
    (
        "countdown",
        "assert list(candidate(3)) == [3, 2, 1]\nassert sum(candidate(100)) == 5050",
        {
            "def countdown(n):\n    while n:\n        yield n\n        n -= 1": "pass",
            "def countdown(n):\n    return range(n, 0, -1)": "pass",
            "def countdown(n):\n    return range(n, -1, -1)": "fail",
        },
    ),
    (
        "deep",
        "assert candidate(995) == 995",
        {
            "def deep(n):\n    return 0 if n == 0 else 1 + deep(n - 1)": "pass",  # just under the default limit
            "def deep(n):\n    return 0 if n == 0 else 1 + deep(n - 1) + deep(0) * deep(10**6)": "fail",  # RecursionError in a call
        },
    ),
    (
        "big",
        "r = candidate(10**6)\nassert len(r) == 10**6 and r[-1] == 10**6 - 1",
        {
            "def big(n):\n    return list(range(n))": "pass",  # a million items (seconds and over the reply limit before)
            "def big(n):\n    return list(range(1, n))": "fail",
            "def big(n):\n    return [float(i) for i in range(n)]": "pass",
            "def big(n):\n    return tuple(str(i) for i in range(n))": "fail",  # '999999' is not 999999
        },
    ),
    (
        "greet",
        "assert candidate('wörld') == 'héllo, wörld ✓'",
        {
            "def greet(name):\n    return f'héllo, {name} ✓'": "pass",
            "def greet(name):\n    return f'hello, {name} ✓'": "fail",
        },
    ),
    (
        "sum",
        "assert candidate([1, 2, 3]) == 6\nassert candidate([]) == 0",
        {  # an entry point named like a builtin
            "def sum(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t": "pass",
            "def sum(xs):\n    return len(xs)": "fail",
        },
    ),
    (
        "spin",
        "assert candidate() == 1",
        {
            "def spin():\n    while True:\n        pass": "time_limit",
            "import time\ndef spin():\n    time.sleep(60)\n    return 1": "time_limit",
            "def spin():\n    return 1": "pass",
        },
    ),
    (
        "loud",
        "import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n    candidate(2)\nassert buf.getvalue() == '2\\n4\\n'",
        {
            "def loud(n):\n    print(n)\n    print(n * n)": "pass",
            "def loud(n):\n    print(n, n * n)": "fail",
        },
    ),
]

# Plain asserts (MBPP's list of strings): (tests, {solution: expected status})
ASSERTS = [
    (
        ["assert similar([3, 4, 5], [5, 7, 4]) == (4, 5)", "assert similar([1, 2], [3]) == ()"],
        {
            "def similar(a, b):\n    return tuple(sorted(set(a) & set(b)))": "pass",
            "def similar(a, b):\n    return sorted(set(a) & set(b))": "fail",  # a list, not a tuple
        },
    ),
    (
        ["assert math.isclose(area(2), 12.566, rel_tol=0.001)", "assert area(0) == 0"],
        {
            "import math\ndef area(r):\n    return math.pi * r * r": "pass",
            "import math\ndef area(r):\n    return 3 * r * r": "fail",
        },
    ),
    (
        ["assert is_not_prime(2) == False", "assert is_not_prime(10) == True", "assert is_not_prime(35) == True"],
        {
            "def is_not_prime(n):\n    return any(n % d == 0 for d in range(2, int(n ** 0.5) + 1))": "pass",
            "def is_not_prime(n):\n    return any(n % d == 0 for d in range(2, int(n ** 0.5)))": "fail",  # the range stops before 5: 35 = 5 * 7 is missed
        },
    ),
    (
        ["assert heap_smallest([25, 35, 22, 85], 2) == [22, 25]"],
        {
            "import heapq\ndef heap_smallest(xs, n):\n    return heapq.nsmallest(n, xs)": "pass",
            "import heapq\ndef heap_smallest(xs, n):\n    return heapq.nlargest(n, xs)": "fail",
        },
    ),
    (
        "s = Stack()\ns.push(1)\ns.push(2)\nassert s.pop() == 2\nassert s.size() == 1",
        {
            "class Stack:\n    def __init__(self):\n        self.xs = []\n    def push(self, x):\n        self.xs.append(x)\n    def pop(self):\n        return self.xs.pop()\n    def size(self):\n        return len(self.xs)": "pass",
            "class Stack:\n    def __init__(self):\n        self.xs = []\n    def push(self, x):\n        self.xs.append(x)\n    def pop(self):\n        return self.xs.pop(0)\n    def size(self):\n        return len(self.xs)": "fail",
        },
    ),
    (
        "assert f({'b': 2, 'a': 1}) == {'a': 1, 'b': 2}\nassert f({}) == {}",
        {
            "def f(d):\n    return dict(sorted(d.items()))": "pass",
            "def f(d):\n    return sorted(d.items())": "fail",
        },
    ),
    (
        "assert deep(996) == 996",
        {
            "def deep(n):\n    return 0 if n == 0 else 1 + deep(n - 1)": "pass",  # plain python: up to 998
            "def deep(n):\n    return 0 if n == 0 else 1 + deep(n - 1)\ndeep(1200)": "program_error",
        },
    ),
    (
        "assert is_p[7] == 1 and is_p[8] == 0\nassert len(primes) == 664579 and primes[-1] == 9999991",
        {
            "n = 10**7\nis_p = bytearray([1]) * (n + 1)\nis_p[0] = is_p[1] = 0\nfor i in range(2, int(n ** 0.5) + 1):\n"
            "    if is_p[i]:\n        is_p[i * i::i] = bytes(len(range(i * i, n + 1, i)))\n"
            "primes = [i for i in range(n + 1) if is_p[i]]": "pass",  # module-level sieve globals
        },
    ),
    (
        "assert f() == 1",
        {
            "table = bytearray(300 << 20)\ndef f():\n    return 1": "pass",  # a 300 MB global (it scored memory before)
            "table = [0] * (3 * 10**7)\ndef f():\n    return 1": "pass",
        },
    ),
    (
        "assert g() is None\nassert h(3) == {1, 2, 3}",
        {
            "def g():\n    pass\ndef h(n):\n    return set(range(1, n + 1))": "pass",
            "def g():\n    return 0\ndef h(n):\n    return set(range(1, n + 1))": "fail",
            "def g():\n    pass\ndef h(n):\n    return frozenset(range(1, n + 1))": "pass",  # frozenset == set
        },
    ),
    (
        "assert parse('3.50') == 3.5\nassert parse('x') is None",
        {
            "def parse(s):\n    try:\n        return float(s)\n    except ValueError:\n        return None": "pass",
            "def parse(s):\n    return float(s)": "fail",  # ValueError in a call
            "def parse(s):\n    return float(s) if s[0].isdigit() else None\nparse('')": "program_error",  # crashes at load
            "def parse(s:\n    return 1": "program_error",  # syntax error
        },
    ),
    (  # all()/any() in an assert: every item is asked, the outcome is still the builtin's
        [
            "assert all(sq(x) == x * x for x in range(5))",
            "assert any(sq(x) == 9 for x in range(5))",
            "assert not any(sq(x) < 0 for x in [1, 'a'])",
        ],
        {
            "def sq(x):\n    return x * x": "fail",  # 'a' * 'a' raises in the third assert, as in a plain run
            "def sq(x):\n    if isinstance(x, str):\n        return 1\n    return x * x": "pass",
            "def sq(x):\n    return x * x if type(x) is int else 0": "pass",
            "def sq(x):\n    if x == 4:\n        raise ValueError\n    return x * x if type(x) is int else 1": "fail",
            "def sq(x):\n    return x + x": "fail",
        },
    ),
    (  # assertion calls on a TestCase made at module level: cases like asserts, same verdicts as a plain run
        [
            "import unittest\ntc = unittest.TestCase()",
            "tc.assertEqual(dbl(2), 4)",
            "tc.assertListEqual([dbl(x) for x in range(3)], [0, 2, 4])",
            "tc.assertRaises(TypeError, dbl, None)",
        ],
        {
            "def dbl(x):\n    return 2 * x": "pass",
            "def dbl(x):\n    return x + x if x is not None else 0": "fail",
            "def dbl(x):\n    return x * x": "fail",
            "def dbl(x):\n    return [2 * x]": "fail",
        },
    ),
    (  # all() stops at the first False before an item that raises: the plain run fails there, so does this
        ["assert all(inv(x) > 0 for x in [1, -1, 0])", "assert any(inv(x) > 0 for x in [2, 0])"],
        {
            "def inv(x):\n    return 1 / x": "fail",  # the first assert fails at -1 (its 0 is never reached)
            "def inv(x):\n    return 1 / x if x else 1": "fail",
            "def inv(x):\n    return abs(1 / x) if x else 1": "pass",
        },
    ),
]

UNITTEST = [
    (
        (
            "import unittest\nclass T(unittest.TestCase):\n    def test_in(self):\n        self.assertIn(3, evens(7))\n"
            "    def test_dict(self):\n        self.assertDictEqual(count('aab'), {'a': 2, 'b': 1})\n"
            "    def test_lines(self):\n        self.assertEqual(show([1, 2]), '1\\n2\\n')\n"
            "    def test_set(self):\n        self.assertSetEqual(set(evens(4)), {0, 2})\n"
            "    def test_count(self):\n        self.assertCountEqual(evens(5), [4, 0, 2])\n"
        ),
        {
            "from collections import Counter\ndef evens(n):\n    return (i for i in range(n) if i % 2 == 0 or i == 3)\n"
            "def count(s):\n    return dict(Counter(s))\ndef show(xs):\n    return ''.join(f'{x}\\n' for x in xs)": "fail",
            "from collections import Counter\ndef evens(n):\n    return [i for i in range(n) if i % 2 == 0 or i == 3]\n"
            "def count(s):\n    return dict(Counter(s))\ndef show(xs):\n    return ''.join(f'{x}\\n' for x in xs)": "fail",
            "from collections import Counter\nclass E:\n    def __init__(self, n):\n        self.n = n\n"
            "    def __iter__(self):\n        return iter([i for i in range(self.n) if i % 2 == 0] + [3] * (self.n == 7))\n"
            "def evens(n):\n    return E(n)\ndef count(s):\n    return dict(Counter(s))\n"
            "def show(xs):\n    return ''.join(f'{x}\\n' for x in xs)": "pass",
            "from collections import Counter\nclass E:\n    def __init__(self, n):\n        self.n = n\n"
            "    def __iter__(self):\n        return iter([i for i in range(self.n) if i % 2 == 0])\n"
            "def evens(n):\n    return E(n)\ndef count(s):\n    return dict(Counter(s))\n"
            "def show(xs):\n    return ''.join(f'{x}\\n' for x in xs)": "fail",
        },
    ),
    (
        (
            "import unittest\nclass T(unittest.TestCase):\n    def test_small(self):\n        self.assertEqual(rev('abc'), 'cba')\n"
            "    def test_empty(self):\n        self.assertEqual(rev(''), '')\n    def test_raises(self):\n"
            "        with self.assertRaises(TypeError):\n            rev(None)\n"
        ),
        {
            "def rev(s):\n    return s[::-1]": "pass",
            "def rev(s):\n    return ''.join(reversed(s)) if s is not None else ''": "fail",
            "def rev(s):\n    return s[::-1][1:]": "fail",
        },
    ),
    (
        (
            "import unittest\nclass T(unittest.TestCase):\n    def test_close(self):\n        self.assertAlmostEqual(half(1), 0.5)\n"
            "    def test_list(self):\n        self.assertListEqual(halves([2, 4]), [1.0, 2.0])\n"
        ),
        {
            "def half(x):\n    return x / 2\ndef halves(xs):\n    return [half(x) for x in xs]": "pass",
            "def half(x):\n    return x // 2\ndef halves(xs):\n    return [half(x) for x in xs]": "fail",
        },
    ),
]

SUM = "a, b = map(int, input().split())\nprint(a + b)"
# stdin/stdout: (cases, {program: expected status})
STDIO = [
    (
        [{"input": "1 2\n", "output": "3\n"}, {"input": "-5 5\n", "output": "0"}],
        {
            SUM: "pass",
            "a, b = map(int, input().split())\nprint(a + b, end='   \\n\\n\\n')": "pass",  # trailing blanks
            "a, b = map(int, input().split())\nprint(f'{a + b}  ')": "pass",  # trailing spaces
            "a, b = map(int, input().split())\nprint(' ' + str(a + b))": "fail",  # leading space
            "a, b = map(int, input().split())\nprint('Answer:', a + b)": "fail",
            "a, b = map(int, input().split())\nprint(a + b)\nprint()\nprint('debug')": "fail",  # extra line
            "a, b = map(int, input().split())\nprint(a + b + (a == 1))": "fail",  # off by one
            "import sys\na, b = map(int, input().split())\nsys.stderr.write(str(a + b))": "fail",  # stderr only
            "a, b = map(int, input().split())\nprint(a + b)\nraise SystemExit(3)": "program_error",  # non-zero exit
            "a, b = map(int, input().split())\nprint(a + b)\ninput()": "program_error",  # EOFError
            "a, b = map(int, input().split(','))\nprint(a + b)": "program_error",
            "import sys\nprint(sum(map(int, sys.stdin.read().split())), end='\\r\\n')": "pass",  # CRLF
        },
    ),
    (
        {"inputs": ["YES\n", "no\n"], "outputs": ["yes\n", "no\n"]},
        {
            "print(input().lower())": "pass",
            "print(input())": "fail",  # case
            "print(input().lower().capitalize())": "fail",
        },
    ),
    (
        [{"input": "3\n", "output": "1.5\n"}],
        {
            "print(int(input()) / 2)": "pass",
            "print(f'{int(input()) / 2:.2f}')": "fail",  # 1.50 is not 1.5 line by line
            "print(int(input()) // 2)": "fail",
        },
    ),
    (
        [{"input": "100000\n", "output": "".join(f"{i}\n" for i in range(100000))}],
        {
            "import sys\nn = int(input())\nsys.stdout.write(''.join(f'{i}\\n' for i in range(n)))": "pass",
            "n = int(input())\nfor i in range(n):\n    print(i)": "pass",
            "n = int(input())\nfor i in range(n - 1):\n    print(i)": "fail",
        },
    ),
    (
        [{"input": "wörld\n", "output": "héllo wörld ✓ 🎉\n"}],
        {
            "print('héllo', input(), '✓ 🎉')": "pass",
            "import sys\nsys.stdout.buffer.write(('héllo ' + input() + ' ✓ 🎉\\n').encode())": "pass",
            "print('hello', input(), '✓ 🎉')": "fail",
        },
    ),
    (
        [{"input": "996\n", "output": "996\n"}],
        {
            "def d(n):\n    return 0 if n == 0 else 1 + d(n - 1)\nprint(d(int(input())))": "pass",  # plain: up to 998
        },
    ),
    (
        [{"input": "4000\n", "output": "4000\n"}],
        {
            "import sys\nsys.setrecursionlimit(10000)\ndef d(n):\n    return 0 if n == 0 else 1 + d(n - 1)\nprint(d(int(input())))": "pass",
            "def d(n):\n    return 0 if n == 0 else 1 + d(n - 1)\nprint(d(int(input())))": "program_error",  # RecursionError
            "while True:\n    pass": "time_limit",
            "import time\ntime.sleep(60)": "time_limit",
            "x = bytearray(4 << 30)": "memory",
            "print('x' * (9 << 20))": "fail",  # output over the cap
        },
    ),
]


def _rows() -> list[tuple[str, dict, str, str]]:
    rows: list[tuple[str, dict, str, str]] = []
    for ep, body, sols in HUMANEVAL:
        for i, (sol, want) in enumerate(sols.items()):
            rows.append((f"he-{ep}-{i}", {"test": _he(body), "entry_point": ep}, sol, want))
    for k, (tests, sols) in enumerate(ASSERTS):
        for i, (sol, want) in enumerate(sols.items()):
            rows.append((f"assert-{k}-{i}", {"tests": tests}, sol, want))
    for k, (tests, sols) in enumerate(UNITTEST):
        for i, (sol, want) in enumerate(sols.items()):
            rows.append((f"unittest-{k}-{i}", {"tests": tests}, sol, want))
    for k, (cases, sols) in enumerate(STDIO):
        for i, (sol, want) in enumerate(sols.items()):
            rows.append((f"stdio-{k}-{i}", {"tests": cases}, sol, want))
    return rows


ROWS = _rows()


def test_the_table_is_large_and_mixed():
    wants = [r[3] for r in ROWS]
    assert len(ROWS) >= 100 and {"pass", "fail", "program_error", "time_limit", "memory"} <= set(wants)


def test_every_ordinary_row_keeps_its_verdict():
    """Every row's status is the plain-Python verdict; a passing row scores 1.0 and every other 0.0."""
    fn = get_reward("code", timeout=2.0, memory_mb=512)

    def one(row: tuple[str, dict, str, str]) -> tuple[str, str, str, object]:
        name, sample, sol, want = row
        s = fn(sample, f"Here is my solution:\n```python\n{sol}\n```\n")
        return name, want, s.status, (s.value, s.info.get("reason"))

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(one, ROWS))
    wrong = [r for r in results if r[1] != r[2] or r[3][0] != (1.0 if r[1] == "pass" else 0.0)]
    assert wrong == [], "\n".join(map(str, wrong))
