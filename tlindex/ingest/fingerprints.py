"""Fingerprints of each compile, written when its rows are merged: equal prints, equal contents.

Pages compare compiles by these instead of reading every row behind them: the diff reads guard
lines, graph breaks, caches, graphs and symbols only for pairs whose prints differ, and the stack
trie reads one stack per distinct `stack_print`. A print is NULL when it is not known (a database
written before its column): readers then read the rows themselves. Prints are 64-bit hashes of a
canonical JSON text of the rows, so a collision is negligible; unequal prints only mean "look".
"""

from __future__ import annotations

import hashlib
import sqlite3

from tlindex.store.kinds import GRAPH_KINDS

_GRAPHS = ", ".join(f"'{kind}'" for kind in GRAPH_KINDS)

# column of compiles -> the subquery that computes it for the row main.compiles
PRINTS = {
    # count and sum of its distinct guard identities (guards.identity: process addresses masked)
    "guards_print": "SELECT count(DISTINCT identity) || ':' || coalesce(sum(DISTINCT identity), 0) "
                    "FROM main.guards g WHERE g.compile = main.compiles.id",
    # its dynamo_start stack, as the frames rows resolved it (NULL when it logged none)
    "stack_print": "SELECT CASE WHEN count(*) THEN tlindex_hash(json_group_array(json_array(filename, line, name, loc))) "
                   "END FROM (SELECT filename, line, name, loc FROM main.frames f "
                   "WHERE f.envelope_id = main.compiles.dynamo_start AND f.stack = 'stack' ORDER BY f.depth)",
    # what tlindex.answers.diff compares beyond the compiles row: break reasons, cache results, graphs, symbols
    "content_print": "SELECT tlindex_hash(json_array("
                     "(SELECT json_group_array(reason) FROM (SELECT DISTINCT reason FROM main.graph_break_events "
                     " WHERE compile = main.compiles.id ORDER BY reason)), "
                     "(SELECT json_group_array(json_array(cache, result)) FROM (SELECT cache, result "
                     " FROM main.cache_events WHERE compile = main.compiles.id ORDER BY cache, id)), "
                     "(SELECT json_group_array(json_array(kind, payload)) FROM (SELECT DISTINCT kind, payload "
                     f" FROM main.artifacts WHERE compile = main.compiles.id AND kind IN ({_GRAPHS}) ORDER BY kind, payload)), "
                     "(SELECT json_group_array(json_array(symbol, value_range)) FROM (SELECT DISTINCT symbol, value_range "
                     " FROM main.symbols WHERE compile = main.compiles.id ORDER BY symbol, value_range))))",
}


# the indexes the prints' subqueries read through (a staging database, as Spark tasks print it, has none)
READ_THROUGH = {"guards": "compile", "frames": "envelope_id", "graph_break_events": "compile",
                "cache_events": "compile", "artifacts": "compile", "symbols": "compile"}


def text_hash(text: str | None) -> int | None:
    """A signed 64-bit hash of a text (blake2b), the same in every process."""
    if text is None:
        return None
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def write_prints(conn: sqlite3.Connection, which: str = "", index: bool = False) -> None:
    """Compute every print of the compiles `which` selects (a WHERE clause on main.compiles; all if empty).

    `index`: first index the tables the prints read (for a database without the schema's indexes).
    """
    conn.create_function("tlindex_hash", 1, text_hash, deterministic=True)
    for table, column in READ_THROUGH.items() if index else ():
        conn.execute(f"CREATE INDEX IF NOT EXISTS main.prints_{table} ON {table}({column})")
    sets = ", ".join(f"{column} = ({subquery})" for column, subquery in PRINTS.items())
    try:
        conn.execute(f"UPDATE main.compiles SET {sets} {which}")
    except sqlite3.DataError:
        # A compile whose rows join into a text past the connection's limit (tlindex.store.limits; only a
        # hostile log's: break reasons longer together than that): its prints NULL, "not known", the others one by one.
        for (compile_row,) in conn.execute(f"SELECT id FROM main.compiles {which}").fetchall():
            try:
                conn.execute(f"UPDATE main.compiles SET {sets} WHERE id = ?", (compile_row,))
            except sqlite3.DataError:
                conn.execute(f"UPDATE main.compiles SET {', '.join(f'{c} = NULL' for c in PRINTS)} WHERE id = ?",
                             (compile_row,))
