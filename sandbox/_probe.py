"""The warm server's start: the namespaces it enters, the layers it can give its children, the machine's speed.

:func:`probe` runs once in the server process (:mod:`sandbox._zygote`): as root it detects the cgroups and
removes stale groups, then enters the server's own network, IPC, UTS and mount namespaces, pivots into a minimal
root holding the interpreter's install trees and a few system paths (or, where that fails, exposes the install
trees through 0700 ancestors), makes every mount read-only but the cgroup tree, and tries
in throwaway children which per-execution namespaces it can make. Nothing here forks a sandboxed child or
decides a level (see :func:`sandbox._results.level_of`).
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

from sandbox import _cgroups, _sys

__all__ = [
    "REFERENCE_BURN_S",
    "SERVER_PATHS",
    "SYSTEM_RO",
    "calibrate",
    "home_namespaces",
    "import_path",
    "probe",
    "real_executable",
    "runtime_roots",
]

#: Seconds the calibration loop takes on an unloaded reference machine (2 cores, Python 3.11).
REFERENCE_BURN_S = 0.025
SYSTEM_RO = (
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/bin",
    "/sbin",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/mime.types",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/dev/full",
    "/sys/devices/system/cpu",
)


def runtime_roots() -> list[str]:
    """The interpreter's install trees and package directories that a solution may import from, as real paths.

    Resolved once, on the first call: the server makes it before it pivots into its minimal root (which holds these
    real paths only), where a symlink on the way, such as a virtual environment reached through a link
    (``.venv -> /elsewhere/.venv``), no longer resolves; the Landlock rules and the binds each child makes then
    name the same real paths.
    """
    return list(_resolved_roots())


@functools.lru_cache(maxsize=1)
def _resolved_roots() -> tuple[str, ...]:
    roots: list[str] = []
    for p in (sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix):
        roots.append(os.path.realpath(p))
    for p in sys.path:
        if p and ("site-packages" in p or "dist-packages" in p) and os.path.isdir(p):
            roots.append(os.path.realpath(p))
    out: list[str] = []
    for r in sorted(set(roots), key=len):
        if not any(r == o or r.startswith(o + "/") for o in out):
            out.append(r)
    return tuple(out)


def real_executable() -> str:
    """``sys.executable`` with its directory resolved (call it before the pivot): the interpreter a solution starts
    by that name (``subprocess``, ``multiprocessing``'s spawn) is then found in the minimal root. The file's own link
    (``bin/python`` -> the base interpreter) is kept, so it still starts inside its virtual environment."""
    if not sys.executable:
        return sys.executable
    where, name = os.path.split(sys.executable)
    return os.path.join(os.path.realpath(where), name)


def import_path() -> list[str]:
    """The server's ``sys.path``: the standard library's and the package directories, as real paths (as
    :func:`runtime_roots`; call it before the pivot), so that children import from the trees their root holds.
    The working directory's entry and path-hook entries (an editable install's finder) are left out."""
    base = (sys.base_prefix, os.path.realpath(sys.base_prefix))
    kept = [p for p in sys.path if "site-packages" in p or "dist-packages" in p or p.startswith(base)]
    return [os.path.realpath(p) if os.path.exists(p) else p for p in kept]


def _blocked_ancestor(path: str) -> str | None:
    """The first directory on the way to ``path`` that other users cannot traverse, if any."""
    cur = "/"
    for part in Path(path).parts[1:]:
        cur = os.path.join(cur, part)
        try:
            mode = os.stat(cur).st_mode
        except OSError:
            return None
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return cur
    return None


def _expose(roots: list[str]) -> None:
    """In this mount namespace, make each root reachable through 0700 ancestors (tmpfs + bind mounts)."""
    by_blocker: dict[str, list[str]] = {}
    for r in roots:
        b = _blocked_ancestor(r)
        if b is not None:
            by_blocker.setdefault(b, []).append(r)
    for blocker, under in by_blocker.items():
        held = [(r, os.open(r, os.O_PATH | os.O_CLOEXEC)) for r in under]
        _sys.mount("tmpfs", blocker, "tmpfs", _sys.MS_NOSUID | _sys.MS_NODEV, "mode=0755,size=1m")
        for r, fd in held:
            os.makedirs(r, mode=0o755, exist_ok=True)
            _sys.mount(f"/proc/self/fd/{fd}", r, None, _sys.MS_BIND | _sys.MS_REC)
            _sys.mount(None, r, None, _sys.MS_REMOUNT | _sys.MS_BIND | _sys.MS_RDONLY)
            os.close(fd)


#: What the server itself needs in its root besides what children may read: its process table and ns files,
#: the cgroup tree it writes, /dev/null, and the mount points of every child's own tmpfs.
SERVER_PATHS = ("/proc", "/sys/fs/cgroup", "/dev/null")
_MOUNT_POINTS = ("/tmp", "/dev/shm")


def _minimal_root(paths: list[str]) -> None:
    """Pivot this mount namespace into a small tmpfs root that holds only ``paths`` (bind-mounted from the old
    root; top-level symlinks such as ``/lib -> usr/lib`` recreated) and empty ``/tmp`` and ``/dev/shm``.

    Without it every host path stayed reachable by name: Landlock does not govern connecting to a unix socket
    file, so a solution could send to any world-writable socket of the host (the system D-Bus, journald's
    ``/run/systemd/journal/socket``, ``/dev/log``). Directories on the way are 0755, so install trees under a
    0700 home directory are reachable too (what :func:`_expose` does without a new root).

    Raises:
        OSError: a mount or the pivot failed (the caller falls back to the full root).
    """
    links: list[tuple[str, str]] = []
    held: list[tuple[str, int]] = []
    for p in sorted(set(paths), key=len, reverse=True):  # deepest first: nothing is made inside a bind mount
        if os.path.islink(p) and os.path.dirname(p) == "/":
            links.append((p, os.readlink(p)))
        elif os.path.exists(p):
            held.append((p, os.open(p, os.O_PATH | os.O_CLOEXEC)))  # (before the tmpfs below hides anything)
    new = "/tmp"  # (this namespace's own; every child mounts a fresh tmpfs on it in any case)
    try:
        _sys.mount("tmpfs", new, "tmpfs", _sys.MS_NOSUID | _sys.MS_NODEV, "mode=0755,size=1m,nr_inodes=4096")
        try:
            _populate(new, links, held)
        except OSError:
            _sys.umount_detached(new)  # (the caller's fallback needs the old /tmp)
            raise
        os.mkdir(new + "/.old")
        _sys.pivot_root(new, new + "/.old")
        os.chdir("/")
        _sys.umount_detached("/.old")
        os.rmdir("/.old")
    finally:
        for _, fd in held:
            os.close(fd)


def _populate(new: str, links: list[tuple[str, str]], held: list[tuple[str, int]]) -> None:
    """Fill the new root at ``new``: the symlinks, a bind mount per held path, the empty mount points."""
    for p, target in links:
        os.symlink(target, new + p)
    for p, fd in held:
        os.makedirs(os.path.dirname(new + p), mode=0o755, exist_ok=True)
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            os.makedirs(new + p, mode=0o755, exist_ok=True)
        elif not os.path.lexists(new + p):
            os.close(os.open(new + p, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
        _sys.mount(f"/proc/self/fd/{fd}", new + p, None, _sys.MS_BIND | _sys.MS_REC)
    for p in _MOUNT_POINTS:
        os.makedirs(new + p, mode=0o755, exist_ok=True)
    os.chmod(new + "/tmp", 0o1777)


def calibrate(rounds: int = 3) -> float:
    """How much slower than the reference machine this one runs Python (>= 1, at most 8), in CPU time: time
    limits are judged on an execution's own CPU time, which other work on the machine does not stretch."""
    best = float("inf")
    for _ in range(rounds):
        t = time.process_time()
        s = 0
        for i in range(300_000):
            s += i * i % 7
        best = min(best, time.process_time() - t)
    return max(1.0, min(8.0, best / REFERENCE_BURN_S))


