"""The plain data the sandbox hands back: limits, the isolation report and level, and execution results.

Nothing here runs anything; :mod:`sandbox.service` fills these in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "LEVELS",
    "Limits",
    "IsolationReport",
    "ProgramResult",
    "TestsResult",
    "level_of",
    "ProgramStatus",
    "TestsStatus",
    "SandboxError",
]

#: Isolation levels, weakest first.
LEVELS: tuple[str, ...] = ("basic", "strong", "full")
#: How a program run ended (:class:`ProgramResult`).
ProgramStatus = Literal["ok", "crash", "timeout", "memory", "output_limit"]
#: The judge's verdict (:class:`TestsResult`).
TestsStatus = Literal["pass", "fail", "error", "timeout", "memory", "bad_tests"]


class SandboxError(RuntimeError):
    """The sandbox could not run the code at all (the server did not start, a child could not be set up)."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one execution. ``timeout_s`` is multiplied by the machine's speed factor."""

    timeout_s: float = 4.0
    memory_bytes: int = 1 << 30
    max_pids: int = 128
    max_output_bytes: int = 8 << 20
    disk_bytes: int = 64 << 20
    file_size_bytes: int = 32 << 20
    open_files: int = 256
    address_space_bytes: int = 8 << 30

    def for_child(self, deadline_s: float) -> dict[str, int]:
        return {
            "cpu_s": int(deadline_s) + 2,
            "memory_bytes": self.memory_bytes,
            "max_pids": self.max_pids,
            "disk_bytes": self.disk_bytes,
            "file_size_bytes": self.file_size_bytes,
            "open_files": self.open_files,
            "address_space_bytes": self.address_space_bytes,
        }


@dataclass(frozen=True)
class IsolationReport:
    """What the server found: the level, each layer, and what keeps the level from being higher."""

    level: str
    layers: dict[str, Any]
    missing: tuple[str, ...]
    speed_factor: float

    def at_least(self, level: str) -> bool:
        return LEVELS.index(self.level) >= LEVELS.index(level)


def level_of(layers: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """The isolation level the probed ``layers`` give, and what keeps it from the next level up."""
    strong = {
        "a separate uid per execution or a user namespace": layers.get("uid") or layers.get("userns"),
        "landlock": layers.get("landlock_abi", 0) >= 1,
        "seccomp": layers.get("seccomp"),
        "kill of every descendant (cgroup or pid namespace)": layers.get("cgroup_kill")
        or layers.get("pidns")
        or layers.get("job_pidns"),
    }
    full = {
        # (without root every execution runs as the user's own uid, mapped to root in a user namespace)
        "a separate uid per execution": layers.get("uid"),
        "memory cgroup": layers.get("cgroup_memory"),
        "pids cgroup": layers.get("cgroup_pids"),
        "CPU controller per slot": layers.get("cgroup_cpu"),
        "network namespace": layers.get("netns"),
        "mount namespace": layers.get("mntns"),
        "IPC namespace per execution": layers.get("job_ipcns"),
        "pid namespace per execution": layers.get("job_pidns") or layers.get("pidns"),
        "read-only mounts": layers.get("readonly_mounts"),
    }
    miss_strong = tuple(k for k, v in strong.items() if not v)
    miss_full = tuple(k for k, v in full.items() if not v)
    if miss_strong:
        return "basic", miss_strong + miss_full
    return ("strong", miss_full) if miss_full else ("full", ())


@dataclass(frozen=True)
class ProgramResult:
    """How a program run ended. ``status``: ok (exit 0), crash, timeout, memory, output_limit."""

    status: ProgramStatus
    stdout: bytes
    stderr: bytes
    exit_code: int | None
    signal: int | None
    duration_s: float
    reason: str = ""


@dataclass(frozen=True)
class TestsResult:
    """The judge's verdict. ``status``: pass, fail, error (the solution did not load), timeout, memory, bad_tests
    (the tests cannot judge anything: no unittest method, or no assert statement ran). ``total``: the test cases
    known before the run; ``passed``: those that ran and held."""

    status: TestsStatus
    passed: int
    total: int
    tests: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""
    duration_s: float = 0.0
    output: bytes = b""
