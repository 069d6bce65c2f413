"""Set up one sandboxed child (forked from the warm server) and run its role: solution or judge.

The child starts as pid 1 of a pid namespace of its own, in the IPC and network namespaces the server made for
its job: no pid, System V object or abstract socket name of one execution is visible to another.
Order matters and is fixed here: the host's CPU priority (the server's may be higher); new session; join the job's
groups; its own mount namespace with a fresh size-limited tmpfs on ``/tmp`` (the working directory) and
``/dev/shm``; build the Landlock ruleset (read-only runtime, read-write only ``/tmp``, ``/dev/shm``, ``/dev/null``;
no TCP; abstract sockets and signals scoped) while the server's descriptors of the read-only trees are open; put
the host's pipes on fds 0-7 and close every other fd; rlimits; drop to the execution's own unprivileged uid and gid
with no supplementary groups; no-new-privs; enforce Landlock; seccomp denylist. The environment is the server's,
scrubbed once (:func:`prepare_server`). Only then is "setup ok" written to the host on fd 4, which is closed before
the first line of untrusted code runs. What can be computed before ``fork`` (rules, filter, rlimit values, mount
options) is computed by the server: after ``fork`` every step copies the memory it touches.

Each step that the machine lacks is skipped only when the server's probe said it is missing; a step that was
probed as available and then fails aborts the child with a sandbox error (never silently weaker).
"""

from __future__ import annotations

import fcntl
import functools
import io
import marshal
import os
import resource
import signal
import stat
import sys
from dataclasses import dataclass
from typing import Any

from sandbox import _judge, _solution, _sys, _wire

__all__ = [
    "ChildSpec",
    "run_child",
    "rlimit_plan",
    "prepare_server",
    "tmpfs_mounts",
    "cover_mounts",
    "FD_PAYLOAD",
    "FD_SETUP",
    "FD_RPC",
    "FD_VERDICT",
    "FD_PROGRESS",
]

FD_PAYLOAD, FD_SETUP, FD_RPC, FD_VERDICT, FD_PROGRESS = 3, 4, 5, 6, 7
#: The whole environment of a sandboxed process. One math-library thread each: on a many-core machine numpy
#: would otherwise start a thread per core and hit the process limit.
SAFE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "MALLOC_ARENA_MAX": "2",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class ChildSpec:
    """Everything a child needs to set itself up; built by the server from the host's request."""

    role: str  # "program" | "solution" | "judge"
    uid: int | None  # None: keep the current uid (no root to drop from)
    cgroup_fds: tuple[int, ...]  # the server's descriptors of the job's ``cgroup.procs`` files, open for writing
    mounts: bool
    landlock: _sys.LandlockPlan | None  # prepared by the server; None: the machine has no Landlock
    seccomp: _sys.SeccompFilter | None  # packed by the server; None: no seccomp table for this machine
    limits: dict[str, int]
    rlimits: tuple[tuple[int, int], ...] = ()  # (resource, value) from :func:`rlimit_plan`, set soft = hard
    pidns: bool = False  # no cgroups: a private pid namespace whose death kills every descendant
    keep_visible: tuple[str, ...] = ()  # runtime trees under /tmp or /dev/shm, bound back over the private tmpfs
    tmpfs: tuple[tuple[bytes, bytes, int, bytes], ...] = ()  # from :func:`tmpfs_mounts` when ``mounts``
    covers: tuple[tuple[bytes, bytes, int, bytes], ...] = ()  # from :func:`cover_mounts` when ``mounts``
    unshare: int = 0  # namespaces of its own (mount); the pid, IPC (and network) ones come from the server, per job
    server_pid: int = 0  # the parent: when it dies, this process is killed (the parent-death signal)
    workdir: str = "/tmp"  # without a private mount namespace: a fresh directory the server made and removes
    nice: int | None = None  # the priority to set back to (the host's) when the server runs higher; None: keep


def _place_fds(fds: list[int]) -> None:
    """Make ``fds`` become 0..n-1 (only 0-2 inheritable by the solution's own children); close all others
    (the server's descriptors among them)."""
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
    for target, fd in enumerate(moved):
        os.dup2(fd, target, inheritable=target < 3)
    os.closerange(len(fds), 1 << 20)


