"""The server's life: lazily started, one per process, gone with its host, nothing left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from sandbox import Limits, Sandbox


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in status


def _wait_gone(pids: list[int], seconds: float = 30.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _uid_procs(uids: range) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                line = next(s for s in (d / "status").read_text().splitlines() if s.startswith("Uid:"))
            except (OSError, StopIteration):
                continue
            if int(line.split()[1]) in uids and _alive(int(d.name)):
                out.append(int(d.name))
    return out


def test_close_stops_the_server_and_removes_its_groups():
    sb = Sandbox()
    assert sb.run_program("print(2)").stdout == b"2\n"
    zpid = sb.server_pid()
    prefix = f"sbx-{zpid}-"
    groups = [p for p in Path("/sys/fs/cgroup").glob(f"*/{prefix}*")] + list(
        Path("/sys/fs/cgroup").glob(f"*/*/*/{prefix}*")
    )
    assert groups or os.geteuid() != 0
    sb.close()
    assert _wait_gone([zpid]) == []
    assert all(not g.exists() for g in groups)


def test_a_killed_host_leaves_no_server_and_no_sandboxed_process(tmp_path, need_layers):
    need_layers("uid")  # (its processes are found by the sandbox's uids)
    script = tmp_path / "host.py"
    script.write_text(
        textwrap.dedent(f"""
        import sys, threading
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from sandbox import Sandbox, Limits
        sb = Sandbox()
        print(sb.server_pid(), sb.uid_range().start, sb.uid_range().stop, flush=True)
        sb.run_program("import time\\ntime.sleep(600)", limits=Limits(timeout_s=600))
    """)
    )
    host = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    zpid, uid0, uid1 = map(int, host.stdout.readline().split())
    uids = range(uid0, uid1)
    deadline = time.monotonic() + 30
    while not _uid_procs(uids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _uid_procs(uids), "the sandboxed sleeper never started"
    host.send_signal(signal.SIGKILL)
    host.wait()
    assert _wait_gone([zpid]) == [], "the server outlived its host"
    assert _wait_gone(_uid_procs(uids)) == [], "a sandboxed process outlived the host"


def test_a_forked_child_gets_its_own_server(sandbox):
    parent_server = sandbox.server_pid()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            from sandbox import get_sandbox

            sb = get_sandbox()
            out = sb.run_program("print('child')").stdout
            os.write(w, f"{sb.server_pid()} {out!r}".encode())
            sb.close()
        finally:
            os._exit(0)
    os.close(w)
    data = os.read(r, 1000).decode()
    os.waitpid(pid, 0)
    child_server, out = data.split(" ", 1)
    assert int(child_server) != parent_server and out == "b'child\\n'"


def test_tests_that_do_not_parse_raise_before_anything_runs(sandbox):
    with pytest.raises(SyntaxError):
        sandbox.run_tests("x = 1", "assert (")


def test_isolation_report_names_the_level_and_layers(sandbox):
    rep = sandbox.isolation()
    assert rep.level in ("basic", "strong", "full")
    assert rep.speed_factor >= 1.0
    if os.geteuid() == 0:
        assert rep.level == "full", rep.missing
        assert rep.layers["landlock_abi"] >= 1 and rep.layers["seccomp"] and rep.layers["cgroup_memory"]


def test_the_deadline_scales_with_the_speed_factor(sandbox):
    res = sandbox.run_program("while True: pass", limits=Limits(timeout_s=0.3))
    assert res.status == "timeout"
    assert f"{0.3 * sandbox.isolation().speed_factor:.1f}s" in res.reason


def test_speed_factor_is_measured_again_when_stale(monkeypatch):
    import sandbox.service as service

    sb = Sandbox()
    try:
        sb.isolation()
        first = sb._calibrated_at
        monkeypatch.setattr(service, "RECALIBRATE_S", 0.0)
        assert sb.run_program("print(1)").stdout == b"1\n"
        assert sb._calibrated_at > first and sb.isolation().speed_factor >= 1.0
    finally:
        sb.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs cgroups")
def test_a_new_server_removes_groups_left_by_a_dead_one():
    sb = Sandbox()
    try:
        sb.run_program(
            "import os\nif os.fork() == 0:\n    import time\n    time.sleep(600)\nprint('x')",
            limits=Limits(timeout_s=0.5),
        )
        old = sb.server_pid()
        groups = list(Path("/sys/fs/cgroup").glob(f"*/sbx-{old}-*")) + list(
            Path("/sys/fs/cgroup").glob(f"*/*/*/sbx-{old}-*")
        )
        assert groups
        os.kill(old, signal.SIGKILL)  # no chance to clean up
        assert _wait_gone([old]) == []
        fresh = Sandbox()
        try:
            assert fresh.run_program("print(1)").stdout == b"1\n"
            assert all(not g.exists() for g in groups)
        finally:
            fresh.close()
    finally:
        sb.close()


def test_a_forked_child_does_not_keep_the_parents_server_alive(tmp_path):
    script = tmp_path / "host.py"
    script.write_text(
        textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from sandbox import get_sandbox
        sb = get_sandbox()
        print(sb.server_pid(), flush=True)
        if os.fork() == 0:
            time.sleep(30)  # a long-lived child that never uses the sandbox
            os._exit(0)
        os._exit(0)  # the parent dies without cleaning up
    """)
    )
    host = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
    zpid = int(host.stdout.readline())
    host.wait()
    try:
        assert _wait_gone([zpid], 20) == [], "the server stayed up for the parent's forked child"
    finally:
        os.killpg(host.pid, signal.SIGKILL)


