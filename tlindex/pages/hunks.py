"""Two texts side by side: the changed hunks, with a few lines of context (the pass-by-pass and compare pages)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher

CONTEXT = 3  # unchanged lines shown around a change
EXACT_LIMIT = 5_000  # lines: beyond, difflib's autojunk heuristic keeps the matching fast
# Pairs of equal lines (a line's count in A times its count in B, summed): beyond, the exact matching grows
# cubic (many blank or repeated lines: 1,000 lines of which half are blank took 12 s), so autojunk decides.
# Graphs and generated code have a few hundred such pairs.
EXACT_PAIRS = 20_000


@dataclass
class Row:
    """One row of the side-by-side table: a line of A and/or a line of B (numbered from 1; None where absent)."""

    tag: str  # equal, delete, insert or replace (difflib's opcodes)
    a_no: int | None
    a: str
    b_no: int | None
    b: str


def hunks(a_text: str, b_text: str) -> list[list[Row]]:
    """The changed hunks of A → B ([] when the texts are the same)."""
    a_lines, b_lines = a_text.split("\n"), b_text.split("\n")
    exact = max(len(a_lines), len(b_lines)) <= EXACT_LIMIT and equal_pairs(a_lines, b_lines) <= EXACT_PAIRS
    matcher = SequenceMatcher(None, a_lines, b_lines, autojunk=not exact)
    result = []
    for group in matcher.get_grouped_opcodes(CONTEXT):
        if all(tag == "equal" for tag, *_ in group):
            continue
        rows = []
        for tag, i1, i2, j1, j2 in group:
            for k in range(max(i2 - i1, j2 - j1)):
                i, j = i1 + k, j1 + k
                rows.append(Row(tag, i + 1 if i < i2 else None, a_lines[i] if i < i2 else "",
                                j + 1 if j < j2 else None, b_lines[j] if j < j2 else ""))
        result.append(rows)
    return result


def equal_pairs(a_lines: list[str], b_lines: list[str]) -> int:
    """How many (line of A, line of B) pairs are equal: the work of each step of difflib's exact matching."""
    b_counts = Counter(b_lines)
    return sum(count * b_counts[line] for line, count in Counter(a_lines).items() if line in b_counts)


def changed_lines(found: list[list[Row]]) -> int:
    return sum(1 for hunk in found for row in hunk if row.tag != "equal")
