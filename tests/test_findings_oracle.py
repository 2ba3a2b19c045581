"""Findings an engineer acts on, read back from the raw logs: each finding's input, line and value is found here by
a reader of the log lines written apart from tlindex (regular expressions over the envelopes and their payloads),
never from tlindex's tables."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import ENVELOPE_RE, VERSIONS, connect, ingest, scenario_logs, scenario_run

from tlindex.answers.findings import findings
from tlindex.answers.queries import load_queries
from tlindex.cli import cli

V215 = VERSIONS / "2.15.0"
FRAME = re.compile(r'File "([^"]+)", line (\d+), in \S+\n\s+(.+)')


def records(paths: list[Path]) -> list[tuple[dict, str]]:
    """Every record of the logs: its envelope and its payload text (tabs removed), in file order."""
    out: list[list] = []
    for path in paths:
        for line in path.read_text(errors="replace").split("\n"):
            if line.startswith("\t") and out:
                out[-1][1].append(line[1:])
                continue
            match = ENVELOPE_RE.match(line.encode())
            if match:
                out.append([json.loads(match.group(1)), []])
    return [(envelope, "\n".join(lines)) for envelope, lines in out]


def by_compile(paths: list[Path]) -> dict[tuple, list[tuple[dict, str]]]:
    """Records grouped by (file, rank, frame id, frame compile id), for a log whose ids do not repeat."""
    found = defaultdict(list)
    for path in paths:
        for envelope, payload in records([path]):
            if "frame_id" in envelope:
                found[(path.name, envelope.get("rank"), envelope["frame_id"], envelope["frame_compile_id"])].append(
                    (envelope, payload))
    return found


def artifact(recs: list[tuple[dict, str]], name: str) -> list[str]:
    return [payload for envelope, payload in recs if envelope.get("artifact", {}).get("name") == name]


def metrics(recs: list[tuple[dict, str]]) -> dict:
    return next((e["compilation_metrics"] for e, _ in recs if "compilation_metrics" in e), {})


def user_frame(text: str) -> tuple[str, int, str] | None:
    """The innermost frame of a traceback outside any installed package or Python itself."""
    frames = [(file, int(line), code.strip()) for file, line, code in FRAME.findall(text)
              if "-packages/" not in file and not re.search(r"/lib/python3\.\d+/", file)]
    return frames[-1] if frames else None


@pytest.fixture(scope="module")
def v215(tmp_path_factory):
    """The version matrix's recompile-limit and flex-attention scenarios (torch 2.15.0), one run each."""
    path = tmp_path_factory.mktemp("v215") / "traces.db"
    for scenario in ("recompile_limit_stances", "flex_attention"):
        assert not ingest(path, [str(V215 / scenario)], run_label=scenario, jobs=1).problems
    conn = connect(path)
    yield path, conn
    conn.close()


def of(conn, label: str) -> dict[str, list]:
    (run,) = [r[0] for r in conn.execute("SELECT id FROM runs WHERE label = ?", (label,))]
    found = defaultdict(list)
    for finding in findings(conn, run):
        found[finding.kind].append(finding)
    return found


def first_reasons(paths: list[Path]) -> list[tuple[str, str]]:
    """(function, first failed guard) of each recompile: the first reason of its recompile_reasons artifact."""
    out, compiled = [], by_compile(paths)
    names = {key[:3]: metrics(recs)["co_name"] for key, recs in compiled.items() if metrics(recs).get("co_name")}
    for key, recs in compiled.items():  # (the limit's compilation_metrics names no function: its frame's do)
        reasons = artifact(recs, "recompile_reasons")
        if reasons:
            listed = json.loads(reasons[0]) if reasons[0].startswith("[") else [reasons[0]]
            out.append((names.get(key[:3]), listed[0].split(": ", 1)[1].split("\n")[0]))
    return out


def input_of(guard: str) -> tuple[str, str, list[str]]:
    """(source, kind, values torch names) of a failed guard, as torch words the ones these logs hold."""
    if m := re.match(r"tensor '(\w+)' size mismatch at index (\d+)\. expected (\S+), actual (\S+)", guard):
        return f"L['{m[1]}'].size()[{m[2]}]", "size", [m[3], m[4]]
    if m := re.match(r"tensor '(\w+)\[(\d+)\]' size mismatch at index (\d+)\. expected (\S+), actual (\S+)", guard):
        return f"L['{m[1]}'][{m[2]}].size()[{m[3]}]", "size", [m[4], m[5]]
    if m := re.match(r"tensor '(\w+)' dtype mismatch\. expected (\w+), actual (\w+)", guard):
        return f"L['{m[1]}']", "dtype", [m[2], m[3]]
    if m := re.match(r"(\w+) == (\S+)", guard):
        return f"L['{m[1]}']", "value", [m[2]]
    if m := re.match(r"GLOBAL_STATE changed: (\w+)", guard):
        return m[1], "global state", []
    raise AssertionError(guard)


