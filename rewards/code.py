"""The ``code`` reward: run the completion's program in the sandbox against the row's tests.

The code is the last fenced code block of the completion (an unclosed final fence counts), else the whole
completion. With ``complete_prompt=true`` (the ``humaneval`` task), the row's ``code_prompt`` column comes first:
code that does not define the row's ``entry_point`` continues its function (a base model's completion of the
body); code that does replaces it, with the prompt's imports and helpers in scope.
The ``tests`` column (or HumanEval's ``test``) may be:

* Python source run after the solution, in a separate judge process: ``assert`` lines, a ``check(candidate)``
  function (called with the row's ``entry_point`` when the source defines ``check`` but never calls it, as
  HumanEval does), or ``unittest.TestCase`` classes; a list of assert strings (MBPP) is joined into source;
* stdin/stdout cases: ``[{"input": ..., "output": ...}, ...]`` (or ``stdin``/``stdout`` keys, or one such
  dict), or ``{"inputs": [...], "outputs": [...]}``; also as a JSON string. Every output line is compared after
  trimming trailing whitespace on each line and trailing blank lines; missing or extra lines fail.

Statuses: ``pass`` (1.0); a program that ran and failed gets one of :data:`harness.types.PROGRAM_FAILED_STATUSES`:
``fail`` (0.0, or with ``partial=true`` the passed fraction of the test cases known before the run: one per
``assert`` statement, unittest method or stdin/stdout case; every case runs whatever the ones before gave, each
under its own share of the time limit; a case never reached because the program exited or crashed first counts as
failed), ``program_error`` (0.0: the program did not run to a verdict: a syntax error, a crash, a missing entry
point; ``info["reason"]`` says which), ``time_limit`` (0.0, or with ``partial=true`` the fraction of cases that
held) and ``memory`` (0.0: the program ran past its memory limit). ``time_limit`` is a verdict on the program,
unlike ``timeout``, which means the reward itself ran out of time and is unscored. Unscored: ``sandbox_error`` (the
sandbox could not run it, or its isolation is below ``min_isolation`` and ``allow_weaker_isolation`` is off) and
``bad_input`` (the tests are missing, do not parse, or cannot judge anything: ``check(candidate)`` without an
``entry_point``, no unittest method, no assert that ran). ``Score.info`` carries the isolation level, per-test
results and the reason. Time limits are ``timeout`` seconds of CPU time per test run (each stdin/stdout case is
a run; Python tests share one run, each case with its own share), scaled by the machine's measured speed, under
a wall-clock cap a few times larger; a run the machine was too busy to give its CPU is ``sandbox_error``.

>>> from harness import get_reward
>>> program = "```python\\ndef add(a, b):\\n    return a + b\\n```"
>>> score = get_reward("code")({"tests": "assert add(2, 3) == 5"}, program)
>>> score.status, score.value, score.info["isolation"] in ("full", "strong", "basic")
('pass', 1.0, True)

This module does not isolate anything itself; :mod:`sandbox` does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from harness.registry import reward
from harness.types import Sample, Score, Status
from sandbox import LEVELS, Limits, SandboxError, TestsError, get_sandbox

__all__ = ["code_reward", "extract_code", "parse_tests", "outputs_match"]

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```[^\n`]*\n(.*)\Z", re.DOTALL)
_MAX_ANSWER_CHARS = 20_000


def extract_code(completion: str) -> str:
    """The last fenced code block of ``completion`` (or an unclosed final one), else the whole text.

    >>> extract_code("Here:\\n```python\\nprint(1)\\n```\\nand\\n```\\nprint(2)\\n```")
    'print(2)\\n'
    """
    blocks = _FENCE.findall(completion)
    tail = completion[completion.rfind("```") :] if completion.count("```") % 2 == 1 else ""
    if tail:
        m = _OPEN_FENCE.match(tail)
        if m:
            return m.group(1)
    if blocks:
        return blocks[-1]
    return completion


def parse_tests(tests: Any) -> tuple[str, Any]:
    """Classify the ``tests`` column: ``("python", source)`` or ``("stdio", [(input, output), ...])``.

    Raises:
        ValueError: naming what was expected, when the column is none of the accepted shapes.
    """
    if isinstance(tests, str):
        stripped = tests.strip()
        if stripped[:1] in "[{" and stripped:
            try:
                decoded = json.loads(stripped)
            except ValueError:
                decoded = None
            if decoded is not None and not isinstance(decoded, str):
                return parse_tests(decoded)
        if not stripped:
            raise ValueError("tests is an empty string")
        return "python", tests
    if isinstance(tests, dict) and "inputs" in tests and "outputs" in tests:
        ins, outs = tests["inputs"], tests["outputs"]
        if not isinstance(ins, list) or not isinstance(outs, list) or len(ins) != len(outs):
            raise ValueError("tests: 'inputs' and 'outputs' must be lists of the same length")
        return "stdio", [(_text(i, "inputs"), _text(o, "outputs")) for i, o in zip(ins, outs, strict=True)]
    if isinstance(tests, dict) and _case(tests) is not None:
        return parse_tests([tests])
    if isinstance(tests, list) and tests:
        if all(isinstance(t, str) for t in tests):
            return "python", "\n".join(tests)
        cases = [_case(t) for t in tests]
        if all(c is not None for c in cases):
            return "stdio", [(_text(c[0], "input"), _text(c[1], "output")) for c in cases if c is not None]
    raise ValueError(
        "tests must be Python test source, a list of assert strings, a list of {'input', 'output'} cases "
        f"or {{'inputs': [...], 'outputs': [...]}}; got {type(tests).__name__}"
    )


def _case(t: Any) -> tuple[Any, Any] | None:
    """(input, output) of one stdin/stdout case, accepting the ``stdin``/``stdout`` spellings too."""
    if not isinstance(t, dict):
        return None
    for i_key, o_key in (("input", "output"), ("stdin", "stdout"), ("input", "expected_output")):
        if i_key in t and o_key in t:
            return t[i_key], t[o_key]
    return None


def _text(v: Any, field: str) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return "\n".join(v) + "\n"
    raise ValueError(f"tests: every {field!r} must be a string, got {type(v).__name__}")


def _lines(text: str) -> list[str]:
    lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def outputs_match(actual: str, expected: str) -> bool:
    """Line-by-line equality, ignoring trailing whitespace per line and trailing blank lines.

    >>> outputs_match("1 2 \\n3\\n\\n", "1 2\\n3")
    True
    >>> outputs_match("1\\n", "1\\n2\\n")
    False
    """
    return _lines(actual) == _lines(expected)


def _first_difference(actual: str, expected: str) -> str:
    """Where ``actual`` stops matching ``expected`` (empty when they match), for ``Score.info``."""
    got, want = _lines(actual), _lines(expected)
    if got == want:
        return ""
    for k in range(max(len(got), len(want))):
        g = got[k] if k < len(got) else "<no line>"
        w = want[k] if k < len(want) else "<no line>"
        if g != w:
            return f"output line {k + 1}: expected {w[:80]!r}, got {g[:80]!r}"
    return "output differs"


#: The sandbox's outcome of one program run, and of a run of the Python tests, as the Score status of a verdict.
_STATUS_OF_RUN: dict[str, Status] = {
    "timeout": "time_limit",
    "memory": "memory",
    "crash": "program_error",
    "output_limit": "fail",
}
_STATUS_OF_TESTS: dict[str, Status] = {
    "fail": "fail",
    "error": "program_error",
    "timeout": "time_limit",
    "memory": "memory",
}


def _run_stdio(code: str, cases: list[tuple[str, str]], limits: Limits) -> tuple[str, int, list[dict]]:
    sb = get_sandbox()
    results: list[dict[str, Any]] = []
    worst = "pass"
    for i, (given, expected) in enumerate(cases):
        run = sb.run_program(code, given, limits)
        diff = ""
        if run.status == "ok":
            diff = _first_difference(run.stdout.decode("utf-8", "replace"), expected)
            status = "fail" if diff else "pass"
        else:
            status = _STATUS_OF_RUN[run.status]
        entry: dict[str, Any] = {"case": i, "status": status, "time_s": round(run.duration_s, 4)}
        if run.reason or diff:
            entry["reason"] = run.reason or diff
        if run.status == "crash":
            entry["stderr"] = run.stderr[-600:].decode("utf-8", "replace")
        results.append(entry)
        if status != "pass":  # every case runs, whatever the ones before gave: nothing the program can observe
            worst = status if worst == "pass" else worst  # says whether an earlier output was right
    return worst, sum(r["status"] == "pass" for r in results), results


def _score_python(code: str, source: str, entry_point: str | None, limits: Limits, partial: bool, info: dict) -> Score:
    try:
        res = get_sandbox().run_tests(code, source, entry_point, partial, limits)
    except SyntaxError as e:
        return Score.unscored("bad_input", f"tests do not parse: {e.msg} (line {e.lineno})", **info)
    except TestsError as e:
        return Score.unscored("bad_input", str(e), **info)
    if res.status == "bad_tests":
        return Score.unscored("bad_input", res.reason, **info)
    info.update(passed=res.passed, total=res.total, tests=res.tests, reason=res.reason, time_s=round(res.duration_s, 4))
    if res.status == "pass":
        return Score(value=1.0, status="pass", answer=code[:_MAX_ANSWER_CHARS], info=info)
    if res.status == "error":  # the solution did not load: a syntax error, a crash at import, no entry point
        info["outcome"] = "error"
    status = _STATUS_OF_TESTS[res.status]
    # with partial credit a time limit keeps the cases that held: each case ran under its own share of the time
    value = res.passed / res.total if partial and res.total and status in ("fail", "time_limit") else 0.0
    return Score(value=value, status=status, answer=code[:_MAX_ANSWER_CHARS], info=info)


def _isolation_info(min_isolation: str, allow_weaker: bool) -> tuple[dict[str, Any], Score | None]:
    """The isolation fields for ``Score.info``, and the refusal Score when the level is below the floor."""
    try:
        report = get_sandbox().isolation()
    except SandboxError as e:
        return {}, Score.unscored("sandbox_error", str(e))
    info: dict[str, Any] = {"isolation": report.level, "speed_factor": round(report.speed_factor, 3)}
    if report.at_least(min_isolation):
        return info, None
    if allow_weaker:
        info["isolation_waived"] = True
        return info, None
    reason = (
        f"isolation level {report.level!r} is below the required {min_isolation!r} (missing: "
        f"{', '.join(report.missing)}); set allow_weaker_isolation=true to run untrusted code anyway"
    )
    return info, Score.unscored("sandbox_error", reason, **info)


def _score_stdio(code: str, cases: list[tuple[str, str]], limits: Limits, partial: bool, info: dict) -> Score:
    status, passed, results = _run_stdio(code, cases, limits)
    info.update(passed=passed, total=len(cases), tests=results)
    if status == "pass":
        return Score(value=1.0, status="pass", answer=code[:_MAX_ANSWER_CHARS], info=info)
    info["reason"] = next((r.get("reason", r["status"]) for r in results if r["status"] != "pass"), status)
    value = passed / len(cases) if partial else 0.0
    return Score(value=value, status=status, answer=code[:_MAX_ANSWER_CHARS], info=info)


_DEFINES = r"^(?:async[ \t]+)?def[ \t]+{name}[ \t]*\(|^{name}[ \t]*="


def defines(code: str, name: str) -> bool:
    """Whether ``code`` defines ``name`` at its top level (a ``def`` or an assignment).

    >>> defines("def f(x):\\n    return x\\n", "f"), defines("    return x\\n", "f")
    (True, False)
    """
    return re.search(_DEFINES.format(name=re.escape(name)), code, re.MULTILINE) is not None


def _program(code: str, extra: dict[str, Any], entry_point: str | None) -> str:
    """The code to run with ``complete_prompt``: the row's ``code_prompt``, then the code.

    Code that does not define the entry point continues the prompt's function (a base model's completion of the
    body). Code that does define it follows the prompt as a module of its own and replaces the prompt's
    docstring-only function, keeping the prompt's imports and helper functions that a chat reply often leaves out.
    """
    prefix = extra.get("code_prompt")
    if not isinstance(prefix, str) or not prefix or not entry_point:
        return code
    return prefix + "\n" + code if defines(code, entry_point) else prefix + code


@reward("code", reads=("tests", "test", "entry_point", "code_prompt"))
def code_reward(
    *,
    timeout: float = 4.0,
    partial: bool = False,
    memory_mb: int = 1024,
    max_output_mb: int = 8,
    min_isolation: str = "strong",
    allow_weaker_isolation: bool = False,
    complete_prompt: bool = False,
) -> Callable[[Sample, str], Score]:
    """Run the completion's code in the sandbox against the row's tests (Python asserts/check or stdin/stdout).

    Args:
        timeout: CPU seconds per test run (per stdin case, or per run of the Python tests, where each test case
            has its own share), multiplied by the machine's measured speed factor; the wall-clock cap is a few
            times larger.
        partial: score the passed fraction instead of all-or-nothing.
        memory_mb: memory limit of the solution's process tree.
        max_output_mb: stdout+stderr cap; more output fails the test.
        min_isolation: ``full``, ``strong`` or ``basic``: refuse (``sandbox_error``) below this level.
        allow_weaker_isolation: run anyway when the machine offers less than ``min_isolation``.
        complete_prompt: run the row's ``code_prompt`` column (HumanEval's imports, helpers, signature and
            docstring) before the code: a body continues the prompt's function, a whole function (fenced or not)
            replaces it.
    """
    if min_isolation not in LEVELS:
        raise ValueError(f"min_isolation must be one of {', '.join(LEVELS)}; got {min_isolation!r}")
    if not timeout > 0:
        raise ValueError(f"timeout must be positive; got {timeout!r}")
    limits = Limits(
        timeout_s=float(timeout), memory_bytes=int(memory_mb) << 20, max_output_bytes=int(max_output_mb) << 20
    )

    def score(sample: Sample, completion: str) -> Score:
        extra = sample.model_extra or {}
        try:  # HumanEval's own column is "test"
            kind, tests = parse_tests(sample.tests if sample.tests is not None else extra.get("test"))
        except ValueError as e:
            return Score.unscored("bad_input", str(e))
        entry_point = extra.get("entry_point")
        if entry_point is not None and not isinstance(entry_point, str):
            return Score.unscored("bad_input", f"entry_point must be a string, got {type(entry_point).__name__}")
        info, refusal = _isolation_info(min_isolation, allow_weaker_isolation)
        if refusal is not None:
            return refusal
        code = extract_code(completion)
        if complete_prompt:
            code = _program(code, extra, entry_point)
        try:
            if kind == "python":
                return _score_python(code, tests, entry_point, limits, partial, info)
            return _score_stdio(code, tests, limits, partial, info)
        except SandboxError as e:
            return Score.unscored("sandbox_error", str(e), **info)

    return score
