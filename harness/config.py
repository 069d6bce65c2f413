"""One pydantic model for a whole run, loaded from YAML or TOML, with errors that name the file and the field.

A run config has the sections ``run``, ``model``, ``data``, ``rewards``, ``trainer``, ``eval`` and ``telemetry``,
and a list of reward ``plugins`` (modules or ``.py`` files, see :mod:`harness.plugins`). Each package owns its
section: ``model``, ``data`` and ``telemetry`` live in :mod:`harness.cfg`; ``trainer`` (``trainer.config``) and
``eval`` (``evals.config``) are plugged in through the ``grpo_harness.config_sections`` entry-point group
(:mod:`harness.cfg._sections`), so this module names neither package. It assembles them, loads files and turns
pydantic's errors into a :class:`ConfigError` such as::

    run.yaml: trainer.num_generations: Input should be greater than or equal to 2 (got 1)

This module does not check what only a model can tell (a tokenizer's vocabulary, say); the trainer does that.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails

from harness.cfg import DataSection, ModelSection, TelemetrySection
from harness.cfg._sections import section_models
from harness.errors import ConfigError
from harness.types import RewardSpec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["RunConfig", "RunSection", "load_config", "dump_config", "absolute_data_paths", "format_validation_error"]


class RunSection(BaseModel):
    """Identity and output place of a run."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(None, description="run id; default: a timestamp")
    output_dir: str = "runs"
    seed: int = 0


class RunConfig(BaseModel):
    """A whole run: what to train, on what, scored by which rewards, evaluated and traced how.

    The sections that other packages own (``trainer``, ``eval``) are validated by their plugged models and read as
    attributes like the others (``cfg.trainer.num_generations``); a missing one gets its defaults, an unknown
    top-level key is an error.
    """

    model_config = ConfigDict(extra="allow")  # only the plugged sections: _plugged_sections rejects anything else

    run: RunSection = Field(default_factory=RunSection)
    model: ModelSection = Field(default_factory=ModelSection)
    data: DataSection = Field(default_factory=DataSection)
    rewards: list[RewardSpec] = Field(default_factory=list)
    telemetry: TelemetrySection = Field(default_factory=TelemetrySection)
    plugins: list[str] = Field(
        default_factory=list,
        description="modules or .py files that register rewards with "
        "@reward (or tasks with @task), imported before the rewards load (in scoring workers too), and .yaml task "
        "files; a relative file path is relative to the config file and saved absolute",
    )

    if TYPE_CHECKING:  # a plugged section; its owner's code annotates the type it knows

        def __getattr__(self, name: str) -> Any: ...

    @model_validator(mode="wrap")
    @classmethod
    def _plugged_sections(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if not isinstance(data, dict):
            return handler(data)
        core = dict(data)
        sections, errors = _validate_sections(core)
        errors += [
            InitErrorDetails(type="extra_forbidden", loc=(key,), input=core.pop(key))
            for key in [k for k in core if k not in cls.model_fields]
        ]
        try:
            inst = handler(core)
        except ValidationError as e:
            errors = _details(e, ()) + errors
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        assert inst.__pydantic_extra__ is not None, "extra='allow' keeps a dict of extras"
        inst.__pydantic_extra__.update(sections)
        return inst

    @field_validator("rewards", mode="before")
    @classmethod
    def _rewards_shorthand(cls, v: Any) -> Any:
        # Accept {"math": 1.0, "format": {"weight": 0.2, "params": {...}}} as well as a list of specs.
        if isinstance(v, dict):
            out = []
            for name, body in v.items():
                if isinstance(body, (int, float)) and not isinstance(body, bool):
                    out.append({"name": name, "weight": body})
                elif isinstance(body, dict):
                    out.append({"name": name, **body})
                elif body is None:
                    out.append({"name": name})
                else:
                    out.append({"name": name, "weight": body})
            return out
        return v

    @field_validator("rewards")
    @classmethod
    def _unique_names(cls, v: list[RewardSpec]) -> list[RewardSpec]:
        names = [s.name for s in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"reward names must be unique, repeated: {', '.join(dup)}")
        return v


def _details(err: ValidationError, prefix: tuple[str, ...]) -> list[InitErrorDetails]:
    """``err``'s errors with ``prefix`` put before each location (to raise them again from the whole config)."""
    return [
        InitErrorDetails(type=e["type"], loc=(*prefix, *e["loc"]), input=e["input"], ctx=e.get("ctx", {}))
        for e in err.errors()
    ]


def _validate_sections(data: dict[str, Any]) -> tuple[dict[str, BaseModel], list[InitErrorDetails]]:
    """Pop every plugged section out of ``data`` and validate it with its model (defaults when absent)."""
    out: dict[str, BaseModel] = {}
    errors: list[InitErrorDetails] = []
    for name, model in section_models().items():
        raw = data.pop(name, None)
        try:
            out[name] = raw if isinstance(raw, model) else model.model_validate({} if raw is None else raw)
        except ValidationError as e:
            errors += _details(e, (name,))
    return out, errors


def format_validation_error(err: ValidationError, source: str) -> str:
    """``source: a.b.c: message (got value)`` for every error pydantic found."""
    lines = []
    for e in err.errors():
        path = ".".join(str(p) for p in e.get("loc", ())) or "<root>"
        msg = e.get("msg", "invalid")
        got = e.get("input")
        got_s = "" if e.get("type") == "missing" else f" (got {json.dumps(got, default=str)[:80]})"
        lines.append(f"{source}: {path}: {msg}{got_s}")
    return "\n".join(lines)


def _read_file(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".toml":
            data = tomllib.loads(text)
        else:
            data = yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'YAML'}: {e}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of sections at the top level, got {type(data).__name__}")
    return data


def load_config(source: str | Path | dict[str, Any], *, overrides: dict[str, Any] | None = None) -> RunConfig:
    """Load and validate a run config from a YAML/TOML file or a dict.

    Raises:
        ConfigError: naming the file, the field path and what was expected.
    """
    if isinstance(source, dict):
        data, label = dict(source), "<config>"
    else:
        path = Path(source)
        data, label = _read_file(path), str(path)
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {dotted}: {p} is not a section")
        node[leaf] = value
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, label)) from None
    return _absolute_paths(cfg, None if isinstance(source, dict) else Path(source).resolve().parent)


