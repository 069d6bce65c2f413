r"""Regions of a completion that render nothing as a whole, whatever they hold.

* Source that TeX reads past without typesetting: ``\iffalse ... \fi`` and the ``comment`` environment.
* Markdown link reference definitions (``[//]: # (note)``, the Markdown way to write a comment). A tag ends a line
  for this reading, so ``<think>[//]: # (x)`` is one too; ``[Step 1]: compute 2 + 3`` is no definition.
* HTML elements that their own attributes hide (``hidden``, ``display: none``, ``visibility: hidden``,
  ``opacity: 0``, ``font-size: 0``, white or transparent text), to the matching close tag.

This module only finds the spans; :mod:`rewards.visible` decides what else a reader sees (characters, commands,
comments, white text) and combines them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator

__all__ = ["skipped_spans"]

#: Source that TeX reads past without typesetting: ``\iffalse ... \fi`` and the ``comment`` environment.
_TEX_SKIPPED = re.compile(
    r"\\iffalse(?![A-Za-z]).*?(?:\\fi(?![A-Za-z])|\Z)|\\begin\s*\{comment\}.*?(?:\\end\s*\{comment\}|\Z)", re.DOTALL
)
#: A Markdown link reference definition (``[//]: # (note)``, ``[x]: <> "note"``): a line that renders nothing.
_MD_DEFINITION = re.compile(
    r"^[ ]{0,3}\[[^\]\n]{1,100}\]:[ \t]*(?:<[^<>\n]{0,300}>|[^\s<][^\s]{0,300})"
    r"(?:[ \t]+(?:\"[^\"\n]{0,500}\"|'[^'\n]{0,500}'|\([^()\n]{0,500}\)))?[ \t]*$",
    re.MULTILINE,
)
#: An HTML element whose own attributes hide it: ``hidden``, ``display: none``, ``visibility: hidden``,
#: ``opacity: 0``, ``font-size: 0``, or white or transparent text (``color: white``, ``#fff``, ``rgb(255, 255, 255)``,
#: an alpha of 0, or the old ``color="white"`` attribute).
_HTML_HIDING_TAG = re.compile(
    r"<(?P<tag>[A-Za-z][\w-]{0,30})(?=[\s/>])[^<>]{0,300}?(?:\shidden(?=[\s=/>])|"
    r"(?<![-\w])(?:display\s*:\s*none|visibility\s*:\s*(?:hidden|collapse)|opacity\s*:\s*0*(?:\.0*)?\s*(?=[;\"'>]|$)|"
    r"font-size\s*:\s*0*(?:\.0*)?(?:px|pt|em|rem|%)?\s*(?=[;\"'>]|$)|"
    r"color\s*[:=]\s*[\"']?\s*(?:white|transparent|#fff(?:fff)?|rgb\(\s*255\s*,\s*255\s*,\s*255\s*\)|"
    r"rgba\([^()]{0,40},\s*0*(?:\.0*)?\s*\))\s*(?:!\s*important\s*)?(?=[;\"'>\s]|$)))[^<>]{0,300}>",
    re.IGNORECASE,
)
_TAG = re.compile(r"</?[A-Za-z][^<>\n]{0,300}>")


def skipped_spans(text: str, check: Callable[[], None]) -> Iterator[tuple[int, int]]:
    """Spans a reader never sees: source skipped by TeX, Markdown link reference definitions, and hidden HTML
    elements (to the matching close tag, counting nested elements of the same name, or to the end of the text)."""
    if "\\" in text:
        for skipped in _TEX_SKIPPED.finditer(text):
            yield skipped.start(), skipped.end()
    if "]:" in text:  # a tag ends a line for Markdown (<think>[//]: # (x) is a definition too); same positions
        lines = _TAG.sub(lambda m: " " * (len(m.group(0)) - 1) + "\n", text) if "<" in text else text
        for definition in _MD_DEFINITION.finditer(lines):
            yield definition.start(), definition.end()
    if "<" not in text:
        return
    at = 0
    while True:
        m = _HTML_HIDING_TAG.search(text, at)
        if m is None:
            return
        check()
        end = _element_end(text, m.end(), m.group("tag"))
        yield m.start(), end
        at = max(end, m.end())


def _element_end(text: str, at: int, tag: str) -> int:
    """The end of the close tag that matches an element opened just before ``at`` (or the end of the text)."""
    depth = 1
    for m in _same_tag(tag.lower()).finditer(text, at):
        if m.group(0).endswith("/>"):
            continue
        depth += -1 if m.group(1) else 1
        if depth == 0:
            return m.end()
    return len(text)


@functools.lru_cache(maxsize=256)
def _same_tag(tag: str) -> re.Pattern[str]:
    return re.compile(rf"<(/?){re.escape(tag)}(?=[\s/>])[^<>]{{0,300}}>", re.IGNORECASE)
