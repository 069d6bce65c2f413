"""The reward registry: decorator, duplicates, parameter validation, entry points, the autoload kill switch.

Entry points are real: each test writes a ``*.dist-info`` directory with an ``entry_points.txt`` onto ``sys.path``,
which is exactly what pip leaves behind for an installed distribution, and the registry discovers it through
``importlib.metadata``.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from harness import Sample, Score, get_reward, reward
from harness import registry as reg
from harness.errors import DuplicateRewardError, RewardParameterError, UnknownRewardError


@pytest.fixture
def fresh_registry():
    """A registry that has loaded nothing yet (its load adopts the built-ins); the real one is back afterwards."""
    with reg.use_registry(reg.Registry()):
        yield reg


def _fake_dist(tmp_path: Path, monkeypatch, name: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    for mod, src in modules.items():
        (tmp_path / f"{mod}.py").write_text(textwrap.dedent(src))
    info = tmp_path / f"{name.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    eps = "[grpo_harness.rewards]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(eps)
    monkeypatch.syspath_prepend(str(tmp_path))
    for mod in modules:
        sys.modules.pop(mod, None)


def test_decorator_registers_and_get_reward_builds_with_params(fresh_registry) -> None:
    @reward("t_exact")
    def t_exact(*, ignore_case: bool = False):
        def score(sample: Sample, completion: str) -> Score:
            a, b = str(sample.answer), completion
            if ignore_case:
                a, b = a.lower(), b.lower()
            return Score(value=float(a == b))

        return score

    assert get_reward("t_exact")({"answer": "Yes"}, "yes").value == 0.0
    assert get_reward("t_exact", ignore_case=True)({"answer": "Yes"}, "yes").value == 1.0
    entry = reg.get_entry("t_exact")
    assert entry.origin == f"module {__name__}" and str(entry.params[0]) == "ignore_case: bool = False"


def test_unknown_parameter_names_the_accepted_ones(fresh_registry) -> None:
    with pytest.raises(RewardParameterError) as e:
        get_reward("boxed_present", command="boxed")
    assert "'command'" in str(e.value) and "accepted parameters: commands" in str(e.value)


def test_missing_required_parameter_is_named(fresh_registry) -> None:
    with pytest.raises(RewardParameterError, match="needs parameter.*'pattern'"):
        get_reward("format_regex")


def test_duplicate_name_fails_naming_both_origins(fresh_registry) -> None:
    get_reward("boxed_present")  # loads the built-ins

    with pytest.raises(DuplicateRewardError) as e:

        @reward("boxed_present")
        def mine():
            return lambda s, c: 1.0

    assert "built-in (rewards.format)" in str(e.value) and f"module {__name__}" in str(e.value)


def test_unknown_reward_lists_registered_names(fresh_registry) -> None:
    with pytest.raises(UnknownRewardError, match="unknown reward 'nope'.*boxed_present"):
        get_reward("nope")


def test_plugin_exception_becomes_unscored_error(fresh_registry) -> None:
    @reward("t_broken")
    def t_broken():
        def score(sample, completion):
            return 1 / 0

        return score

    s = get_reward("t_broken")({"id": "1"}, "x")
    assert s.value is None and s.status == "error" and "ZeroDivisionError" in s.info["reason"]


def test_entry_point_factory_is_found_with_its_distribution(fresh_registry, tmp_path, monkeypatch) -> None:
    _fake_dist(
        tmp_path,
        monkeypatch,
        "acme-rewards",
        {"acme_len": "acme_mod:make"},
        {"acme_mod": "def make(*, k: int = 2):\n    return lambda s, c: float(len(c) * k)\n"},
    )
    entry = reg.get_entry("acme_len")
    assert entry.origin.startswith("acme-rewards 1.2.3")
    assert get_reward("acme_len", k=3)({}, "ab").value == 6.0


def test_broken_entry_point_warns_by_name_and_others_still_load(fresh_registry, tmp_path, monkeypatch) -> None:
    _fake_dist(
        tmp_path,
        monkeypatch,
        "mixed-rewards",
        {"good_one": "good_mod:make", "bad_one": "bad_mod:make"},
        {"good_mod": "def make():\n    return lambda s, c: 1.0\n", "bad_mod": "import not_a_real_module_xyz\n"},
    )
    with pytest.warns(UserWarning, match="mixed-rewards 1.2.3 \\(entry point bad_one"):
        names = [e.name for e in reg.list_rewards()]
    assert "good_one" in names and "bad_one" not in names


def test_entry_point_duplicate_of_a_builtin_fails(fresh_registry, tmp_path, monkeypatch) -> None:
    _fake_dist(
        tmp_path,
        monkeypatch,
        "clash-rewards",
        {"boxed_present": "clash_mod:make"},
        {"clash_mod": "def make():\n    return lambda s, c: 1.0\n"},
    )
    with pytest.raises(DuplicateRewardError, match="built-in.*clash-rewards 1.2.3"):
        reg.list_rewards()


def test_autoload_kill_switch_skips_entry_points(fresh_registry, tmp_path, monkeypatch) -> None:
    _fake_dist(
        tmp_path,
        monkeypatch,
        "off-rewards",
        {"off_one": "off_mod:make"},
        {"off_mod": "def make():\n    return lambda s, c: 1.0\n"},
    )
    monkeypatch.setenv("GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD", "1")
    names = [e.name for e in reg.list_rewards()]
    assert "off_one" not in names and "boxed_present" in names


def test_loading_is_lazy() -> None:
    import subprocess

    code = "import harness, sys; print('rewards.format' in sys.modules, 'harness.scoring' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_a_users_rewards_py_next_to_the_script_is_named_instead_of_hiding_every_builtin(tmp_path) -> None:
    """Regression: on the old main this printed ``unknown reward 'boxed_present'; registered rewards: none``."""
    import os
    import subprocess

    (tmp_path / "rewards.py").write_text("HELPER = 1\n")
    (tmp_path / "script.py").write_text("from harness import get_reward\nget_reward('boxed_present')\n")
    env = {**os.environ, "PYTHONPATH": str(Path(reg.__file__).resolve().parents[1])}

    def run_script() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(tmp_path / "script.py")],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
        )

    proc = run_script()
    assert proc.returncode != 0
    assert "RegistryError" in proc.stderr and "registered rewards: none" not in proc.stderr
    assert str(tmp_path / "rewards.py") in proc.stderr and "shadows" in proc.stderr and "rename" in proc.stderr

    (tmp_path / "rewards.py").rename(tmp_path / "my_rewards.py")  # the fix the message asks for works
    ok = run_script()
    assert ok.returncode == 0, ok.stderr


def test_a_failed_load_is_not_half_loaded_for_the_next_lookup(fresh_registry, tmp_path, monkeypatch) -> None:
    """Regression: on the old main the second lookup answered from the registry the failed load left behind."""
    _fake_dist(
        tmp_path,
        monkeypatch,
        "clash2-rewards",
        {"boxed_present": "clash2_mod:make"},
        {"clash2_mod": "def make():\n    return lambda s, c: 1.0\n"},
    )
    with pytest.raises(DuplicateRewardError):
        reg.list_rewards()
    with pytest.raises(DuplicateRewardError, match="clash2-rewards"):
        reg.get_entry("boxed_present")  # the same error again, not the built-in from a half-finished load
    with pytest.raises(DuplicateRewardError):
        reg.list_rewards()


def test_a_parameter_value_of_the_wrong_type_fails_at_load_naming_it(fresh_registry) -> None:
    """Regression: on the old main ``min_ops="abc"`` for an ``int`` built fine and failed on every row."""
    from harness import ScoringSession

    @reward("t_min_ops")
    def t_min_ops(*, min_ops: int = 1, scale: float = 1.0, words: tuple[str, ...] = ("a",)):
        return lambda s, c: float(c.count("+") >= min_ops) * scale

    with pytest.raises(RewardParameterError) as e:
        ScoringSession([{"name": "t_min_ops", "params": {"min_ops": "abc"}}])
    msg = str(e.value)
    assert "'min_ops'" in msg and "'abc'" in msg and "expected int" in msg
    fn = get_reward("t_min_ops", min_ops=2, scale="1e-1", words="b")  # YAML leaves 1e-1 a string; coerced
    assert fn({}, "1+2+3").value == pytest.approx(0.1)


def test_rewards_list_names_each_factorys_own_entry_point(fresh_registry, tmp_path, monkeypatch) -> None:
    """Regression: on the old main both rewards of one module showed the entry point that imported it first."""
    src = (
        "from harness import reward\n"
        "@reward('duo_a')\ndef duo_a():\n    return lambda s, c: 1.0\n"
        "@reward('duo_b')\ndef duo_b():\n    return lambda s, c: 0.0\n"
    )
    _fake_dist(
        tmp_path, monkeypatch, "duo-rewards", {"duo_a": "duo_mod:duo_a", "duo_b": "duo_mod:duo_b"}, {"duo_mod": src}
    )
    assert reg.get_entry("duo_a").origin == "duo-rewards 1.2.3 (entry point duo_a = duo_mod:duo_a)"
    assert reg.get_entry("duo_b").origin == "duo-rewards 1.2.3 (entry point duo_b = duo_mod:duo_b)"


def test_a_fresh_registry_adopts_the_imported_builtins_and_the_real_one_is_back_after() -> None:
    """Without re-importing a module: the built-ins were imported (and registered) by the process-wide registry."""
    real = reg.default_registry()
    real.load()
    assert "rewards.toy" in sys.modules
    with reg.use_registry(reg.Registry()) as fresh:
        assert reg.default_registry() is fresh and not fresh.entries

        @reward("t_only_here")
        def t_only_here():
            return lambda s, c: 1.0

        assert reg.get_entry("char_count").origin == "built-in (rewards.toy)"
        assert reg.get_entry("char_count").factory is real.lookup("char_count").factory
    assert reg.default_registry() is real and "t_only_here" not in real.entries
    with pytest.raises(UnknownRewardError):
        get_reward("t_only_here")


def test_the_builtin_listing_holds_no_test_or_benchmark_reward(tmp_path: Path) -> None:
    """``harness rewards list`` in a fresh process shows the built-ins only. Regression: on the old main it showed
    ``char_count_slow``, a benchmark's stand-in for a slow verifier, now a plugin in ``benchmarks/slow_reward.py``."""
    import os
    import subprocess

    env = {**os.environ, "GRPO_HARNESS_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "rewards", "list"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    names = [line for line in proc.stdout.splitlines() if line and not line.startswith(" ")]
    origins = [line.split("origin:", 1)[1].strip() for line in proc.stdout.splitlines() if "origin:" in line]
    assert "char_count" in names and "char_count_slow" not in names
    assert all(o.startswith("built-in") or o.startswith("rewards.") for o in origins), origins