@pytest.mark.parametrize("scenario", ["recompiles", "ddp_4ranks_diverge"])
def test_recompiles_are_grouped_by_the_input_that_changed(db, scenario):
    raw = Counter()
    values = defaultdict(list)
    for function, guard in first_reasons(scenario_logs(scenario)):
        source, kind, said = input_of(guard)
        raw[(function, source, kind)] += 1
        values[(function, source, kind)] += [v for v in said if v not in values[(function, source, kind)]]
    (run,) = scenario_run(db, scenario)
    cursor = db.execute(load_queries()["recompile_reasons"].sql, {"run": str(run), "rank": ""})
    rows = [dict(zip([d[0] for d in cursor.description], row)) for row in cursor]
    assert Counter({(r["co_name"], r["input"], r["guard"]): r["compiles"] for r in rows}) == raw
    for r in rows:  # the values torch named, in the order it named them (a value guard adds what the recompile saw)
        assert r["values"].split(", ")[:len(values[(r["co_name"], r["input"], r["guard"])])] == \
            values[(r["co_name"], r["input"], r["guard"])]
    (finding,) = of(db, scenario_label(db, run))["recompiles"]
    top = max(raw, key=raw.get)  # the input that caused most, named first with its kind
    named = re.sub(r"L\['(\w+)'\]", r"\1", top[1])  # as the user's code names it: x.size()[0], args[0]
    assert f"{top[0]}'s `{named}` ({top[2]}" in finding.text
    assert finding.count == sum(key[3] > 0 for key in by_compile(scenario_logs(scenario)))  # every recompile


def scenario_label(conn, run: int) -> str:
    return conn.execute("SELECT label FROM runs WHERE id = ?", (run,)).fetchone()[0]


def test_a_value_that_varies_names_its_line_and_the_change_that_stops_it(db):
    (run,) = scenario_run(db, "recompiles")
    (finding,) = of(db, scenario_label(db, run))["recompiles"]
    guard = next(g for f, g in first_reasons(scenario_logs("recompiles")) if " == " in g)
    comment = re.search(r"#\s*(.+?)\s+#\s*(\S+):(\d+) in", guard)  # torch's comment: the source line, file:line
    line_text = f"{Path(comment[2]).name}:{comment[3]} `{comment[1]}`"
    assert "`n` (value: 2, 3)" in finding.text and line_text in finding.text
    sizes = [g for f, g in first_reasons(scenario_logs("recompiles")) if "size mismatch" in g]
    assert sizes and "`x.size()[0]` (size: 4, 8)" in finding.text


def test_a_size_torch_made_dynamic_says_so_and_how_to_mark_it(db):
    (run,) = scenario_run(db, "ddp_4ranks_diverge")
    (finding,) = of(db, scenario_label(db, run))["recompiles"]
    # the recompile created a symbol for that size (create_symbol with its source): torch made it dynamic itself
    created = {e["create_symbol"]["source"] for e, _ in records(scenario_logs("ddp_4ranks_diverge"))
               if "create_symbol" in e}
    assert "L['x'].size()[0]" in created
    assert "torch._dynamo.mark_dynamic(x, 0)" in finding.next_steps and "dynamic by itself" in finding.next_steps


def test_the_recompile_limit_is_its_own_finding_never_a_failed_compile(v215):
    _, conn = v215
    found = of(conn, "recompile_limit_stances")
    hit = []
    for recs in by_compile(sorted((V215 / "recompile_limit_stances").glob("*.log"))).values():
        m = metrics(recs)
        if m.get("fail_type") == "FailOnRecompileLimitHit" or \
                (m.get("fail_reason") or "").startswith("Dynamo recompile limit exceeded"):
            limit = re.search(r"currently set to (\d+)", m.get("fail_reason") or "")
            names = [e["compilation_metrics"]["co_name"] for recs2 in by_compile(
                sorted((V215 / "recompile_limit_stances").glob("*.log"))).values() for e, _ in recs2
                if "compilation_metrics" in e and e["frame_id"] == recs[0][0]["frame_id"]]
            hit.append((names[0], int(limit[1]) if limit else recs[0][0]["frame_compile_id"], m["compile_id"],
                        m["fail_type"]))
    assert len(hit) == 2 and {h[3] for h in hit} == {"Unsupported", "FailOnRecompileLimitHit"}
    texts = [f.text for f in found["recompile_limit"]]
    assert len(texts) == len(hit)
    for name, limit, compile_id, fail_type in hit:
        (text,) = [t for t in texts if t.startswith(f"{name} hit the recompile limit ({limit}) at [{compile_id}]")]
        assert ("FailOnRecompileLimitHit" in text) == (fail_type == "FailOnRecompileLimitHit")
    assert "failures" not in found  # both failed compiles of this run are the recompile limit


