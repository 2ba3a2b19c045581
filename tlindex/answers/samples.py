"""Real values of a database, the first ones first, as SQL: what the tests and benchmarks fill a page's path with
(each placeholder's `sample`, tlindex.pages.declare)."""

from __future__ import annotations

PAYLOAD_HASHES = "SELECT hash FROM payload_data ORDER BY hash"
PROVENANCE_MAPPINGS = ("SELECT id FROM artifacts WHERE name = 'inductor_provenance_tracking_node_mappings' "
                       "AND payload IS NOT NULL ORDER BY id")


def ids(table: str, order: str = "") -> str:
    """The ids of a table's rows, in order (`order` " DESC": the last first)."""
    return f"SELECT id FROM {table} ORDER BY id{order}"


def values(*given: int | str) -> str:
    """These values, in order."""
    return " UNION ALL ".join(f"SELECT {_literal(value)}" for value in given)


def _literal(value: int | str) -> str:
    return str(value) if isinstance(value, int) else "'" + value.replace("'", "''") + "'"