def prepare_server() -> None:
    """Once, in the warm server: the process state every child inherits as is (scrubbed environment, default
    SIGCHLD, no wakeup fd, unused stream objects for fds 0-2), so that children do not redo it after ``fork``."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(SAFE_ENV)
    _prebuild_stdio()


@functools.lru_cache(maxsize=256)
def tmpfs_mounts(uid: int, gid: int, disk_bytes: int) -> tuple[tuple[bytes, bytes, int, bytes], ...]:
    """(target, fstype, flags, options) of a child's private ``/tmp`` and ``/dev/shm``, encoded by the server."""
    flags = _sys.MS_NOSUID | _sys.MS_NODEV
    out = [(b"/tmp", b"tmpfs", flags, f"size={disk_bytes},nr_inodes=4096,mode=0700,uid={uid},gid={gid}".encode())]
    if os.path.isdir("/dev/shm"):
        shm = f"size={min(disk_bytes, 64 << 20)},nr_inodes=1024,mode=1777".encode()
        out.append((b"/dev/shm", b"tmpfs", flags, shm))
    return tuple(out)


#: Trees of the host's own state that a child could otherwise still probe with ``stat``/``readlink`` (which
#: Landlock does not govern): ``/proc`` is the host's process table (``readlink("/proc/self")`` gave the host
#: pid, so the machine's pid counter was again a channel from one execution to the next) and the cgroup tree
#: holds the slot groups the server replaces. Each child covers them with an empty read-only tmpfs, last.
COVERED = (b"/proc", b"/sys/fs/cgroup")


@functools.lru_cache(maxsize=1)
def cover_mounts() -> tuple[tuple[bytes, bytes, int, bytes], ...]:
    """(target, fstype, flags, options) of the empty read-only tmpfs each child mounts over :data:`COVERED`."""
    flags = _sys.MS_RDONLY | _sys.MS_NOSUID | _sys.MS_NODEV | _sys.MS_NOEXEC
    return tuple((t, b"tmpfs", flags, b"size=4k,nr_inodes=2,mode=0555") for t in COVERED if os.path.isdir(t))


def _mount_private_tmp(spec: ChildSpec) -> None:
    held = [(os.open(p, os.O_PATH | os.O_CLOEXEC), p) for p in spec.keep_visible]  # before the tmpfs hides them
    for target, fstype, flags, options in spec.tmpfs:
        _sys.mount_raw(fstype, target, fstype, flags, options)
    for fd, path in held:  # an interpreter or venv living under /tmp stays importable, read-only
        os.makedirs(path, mode=0o755, exist_ok=True)
        _sys.mount(f"/proc/self/fd/{fd}", path, None, _sys.MS_BIND | _sys.MS_REC)
        _sys.mount(None, path, None, _sys.MS_REMOUNT | _sys.MS_BIND | _sys.MS_RDONLY)
        os.close(fd)
    for target, fstype, flags, options in spec.covers:  # (after the binds above, which name /proc/self/fd)
        _sys.mount_raw(fstype, target, fstype, flags, options)


#: 1, not 0: a core_pattern that pipes to a helper (systemd-coredump, apport) ignores a limit of 0 and runs that
#: helper as root on the host for every crash; the kernel aborts the dump only at exactly 1 (too small for a
#: file dump as well). seccomp keeps the solution from changing it (:mod:`sandbox._sys`).
CORE_LIMIT = 1


