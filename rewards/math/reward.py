r"""The ``math`` reward: does a completion's final answer equal the gold answer in value?

Pipeline per pair, gold first: parse the gold (cached; a gold that cannot be parsed is
``Score(None, "gold_unparseable")``, never 0), extract the completion's final answer
(:mod:`~rewards.math.extract`), normalize and parse it, compare (:mod:`~rewards.math.compare`). A gold written as
a worked solution gives its final answer as a completion would, and several boxes in it are one list, ordered
parts or steps (:mod:`rewards.math.gold`); a gold of several option letters (``ABD``) is a multi-select
answer. A gold that is well formed but outside the grammar (``\overline{AB}``) is compared as a normalized
string. A single-valued gold reads ``2,74`` with a decimal comma (not three digits after it).

Every answer is compared by its value, whatever its notation (``\frac{46702}{10000}``, ``46702e-4``, ``4,6702``
are all 4.6702). A decimal gold accepts a value within half a unit of its last place (``4.67``: 0.005), and within
the relative ``tolerance`` as well unless the problem asks for an approximation ("round", "nearest",
"approximately", "to two decimal places", or ``\approx`` in the gold): so ``\frac{14}{3}`` is 4.67 only where
rounding is asked for, and ``\sqrt{156}`` is never 12.5 otherwise. A caller who states a ``precision`` of N
decimal places (off by default) also has numbers, one of them a decimal, compared after rounding both to N places
(``0.33`` for ``\frac13`` at 2; never ``3.15`` for ``3.14``). The grader never solves the problem for the
policy: an unsolved equation or inequality (``3x + 4 = 19``, ``2x + 1 > 7``) states no value, and an answer that
restates an expression of the prompt (``17 \cdot 23`` for "Compute $17 \cdot 23$") earns nothing unless the
gold is that expression (see :mod:`rewards.math.problem`). Identical
normalized strings and plain numbers are decided without sympy (the fast path most pairs take). Statuses:
``ok`` with 1.0 or 0.0, ``no_answer`` (0.0, nothing committed to), ``parse_error`` (0.0, an answer that cannot be
read), ``timeout`` (unscored, ``value=None``: the cooperative deadline passed, as when the scoring path kills a
call). ``Score.info`` records the extracted answer, both parsed forms, where the answer came from and the reason
for the verdict.

>>> from harness import get_reward
>>> fn = get_reward("math")
>>> fn({"answer": "\\frac{1}{2}"}, "Halving gives \\boxed{0.5}.").value
1.0
>>> fn({"answer": "3"}, "It could be 3, I am not sure.").status
'no_answer'

Thread-safe and free of ``signal.alarm``: the time limit is a deadline checked between steps, and the expensive
steps are bounded by structure (size caps, guarded powers); the scoring path's process kill is the hard backstop.
Reading the gold and answer strings into values is :mod:`rewards.math._reading`; this module decides the verdict.
It does not decide isolation or caching across processes (the scoring path does).
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import sympy as sp

from harness.registry import reward
from harness.types import Sample, Score, Status
from rewards.math._reading import (
    SYMPY_REFUSALS,
    choice_content,
    decimal_comma,
    is_set,
    parse_answer,
    parse_for,
    parse_gold,
    raw_gold,
)
from rewards.math.compare import Options, OutOfTime, equivalent
from rewards.math.exact import MAX_PLACES, same_at_places
from rewards.math.extract import extract_answer
from rewards.math.gold import gold_text
from rewards.math.normalize import NormalizeError, clean
from rewards.math.parse import ParseError
from rewards.math.problem import Problem, contained_expressions, expression_key, prompt_text, read_problem
from rewards.math.values import Expr, Seq, Text, Value, show

__all__ = ["math_reward", "parse_answer", "verify", "check_precision"]

log = logging.getLogger(__name__)


def verify(
    gold: Any,
    completion: str,
    *,
    strict: bool = True,
    percent_optional: bool = True,
    tolerance: float = 1e-9,
    time_limit: float = 2.0,
    prompt: Any = None,
    precision: int | None = None,
) -> Score:
    """Score one completion against one gold answer (gold first). See the module docstring for the statuses.

    ``prompt`` (a string or chat messages) is the problem: it says whether rounding is asked for, and an answer
    that restates one of its expressions earns nothing (see :mod:`rewards.math.problem`). ``precision`` (decimal
    places, 0 to :data:`~rewards.math.exact.MAX_PLACES`) compares numbers, one of them a decimal, after rounding
    both to that many places; None (the default) states no precision.

    Raises:
        ValueError: ``precision`` is not a whole number of places in range (a setting, not an answer).
    """
    check_precision(precision)
    deadline = time.monotonic() + max(0.05, time_limit * 0.8)
    problem = read_problem(prompt_text(prompt))
    gold_s, boxes = gold_text(gold)
    g: Value | None  # None only when even the raw gold is unusable
    try:
        g, gold_s = parse_gold(gold_s)
        if boxes == "parts" and isinstance(g, Seq) and g.kind == "list":
            g = Seq("tuple", g.items)  # (a) \boxed{2} (b) \boxed{7}: two answers in order
    except ParseError as e:
        g = raw_gold(gold_s)
        if g is None:
            return Score.unscored("gold_unparseable", f"gold {gold_s[:200]!r} cannot be parsed: {e}", gold=gold_s[:500])
    info: dict[str, Any] = {"gold": gold_s[:500], "gold_parsed": show(g)}
    ex = extract_answer(completion, strict=strict)
    info.update(extracted=ex.answer[:500] if ex.answer else None, source=ex.source)
    if ex.answer is None:
        return Score(value=0.0, status="no_answer", info={**info, "reason": ex.reason})
    answer = ex.answer
    if ex.hedged and ex.last is not None and not isinstance(g, Seq):
        answer = ex.last  # boxed steps, one after another: the last is a single-valued gold's answer
        info.update(extracted=answer[:500], steps=True)
    elif ex.hedged:
        info["hedged"] = True  # several different boxes: compared as a list, so a single-valued gold fails
    if boxes == "list" and is_set(answer):
        return _zero("ok", answer, info, "several boxed gold answers are a list, not the set of them")
    return _compare(g, gold_s, answer, info, (percent_optional, tolerance, deadline, precision), problem)


def check_precision(precision: object) -> None:
    """Refuse a ``precision`` that is not None or a whole number of decimal places from 0 to ``MAX_PLACES``."""
    if precision is None:
        return
    if isinstance(precision, bool) or not isinstance(precision, int) or not 0 <= precision <= MAX_PLACES:
        raise ValueError(
            f"math reward: precision must be a whole number of decimal places from 0 to {MAX_PLACES} "
            f"(or unset for no stated precision), got {precision!r}"
        )


def _compare(
    g: Value,
    gold_s: str,
    answer: str,
    info: dict[str, Any],
    settings: tuple[bool, float, float, int | None],
    problem: Problem,
) -> Score:
    """The verdict on one extracted answer: the fast path, else parse and compare (see :func:`verify`)."""
    percent_optional, tolerance, deadline, precision = settings
    fast = _fast_verdict(gold_s, answer, precision)
    if fast is not None:
        same, reason = fast
        info["answer_parsed"] = info["gold_parsed"] if same else None
        return Score(value=float(same), status="ok", answer=answer[:500], info={**info, "reason": reason})
    try:
        a = parse_for(g, answer)
    except ParseError as e:
        return _zero("parse_error", answer, info, f"answer cannot be parsed: {e}")
    info["answer_parsed"] = show(a)
    if isinstance(g, Seq) and g.kind == "list" and isinstance(a, Expr) and decimal_comma(gold_s) != gold_s:
        g = parse_answer(decimal_comma(gold_s))  # a gold 1,22 answered by one number: its comma is a decimal one
    if isinstance(g, Text) and g.choice and not (isinstance(a, Text) and a.choice):
        g = choice_content(gold_s) or g  # "C: \frac12" answered by the option's content
    opt = Options(
        percent_optional=percent_optional,
        tolerance=tolerance,
        deadline=deadline,
        gold_inexact=bool(re.search(r"\d\.\d|\\approx", gold_s)),
        approximate=problem.approximate or "\\approx" in gold_s,
        places=problem.places,
        gold_places=_written_places(gold_s),
        precision=precision,
    )
    try:
        same, reason = equivalent(g, a, opt)
    except OutOfTime:
        return Score(
            value=None,
            status="timeout",
            answer=answer[:500],
            info={**info, "reason": "comparison ran past its time limit"},
        )
    except RecursionError:
        same, reason = False, "comparison nested too deeply"
    except SYMPY_REFUSALS as e:
        # sympy refusing an operation on mismatched kinds (a matrix equated to a number, ...): not the same value
        log.debug("math: comparison raised %s: %s", type(e).__name__, e)
        same, reason = False, f"values cannot be compared ({type(e).__name__})"
    try:
        if same and (_restates(answer, gold_s, problem) or _pads_an_expression(answer, gold_s, g, opt, problem)):
            same, reason = False, "the answer restates an expression of the problem instead of its value"
    except OutOfTime:  # the restatement check ran out of time: no verdict either way
        reason = "the restatement check ran past its time limit"
        return Score(value=None, status="timeout", answer=answer[:500], info={**info, "reason": reason})
    return Score(value=1.0 if same else 0.0, status="ok", answer=answer[:500], info={**info, "reason": reason})


def _written_places(gold: str) -> int | None:
    """The decimal places of a gold that is one plain decimal, as written (``12.50``: 2), else None."""
    m = re.fullmatch(r"\s*\$?-?\d{1,300}\.(\d{1,300})\$?\s*", gold)
    return len(m.group(1)) if m else None


def _restates(answer: str, gold: str, problem: Problem) -> bool:
    """The answer, or the value it ends on (``x = 17 \\cdot 23``), is an expression of the problem that the gold
    is not (see :mod:`rewards.math.problem`)."""
    if not problem.expressions:
        return False
    sides = _SIDES.split(answer)
    if len(sides) > 1 and any(_PLAIN_NUMBER.fullmatch(side.strip().strip("$")) for side in sides):
        return False  # 17 \cdot 23 = 391: a true chain that states the number
    gold_keys = {expression_key(gold), expression_key(_last_side(gold))}
    for text in (answer, _last_side(answer)):
        key = expression_key(text)
        if key is not None and key in problem.expressions and key not in gold_keys:
            return True
    return False


def _pads_an_expression(answer: str, gold: str, g: Value, opt: Options, problem: Problem) -> bool:
    """The value the answer ends on holds an expression of the problem that alone has the gold's value
    (``17 \cdot 23 \cdot 1``, ``17 \cdot 23 + 0``): what surrounds it changes nothing, the grader computed it."""
    if not problem.expressions:
        return False
    sides = _SIDES.split(answer)
    if len(sides) > 1 and any(_PLAIN_NUMBER.fullmatch(side.strip().strip("$")) for side in sides):
        return False  # a true chain that states the number
    gold_keys = {expression_key(gold), expression_key(_last_side(gold))}
    for inner in contained_expressions(sides[-1], problem):
        if expression_key(inner) in gold_keys:
            continue
        try:
            if equivalent(g, parse_answer(inner), opt)[0]:
                return True
        except (ParseError, RecursionError, *SYMPY_REFUSALS):
            continue  # out of time propagates: the caller reports it
    return False


_SIDES = re.compile(r"=|\\(?:le|ge|leq|geq|ne|neq)(?![A-Za-z])|[<>]")


def _last_side(text: str) -> str:
    return _SIDES.split(text)[-1]


#: A clock time, h:mm with two-digit minutes (a ratio of such parts is read as a time when both sides are one).
_CLOCK = re.compile(r"\s*(\d{1,2}):([0-5]\d)\s*")
_PLAIN_NUMBER = re.compile(r"-?\d{1,300}(?:\.\d{1,300})?")
_clean_gold = functools.lru_cache(maxsize=8192)(clean)


def _fast_verdict(gold: str, answer: str, precision: int | None = None) -> tuple[bool, str] | None:
    """The verdict without sympy when both sides are the same string or plain numbers, else None."""
    try:
        gc, ac = _clean_gold(gold), clean(answer)
    except NormalizeError:
        return None
    if gc and gc == ac:
        return True, "identical after normalization"
    gt, at = _CLOCK.fullmatch(gc), _CLOCK.fullmatch(ac)
    if gt and at:  # 2:30 and 1:15 are two times, not the ratios 1/15
        same = (int(gt.group(1)), gt.group(2)) == (int(at.group(1)), at.group(2))
        return same, "clock times compared" if same else "different clock times"
    if _PLAIN_NUMBER.fullmatch(gc) and _PLAIN_NUMBER.fullmatch(ac):
        if Fraction(gc) == Fraction(ac):
            return True, "equal numbers"
        if precision is not None and same_at_places(sp.Rational(gc), sp.Rational(ac), precision):
            return True, f"equal when rounded to {precision} decimal places"
        if "." not in gc:
            return False, "different numbers"  # an exact gold: no tolerance applies
    return None


def _zero(status: Status, answer: str, info: dict[str, Any], reason: str) -> Score:
    return Score(value=0.0, status=status, answer=answer[:500], info={**info, "reason": reason})


@reward("math", reads=("answer",))
def math_reward(
    *,
    strict: bool = True,
    percent_optional: bool = True,
    tolerance: float = 1e-9,
    time_limit: float = 2.0,
    precision: int | None = None,
) -> Callable[[Sample, str], Score]:
    """Value equivalence of the final answer with ``sample.answer`` (sympy; LaTeX and plain text).

    Args:
        strict: only boxed or explicitly anchored answers count; False also takes the last ``= value`` or number.
        percent_optional: ``25`` = ``25\\%`` (and ``0.25`` = ``25\\%``); False reads ``%`` strictly as 1/100.
        tolerance: relative tolerance, used only when the gold is a decimal (possibly rounded).
        time_limit: seconds per pair for the cooperative deadline (the scoring path kills at its own limit).
        precision: decimal places (0 to 30) at which numbers, one of them a decimal, are compared after rounding
            both (``math.precision=2``: ``0.33`` for ``\\frac13``); unset, only the problem's own request for
            rounding and a decimal gold's last place count.
    """
    if tolerance < 0 or time_limit <= 0:
        raise ValueError("math reward: tolerance must be >= 0 and time_limit > 0")
    check_precision(precision)

    def score(sample: Sample, completion: str) -> Score:
        if sample.answer is None:
            return Score.unscored("bad_input", "no `answer` field; map one with data.fields.answer=COLUMN")
        return verify(
            sample.answer,
            completion,
            strict=strict,
            percent_optional=percent_optional,
            tolerance=tolerance,
            time_limit=time_limit,
            prompt=sample.prompt,
            precision=precision,
        )

    return score
