"""Secrets of the host: its environment, its processes' memory and its open files stay out of reach."""

from __future__ import annotations

import os

HOST_SECRET = os.environ["GRPO_SANDBOX_TEST_SECRET"]  # set by conftest before any sandbox starts


def test_environment_is_scrubbed(sandbox, run, clean):
    r = run("import os\nprint(sorted(os.environ.items()))")
    assert r.status == "ok"
    assert HOST_SECRET.encode() not in r.stdout and b"GRPO_SANDBOX" not in r.stdout


def test_parent_environ_is_unreadable(sandbox, run, clean):
    r = run("import os\nprint(open(f'/proc/{os.getppid()}/environ', 'rb').read())")
    assert HOST_SECRET.encode() not in r.stdout + r.stderr


def test_host_process_environ_is_unreadable(sandbox, run, clean):
    r = run(f"print(open('/proc/{os.getpid()}/environ', 'rb').read())")
    assert HOST_SECRET.encode() not in r.stdout + r.stderr and r.status == "crash"


def test_every_proc_environ_is_unreadable(sandbox, run, clean):
    src = (
        "import os\nfor p in os.listdir('/proc'):\n    try:\n        print(open(f'/proc/{p}/environ','rb').read())\n"
        "    except Exception: pass\nprint('scanned')"
    )
    r = run(src)
    assert HOST_SECRET.encode() not in r.stdout + r.stderr


def test_host_memory_is_unreadable(sandbox, run, clean):
    src = f"f = open('/proc/{os.getpid()}/mem', 'rb')\nimport os\nprint(os.pread(f.fileno(), 64, 0x400000))"
    r = run(src)
    assert r.status == "crash" and r.stdout == b""


def test_process_vm_readv_is_denied(sandbox, run, clean):
    src = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"r = libc.syscall(310, {os.getpid()}, 0, 0, 0, 0, 0)\nprint(r, ctypes.get_errno())"
    )
    r = run(src)
    assert r.stdout == b"-1 1\n"  # EPERM from the seccomp filter


def test_only_standard_fds_are_inherited(sandbox, run, clean):
    secret_file = open(__file__, "rb")  # an open host file the solution must not find
    try:
        r = run(
            "import os\nopen_fds = []\nfor fd in range(1024):\n    try:\n        os.fstat(fd); open_fds.append(fd)\n"
            "    except OSError: pass\nprint(open_fds)"
        )
    finally:
        secret_file.close()
    assert r.stdout == b"[0, 1, 2]\n"


def test_runs_as_an_unprivileged_uid(sandbox, run, clean, need_layers):
    need_layers("uid")
    r = run("import os\nprint(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())")
    uid, euid, gid, groups = r.stdout.decode().split(" ", 3)
    assert int(uid) in sandbox.uid_range() and uid == euid and groups.strip() == "[]"
