"""What runs inside the judge process: the tests, against proxies of the solution's names, and the verdict.

The judge is a separate sandboxed process (its own uid, its own groups). It receives the test source from the
host, never from the solution, and builds a namespace in which every name the solution defined is either a
plain value (copied, exact types) or a :class:`Remote` proxy whose calls travel to the solution process. Every
comparison a test makes therefore happens here, on values this process built itself: an ``__eq__`` that always
says True, a patched builtin, ``sys.exit(0)``, a trace function or a printed "all tests passed" in the solution
cannot reach it.

Test formats: Python source with ``assert`` lines or a ``check(candidate)`` function (called with the entry
point when the source defines but never calls it), and ``unittest.TestCase`` classes. Asserts are rewritten to
record each test case (one per ``assert`` statement, or per unittest method) and never stop at a failure, in
every mode (:mod:`sandbox._cases`): what the solution is asked never depends on whether an earlier answer was
right, and the verdict (all-or-nothing or partial) is computed here, after every case ran. The number of cases
is fixed before the solution is called: a case never reached (the solution exited, crashed or hung) counts as
failed, so exiting early never raises the passed fraction, and tests in which nothing ran never pass.

This module does not enforce time or memory (the host's deadline and the groups do).
"""

from __future__ import annotations

import ast
import base64
import builtins
import functools
import importlib
import marshal
import sys
import unittest
from collections.abc import Callable
from typing import Any

from sandbox import _wire
from sandbox._cases import AssertRewriter, Recorder, SolutionGone, run_unittest

__all__ = ["judge", "Remote", "RemoteError", "TestsError", "module_refs", "plan_tests", "prepare_tests"]

_BUILTIN_NAMES = frozenset(dir(builtins))
_MAX_REPLY = _wire.MAX_FRAME  # bytes (a reply that makes the judge run out of memory decoding it scores 0)


class TestsError(ValueError):
    """The tests cannot judge a solution as given (the reason names what is missing)."""


class RemoteError(Exception):
    """An exception raised in the solution process whose type has no built-in counterpart here."""


class _Link:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.requests = 0  # how often the tests asked the solution anything
        self.gone: str | None = None  # why the solution stopped answering

    def request(self, msg: dict[str, Any], local_args: list[Any] | None = None) -> Any:
        """Send ``msg`` and decode the reply.

        Raises:
            SolutionGone: the solution process stopped answering (then and for every later request).
        """
        if self.gone is not None:
            raise SolutionGone(self.gone)
        self.requests += 1
        try:
            _wire.send(self.fd, msg)
            reply = _wire.recv(self.fd, _MAX_REPLY)
            if type(reply) is not dict:
                raise _wire.ProtocolError("reply is not an object")
        except (OSError, EOFError, _wire.ProtocolError) as e:
            self.gone = f"{type(e).__name__}: {e}"
            raise SolutionGone(self.gone) from None
        if type(reply.get("out")) is str:  # what the call printed, printed here (tests may capture stdout)
            sys.stdout.write(reply["out"])
        if "err" in reply:
            err = reply["err"]
            name, text = (str(err[0])[:100], str(err[1])[:2000]) if type(err) is list and len(err) == 2 else ("?", "?")
            raise _exception(name, text)
        result = self.decode(reply.get("ok"))
        post = reply.get("post")
        if local_args and type(post) is list:
            for item in post:
                self._post(local_args, item)
        return result

    def _post(self, args: list[Any], item: Any) -> None:
        """Mirror an in-place change the call made to a list/dict/set argument."""
        if type(item) is not list or len(item) != 2 or type(item[0]) is not int or not 0 <= item[0] < len(args):
            return
        local, new = args[item[0]], self.decode(item[1])
        if type(local) is list and type(new) is list:
            local[:] = new
        elif type(local) is dict and type(new) is dict:
            local.clear()
            local.update(new)
        elif type(local) is set and type(new) is set:
            local.clear()
            local.update(new)
        elif type(local) is bytearray and type(new) is bytearray:
            local[:] = new

    def decode(self, tag: Any) -> Any:
        return _wire.decode(tag, lambda h: Remote(self, h))


