"""The one error of the task package: :class:`TaskError`."""

from __future__ import annotations

from harness.errors import HarnessError

__all__ = ["TaskError"]


class TaskError(HarnessError):
    """A task is unknown, malformed, or cannot load its data; the message names the task, the field or the file."""
