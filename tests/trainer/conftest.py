"""Shared setup for the trainer tests: one torch thread (tiny models run faster that way on a shared machine) and
the helper module ``_trainer_helpers`` on the import path."""

import sys
from pathlib import Path

import torch

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

torch.set_num_threads(1)
