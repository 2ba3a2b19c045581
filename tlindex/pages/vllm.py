"""The vLLM page: a run's compile calls, their configs, split graphs and pieces by range."""

from __future__ import annotations

import sqlite3

from tlindex.answers.runs import run_exists
from tlindex.answers.vllm import compile_calls, has_vllm, lone_misses, pass_compiles, slowest_range
from tlindex.errors import NotFound
from tlindex.pages.rows import Args


def vllm_data(conn: sqlite3.Connection, args: Args, run: int) -> dict:
    if not run_exists(conn, run) or not has_vllm(conn, run):
        raise NotFound(f"Run {run} logged no vLLM records")
    calls, shared = compile_calls(conn, run)
    slowest = slowest_range(calls)
    return {"run_id": run, "calls": calls, "shared": shared,
            "slowest": {"call": slowest[0].number, "range": slowest[1].label, "seconds": slowest[1].seconds}
            if slowest else None,
            "lone_misses": lone_misses(calls),
            "pass_compiles": [{"compile": row, "compile_id": cid, "graphs": n}
                              for row, cid, n in pass_compiles(conn, run)] if not calls else []}
