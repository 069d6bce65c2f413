"""Network and IPC namespaces of a slot, reused by its next execution when nothing of the last one is left in them.

Every execution runs in network and IPC namespaces that no other live execution shares. Making them new for each
execution cost about a twentieth of its CPU time, and as much again in the kernel's workers that tear them down.
What an execution can leave in them is small and checked: in a network namespace without interfaces, where
every socket family but ``AF_UNIX`` is refused, only unix sockets (a socket sent over itself outlives its
execution until the kernel's collector frees it, and keeps its abstract name); in an IPC namespace nothing at
all, since every System V and POSIX message queue call is refused by seccomp. So after each execution (its
processes gone, the collector run) the slot keeps its namespaces when ``/proc/self/net/unix`` read inside the
network namespace lists no socket, and the next execution in that slot enters them; otherwise they are dropped
and the next execution gets new ones. Without seccomp the IPC namespace is new for every execution.

This module only enters, checks and keeps namespaces; :mod:`sandbox._zygote` decides when.
"""

from __future__ import annotations

import os

from sandbox import _sys

__all__ = ["NamespacePool"]

_NAMES = {_sys.CLONE_NEWNET: "net", _sys.CLONE_NEWIPC: "ipc"}


class NamespacePool:
    """Per slot, the network (and IPC) namespaces of its last execution, kept while they hold nothing."""

    def __init__(self, flags: int, reuse_ipc: bool, home: list[tuple[int, int]]) -> None:
        """``flags``: the per-execution namespaces among network and IPC; ``home``: the server's own (fd, type)."""
        self.pooled = flags & (_sys.CLONE_NEWNET | (_sys.CLONE_NEWIPC if reuse_ipc else 0))
        self.fresh = flags & (_sys.CLONE_NEWNET | _sys.CLONE_NEWIPC) & ~self.pooled
        self.home_net = next((fd for fd, t in home if t == _sys.CLONE_NEWNET), -1)
        self.kept: dict[int, list[tuple[int, int]]] = {}
        self.reused = 0

    def enter(self, slot: int) -> list[tuple[int, int]]:
        """Enter the namespaces for the slot's next execution (its kept ones, or new ones); returns their fds."""
        if self.fresh:
            _sys.unshare(self.fresh)
        if not self.pooled:
            return []
        kept = self.kept.pop(slot, None)
        if kept is not None:
            for fd, nstype in kept:
                _sys.setns(fd, nstype)
            self.reused += 1
            return kept
        _sys.unshare(self.pooled)
        return [
            (os.open(f"/proc/self/ns/{name}", os.O_RDONLY | os.O_CLOEXEC), t)
            for t, name in _NAMES.items()
            if self.pooled & t
        ]

    def release(self, slot: int, fds: list[tuple[int, int]]) -> None:
        """After the slot's execution ended (its processes gone): keep its namespaces when they hold nothing."""
        if fds and self._empty(fds):
            self.kept[slot] = fds
            return
        for fd, _ in fds:
            os.close(fd)

    def _empty(self, fds: list[tuple[int, int]]) -> bool:
        net = next((fd for fd, t in fds if t == _sys.CLONE_NEWNET), -1)
        if net < 0 or self.home_net < 0:
            return net < 0
        _sys.setns(net, _sys.CLONE_NEWNET)
        try:
            with open("/proc/self/net/unix", "rb") as f:
                listed = f.read().count(b"\n")
        except OSError:
            listed = 2
        finally:
            _sys.setns(self.home_net, _sys.CLONE_NEWNET)
        return listed <= 1  # (the header line only)

    def close(self) -> None:
        for fds in self.kept.values():
            for fd, _ in fds:
                os.close(fd)
        self.kept.clear()
