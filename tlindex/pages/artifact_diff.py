"""The artifact diff page: any two artifacts (of any runs) side by side, their payloads' changed hunks.

Two artifacts are picked on the tree page (two boxes ticked) or from an artifact page ("diff with…" carries it
to the tree as the first choice). Each payload is compared up to DIFF_CHARS characters and DIFF_LINES lines
(the page says what was cut); JSON is pretty-printed first, as the artifact page shows it; `?mask=1` masks the
names and numbers torch takes from process-wide counters (tlindex.answers.counters), as `tlindex diff` does.
"""

from __future__ import annotations

import sqlite3

from tlindex.answers.artifacts import artifact_start
from tlindex.answers.counters import mask_counters
from tlindex.errors import NotFound, UsageError
from tlindex.pages.hunks import changed_lines, hunks
from tlindex.pages.languages import language, pretty_json
from tlindex.pages.rows import Args

DIFF_CHARS = 1_000_000  # of each payload
DIFF_LINES = 5_000  # of each payload: up to hunks.EXACT_LIMIT, the comparison is exact


def picked_pair(args: Args) -> tuple[int, int]:
    """The two artifacts of `?a=A&b=B`, or of two ticked boxes (`?artifact=A&artifact=B`)."""
    a, b = args.integer("a"), args.integer("b")
    if a is not None and b is not None:
        return a, b
    ticked = list(dict.fromkeys(args.integers("artifact")))
    if a is not None and len(ticked) == 1 and ticked[0] != a:
        return a, ticked[0]
    if a is None and b is None and len(ticked) == 2:
        return ticked[0], ticked[1]
    raise UsageError(f"Pick two artifacts: a=ID and b=ID (or tick two on the tree page: {len(ticked)} ticked)")


def _side(conn: sqlite3.Connection, artifact: int) -> dict:
    """One artifact, its compile and run, and the start of its payload (up to DIFF_CHARS + 1 characters)."""
    found = artifact_start(conn, artifact, DIFF_CHARS + 1)
    if found is None:
        raise NotFound(f"No artifact {artifact}")
    return found


def compared_text(side: dict, mask: bool) -> str:
    """What is compared of a side's payload: cut to DIFF_CHARS and DIFF_LINES (side["cut"] says where), JSON
    pretty-printed when whole, counters masked on request."""
    text = side.pop("text") or ""
    side["lang"] = language(side["kind"], side["name"], side["encoding"], text)
    side["cut"] = None
    if len(text) > DIFF_CHARS:
        text, side["cut"] = text[:DIFF_CHARS], f"the first {DIFF_CHARS:,} characters"
    elif side["lang"] == "json":
        pretty = pretty_json(text)
        if pretty is None:
            side["lang"] = "text"
        else:
            text = pretty
    lines = text.split("\n")
    if len(lines) > DIFF_LINES:
        text, side["cut"] = "\n".join(lines[:DIFF_LINES]), f"the first {DIFF_LINES:,} lines"
    side["lines"] = min(len(lines), DIFF_LINES) if text else 0
    return mask_counters(text) if mask else text


def artifact_diff_data(conn: sqlite3.Connection, args: Args) -> dict:
    """Two artifacts' payloads side by side: the changed hunks with context, what was cut, whether they are one."""
    a_id, b_id = picked_pair(args)
    mask = args.get("mask", "") not in ("", "0")
    a, b = _side(conn, a_id), _side(conn, b_id)
    a_text, b_text = compared_text(a, mask), compared_text(b, mask)
    found = hunks(a_text, b_text)
    return {"artifact_a": a, "artifact_b": b, "mask": mask,
            "same_payload": a["payload"] is not None and a["payload"] == b["payload"],
            "lang": a["lang"] if a["lang"] == b["lang"] else "text",
            "hunks": found, "changed": changed_lines(found), "no_payload": [s["id"] for s in (a, b) if not s["payload"]]}
