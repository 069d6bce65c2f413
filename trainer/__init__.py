"""The GRPO trainer: ``train(config)`` runs the loop of :mod:`trainer.loop`; ``harness train`` calls it.

Importing this package is cheap (torch and transformers load on first use of :func:`train`), so a scoring worker
can import it without paying for them.
"""

from typing import Any

__all__ = ["train", "TrainResult"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from trainer import loop

        return getattr(loop, name)
    raise AttributeError(f"module 'trainer' has no attribute {name!r}")
