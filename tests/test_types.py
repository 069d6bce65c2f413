"""The contracts: Score's invariants, Sample's extra columns, RewardSpec validation, and the docstring examples."""

from __future__ import annotations

import copy
import doctest
import json
import math
import pickle
from typing import Any

import pytest
from pydantic import ValidationError

import harness.data
import harness.registry
import harness.report.build
import harness.scoring._result
import harness.scoring._session
import harness.types
from harness.types import (
    STATUSES,
    UNSCORED_STATUSES,
    VERDICT_STATUSES,
    FrozenDict,
    FrozenList,
    RewardSpec,
    Sample,
    Score,
)


@pytest.mark.parametrize(
    "module",
    [
        harness.types,
        harness.registry,
        harness.scoring._result,
        harness.scoring._session,
        harness.data,
        harness.report.build,
    ],
)
def test_docstring_examples(module) -> None:
    res = doctest.testmod(module)
    assert res.failed == 0 and res.attempted > 0


def test_nan_and_inf_values_become_unscored() -> None:
    assert (Score(value=math.nan).value, Score(value=math.nan).status) == (None, "error")
    assert Score(value=-math.inf, status="pass").value is None
    assert "non-finite" in Score(value=math.inf).info["reason"]
    assert Score(value=True).value == 1.0


@pytest.mark.parametrize("status", sorted(UNSCORED_STATUSES))
def test_unscored_statuses_refuse_a_value(status: str) -> None:
    with pytest.raises(ValidationError, match="means unscored"):
        Score(value=0.0, status=status)
    assert Score(value=None, status=status).scored is False


@pytest.mark.parametrize("status", sorted(VERDICT_STATUSES))
def test_verdict_statuses_refuse_no_value(status: str) -> None:
    with pytest.raises(ValidationError, match="is a verdict"):
        Score(value=None, status=status)
    assert Score(value=0.0, status=status).scored is True


def test_every_status_is_either_a_verdict_or_unscored() -> None:
    assert VERDICT_STATUSES | UNSCORED_STATUSES == set(STATUSES) and not VERDICT_STATUSES & UNSCORED_STATUSES
    # a reward that runs out of its own time is unscored like the pool's kill; a judged program's limit is a verdict
    assert "timeout" in UNSCORED_STATUSES and {"time_limit", "memory", "program_error"} <= VERDICT_STATUSES
    from harness.types import UNCACHED_STATUSES

    assert {"timeout", "time_limit"} <= UNCACHED_STATUSES  # one attempt's outcome: another may differ


def test_status_set_is_closed() -> None:
    with pytest.raises(ValidationError):
        Score(value=1.0, status="great")
    assert {
        "ok",
        "no_answer",
        "parse_error",
        "gold_unparseable",
        "timeout",
        "error",
        "bad_input",
        "sandbox_error",
    } <= set(STATUSES)


def test_status_sets_are_statuses_and_each_means_one_thing() -> None:
    from harness.types import DATA_FAULT_STATUSES, PROGRAM_FAILED_STATUSES, UNCACHED_STATUSES, VERDICT_STATUSES

    for named in (UNSCORED_STATUSES, VERDICT_STATUSES, DATA_FAULT_STATUSES, PROGRAM_FAILED_STATUSES, UNCACHED_STATUSES):
        assert named <= set(STATUSES)
    assert not VERDICT_STATUSES & UNSCORED_STATUSES  # a verdict always has a value
    assert DATA_FAULT_STATUSES <= UNSCORED_STATUSES


def test_the_sandbox_verdicts_are_pass_or_a_judged_program_failure() -> None:
    """The sandbox keeps its own status type (it imports nothing from harness); the code reward maps every failed
    outcome of a run onto a judged program failure, a verdict with a value."""
    import typing

    from harness.types import PROGRAM_FAILED_STATUSES
    from rewards.code import _STATUS_OF_RUN, _STATUS_OF_TESTS
    from sandbox._results import ProgramResult, TestsResult

    verdicts = set(typing.get_args(typing.get_type_hints(TestsResult)["status"]))
    # "bad_tests" (where the sandbox has it): the row's tests cannot judge anything, a data fault (bad_input)
    assert {_STATUS_OF_TESTS[v] for v in verdicts - {"pass", "bad_tests"}} == PROGRAM_FAILED_STATUSES
    runs = set(typing.get_args(typing.get_type_hints(ProgramResult)["status"])) - {"ok"}
    assert {_STATUS_OF_RUN[r] for r in runs} <= PROGRAM_FAILED_STATUSES <= VERDICT_STATUSES


def test_score_and_sample_are_frozen() -> None:
    s = Score(value=1.0)
    with pytest.raises(ValidationError):
        s.value = 0.0  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Sample(id="1").prompt = "x"  # type: ignore[misc]


def test_sample_keeps_extra_columns_and_chat_prompts() -> None:
    s = Sample(id=3, prompt=[{"role": "user", "content": "hi"}], entry_point="f", difficulty=2)
    assert s.id == "3" and s.entry_point == "f" and s.columns["difficulty"] == 2  # type: ignore[attr-defined]
    assert s.prompt_text == "hi"


def test_reward_spec_rejects_unknown_fields_and_non_finite_weights() -> None:
    with pytest.raises(ValidationError):
        RewardSpec(name="math", wieght=2)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="finite"):
        RewardSpec(name="math", weight=math.nan)
    with pytest.raises(ValidationError):
        RewardSpec(name="")


def _scored_in_a_worker(score: Score) -> Score:
    return Score.model_validate_json(pickle.loads(pickle.dumps(score)).model_dump_json())