def test_an_observed_exception_is_quoted_at_the_users_line(v215):
    _, conn = v215
    found = of(conn, "flex_attention")
    logs = sorted((V215 / "flex_attention").glob("*.log"))
    failed = [recs for recs in by_compile(logs).values() if metrics(recs).get("fail_type")]
    raised = {re.search(r"raised exception (\w+)\('([^']*)'\)", metrics(recs)["fail_reason"]).groups()
              for recs in failed}
    ((kind, message),) = raised
    frames = {user_frame(text) for recs in failed for text in artifact(recs, "dynamo_graph_break_reason")}
    ((file, line, code),) = frames
    (failure,) = found["failures"]
    assert f"“{kind}: {message}”" in failure.text and failure.count == len(failed)
    assert f"{Path(file).name}:{line} `{code}`" in failure.text
    (breaks,) = found["graph_breaks"]
    assert f"{kind}: {message}" in breaks.text and f"{Path(file).name}:{line}" in breaks.text
    assert "Observed exception" not in breaks.text and "flex_attention.py:2236" not in breaks.text


def test_failures_quote_torch_at_the_users_line_one_line_per_kind_of_failure(db):
    (run,) = scenario_run(db, "compile_errors")
    found = of(db, scenario_label(db, run))["failures"]
    raw = defaultdict(list)
    for path in scenario_logs("compile_errors"):  # compile ids repeat after reset(): one record at a time
        recs = records([path])
        for i, (envelope, _) in enumerate(recs):
            m = envelope.get("compilation_metrics")
            if m and m.get("fail_type"):
                error = [p for e, p in recs[:i] if e.get("artifact", {}).get("name") == "dynamo_error"][-1]
                raw[(m["fail_type"], user_frame(error))].append(m["co_name"])
    assert sorted(f.count for f in found) == sorted(len(v) for v in raw.values())
    for (fail_type, (file, line, code)), names in raw.items():
        (finding,) = [f for f in found if f", {fail_type} at " in f.text and f"{Path(file).name}:{line}" in f.text]
        assert f"`{code}`" in finding.text and all(f"] {name}" in finding.text for name in names)
        assert finding.compile is not None and finding.count == len(names)
    backend = next(f for f in found if "BackendCompilerFailed" in f.text)
    assert "“backend='broken_backend' raised: RuntimeError: injected backend failure”" in backend.text


def test_the_cache_of_several_ranks_is_said_once_with_the_ranks(db):
    (run,) = scenario_run(db, "ddp_2ranks")
    (finding,) = of(db, scenario_label(db, run))["cache"]
    per_rank = Counter()
    for path in scenario_logs("ddp_2ranks"):
        rank = int(re.search(r"rank_(\d+)", path.name)[1])
        per_rank[rank] += sum(e.get("artifact", {}).get("name", "").endswith("_cache_miss") for e, _ in records([path]))
    assert len(set(per_rank.values())) == 1  # the same on both ranks: said once
    assert f"{per_rank[0]} cache misses in" in finding.text and "on each rank" in finding.text  # both ranks


def test_next_steps_are_the_findings_own_stored_and_printed(fixtures_db, db):
    (run,) = scenario_run(db, "recompiles")
    stored = dict(db.execute("SELECT kind, next_steps FROM run_findings WHERE run_id = ?", (run,)).fetchall())
    assert "mark_dynamic" not in stored["recompile_limit"] and "dtype" in stored["recompile_limit"]
    output = CliRunner().invoke(cli, ["findings", str(run), "--db", str(fixtures_db)]).output
    assert "next: Stop the recompiles of g: keep x's dtype the same" in output
    assert output.count("(fix this first)") == 1 and "warning (fix this first): g hit the recompile limit" in output



def strings(path: Path) -> dict[int, str]:
    """The log's string table (`str` envelopes): the file names its stacks point to."""
    return {e["str"][1]: e["str"][0] for e, _ in records([path]) if "str" in e}


