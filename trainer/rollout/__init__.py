"""Rollout backends behind one interface: transformers (:class:`HFRollout`) and vLLM (``trainer.rollout.vllm``,
imported only when selected)."""

from trainer.rollout.base import Rollout, RolloutBatch, SamplingConfig
from trainer.rollout.hf import HFRollout

__all__ = ["Rollout", "RolloutBatch", "SamplingConfig", "HFRollout"]
