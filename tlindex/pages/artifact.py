"""The artifact page (one record's payload, with line anchors) and the payload page (a payload by its hash)."""

from __future__ import annotations

import sqlite3

from tlindex.answers.artifacts import artifact_row, payload_artifacts, payload_row
from tlindex.errors import NotFound
from tlindex.pages.languages import json_value, language
from tlindex.pages.rows import Args


def artifact_data(conn: sqlite3.Connection, args: Args, artifact: int) -> dict:
    found = artifact_row(conn, artifact)
    if found is None:
        raise NotFound(f"No artifact {artifact}")
    whole = found.pop("text")
    text, cut = payload_head(whole)
    return {"artifact": found, "text": text, "lang": language(found["kind"], found["name"], found["encoding"], whole or ""),
            "stack_traces": kernel_stack_traces(found, text if cut is None else None), "cut": cut}


# What a page shows of a payload: its head, up to here (a line's end when one is near). A payload may be 64 MiB; its
# page, highlighted, is 8-10 times its text (a 66 MB JSON payload made 540 MB of HTML and a 3.8 GB server). The
# whole text is one click away, its raw download (`payload/HASH.txt`, the report's `payloads/HASH.txt`).
PAGE_PAYLOAD_CHARS = 1 << 20


def payload_head(text: str | None) -> tuple[str | None, str | None]:
    """A payload's text as a page shows it, and None, or its head and what was cut ("the first N of M characters")."""
    if text is None or len(text) <= PAGE_PAYLOAD_CHARS:
        return text, None
    end = text.rfind("\n", PAGE_PAYLOAD_CHARS // 2, PAGE_PAYLOAD_CHARS) + 1 or PAGE_PAYLOAD_CHARS
    return text[:end], f"the first {end:,} of {len(text):,} characters"


def kernel_stack_traces(artifact: dict, text: str | None) -> list[tuple[str, list[str]]]:
    """inductor_provenance_tracking_kernel_stack_traces as (kernel, [user stack traces]) (tlparse's _readable)."""
    if artifact["name"] != "inductor_provenance_tracking_kernel_stack_traces" or not text:
        return []
    traces = json_value(text)
    if not isinstance(traces, dict):
        return []
    return [(str(kernel), [str(t) for t in (value if isinstance(value, list) else [value])])
            for kernel, value in traces.items()]


PAYLOAD_ARTIFACTS_SHOWN = 50


def payload_data(conn: sqlite3.Connection, args: Args, hash: str, ext: str = "") -> dict:
    """A payload by hash, and the artifacts that carry it (its raw text with ext `.txt`)."""
    found = payload_row(conn, hash)
    if found is None:
        raise NotFound(f"No payload {hash}")
    found["artifacts"] = payload_artifacts(conn, hash, PAYLOAD_ARTIFACTS_SHOWN)
    first = found["artifacts"][0] if found["artifacts"] else {}
    lang = language(first.get("kind"), first.get("name"), None, found["text"])
    cut = None
    if ext != ".txt":  # the raw text is the whole one
        found["text"], cut = payload_head(found["text"])
    return {"payload": found, "raw": ext == ".txt", "lang": lang, "cut": cut}