def _exception(name: str, text: str) -> BaseException:
    cls = getattr(builtins, name, None)
    if isinstance(cls, type) and issubclass(cls, Exception) and name not in ("SystemExit", "KeyboardInterrupt"):
        try:
            return cls(text)
        except Exception:
            pass
    return RemoteError(f"{name}: {text}")


def _encode_arg(v: Any) -> Any:
    def to_handle(obj: Any) -> list:
        if isinstance(obj, Remote):
            return ["H", obj._h.id, obj._h.type_name, obj._h.callable]
        raise TypeError(f"cannot pass a {type(obj).__name__} from the tests to the solution")

    return _wire.encode(v, to_handle)


class Remote:
    """A proxy for an object living in the solution process. Equal only to itself or, remotely, another proxy."""

    __slots__ = ("_link", "_h")

    def __init__(self, link: _Link, h: _wire.Handle) -> None:
        object.__setattr__(self, "_link", link)
        object.__setattr__(self, "_h", h)

    def _rpc(self, op: str, **kw: Any) -> Any:
        return self._link.request({"op": op, "h": self._h.id, **kw})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        msg = {
            "op": "call",
            "h": self._h.id,
            "args": [_encode_arg(a) for a in args],
            "kwargs": [[str(k), _encode_arg(v)] for k, v in kwargs.items()],
        }
        return self._link.request(msg, list(args))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._rpc("getattr", name=name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("attributes of a solution object cannot be set from the tests")

    def __iter__(self) -> Any:
        return self._rpc("iter")

    def __next__(self) -> Any:
        return self._rpc("next")

    def __len__(self) -> int:
        n = self._rpc("len")
        if type(n) is not int:
            raise TypeError("len() of a solution object is not an int")
        return n

    def __bool__(self) -> bool:
        return self._rpc("bool") is True

    def __getitem__(self, key: Any) -> Any:
        return self._rpc("getitem", key=_encode_arg(key))

    def __contains__(self, key: Any) -> bool:
        # Never send the key: it is often the expected value. Iterate and compare here instead, over every item:
        # an iteration that stopped at the first match would tell the solution where (whether) the key was.
        items = list(self)
        return any(item is key or item == key for item in items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Remote):
            return other._h.id == self._h.id or self._rpc("eq", other=other._h.id) is True
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(("sandbox.Remote", self._h.id))

    def __repr__(self) -> str:
        r = self._rpc("repr")
        return r if type(r) is str else f"<solution {self._h.type_name}>"

    def __str__(self) -> str:
        s = self._rpc("str")
        return s if type(s) is str else repr(self)


def plan_tests(source: str, entry_point: str | None) -> tuple[ast.Module, bool, bool, int]:
    """Parse the tests: (rewritten module, uses unittest classes, must call ``check(entry_point)`` afterwards,
    number of test cases: ``assert`` statements; 0 with unittest, whose cases the judge counts when it loads them).

    Raises:
        SyntaxError: the tests do not parse.
        TestsError: the tests define ``check(candidate)``, never call it, and no ``entry_point`` names what to
            pass to it (nothing would run: every solution would pass).
    """
    tree = ast.parse(source, "tests.py")
    uses_unittest = any(
        isinstance(n, ast.ClassDef) and any("TestCase" in ast.unparse(b) for b in n.bases) for n in tree.body
    )
    defines_check = any(isinstance(n, ast.FunctionDef) and n.name == "check" for n in tree.body)
    calls_check = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "check"
        for stmt in tree.body
        if not isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
        for n in ast.walk(stmt)
    )
    if defines_check and not calls_check and not uses_unittest and not entry_point:
        raise TestsError(
            "the tests define check(candidate) but never call it, and there is no entry_point field "
            "naming the solution's function to pass to it"
        )
    rewriter = AssertRewriter()  # (in unittest methods too: an assert there fails its method, never stops it)
    tree = ast.fix_missing_locations(rewriter.visit(tree))
    cases = 0 if uses_unittest else rewriter.cases
    return tree, uses_unittest, bool(entry_point) and defines_check and not calls_check, cases


