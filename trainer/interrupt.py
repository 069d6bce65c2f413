"""Ctrl-C during training: the first one finishes the step in flight, saves it and stops; a second exits at once.

Why finish the step rather than abandon it: an interrupted step may already have changed the weights (one of its
``mu`` optimizer steps, or half of one), the optimizer moments, the prompt stream and the random generators; a
checkpoint of the step before it would need a copy of all of that taken before every step. Finishing the step
costs at most one step's time and leaves a checkpoint that resumes exactly where the run stopped (``--resume``
continues at the next step, as after any checkpoint).

With several ranks (``torchrun``) every rank sees the terminal's Ctrl-C; the ranks agree after each step (one small
all-gather) so that they stop after the same step and save one checkpoint together.

This module installs a SIGINT handler only around the training loop and only in the main thread; it does not
save anything itself (the loop does) and does not handle SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

from trainer.dist import DistInfo, all_gather_object

__all__ = ["StopRequest"]


class StopRequest:
    """Whether Ctrl-C asked the run to stop after the step in flight; :meth:`install` makes one that listens."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._installed = False

    @classmethod
    def install(cls) -> StopRequest:
        """A request whose SIGINT handler is installed (in the main thread; elsewhere it never fires)."""
        stop = cls()
        if threading.current_thread() is threading.main_thread():  # signals reach only the main thread
            stop._previous = signal.signal(signal.SIGINT, stop._handle)
            stop._installed = True
        return stop

    def uninstall(self) -> None:
        """Put back the SIGINT handler that was there before :meth:`install` (safe to call twice)."""
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def agreed(self, info: DistInfo) -> bool:
        """True when any rank was asked to stop (a collective: every rank calls it after every step)."""
        if not info.enabled:
            return self.requested
        return any(all_gather_object(self.requested, info))

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            sys.stderr.write("\nsecond Ctrl-C: stopping now, without a checkpoint of the step in flight\n")
            self.uninstall()
            raise KeyboardInterrupt
        self.requested = True
        sys.stderr.write(
            "\nCtrl-C: finishing the step in flight, then saving a checkpoint and stopping "
            "(Ctrl-C again to stop at once, without it)\n"
        )
        sys.stderr.flush()
