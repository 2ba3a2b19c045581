"""Collective schedules, collective calls in generated code, op estimates and graph execution
order (tests/data/collectives_3ranks), checked against the logs read independently of tlindex."""

from __future__ import annotations

import json
import re
from collections import defaultdict

import pytest
from conftest import SHARED_CORPUS, connect, ingest, scenario_logs, scenario_run

from tlindex.answers.queries import load_queries, run_sql
from tlindex.ingest.normalize.collectives import collective_of

ENVELOPE_RE = re.compile(r"^[VIWEC]\d{4} [\d:.]+ +\d+ .+?:\d+\] (\{.*\})$")
RANK_RE = re.compile(r"_rank_(\d+)_")


def records(path) -> list[tuple[int, dict, str]]:
    """(line number, envelope, payload text) of every envelope of a log, read without tlindex."""
    found: list[tuple[int, dict, list[str]]] = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            line = line.rstrip("\n")
            if line.startswith("\t") and found:
                found[-1][2].append(line[1:])
            elif (match := ENVELOPE_RE.match(line)):
                found.append((number, json.loads(match.group(1)), []))
    return [(number, envelope, "\n".join(payload)) for number, envelope, payload in found]


def artifacts(path, name: str) -> list[tuple[int, dict, str]]:
    return [r for r in records(path) if r[1].get("artifact", {}).get("name") == name]


def compile_id(envelope: dict) -> str:
    return f"{envelope['frame_id']}/{envelope['frame_compile_id']}"


def logs_by_rank() -> dict[int, object]:
    return {int(RANK_RE.search(p.name).group(1)): p for p in scenario_logs("collectives_3ranks")}


def rows_by_line(conn, path, columns: str, table: str, where: str = "1") -> dict[int, list]:
    """{envelope line: [columns of table's rows]} for one log file, in envelope line and position order."""
    grouped = defaultdict(list)
    for line, *rest in conn.execute(
            f"SELECT e.line, {columns} FROM {table} t JOIN envelopes e ON e.id = t.envelope_id "
            f"JOIN sources s ON s.id = e.source_id JOIN files f ON f.id = s.file_id "
            f"WHERE f.path = ? AND {where} ORDER BY e.line, t.position", (str(path),)):
        grouped[line].append(tuple(rest))
    return dict(grouped)


def test_collective_schedules_are_stored_in_order(db):
    for path in logs_by_rank().values():
        expected = {line: [(i, op, collective_of(op)) for i, op in enumerate(json.loads(text))]
                    for line, _, text in artifacts(path, "inductor_collective_schedule")}
        assert expected  # every rank compiled graphs with collectives
        got = rows_by_line(db, path, "t.position, t.op, t.collective", "collective_ops", "t.origin = 'schedule'")
        assert got == expected


def test_collective_calls_in_generated_code_are_found(db):
    call = re.compile(r"^\s+(?:\w+ = )?torch\.ops\._c10d_functional\.(\w+)\.default\(")
    for path in logs_by_rank().values():
        expected = {}
        for line, envelope, text in records(path):
            if "inductor_output_code" in envelope:
                calls = [m.group(1) for code_line in text.splitlines() if (m := call.match(code_line))]
                if calls:
                    expected[line] = [(i, f"torch.ops._c10d_functional.{op}.default") for i, op in enumerate(calls)]
        assert expected
        got = rows_by_line(db, path, "t.position, t.op", "collective_ops", "t.origin = 'code'")
        assert got == expected


def test_op_estimates_and_execution_order_are_stored(db):
    for path in logs_by_rank().values():
        estimates = {line: [(i, op["name"], op["type"], op["estimated_runtime_ns"], json.dumps(op["outputs"],
                                                                                              separators=(",", ":")))
                            for i, op in enumerate(json.loads(text)["ops"])]
                     for line, _, text in artifacts(path, "inductor_runtime_and_tensor_meta")}
        assert estimates
        got = rows_by_line(db, path, "t.position, t.op, t.type, t.estimated_runtime_ns, t.outputs", "op_estimates")
        assert got == estimates
        order = {line: [(i, entry["compile_id"]) for i, entry in enumerate(json.loads(text)["graph_execution_order"])]
                 for line, _, text in artifacts(path, "graph_execution")}
        assert order
        got = rows_by_line(db, path, "t.position, t.compile_id", "graph_executions")
        assert got == order


def schedules_from_logs() -> dict[str, dict[int, tuple]]:
    """{compile id: {rank: its scheduled ops}} from the logs."""
    found: dict[str, dict[int, tuple]] = defaultdict(dict)
    for rank, path in logs_by_rank().items():
        for _, envelope, text in artifacts(path, "inductor_collective_schedule"):
            found[compile_id(envelope)][rank] = found[compile_id(envelope)].get(rank, ()) + tuple(json.loads(text))
    return found


