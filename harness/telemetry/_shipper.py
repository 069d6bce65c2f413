"""OTLP export from a process of its own, so that none of it runs in the training process.

The training process already encodes every finished trace as an OTLP-JSON line for the file store; with a backend
configured, :class:`OtlpShipper` also writes those lines into a pipe. The shipper process (started here, running
:func:`main`) turns each line into the protobuf wire form and hands it to an
:class:`~harness.telemetry._sender.OtlpSender`. The training process thus pays one non-blocking ``write`` per
batch: no protobuf encoding, no sender thread taking the GIL between training steps.

The pipe never blocks training: what the shipper has not read yet waits in a bounded buffer (``max_buffer_bytes``;
beyond it, traces are dropped and counted as ``queue_full``). Lines on the shipper's stdin are OTLP-JSON requests
or ``{"flush": n}``; lines on its stdout are ``{"warning": text}`` (logged here, once per run at most, as the
sender warns once), ``{"flushed": n}`` and, last, ``{"stats": {...}}``. If the shipper process dies, one warning
says so and later traces are counted as not delivered; the file store is written by the training process either
way.

This module does not decide what is traced and does not write the file store.
"""

from __future__ import annotations

import collections
import fcntl
import json
import logging
import os
import select
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from typing import Any

from harness.telemetry._export import OtlpSettings
from harness.telemetry._sender import check_endpoint

__all__ = ["OtlpShipper", "main"]

logger = logging.getLogger("harness.telemetry._export")

_F_SETPIPE_SZ = 1031
_LIVE: weakref.WeakSet[OtlpShipper] = weakref.WeakSet()


def _forget_in_child() -> None:
    """In a forked child (a data loader worker, say): close the inherited end of every shipper's pipe, or the
    shipper would not see the end of its input until that child exits too."""
    for shipper in list(_LIVE):
        shipper._dead = True
        try:
            os.close(shipper._fd)
        except OSError:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


