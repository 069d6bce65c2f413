"""Nothing of one execution reaches another: kernel objects, memory charges, shared files, pid numbers.

Each test is an attack in which one execution leaves something behind (or holds something while it runs) and
another execution looks for it. The tests marked "fails on the code before this change" were run against that
code and failed there.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import threading
import time
from pathlib import Path

import pytest

from sandbox import Limits, Sandbox

SHM_WRITE = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
sid = libc.shmget({key}, 4096, 0o1666)
print("created" if sid >= 0 else f"refused {{ctypes.get_errno()}}")
if sid >= 0:
    ctypes.memmove(libc.shmat(sid, None, 0), {secret!r}, {size})
"""
SHM_READ = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
sid = libc.shmget({key}, 0, 0)
print(ctypes.string_at(libc.shmat(sid, None, 0), {size}) if sid >= 0 else f"none {{ctypes.get_errno()}}")
"""


def test_a_system_v_segment_does_not_reach_the_next_execution(run, clean):
    """Fails on the code before this change: the second execution read the first one's segment (an oracle
    carried from one verdict to the next)."""
    key, secret = int.from_bytes(secrets.token_bytes(3), "big") + 1, secrets.token_hex(8).encode()
    first = run(SHM_WRITE.format(key=key, secret=secret, size=len(secret)))
    second = run(SHM_READ.format(key=key, size=len(secret)))
    assert secret not in second.stdout, (first.stdout, second.stdout)
    assert first.stdout.startswith(b"refused 1") and second.stdout.startswith(b"none 1")  # EPERM: denied


def _sandbox_pids(sb: Sandbox) -> list[int]:
    uids = sb.uid_range()
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit() and _uid_of(d) in uids]


def _uid_of(d: Path) -> int:
    try:
        return d.stat().st_uid
    except OSError:
        return -1


def test_each_execution_has_ipc_and_pid_namespaces_of_its_own(sandbox, run, clean, need_layers):
    """Fails on the code before this change: every execution shared the server's IPC namespace (System V
    objects were visible across executions) and the machine's pid namespace. The network namespace is the
    execution's own only where Landlock cannot scope abstract unix sockets (ABI < 6)."""
    need_layers("uid")  # (the execution's processes are found by the sandbox's uids)
    names = ("ipc", "net", "pid", "mnt")
    server = {n: os.readlink(f"/proc/{sandbox.server_pid()}/ns/{n}") for n in names}
    # read from the host: the execution's own /proc is covered (see the next test)
    runner = threading.Thread(target=run, args=("import time\ntime.sleep(60)",), kwargs={"timeout": 20.0})
    runner.start()
    mine: dict[str, str] = {}
    try:
        deadline = time.monotonic() + 15
        while not mine and time.monotonic() < deadline:
            for pid in _sandbox_pids(sandbox):
                try:
                    mine = {n: os.readlink(f"/proc/{pid}/ns/{n}") for n in names}
                except OSError:
                    continue
            time.sleep(0.05)
    finally:
        for pid in _sandbox_pids(sandbox):
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        runner.join()
    own = ["ipc", "pid", "mnt"] + (["net"] if sandbox.isolation().layers.get("job_netns") else [])
    assert mine and all(mine[n] != server[n] for n in own), (mine, server)


def test_an_abstract_socket_of_a_running_execution_is_unreachable_from_another(sandbox, clean):
    """Held before this change where Landlock scopes abstract sockets (ABI 6); elsewhere each execution now
    has its own network namespace. Where the namespace is shared, the name itself stays visible (binding it
    fails while the other execution holds it): a channel between live executions, see docs/SECURITY.md."""
    name = "sbx-" + secrets.token_hex(6)
    holder = (
        "import socket, time\ns = socket.socket(socket.AF_UNIX)\n"
        f"s.bind('\\0{name}')\ns.listen(1)\ntime.sleep(4)\nprint('held')"
    )
    seeker = (
        "import errno, socket, time\nseen = 'alone'\nend = time.monotonic() + 3\n"
        "while time.monotonic() < end and seen == 'alone':\n"
        "    c = socket.socket(socket.AF_UNIX)\n"
        f"    try:\n        c.connect('\\0{name}')\n        seen = 'connected'\n"
        "    except OSError:\n        pass\n"
        f"    b = socket.socket(socket.AF_UNIX)\n    try:\n        b.bind('\\0{name}')\n"
        "    except OSError as e:\n        seen = 'name taken' if e.errno == errno.EADDRINUSE else seen\n"
        "    b.close()\n    c.close()\n    time.sleep(0.05)\nprint(seen)"
    )
    results = {}
    t = threading.Thread(
        target=lambda: results.setdefault("holder", sandbox.run_program(holder, limits=Limits(timeout_s=20)))
    )
    t.start()
    results["seeker"] = sandbox.run_program(seeker, limits=Limits(timeout_s=20))
    t.join()
    assert results["holder"].stdout == b"held\n", results["holder"]
    assert results["seeker"].stdout != b"connected\n"
    if sandbox.isolation().layers.get("job_netns"):
        assert results["seeker"].stdout == b"alone\n"


