"""The verl adapter under verl 0.9.1's own reward-manager code, not a re-implementation of its contract.

What runs is verl's: ``load_reward_manager`` and ``get_custom_reward_fn`` (how the trainer finds
``reward.custom_reward_function``), the reward-loop managers 0.9.1's trainer uses (``naive``, ``dapo``, ``gdpo``,
``rate_limited``: ``run_single`` and ``assemble_rm_scores``), the legacy ``batch`` and ``prime`` managers, and
``main_eval.process_item``. The config is verl's own generated trainer config with only the reward keys set, the
batch a real ``DataProto`` of token ids that a real character-level tokenizer (built here, nothing downloaded)
decodes, and the reward the real ``math`` reward in the scoring path's worker processes.

Stand-ins, only for what is not installed (verl is installed without its dependencies) and not on the reward path:
* ``ray``: ``verl.protocol`` imports it (for ``DataProtoFuture``), ``main_eval`` decorates ``process_item`` with
  ``ray.remote`` and the managers' ``remote.py`` a class; nothing here starts Ray. The stand-in has ``ObjectRef``
  and a ``remote`` that returns what it decorates, so ``process_item`` is called directly as a Ray task runs it.
* ``hydra``: ``main_eval`` decorates its command-line ``main`` with ``hydra.main``; ``process_item`` does not use
  it (hydra-core would pin an older antlr4 than math-verify's).
* the body of the ``verl.experimental.reward_loop`` package, which imports the Ray reward-loop actors and the
  rollout servers: the package is registered with its real path without running its ``__init__``, so its
  ``reward_manager`` subpackage (the managers, unchanged) imports.
The real packages are used where they are installed. The tests that need verl skip only if it cannot be imported.

Regressions, each failing on the adapter before module-level callables (checked by running this file against that
code): the batch form under 0.9.1's managers (a missing positional arguments error), the ``prime`` manager (the
closure did not pickle, so every reward became 0.0) and ``main_eval`` (``np.mean`` over dicts raised).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import pickle
import re
import shlex
import sys
import types
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import rewards.adapters.verl as verl_adapter
from rewards.adapters import as_verl_batch_compute_score, as_verl_compute_score

# (solution, ground truth, expected score, expected "scored"): the math reward on three kinds of rows
ROWS = [
    ("so the answer is \\boxed{4}", "4", 1.0, 1.0),
    ("\\boxed{5}", "4", 0.0, 1.0),
    ("\\boxed{7}", "", 0.0, 0.0),  # no gold: unscored, verl gets unscored_value and scored 0.0
]


def _stand_in(name: str, **attrs: Any) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__dict__.update(attrs)
    mod.__grpo_harness_stand_in__ = True  # type: ignore[attr-defined]
    return mod


def _remote(fn: Any = None, **_: Any) -> Any:
    """``ray.remote`` and ``ray.remote(num_cpus=...)``: the function or class itself, nothing is started."""
    return fn if fn is not None else (lambda f: f)


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


@contextlib.contextmanager
def _verl_importable() -> Iterator[None]:
    """Stand-ins for ray and hydra where they are missing; on exit they and the verl modules bound to them go.

    Other modules imported meanwhile (torch, tensordict, transformers) stay: an extension module cannot be
    imported twice in one process.
    """
    before = set(sys.modules)
    added: dict[str, types.ModuleType] = {}
    if not _installed("ray"):
        added["ray"] = _stand_in("ray", ObjectRef=type("ObjectRef", (), {}), remote=_remote)
    if not _installed("hydra"):
        added["hydra"] = _stand_in("hydra", main=lambda **_: lambda fn: fn)
    sys.modules.update(added)
    try:
        yield
    finally:
        for name in set(sys.modules) - before:
            if name.split(".")[0] in ("verl", "ray", "hydra"):
                del sys.modules[name]


def _import_reward_loop_managers() -> None:
    """verl's reward-loop managers; the package ``__init__`` above them is skipped if it cannot import."""
    try:
        importlib.import_module("verl.experimental.reward_loop")
    except ImportError:
        experimental = importlib.import_module("verl.experimental")
        pkg = _stand_in("verl.experimental.reward_loop")
        pkg.__path__ = [str(Path(experimental.__path__[0]) / "reward_loop")]
        sys.modules[pkg.__name__] = pkg
    importlib.import_module("verl.experimental.reward_loop.reward_manager")


