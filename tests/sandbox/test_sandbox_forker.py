"""The fork helper: it forks every sandboxed child, the children are still the server's own, and it goes away
with the server."""

from __future__ import annotations

import os
import platform
import signal
import threading
import time
from pathlib import Path

import pytest

from sandbox import Limits, Sandbox


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _minor_faults(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


def _alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _helper(sb: Sandbox) -> int:
    """The server's fork helper: its only child between executions (skips on machines it does not support)."""
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("no clone syscall number here: the server forks its children itself")
    assert sb.run_program("print('ok')").stdout == b"ok\n"  # (the helper starts just after the server says ready)
    helpers = _children(sb.server_pid())
    assert len(helpers) == 1, f"the server's children between executions: {helpers} (expected its fork helper)"
    return helpers[0]


def test_the_server_writes_almost_no_memory_per_execution():
    """The server never forks, so it takes no copy-on-write faults: about 200 per child when it forked them
    itself, 0 on average measured with the helper (threshold 50 per execution)."""
    sb = Sandbox(limits=Limits(timeout_s=10))
    try:
        _helper(sb)
        before = _minor_faults(sb.server_pid())
        for _ in range(20):
            r = sb.run_program("print('ok')")
            assert (r.status, r.stdout) == ("ok", b"ok\n"), r.reason
        assert (_minor_faults(sb.server_pid()) - before) / 20 < 50
    finally:
        sb.close()


def test_sandboxed_processes_are_the_servers_children_and_the_helper_goes_with_it():
    """A running sandboxed process is the server's child (so the server reaps it, and its death kills it), not
    the helper's; closing the sandbox ends the helper too."""
    sb = Sandbox(limits=Limits(timeout_s=30))
    server = sb.server_pid()
    helper = _helper(sb)
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(sb.run_program("import time\ntime.sleep(3)\nprint('ok')")))
    t.start()
    try:
        seen: set[int] = set()
        deadline = time.monotonic() + 20
        while not seen and time.monotonic() < deadline:
            seen = set(_children(server)) - {helper}
            time.sleep(0.01)
        assert seen, "no sandboxed process appeared among the server's children"
        assert _children(helper) == []
    finally:
        t.join(60)
    assert getattr(done[0], "stdout", None) == b"ok\n"
    sb.close()
    deadline = time.monotonic() + 20
    while _alive(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(helper)


def test_a_killed_helper_leaves_the_server_forking_its_children_itself():
    """When the helper is gone, the next execution still runs (the server forks it, with the whole seccomp
    policy in the child), and so do the ones after it."""
    sb = Sandbox(limits=Limits(timeout_s=10))
    try:
        helper = _helper(sb)
        os.kill(helper, signal.SIGKILL)
        deadline = time.monotonic() + 20
        while _alive(helper) and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(3):
            r = sb.run_program("import os\nprint(os.getpid())")
            assert (r.status, r.stdout) == ("ok", b"1\n"), r.reason  # (pid 1 of its own namespace, as before)
        # memfd_create is refused only by the policy's first half, which a child of the helper inherits: here the
        # child must have installed the whole policy itself
        probe = "import os\ntry:\n    os.memfd_create('x')\n    print('made')\nexcept PermissionError:\n    print('refused')"
        assert sb.run_program(probe).stdout == b"refused\n"
    finally:
        sb.close()
