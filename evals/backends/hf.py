"""The ``hf`` backend: batched sampling with transformers' ``generate``, deterministic for a fixed seed.

Each generate call takes ``batch_size`` prompts (left-padded) and asks for ``k`` return sequences per prompt, so
one call samples ``batch_size * k`` completions. Before each call the torch RNG is seeded with the first prompt's
seed; with ``batch_size=1`` (the default) a prompt's completions therefore depend only on the run seed and the
prompt id, not on which prompts ran before it, so a resumed evaluation reproduces an uninterrupted one.
Greedy decoding (``temperature == 0``) decodes each prompt once and repeats the completion ``k`` times.

Stop strings (``SamplingParams.stop``) end a sequence once its generated text holds one (:class:`StopInGenerated`;
the other sequences of the batch go on), and the decoded text is cut before the first stop string.

Not covered: tensor parallelism, quantized loading (except what ``from_pretrained`` does on its own).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evals.backends.base import FinishReason, Generation, PromptRequest, SamplingParams, cut_at_stop
from evals.errors import BackendError
from harness.data import render_prompt
from harness.threads import ThreadSetting, apply_threads

__all__ = ["HFBackend", "StopInGenerated"]

log = logging.getLogger(__name__)


class StopInGenerated:
    """A transformers stopping criterion: a sequence is done once the text it generated (not its prompt) contains a
    stop string. Each step decodes only the last few generated tokens of each sequence (a token decodes to at least
    one character, so the longest stop string plus two tokens covers any match that ends at the newest token).

    transformers' own ``StopStringCriteria`` was measured to stop at a stop string that spans the prompt's end and
    the first generated token (prompt ``"12 + 3 ="``, stop ``"=*"``, first token ``"*"``: a one-token completion
    that holds no stop string), and it refuses stop strings the vocabulary cannot end with (``"</s>"`` for a
    character tokenizer); lm-evaluation-harness and the OpenAI API match stop strings in the generated text only.

    Args:
        tokenizer: decodes the generated ids.
        stop: the stop strings.
        prompt_len: the (left-padded) prompt length of the batch: generated tokens start there.
    """

    def __init__(self, tokenizer: Any, stop: Sequence[str], prompt_len: int) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(s for s in stop if s)
        self.prompt_len = prompt_len
        self.lookback = max((len(s) for s in self.stop), default=0) + 2

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        tail = input_ids[:, self.prompt_len :][:, -self.lookback :].tolist()  # (batch, <= lookback)
        texts = self.tokenizer.batch_decode(tail, skip_special_tokens=False)
        done = [any(s in t for s in self.stop) for t in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class HFBackend:
    """Generate with a transformers causal LM loaded from a directory (a checkpoint) or a hub name.

    Args:
        model_path: a directory written by ``save_pretrained`` (or a name ``from_pretrained`` accepts).
        tokenizer_path: where the tokenizer is, when not beside the weights.
        device: ``auto`` (CUDA when available, else CPU), ``cpu``, ``cuda``, ``cuda:1``...
        dtype: ``auto``, ``float32``, ``bfloat16`` or ``float16``.
        batch_size: prompts per generate call.
        chat_template: apply the tokenizer's chat template (when it has one).
        system_prompt: a system message put before each prompt.
        gguf_file: a GGUF file inside ``model_path`` (dequantized on load; needs the gguf package).
        threads: CPU threads for torch, or ``auto`` (see :mod:`harness.threads`).
    """

    name = "hf"

    def __init__(
        self,
        model_path: str | Path,
        *,
        tokenizer_path: str | Path | None = None,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 1,
        chat_template: bool = True,
        system_prompt: str | None = None,
        gguf_file: str | None = None,
        threads: ThreadSetting = "auto",
    ) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model_path = str(model_path)
        self.batch_size = max(1, int(batch_size))
        self.chat_template = chat_template
        self.system_prompt = system_prompt
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = device
        kw: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
        torch_dtype = "auto" if dtype == "auto" else getattr(torch, dtype)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path or model_path), **kw)
            self.model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch_dtype, **kw)
        except (OSError, ValueError) as e:
            raise BackendError(f"hf backend: cannot load model/tokenizer from {self.model_path}: {e}") from None
        self.model.to(device).eval()  # type: ignore[arg-type]  # transformers' typed .to() wrapper drops `self`
        apply_threads(threads, self.model, device, what="eval.threads")
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self._eos = self._eos_ids()

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for src in (self.model.generation_config.eos_token_id, self.tokenizer.eos_token_id):
            if isinstance(src, int):
                ids.add(src)
            elif src:
                ids.update(int(x) for x in src)
        return ids

    def render(self, request: PromptRequest) -> str:
        """The prompt text given to the model (chat template applied when enabled and available)."""
        return render_prompt(
            request.prompt, self.tokenizer, chat_template=self.chat_template, system_prompt=self.system_prompt
        )

    def generate(self, requests: Sequence[PromptRequest], k: int, params: SamplingParams) -> list[list[Generation]]:
        """``k`` completions per request, ``batch_size`` requests per generate call."""
        out: list[list[Generation]] = []
        for i in range(0, len(requests), self.batch_size):
            out.extend(self._generate_batch(list(requests[i : i + self.batch_size]), k, params))
        return out

    def _generate_batch(self, batch: list[PromptRequest], k: int, params: SamplingParams) -> list[list[Generation]]:
        import torch

        texts = [self.render(r) for r in batch]
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        sample = params.temperature > 0
        per_prompt = k if sample else 1  # greedy: one decode per prompt, repeated k times
        gen_kw: dict[str, Any] = {
            "do_sample": sample,
            "max_new_tokens": params.max_new_tokens,
            "num_return_sequences": per_prompt,
            "pad_token_id": self.tokenizer.pad_token_id,
        }
        if params.stop:  # each sequence ends once its generated text holds a stop string
            gen_kw["stopping_criteria"] = [StopInGenerated(self.tokenizer, params.stop, enc["input_ids"].shape[1])]
        if sample:
            gen_kw.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
        else:
            gen_kw.update(temperature=None, top_p=None, top_k=None)
        torch.manual_seed(batch[0].seed)
        with torch.inference_mode():
            seqs = self.model.generate(**enc, **gen_kw)
        new = seqs[:, enc["input_ids"].shape[1] :].tolist()  # (len(batch) * per_prompt, <= max_new_tokens)
        gens = [self._to_generation(row, params.max_new_tokens, params.stop) for row in new]
        if not sample:
            return [[gens[j]] * k for j in range(len(batch))]
        return [gens[j * k : (j + 1) * k] for j in range(len(batch))]

    def _to_generation(self, row: list[int], limit: int, stop: Sequence[str] = ()) -> Generation:
        pad = self.tokenizer.pad_token_id
        for n, tok in enumerate(row):
            if tok in self._eos:
                return Generation(cut_at_stop(self._decode(row[:n]), stop)[0], "stop", n + 1)
        while row and row[-1] == pad and pad not in self._eos:
            row = row[:-1]
        text, hit = cut_at_stop(self._decode(row), stop)  # the stop string and what its last token ran past go
        reason: FinishReason = "length" if len(row) >= limit and not hit else "stop"
        return Generation(text, reason, len(row))

    def _decode(self, ids: list[int]) -> str:
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        return text if isinstance(text, str) else "".join(text)  # one sequence of ids decodes to one string

    def describe(self) -> dict[str, Any]:
        """Model path, device, dtype, batch size and chat settings."""
        return {
            "backend": self.name,
            "model": self.model_path,
            "device": self.device,
            "dtype": str(next(self.model.parameters()).dtype).replace("torch.", ""),
            "batch_size": self.batch_size,
            "chat_template": bool(self.chat_template and getattr(self.tokenizer, "chat_template", None)),
            "system_prompt": self.system_prompt,
        }

    def close(self) -> None:
        """Drop the model (frees GPU memory when there is one)."""
        self.model = None  # type: ignore[assignment]  # dropped to free memory; nothing uses it after close()
