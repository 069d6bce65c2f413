"""The relay a node's scoring workers reach its one sandbox server through (:mod:`sandbox._relay`): a host that
dies is started again at the same socket path, and a worker's connection to the dead one is replaced on its next
call; a socket path in a directory others can write to is refused. The hosts are real processes killed with SIGKILL,
each with its own real sandbox server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sandbox import SandboxError
from sandbox._relay import RelaySandbox, RelayServer

ROOT = Path(__file__).resolve().parents[2]
HOST = (
    "import sys, time\nfrom sandbox import get_sandbox\nfrom sandbox._relay import RelayServer\n"
    "r = RelayServer(get_sandbox(), sys.argv[1] or None)\nprint(r.path, flush=True)\ntime.sleep(600)"
)


@contextmanager
def _host(path: str = "") -> Iterator[tuple[subprocess.Popen, str]]:
    """A relay host process (at ``path``, or a fresh one) with its own sandbox server; yields it and its path."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST, path], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line, proc.stderr.read() if proc.stderr else ""
        yield proc, line
    finally:
        proc.kill()
        proc.wait()


def _kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_host_started_again_at_the_same_path_serves_the_old_client() -> None:
    with _host() as (first, path):
        client = RelaySandbox(path)
        assert client.run_program("print(6 * 7)").stdout == b"42\n"
        _kill(first)
        with pytest.raises(SandboxError, match="cannot be reached"):  # nothing listens: unscored, not a hang
            client.run_program("print(1)")
        with _host(path) as (second, again):
            assert again == path
            assert client.run_program("print(6 * 7)").stdout == b"42\n"  # a new connection
            _kill(second)
            with _host(path):  # the client's connection went to the killed host: replaced on this call
                assert client.run_program("print(7 * 7)").stdout == b"49\n"
        client.close()
    Path(path).unlink(missing_ok=True)
    Path(path).parent.rmdir()


def test_a_relay_path_in_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o700)
    shared.chmod(0o777)
    with pytest.raises(SandboxError, match="not a private directory"):
        RelayServer(object(), str(shared / "relay.sock"))
    link = tmp_path / "link"
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    link.symlink_to(private)
    with pytest.raises(SandboxError, match="not a private directory"):
        RelayServer(object(), str(link / "relay.sock"))