def test_an_abstract_name_kept_by_a_socket_in_flight_does_not_reach_the_next_execution(sandbox, run, clean):
    """Fails on the code before this change: a socket bound to an abstract name and sent over itself (SCM_RIGHTS)
    outlives its execution until the kernel's unix garbage collector runs, and the execution right after saw the
    name taken (bind: EADDRINUSE) nine times in ten: a bit per name from one execution to the next."""
    name = "sbx-inflight-" + secrets.token_hex(6)
    leave = (
        "import socket, array\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
        f"s.bind('\\0{name}')\n"
        "s.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [s.fileno()]))], 0,"
        f" '\\0{name}')\ns.close()\nprint('left')"
    )
    look = (
        "import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ntry:\n"
        f"    s.bind('\\0{name}')\n    print('free')\nexcept OSError as e:\n    print('taken')"
    )
    seen = []
    for _ in range(3):
        assert run(leave).stdout == b"left\n"
        seen.append(run(look).stdout)
    assert seen == [b"free\n"] * 3


def test_a_lock_kept_in_flight_does_not_reach_the_next_execution(run, clean):
    """Fails on the code before this change: a descriptor of a shared runtime file, locked with flock (or an OFD
    lock) and sent over a unix socket to itself, stayed in flight after its execution ended (until the kernel's
    unix garbage collector ran): the next execution found the file locked seven times in eight. Locks that belong
    to an open file are refused; POSIX locks, which end with their process, still work (sqlite uses them)."""
    ofd = "struct.pack('hhqqi4x', {}, 0, 0, 0, 0)"
    leave = (
        "import socket, array, fcntl, os, struct\nf = os.open(os.__file__, os.O_RDONLY)\nout = []\n"
        f"for lock in (lambda: fcntl.flock(f, fcntl.LOCK_SH), lambda: fcntl.fcntl(f, 37, {ofd.format(0)})):\n"
        "    try:\n        lock()\n        out.append('locked')\n    except OSError as e:\n        out.append(str(e.errno))\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\ns.bind('')\n"
        "s.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [s.fileno(), f]))], 0, s.getsockname())\n"
        "print(' '.join(out))"
    )
    look = (
        "import fcntl, os, struct\nf = os.open(os.__file__, os.O_RDONLY)\nout = []\ntry:\n"
        "    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n    out.append('free')\nexcept BlockingIOError:\n"
        "    out.append('locked')\nexcept OSError as e:\n    out.append(str(e.errno))\n"
        f"kind = struct.unpack('hhqqi4x', fcntl.fcntl(f, 36, {ofd.format(1)}))[0]\n"
        "out.append('free' if kind == 2 else 'locked')\nprint(' '.join(out))"
    )
    for _ in range(3):
        assert run(leave).stdout == b"1 1\n"
        assert run(look).stdout == b"1 free\n"
    sqlite = (
        "import sqlite3\ndb = sqlite3.connect('/tmp/x.db')\ndb.execute('create table t (x)')\n"
        "db.execute('insert into t values (1)')\ndb.commit()\nprint(db.execute('select x from t').fetchall())"
    )
    assert run(sqlite).stdout == b"[(1,)]\n"


def test_posix_queues_and_keyrings_are_denied(run, clean):
    """Fails on the code before this change for queues: mq_open got as far as the queue file system (EACCES)
    instead of being denied; keyring calls were already denied."""
    src = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "def err(r):\n    return ctypes.get_errno() if r < 0 else 'ok'\n"
        "print(err(libc.syscall(240, b'/sbxq', 0o102, 0o600, None)), err(libc.syscall(248, b'user', b'k', b'v', 1, -3)),"
        " err(libc.syscall(250, 0, -3, 0, 0, 0)))"
    )
    assert run(src).stdout == b"1 1 1\n"


def test_files_in_dev_shm_and_tmp_do_not_reach_the_next_execution(run, clean):
    """Held before this change too (a private tmpfs per execution); kept as a guard."""
    token = secrets.token_hex(6)
    run(f"open('/dev/shm/{token}', 'w').write('x')\nopen('/tmp/{token}', 'w').write('x')")
    r = run(f"import os\nprint(os.path.exists('/dev/shm/{token}'), os.path.exists('/tmp/{token}'))")
    assert r.stdout == b"False False\n"


