"""What runs inside the sandboxed solution process: execute the code, then answer the judge's calls.

In *program* mode the code runs as ``__main__`` with the given stdin and its stdout goes back to the host,
which compares it. In *function* mode the code runs as ``__main__`` and then this process serves remote calls
from the judge process (call, attribute, iteration, len, item, equality between two handles) and answers with
plain data (:mod:`sandbox._wire`) plus what the call printed. The expected values of the tests never enter
this process, so nothing here can be trusted, and nothing here needs to be: a solution that rewrites this
module only talks nonsense to a judge that checks every value it receives.

This module does not set up isolation (see :mod:`sandbox._child`); it must only run after it.
"""

from __future__ import annotations

import atexit
import builtins
import io
import os
import sys
import traceback
import types
from typing import Any

from sandbox import _wire

__all__ = ["run_program", "serve_functions"]


def _main_module(source: str) -> dict[str, Any]:
    """A fresh ``__main__`` whose file exists in the private working directory (``multiprocessing`` spawn
    re-imports the main module from its path)."""
    path = os.path.abspath("solution.py")
    try:
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(source)
    except OSError:
        pass
    mod = types.ModuleType("__main__")
    mod.__dict__.update(__builtins__=builtins, __file__=path)
    sys.modules["__main__"] = mod
    sys.argv = [path]
    sys.path.insert(0, "")  # as under ``python -c``: modules the solution writes next to itself import
    return mod.__dict__


def _finish(code: int) -> None:
    """Run what a normal interpreter exit runs (non-daemon threads, atexit, flush), then leave.

    ``threading`` is looked up, not imported: the server does not load it (its fork handler would run in every
    child), and a solution that never imported it has no threads to wait for.
    """
    threading = sys.modules.get("threading")
    try:
        if threading is not None:
            threading._shutdown()
    except BaseException:
        pass
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(code)


def _exit_code(e: SystemExit) -> int:
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code & 0xFF
    print(e.code, file=sys.stderr)
    return 1


def _lift_recursion_limit(frames_below: int) -> None:
    """Raise the recursion limit by the frames this module runs beneath the solution's code (``frames_below``
    more than a plain ``python -c`` run has), so code that recurses to just under the limit there does here too."""
    depth = 0
    f: types.FrameType | None = sys._getframe()
    while f is not None:
        depth, f = depth + 1, f.f_back
    sys.setrecursionlimit(sys.getrecursionlimit() + depth + frames_below)


def _compile(source: str) -> Any:
    return compile(source, "solution.py", "exec", dont_inherit=True)


def run_program(source: str) -> None:
    """Program mode: run ``source`` as ``__main__`` and exit with its status (never returns)."""
    try:
        code = _compile(source)
    except (SyntaxError, ValueError) as e:
        traceback.print_exception(e, limit=0)
        _finish(2)
    _lift_recursion_limit(0)
    try:
        exec(code, _main_module(source))
    except SystemExit as e:
        _finish(_exit_code(e))
    except BaseException as e:
        traceback.print_exception(e)
        _finish(1)
    _finish(0)


class _Capture(io.TextIOBase):
    """Collects what one call prints, up to ``CAPTURE_LIMIT`` characters; the rest goes to the real stdout
    (where the host's output cap applies)."""

    def __init__(self, real: Any) -> None:
        self.parts: list[str] = []
        self.real, self.size = real, 0

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.real.fileno()

    @property
    def buffer(self) -> Any:  # code that writes bytes to sys.stdout.buffer keeps working
        capture = self

        class _Bytes:
            def write(self, data: bytes) -> int:
                capture.write(bytes(data).decode("utf-8", "replace"))
                return len(data)

            def flush(self) -> None:
                pass

        return _Bytes()

    def write(self, text: str) -> int:
        if self.size + len(text) <= CAPTURE_LIMIT:
            self.parts.append(str(text))
            self.size += len(text)
            return len(text)
        return self.real.write(text)


#: Characters of a call's printed output sent back to the judge (more goes to the capped stdout).
CAPTURE_LIMIT = 1 << 20


