"""The provenance page (tlparse -i): pre-grad graph, post-grad graph and generated code, linked line to line."""

from __future__ import annotations

import sqlite3

from tlindex.answers.provenance import MAPPINGS, provenance_data
from tlindex.errors import NotFound
from tlindex.pages.rows import Args


def provenance_page_data(conn: sqlite3.Connection, args: Args, artifact: int) -> dict:
    found = provenance_data(conn, artifact)
    if found is None:
        raise NotFound(f"Artifact {artifact} is not an {MAPPINGS} artifact with a payload "
                       "(logged with INDUCTOR_PROVENANCE=1)")
    return found
