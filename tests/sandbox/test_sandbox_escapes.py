"""Escape routes through the interpreter: ctypes, posix, os.system, subprocess, exec of other binaries.

Each attack tries to leave a mark on the host (a file in a host directory) or to gain privileges; the host
side checks the mark is absent.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def mark(tmp_path):
    return tmp_path / "escaped"


ROUTES = {
    "ctypes_libc_system": "import ctypes\nctypes.CDLL(None).system(b'touch {mark}')",
    "os_system": "import os\nos.system('touch {mark}')",
    "subprocess_shell": "import subprocess\nsubprocess.run('touch {mark}', shell=True)",
    "posix_open": "import posix\nfd = posix.open('{mark}', posix.O_CREAT | posix.O_WRONLY)\nposix.write(fd, b'x')",
    "reload_os_then_open": "import importlib, os\nos = importlib.reload(os)\nos.close(os.open('{mark}', os.O_CREAT | os.O_WRONLY))",
    "execv_shell": "import os\nos.execv('/bin/sh', ['sh', '-c', 'touch {mark}'])",
    "ctypes_raw_openat": "import ctypes\nlibc = ctypes.CDLL(None)\nlibc.syscall(257, -100, b'{mark}', 0o101, 0o644)",
    "fork_then_write": "import os\nif os.fork() == 0:\n    open('{mark}', 'w').write('x')\n    os._exit(0)\nos.wait()",
    "proc_self_root": "open('/proc/self/root{mark}', 'w').write('x')",
    "proc_1_root": "open('/proc/1/root{mark}', 'w').write('x')",
    "rename_into_host_dir": "import os\nopen('a', 'w').write('x')\nos.rename('a', '{mark}')",
    "multiprocessing_child": "import multiprocessing as mp\ndef w():\n    open('{mark}', 'w').write('x')\n"
    "p = mp.get_context('fork').Process(target=w)\np.start()\np.join()",
}


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_escape_route_leaves_no_mark_on_the_host(sandbox, run, mark, clean, route):
    run(ROUTES[route].format(mark=mark))
    assert not mark.exists(), f"{route} wrote to the host"


def test_setuid_binary_does_not_grant_root(sandbox, run, clean):
    src = (
        "import subprocess, shutil\nsu = shutil.which('su') or '/bin/su'\n"
        "r = subprocess.run([su, '-c', 'id -u'], capture_output=True, text=True, input='')\nprint('uid0' if r.stdout.strip() == '0' else 'denied')"
    )
    r = run(src)
    assert b"uid0" not in r.stdout


def test_setns_into_host_namespaces_is_denied(sandbox, run, clean):
    src = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\ntry:\n    fd = os.open('/proc/1/ns/net', os.O_RDONLY)\n"
        "    print(libc.setns(fd, 0), ctypes.get_errno())\nexcept OSError as e:\n    print('open denied', e.errno)"
    )
    r = run(src)
    assert r.stdout.startswith((b"open denied", b"-1 1"))


def test_chroot_is_denied(sandbox, run, clean):
    r = run("import os\ntry:\n    os.chroot('.')\n    print('chrooted')\nexcept OSError as e:\n    print(e.errno)")
    assert r.stdout == b"1\n"


def test_clone3_falls_back_and_threads_still_work(sandbox, run, clean):
    src = (
        "import ctypes, threading\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(libc.syscall(435, 0, 0), ctypes.get_errno())\n"
        "t = threading.Thread(target=lambda: None)\nt.start()\nt.join()\nprint('threads ok')"
    )
    r = run(src)
    assert r.stdout == b"-1 38\nthreads ok\n"


def test_the_core_limit_stays_at_one(run, clean):
    """Fails on the code before this change: the core limit was 0, which a pipe core_pattern (systemd-coredump,
    apport) ignores: every crash of a solution that re-enabled dumping (any exec does) ran the host's helper as
    root. At 1 the kernel aborts pipe and file dumps alike, and the solution cannot change it."""
    src = (
        "import resource\nprint(resource.getrlimit(resource.RLIMIT_CORE))\nfor v in ((0, 0), (1, 1)):\n    try:\n"
        "        resource.setrlimit(resource.RLIMIT_CORE, v)\n        print('set')\n    except (OSError, ValueError):\n"
        "        print('refused')\nresource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\nprint('nofile ok')"
    )
    assert run(src).stdout == b"(1, 1)\nrefused\nrefused\nnofile ok\n"
