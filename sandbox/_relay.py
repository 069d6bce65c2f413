"""One sandbox server per node: a relay that lets the node's scoring worker processes share one warm server.

A process that hosts the node's sandbox (the Ray backend's sandbox host actor) runs a :class:`RelayServer` on a
unix socket in a fresh ``0700`` directory; each scoring worker on the node finds the socket's path in the
``GRPO_HARNESS_SANDBOX_RELAY`` environment variable, and :func:`sandbox.get_sandbox` then gives it a
:class:`RelaySandbox`, which forwards ``isolation``, ``run_program`` and ``run_tests`` (arguments, results and the
exceptions they raise, pickled) to the host's own :class:`~sandbox.Sandbox`, a thread per worker connection. So one
server, one isolation report and one set of slots serve the whole node; a relay that cannot be reached (its host
died with its node) is a :class:`SandboxError`, which the code reward scores ``sandbox_error`` (unscored). A host that
dies on a live node is started again at the same socket path (:class:`RelayServer`'s ``path``), and a worker's next
call reconnects there.

Pickle is used only between the host and the node's scoring workers, which run the same trusted plugin code as the
host; untrusted code never reaches the socket (it runs in the sandbox's own namespaces, as other uids, without the
directory). This module does not isolate anything (the server does) and starts no server of its own.
"""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import stat
import struct
import tempfile
import threading
from typing import Any

from sandbox._results import IsolationReport, Limits, ProgramResult, SandboxError, TestsResult

__all__ = ["RELAY_ENV", "RelayServer", "RelaySandbox", "relay_client"]

#: The environment variable that points a scoring worker at its node's relay socket.
RELAY_ENV = "GRPO_HARNESS_SANDBOX_RELAY"
_METHODS = ("isolation", "run_program", "run_tests")
_HEADER = struct.Struct("!Q")


def _send(sock: socket.socket, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    sock.sendall(_HEADER.pack(len(data)) + data)


def _exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("relay connection closed")
        buf += chunk
    return bytes(buf)


def _recv(sock: socket.socket) -> Any:
    (n,) = _HEADER.unpack(_exact(sock, _HEADER.size))
    return pickle.loads(_exact(sock, n))


def _own_private_dir(path: str) -> str:
    """``path``, a directory of this uid with mode 0700 (made when missing), where a relay socket may be bound.

    Raises:
        SandboxError: it is a link, someone else's, or open to others (whoever can write there can answer the
            node's workers in the host's place).
    """
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise SandboxError(f"the sandbox relay's directory {path} is not a private directory of this user")
    return path


class RelayServer:
    """Serve ``target``'s ``isolation``, ``run_program`` and ``run_tests`` on a private unix socket (see above).

    ``path``: where to listen; default a new socket in a fresh ``0700`` directory. A host started again in place of
    one that died passes the dead one's path: the node's workers keep the path they were given and reconnect there.
    """

    def __init__(self, target: Any, path: str | None = None) -> None:
        self._target = target
        if path is None:
            self._dir = tempfile.mkdtemp(prefix="grpo-harness-sandbox-")  # mode 0700
            self.path = os.path.join(self._dir, "relay.sock")
        else:
            self._dir, self.path = _own_private_dir(os.path.dirname(path)), path
            try:
                os.unlink(path)  # the dead host's socket file: nothing listens on it
            except FileNotFoundError:
                pass
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.path)
        self._sock.listen(128)
        self._closed = False
        threading.Thread(target=self._accept, name="grpo-harness-sandbox-relay", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="grpo-harness-sandbox-client", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    method, args, kwargs = _recv(conn)
                except (EOFError, OSError, pickle.UnpicklingError, ValueError):
                    return
                try:
                    if method not in _METHODS:
                        raise SandboxError(f"the sandbox relay has no method {method!r}")
                    reply: tuple[str, Any] = ("ok", getattr(self._target, method)(*args, **kwargs))
                except Exception as e:  # noqa: BLE001 - the caller raises it again on its side
                    reply = ("err", e)
                try:
                    try:
                        _send(conn, reply)
                    except (pickle.PicklingError, TypeError, AttributeError) as e:
                        _send(conn, ("err", SandboxError(f"the sandbox relay could not send its reply: {e}")))
                except OSError:  # the worker was killed at its limit while this ran: nothing to answer
                    return

    def close(self) -> None:
        """Stop accepting and remove the socket (connections in use end when their workers go)."""
        self._closed = True
        try:
            self._sock.close()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)


class RelaySandbox:
    """A scoring worker's sandbox when its node shares one: the same three calls, answered by the node's host."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """One request and its reply. A connection made by an earlier call that fails is tried once more on a new
        one: the host may have been started again since (the driver restarts a dead one at the same path)."""
        with self._lock:
            for again in (False, True):
                fresh = self._sock is None
                try:
                    if self._sock is None:
                        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        self._sock.connect(self.path)
                    _send(self._sock, (method, args, kwargs))
                    status, value = _recv(self._sock)
                    break
                except (OSError, EOFError, pickle.UnpicklingError) as e:
                    if self._sock is not None:
                        self._sock.close()
                        self._sock = None
                    if fresh or again or isinstance(e, pickle.UnpicklingError):
                        raise SandboxError(f"this node's sandbox server cannot be reached ({self.path}): {e}") from None
        if status == "err":
            raise value
        return value

    def isolation(self) -> IsolationReport:
        """The isolation report of the node's server."""
        return self._call("isolation")

    def run_program(self, code: str, stdin: str | bytes = b"", limits: Limits | None = None) -> ProgramResult:
        """:meth:`sandbox.Sandbox.run_program` on the node's server."""
        return self._call("run_program", code, stdin, limits)

    def run_tests(
        self, code: str, tests: str, entry_point: str | None = None, partial: bool = False, limits: Limits | None = None
    ) -> TestsResult:
        """:meth:`sandbox.Sandbox.run_tests` on the node's server."""
        return self._call("run_tests", code, tests, entry_point, partial, limits)

    def close(self) -> None:
        """Close this worker's connection (the node's server keeps running)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None


_CLIENT: RelaySandbox | None = None


def relay_client(path: str) -> RelaySandbox:
    """This process's client of the relay at ``path`` (a forked child makes its own connection)."""
    global _CLIENT
    if _CLIENT is None or _CLIENT.path != path or _CLIENT._pid != os.getpid():
        _CLIENT = RelaySandbox(path)
    return _CLIENT
