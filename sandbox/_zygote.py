"""The warm server: probes the isolation layers once, then forks one sandboxed child per execution.

Started by :mod:`sandbox.service` as a fresh interpreter (never forked from the host, so no host memory, no host
environment) with a control socket on which the host sends ``start`` and ``end`` requests and the pipes of
each child (SCM_RIGHTS). At start, as root, it enters its own network, IPC and UTS namespaces (no interface is
up, so there is no network at all) and a private mount namespace whose root is a small tmpfs holding only the
interpreter's install trees, the system paths children may read, ``/proc``, the cgroup tree and ``/dev/null``
(bind mounts, reachable by unprivileged uids even under a 0700 home directory; no other host path, no host
unix socket, exists there). Every mount of that namespace but the cgroup tree is then made read-only. For each
job the server enters fresh IPC and network namespaces and has the job's children forked into them, each as pid
1 of a fresh pid namespace of its own, then returns to its own; each child enters a mount namespace of its own.
The forking itself is done by a fork helper (:mod:`sandbox._forker`) whose children are still the server's.
Where permitted (root), server and helper run at a higher CPU priority than the children (:func:`raise_priority`).

The server loads only the modules its children need, and none that registers a fork handler (``threading``,
``random``, ``logging``): such a handler would run in every child and touch (copy) memory there.

The server never sees the tests (they go from the host to the judge child directly) and keeps no state
between jobs but the groups and pids of the running ones. When the host goes away (EOF on the control socket)
it kills every running job, removes their groups and exits.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import socket
import sys
import time
from typing import Any

from sandbox import _cgroups, _child, _judge, _solution, _sys, _usage, _wire  # noqa: F401  (before any mount)
from sandbox._forker import ForkHelper, HelperLost
from sandbox._nspool import NamespacePool
from sandbox._probe import (
    REFERENCE_BURN_S,
    SYSTEM_RO,
    calibrate,
    home_namespaces,
    import_path,
    probe,
    real_executable,
    runtime_roots,
)

__all__ = [
    "REFERENCE_BURN_S",
    "SERVER_NICE",
    "Server",
    "calibrate",
    "collect_unix_garbage",
    "main",
    "raise_priority",
    "runtime_roots",
]


class Server:
    """The request loop. One instance per server process."""

    def __init__(
        self,
        sock: socket.socket,
        layers: dict[str, Any],
        roots: _cgroups.CgroupRoots | None,
        child_nice: int | None = None,
    ) -> None:
        self.sock, self.layers, self.roots = sock, layers, roots
        self.child_nice = child_nice  # the priority children set back to (None: the server's is theirs)
        self.jobs: dict[int, list[tuple[int, _cgroups.JobCgroup | None, tuple[int, int]]]] = {}
        self.groups: dict[tuple[int, int], _cgroups.JobCgroup] = {}
        self.workdirs: dict[int, list[str]] = {}
        self.statuses: dict[int, int] = {}
        self.live: set[int] = set()
        self.devnull = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        self.pid = os.getpid()
        self.cpu0: dict[int, float] = {}  # job -> its groups' CPU time before it started
        self.job_ns = (
            (_sys.CLONE_NEWPID if layers["job_pidns"] else 0)
            | (_sys.CLONE_NEWIPC if layers["job_ipcns"] else 0)
            | (_sys.CLONE_NEWNET if layers["job_netns"] else 0)
        )
        self.home = home_namespaces(self.job_ns)  # where the server returns after starting a job's processes
        self.home_pid = next((fd for fd, t in self.home if t == _sys.CLONE_NEWPID), -1)
        # network and IPC namespaces per execution, each slot's reused while the last execution left nothing in them
        self.pool = NamespacePool(self.job_ns, layers["seccomp"], self.home)
        self.job_ns_fds: dict[int, tuple[int, list[tuple[int, int]]]] = {}  # job -> (slot, its namespaces)
        read_only = list(runtime_roots()) + list(SYSTEM_RO)
        abi = layers["landlock_abi"]
        self.landlock = _sys.LandlockPlan(read_only, abi) if abi else None
        self.seccomp = _sys.SeccompFilter(_sys.seccomp_program()) if layers["seccomp"] else None
        # runtime trees under the directories each child replaces with a private tmpfs: re-bound in the child
        self.unshare = _sys.CLONE_NEWNS if layers["mntns"] else 0  # and each child a mount namespace of its own
        self.keep_visible = tuple(
            r for r in runtime_roots() if any(r.startswith(d + "/") for d in ("/tmp", "/dev/shm"))
        )
        self.covers = _child.cover_mounts() if layers["mntns"] else ()
        self.helper: ForkHelper | None = None  # forks the children: see :mod:`sandbox._forker`

    def start_helper(self) -> None:
        """Fork the fork helper (where ``clone(CLONE_PARENT)`` works; else the server forks its children).

        With seccomp the helper installs the first half of the policy once (:func:`_sys.seccomp_program` with
        ``for_setup``), which its children inherit; each child then compiles only the short second half.
        """
        first = second = None
        if self.seccomp is not None:
            first = _sys.SeccompFilter(_sys.seccomp_program(for_setup=True))
            second = _sys.SeccompFilter(_sys.seccomp_setup_program())

        def spec(fields: dict[str, Any], cgroup_fds: tuple[int, ...]) -> _child.ChildSpec:
            return self._spec(fields, cgroup_fds, second)

        self.helper = ForkHelper.start(spec, self.home, close=(self.sock.fileno(),), seccomp=first)

    def reap(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.live:
                self.statuses[pid] = status

    def start(self, msg: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        job, children, limits, slot = int(msg["job"]), msg["children"], msg["limits"], int(msg["slot"])
        started: list[tuple[int, _cgroups.JobCgroup | None, tuple[int, int]]] = []
        self.jobs[job] = started
        memory_base = None if self.roots is not None and self.roots.has_memory else _address_space()
        rlimits = _child.rlimit_plan(limits, memory_base)
        try:
            groups = [self._group(slot, i, limits) if self.roots is not None else None for i in range(len(children))]
            self.job_ns_fds[job] = (slot, self.pool.enter(slot))
            planned = []
            for i, c in enumerate(children):
                mine = [self.devnull if k < 0 else fds[k] for k in c["fds"]]
                cg, before = groups[i], (0, 0)
                if cg is not None:
                    before = cg.counted or cg.counters()
                fields = self._fields(job, c["role"], c["uid"] if self.layers["uid"] else None, limits, rlimits)
                fields["pidns"] = cg is None and self.layers["pidns"] and not self.layers["job_pidns"]
                planned.append((fields, mine, cg, before))
            pids, error = self._fork_all(planned)
            for pid, (_, _, cg, before) in zip(pids, planned, strict=False):  # (fewer pids: it stopped short)
                self.live.add(pid)
                started.append((pid, cg, before))
            if error is not None:
                raise RuntimeError(error)
            self.cpu0[job] = sum(cg.cpu_seconds() or 0.0 for cg in groups if cg is not None)
        except Exception as e:
            self.end(job)
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}
        finally:
            for fd, nstype in self.home:  # back home: the next job gets namespaces of its own again
                _sys.setns(fd, nstype)
        return {"ok": True, "pids": [p for p, _, _ in started]}

    def _fields(
        self, job: int, role: str, uid: int | None, limits: dict[str, int], rlimits: tuple[tuple[int, int], ...]
    ) -> dict[str, Any]:
        """What differs between two children's specs (the rest: :meth:`_spec`), as plain data for the helper."""
        workdir = "/tmp"
        if not self.layers["mntns"]:
            import tempfile  # only here: it loads ``random``, whose fork handler would run in every child

            workdir = tempfile.mkdtemp(prefix="sbx-work-")
            self.workdirs.setdefault(job, []).append(workdir)
            if uid is not None:
                os.chown(workdir, uid, uid)
        tmpfs: tuple[tuple[bytes, bytes, int, bytes], ...] = ()
        if self.layers["mntns"]:
            owner = uid if uid is not None else os.getuid()
            tmpfs = _child.tmpfs_mounts(owner, owner if uid is not None else os.getgid(), limits["disk_bytes"])
        newpid = bool(self.job_ns & _sys.CLONE_NEWPID)
        return {
            "role": role,
            "uid": uid,
            "workdir": workdir,
            "limits": limits,
            "rlimits": rlimits,
            "tmpfs": tmpfs,
            "newpid": newpid,
        }

    def _spec(
        self, fields: dict[str, Any], cgroup_fds: tuple[int, ...], seccomp: _sys.SeccompFilter | None = None
    ) -> _child.ChildSpec:
        """A child's spec: ``fields`` (from :meth:`_fields`) and what every child of this server shares;
        ``seccomp``: the filter it installs instead of the whole policy (the fork helper's children)."""
        return _child.ChildSpec(
            role=fields["role"],
            uid=fields["uid"],
            workdir=fields["workdir"],
            cgroup_fds=cgroup_fds,
            mounts=self.layers["mntns"],
            pidns=fields["pidns"],
            keep_visible=self.keep_visible,
            landlock=self.landlock,
            seccomp=seccomp if seccomp is not None else self.seccomp,
            limits=fields["limits"],
            rlimits=fields["rlimits"],
            tmpfs=fields["tmpfs"],
            covers=self.covers,
            unshare=self.unshare,
            server_pid=self.pid,
            nice=self.child_nice,
        )

    def _fork_all(
        self, planned: list[tuple[dict[str, Any], list[int], _cgroups.JobCgroup | None, tuple[int, int]]]
    ) -> tuple[list[int], str | None]:
        """Fork the job's children (through the fork helper when there is one); their pids, and why it stopped
        short of the last one (None when it did not)."""
        if self.helper is not None:
            namespaces = [
                (os.open(f"/proc/self/ns/{name}", os.O_RDONLY | os.O_CLOEXEC), t)
                for t, name in ((_sys.CLONE_NEWNET, "net"), (_sys.CLONE_NEWIPC, "ipc"))
                if self.job_ns & t
            ]
            try:
                return self.helper.fork(
                    namespaces, [(f, mine, cg.join_fds() if cg else []) for f, mine, cg, _ in planned]
                )
            except HelperLost as e:  # it may have forked some: this job fails, the server forks from now on
                self.helper = None
                return [], str(e)
            except OSError:  # gone before the job reached it: the server forks, this job's children included
                self.helper = None
            finally:
                for fd, _ in namespaces:
                    os.close(fd)
        pids: list[int] = []
        for fields, mine, cg, _ in planned:
            pids.append(self._fork_child(self._spec(fields, tuple(cg.join_fds() if cg else ())), mine))
        return pids, None

    def usage(self, job: int) -> dict[str, Any]:
        """The job's CPU time so far (its groups', or its live process tree's), how long its live threads waited
        for a CPU, and the longest time one of them was runnable."""
        entries = self.jobs.get(job)
        if entries is None:
            return {"ok": False, "error": f"no job {job}"}
        groups = [cg for _, cg, _ in entries if cg is not None]
        if groups and all(cg.cpu_seconds() is not None for cg in groups):
            cpu = sum(cg.cpu_seconds() or 0.0 for cg in groups) - self.cpu0.get(job, 0.0)
            pids: set[int] = set().union(*(cg.pids() for cg in groups))
        else:
            pids = _usage.process_tree(p for p, _, _ in entries)
            cpu = _usage.tree_cpu_seconds(pids)
        waited, runnable = _usage.runnable_seconds(pids)
        return {"ok": True, "cpu_s": cpu, "wait_s": waited, "runnable_s": runnable}

    def _fork_child(self, spec: _child.ChildSpec, fds: list[int]) -> int:
        """Fork a child of the job; with per-execution pid namespaces, as pid 1 of a fresh one of its own.

        Each process of an execution is the init of its own pid namespace: its pids start at 1 whatever ran
        before, it sees no other process, and when it dies the kernel kills every process left in its namespace
        (daemons included) after it reaped them itself. No separate init process is started (an exec of
        ``sleep`` per execution cost about a fifth of the sandboxed processes' CPU time).
        """
        if self.job_ns & _sys.CLONE_NEWPID:
            _sys.unshare(_sys.CLONE_NEWPID)
        pid = os.fork()
        if pid == 0:
            _child.run_child(spec, fds)  # never returns
        if self.job_ns & _sys.CLONE_NEWPID:  # back to its own (the next child's namespace is a new one again)
            _sys.setns(self.home_pid, _sys.CLONE_NEWPID)
        return pid

    def _group(self, slot: int, index: int, limits: dict[str, int]) -> _cgroups.JobCgroup:
        """The slot's group for child ``index``, as clean as new and with ``limits``; replaced when it is not.

        Raises:
            RuntimeError: a process of the previous job is still in the group.
        """
        key = (slot, index)
        wanted = (limits["memory_bytes"], limits["max_pids"])
        cg = self.groups.get(key)
        if cg is not None and not cg.empty():
            raise RuntimeError(f"group of slot {slot} is still busy")
        if cg is not None and not cg.clean():  # memory a past job left charged: start over with a new group
            self._retire(key)
            cg = None
        if cg is not None and cg.limits != wanted:
            try:
                cg.set_limits(*wanted)
                cg.limits = wanted
            except OSError:  # (EBUSY: more charged than the new limit and the kernel could not reclaim it)
                self._retire(key)
                cg = None
        if cg is None:
            assert self.roots is not None, "a job's groups are made only where cgroups are delegated"
            name = f"{_cgroups.group_prefix(os.getpid())}s{slot}-{index}"
            cg = _cgroups.JobCgroup.create(self.roots, name, *wanted)
            cg.limits = wanted
            self.groups[key] = cg
        return cg

    def _retire(self, key: tuple[int, int]) -> None:
        """Remove a slot's group (its leftover charges go with it) so that the next job gets a new one."""
        cg = self.groups.pop(key)
        cg.drain(reap=self.reap)
        if not cg.remove():
            raise RuntimeError(f"group of slot {key[0]} could not be replaced")

    def _wait_exit(self, pid: int, grace_s: float) -> None:
        """Give ``pid`` up to ``grace_s`` to exit by itself (its own status is then the one reported)."""
        self.reap()
        if pid in self.statuses:
            return
        try:  # woken the moment it exits
            pfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pfd = -1
        if pfd >= 0:
            try:
                poller = select.poll()  # (not select(): no limit on the descriptor's number)
                poller.register(pfd, select.POLLIN)
                poller.poll(grace_s * 1000)
            finally:
                os.close(pfd)
            self.reap()
            return
        deadline = time.monotonic() + grace_s
        while pid not in self.statuses and time.monotonic() < deadline:
            time.sleep(0.001)
            self.reap()

    def end(self, job: int, grace_s: float = 0.0) -> dict[str, Any]:
        """Kill what is left of the job, reap it, and report each child's exit and whether it hit a limit.

        ``grace_s``: how long each child that closed its output may take to exit by itself (its own status is
        then the one reported). Everything is killed at once and the server's own children are waited for
        through pidfds, so each child's pid namespace (whose init it is) goes away without polling.
        """
        entries = self.jobs.pop(job, [])
        self.cpu0.pop(job, None)
        slot_ns = self.job_ns_fds.pop(job, None)
        if grace_s > 0:
            for pid, _, _ in entries:
                self._wait_exit(pid, min(grace_s, 1.0))
        for pid, cg, _ in entries:
            if cg is not None:
                cg.kill()
                if pid not in self.statuses:  # not reaped, so still this pid: a child ended before it joined its
                    try:  # groups (the host gave up on a slow setup) is in none of them; it waited for its payload
                        os.kill(pid, 9)  # from a host that was waiting for this reply
                    except OSError:
                        pass
            else:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, 9)
                    except OSError:
                        pass
        exits, ooms, refused = [], [], []
        for pid, cg, before in entries:
            self._wait_exit(pid, 10.0)
            if cg is not None:
                cg.drain(reap=self.reap)
                after = cg.counters()
                ooms.append(after[0] > before[0])
                refused.append(after[1] > before[1])
            else:
                ooms.append(False)
                refused.append(False)
            if pid not in self.statuses:
                try:
                    _, status = os.waitpid(pid, 0)
                    self.statuses[pid] = status
                except ChildProcessError:
                    pass
            st = self.statuses.pop(pid, None)
            self.live.discard(pid)
            exits.append(
                None
                if st is None
                else {
                    "code": os.WEXITSTATUS(st) if os.WIFEXITED(st) else None,
                    "signal": os.WTERMSIG(st) if os.WIFSIGNALED(st) else None,
                }
            )
        workdirs = self.workdirs.pop(job, [])
        if workdirs:  # (only without private mounts; loaded here: its compression modules add to every fork)
            import shutil

            for d in workdirs:
                shutil.rmtree(d, ignore_errors=True)
        self.reap()
        collect_unix_garbage()
        for _, cg, _ in entries:  # what the collector frees is charged to the groups: wait until it is gone
            if cg is not None:
                cg.clean(wait_s=1.0)
        if not any(cg is not None for _, cg, _ in entries):
            _wait_for_pipe_buffers()  # (one uid for every execution: the next one must get full-size pipes)
        if slot_ns is not None:
            self.pool.release(*slot_ns)
        return {"ok": True, "exits": exits, "oom": ooms, "pids_refused": refused}

    def serve(self) -> None:
        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 64)
                for fd in fds:  # (close on exec: nothing the server starts with exec may hold the job's pipes)
                    os.set_inheritable(fd, False)
            except OSError:
                data, fds = b"", []
            if not data:
                break
            try:
                msg = json.loads(data)
                if msg["op"] == "start":
                    reply = self.start(msg, fds)
                elif msg["op"] == "end":
                    reply = self.end(int(msg["job"]), float(msg.get("grace_s", 0.0)))
                elif msg["op"] == "usage":
                    reply = self.usage(int(msg["job"]))
                elif msg["op"] == "calibrate":
                    reply = {"ok": True, "speed_factor": calibrate(2)}
                else:
                    reply = {"ok": False, "error": f"unknown op {msg['op']!r}"}
            except Exception as e:  # one bad request must not take the server (and every running job) down
                reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            finally:
                for fd in fds:
                    os.close(fd)
            self.reap()
            self.sock.sendall(json.dumps(reply).encode())
        for job in list(self.jobs):
            self.end(job)
        for cg in self.groups.values():
            cg.drain(reap=self.reap)
            cg.remove()
        self.pool.close()
        if self.helper is not None:
            self.helper.close()