@pytest.fixture(scope="module")
def verl() -> Iterator[types.SimpleNamespace]:
    with _verl_importable():
        try:
            import verl as verl_pkg
            from verl.protocol import DataProto
            from verl.trainer.ppo import reward as reward_mod
        except ImportError as e:
            pytest.skip(f"verl is not importable: {e}")
        _import_reward_loop_managers()
        from verl.workers.reward_manager.batch import BatchRewardManager
        from verl.workers.reward_manager.prime import PrimeRewardManager

        root = Path(verl_pkg.__file__).parent
        yield types.SimpleNamespace(
            version=getattr(verl_pkg, "__version__", "?"),
            root=root,
            DataProto=DataProto,
            load_reward_manager=reward_mod.load_reward_manager,
            get_custom_reward_fn=reward_mod.get_custom_reward_fn,
            BatchRewardManager=BatchRewardManager,
            PrimeRewardManager=PrimeRewardManager,
            main_eval=importlib.import_module("verl.trainer.main_eval"),
        )


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory):
    """A real character-level fast tokenizer; ``<pad>`` is special, so ``skip_special_tokens`` drops padding."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<eos>", "<unk>"]
    vocab = {t: i for i, t in enumerate(specials + [chr(c) for c in range(32, 127)])}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    path = tmp_path_factory.mktemp("tok")
    fast.save_pretrained(str(path))
    return PreTrainedTokenizerFast.from_pretrained(str(path))


def _batch(verl: types.SimpleNamespace, tok: Any, suffix: str = "") -> Any:
    """A DataProto as verl's rollout leaves it: left-padded prompts, right-padded responses, one mask over both.

    ``suffix`` is appended to every response, so a test can score texts no other test has put in the cache.
    """
    import torch

    prompts = [tok.encode(f"what is 2+2? ({i})") for i in range(len(ROWS))]
    responses = [tok.encode(sol + suffix) for sol, *_ in ROWS]
    p_len, r_len = max(map(len, prompts)), max(map(len, responses)) + 3
    pad = tok.pad_token_id
    p_ids = torch.tensor([[pad] * (p_len - len(p)) + p for p in prompts])
    r_ids = torch.tensor([r + [pad] * (r_len - len(r)) for r in responses])
    mask = torch.cat([(p_ids != pad).long(), (r_ids != pad).long()], dim=1)
    non_tensors = {
        "data_source": np.array(["openai/gsm8k"] * len(ROWS), dtype=object),
        "reward_model": np.array([{"style": "rule", "ground_truth": gt} for _, gt, *_ in ROWS], dtype=object),
        "extra_info": np.array([{"index": i, "split": "train"} for i in range(len(ROWS))], dtype=object),
    }
    tensors = {"prompts": p_ids, "responses": r_ids, "attention_mask": mask, "input_ids": torch.cat([p_ids, r_ids], 1)}
    return verl.DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def _reward_file(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "my_reward.py"
    path.write_text("from rewards.adapters.verl import as_verl_compute_score, as_verl_batch_compute_score\n" + source)
    return path


def _trainer_config(verl: types.SimpleNamespace, path: Path, manager: str = "naive") -> Any:
    """verl's own generated PPO trainer config with the keys the docs/ADAPTERS.md recipe sets."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.load(verl.root / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    cfg.reward.custom_reward_function.path = str(path)
    cfg.reward.custom_reward_function.name = "compute_score"
    cfg.reward.reward_manager.name = manager
    return cfg


def _run_reward_loop(manager: Any, data: Any) -> list[dict]:
    """What 0.9.1's ``RewardLoopWorker.compute_score_batch`` does: ``run_single`` per item, concurrently."""

    async def gather() -> list[dict]:
        return await asyncio.gather(*(manager.run_single(data[i : i + 1]) for i in range(len(data))))

    return manager.loop.run_until_complete(gather())


def _last_token_scores(reward_tensor: Any, data: Any) -> list[float]:
    """The score on each response's last valid token, after checking every other position is 0."""
    r_len = data.batch["responses"].shape[1]
    lengths = data.batch["attention_mask"][:, -r_len:].sum(dim=1).tolist()
    out = []
    for row, n in zip(reward_tensor.tolist(), lengths, strict=True):
        assert row[: n - 1] == [0.0] * (n - 1) and row[n:] == [0.0] * (r_len - n), row
        out.append(row[n - 1])
    return out


# --- verl 0.9.1's trainer: reward.custom_reward_function + a reward-loop manager ---------------------------------