def test_score_info_is_read_only_and_still_a_dict_for_every_reader() -> None:
    s = Score(value=1.0, info={"reason": "equal numbers", "tests": [True]})
    info: Any = s.info  # typed as a read-only Mapping; here each dict writer is tried on purpose
    for write in (
        lambda: info.__setitem__("x", 1),
        lambda: info.update(x=1),
        lambda: info.setdefault("x", 1),
        lambda: info.pop("reason"),
        lambda: info.__delitem__("reason"),
        lambda: info.clear(),
    ):
        with pytest.raises(TypeError, match="read-only"):
            write()
    assert s.info == {"reason": "equal numbers", "tests": [True]} and isinstance(s.info, dict)
    assert json.loads(s.model_dump_json())["info"] == s.info and json.dumps(s.info) == json.dumps(dict(s.info))
    assert type(s.model_dump()["info"]) is dict  # a dump is the caller's to change
    again = pickle.loads(pickle.dumps(s))  # how a Score crosses to a scoring worker and back
    assert again == s and isinstance(again.info, FrozenDict) and _scored_in_a_worker(s) == s
    assert copy.deepcopy(s) == s and Score(value=1.0) == Score(value=1.0, info={})
    grown = Score(value=s.value, info={**s.info, "extra": 2})  # the way to add to info: a new Score
    assert grown.info["extra"] == 2 and "extra" not in s.info
    with pytest.raises(TypeError, match="read-only"):
        s.model_copy(update={"info": {"a": 1}}).info["b"] = 2  # type: ignore[index]  # pydantic skips validation here


def test_score_info_is_read_only_all_the_way_down() -> None:
    tests = [{"line": 1, "passed": True}, {"line": 2, "passed": False}]
    given: dict[str, Any] = {"a": {"b": 1}, "tests": tests, "pair": ({"k": [1]}, 2), "tags": {"x", "y"}}
    s = Score(value=0.5, status="fail", info=given)
    info: Any = s.info  # typed as a read-only Mapping; here each nested writer is tried on purpose
    for write in (
        lambda: info["a"].__setitem__("b", 2),
        lambda: info["a"].update(b=2),
        lambda: info["tests"].append({"line": 3}),
        lambda: info["tests"].__setitem__(0, None),
        lambda: info["tests"].__iadd__([1]),
        lambda: info["tests"].sort(key=str),
        lambda: info["tests"][0].__setitem__("passed", False),
        lambda: info["pair"][0]["k"].append(2),
    ):
        with pytest.raises(TypeError, match="read-only"):
            write()
    with pytest.raises(TypeError, match="read-only"):
        Score(value=1, info={"a": {"b": 1}}).info["a"]["b"] = 2  # type: ignore[index]
    with pytest.raises(AttributeError):
        info["tags"].add("z")  # a set became a frozenset
    # the producer's containers stay the producer's: changing them later does not reach the Score
    tests.append({"line": 3})
    given["a"]["b"] = 9
    assert len(s.info["tests"]) == 2 and s.info["a"]["b"] == 1
    # every reader still sees dicts and lists equal to what was given
    want = {"a": {"b": 1}, "tests": tests[:2], "pair": ({"k": [1]}, 2), "tags": {"x", "y"}}
    assert s.info == want and isinstance(s.info["tests"], list) and isinstance(s.info["a"], dict)
    dumped = s.model_dump()["info"]  # a dump is the caller's to change, nested parts included
    assert type(dumped["a"]) is dict and type(dumped["tests"]) is list and type(dumped["tests"][0]) is dict
    dumped["tests"].append(1)
    again = pickle.loads(pickle.dumps(s))  # how a Score crosses to a scoring worker and back
    assert again == s and isinstance(again.info["tests"], FrozenList) and isinstance(again.info["a"], FrozenDict)
    assert copy.deepcopy(s) == s and hash(again) == hash(s)
    plain = Score(value=1.0, info={"tests": [{"passed": True}]})
    assert _scored_in_a_worker(plain) == plain
    with pytest.raises(TypeError, match="read-only"):
        again.info["tests"].append(1)


def test_score_info_json_round_trip_is_byte_for_byte() -> None:
    s = Score(value=1.0, answer="4", info={"reason": "equal", "tests": [{"line": 1, "passed": True}], "n": 2.5})
    text = s.model_dump_json()
    assert Score.model_validate_json(text).model_dump_json() == text
    assert json.dumps(s.model_dump(mode="json")) == json.dumps(
        {
            "value": 1.0,
            "status": "ok",
            "answer": "4",
            "info": {"reason": "equal", "tests": [{"line": 1, "passed": True}], "n": 2.5},
        }
    )


def test_reward_spec_is_hashable_by_its_content_and_its_params_are_read_only() -> None:
    a = RewardSpec(name="math", weight=1.0, params={"tolerance": 1, "tags": ["a", "b"], "extra": {"k": 1}})
    b = RewardSpec(name="math", weight=1.0, params={"extra": {"k": 1}, "tags": ["a", "b"], "tolerance": 1.0})
    assert a == b and hash(a) == hash(b) and {a: "x"}[b] == "x" and len({a, b}) == 1
    assert len({a, RewardSpec(name="math", params={"tolerance": 2}), RewardSpec(name="math", weight=0.0)}) == 3
    with pytest.raises(TypeError, match="read-only"):
        a.params["tolerance"] = 3  # type: ignore[index]
    with pytest.raises(TypeError, match="read-only"):
        a.params["tags"].append("c")
    with pytest.raises(TypeError, match="read-only"):
        a.params["extra"]["k"] = 2
    assert a.model_dump()["params"] == {"tolerance": 1, "tags": ["a", "b"], "extra": {"k": 1}}
    assert type(a.model_dump()["params"]["tags"]) is list
    assert pickle.loads(pickle.dumps(a)) == a and hash(a.model_copy(update={"weight": 2.0})) != hash(a)
