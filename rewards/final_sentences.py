r"""The one value a final concluding sentence states, when it states exactly one.

Real models end unboxed solutions with sentences such as "Thus, there are 10 ways to do it.", "We obtain
$x = 10$.", "So she makes $\$18$ per day." or "∴ x = 10". Such a sentence states its answer when:

* it opens with a conclusion: a concluding word (therefore, thus, so, hence, consequently, finally, in
  conclusion, overall, altogether, ``∴``, ``\therefore``), "we get / obtain / find / have / conclude", "this gives /
  yields", or "The ... is / are / equals";
* it holds exactly one value: one inline-math part with a digit or a command (``$x$`` or ``$AB$`` alone is a
  name, not a value), or one plain number (``18``, ``1,800``, ``3.5``, ``7/2``, ``$18`` as money) after "is",
  "are", "equals" or ``=``, or after a change by its amount ("Thus, there are 10 ways", "Hence, x = 10", "So the
  error increases by 100%"; "Therefore, Janet makes $18 every day." and "Thus we divide by 4." are not anchored:
  lenient mode's last number takes them);
* it holds no hedge, negation, comparison or condition ("or", "maybe", "not", "wrong", "at least", "than",
  "between", "if", ...): "So 7 is wrong." and "Thus it is 7 or 8." state nothing.

The value's words (units, nouns) are not part of it. This module only reads one sentence; which sentence is final
is :mod:`rewards.final_answer`'s concern.
"""

from __future__ import annotations

import re

__all__ = ["corrected_value", "labelled_math", "one_value", "prose_value"]

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
_COPULA = re.compile(  # "is 10", "= 10", and a change stated by its amount: "increases by 100%", "fell by 3"
    r"\b(?:is|are|was|were|equals?|be)\b|=|∴|"
    r"\b(?:(?:increase|decrease|rise|fall|grow|drop|shrink)[sd]?|rose|fell|grew|dropped)[ \t]+by\b",
    re.IGNORECASE,
)
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


#: Words that change the value a lone number stands for ("3 million", "3 squared", "3 below zero"): a prose
#: statement with one of these does not state that number.
_SCALES = re.compile(
    r"\b(?:thousands?|millions?|billions?|trillions?|hundreds?|dozens?|squared|cubed|square|cube|roots?|powers?|"
    r"times|half|halves|twice|thrice|double|triple|quarters?|thirds?|fifths?|plus|minus|negative|below|under|over|"
    r"above|more|fewer|greater|smaller|larger|higher|lower|divided|multiplied|ratio|reciprocal|inverse|opposite|"
    r"factorial|digits?|decimal|fraction|percent|until|before|after|about|around|approx\w*|roughly|nearly|almost|"
    r"within|up)\b",
    re.IGNORECASE,
)
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")


def prose_value(statement: str) -> str | None:
    """The one number a prose final statement states: "Final Answer: Jane started growing Sphere 3 hours ago." -> 3.

    Only for a statement that is a sentence (at least three words, no math commands, no ``=``), holds exactly one
    number and no hedge, negation, comparison or condition (the words :func:`one_value` refuses), and no word that
    changes what the number stands for ("3 million", "3 squared", "3 below zero", "3 more than x"). Anything else
    is None, and the statement is read as written.
    """
    s = statement.strip().rstrip(".!").strip()
    if len(s) > 300 or "\\" in s or "=" in s or "?" in s or len(_PROSE_WORD.findall(s)) < 3:
        return None
    if _DOUBT.search(s) or _SCALES.search(s):
        return None
    numbers = list(_NUMBER.finditer(s))
    if len(numbers) != 1 or len(re.findall(r"\d+", s)) != len(re.findall(r"\d+", numbers[0].group(0))):
        return None  # "x 2" or "3rd": a digit outside the one number
    return numbers[0].group(0).lstrip("$")


