"""The old import path of the ``trainer`` section: an alias of the module that owns it now (``trainer.config``).

``from harness.cfg.trainer import TrainerSection`` keeps working; new code imports from the owner. The owner is found
through the ``grpo_harness.config_sections`` hook (:mod:`harness.cfg._sections`), so harness/ imports nothing from
the trainer package.
"""

from typing import Any

from harness.cfg._sections import alias_getattr

__all__: list[str] = []  # every name of the owning module, resolved on access


def __getattr__(name: str) -> Any:
    return alias_getattr("trainer")(name)
