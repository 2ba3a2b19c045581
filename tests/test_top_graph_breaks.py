"""The graph breaks that cost most, across runs: grouped by torch's type and the user's line, each with its count,
runs, restart cost and torch's own explanation and hints; counted here from the raw logs of every fixture."""

from __future__ import annotations

import json
import re
from collections import defaultdict

from click.testing import CliRunner
from conftest import DATA, connect

from tlindex.answers.findings import findings
from tlindex.answers.top_breaks import top_graph_breaks
from tlindex.cli import cli

HEADER = "Encountered graph break when attempting"


def records(path):
    """(envelope, payload text or None) of every record of a log, read directly."""
    current = None
    for line in open(path, "rb"):
        if line.startswith(b"\t"):
            current[1].append(line[1:].rstrip(b"\n"))
            continue
        if current:
            yield current[0], b"\n".join(current[1]).decode() if "has_payload" in current[0] else None
        current = [json.loads(line.split(b"] ", 1)[1]), []]
    if current:
        yield current[0], b"\n".join(current[1]).decode() if "has_payload" in current[0] else None


def raw_break(text: str) -> dict:
    """What torch says of one graph break (a dynamo_graph_break_reason payload), read without tlindex."""
    where = re.search(r"^Graph break in user code at (.*):(\d+)$", text, re.M)
    reason = text.split("Graph Break Reason: ", 1)[-1].split("\nUser code traceback:", 1)[0]
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    title = next(line for line in lines if not line.startswith(HEADER))
    gb = re.search(r"/gb/(gb\d+)\.html", reason)
    # torch's Explanation whole: every line up to its first Hint or its developer context (words compared)
    explained = reason.split("Explanation: ", 1)[1] if "Explanation: " in reason else None
    explanation = explained and " ".join(re.split(r"\n\s*(?:Hint: |Developer debug context)", explained)[0].split())
    return {"gb": gb.group(1) if gb else None, "title": title,
            "location": f"{where.group(1)}:{where.group(2)}" if where else None,
            "explanation": explanation, "hints": [line.removeprefix("Hint: ") for line in lines if line.startswith("Hint: ")]}


def expected_groups(db) -> dict[tuple, dict]:
    """Every fixture's graph breaks grouped by (gb, title, location), from the raw logs: count, runs in time order,
    and the compile time thrown away by restarts (each compile's dynamo_time_before_restart_s, shared among its
    breaks)."""
    run_of = dict(db.execute("SELECT f.path, s.run_id FROM files f JOIN sources s ON s.file_id = f.id"))
    order = [row[0] for row in db.execute("SELECT id FROM runs ORDER BY start_time, id")]
    groups: dict[tuple, dict] = {}
    for log in sorted(DATA.glob("*/*.log")):
        run = run_of[str(log)]
        breaks, restart = defaultdict(list), {}
        for envelope, payload in records(log):  # a compile id, within one log (no fixture breaks after a reset)
            key = (envelope.get("compiled_autograd_id"), envelope.get("frame_id"), envelope.get("frame_compile_id"))
            if envelope.get("artifact", {}).get("name") == "dynamo_graph_break_reason":
                breaks[key].append(raw_break(payload))
            metrics = envelope.get("compilation_metrics")
            if metrics is not None and metrics.get("restart_reasons"):
                restart[key] = metrics.get("dynamo_time_before_restart_s") or 0.0
        for key, found in breaks.items():
            for b in found:
                group = groups.setdefault((b["gb"], b["title"], b["location"]),
                                          {"breaks": 0, "runs": set(), "restart_s": 0.0, "explanations": set(),
                                           "hints": set()})
                group["breaks"] += 1
                group["runs"].add(run)
                group["restart_s"] += restart.get(key, 0.0) / len(found)
                group["explanations"].add(b["explanation"])
                group["hints"].add(tuple(b["hints"]))
    for group in groups.values():
        runs = sorted(group["runs"], key=order.index)
        group.update(first_run=runs[0], last_run=runs[-1], runs=len(runs), restart_s=round(group["restart_s"], 3))
    return groups


