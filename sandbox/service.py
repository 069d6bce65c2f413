"""The host side of the sandbox: a lazily started warm server per process, and two ways to run code in it.

``Sandbox.run_program(code, stdin)`` runs a program and returns its stdout for the caller to compare;
``Sandbox.run_tests(code, tests, entry_point)`` runs the solution and a separate judge process that executes
the tests against it and returns the verdict. The wall-clock deadline (``timeout_s`` times the machine's speed
factor, measured when the server starts) kills every process of the execution through its groups.

:func:`get_sandbox` gives the per-process shared instance: started on first use, restarted if its server died,
closed at interpreter exit and never shared across ``fork`` (a forked child starts its own). Threads may call
one instance concurrently, up to ``slots`` executions at once.

This module does not score anything (see :mod:`rewards.code`) and does not set up isolation itself (the server
and :mod:`sandbox._child` do).
"""

from __future__ import annotations

import atexit
import json
import logging
import marshal
import os
import re
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypedDict

from sandbox import _cgroups, _child, _judge
from sandbox._clock import ExecutionClock
from sandbox._judge import TestsError
from sandbox._pump import Pump, Stream, make_pipes
from sandbox._relay import RELAY_ENV, RelaySandbox, relay_client
from sandbox._results import (
    LEVELS,
    IsolationReport,
    Limits,
    ProgramResult,
    ProgramStatus,
    SandboxError,
    TestsResult,
    level_of,
)
from sandbox._shares import Progress, Shares

__all__ = [
    "Limits",
    "IsolationReport",
    "ProgramResult",
    "TestsResult",
    "TestsError",
    "Sandbox",
    "SandboxError",
    "get_sandbox",
    "isolation_level",
    "running_isolation",
    "LEVELS",
]

log = logging.getLogger(__name__)

_UID_BASE = 1_000_000
#: uids each server hands out, two per execution (solution and judge), in turn: every execution runs as uids no
#: execution of the last 255 used, so per-uid kernel accounting that something left behind (pipe buffers,
#: descriptors in flight) never reaches the next one. 512 x a pid_max of 2**22 stays within 32-bit uids.
_UIDS_PER_SERVER = 512
#: Seconds a process that closed its output gets to exit by itself before it is killed (its status counts).
_EXIT_GRACE_S = 0.2
#: Seconds after which the machine's speed factor is measured again before the next execution.
RECALIBRATE_S = 30.0


def server_boot(then: str) -> str:
    """The ``python -I -c`` program that loads the server (as ``z``) and then runs ``then``.

    It loads the package without its ``__init__`` (this module, which imports threading and logging): a module
    that registers a fork handler must not be in the server, or the handler runs in every child.
    """
    here = str(Path(__file__).resolve().parent)
    return (
        f"import sys, types; p = types.ModuleType('sandbox'); p.__path__ = [{here!r}]; "
        f"sys.modules['sandbox'] = p; import sandbox._zygote as z; {then}"
    )


_INSTANCES: weakref.WeakSet[Sandbox] = weakref.WeakSet()


def _forget_inherited() -> None:
    """In a forked child: drop the parent's connections without a word, so the parent's server still sees EOF
    when the parent exits (the child starts its own server on first use)."""
    for sb in list(_INSTANCES):
        if sb._sock is not None:
            try:
                os.close(sb._sock.detach())
            except OSError:
                pass
        sb._sock, sb._proc = None, None
        if sb._pidfd >= 0:
            os.close(sb._pidfd)
            sb._pidfd = -1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_inherited)


