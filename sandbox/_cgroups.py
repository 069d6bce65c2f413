"""Per-execution control groups: a memory limit, a process-count limit, a kill that reaches every descendant, and
an equal CPU weight with the group's own CPU time.

Works with the cgroup v1 ``memory``, ``pids``, ``cpu`` and ``cpuacct`` hierarchies, the v2 unified hierarchy,
or a mix (the hybrid layout). A job's group is created under the cgroup this process lives in, so limits nest
inside whatever the machine already imposes. ``kill`` uses v2 ``cgroup.kill`` when there is one and otherwise
signals every pid listed until the group is empty.

Groups are made once per slot and reused: moving a process into a freshly made v2 group costs several ms,
into an existing one well under one. Before a group is used again, the caller checks it is as clean as new
(no process, no unreclaimable memory charged: :meth:`JobCgroup.clean`) and otherwise replaces it. Counters (oom
kills, refused forks) are cumulative; callers compare them before and after an execution. This module does not
decide limits or statuses.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CgroupRoots", "JobCgroup", "detect_roots", "group_prefix", "remove_stale"]

_MOUNT = Path("/sys/fs/cgroup")
#: The CPU weight of every job group (the controllers' defaults, written explicitly): equal for all.
CPU_WEIGHT_V1 = 1024
CPU_WEIGHT_V2 = 100


def _own_paths() -> dict[str, str]:
    """Controller -> this process's path, from ``/proc/self/cgroup``."""
    out: dict[str, str] = {}
    try:
        text = Path("/proc/self/cgroup").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        if ctrls == "":
            out["unified"] = path
        for c in ctrls.split(","):
            if c:
                out[c] = path
    return out


@dataclass(frozen=True)
class CgroupRoots:
    """Where this process may create job groups, per facility (None when that facility is missing)."""

    memory: Path | None = None  # v1 memory controller
    pids: Path | None = None  # v1 pids controller
    unified: Path | None = None  # v2 group: kill and, when controllers are enabled, memory.max / pids.max
    v2_memory: bool = False
    v2_pids: bool = False
    cpu: Path | None = None  # v1 cpu controller (cpu.shares)
    cpuacct: Path | None = None  # v1 cpuacct controller (cpuacct.usage)
    v2_cpu: bool = False

    @property
    def has_cpu(self) -> bool:
        """A CPU controller with equal weights per group and the group's own CPU time."""
        return (self.cpu is not None and self.cpuacct is not None) or self.v2_cpu

    @property
    def has_memory(self) -> bool:
        return self.memory is not None or self.v2_memory

    @property
    def has_pids(self) -> bool:
        return self.pids is not None or self.v2_pids

    @property
    def has_kill(self) -> bool:
        return self.unified is not None or self.memory is not None or self.pids is not None


def _probe(base: Path) -> Path | None:
    """``base`` when a child group can be created there (and removed again), else None."""
    probe = base / f"grpo-sbx-probe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
        return base
    except OSError:
        return None


def detect_roots() -> CgroupRoots:
    """Find writable cgroup locations for job groups under this process's own groups."""
    own = _own_paths()
    roots: dict[str, Path | None] = {"memory": None, "pids": None, "unified": None, "cpu": None, "cpuacct": None}
    for ctrl in ("memory", "pids", "cpu", "cpuacct"):
        d = _MOUNT / ctrl
        if ctrl in own and (d / "cgroup.procs").exists():
            roots[ctrl] = _probe(d / own[ctrl].lstrip("/"))
    v2_mem = v2_pids = v2_cpu = False
    for cand in (_MOUNT / "unified", _MOUNT):
        if "unified" in own and (cand / "cgroup.controllers").exists():
            base = cand / own["unified"].lstrip("/")
            if (base / "cgroup.kill").exists() or (cand / "cgroup.procs").exists():
                roots["unified"] = _probe(base)
                if roots["unified"] is not None:
                    try:
                        enabled = (base / "cgroup.subtree_control").read_text().split()
                    except OSError:
                        enabled = []
                    v2_mem, v2_pids, v2_cpu = "memory" in enabled, "pids" in enabled, "cpu" in enabled
                break
    if roots["cpu"] is None or roots["cpuacct"] is None:  # (the v1 pair, or neither)
        roots["cpu"] = roots["cpuacct"] = None
    return CgroupRoots(
        roots["memory"], roots["pids"], roots["unified"], v2_mem, v2_pids, roots["cpu"], roots["cpuacct"], v2_cpu
    )


def _alive(pid: int) -> bool:
    """True for a running process (a zombie is dead: it only waits for its parent to reap it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def group_prefix(pid: int) -> str:
    """Name prefix of a server's groups: its pid and its pid namespace (pids of other namespaces are not ours)."""
    return f"sbx-{pid}-{os.stat('/proc/self/ns/pid').st_ino}-"