def _enter_namespaces(layers: dict[str, Any]) -> None:
    flags = _sys.CLONE_NEWNS | _sys.CLONE_NEWNET | _sys.CLONE_NEWIPC | _sys.CLONE_NEWUTS
    if os.geteuid() != 0:
        uid, gid = os.getuid(), os.getgid()
        try:
            _sys.unshare(flags | _sys.CLONE_NEWUSER)
            Path("/proc/self/setgroups").write_text("deny")
            Path("/proc/self/uid_map").write_text(f"0 {uid} 1")
            Path("/proc/self/gid_map").write_text(f"0 {gid} 1")
            layers["userns"] = True
        except OSError as e:
            layers["namespace_error"] = str(e)
            return
    else:
        try:
            _sys.unshare(flags)
        except OSError as e:
            layers["namespace_error"] = str(e)
            return
    layers.update(netns=True, ipcns=True, utsns=True)
    try:
        _sys.mount(None, "/", None, _sys.MS_REC | _sys.MS_PRIVATE)
        try:
            _minimal_root(runtime_roots() + list(SYSTEM_RO) + list(SERVER_PATHS))
            layers["minimal_root"] = True
        except OSError as e:
            layers["minimal_root_error"] = str(e)
            _expose(runtime_roots())
        layers["mntns"] = True
    except OSError as e:
        layers["mount_error"] = str(e)
        return
    _readonly_view(layers)


def _can_unshare(flags: int) -> bool:
    """Whether a child can enter new namespaces of ``flags`` (tried in a throwaway child)."""
    pid = os.fork()
    if pid == 0:
        try:
            _sys.unshare(flags)
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, st = os.waitpid(pid, 0)
    return os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0


_NS_FILES = {_sys.CLONE_NEWPID: "pid", _sys.CLONE_NEWNET: "net", _sys.CLONE_NEWIPC: "ipc"}