#: The nice value of the server and its fork helper where the machine allows it (root): a job's start and end hold
#: the host's request lock, and at the children's priority every wake-up of the server or the helper on a busy
#: machine waited behind running solutions for a time slice, idling the cores this lock kept waiting.
SERVER_NICE = -5


def _address_space() -> int:
    """Bytes of address space this process has mapped (``/proc/self/statm``): what a child forked from it, or from
    the fork helper forked from it earlier, starts with."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def raise_priority() -> int | None:
    """Run this process (and the fork helper it forks) at :data:`SERVER_NICE`, and its scheduler autogroup (its
    session's, where the kernel groups tasks by session) likewise. Returns the nice value it had, which each
    child sets back first thing (:mod:`sandbox._child`; its new session gets an autogroup of its own), or None
    where nothing was raised (not permitted, or already as high)."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    if before <= SERVER_NICE:
        return None
    try:
        os.setpriority(os.PRIO_PROCESS, 0, SERVER_NICE)
    except OSError:
        return None
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(SERVER_NICE))
    except OSError:
        pass
    return before


def collect_unix_garbage() -> None:
    """Start the kernel's unix-socket garbage collector now (closing a unix socket schedules it).

    A socket sent over itself (SCM_RIGHTS) outlives the execution that made it, and with it every descriptor
    it carries: a private ``/tmp`` or ``/dev/shm`` filled to its quota (memory outside every limit once the
    group is replaced), pipes whose buffers stay charged to the uid (the next execution as that uid got 8 KiB
    pipes), descriptors counted in flight for the uid (the next one could not pass any: ``ETOOMANYREFS``). When
    the execution's processes are gone these are garbage, but the collector runs only when some unix socket is
    closed, which a program that uses none never does: the next execution inherited them.
    """
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    a.close()
    b.close()


