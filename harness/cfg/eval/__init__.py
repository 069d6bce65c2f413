"""The old import path of the ``eval`` section: an alias of the module that owns it now (``evals.config``).

``from harness.cfg.eval import EvalSection`` keeps working; new code imports from the owner. The owner is found
through the ``grpo_harness.config_sections`` hook (:mod:`harness.cfg._sections`), so harness/ imports nothing from
the evals package.
"""

from typing import Any

from harness.cfg._sections import alias_getattr

__all__: list[str] = []  # every name of the owning module, resolved on access


def __getattr__(name: str) -> Any:
    return alias_getattr("eval")(name)