class _Server:
    """The solution side of the judge protocol."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.objects: dict[int, Any] = {}
        self.next_id = 1

    def handle(self, obj: Any) -> list:
        hid = self.next_id
        self.next_id += 1
        self.objects[hid] = obj
        return ["H", hid, type(obj).__name__, callable(obj)]

    def enc(self, v: Any) -> Any:
        return _wire.encode(v, self.handle)

    def dec(self, tag: Any) -> Any:
        return _wire.decode(tag, lambda h: self.objects[h.id])

    def names(self, ns: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, v in list(ns.items()):
            if name.startswith("__") and name.endswith("__"):
                continue
            if isinstance(v, types.ModuleType):
                out[name] = ["M", v.__name__]
                continue
            if not _small(v):  # a sieve or table of millions: a handle, not a copy of it made before any test
                out[name] = self.handle(v)
                continue
            try:
                out[name] = self.enc(v)
            except (ValueError, RecursionError):
                out[name] = self.handle(v)
        return out

    def dispatch(self, req: dict[str, Any]) -> Any:
        op = req["op"]
        obj = self.objects[req["h"]]
        if op == "call":
            args = [self.dec(a) for a in req["args"]]
            kwargs = {k: self.dec(v) for k, v in req["kwargs"]}
            result = obj(*args, **kwargs)
            post = [[i, self.enc(a)] for i, a in enumerate(args) if type(a) in (list, dict, set, bytearray)]
            return {"ok": self.enc(result), "post": post}
        if op == "getattr":
            return {"ok": self.enc(getattr(obj, req["name"]))}
        if op == "iter":
            return {"ok": self.handle(iter(obj))}
        if op == "next":
            return {"ok": self.enc(next(obj))}
        if op == "len":
            return {"ok": self.enc(len(obj))}
        if op == "bool":
            return {"ok": self.enc(bool(obj))}
        if op == "getitem":
            return {"ok": self.enc(obj[self.dec(req["key"])])}
        if op == "eq":
            return {"ok": self.enc(bool(obj == self.objects[req["other"]]))}
        if op in ("repr", "str"):
            return {"ok": self.enc((repr if op == "repr" else str)(obj))}
        raise ValueError(f"unknown op {op!r}")

    def serve(self) -> None:
        while True:
            try:
                req = _wire.recv(self.fd)
            except (EOFError, _wire.ProtocolError):
                return
            real, capture = sys.stdout, _Capture(sys.stdout)
            sys.stdout = capture  # what a call prints goes back with its result, for tests that read it
            try:
                reply = self.dispatch(req)
            except SystemExit as e:
                reply = {"err": ["SystemExit", f"solution called exit({e.code!r})"]}
            except BaseException as e:  # the solution's exception goes back to the test that called it
                reply = {"err": [type(e).__name__, _safe_str(e)]}
            finally:
                sys.stdout = real
            if capture.parts:
                reply["out"] = "".join(capture.parts)
            try:
                _wire.send(self.fd, reply)
            except (ValueError, RecursionError) as e:
                _wire.send(self.fd, {"err": ["TypeError", f"result cannot be sent to the judge: {e}"]})


#: Items (and 64-byte chunks of str and bytes) a global may hold to be copied to the judge with the names; a
#: larger one (a sieve of 10**8, a table of millions) is sent as a handle: copying it took the memory and time
#: of the run before any test, and a 300 MB global made a correct solution score ``memory``.
_NAME_BUDGET = 1 << 18


def _small(v: Any) -> bool:
    """Whether ``v`` holds at most :data:`_NAME_BUDGET` items, counted without copying (stops early)."""
    try:
        return _count_within(v)
    except Exception:  # (a container subclass whose own methods fail: a handle, as for anything unusual)
        return False


def _count_within(v: Any) -> bool:
    stack, n = [v], 0
    while stack:
        x = stack.pop()
        n += 1
        if isinstance(x, (str, bytes, bytearray)):
            n += len(x) >> 6
        elif isinstance(x, (list, tuple, set, frozenset, dict)):
            size = len(x)
            if n + size > _NAME_BUDGET:
                return False
            if isinstance(x, dict):
                stack.extend(dict.keys(x))
                stack.extend(dict.values(x))
            else:
                stack.extend(x if type(x) in (list, tuple, set, frozenset) else list(iter(x)))
        if n > _NAME_BUDGET:
            return False
    return True


def _safe_str(e: BaseException) -> str:
    try:
        return str(e)[:2000]
    except BaseException:
        return "<unprintable>"


def serve_functions(source: str, fd: int) -> None:
    """Function mode: wait for the judge's go, run ``source``, report its names to the judge on ``fd``, then serve
    calls (never returns)."""
    server = _Server(fd)
    try:  # wait for the judge to be set up: code that hogs the machine must not starve the judge's setup (a run
        _wire.recv(fd)  # whose judge never came up is a sandbox error, unscored, not the solution's 0)
    except (EOFError, _wire.ProtocolError):
        os._exit(1)
    _lift_recursion_limit(2)  # (calls run in _Server.dispatch, two frames below this one)
    try:
        ns = _main_module(source)
        exec(_compile(source), ns)
    except SyntaxError as e:
        _wire.send(fd, {"loaded": False, "kind": "syntax", "error": f"SyntaxError: {e.msg} (line {e.lineno})"})
        _finish(1)
    except SystemExit as e:
        early = f"solution called exit({e.code!r}) before the tests ran"
        _wire.send(fd, {"loaded": False, "kind": "exit", "error": early})
        _finish(1)
    except BaseException as e:
        _wire.send(fd, {"loaded": False, "kind": type(e).__name__, "error": f"{type(e).__name__}: {_safe_str(e)}"})
        _finish(1)
    _wire.send(fd, {"loaded": True, "names": server.names(ns)})
    server.serve()
    _finish(0)
