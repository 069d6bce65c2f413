"""An execution's pipes: :func:`make_pipes` creates them, :class:`Pump` writes the payload and stdin and reads
the outputs up to a cap until the deadline, or until the server dies (a watched descriptor turns readable).

Non-blocking I/O on the host's ends of the pipes, driven by one selector; nothing here knows what the bytes mean.
"""

from __future__ import annotations

import os
import selectors
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Pump", "Stream", "make_pipes"]


@dataclass
class Stream:
    """One pipe read by the host: ``over`` once more than ``cap`` bytes came; only the last ``keep`` are kept."""

    fd: int
    buf: bytearray = field(default_factory=bytearray)
    cap: int = 1 << 20
    keep: int = 1 << 20
    total: int = 0
    done: bool = False
    over: bool = False


class Pump:
    """Pump one execution's pipes until the wanted streams close or the deadline passes."""

    def __init__(self, deadline: float, watch: int = -1, extend: Callable[[], float | None] | None = None) -> None:
        """``watch``: a descriptor (owned from now on) that turns readable when the run is lost (its server died).
        ``extend``: asked when ``deadline`` passes; returns a later deadline, or None when the time is up."""
        self.sel = selectors.DefaultSelector()
        self.deadline = deadline
        self.extend = extend
        self.streams: dict[int, Stream] = {}
        self.writes: dict[int, memoryview] = {}
        self.timed_out = False
        self.lost = False
        self.watch = watch
        if watch >= 0:
            self.sel.register(watch, selectors.EVENT_READ)

    def read(self, fd: int, cap: int, keep: int) -> Stream:
        os.set_blocking(fd, False)
        s = self.streams[fd] = Stream(fd, cap=cap, keep=min(keep, cap))
        self.sel.register(fd, selectors.EVENT_READ)
        return s

    def write(self, fd: int, data: bytes) -> None:
        os.set_blocking(fd, False)
        self.writes[fd] = memoryview(data)
        self.sel.register(fd, selectors.EVENT_WRITE)

    def _close_write(self, fd: int) -> None:
        self.sel.unregister(fd)
        self.writes.pop(fd, None)
        os.close(fd)

    def pump(self, until: list[Stream], total_cap: int) -> None:
        """Run until every stream in ``until`` reached EOF, the output cap is passed, or the deadline."""
        while not all(s.done for s in until):
            left = self.deadline - time.monotonic()
            if left <= 0:
                later = self.extend() if self.extend is not None else None
                if later is not None and later > self.deadline:
                    self.deadline = later
                    continue
                self.timed_out = True
                return
            for key, _ in self.sel.select(min(left, 1.0)):
                fd = key.fd
                if fd == self.watch:
                    self.lost = True
                    return
                if fd in self.writes:
                    try:
                        n = os.write(fd, self.writes[fd][: 1 << 16])
                        self.writes[fd] = self.writes[fd][n:]
                        if not len(self.writes[fd]):
                            self._close_write(fd)
                    except BlockingIOError:
                        pass
                    except OSError:  # the child stopped reading (exited): drop the rest
                        self._close_write(fd)
                    continue
                s = self.streams[fd]
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    s.done = True
                    self.sel.unregister(fd)
                    continue
                s.total += len(chunk)
                s.buf += chunk
                if len(s.buf) > s.keep:
                    del s.buf[: len(s.buf) - s.keep]
                if s.total > s.cap:
                    s.over = True
                    return
            if sum(s.total for s in self.streams.values()) > total_cap:
                for s in self.streams.values():
                    s.over = s.over or s.total > 0
                return

    def close(self) -> None:
        if self.watch >= 0:
            self.sel.unregister(self.watch)
            os.close(self.watch)
            self.watch = -1
        for fd in list(self.writes):
            self._close_write(fd)
        for fd, s in self.streams.items():
            if not s.done:
                self.sel.unregister(fd)
            os.close(fd)
        self.sel.close()


def make_pipes(
    children: list[tuple[str, list[str | None]]], writers: set[str], uids: tuple[int, int]
) -> tuple[list[tuple[str, int, list[int]]], dict[str, int], list[int]]:
    """Create the named pipes; return the children's (role, uid, fds), the host's ends by name, the child ends.

    A child fd spec is ``"<name>:r"``/``"<name>:w"`` (the child's end), ``"rpc"`` (one end of the socket pair
    between solution and judge) or ``None`` (/dev/null). Names in ``writers`` are written by the host.
    """
    names = sorted({f.partition(":")[0] for _, fds in children for f in fds if f})
    pipes: dict[str, tuple[int, int]] = {}
    ours: dict[str, int] = {}
    theirs: list[int] = []
    try:
        for name in names:
            if name == "rpc":
                a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                pipes[name] = (a.detach(), b.detach())
                theirs += pipes[name]
                continue
            r, w = pipes[name] = os.pipe()
            ours[name], child_end = (w, r) if name in writers else (r, w)
            theirs.append(child_end)
    except OSError:
        for fd in list(ours.values()) + theirs:
            os.close(fd)
        raise
    spec = []
    for i, (role, fds) in enumerate(children):
        fd_list = []
        for f in fds:
            name, _, end = (f or "").partition(":")
            if not name:
                fd_list.append(-1)
            elif name == "rpc":
                fd_list.append(pipes[name][i])
            else:
                fd_list.append(pipes[name][0 if end == "r" else 1])
        spec.append((role, uids[i], fd_list))
    return spec, ours, theirs