class Sandbox:
    """A warm sandbox server and the slots to run code in it. Prefer :func:`get_sandbox`."""

    def __init__(self, limits: Limits | None = None, slots: int | None = None) -> None:
        self.limits = limits or Limits()
        self.slots = max(1, min(32, slots or 2 * (os.cpu_count() or 1)))
        self._lock = threading.Lock()
        self._free: list[int] = list(range(self.slots))
        self._slot_cv = threading.Condition()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._report: IsolationReport | None = None
        self._job = 0
        self._uid_turn = 0
        self._pid = os.getpid()
        self._server_pid = 0
        self._gen = 0  # which server: a job belongs to the server it was started on
        self._pidfd = -1  # readable once the server has exited (every running job watches it)
        self._calibrated_at = 0.0
        # every reply is read into this one buffer (under the lock): a fresh 1 MiB for each one cost an mmap, a
        # munmap and page faults, three times per execution
        self._reply = bytearray(1 << 20)
        _INSTANCES.add(self)

    # ------------------------------------------------------------ server lifecycle
    def _start(self) -> None:
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        boot = server_boot(f"z.main({child.fileno()})")
        env = dict(_child.SAFE_ENV)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-c", boot],
                pass_fds=(child.fileno(),),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            child.close()
        host.settimeout(120)
        try:
            ready = json.loads(host.recv(1 << 16) or b"{}")
        except (OSError, ValueError) as e:
            ready = {"error": str(e)}
        host.settimeout(None)
        if not ready.get("ready"):
            host.close()
            self._proc.kill()
            self._proc.wait()
            self._proc = None
            raise SandboxError(f"sandbox server did not start: {ready.get('error', 'it exited')}")
        self._sock = host
        self._server_pid = int(ready["pid"])
        self._gen += 1
        try:
            self._pidfd = os.pidfd_open(self._proc.pid)
        except (AttributeError, OSError):  # (before Linux 5.3: jobs then poll the process instead)
            self._pidfd = -1
        level, missing = level_of(ready["layers"])
        self._report = IsolationReport(level, ready["layers"], missing, float(ready["speed_factor"]))
        self._calibrated_at = time.monotonic()
        log.info(
            "sandbox server %d up: isolation %s (missing: %s), speed factor %.2f",
            self._server_pid,
            level,
            ", ".join(missing) or "none",
            self._report.speed_factor,
        )

    def _ensure(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's server is not ours
            self.__init__(self.limits, self.slots)  # type: ignore[misc]  # a forked child starts over, fresh
        if self._proc is None or self._proc.poll() is not None:
            if self._proc is not None:
                log.warning("sandbox server exited (status %s); starting a new one", self._proc.returncode)
                self._close_server()
            self._start()

    def isolation(self) -> IsolationReport:
        """The isolation report (starts the server if needed)."""
        with self._lock:
            self._ensure()
            assert self._report is not None
            return self._report

    def _request(self, msg: dict[str, Any], fds: Sequence[int] = (), gen: int = 0) -> dict[str, Any]:
        """Send ``msg`` and wait for the reply; ``gen``: only to that server (never start a new one for it).

        Raises:
            SandboxError: the server is gone or the connection failed.
        """
        with self._lock:
            if gen and (gen != self._gen or self._proc is None or self._proc.poll() is not None):
                raise SandboxError("the sandbox server died during the run")
            self._ensure()
            assert self._sock is not None
            try:
                socket.send_fds(self._sock, [json.dumps(msg).encode()], list(fds))
                data = self._reply[: self._sock.recv_into(self._reply)]
            except OSError as e:
                self._close_server()
                raise SandboxError(f"sandbox server connection failed: {e}") from None
            if not data:
                self._close_server()
                raise SandboxError("sandbox server closed the connection")
            return json.loads(data)

    def _close_server(self) -> None:
        """Close the connection and wait for the server; if it did not exit cleanly (it was killed, it
        crashed), kill what it left running at once: the groups of a dead server have no one else to empty them."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1
        if self._proc is not None:
            try:
                self._proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            if self._proc.returncode != 0 and os.geteuid() == 0:
                _cgroups.remove_stale(_cgroups.detect_roots())
            self._proc = None

    def _server_lost(self, gen: int) -> None:
        """The server of generation ``gen`` died during a job: reap it and kill its leftovers (once)."""
        with self._lock:
            if gen == self._gen and self._proc is not None:
                log.warning("sandbox server %d died during a run (status %s)", self._server_pid, self._proc.poll())
                self._close_server()

    def close(self) -> None:
        """Stop the server: it kills whatever still runs and removes its groups."""
        if self._pid != os.getpid():
            return
        with self._lock:
            self._close_server()

    # ------------------------------------------------------------ slots
    def _acquire(self) -> int:
        with self._slot_cv:
            while not self._free:
                self._slot_cv.wait()
            return self._free.pop()

    def _release(self, slot: int) -> None:
        with self._slot_cv:
            self._free.append(slot)
            self._slot_cv.notify()

    def uid_range(self) -> range:
        """The uids this sandbox's children run as (for host-side checks that nothing outlived its run)."""
        self.isolation()
        base = _UID_BASE + self._server_pid * _UIDS_PER_SERVER
        return range(base, base + _UIDS_PER_SERVER)

    def server_pid(self) -> int:
        """The pid of the warm server process (starting it if needed)."""
        self.isolation()
        return self._server_pid

    def _uids(self) -> tuple[int, int]:
        """The next execution's (solution, judge) uids: fresh ones for each execution, in turn."""
        with self._lock:
            self._uid_turn = (self._uid_turn + 1) % (_UIDS_PER_SERVER // 2)
            base = _UID_BASE + self._server_pid * _UIDS_PER_SERVER + 2 * self._uid_turn
        return base, base + 1

    # ------------------------------------------------------------ running
    def _deadline(self, limits: Limits) -> float:
        """``timeout_s`` times the speed factor, re-measured when older than ``RECALIBRATE_S`` (load changes)."""
        report = self.isolation()
        if time.monotonic() - self._calibrated_at > RECALIBRATE_S:
            self._calibrated_at = time.monotonic()
            reply = self._request({"op": "calibrate"})
            factor = float(reply.get("speed_factor", report.speed_factor))
            with self._lock:
                if self._report is not None:
                    self._report = report = replace(self._report, speed_factor=factor)
        return limits.timeout_s * report.speed_factor

    def _launch(
        self, children: list[tuple[str, int, list[int]]], limits: Limits, deadline_s: float, slot: int
    ) -> tuple[int, int, int]:
        """Ask the server to fork the children; each gets (role, uid, fds for 0..n-1, -1 = /dev/null).

        Returns the job number, the server's generation and a descriptor that turns readable if it dies.
        """
        with self._lock:
            self._ensure()
            self._job += 1
            job, gen = self._job, self._gen
            watch = os.dup(self._pidfd) if self._pidfd >= 0 else -1
        sent: list[int] = []
        described = []
        for role, uid, fds in children:
            index = []
            for fd in fds:
                if fd < 0:
                    index.append(-1)
                else:
                    index.append(len(sent))
                    sent.append(fd)
            described.append({"role": role, "uid": uid, "fds": index})
        msg = {"op": "start", "job": job, "slot": slot, "limits": limits.for_child(deadline_s), "children": described}
        try:
            reply = self._request(msg, sent, gen)
        except SandboxError:
            if watch >= 0:
                os.close(watch)
            self._server_lost(gen)
            raise
        if not reply.get("ok"):
            if watch >= 0:
                os.close(watch)
            raise SandboxError(f"could not start the sandboxed process: {reply.get('error')}")
        return job, gen, watch

    def _finish(self, job: int, gen: int, lost: bool, grace_s: float) -> dict[str, Any]:
        """End the job; ``grace_s``: how long the server lets a process that closed its output exit by itself.

        Raises:
            SandboxError: the job's server died (its processes are killed before this returns).
        """
        if not lost:
            try:
                return self._request({"op": "end", "job": job, "grace_s": grace_s}, gen=gen)
            except SandboxError:
                pass
        self._server_lost(gen)
        raise SandboxError("the sandbox server died during the run; its processes were killed")

    def _execute(
        self,
        children: list[tuple[str, list[str | None]]],
        writes: dict[str, bytes],
        limits: Limits,
        finish_on: list[str],
        shares: Shares | None = None,
    ) -> tuple[Pump, dict[str, Any], ExecutionClock, float, dict[str, Stream]]:
        """Start the children, feed ``writes``, read every other pipe until ``finish_on`` close, end the job.

        Returns the pump, the server's end reply, the clock that judged the time, the duration and the read
        streams by name.

        Raises:
            SandboxError: the server could not start a child, a child failed its setup, or the execution got too
                little CPU to be judged (it was runnable, not sleeping, when the wall-clock cap passed).
        """
        deadline_s = self._deadline(limits) if shares is None else shares.budget_s
        slot = self._acquire()
        ours: dict[str, int] = {}
        theirs: list[int] = []
        streams: dict[str, Stream] = {}
        try:
            spec, ours, theirs = make_pipes(children, set(writes), self._uids())
            t0 = time.monotonic()
            job, gen, watch = self._launch(spec, limits, deadline_s, slot)
            for fd in theirs:
                os.close(fd)
            theirs = []
            pump = Pump(0.0, watch)
            for name, fd in list(ours.items()):
                del ours[name]
                if name in writes:
                    pump.write(fd, writes[name])
                else:
                    keep = 4096 if name.startswith("setup") else limits.max_output_bytes if name == "out" else 1 << 14
                    keep = limits.max_output_bytes if name == "prog" else keep
                    streams[name] = pump.read(fd, cap=limits.max_output_bytes, keep=keep)
            clock = self._clock(job, gen, t0, deadline_s, shares, streams.get("prog"))
            pump.deadline, pump.extend = clock.first_deadline, clock.extend
            try:
                until = [streams[n] for n in finish_on] + [v for k, v in streams.items() if k.startswith("setup")]
                pump.pump(until, 2 * limits.max_output_bytes)
            finally:
                duration = time.monotonic() - t0
                try:
                    end = self._finish(job, gen, pump.lost, 0.0 if pump.timed_out else _EXIT_GRACE_S)
                finally:
                    pump.close()
        finally:
            for fd in theirs + list(ours.values()):
                os.close(fd)
            self._release(slot)
        for k, v in streams.items():
            if k.startswith("setup") and not bytes(v.buf).startswith(b"OK"):
                why = "did not finish its setup by the deadline (an overloaded machine)" if pump.timed_out else None
                raise SandboxError(
                    bytes(v.buf).decode(errors="replace") or f"a sandboxed process {why or 'died during setup'}"
                )
        if pump.timed_out and clock.starved:
            raise SandboxError(clock.starved_reason())
        return pump, end, clock, duration, streams

    def _clock(
        self, job: int, gen: int, t0: float, cpu_s: float, shares: Shares | None, prog: Stream | None
    ) -> ExecutionClock:
        """The clock of one execution: its CPU time, and with ``shares`` each test case's own share of it."""

        def usage() -> dict[str, Any]:
            return self._request({"op": "usage", "job": job}, gen=gen)

        if shares is None or prog is None:
            return ExecutionClock(usage, t0, cpu_s)

        def progress() -> Progress:
            return Progress.parse(shares.cases, bytes(prog.buf))

        return ExecutionClock(usage, t0, cpu_s, progress, shares.reserve_s, len(shares.skip))

    def run_program(self, code: str, stdin: str | bytes = b"", limits: Limits | None = None) -> ProgramResult:
        """Run ``code`` as a program with ``stdin``; return its output and how it ended.

        Raises:
            SandboxError: the sandbox could not run it at all.
        """
        limits = limits or self.limits
        data = stdin.encode() if isinstance(stdin, str) else bytes(stdin)
        children: list[tuple[str, list[str | None]]] = [("program", ["stdin:r", "out:w", "err:w", "pay:r", "setup0:w"])]
        writes = {"pay": _payload({"code": code}), "stdin": data}
        pump, end, clock, duration, st = self._execute(children, writes, limits, ["out", "err"])
        out, err = st["out"], st["err"]
        ex = (end.get("exits") or [None])[0] or {}
        code_, sig = ex.get("code"), ex.get("signal")
        stderr = bytes(err.buf[-(1 << 14) :])
        status: ProgramStatus
        if end.get("oom", [False])[0]:
            status, reason = "memory", "memory limit reached"
        elif out.over or err.over:
            status, reason = "output_limit", f"output over {limits.max_output_bytes} bytes"
        elif pump.timed_out:
            status, reason = "timeout", clock.reason()
        elif code_ == 0:
            status, reason = "ok", ""
        elif b"MemoryError" in stderr[-2000:]:
            status, reason = "memory", "MemoryError"
        else:
            status = "crash"
            reason = f"exit code {code_}" if code_ is not None else f"killed by signal {sig}"
        return ProgramResult(status, bytes(out.buf[: limits.max_output_bytes]), stderr, code_, sig, duration, reason)

    def run_tests(
        self, code: str, tests: str, entry_point: str | None = None, partial: bool = False, limits: Limits | None = None
    ) -> TestsResult:
        """Run ``tests`` (Python source) in a judge process against ``code`` running in a solution process.

        ``TestsResult.total`` is the number of test cases known before the run (one per ``assert`` statement
        or unittest method); cases the solution never reached count as failed. Every case runs, whatever the
        ones before gave, each under its own share of the CPU time limit: a case that runs out of its share is
        a timeout, and the cases after it run in a new execution (:mod:`sandbox._shares`). ``partial`` is kept
        for callers; the verdict is the same either way and the caller decides the score.

        Raises:
            SandboxError: the sandbox could not run it at all.
            SyntaxError: the tests do not parse (checked here, before anything starts).
            TestsError: the tests need an ``entry_point`` (they define ``check`` and never call it) and got none.
        """
        limits = limits or self.limits
        prepared = _judge.prepare_tests(tests, entry_point)  # raises before anything starts
        shares = Shares(self._deadline(limits), int(prepared["cases"]))
        decided: dict[int, bool] = {}
        timed_out: list[int] = []
        duration = 0.0
        while True:
            res, clock, progress = self._judge_once(code, prepared, limits, shares)
            duration += res.duration_s
            case = clock.case
            if res.status != "timeout" or case is None or case in decided or len(timed_out) >= progress.cases:
                break
            decided.update(progress.outcome)
            decided[case] = False
            timed_out.append(case)
            if progress.cases - len(decided) <= 0:
                break
            shares = shares.after(progress, decided)
        if not timed_out:
            return res
        outcomes = {**progress.outcome, **decided} if res.status == "timeout" else {**decided, **progress.outcome}
        total = max(res.total, progress.cases)
        status: Literal["timeout", "memory"] = "memory" if res.status == "memory" else "timeout"
        reason = f"test case(s) {', '.join(map(str, timed_out))} ran out of their share of the CPU time limit"
        if res.status not in ("pass", "timeout") and res.reason:
            reason += f"; then {res.status}: {res.reason}"
        passed = min(sum(outcomes.values()), total - 1)
        return TestsResult(status, passed, total, res.tests, reason, duration, res.output)

    def _judge_once(
        self, code: str, prepared: dict[str, Any], limits: Limits, shares: Shares
    ) -> tuple[TestsResult, ExecutionClock, Progress]:
        """One execution of the tests (the cases in ``shares.skip`` skipped); its result, clock and progress."""
        children: list[tuple[str, list[str | None]]] = [
            ("solution", [None, "sout:w", "sout:w", "spay:r", "setup0:w", "rpc"]),
            ("judge", [None, "jout:w", "jout:w", "jpay:r", "setup1:w", "rpc", "verdict:w", "prog:w"]),
        ]
        spec = {**prepared, "skip": list(shares.skip)}  # (partial or not, every case runs)
        writes = {"spay": _payload({"code": code}), "jpay": _payload(spec)}
        pump, end, clock, duration, st = self._execute(children, writes, limits, ["verdict"], shares)
        progress = Progress.parse(shares.cases, bytes(st["prog"].buf))
        output = bytes(st["sout"].buf[-4096:])
        ooms = end.get("oom") or [False, False]
        verdict = _parse_verdict(bytes(st["verdict"].buf))
        base = _Timing(duration_s=duration, output=output)
        # the cases known before the run are the floor of the denominator, whatever the judge got to
        total = max(1, int(prepared["cases"]), progress.cases, _int(verdict, "total"))
        if ooms[0] or (verdict and _MEMORY_ERROR.match(str(verdict.get("reason", "")))):
            return TestsResult("memory", 0, total, reason="memory limit reached", **base), clock, progress
        if pump.timed_out:  # the cases that ran and held before the time ran out still count
            passed = min(sum(progress.outcome.values()), total - 1)
            return TestsResult("timeout", passed, total, reason=clock.reason(), **base), clock, progress
        if st["sout"].over or st["jout"].over:
            reason = f"output over {limits.max_output_bytes} bytes"
            return TestsResult("fail", 0, total, reason=reason, **base), clock, progress
        if verdict is None:
            judge_exit = (end.get("exits") or [None, None])[1]
            reason = f"the judge ended without a verdict ({judge_exit})"
            return TestsResult("error", 0, total, reason=reason, **base), clock, progress
        status = verdict.get("status")
        if status == "bad_tests":
            reason = str(verdict.get("reason", ""))[:2000]
            return TestsResult("bad_tests", 0, 0, reason=reason, duration_s=duration, output=output), clock, progress
        judged: Literal["pass", "fail", "error"] = status if status in ("pass", "fail", "error") else "fail"
        passed = min(_int(verdict, "passed"), total if judged == "pass" else total - 1)
        tests_run = list(verdict.get("tests") or [])
        return TestsResult(judged, passed, total, tests_run, str(verdict.get("reason", "")), **base), clock, progress


class _Timing(TypedDict):
    """The fields every :class:`TestsResult` of one run shares."""

    duration_s: float
    output: bytes


#: A verdict that a MemoryError decided: raised outside the tests, or by the first failing assert (where no memory
#: cgroup holds the execution, the address-space limit raises it: :func:`sandbox._child.rlimit_plan`).
_MEMORY_ERROR = re.compile(r"(.{0,29}MemoryError|\d+ assertion\(s\) failed \(line \d+: MemoryError\b)")


def _payload(obj: Any) -> bytes:
    """A child's payload (plain data), in ``marshal``'s format: the child runs this same interpreter, and loading
    it is C code, where loading JSON ran the decoder's Python code in every child (about 150 us each)."""
    return marshal.dumps(obj)


def _int(d: dict[str, Any] | None, key: str) -> int:
    v = (d or {}).get(key, 0)
    return v if type(v) is int and v >= 0 else 0


def _parse_verdict(raw: bytes) -> dict[str, Any] | None:
    if len(raw) < 4:
        return None
    n = int.from_bytes(raw[:4], "big")
    try:
        v = json.loads(raw[4 : 4 + n])
    except ValueError:
        return None
    return v if isinstance(v, dict) else None


_SHARED: Sandbox | None = None
_SHARED_LOCK = threading.Lock()


def get_sandbox() -> Sandbox | RelaySandbox:
    """The per-process shared sandbox (started on first use; closed at interpreter exit).

    Where ``GRPO_HARNESS_SANDBOX_RELAY`` names a socket (a scoring worker on a Ray node), the node's one shared
    server answers instead, through :class:`~sandbox._relay.RelaySandbox` (the same three calls).
    """
    global _SHARED
    relay = os.environ.get(RELAY_ENV)
    if relay:
        return relay_client(relay)
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED._pid != os.getpid():
            _SHARED = Sandbox()
            atexit.register(_SHARED.close)
        return _SHARED


def running_isolation() -> IsolationReport | None:
    """The isolation report of this process's shared sandbox if its server is up; None otherwise (starts nothing)."""
    sb = _SHARED
    if sb is None or sb._pid != os.getpid() or sb._proc is None:
        return None
    return sb._report


def isolation_level() -> str:
    """The isolation level this process's sandbox provides: ``full``, ``strong`` or ``basic``."""
    return get_sandbox().isolation().level
