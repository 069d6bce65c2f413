"""The model and data sections of a run config (shared by the trainer and the evaluator)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["ModelSection", "DataSection", "FieldMap"]


class ModelSection(BaseModel):
    """Which model to train or evaluate and how to load it."""

    model_config = ConfigDict(extra="forbid")

    name_or_path: str = Field("", description="a local directory or hub name for from_pretrained")
    gguf_file: str | None = Field(None, description="a GGUF file inside name_or_path (needs the gguf package)")
    tokenizer: str | None = Field(None, description="tokenizer path when it differs from the model's")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    trust_remote_code: bool = False


class FieldMap(BaseModel):
    """Which dataset columns hold the prompt, the gold answer, the tests and the id."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = "id"
    prompt: str = "prompt"
    answer: str | None = "answer"
    tests: str | None = "tests"
    messages: str | None = Field(None, description="a column of chat messages used instead of prompt")


class DataSection(BaseModel):
    """Where training and held-out prompts come from."""

    model_config = ConfigDict(extra="forbid")

    task: str | None = Field(
        None,
        description="a named task (harness tasks list): its train split trains, its test split is held out, its "
        "rewards apply when rewards: is empty; data.train / data.heldout then name files in the task's schema",
    )
    train: str | None = Field(None, description="JSONL, Parquet or hf:NAME[:CONFIG]:SPLIT")
    heldout: str | None = Field(None, description="held-out prompts for checkpoint evaluation")
    fields: FieldMap = Field(default_factory=FieldMap)
    chat_template: bool = True
    system_prompt: str | None = None

    @field_validator("task")
    @classmethod
    def _task_name(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or any(c.isspace() for c in v)):
            raise ValueError(f"expected one task name (see `harness tasks list`), got {v!r}")
        return v
