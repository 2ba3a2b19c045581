"""Cells that name a compile, payload, artifact or run, linked to their tlindex pages."""

from __future__ import annotations

import re

from markupsafe import Markup

from tlindex.render.urls import Urls
from tlindex.store.tables import METRICS_CONFIGS

HASH_COLUMNS = {"payload", *METRICS_CONFIGS}
HASH_RE = re.compile(r"^[0-9a-f]{32}$")


def _value(value):
    return value.get("value") if isinstance(value, dict) else value


def _row_get(row, key):
    try:
        return row[key]
    except (KeyError, IndexError, TypeError):
        return None


def cell_link(urls: Urls, row, column: str, value, table: str | None = None) -> Markup | None:
    """The cell as a link to its tlindex page, or None when it names nothing tlindex shows."""
    raw = _value(value)
    if raw is None:
        return None
    if column == "compile" and isinstance(raw, int):
        label = _row_get(row, "compile_id") or f"compile {raw}"
        return Markup('<a href="{}">{}</a>').format(urls.compile(raw), label)
    if column == "compile_id" and isinstance(_value(_row_get(row, "compile")), int):
        return Markup('<a href="{}">{}</a>').format(urls.compile(_value(_row_get(row, "compile"))), raw)
    if table == "compiles" and column in ("id", "compile_id") and isinstance(_value(_row_get(row, "id")), int):
        # Datasette's own compiles table: the row's id and compile id lead to tlindex's compile page
        return Markup('<a href="{}">{}</a>').format(urls.compile(_value(_row_get(row, "id"))), raw)
    if (column in HASH_COLUMNS or (table == "payloads" and column == "hash")) and \
            isinstance(raw, str) and HASH_RE.match(raw):
        return Markup('<a href="{}" title="{}">{}…</a>').format(urls.payload(raw), raw, raw[:10])
    if column == "artifact" and isinstance(raw, int):
        return Markup('<a href="{}">artifact {}</a>').format(urls.artifact(raw), raw)
    if column == "run_id" and isinstance(raw, int):
        return Markup('<a href="{}">run {}</a>').format(urls.run(raw), raw)
    return None
