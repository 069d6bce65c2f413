r"""The one value a final concluding sentence states, when it states exactly one.

Real models end unboxed solutions with sentences such as "Thus, there are 10 ways to do it.", "We obtain
$x = 10$.", "So she makes $\$18$ per day." or "∴ x = 10". Such a sentence states its answer when:

* it opens with a conclusion: a concluding word (therefore, thus, so, hence, consequently, finally, in
  conclusion, overall, altogether, ``∴``, ``\therefore``), "we get / obtain / find / have / conclude", "this gives /
  yields", or "The ... is / are / equals";
* it holds exactly one value: one inline-math part with a digit or a command (``$x$`` or ``$AB$`` alone is a
  name, not a value), or one plain number (``18``, ``1,800``, ``3.5``, ``7/2``, ``$18`` as money) after "is",
  "are", "equals" or ``=`` ("Thus, there are 10 ways", "Hence, x = 10"; "Therefore, Janet makes $18 every day."
  is not anchored: lenient mode's last number takes it);
* it holds no hedge, negation, comparison or condition ("or", "maybe", "not", "wrong", "at least", "than",
  "between", "if", ...): "So 7 is wrong." and "Thus it is 7 or 8." state nothing.

The value's words (units, nouns) are not part of it. This module only reads one sentence; which sentence is final
is :mod:`rewards.final_answer`'s concern.
"""

from __future__ import annotations

import re

__all__ = ["one_value"]

_OPENER = re.compile(
    r"^(?:(?:therefore|thus|so|hence|consequently|finally|overall|altogether|in[ \t]+(?:conclusion|summary|total))"
    r"\b|∴|\$?\\therefore\b|we[ \t]+(?:get|obtain|find|have|conclude)\b|this[ \t]+(?:gives|yields)\b|"
    r"the\b.{0,200}?[ \t](?:is|are|equals|was)\b)",
    re.IGNORECASE,
)
_LAST_CLAUSE = re.compile(r"^.{0,300}[,;][ \t]{0,3}(?=(?:so|thus|therefore|hence)\b)", re.IGNORECASE)
_DOUBT = re.compile(
    r"\b(?:or|maybe|perhaps|possibly|probably|likely|could|might|not|no|never|nor|neither|either|wrong|incorrect|"
    r"impossible|invalid|false|extraneous|rejected|excluded|discard\w*|cannot|can't|isn't|aren't|doesn't|"
    r"least|most|than|between|unless|if|except|assum\w*|guess|check|verify|let|need|next|now|sure|unsure|think|"
    r"believe|seems?|suppose|hope|doubt\w*|uncertain)\b",
    re.IGNORECASE,
)
_COPULA = re.compile(r"\b(?:is|are|was|were|equals?|be)\b|=|∴", re.IGNORECASE)
_MATH = re.compile(r"(?<!\\)\$((?:\\\$|[^$]){1,200}?)(?<!\\)\$|\\\((.{1,200}?)\\\)")
_NUMBER = re.compile(
    r"(?<![\w.^_])\$?-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w-])|(?<![\w.^_])\$?-?\d+(?:\.\d+)?"
    r"(?:[ \t]*/[ \t]*\d+)?%?(?![\w-])"
)


def one_value(sentence: str) -> str | None:
    """The single value a concluding sentence states (see the module doc), or None."""
    s = sentence.strip().rstrip(".!").strip()
    clause = _LAST_CLAUSE.search(s)
    if clause and not _OPENER.match(s):
        s = s[clause.end() :]  # "She sells 9 eggs, so she makes $18 per day."
    if len(s) > 400 or not _OPENER.match(s) or _DOUBT.search(_MATH.sub(" ", s)):
        return None
    values: list[str] = []
    for m in _MATH.finditer(s):
        inner = (m.group(1) or m.group(2) or "").strip()
        if re.search(r"\d|\\(?!therefore)[A-Za-z]", inner):
            values.append(inner)
    prose = _MATH.sub(" ", s)
    numbers = list(_NUMBER.finditer(prose))
    if len(values) + len(numbers) != 1:
        return None
    if numbers:
        if not _COPULA.search(prose, 0, numbers[0].start()):
            return None  # "Therefore, Janet makes $18 every day.": a plain number needs "is"/"are" before it
        return numbers[0].group(0).lstrip("$")
    return values[0].replace("\\therefore", "").strip() or None