def remove_stale(roots: CgroupRoots) -> int:
    """Kill and remove groups left by servers of this pid namespace that died without cleaning up."""
    removed = 0
    ns = str(os.stat("/proc/self/ns/pid").st_ino)
    for root in (roots.memory, roots.pids, roots.unified, roots.cpu, roots.cpuacct):
        if root is None:
            continue
        for d in root.glob("sbx-*"):
            parts = d.name.split("-")
            if len(parts) < 3 or not parts[1].isdigit() or parts[2] != ns or _alive(int(parts[1])):
                continue
            cg = JobCgroup(dirs=[d], unified_dir=d if root == roots.unified else None)
            if cg.drain(timeout=2.0) and cg.remove(timeout=1.0):
                removed += 1
            cg.close()
    return removed


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


@dataclass
class JobCgroup:
    """The groups of one sandboxed process tree. Create with :meth:`create`; children join through
    :meth:`join_fds` (descriptors the server opened, so a child writes without opening anything)."""

    dirs: list[Path] = field(default_factory=list)
    memory_dir: Path | None = None
    pids_dir: Path | None = None
    unified_dir: Path | None = None
    cpuacct_dir: Path | None = None
    v2_cpu: bool = False
    limits: tuple[int, int] = (0, 0)  # (memory bytes, max pids) last written
    counted: tuple[int, int] | None = None  # counters as last read (groups only change while a job runs)
    _fds: dict[tuple[Path, str], int] = field(default_factory=dict, repr=False)
    _missing: set[tuple[Path, str]] = field(default_factory=set, repr=False)

    @classmethod
    def create(cls, roots: CgroupRoots, name: str, memory_bytes: int, max_pids: int) -> JobCgroup:
        """Make the groups and set their limits.

        Raises:
            OSError: when a group cannot be made or a limit cannot be written.
        """
        cg = cls()
        if roots.memory is not None:
            cg.memory_dir = roots.memory / name
            cg._mk(cg.memory_dir)
            _write(cg.memory_dir / "memory.limit_in_bytes", str(memory_bytes))
            try:  # without swap accounting this file is missing: then swap is simply not limited
                _write(cg.memory_dir / "memory.memsw.limit_in_bytes", str(memory_bytes))
            except OSError:
                pass
        if roots.pids is not None:
            cg.pids_dir = roots.pids / name
            cg._mk(cg.pids_dir)
            _write(cg.pids_dir / "pids.max", str(max_pids))
        if roots.cpu is not None and roots.cpuacct is not None:  # every group the same weight: a slot that
            cpu_dir = roots.cpu / name  # forks a thousand sessions gets no more CPU than one busy neighbour
            cg._mk(cpu_dir)
            _write(cpu_dir / "cpu.shares", str(CPU_WEIGHT_V1))
            if roots.cpuacct != roots.cpu:
                cg._mk(roots.cpuacct / name)
            cg.cpuacct_dir = roots.cpuacct / name
        if roots.unified is not None:
            cg.unified_dir = roots.unified / name
            cg._mk(cg.unified_dir)
            if roots.v2_cpu:
                _write(cg.unified_dir / "cpu.weight", str(CPU_WEIGHT_V2))
                cg.v2_cpu = True
            if roots.v2_memory:
                _write(cg.unified_dir / "memory.max", str(memory_bytes))
                _write(cg.unified_dir / "memory.swap.max", "0")
            if roots.v2_pids:
                _write(cg.unified_dir / "pids.max", str(max_pids))
        return cg

    def set_limits(self, memory_bytes: int, max_pids: int) -> None:
        """Rewrite the limits (groups are reused across executions, whose limits may differ)."""
        if self.memory_dir is not None:
            for f in ("memory.memsw.limit_in_bytes", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
                try:  # memsw must stay >= the memory limit: write it around the memory limit in both orders
                    _write(self.memory_dir / f, str(memory_bytes))
                except OSError:
                    if f == "memory.limit_in_bytes":
                        raise
        if self.pids_dir is not None:
            _write(self.pids_dir / "pids.max", str(max_pids))
        if self.unified_dir is not None:  # v2 controllers, where enabled (their files exist only then)
            for name, value in (("memory.max", memory_bytes), ("pids.max", max_pids)):
                try:
                    _write(self.unified_dir / name, str(value))
                except FileNotFoundError:
                    pass

    def _fd(self, d: Path, name: str, flags: int) -> int:
        """A descriptor of ``d/name`` kept open for the group's life (cgroup files are re-read with ``pread``).

        Raises:
            OSError: when the file cannot be opened.
        """
        key = (d, name)
        if key in self._missing:  # (v2 memory.events without the memory controller, say: not asked again)
            raise FileNotFoundError(f"{d / name} is missing")
        fd = self._fds.get(key)
        if fd is None:
            try:
                fd = self._fds[key] = os.open(d / name, flags | os.O_CLOEXEC)
            except FileNotFoundError:
                self._missing.add(key)
                raise
        return fd

    def _read(self, d: Path, name: str) -> str:
        return os.pread(self._fd(d, name, os.O_RDONLY), 1 << 16, 0).decode()

    def counters(self) -> tuple[int, int]:
        """(oom kills, refused forks) so far: cumulative, compare before and after an execution."""
        oom = refused = 0
        for d, name, key in (
            (self.memory_dir, "memory.oom_control", "oom_kill"),
            (self.unified_dir, "memory.events", "oom_kill"),
            (self.pids_dir, "pids.events", "max"),
            (self.unified_dir, "pids.events", "max"),
        ):
            if d is None:
                continue
            try:
                text = self._read(d, name)
            except OSError:
                continue
            fields = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
            n = int(fields.get(key, "0"))
            if name == "pids.events":
                refused += n
            else:
                oom += n
        self.counted = (oom, refused)
        return oom, refused

    def cpu_seconds(self) -> float | None:
        """CPU time the group's processes used so far (cumulative: compare before and after); None without a
        CPU accounting controller."""
        try:
            if self.cpuacct_dir is not None:
                return int(self._read(self.cpuacct_dir, "cpuacct.usage")) / 1e9
            if self.v2_cpu and self.unified_dir is not None:
                for line in self._read(self.unified_dir, "cpu.stat").splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) / 1e6
        except (OSError, ValueError):
            pass
        return None

    def unreclaimable_bytes(self) -> int:
        """Memory still charged to the groups that reclaim cannot free: anonymous and shared memory (tmpfs,
        System V segments) and locked pages. Zero for a group whose processes are gone and left nothing behind;
        page cache of files the children read is not counted (the kernel frees it under pressure)."""
        total = 0
        for d in (self.memory_dir, self.unified_dir if self.memory_dir is None else None):
            if d is None:
                continue
            try:
                text = self._read(d, "memory.stat")
            except OSError:
                continue
            for line in text.splitlines():
                key, _, value = line.partition(" ")
                if key in ("active_anon", "inactive_anon", "unevictable"):
                    total += int(value)
        return total

    def clean(self, slack: int = 4 << 20, wait_s: float = 1.0) -> bool:
        """True once :meth:`unreclaimable_bytes` is under ``slack`` (waiting up to ``wait_s`` for the kernel's
        deferred frees, such as a namespace torn down after its last process); False if it never gets there."""
        deadline = time.monotonic() + wait_s
        delay = 0.001
        while self.unreclaimable_bytes() >= slack:
            if time.monotonic() > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return True

    def _mk(self, d: Path) -> None:
        try:
            d.mkdir()
        except FileExistsError:
            pass
        self.dirs.append(d)

    def join_fds(self) -> list[int]:
        """Open (once) each group's ``cgroup.procs`` for writing: a forked child writes ``0`` to each to join.

        Raises:
            OSError: when a file cannot be opened.
        """
        return [self._fd(d, "cgroup.procs", os.O_WRONLY) for d in self.dirs]

    def pids(self) -> set[int]:
        """Every pid still in the groups."""
        out: set[int] = set()
        for d in self.dirs:
            try:
                out.update(int(x) for x in (d / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return out

    def empty(self) -> bool:
        """True when no process is left in the groups (v2 ``populated``, else the pid lists)."""
        if self.unified_dir is not None:
            try:
                return "populated 0" in self._read(self.unified_dir, "cgroup.events")
            except OSError:
                pass
        return not self.pids()

    def kill(self) -> None:
        """SIGKILL every process in the groups (v2 ``cgroup.kill``, else each listed pid)."""
        if self.unified_dir is not None:
            try:
                os.write(self._fd(self.unified_dir, "cgroup.kill", os.O_WRONLY), b"1")
                return
            except OSError:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def drain(self, reap: Callable[[], object] | None = None, timeout: float = 10.0) -> bool:
        """Kill everything and wait until the groups are empty; True when they are.

        Args:
            reap: called between kill rounds so the caller can ``waitpid`` its own children (a zombie stays
                listed in a v1 group until reaped).
            timeout: how long to keep trying.
        """
        deadline = time.monotonic() + timeout
        delay = 0.0002
        while not self.empty():
            self.kill()
            if reap is not None:
                reap()
            if self.empty():
                break
            if time.monotonic() > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.02)
        if reap is not None:
            reap()
        return True

    def close(self) -> None:
        """Close the descriptors kept open on the group's files."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()

    def remove(self, timeout: float = 5.0) -> bool:
        """Remove the (empty) groups; True when all are gone."""
        self.close()
        deadline = time.monotonic() + timeout
        pending = list(reversed(self.dirs))
        while pending:
            still = []
            for d in pending:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError as e:
                    if e.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                        raise
                    still.append(d)
            pending = still
            if pending:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.002)
        return True
