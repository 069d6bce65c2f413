"""Shared setup for the trainer tests: one torch thread (tiny models run faster that way on a shared machine)."""

import torch

torch.set_num_threads(1)