_FULL_PIPE = 1 << 16
_F_GETPIPE_SZ = 1032


def _wait_for_pipe_buffers(wait_s: float = 1.0) -> bool:
    """Without per-execution uids (no root): wait until a new pipe of this uid gets its full 64 KiB buffer again,
    that is until the collector released the pipe buffers an execution left charged to the uid."""
    deadline = time.monotonic() + wait_s
    delay = 0.0005
    while True:
        r, w = os.pipe()
        try:
            if fcntl.fcntl(w, _F_GETPIPE_SZ) >= _FULL_PIPE:
                return True
        finally:
            os.close(r)
            os.close(w)
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def main(ctl_fd: int) -> None:
    """Run the server on the inherited control socket ``ctl_fd`` until the host closes it."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=ctl_fd)
    sock.set_inheritable(False)  # (nothing the server starts with exec may hold the host's connection)
    _child.prepare_server()
    try:
        _sys.set_child_subreaper()
    except OSError:
        pass
    path = import_path()  # real paths, resolved before probe() pivots into the minimal root
    sys.executable = real_executable()
    child_nice = raise_priority()  # (before the probe makes /proc read-only here)
    try:
        layers, roots = probe()
        factor = calibrate()
    except Exception as e:  # tell the host why, instead of just vanishing
        sock.sendall(json.dumps({"error": f"probing the isolation layers failed: {type(e).__name__}: {e}"}).encode())
        raise
    sys.path[:] = path
    sock.sendall(json.dumps({"ready": True, "layers": layers, "speed_factor": factor, "pid": os.getpid()}).encode())
    server = Server(sock, layers, roots, child_nice)
    server.start_helper()
    server.serve()