@pytest.mark.parametrize("manager_name", ["naive", "dapo", "gdpo", "rate_limited"])
@pytest.mark.parametrize("form", ["as_verl_compute_score", "as_verl_batch_compute_score"])
def test_trainer_reward_managers_score_through_the_adapter(
    verl: types.SimpleNamespace, tokenizer: Any, tmp_path: Path, manager_name: str, form: str
) -> None:
    path = _reward_file(tmp_path, f"compute_score = {form}('math', timeout=60)\n")
    manager = verl.load_reward_manager(_trainer_config(verl, path, manager_name), tokenizer)
    assert manager.compute_score.args[0].__name__ == "math"  # verl loaded our function, not its default scorer
    data = _batch(verl, tokenizer)
    results = _run_reward_loop(manager, data)

    assert [r["reward_score"] for r in results] == [score for *_, score, _ in ROWS]
    assert [r["reward_extra_info"]["scored"] for r in results] == [scored for *_, scored in ROWS]
    rm_scores = manager.assemble_rm_scores(data, [r["reward_score"] for r in results])
    assert _last_token_scores(rm_scores, data) == [score for *_, score, _ in ROWS]


def _readme_block(marker: str, lang: str) -> str:
    """The one ``lang`` block of the adapters page (the README links to it) that contains ``marker``."""
    text = (Path(__file__).parents[2] / "docs" / "ADAPTERS.md").read_text()
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)
    (block,) = [b for b in blocks if marker in b]
    return block


def _overrides(command: str, reward_file: Path) -> dict[str, str]:
    """``key=value`` pairs of a README command line, ``$PWD/my_reward.py`` pointing at ``reward_file``."""
    tokens = shlex.split(command.replace("\\\n", " ").replace("$PWD/my_reward.py", str(reward_file)))
    return dict(t.split("=", 1) for t in tokens if "=" in t)


def test_readme_recipe_keys_exist_and_load_the_function(verl: types.SimpleNamespace, tmp_path: Path) -> None:
    """Every key of the README's main_ppo and main_eval commands is one verl 0.9.1's configs define (or adds
    with ``+``), and the README's reward file, loaded through those keys, is our function."""
    from omegaconf import OmegaConf

    reward_file = tmp_path / "my_reward.py"
    reward_file.write_text(_readme_block("compute_score = as_verl_compute_score", "python"))
    commands = (("verl.trainer.main_ppo", "_generated_ppo_trainer.yaml"), ("main_eval", "evaluation.yaml"))
    for marker, config_name in commands:
        cfg = OmegaConf.load(verl.root / "trainer" / "config" / config_name)
        overrides = _overrides(_readme_block(marker, "bash"), reward_file)
        assert any(k.lstrip("+") == "reward.custom_reward_function.path" for k in overrides)
        for key, value in overrides.items():
            parent, _, leaf = key.lstrip("+").rpartition(".")
            node = OmegaConf.select(cfg, parent, throw_on_missing=False) if parent else cfg
            if key.startswith("+"):
                assert node is None or leaf not in node.keys(), f"{key}: already in verl's {config_name}, drop the +"
            else:
                # keys(), not ``in node``: a mandatory "???" key such as rollout.name is "not in" a DictConfig
                assert node is not None and leaf in node.keys(), f"{key}: not a key of verl's {config_name}"
            OmegaConf.update(cfg, key.lstrip("+"), value, force_add=key.startswith("+"))
        fn = verl.get_custom_reward_fn(cfg)
        assert fn is not None and fn.args[0].__name__ == "math"
        got = fn(data_source="openai/gsm8k", solution_str="#### 72", ground_truth="72")
        assert got == {"score": 1.0, "scored": 1.0}


def test_the_old_top_level_key_is_not_read_by_the_trainer(verl: types.SimpleNamespace, tmp_path: Path) -> None:
    """Why the README names ``reward.custom_reward_function``: verl 0.9.1's trainer ignores the old key."""
    path = _reward_file(tmp_path, "compute_score = as_verl_compute_score('math')\n")
    cfg = _trainer_config(verl, path)
    assert verl.get_custom_reward_fn(cfg).args[0].__name__ == "math"
    cfg.custom_reward_function.path, cfg.custom_reward_function.name = str(path), "compute_score"
    cfg.reward.custom_reward_function.path = None
    assert verl.get_custom_reward_fn(cfg) is None  # verl would fall back to its own scorer, silently


