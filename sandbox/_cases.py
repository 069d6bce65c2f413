"""Test cases that never stop early: the ``assert`` rewrite, the recorder, and unittest methods run to their end.

A solution that could tell whether an earlier answer was right could carry that bit to the next execution and
learn the hidden expected values (a GRPO group of identical completions did, storing it in machine-wide state).
With the old ``assert`` a failed case ended the tests, so whether the solution was called again said whether its
last answer was right. Here every case runs whatever the outcome of the cases before it:

* each ``assert`` statement (anywhere: in ``check(candidate)``, in a loop, in a unittest method) becomes a
  guarded evaluation that records the case and carries on, whether the test held, failed or raised; its message
  is never evaluated (it is not needed for the verdict, and a message that calls the solution only on failure
  would be a signal);
* the operands of ``and``/``or`` at the top of an assert are all evaluated (and their truth taken), so
  ``assert f(1) == 2 and f(3) == 4`` calls ``f(3)`` whether or not ``f(1)`` was right; the case's outcome is
  still that of the short-circuit expression; so are the items of ``all(...)``/``any(...)`` in an assert
  (``assert all(f(x) == y for x, y in pairs)`` calls ``f`` for every pair), the outcome still the builtin's;
* unittest methods run to their end: ``assert*`` and ``fail*`` methods (and ``assertRaises``-style context
  managers) record a failure of the method instead of raising.

An endless iterable in ``all()``/``any()`` in an assert runs until the time limit (a plain run stops at the first
item that decides). What is not covered: tests whose own control flow branches on the solution's answers (an
``if`` in ``check`` that calls the solution only when an answer matched, chained comparisons with calls in them,
a conditional expression). Exceptions the solution raises still end the statement (or unittest method) they
happen in: that depends only on what the solution did, not on whether it was right.

Nothing here decides a verdict (:mod:`sandbox._judge` does) or enforces time.
"""

from __future__ import annotations

import ast
import functools
import unittest
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["AssertRewriter", "Recorder", "SolutionGone", "run_unittest"]

_MAX_RECORDED = 50
_REC = "__harness_assert__"


class SolutionGone(BaseException):
    """The solution process stopped answering (exited, crashed, closed its channel): no later case can run.

    A ``BaseException``, so that ``except Exception`` in the tests does not swallow it."""


class _Raised:
    """An operand whose evaluation raised (its exception is the case's error)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Recorder:
    """Records each test case's outcome; never raises for a failed case (every case runs).

    A case is one ``assert`` statement of the tests, or one unittest method: it passes when it was reached and
    every time it ran, it held (an assert in a loop is one case). In unittest mode (``current`` set) the asserts
    of a method count for that method.
    """

    def __init__(self, progress: Callable[[bytes], object] | None = None, skip: Iterable[int] = ()) -> None:
        self.outcome: dict[int, bool] = {}  # case -> all runs so far held
        self.failed = 0
        self.errors: list[str] = []
        self.results: list[dict[str, Any]] = []
        self.current: int | None = None  # the unittest method now running
        self.progress = progress  # where the host learns which case runs (:mod:`sandbox._shares`)
        self.skip = frozenset(skip)  # cases an earlier execution decided: not run again
        self._begun: set[int] = set()

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line.encode() + b"\n")

    def say_cases(self, cases: int) -> None:
        """Tell the host how many cases the tests have."""
        self._say(f"n {cases}")

    def begin(self, case: int) -> bool:
        """Whether to run ``case`` now (not when an earlier execution decided it); tell the host it began."""
        if self.current is not None:
            return True
        if case in self.skip:
            return False
        if case not in self._begun:
            self._begun.add(case)
            self._say(f"b {case}")
        return True

    @property
    def passed(self) -> int:
        return sum(self.outcome.values())

    def record(self, case: int, line: int, ok: bool) -> None:
        if self.current is not None:
            case = self.current
        before = self.outcome.get(case)
        self.outcome[case] = (True if before is None else before) and ok
        if before is None or (before and not ok):
            self._say(f"r {case} {int(ok)}")
        if not ok:
            self.failed += 1
        if len(self.results) < _MAX_RECORDED:
            self.results.append({"line": line, "passed": ok})

    def truth(self, value: Any) -> bool:
        return bool(value)

    def raised(self, error: BaseException) -> _Raised:
        if isinstance(error, SolutionGone):
            raise error
        return _Raised(error)

    def __call__(self, value: Any, case: int, line: int) -> None:
        """Record an assert's outcome: ``value`` is its truth, or :class:`_Raised` when evaluating it raised."""
        if isinstance(value, _Raised):
            e = value.error
            if len(self.errors) < 5:
                self.errors.append(f"line {line}: {type(e).__name__}: {str(e)[:200]}")
            self.record(case, line, False)
            return
        self.record(case, line, value is True)

    def every(self, fn: Any, iterable: Any) -> Any:
        """``all(iterable)`` / ``any(iterable)`` (``fn``) in an assert, with every item evaluated and its truth
        taken whatever the items before gave: the builtins stop at the first item that decides, so whether the
        solution was called for the next item said whether its last answer was right. The outcome is the
        builtin's: the first deciding item, or the error of an item before it. Any other ``fn`` (the tests' own
        function of that name) is called as written."""
        if fn is not all and fn is not any:
            return fn(iterable)
        truths: list[Any] = []
        try:
            for item in iterable:
                try:
                    truths.append(bool(item))
                except BaseException as e:  # (its truth raised: the builtin would raise here too)
                    truths.append(self.raised(e))
        except BaseException as e:  # the iteration itself raised (the generator is finished)
            truths.append(self.raised(e))
        for t in truths:
            if isinstance(t, _Raised):
                raise t.error
            if t is (fn is any):
                return t
        return fn is all

    def combine(self, op: str, values: list[Any]) -> Any:
        """The outcome of ``a and b ...`` / ``a or b ...`` from every operand's truth (or error), all evaluated."""
        for v in values:
            if isinstance(v, _Raised):
                return v
            if (op == "and" and not v) or (op == "or" and v):
                return v
        return values[-1]


