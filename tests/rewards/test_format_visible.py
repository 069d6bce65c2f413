r"""No format credit for what a reader cannot see: shells of invisible characters, no-op commands, placeholders,
comments, white text and nested phantoms score nothing on ``think_answer_format``, ``boxed_present`` and
``tag_count``; each class sits next to hard negatives that a reader does see and that keep their credit.

The invisible characters are chosen by class (Unicode format characters, spaces, marks, private use, and the
blank or filler letters and symbols), and the test also sweeps every such code point of the running Python's
Unicode database, so the rule is the general category and name, not a list.

Regression: before content meant what a reader sees, 20 of the first 41 shells below scored 1.0 on at least one of
the three rewards; the last ten (math spacing with an argument, skipped TeX source, hidden or white HTML
elements, Markdown comments, white xcolor mixes) all did, before hidden regions covered them.
"""

from __future__ import annotations

import sys
import unicodedata

import pytest

from harness import get_reward
from rewards.visible import is_invisible_char, is_placeholder

INVISIBLE = {
    "braille blank": "\u2800",
    "hangul filler": "\u3164",
    "hangul choseong filler": "\u115f",
    "halfwidth hangul filler": "\uffa0",
    "zero-width space": "\u200b",
    "zero-width joiner": "\u200d",
    "word joiner": "\u2060",
    "byte order mark": "\ufeff",
    "invisible times": "\u2062",
    "soft hyphen": "\u00ad",
    "mongolian vowel separator": "\u180e",
    "tag characters": "\U000e0041\U000e0042",
    "no-break space": "\u00a0",
    "ideographic space": "\u3000",
    "em space": "\u2003",
    "combining marks alone": "\u0301\u0308",
    "variation selector": "\ufe0f",
    "private use": "\ue000",
    "line separator": "\u2028",
    "ideographic half fill space": "\u303f",
}
LATEX_NOTHING = {
    "relax": "\\relax",
    "hfill": "\\hfill",
    "spacing": "\\quad\\qquad\\,\\;\\!\\ ~",
    "strut and null": "\\strut\\mathstrut\\null",
    "ldots": "\\ldots",
    "dots": "\\dots\\cdots\\vdots",
    "comment": "% the answer is 5\n",
    "comment after a command": "\\relax% 5\n",
    "hspace": "\\hspace{2cm}\\vspace*{1em}",
    "kern": "\\kern3pt\\hskip 2em",
    "phantom": "\\phantom{5}",
    "nested phantom": "\\phantom{\\phantom{\\frac{1}{2}}}",
    "hphantom and vphantom": "\\hphantom{x}\\vphantom{y}",
    "white declaration": "{\\color{white} 5}",
    "white text": "\\textcolor{white}{5}",
    "white hex": "{\\color{#FFFFFF} the answer is 5}",
    "white rgb": "{\\color[rgb]{1,1,1}5}",
    "white argument": "\\color{white}{5}",
    "html comment": "<!-- 5 -->",
    "styled nothing": "\\displaystyle\\textstyle\\left.\\right.",
    "empty text": "\\text{ }\\mathrm{}",
    "rule": "\\rule{0pt}{0pt}",
    "one-token phantom": "\\phantom 5\\hphantom7",
    "penalty": "\\penalty10000\\nobreak",
    "white mixed": "{\\color{white!100} 5}",
    "entities that show nothing": "&nbsp;&#8203;&zwj;&#x200B;",
    "ellipsis symbols": "\u22ef\u22ee",
    "math spacing with an argument": "\\mspace{18mu}",
    "source TeX skips": "\\iffalse the answer is 5 \\fi",
    "comment environment": "\\begin{comment} 5 \\end{comment}",
    "hidden html element": "<span hidden>5</span>",
    "html element styled away": '<div style="display: none">5</div><b style="visibility:hidden">6</b>',
    "html white text": '<font style="color: #fff">5</font>',
    "html transparent nested": '<span style="opacity:0"><span>5</span> 6</span>',
    "html color attribute and transparent text": '<font color=white>5</font><i style="color: rgba(0,0,0,0)">6</i>',
    "markdown comment": "[//]: # (5)\n[note]: <> (6)",
    "white by an xcolor mix": "{\\color{white!100!black!0} 5}\\textcolor{black!0}{6}",
}
SHELLS = {**INVISIBLE, **LATEX_NOTHING}
SEEN = {  # hard negatives: short, but a reader sees them
    "zero": "0",
    "letter": "x",
    "infinity": "\\infty",
    "empty set": "\\emptyset",
    "empty set braces": "\\{\\}",
    "unicode empty set": "\u2205",
    "word": "\\text{no}",
    "percent": "50\\%",
    "plain percent": "50%",
    "reals": "\\mathbb{R}",
    "negative": "-1",
    "red text": "\\textcolor{red}{7}",
    "gray text": "{\\color{gray} 7}",
    "hangul syllable": "\ub124",  # a real Hangul letter, not a filler
    "braille dot": "\u2801",  # a Braille pattern with a dot, not the blank
    "chinese": "\u4e8c",
    "blank symbol glyph": "\u2422",  # the visible ␢, unlike the Braille blank
    "accented letter": "e\u0301",
    "phantom beside a value": "\\phantom{0}7",
    "white then visible": "{\\color{white} 5} 7",
    "comment then a line": "% note\n7",
    "entity that shows a symbol": "&infin;",
    "a list with an ellipsis": "1, 2, \\ldots, 9",
    "a value after skipped source": "\\iffalse 3 \\fi 7",
    "a value after a hidden element": "<span hidden>3</span>7",
    "html that hides no text": '<span style="overflow: hidden">7</span><span aria-hidden="true">8</span>',
    "html on a white background": '<span style="background-color: white; opacity: 0.5">7</span>',
    "html text half transparent or red": '<i style="color: rgba(0,0,0,0.5)">7</i><font color="red">8</font>',
    "a bracketed label before words": "[Step 1]: compute 2 + 3",
    "a markdown comment before a line": "[//]: # (note)\n7",
    "a mix with some black": "{\\color{white!50!black} 7}",
    "a full-strength color": "\\textcolor{red!100}{7}",
}


