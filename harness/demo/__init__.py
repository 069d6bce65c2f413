"""`harness demo`: GRPO training, held-out evaluation of every checkpoint, traces and the report, on a CPU."""

from harness.demo.cli import add_parser
from harness.demo.run import DemoResult, DemoSettings, run_demo, smollm2_float32

__all__ = ["add_parser", "run_demo", "DemoSettings", "DemoResult", "smollm2_float32"]
