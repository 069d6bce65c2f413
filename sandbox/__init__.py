"""Isolated execution of untrusted code: a warm server forks one sandboxed process per execution.

Each execution gets its own groups (memory, pids, an equal CPU weight, kill-all), rlimits, unprivileged uids of
its own, no-new-privs, Landlock, a seccomp allowlist, private mounts, pid, IPC and network namespaces and no
network, a scrubbed environment and only its own pipes; time is judged on its own CPU time.
Tests run in a separate judge process, every case whatever the ones before gave, so the verdict never depends on
anything the solution's process says about itself, and nothing the solution observes depends on the verdict.
See ``docs/SECURITY.md`` for what is covered and what is not.

>>> from sandbox import get_sandbox
>>> get_sandbox().run_program("print(input()[::-1])", stdin="abc\\n").stdout
b'cba\\n'
"""

from sandbox.service import (
    LEVELS,
    IsolationReport,
    Limits,
    ProgramResult,
    Sandbox,
    SandboxError,
    TestsError,
    TestsResult,
    get_sandbox,
    isolation_level,
)

__all__ = [
    "LEVELS",
    "IsolationReport",
    "Limits",
    "ProgramResult",
    "Sandbox",
    "SandboxError",
    "TestsError",
    "TestsResult",
    "get_sandbox",
    "isolation_level",
]
