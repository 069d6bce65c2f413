"""Controls: correct solutions of every common shape must pass; wrong ones must fail."""

from __future__ import annotations

import pytest

PASSING = {
    "class_method": (
        "class Solution:\n    def twice(self, x):\n        return 2 * x\n",
        "assert Solution().twice(4) == 8\ns = Solution()\nassert s.twice(0) == 0",
    ),
    "floats": (
        "def mean(xs):\n    return sum(xs) / len(xs)\n",
        "import math\nassert math.isclose(mean([1, 2, 4]), 7 / 3)\nassert abs(mean([0.1, 0.2]) - 0.15) < 1e-12",
    ),
    "imports": (
        "import heapq, itertools, collections, functools, re, fractions\n"
        "def top(xs, k):\n    return heapq.nlargest(k, xs)\n"
        "def pairs(xs):\n    return list(itertools.combinations(xs, 2))\n"
        "def counts(s):\n    return dict(collections.Counter(s))\n",
        "assert top([3, 1, 2], 2) == [3, 2]\nassert pairs([1, 2, 3]) == [(1, 2), (1, 3), (2, 3)]\n"
        "assert counts('aab') == {'a': 2, 'b': 1}",
    ),
    "recursion": (
        "import sys\nsys.setrecursionlimit(20000)\ndef depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n",
        "assert depth(5000) == 5000",
    ),
    "threads": (
        "from concurrent.futures import ThreadPoolExecutor\ndef squares(xs):\n"
        "    with ThreadPoolExecutor(4) as ex:\n        return list(ex.map(lambda x: x * x, xs))\n",
        "assert squares(range(10)) == [x * x for x in range(10)]",
    ),
    "multiprocessing": (
        "import multiprocessing as mp\ndef _sq(x):\n    return x * x\ndef squares(xs):\n"
        "    with mp.get_context('fork').Pool(2) as p:\n        return p.map(_sq, xs)\n",
        "assert squares([1, 2, 3]) == [1, 4, 9]",
    ),
    "multiprocessing_spawn": (
        "import multiprocessing as mp\ndef _sq(x):\n    return x * x\ndef squares(xs):\n"
        "    with mp.get_context('spawn').Pool(2) as p:\n        return p.map(_sq, xs)\n",
        "assert squares([1, 2, 3]) == [1, 4, 9]",
    ),
    "own_subprocess": (
        "import subprocess, sys\ndef run():\n"
        "    return subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True).stdout.strip()\n",
        "assert run() == '42'",
    ),
    "humaneval_check": (
        "def add(a, b):\n    return a + b\n",
        "METADATA = {}\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n",
    ),
    "unittest_case": (
        "def rev(s):\n    return s[::-1]\n",
        "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(rev('ab'), 'ba')\n"
        "    def test_b(self):\n        self.assertEqual(rev(''), '')\n\nif __name__ == '__main__':\n    unittest.main()\n",
    ),
    "in_place_mutation": (
        "def sort_in_place(xs):\n    xs.sort()\n",
        "a = [3, 1, 2]\nsort_in_place(a)\nassert a == [1, 2, 3]",
    ),
    "generator": (
        "def evens(n):\n    for i in range(n):\n        if i % 2 == 0:\n            yield i\n",
        "assert list(evens(7)) == [0, 2, 4, 6]\nassert sum(evens(5)) == 6\nassert 4 in evens(7)\nassert 5 not in evens(7)",
    ),
    "exceptions_expected": (
        "def div(a, b):\n    if b == 0:\n        raise ValueError('zero')\n    return a // b\n",
        "try:\n    div(1, 0)\n    assert False\nexcept ValueError:\n    pass\nassert div(7, 2) == 3",
    ),
    "dict_subclass_and_namedtuple": (
        "import collections\nP = collections.namedtuple('P', 'x y')\ndef counts(s):\n"
        "    return collections.Counter(s)\ndef pt():\n    return P(1, 2)\n",
        "assert counts('aa') == {'a': 2}\nassert pt() == (1, 2)",
    ),
    "big_ints_and_tuples": (
        "def fact(n):\n    r = 1\n    for i in range(2, n + 1):\n        r *= i\n    return r, -r\n",
        "import math\nassert fact(3000) == (math.factorial(3000), -math.factorial(3000))",
    ),
    "numpy_if_installed": (
        "def total(xs):\n    try:\n        import numpy as np\n    except ImportError:\n        return sum(xs)\n"
        "    return np.array(xs).sum()\n",
        "assert total([1, 2, 3]) == 6",
    ),
    "chatty_debug_output": (
        "import sys\ndef f(x):\n    for i in range(3000):\n        print('debug line', i, 'x' * 60)\n"
        "        print('warn', i, file=sys.stderr)\n    return x\n",
        "assert f(3) == 3",
    ),
    "imports_a_module_it_wrote": (
        "open('helper.py', 'w').write('def twice(x):\\n    return 2 * x\\n')\n"
        "import helper\ndef f(x):\n    return helper.twice(x)\n",
        "assert f(4) == 8",
    ),
    "tests_capture_printed_output": (
        "def greet(name):\n    print(f'hello {name}')\n",
        "import io, contextlib\nbuf = io.StringIO()\nwith contextlib.redirect_stdout(buf):\n"
        "    greet('ada')\nassert buf.getvalue() == 'hello ada\\n'",
    ),
    "writes_bytes_to_stdout_buffer": (
        "import sys\ndef f(x):\n    sys.stdout.buffer.write(b'log\\n')\n    sys.stdout.flush()\n    return x + 1\n",
        "assert f(1) == 2",
    ),
    "writes_its_own_files": (
        "def roundtrip(s):\n    open('f.txt', 'w').write(s)\n    return open('f.txt').read()\n",
        "assert roundtrip('hello') == 'hello'",
    ),
}