def rlimit_plan(limits: dict[str, int], memory_base: int | None = None) -> tuple[tuple[int, int], ...]:
    """The rlimits a child sets, as (resource, value), each no higher than the hard limit it inherits.

    Computed in the server (whose limits the child inherits), so the child only calls ``setrlimit``.
    ``memory_base``: where no memory cgroup holds the execution to ``memory_bytes`` (an unprivileged host), the
    address space each process may reach is capped at ``memory_bytes`` above this many bytes (the address space
    the child starts with, inherited from the process that forks it), so a solution that allocates past its memory
    limit gets a ``MemoryError`` instead of taking the host's memory. Per process, not per execution: a solution
    with several processes can use a few times its limit, which is why this is the fallback and not the limit.
    """
    address_space = limits["address_space_bytes"]
    if memory_base is not None:
        address_space = min(address_space, memory_base + limits["memory_bytes"])
    wanted = (
        (resource.RLIMIT_CPU, limits["cpu_s"]),
        (resource.RLIMIT_AS, address_space),
        (resource.RLIMIT_FSIZE, limits["file_size_bytes"]),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_CORE, CORE_LIMIT),
        (resource.RLIMIT_NPROC, limits["max_pids"]),
        (resource.RLIMIT_MSGQUEUE, 0),
        (resource.RLIMIT_MEMLOCK, 0),
    )
    plan = []
    for res, value in wanted:
        hard = resource.getrlimit(res)[1]
        plan.append((res, value if hard == resource.RLIM_INFINITY else min(value, hard)))
    return tuple(plan)


def _drop_uid(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != uid:
        raise OSError("uid drop did not take")


def _make_stdio() -> tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper]:
    """New stream objects on fds 0-2."""
    return (
        io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding="utf-8"),
        io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8"),
        io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        ),
    )


#: Stream objects for fds 0-2, made once in the server (:func:`prepare_server`) and never used there, keyed by
#: whether fd 0 is a pipe (else ``/dev/null``); each child takes the set that matches its own fd 0.
_STDIO: dict[bool, tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper]] = {}
#: The server's own streams, held here so that a child replacing them in ``sys`` does not free them: their
#: finalizers (flush, close) ran in every child and cost it about 40 page faults.
_SERVER_STDIO: list[object] = []


def _prebuild_stdio() -> None:
    """Make :data:`_STDIO` over descriptors of the kinds a child has on 0-2 (a pipe or ``/dev/null`` on 0, pipes
    on 1 and 2), so that what the objects learn from their descriptor (seekable or not, the position) is what a
    child would learn from its own. The server's own 0-2 are put back afterwards."""
    _SERVER_STDIO[:] = [sys.stdin, sys.stdout, sys.stderr, sys.__stdin__, sys.__stdout__, sys.__stderr__]
    saved = [os.dup(k) for k in range(3)]
    r, w = os.pipe()
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        os.dup2(w, 1)
        os.dup2(w, 2)
        for piped in (True, False):
            os.dup2(r if piped else null, 0)
            _STDIO[piped] = _make_stdio()
    finally:
        for k, fd in enumerate(saved):
            os.dup2(fd, k)
            os.close(fd)
        for fd in (r, w, null):
            os.close(fd)


def _fresh_stdio() -> None:
    """Stream objects on fds 0-2 that never carried anything (none of them the server's own, with its buffers); the
    ``sys.__std*__`` originals are replaced too (typeshed declares them Final, hence the ignores), so code that
    reaches for them gets these. They were made before ``fork`` (:data:`_STDIO`): making them here cost every
    child about 80 page faults."""
    made = _STDIO.get(stat.S_ISFIFO(os.fstat(0).st_mode)) or _make_stdio()
    sys.stdin = sys.__stdin__ = made[0]  # type: ignore[misc]  # Final in typeshed; replaced on purpose
    sys.stdout = sys.__stdout__ = made[1]  # type: ignore[misc]  # Final in typeshed; replaced on purpose
    sys.stderr = sys.__stderr__ = made[2]  # type: ignore[misc]  # Final in typeshed; replaced on purpose


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _enter_pid_namespace() -> None:
    """Continue as pid 1 of a fresh pid namespace; this process stays behind as its keeper.

    The keeper (the pid the server knows) waits for the new process and exits with its status; the new process
    has ``PDEATHSIG=SIGKILL``, so killing the keeper kills it, and the kernel then kills everything else in the
    namespace (double-forked daemons included), which it reaps itself on the way out. Only used where there are
    no cgroups to do that. (A separate init under the keeper cost a third process per child.)
    """
    _sys.unshare(_sys.CLONE_NEWPID)
    worker = os.fork()
    if worker:
        os.closerange(0, 1 << 20)
        _, st = os.waitpid(worker, 0)
        os._exit(os.waitstatus_to_exitcode(st) & 0xFF if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))
    _sys.set_parent_death_signal(signal.SIGKILL)  # (getppid() is 0 for a namespace's init: nothing to re-check)


