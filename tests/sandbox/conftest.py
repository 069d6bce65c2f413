"""Fixtures for the sandbox tests: the code reward with short limits, host-side listeners and leak checks.

Every test here runs real code in the real sandbox (no fakes). A secret is put into this process's environment
before any sandbox starts, so tests can check that no solution ever sees it.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
from pathlib import Path

import pytest

HOST_SECRET = "hostsecret-" + secrets.token_hex(8)
os.environ["GRPO_SANDBOX_TEST_SECRET"] = HOST_SECRET


@pytest.fixture(scope="session")
def sandbox():
    from sandbox import get_sandbox

    return get_sandbox()


@pytest.fixture(scope="session")
def code_fn():
    """The code reward with a 1 s (times the speed factor) limit: attacks that hang end quickly."""
    from harness import get_reward

    return get_reward("code", timeout=1.0)


@pytest.fixture(scope="session")
def generous_fn():
    """The code reward with its default limits, for correct solutions that must pass on a loaded machine."""
    from harness import get_reward

    return get_reward("code")


@pytest.fixture
def need_layers(sandbox):
    """``need_layers("uid", ...)``: skip a test of a property that only the named isolation layers give, where this
    host's sandbox lacks one (an unprivileged host runs at ``strong``: no uid per execution and no cgroups; the
    summary line lists what is missing)."""

    def _need(*layers: str) -> None:
        missing = [name for name in layers if not sandbox.isolation().layers.get(name)]
        if missing:
            pytest.skip(f"needs the sandbox layer(s) {', '.join(missing)}, which this host lacks (root gives them)")

    return _need


def sandbox_processes(sb) -> list[int]:
    """Pids of live processes running as any of the sandbox's uids."""
    uids = sb.uid_range()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            status = (d / "status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Uid:"):
                if int(line.split()[1]) in uids and "State:\tZ" not in status:
                    found.append(int(d.name))
                break
    return found


def busy_sandbox_cgroups(sb) -> list[Path]:
    """Groups of this sandbox's server that still hold a process (groups are reused, so they may exist)."""
    from sandbox._cgroups import detect_roots

    prefix = f"sbx-{sb.server_pid()}-"
    roots = detect_roots()
    groups = [p for r in (roots.memory, roots.pids, roots.unified) if r is not None for p in r.glob(prefix + "*")]
    return [g for g in groups if (g / "cgroup.procs").read_text().strip()]


@pytest.fixture
def run(sandbox):
    """``run(src, stdin="", timeout=2.0)``: run a program in the shared sandbox and return its ProgramResult."""
    from sandbox import Limits

    def _run(src: str, stdin: str = "", timeout: float = 2.0):
        return sandbox.run_program(src, stdin, Limits(timeout_s=timeout))

    return _run


@pytest.fixture
def clean(sandbox):
    """Asserts, after the test, that no sandbox process and no job group outlived it."""
    yield
    assert sandbox_processes(sandbox) == [], "a sandboxed process outlived its run"
    assert busy_sandbox_cgroups(sandbox) == [], "a job group still holds a process"


class Listener:
    """A TCP, UDP or unix listener on the host that counts what reaches it."""

    def __init__(self, kind: str, path: str | None = None) -> None:
        self.hits = 0
        if kind == "tcp":
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.bind(("127.0.0.1", 0))
            self.sock.listen(8)
        elif kind == "udp":
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self.sock.bind(("127.0.0.1", 0))
        else:
            assert path is not None, "a unix listener needs a path"
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.bind(path)
            self.sock.listen(8)
        self.address = self.sock.getsockname()
        self.kind = kind
        self.sock.settimeout(0.2)
        self._stop = False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self) -> None:
        while not self._stop:
            try:
                if self.kind == "udp":
                    self.sock.recvfrom(4096)
                else:
                    conn, _ = self.sock.accept()
                    conn.close()
                self.hits += 1
            except (TimeoutError, OSError):
                continue

    def close(self) -> None:
        self._stop = True
        self._t.join(5)
        self.sock.close()


@pytest.fixture
def listener():
    made: list[Listener] = []

    def make(kind: str, path: str | None = None) -> Listener:
        made.append(Listener(kind, path))
        return made[-1]

    yield make
    for item in made:
        item.close()