FAILING = {
    "wrong_value": ("def add(a, b):\n    return a - b\n", "assert add(1, 2) == 3"),
    "raises": ("def add(a, b):\n    raise RuntimeError('nope')\n", "assert add(1, 2) == 3"),
    "off_by_one_in_check": (
        "def add(a, b):\n    return a + b + (a > 5)\n",
        "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(6, 1) == 7\n",
    ),
    "unittest_wrong": (
        "def rev(s):\n    return s\n",
        "import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(rev('ab'), 'ba')\n",
    ),
    "returns_none": ("def add(a, b):\n    pass\n", "assert add(1, 2) == 3"),
    "float_wrong": ("def half(x):\n    return x / 2 + 1e-6\n", "assert half(1) == 0.5"),
}


@pytest.mark.parametrize("name", sorted(PASSING))
def test_correct_solution_passes(generous_fn, clean, name):
    src, tests = PASSING[name]
    entry = {"entry_point": "add"} if "check(" in tests else {}
    s = generous_fn({"tests": tests, **entry}, f"Here you go:\n```python\n{src}```\n")
    assert (s.status, s.value) == ("pass", 1.0), s.info.get("reason")


@pytest.mark.parametrize("name", sorted(FAILING))
def test_wrong_solution_fails(generous_fn, clean, name):
    src, tests = FAILING[name]
    entry = {"entry_point": "add"} if "check(" in tests else {}
    s = generous_fn({"tests": tests, **entry}, src)
    assert (s.status, s.value) == ("fail", 0.0), s.info.get("reason")


def test_stdin_program_passes(generous_fn, clean):
    cases = [{"input": "3\n1 2 3\n", "output": "6\n"}, {"input": "1\n-5\n", "output": "-5"}]
    src = "n = int(input())\nprint(sum(map(int, input().split())))"
    assert generous_fn({"tests": cases}, src).value == 1.0


def test_stdin_program_with_chatty_stderr_passes(generous_fn, clean):
    src = "import sys\nfor i in range(5000):\n    print('trace', i, file=sys.stderr)\nprint(int(input()) + 1)"
    assert generous_fn({"tests": [{"input": "41", "output": "42"}]}, src).value == 1.0


def test_stdin_program_with_truncated_output_fails(generous_fn, clean):
    cases = [{"input": "", "output": "1\n2\n3\n"}]
    assert generous_fn({"tests": cases}, "print(1)\nprint(2)").status == "fail"


def test_stdin_program_with_extra_output_fails(generous_fn, clean):
    cases = [{"input": "", "output": "1\n"}]
    assert generous_fn({"tests": cases}, "print(1)\nprint('debug')").status == "fail"


def test_partial_credit_counts_passed_asserts():
    from harness import get_reward

    fn = get_reward("code", partial=True)
    s = fn(
        {"tests": "assert f(1) == 1\nassert f(2) == 4\nassert f(3) == 9\nassert f(4) == 17"},
        "def f(x):\n    return x * x",
    )
    assert s.status == "fail" and s.value == pytest.approx(0.75)
    assert s.info["passed"] == 3 and s.info["total"] == 4