def module_refs(tree: ast.Module, entry_point: str | None) -> list[str]:
    """Standard-library module names the tests use as ``name.attr`` (``math.isclose``): the judge binds the real
    module to each before the tests run, so a solution that defines ``math`` (a class whose ``isclose`` says True)
    cannot answer for tests that rely on the solution's ``import math`` (as MBPP's do). The tests' own
    imports and assignments still rebind them; the entry point is never replaced."""
    return sorted(
        {
            n.value.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id in sys.stdlib_module_names
            and n.value.id != entry_point
        }
    )


@functools.lru_cache(maxsize=256)
def prepare_tests(source: str, entry_point: str | None) -> dict[str, Any]:
    """The judge's payload for ``source``: the rewritten tests compiled and marshalled, and how to run them.

    Run by the host (trusted; cached, since a training step scores many completions against the same tests),
    so the judge only loads a code object. The judge runs the same interpreter, so marshal data is compatible.

    Raises:
        SyntaxError: the tests do not parse.
        TestsError: the tests need an ``entry_point`` and got none.
    """
    tree, uses_unittest, call_check, cases = plan_tests(source, entry_point)
    code = compile(tree, "tests.py", "exec", dont_inherit=True)
    return {
        "code": base64.b64encode(marshal.dumps(code)).decode("ascii"),
        "uses_unittest": uses_unittest,
        "call_check": call_check,
        "entry_point": entry_point,
        "cases": cases,
        "modules": module_refs(tree, entry_point),
    }


def _namespace(link: _Link, names: Any) -> dict[str, Any]:
    """The tests' globals: the solution's names, minus any that would shadow a builtin or a dunder name."""
    ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    if type(names) is not dict:
        raise _wire.ProtocolError("names is not an object")
    for name, tag in names.items():
        if type(name) is not str or name.startswith("__") or name in _BUILTIN_NAMES:
            continue
        if type(tag) is list and tag and tag[0] == "M" and len(tag) == 2 and type(tag[1]) is str:
            top = tag[1].partition(".")[0]
            if top in sys.stdlib_module_names or tag[1] in sys.modules:
                try:
                    ns[name] = importlib.import_module(tag[1])
                except Exception:
                    pass
            continue
        ns[name] = link.decode(tag)
    return ns


def _unittest_suite(ns: dict[str, Any]) -> unittest.TestSuite:
    loader, suite = unittest.TestLoader(), unittest.TestSuite()
    for v in list(ns.values()):
        if isinstance(v, type) and issubclass(v, unittest.TestCase) and v.__module__ == "__main__":
            suite.addTests(loader.loadTestsFromTestCase(v))
    return suite


