"""Shared setup for the trainer tests: one torch thread (tiny models run faster that way on a shared machine).
The helper modules (``_trainer_helpers``, ``_dist_helpers``, ``_dist_ranks``) import by name: this directory is on
pytest's ``pythonpath``."""

import torch

torch.set_num_threads(1)
