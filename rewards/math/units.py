r"""Which words after a number are units (dropped before parsing) and which are not (kept, so the answer fails).

A unit is a known unit of measure or money (``cm``, ``square feet``, ``km/h``, ``dollars``, ``degrees``) or a plural
count noun of at least four letters (``12 apples``, ``5 ways``, ``20 students``). Anything else after a number is
part of the answer, so ``7 not``, ``7 wrong``, ``7\text{ maybe 8}`` and ``7\text{2}`` are not 7: a hedge, a
negation or another number is never a unit. This module only classifies words; :mod:`rewards.math.normalize`
removes them.
"""

from __future__ import annotations

import re

__all__ = ["is_unit_word", "is_unit_text"]

_KNOWN = set(
    """
    mm cm dm m km nm um in inch inches ft foot feet yd yard yards mi mile miles meter meters metre metres
    millimeter millimeters centimeter centimeters kilometer kilometers sq square squared cubic cubed unit units
    l ml liter liters litre litres gallon gallons gal quart quarts pint pints cup cups cc
    g mg kg gram grams kilogram kilograms milligram milligrams lb lbs pound pounds oz ounce ounces ton tons tonne tonnes
    s sec secs second seconds min mins minute minutes h hr hrs hour hours day days week weeks month months year years
    yr yrs mph kph kmh knots
    deg degree degrees rad rads radian radians
    dollar dollars cent cents usd eur euro euros rs inr rupee rupees yuan yen pence penny pennies
    cal kcal calorie calories j joule joules w watt watts v volt volts
    percent percentage point points people person persons per each
    """.split()
)
#: Words that end in "s" but hedge, negate or connect: never a count noun.
_NOT_NOUNS = {
    "perhaps",
    "maybe",
    "yes",
    "this",
    "thus",
    "is",
    "has",
    "was",
    "does",
    "less",
    "unless",
    "plus",
    "minus",
    "times",
    "its",
    "his",
    "hers",
    "ours",
    "yours",
    "theirs",
    "always",
    "sometimes",
    "besides",
    "whereas",
    "possibly",
    "regardless",
    "nevertheless",
    "otherwise",
    "across",
    "towards",
    "afterwards",
    "as",
}


def is_unit_word(word: str) -> bool:
    """True for a known unit (``cm``, ``feet``, ``m/s``) or a plural count noun (``apples``); see the module doc."""
    low = word.lower()
    if "/" in low:
        return all(is_unit_word(p) for p in low.split("/") if p) and bool(low.strip("/"))
    if low in _KNOWN:
        return True
    return len(low) >= 4 and low.isalpha() and low.endswith("s") and low not in _NOT_NOUNS and word.islower()


def is_unit_text(inner: str) -> bool:
    """True when ``inner`` (the content of a ``\\text{}`` after a value) is only unit words, with no digits
    other than an exponent (``\\text{ cm}^2`` is written outside; ``\\text{m^2}`` inside)."""
    if not re.fullmatch(r"[A-Za-z .$/^]*(?:\^\{?[23]\}?)?[A-Za-z .$/]*", inner):
        return False
    words = re.findall(r"[A-Za-z]+(?:/[A-Za-z]+)?", inner)
    return bool(words) and all(is_unit_word(w) for w in words)