def test_every_group_is_what_the_raw_logs_say(db):
    expected = expected_groups(db)
    found = top_graph_breaks(db, limit=10_000)
    assert {(g["gb"], g["title"], g["location"]) for g in found} == set(expected)
    for group in found:
        want = expected[(group["gb"], group["title"], group["location"])]
        for key in ("breaks", "runs", "first_run", "last_run"):
            assert group[key] == want[key], (group["title"], key)
        assert abs(group["restart_s"] - want["restart_s"]) <= 0.0015, group["title"]
        assert " ".join(group["explanation"].split()) in want["explanations"]
        assert tuple(group["hints"]) in want["hints"]
    costs = [(g["restart_s"], g["breaks"]) for g in found]
    assert costs == sorted(costs, reverse=True)  # the costliest first, then the most frequent


def test_the_series_break_added_on_day_two_is_named_with_torchs_id_and_first_seen_then(db):
    from conftest import scenario_run

    days = scenario_run(db, "series")
    groups = [g for g in top_graph_breaks(db, limit=10_000) if g["location"] and "series.py" in g["location"]]
    assert [(g["gb"], g["title"]) for g in groups] == [("gb0025", "Call to `torch._dynamo.graph_break()`"),
                                                       ("gb0170", "Data-dependent branching")]
    user, branch = groups
    assert user["runs"] == 2 and branch["runs"] == 1 and user["restart_s"] > 0 and branch["restart_s"] == 0
    ordered = [row[0] for row in db.execute(
        f"SELECT id FROM runs WHERE id IN ({','.join('?' * len(days))}) ORDER BY start_time, id", days)]
    assert (user["first_run"], user["last_run"]) == (ordered[2], ordered[3])
    assert branch["first_run"] == branch["last_run"] == ordered[3]
    assert user["hints"] == ["Remove the `torch._dynamo.graph_break()` call."]
    assert user["explanation"] == "User-inserted graph break. Message: None"
    one_day = top_graph_breaks(db, ordered[3])
    assert [g["breaks"] for g in one_day] == [2, 2]  # the run's own breaks only


def test_findings_name_the_costliest_break_and_degrade_alone(db, monkeypatch):
    from conftest import scenario_run

    (run,) = scenario_run(db, "graph_breaks")
    top = top_graph_breaks(db, run, limit=1)[0]
    found = {f.kind: f for f in findings(db, run)}
    costly = found["graph_breaks"]  # one finding: the count, and the costliest group to fix first
    assert costly.severity == "warning" and costly.compile == top["compile"] and f"×{top['breaks']}" in costly.text
    assert top["gb"] in costly.text and top["title"] in costly.text and f"{top['restart_s']:.2f} s" in costly.text
    assert top["hints"][0][:100] in costly.next_steps

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("tlindex.answers.findings.compiles.top_graph_breaks", broken)
    degraded = {f.kind: f for f in findings(db, run)}
    # the graph-break finding reads the page's groups: when that reading fails, it is left out, said once
    assert "graph_breaks" not in degraded and "boom" in degraded["not_computed"].text
    assert set(found) - {"graph_breaks"} <= set(degraded)


def test_the_canned_query_answers_tlindex_query(fixtures_db):
    result = CliRunner().invoke(cli, ["query", "top_graph_breaks", "-p", "limit", "1", "--db", str(fixtures_db)])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert row == {**top_graph_breaks(connect(fixtures_db), limit=1)[0], "hints": row["hints"]}


def test_torch_s_explanation_is_whole_with_the_lines_that_say_which_code(db):
    """The data-dependent branch's Explanation goes on past its first line to the code of the condition."""
    from conftest import scenario_run

    (run,) = scenario_run(db, "graph_breaks")
    (branch,) = [g for g in top_graph_breaks(db, run) if g["gb"] == "gb0170"]
    assert branch["explanation"].startswith("Detected data-dependent branching")
    assert "The branch condition involves a tensor computed as follows:" in branch["explanation"]
    assert branch["explanation"].rstrip().endswith("gt = gt(sum_1, 0)")
    assert len(branch["hints"]) == 3 and branch["hints"][-1] == "Use `torch.cond` to express dynamic control flow."
