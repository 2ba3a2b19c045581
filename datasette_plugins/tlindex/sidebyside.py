"""Two texts side by side: the changed hunks with a few lines of context, each line highlighted."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from difflib import SequenceMatcher

from markupsafe import Markup

from .highlight import highlighted_lines

CONTEXT = 3  # unchanged lines shown around a change
EXACT_LIMIT = 5_000  # lines: beyond, difflib's autojunk heuristic keeps the matching fast


@dataclass
class Row:
    """One row of the side-by-side table: a line of A and/or a line of B."""

    tag: str  # equal, delete, insert or replace (difflib's opcodes)
    a_no: int | None
    a: Markup
    b_no: int | None
    b: Markup


@functools.lru_cache(maxsize=2)
def _highlighted(text: str, lang: str) -> list[Markup]:
    """highlighted_lines, remembered for the last texts: the pass-by-pass page shows each graph as the
    new side of one pair and the old side of the next."""
    return highlighted_lines(text, lang)


def hunks(a_text: str, b_text: str, lang: str) -> list[list[Row]]:
    """The changed hunks of A → B ([] when the texts are the same), lines numbered from 1."""
    a_lines, b_lines = a_text.split("\n"), b_text.split("\n")
    a_html, b_html = _highlighted(a_text, lang), _highlighted(b_text, lang)
    exact = max(len(a_lines), len(b_lines)) <= EXACT_LIMIT
    matcher = SequenceMatcher(None, a_lines, b_lines, autojunk=not exact)
    result = []
    for group in matcher.get_grouped_opcodes(CONTEXT):
        if all(tag == "equal" for tag, *_ in group):
            continue
        rows = []
        for tag, i1, i2, j1, j2 in group:
            for k in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + k, j1 + k
                rows.append(Row(tag, i + 1 if i < i2 else None, a_html[i] if i < i2 else Markup(""),
                                j + 1 if j < j2 else None, b_html[j] if j < j2 else Markup("")))
        result.append(rows)
    return result
