"""An example third-party reward plugin for grpo-harness; the reward is registered through an entry point."""

from grpo_harness_example_plugin.rewards import keyword_bonus

__all__ = ["keyword_bonus"]
