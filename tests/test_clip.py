"""bound_texts: every text a page's data holds is bounded, however the data nests (the pages' last guard against a
64 MiB line of a log reaching HTML)."""

from __future__ import annotations

from dataclasses import dataclass

from tlindex.answers.clip import ELLIPSIS, PAGE_TEXT_CHARS, bound_texts

LONG = "word " * 1000  # 5,000 characters


@dataclass(frozen=True)
class Row:
    name: str
    detail: object


def longest(data: object) -> int:
    """The longest text anywhere in the data."""
    if isinstance(data, str):
        return len(data)
    if isinstance(data, dict):
        return max(map(longest, data.values()), default=0)
    if isinstance(data, (list, tuple)):
        return max(map(longest, data), default=0)
    if isinstance(data, Row):
        return max(longest(data.name), longest(data.detail))
    return 0


def test_every_text_is_bounded_in_dicts_lists_tuples_and_dataclasses():
    data = {"rows": [Row(LONG, {"text": LONG, "cells": [1, 2.5, None, (LONG, (LONG, [LONG]))]})],
            "title": LONG, "count": 3}
    bounded = bound_texts(data, limit=1000)
    assert longest(bounded) <= PAGE_TEXT_CHARS + len(ELLIPSIS)  # the names ("name", "title")
    row = bounded["rows"][0]
    cells = row.detail["cells"]
    assert longest({"text": row.detail["text"], "cells": cells}) <= 1000 + len(ELLIPSIS)  # the others: the limit
    assert cells[3][1][1][0].endswith(ELLIPSIS)  # (a list in a tuple in a tuple)
    assert row.name.endswith(ELLIPSIS) and len(row.name) <= PAGE_TEXT_CHARS + 1  # a name: PAGE_TEXT_CHARS at most
    assert bounded["count"] == 3 and row.detail["cells"][:3] == [1, 2.5, None]


def test_names_are_cut_to_a_page_s_text_and_other_texts_to_the_limit():
    bounded = bound_texts({"name": LONG, "text": LONG, "items": [LONG]})
    assert len(bounded["name"]) <= PAGE_TEXT_CHARS + 1
    assert bounded["text"] == LONG and bounded["items"] == [LONG]  # under the default limit (1 MiB)


def test_data_as_deep_as_a_log_made_it_is_walked_without_recursion():
    deep: object = LONG * 300  # 1.5 MB
    for _ in range(100_000):
        deep = [deep]
    bounded = bound_texts(deep)
    for _ in range(100_000):
        bounded = bounded[0]
    assert bounded.endswith(ELLIPSIS) and len(bounded) <= (1 << 20) + 1


def test_short_values_are_left_as_they_are():
    data = {"a": [1, "x", (2, "y")], "name": "n"}
    assert bound_texts(data) is data and data == {"a": [1, "x", (2, "y")], "name": "n"}


def test_rows_are_skipped_whole_only_when_every_cell_is_short():
    """A list of rows (tuples, or dicts) whose cells are plain values and short texts is passed over at C speed; one
    long cell anywhere in it, or a container in a cell, and its rows are walked as before."""
    rows = [(i, f"r{i}", None, 1.5) for i in range(50)]
    named = [{"name": f"n{i}", "count": i} for i in range(50)]
    assert bound_texts({"rows": rows, "named": named}) == {"rows": rows, "named": named}
    rows[37] = (37, LONG * 300, None, 1.5)  # 1.5 MB: over the default limit
    named[12] = {"name": LONG, "count": 12}  # a name: over PAGE_TEXT_CHARS
    nested = [(1, "a"), (2, ["b", LONG * 300])]  # a list in a row
    bounded = bound_texts({"rows": rows, "named": named, "nested": nested})
    assert bounded["rows"][37][1].endswith(ELLIPSIS) and len(bounded["rows"][37][1]) <= (1 << 20) + 1
    assert bounded["rows"][36] == (36, "r36", None, 1.5)
    assert bounded["named"][12]["name"].endswith(ELLIPSIS) and len(bounded["named"][12]["name"]) <= PAGE_TEXT_CHARS + 1
    assert bounded["nested"][1][1][1].endswith(ELLIPSIS) and bounded["nested"][0] == (1, "a")