def _die_with_server(spec: ChildSpec) -> None:
    """SIGKILL this process when the server dies (set again after a uid change, which clears it)."""
    _sys.set_parent_death_signal(signal.SIGKILL)
    if spec.server_pid and os.getppid() not in (spec.server_pid, 0):  # it died before the line above
        os._exit(1)  # (0: the server is outside this process's pid namespace)


def _setup(spec: ChildSpec, fds: list[int], placed: list[bool]) -> None:
    if spec.nice is not None:  # (the server and helper run at a higher priority: never the children)
        os.setpriority(os.PRIO_PROCESS, 0, spec.nice)
    _die_with_server(spec)
    os.setsid()
    for fd in spec.cgroup_fds:
        os.write(fd, b"0")
    if spec.unshare:  # (a mount namespace: the private tmpfs below is this child's alone)
        _sys.unshare(spec.unshare)
    if spec.mounts:
        _mount_private_tmp(spec)
    ruleset = []
    if spec.landlock is not None:  # built while the server's descriptors of the read-only trees are still open
        writable = ["/tmp", "/dev/shm", "/dev/null"] if spec.mounts else [spec.workdir, "/dev/null"]
        ruleset = [spec.landlock.ruleset(writable)]
    _place_fds(fds + ruleset)
    placed[0] = True
    if spec.pidns:
        _enter_pid_namespace()
    os.chdir(spec.workdir)
    for res, value in spec.rlimits:
        resource.setrlimit(res, (value, value))
    if spec.uid is not None:
        _drop_uid(spec.uid)
        _die_with_server(spec)
    _sys.set_no_new_privs()
    if ruleset:
        _sys.landlock_enforce(len(fds))
        os.close(len(fds))
    if spec.seccomp is not None:
        spec.seccomp.install()
    if not spec.mounts:  # (the rest of the environment is the server's: SAFE_ENV, see prepare_server)
        os.environ.update(HOME=spec.workdir, TMPDIR=spec.workdir)
    os.umask(0o077)
    _fresh_stdio()


def run_child(spec: ChildSpec, fds: list[int]) -> None:
    """Entry point in the forked child: set up, report on fd 4, run the role. Never returns."""
    placed = [False]  # until the pipes sit on 0-6, fd 4 is some descriptor of the server's
    try:
        _setup(spec, fds, placed)
        payload = marshal.loads(_read_all(FD_PAYLOAD))
        os.write(FD_SETUP, b"OK")
        os.close(FD_SETUP)
    except BaseException as e:  # report the setup failure to the host, which scores sandbox_error
        try:
            os.write(FD_SETUP if placed[0] else fds[FD_SETUP], f"setup failed: {type(e).__name__}: {e}".encode()[:2000])
        except OSError:
            pass
        os._exit(121)
    try:
        if spec.role == "program":
            _solution.run_program(payload["code"])
        elif spec.role == "solution":
            _solution.serve_functions(payload["code"], FD_RPC)
        else:
            verdict = _run_judge(payload)
            _wire.send(FD_VERDICT, verdict)
            sys.stdout.flush()
            os._exit(0)
    except BaseException:
        pass
    os._exit(1)


def _progress(line: bytes) -> None:
    """Tell the host which test case runs (the judge's fd 7; nothing when the host gave none)."""
    try:
        os.write(FD_PROGRESS, line)
    except OSError:
        pass


def _run_judge(payload: dict[str, Any]) -> dict[str, Any]:
    try:
        return _judge.judge(payload, FD_RPC, _progress)
    except SyntaxError as e:
        return {"status": "bad_tests", "reason": f"the tests do not parse: {e.msg} (line {e.lineno})"}
    except (EOFError, _wire.ProtocolError) as e:
        return {"status": "fail", "reason": f"the solution process stopped answering: {e}", "passed": 0, "total": 1}
