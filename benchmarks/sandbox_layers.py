"""What each isolation layer adds to one execution: a warm process forks children that apply the layers cumulatively.

Each row forks ``--reps`` children one after the other from this (warm) process, each applying the layers of the
rows above plus its own, then exiting; it prints the wall time per child (fork, setup, exit, reap: what one core
spends, including the kernel's synchronous work) and the difference to the row above. The pid, IPC and
network namespaces are made per execution as the server makes them (``unshare`` before ``fork``, ``setns`` back
after). Teardown the kernel defers to its own workers (network namespaces above all) is not in the per-child
wall time. Rows are measured in interleaved rounds and each keeps its fastest, since other work on the
machine only adds time. Needs root (uid switch,
cgroups, namespaces). The sandbox's own work on top (the judge and solution processes, the pipes, the server's
requests) is what ``sandbox_cpu.py`` shows.

    sudo python benchmarks/sandbox_layers.py [--reps 300]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox import _cgroups, _child, _probe, _sys  # noqa: E402  (after the path above)

LAYERS = [
    "fork + exit",
    "uid of its own",
    "groups (memory, pids, cpu)",
    "rlimits + no_new_privs",
    "Landlock",
    "seccomp",
    "mount ns + private tmpfs",
    "pid ns per execution",
    "IPC ns per execution",
    "network ns per execution",
]


def _child_setup(level: int, cg: _cgroups.JobCgroup | None, plan: _sys.LandlockPlan | None, prog, uid: int) -> None:
    if level >= 2 and cg is not None:
        for fd in cg.join_fds():
            os.write(fd, b"0")
    if level >= 6:
        _sys.unshare(_sys.CLONE_NEWNS)
        _sys.mount(None, "/", None, _sys.MS_REC | _sys.MS_PRIVATE)
        for target, fstype, flags, options in _child.tmpfs_mounts(uid, uid, 64 << 20):
            _sys.mount_raw(fstype, target, fstype, flags, options)
    rules = plan.ruleset(["/tmp", "/dev/shm", "/dev/null"]) if level >= 4 and plan is not None else -1
    if level >= 3:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        resource.setrlimit(resource.RLIMIT_CORE, (1, 1))
    if level >= 1:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    if level >= 3:
        _sys.set_no_new_privs()
    if rules >= 0:
        _sys.landlock_enforce(rules)
    if level >= 5 and prog is not None:
        prog.install()


def _row(level: int, reps: int, cg, plan, prog, home) -> float:
    job_ns = (
        (_sys.CLONE_NEWPID if level >= 7 else 0)
        | (_sys.CLONE_NEWIPC if level >= 8 else 0)
        | (_sys.CLONE_NEWNET if level >= 9 else 0)
    )
    t0 = time.perf_counter()
    for i in range(reps):
        uid = 2_000_000 + 2 * (i % 256)
        if job_ns:
            _sys.unshare(job_ns)
        pid = os.fork()
        if pid == 0:
            try:
                _child_setup(level, cg, plan, prog, uid)
                os._exit(0)
            except BaseException as e:
                os.write(2, f"layer {LAYERS[level]}: {type(e).__name__}: {e}\n".encode())
                os._exit(1)
        if job_ns:
            for fd, nstype in home:
                _sys.setns(fd, nstype)
        _, status = os.waitpid(pid, 0)
        if status:
            raise SystemExit(f"a child of row {LAYERS[level]!r} failed")
    return (time.perf_counter() - t0) * 1000 / reps


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=300, help="children per row and round")
    ap.add_argument("--rounds", type=int, default=5, help="rounds over all rows; each row keeps its fastest")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("needs root: the layers switch uid, make groups and namespaces")
    roots = _cgroups.detect_roots()
    cg = _cgroups.JobCgroup.create(roots, f"sbx-layers-{os.getpid()}", 1 << 30, 128) if roots.has_kill else None
    abi = _sys.landlock_abi()
    plan = _sys.LandlockPlan(_probe.runtime_roots() + list(_probe.SYSTEM_RO), abi) if abi else None
    prog = _sys.SeccompFilter(_sys.seccomp_program()) if _sys.seccomp_supported() else None
    home = _probe.home_namespaces(_sys.CLONE_NEWPID | _sys.CLONE_NEWIPC | _sys.CLONE_NEWNET)
    _sys.unshare(_sys.CLONE_NEWNS)  # (this process's mounts stay the host's; each child makes its own)
    try:
        best = [float("inf")] * len(LAYERS)
        for _ in range(args.rounds):  # (interleaved, fastest round kept: other work on the machine only adds)
            for level in range(len(LAYERS)):
                best[level] = min(best[level], _row(level, args.reps, cg, plan, prog, home))
        previous = 0.0
        print(f"{'layers (cumulative)':36s} {'ms per child':>12s} {'added':>8s}   "
              f"(fastest of {args.rounds} rounds of {args.reps} children)")
        for name, ms in zip(LAYERS, best, strict=True):
            print(f"{name:36s} {ms:12.2f} {ms - previous:+8.2f}")
            previous = ms
    finally:
        if cg is not None:
            cg.drain()
            cg.remove()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
