"""The one error hierarchy of grpo-harness.

Every exception the harness raises on purpose derives from :class:`HarnessError`, so callers can catch the
whole family with one ``except``. Bad *model output* is never an exception: it is a :class:`harness.Score`
with a status. These errors are for bad *configuration* and bad *usage* (an unknown reward, a parameter the
plugin does not accept, a config file that does not validate).
"""

from __future__ import annotations

__all__ = [
    "HarnessError",
    "ConfigError",
    "RegistryError",
    "UnknownRewardError",
    "DuplicateRewardError",
    "RewardParameterError",
    "DataError",
    "ScoringError",
]


class HarnessError(Exception):
    """Base class of every error raised on purpose by grpo-harness."""


class ConfigError(HarnessError):
    """A run config (file or object) does not validate. The message names the file and the field path."""


class RegistryError(HarnessError):
    """Something is wrong with reward registration."""


class UnknownRewardError(RegistryError, KeyError):
    """No reward is registered under the requested name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class DuplicateRewardError(RegistryError):
    """Two plugins registered the same reward name; the message names both origins."""


class RewardParameterError(RegistryError, TypeError):
    """A reward was given a parameter it does not accept; the message lists the accepted ones."""


class DataError(HarnessError):
    """Input data cannot be read at all (missing file, unknown format). Single bad rows are not errors."""


class ScoringError(HarnessError):
    """The scoring path itself cannot run (for example, no worker process can be started)."""