def test_reading_a_shared_file_leaves_no_mark(run, clean):
    """Fails on the code before this change: reading a system file updated its access time (relatime), a
    mark that survives the execution and that the next one could read with ``os.stat``."""
    if os.geteuid() != 0:
        pytest.skip("the probe resets a system file's access time, which needs root")
    found = sorted(Path("/usr/lib").glob("python3*/this.py")) + sorted(Path("/usr/lib").glob("python3*/antigravity.py"))
    if not found:
        pytest.skip("no rarely read system file to probe")
    target = found[0]
    st = target.stat()
    os.utime(target, ns=(st.st_mtime_ns - 3_600_000_000_000, st.st_mtime_ns))  # older than mtime: a read updates it
    try:
        before = target.stat().st_atime_ns
        r = run(
            f"open({str(target)!r}, 'rb').read()\nimport os\ntry:\n    os.utime({str(target)!r})\n"
            "except OSError as e:\n    print(e.errno)"
        )
        assert target.stat().st_atime_ns == before
        assert r.stdout in (b"30\n", b"1\n", b"13\n")  # EROFS (or EPERM / EACCES: not the owner)
    finally:
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_pid_numbers_carry_nothing_from_one_execution_to_the_next(run, clean):
    """Fails on the code before this change: pids came from the machine's counter, so an execution that forked
    N times moved the next execution's pid by N (a count passed from one verdict to the next)."""
    burn = (
        "import os\nfor _ in range(50):\n    if os.fork() == 0:\n        os._exit(0)\n    os.wait()\nprint(os.getpid())"
    )
    first = run(burn).stdout
    second = run("import os\nprint(os.getpid())").stdout
    assert first == second  # every execution starts from the same pid


def test_the_host_pid_counter_and_process_table_are_not_visible_through_proc(run, clean):
    """Fails on the code before this change: Landlock does not govern ``readlink``/``stat``, and ``/proc`` was the
    host's, so ``readlink("/proc/self")`` gave the host pid (an execution that forked N times moved the next
    one's by N: the pid counter was a channel again) and ``stat("/proc/N")`` listed the host's processes."""
    probe = (
        "import os\nout = []\nfor f, p in ((os.readlink, '/proc/self'), (os.stat, '/proc/1'), (os.stat, '/proc/self/ns/pid'),"
        " (os.stat, '/sys/fs/cgroup/memory'), (os.stat, '/sys/fs/cgroup/cgroup.procs')):\n"
        "    try:\n        f(p)\n        out.append('seen')\n    except OSError as e:\n        out.append(str(e.errno))\n"
        "print(' '.join(out))"
    )
    burn = "import os\nfor _ in range(50):\n    if os.fork() == 0:\n        os._exit(0)\n    os.wait()\n"
    assert run(burn + probe).stdout == b"2 2 2 2 2\n"  # ENOENT: an empty /proc and an empty cgroup tree
    assert run(probe).stdout == b"2 2 2 2 2\n"
    assert run("import os, sys\nprint(os.cpu_count() >= 1, sys.executable != '')").stdout == b"True True\n"


def test_no_descriptor_hands_out_a_machine_wide_counter(run, clean):
    """Fails on the code before this change: a pidfd's inode number is the machine's pid counter (pidfs, Linux
    6.9+), a memfd's counts every memfd of the machine and SO_COOKIE every socket asked: an execution that forked
    (or made memfds) N times moved the next one's number by exactly N, an exact channel between executions."""
    src = (
        "import os, socket\nout = []\nfor f in (lambda: os.pidfd_open(os.getpid()), lambda: os.memfd_create('x'),\n"
        "          lambda: socket.socketpair()[0].getsockopt(socket.SOL_SOCKET, 57),\n"
        "          lambda: socket.socketpair()[0].getsockopt(socket.SOL_SOCKET, 77),\n"
        "          lambda: socket.socketpair()[0].setsockopt(socket.SOL_SOCKET, 76, 1)):\n"
        "    try:\n        f()\n        out.append('open')\n    except OSError as e:\n        out.append(str(e.errno))\n"
        "print(' '.join(out), socket.socketpair()[0].getsockopt(socket.SOL_SOCKET, socket.SO_TYPE))"
    )
    assert run(src).stdout == b"1 1 1 1 1 1\n"