class AssertRewriter(ast.NodeTransformer):
    """Rewrite every ``assert`` into a guarded, recorded evaluation; count the cases in source order."""

    def __init__(self) -> None:
        self.cases = 0
        self._names = 0
        self._own: set[str] = set()  # functions the tests define (their asserts are cases of their own)

    def _name(self) -> str:
        self._names += 1
        return f"__harness_v{self._names}__"

    def _guard(self, expr: ast.expr, at: ast.AST) -> tuple[list[ast.stmt], str]:
        """Statements that set a fresh name to the truth of ``expr`` (or its error), and that name."""
        name = self._name()
        if isinstance(expr, ast.BoolOp):
            stmts: list[ast.stmt] = []
            names: list[ast.expr] = []
            for operand in expr.values:
                more, n = self._guard(operand, at)
                stmts += more
                names.append(ast.Name(n, ast.Load()))
            op = "and" if isinstance(expr.op, ast.And) else "or"
            combine = _call("combine", [ast.Constant(op), ast.List(names, ast.Load())])
            stmts.append(ast.Assign([ast.Name(name, ast.Store())], combine))
            return stmts, name
        err = self._name()
        guarded = ast.Try(
            body=[ast.Assign([ast.Name(name, ast.Store())], _call("truth", [self.visit(expr)]))],
            handlers=[
                ast.ExceptHandler(
                    type=ast.Name("BaseException", ast.Load()),
                    name=err,
                    body=[ast.Assign([ast.Name(name, ast.Store())], _call("raised", [ast.Name(err, ast.Load())]))],
                )
            ],
            orelse=[],
            finalbody=[],
        )
        return [guarded], name

    def visit_Module(self, node: ast.Module) -> Any:
        self._own = {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        return self.generic_visit(node)

    def visit_Expr(self, node: ast.Expr) -> Any:
        """A statement that is a call to an assertion function (``tc.assertEqual(...)`` on a ``TestCase`` made at
        module level, ``numpy.testing.assert_allclose(...)``, ``assert_equal(...)``): a case of its own, like an
        ``assert``. Such a call raises when the answer is wrong, which ended the tests there (the next call to
        the solution said that the last answer was right)."""
        call = node.value
        if not (isinstance(call, ast.Call) and self._asserting(call.func)):
            return self.generic_visit(node)
        name, err = self._name(), self._name()
        guarded = ast.Try(
            body=[ast.Expr(self.visit(call)), ast.Assign([ast.Name(name, ast.Store())], ast.Constant(True))],
            handlers=[
                ast.ExceptHandler(
                    type=ast.Name("BaseException", ast.Load()),
                    name=err,
                    body=[ast.Assign([ast.Name(name, ast.Store())], _call("raised", [ast.Name(err, ast.Load())]))],
                )
            ],
            orelse=[],
            finalbody=[],
        )
        return self._recorded([guarded], name, node)

    def _asserting(self, func: ast.expr) -> bool:
        if isinstance(func, ast.Attribute):
            return func.attr.startswith(("assert", "fail"))
        return isinstance(func, ast.Name) and func.id.startswith("assert") and func.id not in self._own

    def visit_Assert(self, node: ast.Assert) -> Any:
        stmts, name = self._guard(_EveryItem().visit(node.test), node)
        return self._recorded(stmts, name, node)

    def _recorded(self, stmts: list[ast.stmt], name: str, node: ast.stmt) -> Any:
        case = ast.Constant(self.cases)
        record = ast.Call(
            func=ast.Name(_REC, ast.Load()),
            args=[ast.Name(name, ast.Load()), case, ast.Constant(node.lineno)],
            keywords=[],
        )
        self.cases += 1
        stmts.append(ast.Expr(record))
        guarded = ast.If(test=_call("begin", [case]), body=stmts, orelse=[])
        return ast.fix_missing_locations(ast.copy_location(guarded, node))


class _EveryItem(ast.NodeTransformer):
    """``all(x)`` and ``any(x)`` in an assert become :meth:`Recorder.every` (every item evaluated)."""

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("all", "any") and len(node.args) == 1:
            if not node.keywords and not isinstance(node.args[0], ast.Starred):
                return ast.copy_location(_call("every", [node.func, node.args[0]]), node)
        return node


def _call(method: str, args: list[ast.expr]) -> ast.Call:
    return ast.Call(func=ast.Attribute(ast.Name(_REC, ast.Load()), method, ast.Load()), args=args, keywords=[])


def _soft(test: unittest.TestCase, rec: Recorder, fn: Any) -> Any:
    """``fn`` (a bound ``assert*``/``fail*`` method) recording a failure instead of raising it."""
    failure = test.failureException

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            out = fn(*args, **kwargs)
        except failure:
            rec.record(-1, 0, False)
            return None
        if hasattr(out, "__exit__") and hasattr(out, "__enter__"):  # assertRaises & co as a context manager
            return _SoftContext(out, rec, failure)
        return out

    return call


class _SoftContext:
    def __init__(self, inner: Any, rec: Recorder, failure: type[BaseException]) -> None:
        self.inner, self.rec, self.failure = inner, rec, failure

    def __enter__(self) -> Any:
        return self.inner.__enter__()

    def __exit__(self, *exc: Any) -> bool:
        try:
            return bool(self.inner.__exit__(*exc))
        except self.failure:
            self.rec.record(-1, 0, False)
            return True

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _NoMessage:
    """Stands in for ``difflib`` and ``pprint`` inside ``unittest.case``: a failed ``assert*`` builds no diff."""

    @staticmethod
    def ndiff(*args: Any, **kwargs: Any) -> Iterable[str]:
        return iter(())

    @staticmethod
    def pformat(*args: Any, **kwargs: Any) -> str:
        return ""


def _no_repr(obj: Any, short: bool = False) -> str:
    return f"<{type(obj).__name__}>"  # (type() of a proxy is local: nothing is asked of the solution)


def _no_reprs(*args: Any) -> tuple[str, ...]:
    return tuple(_no_repr(a) for a in args)


# What a failed unittest assertion computes only to build its message: a diff of both values (11 ms for two lists
# of 1 000 ints, 9 us when they are equal) and the repr of each, a call to the solution for one of its objects.
# Nobody reads the message (a failure is recorded, never shown), and the solution could time the gap or see the
# call, and so learn whether its last answer was right: in the judge these build nothing.
_MESSAGE_BUILDERS = {
    "difflib": _NoMessage,
    "pprint": _NoMessage,
    "safe_repr": _no_repr,
    "_common_shorten_repr": _no_reprs,
}


def run_unittest(suite: unittest.TestSuite, rec: Recorder) -> None:
    """Run every test method to its end, each one case (in suite order), recording failures and errors.

    A failed ``assert*`` builds no message (no diff, no repr of either value): what the solution observes and
    how long the judge takes between two calls do not depend on whether an assertion held."""
    import unittest.case as case_module

    saved = {name: getattr(case_module, name) for name in _MESSAGE_BUILDERS}
    for name, stand_in in _MESSAGE_BUILDERS.items():
        setattr(case_module, name, stand_in)
    try:
        _run_each(suite, rec)
    finally:
        for name, value in saved.items():
            setattr(case_module, name, value)


def _run_each(suite: unittest.TestSuite, rec: Recorder) -> None:
    tests = list(_flatten(suite))  # (before running: a suite drops its tests as it runs them)
    result = unittest.TestResult()
    for i, test in enumerate(tests):
        if not rec.begin(i):
            continue
        for name in dir(test):
            if name.startswith(("assert", "fail")) and name != "failureException":
                fn = getattr(test, name, None)
                if callable(fn):
                    setattr(test, name, _soft(test, rec, fn))
        # assertEqual of two lists, dicts, sets or strs compares with == alone: the type-specific methods walk
        # the values in Python to the first difference when they differ (same verdict, far more time).
        test._type_equality_funcs = {}  # type: ignore[attr-defined]  # (a setUp may still add its own)
        rec.current = i
        try:
            bad = len(result.failures) + len(result.errors)
            test.run(result)
            rec.record(i, 0, len(result.failures) + len(result.errors) == bad)
        finally:
            rec.current = None
        for _, trace in result.errors[-1:]:
            if "SolutionGone" in trace:
                raise SolutionGone("the solution process stopped answering")


def _flatten(suite: unittest.TestSuite) -> list[unittest.TestCase]:
    out: list[unittest.TestCase] = []
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            out += _flatten(t)
        else:
            out.append(t)
    return out