def _is_path(spec: str) -> bool:
    return spec.endswith((".py", ".yaml", ".yml")) or "/" in spec or "\\" in spec  # .yaml: a task file


def _absolute_paths(cfg: RunConfig, base: Path | None) -> RunConfig:
    """Plugin files relative to the config file's directory (else the working directory), made absolute."""
    root = base or Path.cwd()
    plugins = [str((root / p).resolve()) if _is_path(p) and not Path(p).is_absolute() else p for p in cfg.plugins]
    return cfg.model_copy(update={"plugins": plugins}) if plugins != cfg.plugins else cfg


def absolute_data_paths(cfg: RunConfig, base: str | Path | None = None) -> RunConfig:
    """``cfg`` with local ``data.train``/``data.heldout`` paths made absolute against ``base`` (default: the working
    directory, which is what they are relative to when a command reads them); ``hf:`` sources and paths that do not
    exist there stay as they are."""
    root = Path(base) if base is not None else Path.cwd()
    update = {}
    for key in ("train", "heldout"):
        value = getattr(cfg.data, key)
        if value and not Path(value).is_absolute() and (root / value).exists():  # not hf:, toy: or a typo
            update[key] = str((root / value).resolve())
    return cfg.model_copy(update={"data": cfg.data.model_copy(update=update)}) if update else cfg


def dump_config(cfg: RunConfig, path: str | Path) -> None:
    """Write ``cfg`` as YAML (the form saved beside a run's checkpoints), with data paths stored absolute so that a
    command run from another directory (``harness eval``'s contamination check) reads the same files."""
    cfg = absolute_data_paths(cfg)
    Path(path).write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