# --- verl's legacy managers: batch and prime ----------------------------------------------------------------------


def test_legacy_batch_manager_scores_a_batch_in_one_call(
    verl: types.SimpleNamespace, tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions: list[int] = []

    class CountingSession(verl_adapter.ScoringSession):  # the real session, counting how many batches reach it
        def score(self, samples, completions):  # type: ignore[no-untyped-def]
            sessions.append(len(completions))
            return super().score(samples, completions)

    monkeypatch.setattr(verl_adapter, "ScoringSession", CountingSession)
    path = _reward_file(tmp_path, "compute_score = as_verl_batch_compute_score('math', timeout=60)\n")
    fn = verl.get_custom_reward_fn(_trainer_config(verl, path))
    data = _batch(verl, tokenizer)
    out = verl.BatchRewardManager(tokenizer, num_examine=0, compute_score=fn)(data, return_dict=True)

    assert _last_token_scores(out["reward_tensor"], data) == [score for *_, score, _ in ROWS]
    assert list(out["reward_extra_info"]["scored"]) == [scored for *_, scored in ROWS]
    assert sessions == [len(ROWS)]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_prime_manager_runs_the_adapter_in_its_process_pool(
    verl: types.SimpleNamespace, tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """prime pickles the function into a ProcessPoolExecutor; a failure there is printed and scored 0.0.

    The pool is capped at 2 processes (prime asks for 64) for a small machine; it still forks this process, which
    has scored before, so the adapter must not reuse the pool it inherits.
    """
    import concurrent.futures

    prime_mod = sys.modules[verl.PrimeRewardManager.__module__]
    capped = partial(concurrent.futures.ProcessPoolExecutor, max_workers=2)
    monkeypatch.setattr(prime_mod, "ProcessPoolExecutor", capped)
    as_verl_compute_score("math", return_dict=False)("d", "\\boxed{1}", "1")  # this process has a warm pool now
    path = _reward_file(tmp_path, "compute_score = as_verl_compute_score('math', return_dict=False, timeout=60)\n")
    fn = verl.get_custom_reward_fn(_trainer_config(verl, path))
    pickle.loads(pickle.dumps(fn))  # what the process pool needs
    data = _batch(verl, tokenizer, suffix=" (scored in a forked child)")  # not in the cache the children inherit
    reward_tensor = verl.PrimeRewardManager(tokenizer, num_examine=0, compute_score=fn)(data)
    assert _last_token_scores(reward_tensor, data) == [score for *_, score, _ in ROWS]
    assert data.batch["acc"].tolist() == [score for *_, score, _ in ROWS]


# --- verl/trainer/main_eval.py --------------------------------------------------------------------------------------


def test_main_eval_process_item_averages_the_default_return(verl: types.SimpleNamespace, tmp_path: Path) -> None:
    """main_eval's own config with the reward keys it reads (``+reward.custom_reward_function.*``)."""
    from omegaconf import OmegaConf

    path = _reward_file(tmp_path, "compute_score = as_verl_compute_score('math', timeout=60)\n")
    cfg = OmegaConf.load(verl.root / "trainer" / "config" / "evaluation.yaml")
    cfg.reward = {"custom_reward_function": {"path": str(path), "name": "compute_score"}}
    responses = np.array([sol for sol, *_ in ROWS[:2]], dtype=object)
    process_item = verl.main_eval.process_item  # with ray installed, a ray.remote function: run its body here
    process_item = getattr(process_item, "_function", process_item)
    data_source, mean = process_item(cfg, "openai/gsm8k", responses, {"ground_truth": "4"})
    assert data_source == "openai/gsm8k"
    assert mean == pytest.approx(0.5)
    assert np.mean([mean, 1.0]) == pytest.approx(0.75)  # main_eval's mean over data-source means


def test_callables_pickle_by_reference() -> None:
    for make in (as_verl_compute_score, as_verl_batch_compute_score):
        fn = make({"name": "math"}, timeout=30, unscored_value=-1.0)
        copy = pickle.loads(pickle.dumps(fn))
        assert copy.__name__ == "math" and type(copy) is type(fn)
        assert copy("d", "\\boxed{2}", "") == {"score": -1.0, "scored": 0.0}


def test_module_docstring_examples() -> None:
    import doctest

    res = doctest.testmod(verl_adapter)
    assert res.failed == 0 and res.attempted >= 4
