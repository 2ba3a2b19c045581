"""A run's chromium trace (tlindex export chromium, and the plugin's chromium.json), checked
against the chromium events of the logs read without tlindex."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from conftest import connect, scenario_logs, scenario_run
from datasette.app import Datasette

from tlindex.cli import cli
from tlindex.formats.chromium import trace_chunks

RANK_RE = re.compile(r"_rank_(\d+)_")


def events_from_logs(name: str) -> tuple[set, int]:
    """({(rank, span name, begin ts, duration)} of the B/E pairs, number of instant events) of a scenario."""
    spans, instants = set(), 0
    for path in scenario_logs(name):
        rank = int(RANK_RE.search(path.name).group(1))
        open_spans: list[dict] = []
        payload: list[str] | None = None
        for line in path.read_text().splitlines() + [""]:
            if line.startswith("\t") and payload is not None:
                payload.append(line[1:])
                continue
            if payload:
                event = json.loads("\n".join(payload))
                if event["ph"] == "B":
                    open_spans.append(event)
                elif event["ph"] == "E":
                    begin = next(b for b in reversed(open_spans) if b["name"] == event["name"])
                    open_spans.remove(begin)
                    spans.add((rank, event["name"], begin["ts"], event["ts"] - begin["ts"]))
                else:
                    instants += 1
            payload = [] if '{"chromium_event"' in line else None
    return spans, instants


def test_a_run_trace_has_every_span_of_every_rank(db):
    (run,) = scenario_run(db, "collectives_3ranks")
    trace = json.loads(b"".join(trace_chunks(db, run)))
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(names) == [0, 1, 2] and all(name.startswith(f"rank {pid} (pid ") for pid, name in names.items())
    spans, instants = events_from_logs("collectives_3ranks")
    assert {(e["pid"], e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X"} == spans
    assert len([e for e in events if e["ph"] == "X"]) == len(spans)
    assert len([e for e in events if e["ph"] == "i"]) == instants
    dynamo = [e for e in events if e["ph"] == "X" and e["name"] == "dynamo"]
    assert dynamo and all(e["args"]["compile_id"] for e in dynamo)


def test_a_trace_longer_than_a_batch_is_valid_json(fixtures_db, monkeypatch):
    import tlindex.formats.chromium

    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "train_step")
    whole = json.loads(b"".join(trace_chunks(conn, run)))["traceEvents"]
    monkeypatch.setattr(tlindex.formats.chromium, "BATCH", 7)
    chunks = list(trace_chunks(conn, run))
    assert len(chunks) > len(whole) // 7 and json.loads(b"".join(chunks))["traceEvents"] == whole


def test_cli_writes_the_trace_and_refuses_an_unknown_run(fixtures_db, tmp_path):
    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "ddp_2ranks")
    out = tmp_path / "trace.json"
    result = CliRunner().invoke(cli, ["export", "chromium", str(out), "--db", str(fixtures_db), "--run", str(run)])
    assert result.exit_code == 0, result.output
    assert out.read_bytes() == b"".join(trace_chunks(conn, run))
    result = CliRunner().invoke(cli, ["export", "chromium", "-", "--db", str(fixtures_db), "--run", "99999"])
    assert result.exit_code == 1 and "no run matches '99999'" in result.output


def test_cli_leaves_no_half_trace_when_it_fails_midway(fixtures_db, tmp_path, monkeypatch):
    import sqlite3

    import tlindex.formats.chromium as chromium

    def fails_after_the_head(conn, run, *selection):
        yield next(iter(trace_chunks(conn, run)))
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(chromium, "trace_chunks", fails_after_the_head)
    (run,) = scenario_run(connect(fixtures_db), "ddp_2ranks")
    out = tmp_path / "trace.json"
    out.write_text("an earlier trace")
    result = CliRunner().invoke(cli, ["export", "chromium", str(out), "--db", str(fixtures_db), "--run", str(run),
                                      "--replace"])
    assert result.exit_code != 0 and isinstance(result.exception, sqlite3.OperationalError)
    assert out.read_text() == "an earlier trace"  # written beside it, never moved in: OUT is as it was
    assert [p.name for p in tmp_path.iterdir()] == ["trace.json"]  # and nothing is left beside it
    result = CliRunner().invoke(cli, ["export", "chromium", str(out), "--db", str(fixtures_db), "--run", "99999"])
    assert result.exit_code == 1 and out.read_text() == "an earlier trace"


@pytest.mark.asyncio
async def test_the_run_page_links_a_streamed_trace(traces_db):
    ds = Datasette([str(traces_db)])
    await ds.invoke_startup()
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "collectives_3ranks")
    page = (await ds.client.get(f"/traces/-/tlindex/run/{run}")).text
    assert f'href="/traces/-/tlindex/run/{run}/chromium.json"' in page
    response = await ds.client.get(f"/traces/-/tlindex/run/{run}/chromium.json")
    assert response.status_code == 200 and response.headers["content-type"] == "application/json"
    assert response.content == b"".join(trace_chunks(conn, run))
    assert (await ds.client.get("/traces/-/tlindex/run/99999/chromium.json")).status_code == 404


def test_a_batch_walks_one_process_in_id_order_without_sorting(fixtures_db):
    """Each batch reads on from the last id of one process through the per-source index, whose entries are in id
    order: no sort, and nothing of the other runs read (walking the run's events by id across every run's cost
    0.08 s at 10 runs, 0.39 s at 3,000)."""
    from tlindex.formats.chromium import BATCH, EVENTS_SQL

    plan = [row[3] for row in connect(fixtures_db).execute("EXPLAIN QUERY PLAN " + EVENTS_SQL, (1, 0, BATCH))]
    assert "SEARCH c USING INDEX chromium_events_source (source_id=? AND rowid>?)" in plan
    assert not any("TEMP B-TREE" in step for step in plan)


def outermost_of(spans: set) -> set:
    """The spans (rank, name, ts, duration) that no other span of their rank holds, found apart from tlindex."""
    return {(rank, name, ts, dur) for rank, name, ts, dur in spans
            if not any(r == rank and (t, -d) < (ts, -dur) and t <= ts and ts + dur <= t + d
                       for r, _, t, d in spans)}


def test_a_trace_of_some_ranks_holds_theirs_alone(db):
    (run,) = scenario_run(db, "ddp_4ranks_diverge")
    spans, _ = events_from_logs("ddp_4ranks_diverge")
    events = json.loads(b"".join(trace_chunks(db, run, [1, 3])))["traceEvents"]
    assert {e["pid"] for e in events} == {1, 3}
    assert {(e["pid"], e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X"} == \
        {span for span in spans if span[0] in (1, 3)}


def test_the_overview_holds_each_ranks_outermost_spans_with_short_args(db):
    """What a trace viewer opens for a run of hundreds of ranks: per rank, the spans no other holds (its compiles),
    and none of the configs their args carry."""
    (run,) = scenario_run(db, "ddp_4ranks_diverge")
    spans, _ = events_from_logs("ddp_4ranks_diverge")
    events = json.loads(b"".join(trace_chunks(db, run, overview=True)))["traceEvents"]
    shown = {(e["pid"], e["name"], e["ts"], e["dur"]) for e in events if e["ph"] == "X"}
    assert shown == outermost_of(spans) and len(shown) < len(spans) / 3
    assert {e["pid"] for e in events} == {0, 1, 2, 3}
    whole = json.loads(b"".join(trace_chunks(db, run)))["traceEvents"]
    assert any("dynamo_config" in e["args"] for e in whole if e["name"] == "dynamo")
    dynamo = [e for e in events if e["name"] == "dynamo"]
    assert dynamo and all(e["args"]["compile_id"] and "dynamo_config" not in e["args"] for e in dynamo)


def test_the_cli_writes_some_ranks_or_the_overview(fixtures_db, tmp_path):
    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "ddp_4ranks_diverge")
    for options, selection in ((["--rank", "2"], {"ranks": [2]}), (["--overview"], {"overview": True})):
        out = tmp_path / "trace.json"
        result = CliRunner().invoke(cli, ["export", "chromium", str(out), "--db", str(fixtures_db), "--run", str(run),
                                          "--replace", *options])
        assert result.exit_code == 0, result.output
        assert out.read_bytes() == b"".join(trace_chunks(conn, run, **selection))


@pytest.mark.asyncio
async def test_the_served_trace_is_gzipped_for_a_client_that_accepts_it(traces_db):
    ds = Datasette([str(traces_db)])
    await ds.invoke_startup()
    conn = connect(traces_db)
    (run,) = scenario_run(conn, "ddp_4ranks_diverge")
    url = f"/traces/-/tlindex/run/{run}/chromium.json?rank=0&rank=2"
    plain = await ds.client.get(url, headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.content == b"".join(trace_chunks(conn, run, [0, 2]))
    packed = await ds.client.get(url, headers={"accept-encoding": "gzip, deflate"})  # httpx decodes it
    assert packed.headers["content-encoding"] == "gzip" and packed.content == plain.content
    assert packed.num_bytes_downloaded < len(plain.content) / 4  # what was sent
    overview = await ds.client.get(f"/traces/-/tlindex/run/{run}/chromium.json?overview=1")
    assert overview.content == b"".join(trace_chunks(conn, run, overview=True))
    assert (await ds.client.get(f"/traces/-/tlindex/run/{run}/chromium.json?rank=77")).status_code == 404
    assert (await ds.client.get(f"/traces/-/tlindex/run/{run}/chromium.json?rank=x")).status_code == 400


@pytest.mark.asyncio
async def test_a_run_of_many_processes_links_its_overview_and_each_rank(traces_db, monkeypatch):
    import tlindex.pages.run

    monkeypatch.setattr(tlindex.pages.run, "WHOLE_TRACE_UP_TO", 3)  # the 4-rank run stands for one of hundreds
    ds = Datasette([str(traces_db)])
    await ds.invoke_startup()
    (run,) = scenario_run(connect(traces_db), "ddp_4ranks_diverge")
    page = (await ds.client.get(f"/traces/-/tlindex/run/{run}")).text
    base = f"/traces/-/tlindex/run/{run}/chromium.json"
    assert f'href="{base}?overview=1"' in page and f'href="{base}"' not in page
    assert all(f'href="{base}?rank={rank}"' in page for rank in range(4))
