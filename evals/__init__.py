"""The held-out checkpoint evaluator: k samples per prompt, scored by the training rewards, pass@k and maj@k.

``evaluate(checkpoint, data, specs=None, k=8, backend="hf")`` is the Python entry point; ``harness eval`` the
command (:mod:`evals.cli`). ``evaluate_task(get_task("gsm8k"), checkpoint, TaskOverrides(num_fewshot=5))`` evaluates
on a named task (:mod:`evals.task_run`).
"""

from evals.errors import BackendError, ContaminationError, EvalError, ResumeError
from evals.runner import EvalResult, evaluate
from evals.task_run import TaskEvaluation, TaskOverrides, evaluate_task

__all__ = [
    "evaluate",
    "EvalResult",
    "evaluate_task",
    "TaskOverrides",
    "TaskEvaluation",
    "EvalError",
    "BackendError",
    "ContaminationError",
    "ResumeError",
]