def test_no_socket_says_which_network_namespace_it_is_in(run, clean):
    """Fails on the code before this change: getsockopt(SO_NETNS_COOKIE) gave the namespace's cookie, a count of
    every network namespace the machine made, the same for a slot's executions until one left a socket behind
    (then the next got a new namespace, and a new cookie): a bit one execution set and the next read."""
    src = (
        "import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n"
        "    print(s.getsockopt(socket.SOL_SOCKET, 71, 8).hex())\nexcept OSError as e:\n    print(e.errno)"
    )
    leave = "import socket\na, b = socket.socketpair()\nsocket.send_fds(a, [b'x'], [a.fileno(), b.fileno()])"
    seen = [run(src).stdout, run(leave).status, run(src).stdout]
    assert seen == [b"1\n", "ok", b"1\n"]
    ordinary = (
        "import asyncio, sys\nasync def main():\n    p = await asyncio.create_subprocess_exec(sys.executable, '-c',"
        " 'print(6 * 7)', stdout=asyncio.subprocess.PIPE)\n    print((await p.communicate())[0].decode().strip())\n"
        "asyncio.run(main())"
    )
    assert run(ordinary, timeout=10.0).stdout == b"42\n"


def test_host_wide_and_mount_table_calls_are_denied(run, clean):
    """Fails on the code before this change: io_setup(65530) took the machine's AIO contexts for the length of
    the run and listmount/statmount were allowed (EFAULT on bad pointers, the host's mount table otherwise)."""
    src = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nctx = ctypes.c_ulong(0)\nout = []\n"
        "for nr, args in ((206, (65530, ctypes.byref(ctx))), (457, (0, 0, 0, 0)), (458, (0, 0, 0, 0)), (451, (0, 0, 0, 0)),"
        " (470, ()), (600, ())):\n"
        "    r = libc.syscall(nr, *args)\n    out.append(f'{r} {ctypes.get_errno()}')\nprint(', '.join(out))"
    )
    assert run(src).stdout == b"-1 1, -1 1, -1 1, -1 1, -1 38, -1 38\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs memory cgroups")
def test_memory_a_job_left_charged_does_not_reach_the_next_job():
    """Fails on the code before this change: a 300 MiB System V segment stayed charged to the slot's group, so
    a modest solution after it scored ``memory`` and a lower memory limit gave sandbox_error (EBUSY)."""
    sb = Sandbox(slots=1)  # one slot: every job below runs in the same groups
    try:
        pin = (
            "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.shmat.restype = ctypes.c_void_p\n"
            "sid = libc.shmget(0, 300 << 20, 0o1600)\nif sid >= 0:\n    ctypes.memset(libc.shmat(sid, None, 0), 1, 300 << 20)\n"
            "open('/dev/shm/fill', 'wb').write(b'x' * (40 << 20))\nprint('pinned')"
        )
        sb.run_program(pin, limits=Limits(timeout_s=10, memory_bytes=512 << 20))
        modest = sb.run_program(
            "x = bytearray(350 << 20)\nprint('ok')", limits=Limits(timeout_s=10, memory_bytes=512 << 20)
        )
        assert (modest.status, modest.stdout) == ("ok", b"ok\n"), modest.reason
        lower = sb.run_program("print('ok')", limits=Limits(timeout_s=10, memory_bytes=128 << 20))
        assert lower.stdout == b"ok\n"
    finally:
        sb.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs memory cgroups")
def test_a_slot_group_with_memory_still_charged_is_replaced_before_reuse(sandbox):
    """The server checks a slot's group before each job and replaces it while unreclaimable memory is charged
    to it (here a System V segment made on the host side, in the host's own IPC namespace)."""
    from sandbox import _cgroups, _zygote

    roots = _cgroups.detect_roots()
    if not roots.has_memory:
        pytest.skip("no memory cgroup")
    server = _zygote.Server(None, dict(sandbox.isolation().layers, job_pidns=False), roots)  # type: ignore[arg-type]
    limits = {"memory_bytes": 256 << 20, "max_pids": 16}
    libc = ctypes.CDLL(None, use_errno=True)
    sid = -1
    try:
        first = server._group(0, 0, limits)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            for fd in first.join_fds():
                os.write(fd, b"0")
            libc.shmat.restype = ctypes.c_void_p
            seg = libc.shmget(0, 64 << 20, 0o1600)
            ctypes.memset(libc.shmat(seg, None, 0), 1, 64 << 20)
            os.write(w, str(seg).encode())
            os._exit(0)
        os.close(w)
        sid = int(os.read(r, 64))
        os.close(r)
        os.waitpid(pid, 0)
        assert first.unreclaimable_bytes() >= 32 << 20 and not first.clean(wait_s=0.1)  # (stats lag by a few pages)
        second = server._group(0, 0, limits)
        assert second is not first and second.clean(wait_s=0.1)
    finally:
        if sid >= 0:
            libc.shmctl(sid, 0, None)  # IPC_RMID
        for cg in server.groups.values():
            cg.drain()
            cg.remove()
        if server.landlock is not None:
            server.landlock.close()
        os.close(server.devnull)
