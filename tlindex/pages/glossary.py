"""The glossary page: every word of the pages, a sentence or two each, by section (tlindex.answers.glossary)."""

from __future__ import annotations

import sqlite3

from tlindex.answers.glossary import SECTIONS, terms
from tlindex.pages.rows import Args


def glossary_data(conn: sqlite3.Connection | None, args: Args) -> dict:
    """The sections of the glossary, each with its words (it reads no database: `tlindex show glossary` needs none)."""
    words = terms()
    return {"sections": [{"id": section, "title": title, "terms": [t for t in words if t.section == section]}
                         for section, title in SECTIONS.items()]}
