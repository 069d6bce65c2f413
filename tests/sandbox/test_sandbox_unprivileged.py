"""The sandbox started by an unprivileged user: user namespace, pid namespace kill, reported level.

Runs a separate host process as ``nobody`` with the system's Python (the sandbox needs only the standard
library). Skipped where that cannot be arranged: not root, no ``setpriv``, no system Python, or a checkout
that other users cannot read.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.sandbox.test_sandbox_inflight import ATTACK, PROBE

ROOT = Path(__file__).resolve().parents[2]
PY = next((p for p in ("/usr/bin/python3.11", "/usr/bin/python3") if os.access(p, os.X_OK)), None)


def _world_readable(path: Path) -> bool:
    for p in [path, *path.parents]:
        if not p.stat().st_mode & stat.S_IXOTH:
            return False
    return True


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None or PY is None or not _world_readable(ROOT),
    reason="needs root to switch to nobody, setpriv, a system Python and a world-readable checkout",
)

SCRIPT = textwrap.dedent("""
    import json, sys, time
    sys.path.insert(0, {root!r})
    from sandbox import Sandbox, Limits
    sb = Sandbox()
    rep = sb.isolation()
    out = {{"level": rep.level, "missing": list(rep.missing)}}
    out["ok"] = sb.run_program("print(6 * 7)").stdout.decode()
    out["verdicts"] = [sb.run_tests("def f(): return 1", "assert f() == 1").status,
                       sb.run_tests("def f(): return 2", "assert f() == 1").status]
    daemon = "import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    time.sleep(300)\\nprint('x')"
    out["daemon"] = sb.run_program(daemon, limits=Limits(timeout_s=0.5)).status
    out["loop"] = sb.run_program("while True: pass", limits=Limits(timeout_s=0.5)).status
    small = Limits(timeout_s=20, memory_bytes=256 << 20)  # no memory cgroup here: the address-space cap holds it
    touch = "x = bytearray(3 << 30)\\nfor i in range(0, len(x), 4096):\\n    x[i] = 1\\nprint('took it')"
    out["memory"] = sb.run_program(touch, limits=small).status
    grow = "def f():\\n    x = []\\n    while True:\\n        x.append(' ' * (1 << 22))"
    out["memory_tests"] = sb.run_tests(grow, "assert f() is None", limits=small).status
    attack, probe = {attack!r}, {probe!r}
    out["inflight"] = [sb.run_program(attack, limits=Limits(timeout_s=20)).stdout.decode()[:9] for _ in range(5)]
    out["probe"] = sb.run_program(probe, limits=Limits(timeout_s=20)).stdout.decode()
    sb.close()
    print(json.dumps(out))
""")


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "-i"]


def _nobody_processes() -> list[str]:
    """Live processes of uid 65534 (zombies waiting for the machine's init to reap them are not alive)."""
    r = subprocess.run(["ps", "-u", "65534", "-o", "pid=,stat=,cmd="], capture_output=True, text=True)
    return [line for line in r.stdout.splitlines() if line.strip() and "Z" not in line.split()[1]]


@pytest.mark.slow
def test_unprivileged_host_gets_strong_isolation_and_right_verdicts(tmp_path):
    before = _nobody_processes()
    script = SCRIPT.format(root=str(ROOT), attack=ATTACK, probe=PROBE)
    r = subprocess.run(NOBODY + [PY, "-I", "-c", script], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["level"] in ("strong", "basic")  # basic only where the kernel refuses user/pid namespaces
    if out["level"] == "strong":
        assert "a separate uid per execution" in out["missing"]
    assert out["ok"] == "42\n" and out["verdicts"] == ["pass", "fail"] and out["loop"] == "timeout"
    assert out["daemon"] == "ok"
    # past its memory limit a solution gets a MemoryError, not 3 GiB of the host (it did, before the fallback)
    assert out["memory"] == "memory" and out["memory_tests"] == "memory", out
    # one uid for every execution: descriptors a run kept in flight must still be collected before the next one
    assert out["inflight"] == ["in flight"] * 5 and out["probe"] == "65536 ok\n"
    assert _nobody_processes() == before, "a process of the unprivileged run outlived it"


@pytest.mark.slow
def test_an_unprivileged_check_below_the_required_level_says_why(tmp_path):
    """Fails on the code before this change: it exited 1 without a line saying what failed."""
    boot = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from sandbox.cli import main; raise SystemExit(main())"
    r = subprocess.run(
        NOBODY + [PY, "-I", "-c", boot, "--min", "full"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert r.returncode == 1, r.stdout + r.stderr[-2000:]
    last = r.stdout.strip().splitlines()[-1]
    assert last.startswith("check failed: isolation level ") and "below the required full" in last, r.stdout
    assert "a separate uid per execution" in last and "unprivileged uid" not in r.stdout


LOOPBACK = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {root!r})
    from sandbox import Sandbox, Limits
    read = {read!r}
    write = {write!r}
    sb = Sandbox(slots=1)
    out = [sb.run_program(code, limits=Limits(timeout_s=10)).stdout.decode() for code in (read, write, read)]
    sb.close()
    print(json.dumps(out))
""")
LOOPBACK_READ = """
import fcntl, socket, struct
s = socket.socket(socket.AF_UNIX)
try:
    r = fcntl.ioctl(s.fileno(), 0x8921, struct.pack("16si12x", b"lo", 0))
    print("mtu", struct.unpack("16si12x", r)[1])
except OSError as e:
    print("errno", e.errno)
"""
LOOPBACK_WRITE = """
import fcntl, socket, struct
s = socket.socket(socket.AF_UNIX)
try:
    fcntl.ioctl(s.fileno(), 0x8922, struct.pack("16si12x", b"lo", 4242))
    print("set")
except OSError as e:
    print("errno", e.errno)
"""


@pytest.mark.slow
def test_an_execution_cannot_configure_the_loopback_the_next_one_sees(tmp_path):
    """Fails on the code before this change: without root every process has capabilities in its user namespace,
    and an ioctl on a unix socket set the MTU of the slot's loopback (any 32-bit number), which the slot's next
    execution, in the same network namespace, read back."""
    script = LOOPBACK.format(root=str(ROOT), read=LOOPBACK_READ, write=LOOPBACK_WRITE)
    r = subprocess.run(NOBODY + [PY, "-I", "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == ["errno 1\n"] * 3