class OtlpShipper:
    """The training-process side: a pipe to a shipper process, and its counters once it has stopped.

    Raises:
        ValueError: for an endpoint that is not a URL the protocol can use.
        OSError: when the shipper process cannot be started (the caller then exports in-process).
    """

    def __init__(
        self,
        settings: OtlpSettings,
        *,
        max_queue_spans: int = 2048,
        max_batch_spans: int = 512,
        schedule_delay_s: float = 1.0,
        retry_after_s: float = 30.0,
        max_buffer_bytes: int = 16 << 20,
    ) -> None:
        check_endpoint(settings)
        self.settings = settings
        self.destination = f"{settings.endpoint} ({settings.protocol})"
        self.sent = self.dropped = self.queue_full = 0
        self._max_buffer = max_buffer_bytes
        self._buf = bytearray()
        self._chunks: collections.deque[list[int]] = collections.deque()  # [bytes not yet written, spans] per offer
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)
        self._flushed = 0
        self._flush_seq = 0
        self._stats: dict[str, int] | None = None
        self._dead = False
        cfg = {
            "settings": {
                "endpoint": settings.endpoint,
                "protocol": settings.protocol,
                "headers": settings.headers,
                "timeout_s": settings.timeout_s,
            },
            "max_queue_spans": max_queue_spans,
            "max_batch_spans": max_batch_spans,
            "schedule_delay_s": schedule_delay_s,
            "retry_after_s": retry_after_s,
        }
        boot = (
            f"import sys; sys.path[:0] = {json.dumps([p for p in sys.path if p])}; "
            f"from harness.telemetry._shipper import main; main({json.dumps(json.dumps(cfg))})"
        )
        # its own session: a Ctrl-C meant for training must not kill it before the last batch is out; it ends
        # when its stdin closes (also when this process dies)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", boot],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None  # both are pipes
        self._stdin, self._stdout = self._proc.stdin, self._proc.stdout
        self._fd = self._stdin.fileno()
        os.set_blocking(self._fd, False)
        try:  # room for about a second of a small model's traces before the buffer here is used
            fcntl.fcntl(self._fd, _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        self._reader = threading.Thread(target=self._read, name="harness-otlp-shipper", daemon=True)
        self._reader.start()
        _LIVE.add(self)

    def offer_lines(self, data: bytes, spans: int) -> None:
        """Queue OTLP-JSON lines (complete, newline-terminated) holding ``spans`` spans; never blocks."""
        with self._lock:
            if self._dead:
                self.dropped += spans
                return
            if len(self._buf) + len(data) > self._max_buffer:
                self.queue_full += spans
                return
            self._buf += data
            self._chunks.append([len(data), spans])
            self._write_some()

    def _write_some(self) -> None:
        while self._buf:
            try:
                n = os.write(self._fd, self._buf)
            except BlockingIOError:
                return
            except OSError as e:
                self._died(f"{type(e).__name__}: {e}")
                return
            del self._buf[:n]
            while n and self._chunks:
                taken = min(n, self._chunks[0][0])
                self._chunks[0][0] -= taken
                n -= taken
                if not self._chunks[0][0]:
                    self._chunks.popleft()

    def _died(self, why: str) -> None:
        if not self._dead:
            self._dead = True
            self.dropped += sum(spans for _, spans in self._chunks)
            self._chunks.clear()
            self._buf.clear()
            logger.warning(
                "the OTLP export process for %s stopped (%s); spans still go to the file store; replay "
                "later with `harness traces push RUN_DIR --endpoint URL`",
                self.destination,
                why,
            )

    def _drain(self, deadline: float) -> bool:
        """Write the whole buffer, waiting for the pipe until ``deadline``; True when it is empty."""
        while self._buf and not self._dead:
            self._write_some()
            left = deadline - time.monotonic()
            if not self._buf or left <= 0:
                break
            self._lock.release()
            try:
                select.select([], [self._fd], [], min(left, 0.5))
            finally:
                self._lock.acquire()
        return not self._buf

    def _read(self) -> None:
        for msg in _objects(self._stdout):
            if "warning" in msg:
                logger.warning("%s", msg["warning"])
            with self._cv:
                if "flushed" in msg:
                    self._flushed = max(self._flushed, int(msg["flushed"]))
                if isinstance(msg.get("stats"), dict):
                    self._stats = {k: int(v) for k, v in msg["stats"].items()}
                self._cv.notify_all()
        with self._cv:
            if self._stats is None and not self._dead and self._proc.poll() not in (None, 0):
                self._died(f"exit status {self._proc.returncode}")
            self._cv.notify_all()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Have everything offered so far sent; True when the shipper confirmed it within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            if self._dead:
                return False
            self._flush_seq += 1
            seq = self._flush_seq
            line = json.dumps({"flush": seq}).encode() + b"\n"
            self._buf += line
            self._chunks.append([len(line), 0])
            if not self._drain(deadline):
                return False
            while self._flushed < seq and not self._dead and self._reader.is_alive():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(left)
            return self._flushed >= seq

    def shutdown(self) -> None:
        """Hand over what is buffered, let the shipper send it (bounded by the request timeout), then stop it."""
        limit = 2 * self.settings.timeout_s + 10
        deadline = time.monotonic() + limit
        with self._lock:
            if not self._drain(deadline):  # the shipper stopped reading: what is left here is not delivered
                self.dropped += sum(spans for _, spans in self._chunks)
                self._chunks.clear()
                self._buf.clear()
        try:
            self._stdin.close()
        except OSError:
            pass
        try:
            self._proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._reader.join(timeout=5)
        if self._stats is not None:
            self.sent += self._stats.get("sent", 0)
            self.dropped += self._stats.get("dropped", 0)
            self.queue_full += self._stats.get("queue_full", 0)
        if self.dropped or self.queue_full:
            logger.info(
                "OTLP export to %s: %d spans sent, %d not delivered, %d dropped by the full queue",
                self.destination,
                self.sent,
                self.dropped,
                self.queue_full,
            )


class _Relay(logging.Handler):
    """In the shipper process: the sender's warnings go to the training process, one JSON line each."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            _emit({"warning": record.getMessage()})


def _objects(lines: Iterable[bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects among ``lines`` (anything else is skipped)."""
    for raw in lines:
        try:
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


def _emit(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main(config: str) -> None:
    """The shipper process: OTLP-JSON lines from stdin to the backend, until stdin closes."""
    from harness.telemetry._sender import OtlpSender  # (already loaded with this module)

    cfg = json.loads(config)
    log = logging.getLogger("harness.telemetry._export")
    log.addHandler(_Relay())
    log.setLevel(logging.WARNING)
    log.propagate = False
    settings = OtlpSettings(**cfg.pop("settings"))
    sender = OtlpSender(settings, **cfg)
    for doc in _objects(sys.stdin.buffer):
        if "flush" in doc:
            sender.flush(2 * settings.timeout_s + 1)
            _emit({"flushed": doc["flush"]})
            continue
        sender.offer_request(doc)
    sender.shutdown()
    _emit({"stats": {"sent": sender.sent, "dropped": sender.dropped, "queue_full": sender.queue_full}})
