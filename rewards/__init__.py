"""Built-in reward plugins, each registered by name: format rewards, length shaping, math, code.

Importing this package registers nothing by itself: :mod:`harness.registry` imports the reward modules on
first lookup. Adapters for other trainers live in :mod:`rewards.adapters`.
"""

__all__: list[str] = []