def home_namespaces(flags: int) -> list[tuple[int, int]]:
    """Descriptors of this process's own namespaces of ``flags`` (to come back to with ``setns``), with their type."""
    return [
        (os.open(f"/proc/self/ns/{name}", os.O_RDONLY | os.O_CLOEXEC), t) for t, name in _NS_FILES.items() if flags & t
    ]


def _can_renew(flags: int) -> bool:
    """Whether this process can give each job fresh namespaces of ``flags``: enter new ones for the job's
    processes, then go back to its own (``setns``; for a pid namespace, root only). Tried in a throwaway child."""
    pid = os.fork()
    if pid == 0:
        try:
            home = home_namespaces(flags)
            _sys.unshare(flags)
            for fd, t in home:
                _sys.setns(fd, t)
            os._exit(0)
        except BaseException:
            os._exit(1)
    _, st = os.waitpid(pid, 0)
    return os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0


def _readonly_view(layers: dict[str, Any]) -> None:
    """Make every mount of this namespace read-only, the cgroup tree excepted (the server writes there).

    Children mount their own writable tmpfs on ``/tmp`` and ``/dev/shm``; everything else they can reach is
    read-only at the mount, so no execution can leave a mark on a shared file that the next one reads: no
    access-time updates, no ``utime``, ``chmod`` or extended attributes, whatever the file's owner.
    """
    try:
        try:
            _sys.mount_setattr_recursive("/", _sys.MOUNT_ATTR_RDONLY)
            if os.path.isdir("/sys/fs/cgroup"):
                _sys.mount_setattr_recursive("/sys/fs/cgroup", 0, _sys.MOUNT_ATTR_RDONLY)
        except OSError as e:
            if e.errno != errno.ENOSYS:
                raise
            _remount_each_readonly()  # before Linux 5.12
        layers["readonly_mounts"] = True
    except OSError as e:
        layers["readonly_error"] = str(e)


_KEPT_FLAGS = {
    "nosuid": _sys.MS_NOSUID,
    "nodev": _sys.MS_NODEV,
    "noexec": 8,
    "noatime": 1024,
    "nodiratime": 2048,
    "relatime": 1 << 21,
}


def _remount_each_readonly() -> None:
    """Bind-remount every mount but the cgroup tree read-only, keeping its other flags (as locked mounts need)."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        target = fields[4].encode().decode("unicode_escape")
        if target == "/sys/fs/cgroup" or target.startswith("/sys/fs/cgroup/"):
            continue
        flags = _sys.MS_REMOUNT | _sys.MS_BIND | _sys.MS_RDONLY
        for opt in fields[5].split(","):
            flags |= _KEPT_FLAGS.get(opt, 0)
        _sys.mount(None, target, None, flags)


def probe() -> tuple[dict[str, Any], _cgroups.CgroupRoots | None]:
    """Detect the layers this process can give its children (entering the server's namespaces on the way)."""
    layers: dict[str, Any] = {
        "rlimits": True,
        "no_new_privs": True,
        "fresh_env": True,
        "closed_fds": True,
        "uid": False,
        "userns": False,
        "netns": False,
        "ipcns": False,
        "utsns": False,
        "mntns": False,
        "pidns": False,
        "job_pidns": False,
        "job_ipcns": False,
        "job_netns": False,
        "readonly_mounts": False,
        "cgroup_memory": False,
        "cgroup_pids": False,
        "cgroup_kill": False,
        "cgroup_cpu": False,
    }
    roots = None
    if os.geteuid() == 0:
        layers["uid"] = True
        roots = _cgroups.detect_roots()
        _cgroups.remove_stale(roots)
        layers.update(
            cgroup_memory=roots.has_memory,
            cgroup_pids=roots.has_pids,
            cgroup_kill=roots.has_kill,
            cgroup_cpu=roots.has_cpu,
        )
        if not roots.has_kill:
            roots = None
    _enter_namespaces(layers)
    layers["landlock_abi"] = _sys.landlock_abi()
    layers["job_pidns"] = os.geteuid() == 0 and _can_renew(_sys.CLONE_NEWPID)
    if roots is None and not layers["job_pidns"]:
        layers["pidns"] = _can_unshare(_sys.CLONE_NEWPID)
    if layers["ipcns"]:  # every execution gets an IPC namespace of its own, besides the server's
        layers["job_ipcns"] = _can_renew(_sys.CLONE_NEWIPC)
        # abstract unix socket names live in a network namespace. Landlock (ABI 6) keeps other executions from
        # connecting to them, not from binding the same name, and a socket sent over itself (SCM_RIGHTS) keeps its
        # name after its execution ended, until the kernel's unix garbage collector runs: the next execution read
        # it with bind() (EADDRINUSE). So every execution gets a network namespace of its own as well.
        layers["job_netns"] = _can_renew(_sys.CLONE_NEWNET)
    layers["seccomp"] = _sys.seccomp_supported()
    return layers, roots
