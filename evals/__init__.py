"""The held-out checkpoint evaluator: k samples per prompt, scored by the training rewards, pass@k and maj@k.

``evaluate(checkpoint, data, specs=None, k=8, backend="hf")`` is the Python entry point; ``harness eval`` the
command (:mod:`evals.cli`).
"""

from evals.errors import BackendError, ContaminationError, EvalError, ResumeError
from evals.runner import EvalResult, evaluate

__all__ = ["evaluate", "EvalResult", "EvalError", "BackendError", "ContaminationError", "ResumeError"]
