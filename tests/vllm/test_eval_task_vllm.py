"""Stop strings on the real vLLM engine (the CPU build in ``.venv-vllm``, one process per engine, see conftest):
the evaluator's vllm backend ends a completion at a stop string, cuts the string off and reports ``stop``, on a
random-init tiny model (engine_checks.py) saved once for the module (the engines only read it); the control is the
same sample without the stop. The module's two engines run side by side from its start (``Ahead``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from vllm_envs import Ahead, run_in

CHECKS = Path(__file__).with_name("engine_checks.py")

SCRIPT = r"""
import json, sys
from evals.backends import PromptRequest, SamplingParams
from evals.backends.vllm import VLLMBackend

be = VLLMBackend(sys.argv[1], enforce_eager=True, chat_template=False, dtype="float32")
free_params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=40, seed=0)
for seed in range(50):  # a prompt seed whose sample runs to the limit
    req = PromptRequest("p", "abc:", seed)
    free = be.generate([req], 1, free_params)[0][0]
    if free.finish_reason == "length":
        break
text = free.text
at, stop = next((i, text[i:i + 2]) for i in range(8, len(text) - 1) if text.find(text[i:i + 2]) == i)
cut = be.generate([req], 1, SamplingParams(1.0, 1.0, 40, 0, (stop,)))[0][0]
be.close()
print("RESULT " + json.dumps({"free": [text, free.finish_reason, free.tokens], "stop": stop, "at": at,
                              "cut": [cut.text, cut.finish_reason, cut.tokens]}))
"""


STOP_TEST = "test_vllm_stop_string_cuts_the_text_and_ends_generation"
LONG_TEST = "test_vllm_prompt_longer_than_the_context_is_refused_alone"


def _result(venv: Path, script: str, model: Path) -> dict[str, Any]:
    out = run_in(venv, ["python", "-c", script, str(model)])
    return json.loads(out.split("RESULT ", 1)[1].splitlines()[0])


@pytest.fixture(scope="module")
def ahead(vllm_venv: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Ahead]:
    runs = Ahead.for_module(request)
    if runs.selected:
        model = tmp_path_factory.mktemp("engine") / "model"
        run_in(vllm_venv, ["python", str(CHECKS), "model", "--out", str(model)])  # max_position_embeddings 256
        for name, script in ((STOP_TEST, SCRIPT), (LONG_TEST, LONG_PROMPT_SCRIPT)):
            runs.start(name, {name}, _result, vllm_venv, script, model)
    yield runs
    runs.close()


def test_vllm_stop_string_cuts_the_text_and_ends_generation(ahead: Ahead) -> None:
    r = ahead.get(STOP_TEST)
    text, finish, tokens = r["free"]
    assert finish == "length" and tokens == 40, r  # the control: without the stop string it runs to the limit
    cut_text, cut_finish, cut_tokens = r["cut"]
    assert cut_text == text[: r["at"]] and r["stop"] not in cut_text, r  # the same sample, cut before the stop
    assert cut_finish == "stop" and cut_tokens < 40, r  # and the engine stopped generating there


LONG_PROMPT_SCRIPT = r"""
import json, sys
from evals.backends import PromptRequest, SamplingParams
from evals.backends.vllm import VLLMBackend

be = VLLMBackend(sys.argv[1], enforce_eager=True, chat_template=False, dtype="float32")
limit = be.llm.llm_engine.model_config.max_model_len
params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=6, seed=0)
short = [PromptRequest("a", "abc:", 1), PromptRequest("b", "hello:", 2)]
fits = PromptRequest("fits", "x" * (limit - 1), 3)  # the longest prompt with room for one token
alone = be.generate(short, 2, params)
mixed = be.generate([short[0], PromptRequest("long", "x" * (limit + 40), 4), fits, short[1]], 2, params)
be.close()
rows = lambda gens: [[[g.text, g.finish_reason, g.error] for g in row] for row in gens]
print("RESULT " + json.dumps({"limit": limit, "alone": rows(alone), "mixed": rows(mixed)}))
"""


def test_vllm_prompt_longer_than_the_context_is_refused_alone(ahead: Ahead) -> None:
    """A prompt longer than the engine's context would fail vLLM's whole generate call (a traceback): the backend
    refuses that prompt alone, with the reason, and generates the others exactly as without it."""
    r = ahead.get(LONG_TEST)
    assert r["limit"] == 256, r
    a, long, fits, b = r["mixed"]
    assert [a, b] == r["alone"]  # the other prompts: the same samples as in a call without the long one
    for text, finish, error in long:
        assert (text, finish) == ("", "error") and "prompt of 296 tokens does not fit" in error
        assert "context of 256 tokens" in error
    assert len(fits) == 2 and all(finish != "error" and error is None for _, finish, error in fits), fits