def innermost_user(stack: list[dict], names: dict[int, str]) -> str | None:
    """`file:line  source` of the innermost frame of a logged stack that is the user's."""
    users = [f for f in stack if "-packages/" not in names.get(f["filename"], "<")
             and not re.search(r"/lib/python3\.", names.get(f["filename"], "<"))
             and not names.get(f["filename"], "<").startswith("<")]
    if not users:
        return None
    frame = users[-1]
    return f"{names[frame['filename']]}:{frame['line']}" + (f"  {frame['loc']}" if frame.get("loc") else "")


def test_dynamic_shapes_say_the_user_line_that_created_each_symbol(db):
    (run,) = scenario_run(db, "dynamic")
    expected = Counter()
    for path in scenario_logs("dynamic"):
        names = strings(path)
        for envelope, _ in records([path]):
            for kind in ("create_symbol", "create_unbacked_symbol"):
                if kind in envelope:
                    expected[(envelope[kind]["symbol"], innermost_user(envelope[kind].get("user_stack") or [],
                                                                         names))] += 1
    cursor = db.execute(load_queries()["dynamic_shapes"].sql, {"run": str(run)})
    found = Counter((row[6], row[12]) for row in cursor if row[0] == "symbol")
    assert found == expected and sum(1 for _, line in expected if line) >= 4


def test_a_size_recompiled_on_says_on_its_compile_page_how_to_keep_it_dynamic(db):
    from tlindex.answers.shapes import symbols

    (run,) = scenario_run(db, "ddp_4ranks_diverge")
    recompiled = [(function, guard) for function, guard in first_reasons(scenario_logs("ddp_4ranks_diverge"))]
    assert ("forward", "tensor 'x' size mismatch at index 0. expected 4, actual 6") in recompiled
    (compile,) = [r[0] for r in db.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id = '4/1'", (run,))]
    (symbol,) = [s for s in symbols(db, compile) if s["source"] == "L['x'].size()[0]"]
    assert "torch._dynamo.mark_dynamic(x, 0)" in symbol["keep_dynamic"] and symbol["line"].endswith(
        "return self.fc2(torch.relu(self.fc1(x)))")
    (first,) = [r[0] for r in db.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id = '4/0' "
                                         "AND rank = 1", (run,))]
    assert all(s["keep_dynamic"] is None for s in symbols(db, first))  # a first compile recompiled on nothing


def test_a_constraint_the_code_specialized_names_the_line_that_specialized_it(db):
    (run,) = scenario_run(db, "export")
    (failure,) = of(db, scenario_label(db, run))["failures"]
    (path,) = scenario_logs("export")
    names = strings(path)
    special = [e["symbolic_shape_specialization"] for e, _ in records([path]) if "symbolic_shape_specialization" in e]
    constant = re.search(r"specialized it to be a constant \((\d+)\)", failure.text)[1]
    (line,) = {innermost_user(s["user_stack"], names) for s in special if s["value"] == constant}
    where, source = line.split("  ", 1)
    assert f"{Path(where.rsplit(':', 1)[0]).name}:{where.rsplit(':', 1)[1]} `{source}`" in failure.text
    assert {s["reason"] for s in special if s["value"] == constant} == {"range_refined_to_singleton"}
    assert "range_refined_to_singleton" in failure.next_steps


@pytest.mark.asyncio
async def test_the_run_page_marks_one_finding_to_fix_first(traces_db):
    from datasette.app import Datasette

    conn = connect(traces_db)
    (run,) = scenario_run(conn, "recompiles")
    html = (await Datasette([str(traces_db)]).client.get(f"/traces/-/tlindex/run/{run}")).text
    section = html.split('<h2 id="findings">')[1].split("<h2")[0]
    assert section.count("fix this first") == 1
    marked = section.split("fix this first")[1].split("</li>")[0]
    assert "hit the recompile limit" in marked and "Stop the recompiles of g" in marked


def test_a_failure_without_a_reason_is_still_a_failed_compile():
    """HAND-MADE rows: a compile that failed with no fail_reason logged is not taken for the recompile limit."""
    import sqlite3

    from tlindex.answers.findings.failures import LIMIT_HIT

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE compiles (fail_reason TEXT, fail_type TEXT)")
    conn.executemany("INSERT INTO compiles VALUES (?, ?)", [(None, "InductorError"), (None, "FailOnRecompileLimitHit"),
                                                            ("Dynamo recompile limit exceeded", "Unsupported")])
    assert conn.execute(f"SELECT fail_type FROM compiles WHERE NOT {LIMIT_HIT}").fetchall() == [("InductorError",)]
