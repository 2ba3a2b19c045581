"""The stack trie page of a run (every rank, or one), and one node's children (loaded when it opens)."""

from __future__ import annotations

import sqlite3

from tlindex.answers.resume_functions import run_compiles_with_bytecode
from tlindex.answers.trie import build_trie, find, size
from tlindex.errors import NotFound
from tlindex.pages.rows import Args, dicts, one

ANONYMOUS_SHOWN = 50  # [-/-] compiles listed (one per process and reset); the rest in the compiles table


def rank_arg(args: Args) -> int | None:
    """?rank=N for one rank's trie; absent (or `all`) for every rank."""
    return None if args.get("rank") == "all" else args.integer("rank")


def trie_data(conn: sqlite3.Connection, args: Args, run: int) -> dict:
    found = one(conn, "SELECT * FROM runs WHERE id = ?", (run,))
    if found is None:
        raise NotFound(f"No run {run}")
    rank = rank_arg(args)
    ranks = [r[0] for r in conn.execute("SELECT DISTINCT rank FROM sources WHERE run_id = ? ORDER BY rank", (run,))]
    # records without a compile id are those of the [-/-] compiles: found through them, not every envelope
    unknown = dicts(conn.execute("""
        SELECT e.kind, count(*) AS n FROM compiles c CROSS JOIN envelopes e
        WHERE c.run_id = ? AND (? IS NULL OR c.rank = ?) AND c.compile_id = '-/-' AND e.compile = c.id
          AND e.compile_id = '-/-'
          AND EXISTS (SELECT 1 FROM frames f WHERE f.envelope_id = e.id AND f.stack = 'context')
        GROUP BY e.kind ORDER BY n DESC, e.kind""", (run, rank, rank)))
    anonymous = dicts(conn.execute("""
        SELECT id, rank, status, fail_type, envelope_count FROM compiles
        WHERE run_id = ? AND (? IS NULL OR rank = ?) AND compile_id = '-/-' ORDER BY rank, id LIMIT ?""",
        (run, rank, rank, ANONYMOUS_SHOWN + 1)))
    trie = build_trie(conn, run, rank)
    return {"run": found, "rank": rank, "ranks": ranks, "trie": trie, "nodes": size(trie) - 1,
            "unknown": unknown, "anonymous": anonymous[:ANONYMOUS_SHOWN],
            "more_anonymous": len(anonymous) > ANONYMOUS_SHOWN,
            "with_bytecode": run_compiles_with_bytecode(conn, run)}


def trie_node_data(conn: sqlite3.Connection, args: Args, run: int, node: int) -> dict:
    rank = rank_arg(args)
    found = find(build_trie(conn, run, rank), node)
    if found is None:
        raise NotFound("No such trie node")
    return {"run": run, "rank": rank, "node": found, "with_bytecode": run_compiles_with_bytecode(conn, run)}