@pytest.mark.slow
def test_an_interpreter_under_tmp_stays_usable_and_read_only(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
        from sandbox import Sandbox
        sb = Sandbox()
        src = ("import subprocess, sys\\nprint(subprocess.run([sys.executable, '-c', 'print(42)'], capture_output=True, text=True).stdout)"
               "\\ntry:\\n    open(sys.prefix + '/pwned', 'w')\\nexcept OSError as e:\\n    print('denied', e.errno)")
        print(sb.run_program(src).stdout.decode())
        sb.close()
    """)
    r = subprocess.run([str(venv / "bin" / "python"), "-c", script], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["42", "denied", "30"], r.stderr[-2000:]  # EROFS: the tree is bound read-only
    assert not (venv / "pwned").exists()


def test_the_server_loads_no_module_with_a_fork_handler():
    """threading, random and logging run code in every forked child (copying its memory); the server must not
    load them, so that a sandboxed child starts with nothing to do."""
    from sandbox.service import server_boot

    probe = "print(','.join(m for m in ('threading', 'random', 'logging', 'subprocess') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-I", "-c", server_boot(probe)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def _sleeper_runs(sb: Sandbox) -> dict[str, object]:
    """Start a program and a tests run that both sleep (each forks a daemon too); return their outcomes."""
    results: dict[str, object] = {}
    daemon = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(300)\n"

    def one(kind: str) -> None:
        try:
            if kind == "program":
                results[kind] = sb.run_program(daemon + "time.sleep(300)", limits=Limits(timeout_s=20))
            else:
                results[kind] = sb.run_tests(
                    daemon + "def f():\n    time.sleep(300)\n", "assert f() == 1", limits=Limits(timeout_s=20)
                )
        except Exception as e:  # the outcome under test
            results[kind] = e

    threads = [threading.Thread(target=one, args=(k,)) for k in ("program", "tests")]
    for t in threads:
        t.start()
    results["threads"] = threads
    return results


def test_a_server_killed_mid_run_gives_sandbox_error_kills_its_processes_and_the_next_request_works(need_layers):
    """Fails on the code before this change: run_program raised IndexError (and the reward returned `error`),
    run_tests waited for the deadline and returned `timeout`, and the orphaned processes ran on unsupervised."""
    from sandbox import SandboxError

    need_layers("uid")  # (its processes are found by the sandbox's uids)
    sb = Sandbox()
    try:
        old, uids = sb.server_pid(), sb.uid_range()
        results = _sleeper_runs(sb)
        deadline = time.monotonic() + 60
        while len(_uid_procs(uids)) < 4 and time.monotonic() < deadline:  # both runs and their daemons are up
            time.sleep(0.05)
        assert len(_uid_procs(uids)) >= 4, "the sandboxed sleepers never started"
        os.kill(old, signal.SIGKILL)
        for t in results.pop("threads"):  # type: ignore[union-attr]
            t.join(120)
        assert all(isinstance(r, SandboxError) for r in results.values()), results
        assert _uid_procs(uids) == [], "a process of the dead server's runs is still running"
        assert sb.run_program("print(3)").stdout == b"3\n" and sb.server_pid() != old
        assert sb.run_tests("def f():\n    return 1", "assert f() == 1").status == "pass"
    finally:
        sb.close()


def test_the_code_reward_scores_a_run_whose_server_died_as_sandbox_error(sandbox, need_layers):
    """Fails on the code before this change: the reward returned `error` (an IndexError inside the sandbox)."""
    from harness import get_reward

    need_layers("uid")  # (the run's processes are found by the sandbox's uids)

    fn = get_reward("code", timeout=20.0)
    out: dict[str, object] = {}
    t = threading.Thread(
        target=lambda: out.setdefault(
            "s", fn({"tests": [{"input": "", "output": "x"}]}, "import time\ntime.sleep(300)")
        )
    )
    uids = sandbox.uid_range()
    old = sandbox.server_pid()
    t.start()
    deadline = time.monotonic() + 60
    while not _uid_procs(uids) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(old, signal.SIGKILL)
    t.join(120)
    s = out["s"]
    assert s.status == "sandbox_error" and s.value is None and "died" in s.info["reason"]  # type: ignore[attr-defined]
    assert fn({"tests": "assert f() == 1"}, "def f():\n    return 1").status == "pass"