def judge(spec: dict[str, Any], fd: int, progress: Callable[[bytes], object] | None = None) -> dict[str, Any]:
    """Run the tests in ``spec`` against the solution behind ``fd``; return the verdict as plain data.

    ``progress`` receives the lines that tell the host which case runs (:mod:`sandbox._shares`); cases listed
    in ``spec["skip"]`` were decided by an earlier execution and are not run. ``total`` is the number of test
    cases known before the solution is called (assert statements, unittest
    methods; 1 for tests with neither, which pass when they run to the end); ``passed`` counts the cases that
    ran and held. Every case runs whatever the outcome of the ones before; when the run stops early (the solution
    exited, crashed or hung), a case never reached counts as failed; tests that run to their end without a
    failure pass.
    """
    link = _Link(fd)
    if "code" in spec:  # prepared by the host (:func:`prepare_tests`)
        code = marshal.loads(base64.b64decode(spec["code"]))
        uses_unittest, call_check, cases = bool(spec["uses_unittest"]), bool(spec["call_check"]), int(spec["cases"])
        modules = list(spec.get("modules") or ())
    else:
        tree, uses_unittest, call_check, cases = plan_tests(spec["tests"], spec.get("entry_point"))
        code = compile(tree, "tests.py", "exec", dont_inherit=True)
        modules = module_refs(tree, spec.get("entry_point"))
    _wire.send(fd, {"go": True})  # the solution's code starts only now, once this process is fully set up
    hello = _wire.recv(fd)
    if type(hello) is not dict or hello.get("loaded") is not True:
        err = str(hello.get("error", "solution did not load"))[:2000] if type(hello) is dict else "bad hello"
        return {"status": "error", "reason": err, "passed": 0, "total": max(1, cases)}
    ns = _namespace(link, hello.get("names"))
    for name in modules:  # the real module, whatever the solution bound to that name
        try:
            ns[name] = importlib.import_module(name)
        except Exception:
            ns.pop(name, None)
    rec = Recorder(progress, spec.get("skip") or ())
    ns["__harness_assert__"] = rec
    if not uses_unittest:
        rec.say_cases(cases)
    # the judge runs the classes itself; unittest.main is a no-op until restored below (typeshed: a class)
    unittest_main, unittest.main = unittest.main, (lambda *a, **k: None)  # type: ignore[assignment]  # see above
    error: str | None = None
    try:
        exec(code, ns)
        if call_check:
            ep = spec["entry_point"]
            if ep not in ns and ep in _BUILTIN_NAMES and type(hello.get("names")) is dict and ep in hello["names"]:
                # named like a builtin: passed to check() as the candidate, never put where the tests' own
                # sorted() or sum() would find it
                ns = {**ns, ep: link.decode(hello["names"][ep])}
            if ep not in ns:
                return {
                    "status": "error",
                    "reason": f"the solution does not define {ep!r}",
                    "passed": 0,
                    "total": max(1, cases),
                }
            ns["check"](ns[ep])
        if uses_unittest:
            suite = _unittest_suite(ns)
            cases = suite.countTestCases()
            if cases == 0:
                return {"status": "bad_tests", "reason": "the tests define no unittest test method"}
            rec.say_cases(cases)
            run_unittest(suite, rec)
    except SystemExit as e:
        if e.code not in (None, 0):
            error = f"tests exited with {e.code!r}"
    except (SolutionGone, _wire.ProtocolError, EOFError) as e:
        error = f"the solution process stopped answering: {e}"
    except BaseException as e:  # an exception from the solution's code outside any assert
        error = f"{type(e).__name__}: {str(e)[:500]}" if str(e) else type(e).__name__
    finally:
        unittest.main = unittest_main
    return _verdict(rec, cases, error, link.requests > 0)


def _verdict(rec: Recorder, cases: int, error: str | None, asked: bool = False) -> dict[str, Any]:
    """The verdict from the recorded cases, the number known before the run, the error that ended it, and
    whether the tests asked the solution anything (``asked``): when they did and no assert ran, it is the
    solution's answers that left every case unreached (an empty list for ``for p in f(n): assert ...``), a
    failure; when they did not, the tests cannot judge anything."""
    if cases == 0:  # no assert and no unittest: one case, the tests running to their end
        passed = 1 if error is None else 0
        out = {"status": "pass" if passed else "fail", "passed": passed, "total": 1, "tests": rec.results}
        if error:
            out["reason"] = error
        return out
    total, passed, reached = cases, rec.passed, len(rec.outcome)
    ok = error is None and rec.failed == 0
    if ok and reached == 0 and asked:
        return {
            "status": "fail",
            "passed": 0,
            "total": total,
            "tests": rec.results,
            "reason": f"none of the tests' {total} assert statement(s) ran on what the solution returned",
        }
    if ok and reached == 0:
        return {
            "status": "bad_tests",
            "reason": f"none of the tests' {total} assert statement(s) ran (are they in functions that nothing calls?)",
        }
    if ok:  # ran to the end: an assert it never reached was not meant to run (``assert False`` after a raise)
        passed = total
    elif passed >= total:  # failed outside any assert: that failure is a case of its own
        total = passed + 1
    out = {"status": "pass" if ok else "fail", "passed": passed, "total": total, "tests": rec.results}
    if error:
        out["reason"] = error
    elif rec.failed:
        out["reason"] = f"{rec.failed} assertion(s) failed" + (f" ({rec.errors[0]})" if rec.errors else "")
    return out
