"""The vLLM page: a run's compile calls, their configs, split graphs and pieces by range."""

from __future__ import annotations

import json
import sqlite3

from datasette.utils.asgi import NotFound

from tlindex.answers.vllm import compile_calls, has_vllm, lone_misses, pass_compiles, slowest_range

from ..database import int_var, open_database, render


def vllm_data(conn: sqlite3.Connection, run_id: int) -> dict | None:
    if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone() is None or not has_vllm(conn, run_id):
        return None
    calls, shared = compile_calls(conn, run_id)
    slowest = slowest_range(calls)
    return {"run_id": run_id, "calls": calls, "shared": shared,
            "slowest": {"call": slowest[0].number, "range": slowest[1].label, "seconds": slowest[1].seconds}
            if slowest else None,
            "lone_misses": lone_misses(calls),
            "pass_compiles": [{"compile": row, "compile_id": cid, "graphs": n}
                              for row, cid, n in pass_compiles(conn, run_id)] if not calls else []}


def setting(value) -> str:
    """A config value as one line of JSON (strings without their quotes)."""
    return value if isinstance(value, str) else json.dumps(value)


async def vllm_page(datasette, request):
    opened = await open_database(datasette, request)
    run_id = int_var(request, "run")
    data = await opened.db.execute_fn(lambda conn: vllm_data(conn, run_id))
    if data is None:
        raise NotFound(f"Run {run_id} logged no vLLM records")
    return await render(datasette, request, "vllm.html", {"database": opened.db.name, "u": opened.urls,
                                                          "setting": setting, **data})