def test_rank_divergence_finds_the_rank_that_schedules_other_collectives(db):
    (run,) = scenario_run(db, "collectives_3ranks")
    findings = [dict(r) for r in run_sql(db, load_queries()["rank_divergence"].sql, {"run": run})]
    schedule = defaultdict(list)  # a row per group of ranks that scheduled alike
    for f in findings:
        if f["finding"] == "collective_schedule":
            schedule[f["compile_id"]].append(f)
    diverging = {cid for cid, ranks in schedules_from_logs().items() if len(set(ranks.values())) > 1}
    assert diverging and set(schedule) == diverging
    for cid in diverging:
        by_ops = defaultdict(list)
        for rank, ops in sorted(schedules_from_logs()[cid].items()):
            by_ops[ops].append(rank)
        assert sorted((row["ranks"], row["detail"]) for row in schedule[cid]) == sorted(
            (", ".join(map(str, ranks)), " ".join(collective_of(op) for op in ops)) for ops, ranks in by_ops.items())


def test_rank_divergence_finds_the_rank_that_ran_other_graphs(db):
    (run,) = scenario_run(db, "collectives_3ranks")
    findings = [dict(r) for r in run_sql(db, load_queries()["rank_divergence"].sql, {"run": run})]
    orders = {rank: [e["compile_id"] for e in json.loads(artifacts(path, "graph_execution")[-1][2])["graph_execution_order"]]
              for rank, path in logs_by_rank().items()}
    assert len({tuple(o) for o in orders.values()}) > 1
    groups = {f["detail"]: f["ranks"] for f in findings if f["finding"] == "execution_order"}  # a row per group
    for rank, graphs in orders.items():
        assert str(rank) in groups[f"{len(graphs)} graph runs ({' '.join(graphs)})"].split(", ")
    assert not [f for f in findings if f["finding"] == "estimated_runtime"]  # CPU estimates are all 0 here
    assert {f["compile_id"] for f in findings if f["finding"] == "tensor_meta"} == \
        {f["compile_id"] for f in findings if f["finding"] == "collective_schedule"}


def test_collectives_query_checks_schedule_against_code(db):
    (run,) = scenario_run(db, "collectives_3ranks")
    rows = [dict(r) for r in run_sql(db, load_queries()["collectives"].sql, {"run": run})]
    scheduled = schedules_from_logs()
    with_schedule = [r for r in rows if r["schedule"] is not None]
    assert {(r["compile_id"], r["rank"]) for r in with_schedule} == \
        {(cid, rank) for cid, ranks in scheduled.items() for rank in ranks}
    for row in with_schedule:
        assert row["schedule"] == " ".join(collective_of(op) for op in scheduled[row["compile_id"]][row["rank"]])
        assert (row["parity"], row["unmatched_collectives"], row["missing_waits"]) == ("ok", 0, 0)


def test_a_graph_whose_code_lost_a_wait_is_flagged(tmp_path):
    """Hand-made from rank 1's real log: one wait_tensor call deleted from its output code (md5 now fails)."""
    path = logs_by_rank()[1]
    lines = path.read_text().splitlines(keepends=True)
    (victim,) = [i for i, line in enumerate(lines)
                 if "torch.ops._c10d_functional.wait_tensor.default(buf0)" in line and "#" not in line][1:2]
    edited = tmp_path / path.name
    edited.write_text("".join(lines[:victim] + lines[victim + 1:]))
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(edited)], jobs=1)
    conn = connect(db_path)
    rows = [dict(r) for r in run_sql(conn, load_queries()["collectives"].sql, {})]
    bad = [r for r in rows if r["parity"] == "mismatch"]
    assert len(bad) == 1 and bad[0]["missing_waits"] == 1 and bad[0]["unmatched_collectives"] == 0
    assert bad[0]["code"] == "all_reduce wait all_reduce"
    assert conn.execute("SELECT count(*) FROM ingest_errors WHERE kind = 'md5_mismatch'").fetchone()[0] == 1


@pytest.mark.skipif(not SHARED_CORPUS.is_dir(), reason="../shared/corpus/tlparse is absent")
def test_tlparse_multi_rank_schedule_corpus(tmp_path):
    """tlparse's own expectation: rank 0 schedules 6 ops for graph 0/0, (edited) rank 1 only 4.

    In these inputs rank 2 is a byte-identical copy of rank 0 (kept as its own file, marked
    files.copy_of) and every file's envelopes say rank 0, so tlindex compares each schedule
    with its generated code instead.
    """
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(SHARED_CORPUS / "multi_rank_schedule")], jobs=1)
    conn = connect(db_path)
    counts = dict(conn.execute(
        "SELECT f.name, count(*) FROM collective_ops o JOIN compiles c ON c.id = o.compile "
        "JOIN sources s ON s.id = c.source_id JOIN files f ON f.id = s.file_id "
        "WHERE o.origin = 'schedule' AND c.compile_id = '0/0' GROUP BY f.name").fetchall())
    assert counts == {"dedicated_log_torch_trace_rank_0_6u3fubwl.log": 6,
                      "dedicated_log_torch_trace_rank_1_n8zycf07.log": 4,
                      "dedicated_log_torch_trace_rank_2.log": 6}
    assert [tuple(r) for r in conn.execute("SELECT f.name, o.name FROM files f JOIN files o ON o.id = f.copy_of")] == \
        [("dedicated_log_torch_trace_rank_2.log", "dedicated_log_torch_trace_rank_0_6u3fubwl.log")]
    rows = [dict(r) for r in run_sql(conn, load_queries()["collectives"].sql, {})]
    assert [(r["compile_id"], r["parity"], r["unmatched_collectives"]) for r in rows if r["parity"] != "ok"] == \
        [("0/0", "mismatch", 1)]
