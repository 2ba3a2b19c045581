"""vLLM's piecewise compiles (tests/data/vllm_piecewise, a real torch 2.13 trace of a backend that logs
what vLLM logs): the piece_compiles table and the vllm_pieces query, checked against the raw log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import DATA, connect, ingest, scenario_logs, scenario_run

from tlindex.answers.queries import load_queries, run_sql


def raw_pieces() -> list[tuple[int, dict, list[str]]]:
    """(line, start record, names of the records up to the next start) of every piece compile, from the file."""
    lines = scenario_logs("vllm_piecewise")[0].read_text().splitlines()
    pieces: list[tuple[int, dict, list[str]]] = []
    for number, line in enumerate(lines, 1):
        if line.startswith("\t") or "] {" not in line:
            continue
        envelope = json.loads(line.split("] ", 1)[1])
        kind = next(iter(envelope))
        name = envelope[kind].get("name") if isinstance(envelope[kind], dict) else None
        if name == "vllm_piecewise_compile_start":
            pieces.append((number, json.loads(lines[number].lstrip("\t")), []))
        elif pieces and kind in ("dynamo_guards", "dynamo_cpp_guards_str", "compilation_metrics", "dynamo_start"):
            pieces.append((0, {}, []))  # Dynamo's own records end the last piece
        elif pieces and pieces[-1][0]:
            pieces[-1][2].append(name or kind)
    return [piece for piece in pieces if piece[0]]


@pytest.fixture(scope="module")
def vllm_db(tmp_path_factory) -> Path:
    """The vllm_piecewise fixture ingested alone."""
    path = tmp_path_factory.mktemp("vllm") / "vllm.db"
    ingest(path, [str(DATA / "vllm_piecewise")], jobs=1)
    return path


def test_every_piece_compile_is_a_row_with_its_graph_and_code(vllm_db):
    conn = connect(vllm_db)
    (run,) = scenario_run(conn, "vllm_piecewise")
    rows = [dict(row) for row in run_sql(conn, load_queries()["vllm_pieces"].sql, {"run": str(run)})]
    raw = raw_pieces()
    assert len(rows) == len(raw) == 9
    for row, (line, start, names) in zip(rows, raw):
        for field in ("piecewise_index", "submod_name", "compile_range_start", "compile_range_end",
                      "total_piecewise_compiles"):
            assert row[field] == start[field], field
        assert row["is_single_size"] == int(start["is_single_size"])
        assert row["is_cudagraph_capture_size"] == int(start["is_cudagraph_capture_size"])
        graph = conn.execute("SELECT a.name, e.line FROM artifacts a JOIN envelopes e ON e.id = a.envelope_id "
                             "WHERE a.id = ?", (row["graph_artifact"],)).fetchone()
        assert graph["name"] == f"vllm_submod_{start['piecewise_index']}" and graph["line"] > line
        assert ("inductor_output_code" in names) == (row["output_code_artifact"] is not None)
        assert row["compile_id"] == "0/0" and row["compile_call"] == 1
    hits = [row for row in rows if row["cache"] and "fx_graph hit" in row["cache"]]
    assert len(hits) == 1 and hits[0]["compile_range_start"] == 4  # the same piece compiled twice: a hit
    assert {(r["compile_range_start"], r["compile_range_end"]) for r in rows} == {(1, 16), (4, 4), (8, 8)}