R1_PATTERN = r"^<think>.*?</think>\s*<answer>.*?</answer>$"


def _shaped(content: str) -> dict[str, str]:
    return {
        "think": f"<think>{content}</think><answer>5</answer>",
        "answer": f"<think>2 + 3 = 5</think><answer>{content}</answer>",
        "box": f"<think>2 + 3 = 5</think><answer>\\boxed{{{content}}}</answer>",
    }


@pytest.mark.parametrize("name", sorted(SHELLS))
def test_a_shell_earns_no_format_credit(name: str) -> None:
    content = SHELLS[name]
    assert is_placeholder(content), name
    shaped = _shaped(content)
    assert get_reward("think_answer_format")({}, shaped["think"]).value == 0.0
    assert get_reward("think_answer_format")({}, shaped["answer"]).value == 0.0
    for key in ("think", "answer"):
        value = get_reward("tag_count")({}, shaped[key]).value
        assert value is not None and value < 1.0, key
    assert get_reward("tag_count")({}, f"<think>{content}</think><answer>{content}</answer>").value == 0.0
    assert get_reward("boxed_present")({}, f"so \\boxed{{{content}}}").value == 0.0
    assert get_reward("boxed_present")({}, shaped["box"]).value == 0.0
    assert get_reward("math")({"answer": "5"}, shaped["box"]).status == "no_answer"
    r1 = get_reward("format_regex", pattern=R1_PATTERN, flags="s")
    assert r1({}, shaped["think"]).value == 0.0 and r1({}, shaped["answer"]).value == 0.0


@pytest.mark.parametrize("name", sorted(SEEN))
def test_what_a_reader_sees_keeps_its_credit(name: str) -> None:
    content = SEEN[name]
    assert not is_placeholder(content), name
    shaped = _shaped(content)
    assert get_reward("think_answer_format")({}, shaped["think"]).value == 1.0
    assert get_reward("think_answer_format")({}, shaped["answer"]).value == 1.0
    assert get_reward("tag_count")({}, shaped["answer"]).value == 1.0
    assert get_reward("boxed_present")({}, f"so \\boxed{{{content}}}").value == 1.0
    assert get_reward("format_regex", pattern=R1_PATTERN, flags="s")({}, shaped["answer"]).value == 1.0


def test_honest_completions_keep_full_credit() -> None:
    real = "<think>We need 2 + 3. That is 5, and 50% of 10 is 5 as well.</think><answer>\\boxed{5}</answer>"
    for name in ("think_answer_format", "tag_count", "boxed_present"):
        assert get_reward(name)({}, real).value == 1.0, name


def test_every_invisible_code_point_is_invisible_by_category_or_name() -> None:
    """Sweep the whole Unicode database: each format, space, mark, private-use or unassigned code point, and each
    letter or symbol named a blank or a filler, is invisible; letters, digits and named symbols are not."""
    hidden_categories = {"Cc", "Cf", "Co", "Cn", "Zs", "Zl", "Zp", "Mn", "Mc", "Me"}
    wrong = []
    for cp in range(0x10FFFF + 1):
        if 0xD800 <= cp <= 0xDFFF or cp in (0x0A, 0x0D):
            continue
        c = chr(cp)
        cat = unicodedata.category(c)
        name = unicodedata.name(c, "")
        blank = name.endswith((" BLANK", " FILL SPACE")) or "FILLER" in name
        if cat in hidden_categories or blank:
            if not is_invisible_char(c) or not is_placeholder(c):
                wrong.append(f"U+{cp:04X} {cat} {name}")
        elif cat[0] in "LN" and not c.isascii() and is_placeholder(c) and not blank:
            wrong.append(f"U+{cp:04X} {cat} {name} (visible, called invisible)")
    assert not wrong, f"{len(wrong)} code points (Unicode {unicodedata.unidata_version}, {sys.version_info[:2]}): " + (
        ", ".join(wrong[:20])
    )