_LABEL = re.compile(r"^(?:(?P<label>[A-Za-z][A-Za-z ,'-]{0,80}?)[ \t]*:[ \t]*)?(?P<math>\$\$|\$|\\\[|\\\()")
#: Labels that announce a step, a given or an attempt, not the answer ("Step: $x = 2$", "Given: $2x = 4$").
_NOT_ANSWER_LABEL = re.compile(
    r"\b(?:step|hint|given|problem|question|example|case|note|try|attempt|draft|first|then|wait|hmm|partial|part|"
    r"sub-?total|intermediate|recall|compute|calculate|solve|find|simplify|evaluate|prove|show|expression|equation|"
    r"formula|rule|lemma|claim|known|data|error|mistake|typo|old|previous|original|initial|estimate|rough|"
    r"placeholder|unknown|todo|tbd|possible|candidates?|tentative|preliminary|so[ \t]+far)\b",
    re.IGNORECASE,
)
_CLOSE = {"$$": "$$", "$": "$", "\\[": "\\]", "\\(": "\\)"}


def labelled_math(text: str) -> str | None:
    r"""The answer of a completion that is only one math block, maybe after a short label: "$$\text{...}$$",
    "Here is a zero matrix: $\begin{pmatrix}0\end{pmatrix}$", "$z \in [1, 2]$".

    The whole text (a final period aside) must be that one block; the label must not announce a step, a given or
    an attempt (:data:`_NOT_ANSWER_LABEL`) nor hold a hedge or negation, and the block's own words (``\text{}``)
    must hold none either (``$\text{maybe } 5$``). Anything else is None.
    """
    t = text.strip()
    m = _LABEL.match(t[:4000])
    if m is None or len(t) > 4000:
        return None
    label = m.group("label") or ""
    if label and (len(label.split()) > 8 or _DOUBT.search(label) or _NOT_ANSWER_LABEL.search(label)):
        return None
    close = _CLOSE[m.group("math")]
    body = t[m.end() :].rstrip(" \t.").rstrip()
    if not body.endswith(close) or (close == "$" and body.endswith("\\$")):
        return None
    inner = body[: len(body) - len(close)].strip()
    if not inner or close in inner.replace("\\$", "") or (close == "$" and "$" in inner.replace("\\$", "")):
        return None  # "$5$ and $6$": two blocks
    if _DOUBT.search(" ".join(re.findall(r"\\text\{([^{}]*)\}", inner))):
        return None
    return inner


_PLAIN = r"\$?-?\d{1,3}(?:,\d{3})*(?:\.\d+)?|\$?-?\d+(?:\.\d+)?"
_CORRECTED = re.compile(
    r"^(?:(?:no|nope|not)[ \t,.!]{1,3})?(?:(?:so|thus|therefore|hence)[ \t,]{1,3})?"
    r"(?:the[ \t]+[A-Za-z][A-Za-z ]{0,60}?[ \t]+is|it'?s|it[ \t]+is)[ \t]+not[ \t]+(?P<a>" + _PLAIN + r")"
    r"[ \t]*[,;]?[ \t]*(?:which[ \t]+is|it'?s|it[ \t]+is|but(?:[ \t]+(?:it'?s|it[ \t]+is))?)[ \t]+"
    r"(?P<b>" + _PLAIN + r")(?P<unit>[€£%°]?|[A-Za-z]{0,3}[²³]?|[ \t]+[A-Za-z][A-Za-z ]{0,30})$",
    re.IGNORECASE,
)


def corrected_value(sentence: str) -> str | None:
    """The value a final sentence puts in place of one it denies: "the number is not 10 which is 1,000.99€",
    "it's not 10, it's 12 hours" -> the second number.

    Both values must be plain numbers with different values (so "which is" cannot describe the denied one), the
    corrected one must end the sentence (a currency sign or unit words may follow: nothing else, so "it's not 10,
    it's 12 or 13" and "... which is 2 more than 8" state nothing), and nothing but "no"/"not" and a concluding
    word may come before the subject ("maybe it's not 10, it's 12" states nothing).
    """
    s = sentence.strip().rstrip(".!").strip()
    m = _CORRECTED.match(s[:300])
    if m is None or len(s) > 300:
        return None

    def value(x: str) -> str:
        return x.replace(",", "").lstrip("$")

    if value(m.group("a")) == value(m.group("b")):
        return None
    unit = m.group("unit").strip()
    if unit and unit[0].isalpha():
        from rewards.math.units import is_unit_text  # here: rewards.math imports the finder, which imports this

        if not is_unit_text(unit.rstrip("²³")):
            return None  # "it's not 10, it's 12x": a variable, not a unit
    return (m.group("b").lstrip("$") + (" " + unit if unit else "")).strip()
