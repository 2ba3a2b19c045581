"""The stack trie page of a run (every rank, or one), and one node's children (loaded when it opens)."""

from __future__ import annotations

import sqlite3

from tlindex.answers import compiles
from tlindex.answers.resume_functions import run_compiles_with_bytecode
from tlindex.answers.runs import run_row
from tlindex.answers.trie import anonymous_compiles, build_trie, find, run_ranks, size, unattributed_kinds
from tlindex.errors import NotFound
from tlindex.pages.rows import Args
from tlindex.pages.run import WHOLE_TRACE_UP_TO

ANONYMOUS_SHOWN = 50  # [-/-] compiles listed (one per process and reset); the rest in the compiles table


def rank_arg(args: Args) -> int | None:
    """?rank=N for one rank's trie; absent (or `all`) for every rank."""
    return None if args.get("rank") == "all" else args.integer("rank")


def trie_data(conn: sqlite3.Connection, args: Args, run: int) -> dict:
    found = run_row(conn, run)
    if found is None:
        raise NotFound(f"No run {run}")
    rank = rank_arg(args)
    ranks = run_ranks(conn, run)
    unknown = unattributed_kinds(conn, run, rank)
    anonymous = anonymous_compiles(conn, run, rank, ANONYMOUS_SHOWN + 1)
    trie = build_trie(conn, run, rank)
    groups = [{"like": int(g[0]) if g[0].lstrip("-").isdigit() else g[0], "count": len(g)}
              for g in compiles.rank_groups(conn, run)] if len(ranks) > WHOLE_TRACE_UP_TO else []
    return {"run": found, "rank": rank, "ranks": ranks, "groups": groups,
            "rank_apart": rank is not None and rank not in [g["like"] for g in groups],  # not a group's first
            "trie": trie, "nodes": size(trie) - 1,
            "unknown": unknown, "anonymous": anonymous[:ANONYMOUS_SHOWN],
            "more_anonymous": len(anonymous) > ANONYMOUS_SHOWN,
            "with_bytecode": run_compiles_with_bytecode(conn, run, rank)}


def trie_node_data(conn: sqlite3.Connection, args: Args, run: int, node: int) -> dict:
    rank = rank_arg(args)
    found = find(build_trie(conn, run, rank), node)
    if found is None:
        raise NotFound("No such trie node")
    return {"run": run, "rank": rank, "node": found, "with_bytecode": run_compiles_with_bytecode(conn, run, rank)}
