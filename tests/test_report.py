"""tlindex report: a static folder of the plugin's pages whose every link and asset resolves inside it."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner
from conftest import connect, scenario_dirs, scenario_logs, scenario_run, write_hostile_log, write_report

from tlindex.cli import cli
from tlindex.formats.tlparse_files import EMPTY
from tlindex.report import ReportError

SCENARIOS = [folder.name for folder in scenario_dirs()]
LINK_RE = re.compile(r'\b(?:href|src)="([^"]*)"')


def broken_links(folder: Path) -> list[str]:
    """Every href/src of every page of the folder that does not lead to a file of it (or to its anchor)."""
    broken = []
    for page in folder.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        for value in LINK_RE.findall(text):
            link = html.unescape(value)
            if link.startswith(("http://", "https://", "mailto:", "data:")) or link.startswith("#"):
                continue
            if link.startswith("/") or ":" in link.split("/")[0]:
                broken.append(f"{page.relative_to(folder)}: absolute link {link}")
                continue
            path, _, fragment = link.partition("#")
            target = (page.parent / unquote(path)).resolve()
            if not target.is_file() or folder.resolve() not in target.parents:
                broken.append(f"{page.relative_to(folder)}: {link}")
            elif fragment and f'id="{fragment}"' not in target.read_text(encoding="utf-8", errors="replace"):
                broken.append(f"{page.relative_to(folder)}: {link} (no such anchor)")
    return broken


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_link_and_asset_of_every_page_resolves_in_the_folder(fixtures_db, scenario, tmp_path):
    conn = connect(fixtures_db)
    runs = scenario_run(conn, scenario)
    out = tmp_path / "report"
    summary = write_report(fixtures_db, out, runs, overwrite=False)
    assert summary.pages > 0 and not summary.warnings
    assert broken_links(out) == []
    assert {p.name for p in (out / "assets").iterdir()} >= {"app.css", "tlindex.css", "tlindex.js"}
    for run in runs:
        folder = out if len(runs) == 1 else out / f"run-{run}"
        assert (folder / "index.html").is_file() and (folder / "trie.html").is_file()
        compiles = {row[0] for row in conn.execute("SELECT id FROM compiles WHERE run_id = ?", (run,))}
        pages = {p.stem for p in (folder / "compiles").glob("*.html")}
        assert {int(p) for p in pages if p.isdigit()} == compiles
        with_bytecode = {row[0] for row in conn.execute(  # resume functions: their bytecode pages too
            "SELECT a.compile FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE c.run_id = ? "
            "AND a.name LIKE '%_MODIFIED_BYTECODE'", (run,))}
        assert {int(p.removesuffix("-bytecode")) for p in pages if p.endswith("-bytecode")} == with_bytecode
        with_graphs = {row[0] for row in conn.execute(  # a compile that logged a graph: its pass-by-pass page
            "SELECT a.compile FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE c.run_id = ? "
            "AND (a.name LIKE '%_graph' AND a.name NOT IN ('fx_graph_runnable') OR a.kind LIKE '%_graph' "
            "OR a.kind = 'graph_dump')", (run,))}
        assert {int(p.removesuffix("-passes")) for p in pages if re.fullmatch(r"\d+-passes", p)} == with_graphs
        pieces = {row[0] for row in conn.execute(
            "SELECT p.id FROM piece_compiles p JOIN compiles c ON c.id = p.compile WHERE c.run_id = ?", (run,))}
        assert {int(p.split("-")[2]) for p in pages if "-piece-" in p} == pieces
        from tlindex.answers.vllm import has_vllm  # pieces, a config, or only vLLM's passes' graphs

        assert ((folder / "vllm.html").is_file()) == has_vllm(conn, run)
        files = conn.execute("SELECT DISTINCT file_id FROM sources WHERE run_id = ?", (run,)).fetchall()
        directories = [folder / "compile_directory.json"] if len(files) == 1 else \
            sorted(folder.glob("*/compile_directory.json"))
        assert len(directories) == len(files)
        for directory in directories:  # its urls lead to files of the report too
            for entry in json.loads(directory.read_text()).values():
                for artifact in entry["artifacts"]:
                    for url in (artifact["url"], artifact["readable_url"]):
                        if url and not url.startswith(("http://", "https://")):
                            assert (directory.parent / url).is_file(), url
            raw = (directory.parent / "raw.jsonl").read_text().splitlines()
            assert "string_table" in json.loads(raw[0]) and len(raw) > 1
    if len(runs) > 1:
        index = (out / "index.html").read_text()
        assert all(f'href="run-{run}/index.html"' in index for run in runs)
    # each payload once, as text, named by its hash
    for text_file in (out / "payloads").glob("*.txt"):
        if text_file.stem == EMPTY:  # the file of artifacts logged without a payload, as tlparse writes one
            assert text_file.read_bytes() == b""
            continue
        (text,) = conn.execute("SELECT text FROM payloads WHERE hash = ?", (text_file.stem,)).fetchone()
        assert text_file.read_bytes() == text.encode("utf-8")

def test_a_hostile_log_is_escaped_in_every_page_of_its_report(tmp_path):
    log = write_hostile_log(tmp_path / "dedicated_log_torch_trace_evil.log")  # HAND-MADE, hostile HTML
    result = CliRunner().invoke(cli, ["report", str(log), "-o", str(tmp_path / "out"), "--silent"])
    assert result.exit_code == 0, result.output
    pages = list((tmp_path / "out").rglob("*.html"))
    assert pages
    for page in pages:
        text = page.read_text()
        assert "<script>alert" not in text and "<script>f</script>" not in text and "<img src=x" not in text, page
        assert "<b>evil" not in text, page


def test_the_folder_is_refused_unless_empty_or_a_report_replaced_with_overwrite(fixtures_db, tmp_path):
    (run,) = scenario_run(connect(fixtures_db), "graph_breaks")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ReportError, match="not empty"):
        write_report(fixtures_db, mine, [run], overwrite=False)
    with pytest.raises(ReportError, match="tlindex did not write as a report"):
        write_report(fixtures_db, mine, [run], overwrite=True)
    assert (mine / "notes.txt").read_text() == "keep me"
    out = tmp_path / "out"
    write_report(fixtures_db, out, [run], overwrite=False)
    with pytest.raises(ReportError, match="not empty"):
        write_report(fixtures_db, out, [run], overwrite=False)
    write_report(fixtures_db, out, [run], overwrite=True)
    assert (out / "index.html").is_file()
    assert [p.name for p in tmp_path.iterdir() if "partial" in p.name] == []


def test_an_interrupted_report_leaves_no_folder(fixtures_db, tmp_path, monkeypatch):
    from tlindex.report import output

    (run,) = scenario_run(connect(fixtures_db), "graph_breaks")

    def fail(self, path, body, **counted):
        raise KeyboardInterrupt

    monkeypatch.setattr(output.Output, "save", fail)
    with pytest.raises(KeyboardInterrupt):
        write_report(fixtures_db, tmp_path / "out", [run], overwrite=False)
    assert list(tmp_path.iterdir()) == []


def test_cli_report_of_logs_uses_a_temporary_database_and_of_a_database_its_runs(fixtures_db, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    logs = [str(path) for path in scenario_logs("cache")]  # two runs
    result = runner.invoke(cli, ["report", *logs, "-o", "from_logs", "--silent"])
    assert result.exit_code == 0, result.output
    assert not Path("traces.db").exists()  # the temporary database is gone
    assert len(list(Path("from_logs").glob("run-*/index.html"))) == 2
    conn = sqlite3.connect(fixtures_db)
    (run,) = scenario_run(conn, "export")
    label = conn.execute("SELECT label FROM runs WHERE id = ?", (run,)).fetchone()[0]
    result = runner.invoke(cli, ["report", "--db", str(fixtures_db), "--run", label, "-o", "one", "--silent"])
    assert result.exit_code == 0, result.output
    assert Path("one/index.html").is_file() and Path("one/compile_directory.json").is_file()
    assert f"Run {html.escape(label)}" in Path("one/index.html").read_text()
    result = runner.invoke(cli, ["report", "--db", str(fixtures_db), "--run", "no-such-run", "-o", "none"])
    assert result.exit_code == 1 and "no run" in result.output and not Path("none").exists()
    shutil.rmtree("from_logs")


def test_open_opens_the_report_s_index_in_a_browser(fixtures_db, tmp_path, monkeypatch):
    import webbrowser

    opened = []
    monkeypatch.setattr(webbrowser, "open", opened.append)
    (run,) = scenario_run(connect(fixtures_db), "dynamic")
    result = CliRunner().invoke(cli, ["report", "--db", str(fixtures_db), "--run", str(run), "-o",
                                      str(tmp_path / "out"), "--open", "--silent"])
    assert result.exit_code == 0, result.output
    assert opened == [(tmp_path / "out" / "index.html").resolve().as_uri()]


def patch_can_fork(monkeypatch, answer) -> None:
    """Whether the report may fork its workers, as decided in both places that ask."""
    from tlindex.report import build, workers

    monkeypatch.setattr(build, "can_fork", answer)
    monkeypatch.setattr(workers, "can_fork", answer)


def report_files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_worker_processes_write_the_same_report_as_one_process(fixtures_db, tmp_path, monkeypatch, start):
    from tlindex.report import build as report

    (run,) = scenario_run(connect(fixtures_db), "ddp_4ranks_diverge")
    write_report(fixtures_db, tmp_path / "one", [run], overwrite=False, jobs=1)
    monkeypatch.setattr(report, "PARALLEL_FROM", 1)  # a fixture is small: split it among workers anyway
    monkeypatch.setattr(report, "SPAWNED_FROM", 1)
    monkeypatch.setattr(report, "TASK_PAGES", 7)
    if start == "spawn" or sys.platform != "linux":  # as where a fork is unsafe
        patch_can_fork(monkeypatch, lambda: False)
    else:  # forked as from the command (which runs no other thread; this test process may: a server fixture's)
        patch_can_fork(monkeypatch, lambda: True)
    write_report(fixtures_db, tmp_path / "two", [run], overwrite=False, jobs=2)

    one, two = report_files(tmp_path / "one"), report_files(tmp_path / "two")
    assert one.keys() == two.keys() and len(one) > 50
    assert [name for name in one if one[name] != two[name]] == []


def test_a_logs_few_heavy_compiles_are_shared_among_the_workers(fixtures_db, tmp_path):
    """Each compile page's task renders its passes and bytecode pages too: the compiles are dealt a few to a task
    (one each when there are few), before the payload pages, so that one worker does not render them all."""
    from tlindex.render.report import ReportRenderer
    from tlindex.report import build

    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "ddp_4ranks_diverge")
    report = build.Report(conn, fixtures_db, tmp_path, [run], ReportRenderer)
    compiles = {report.renderer.urls.compile(c) for c in report.files.compile_runs}
    assert len(compiles) > 4
    for jobs in (1, 2, len(compiles)):
        pages = [task.urls for task in report.tasks(jobs) if isinstance(task, build.PagesTask)]
        dealt = [urls for urls in pages if set(urls) <= compiles]
        assert pages[:len(dealt)] == dealt and sum(map(len, dealt)) == len(compiles)  # every compile, first
        assert max(map(len, dealt)) <= build.TASK_COMPILES
    assert len([task for task in report.tasks(len(compiles)) if isinstance(task, build.PagesTask)
                and set(task.urls) <= compiles]) == len(compiles)  # as many workers as compiles: one a task


def test_a_worker_that_dies_costs_time_not_pages(fixtures_db, tmp_path, monkeypatch):
    """A worker killed mid-report (out of memory, kill -9): its tasks, and those left, are rendered by the
    main process, the report is complete and says what happened."""
    from tlindex.report import build as report

    if sys.platform != "linux":
        pytest.skip("the dying worker is this test's code, which only a forked worker runs")
    patch_can_fork(monkeypatch, lambda: True)  # as from the command (see above)
    (run,) = scenario_run(connect(fixtures_db), "ddp_4ranks_diverge")
    write_report(fixtures_db, tmp_path / "one", [run], overwrite=False, jobs=1)
    monkeypatch.setattr(report, "PARALLEL_FROM", 1)
    monkeypatch.setattr(report, "TASK_PAGES", 7)
    run_task, marker, parent = report.Report.run_task, tmp_path / "die", os.getpid()
    marker.touch()

    def dies_once(self, task):  # the first worker to take a task of pages dies (forked: it runs this)
        if isinstance(task, report.PagesTask) and os.getpid() != parent:
            try:
                marker.unlink()
            except FileNotFoundError:
                pass
            else:
                os._exit(9)
        return run_task(self, task)

    monkeypatch.setattr(report.Report, "run_task", dies_once)
    summary = write_report(fixtures_db, tmp_path / "two", [run], overwrite=False, jobs=2)
    assert not marker.exists()  # a worker died
    assert any("worker process ended abruptly" in warning for warning in summary.warnings)
    one, two = report_files(tmp_path / "one"), report_files(tmp_path / "two")
    assert one.keys() == two.keys() and [name for name in one if one[name] != two[name]] == []


def test_the_report_is_written_without_datasettes_application(fixtures_db, tmp_path):
    """The report renders the plugin's pages on its own site: importing Datasette (its app: 0.4 s; its package:
    0.05 s) is not paid."""
    script = ("import sys; from pathlib import Path; from tlindex import Database; "
              f"db = Database(Path({str(fixtures_db)!r})); db.report(Path({str(tmp_path / 'r')!r}), "
              "[str(db.run_ids(None)[0][0])], jobs=1); print('datasette' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
    assert (tmp_path / "r" / "index.html").exists() and (tmp_path / "r" / "assets" / "app.css").exists()


def test_every_report_file_is_written_once(fixtures_db, tmp_path, monkeypatch):
    """tlparse's files link each payload's text, which the payload pages' tasks write: written once, not
    rewritten (a rewrite of a file just written costs a flush on ext4)."""
    from collections import Counter

    from tlindex.report import output

    saved: Counter = Counter()
    save = output.Output.save
    monkeypatch.setattr(output.Output, "save", lambda self, path, body, **counted: saved.update([path])
                        or save(self, path, body, **counted))
    (run,) = scenario_run(connect(fixtures_db), "ddp_4ranks_diverge")
    write_report(fixtures_db, tmp_path / "r", [run], overwrite=False, jobs=1)
    assert sum(path.endswith(".txt") for path in saved) > 20
    assert [path for path, times in saved.items() if times > 1] == []


@pytest.mark.slow
def test_a_report_is_the_same_whatever_the_process_rendered_before(fixtures_db, tmp_path):
    """Every run of the fixtures reported twice, in processes of other string hashes and with the pages in
    another order: byte for byte the same (a set's order, depyf's temporaries counted across pages)."""
    script = ("import sys; from pathlib import Path; from tlindex import Database; from tlindex.report import "
              f"write_report; db = Database(Path({str(fixtures_db)!r})); runs = db.run_ids(None)[0]; "
              "write_report(db.conn, db.path, Path(sys.argv[1]), runs if sys.argv[2] == 'up' else runs[::-1], False, jobs=1)")
    for name, seed, order in (("one", "1", "up"), ("two", "2", "down")):
        subprocess.run([sys.executable, "-c", script, str(tmp_path / name), order], check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed})
    one, two = report_files(tmp_path / "one"), report_files(tmp_path / "two")
    assert one.keys() == two.keys() and any("bytecode" in name for name in one) and any("provenance/" in n for n in one)
    assert [name for name in one if one[name] != two[name]] == []


def test_a_payload_page_holds_its_text_escaped_once_and_the_script_that_colours_it(fixtures_db, tmp_path):
    """Each distinct payload's page is its text, escaped, in the pages' layout: payload.js (an asset of the report:
    nothing is fetched) colours and numbers it in the browser, so the report highlights nothing itself."""
    from tlindex.render.highlight import CODE_END, CODE_START, escape_text

    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "graph_breaks")
    write_report(fixtures_db, tmp_path / "r", [run], overwrite=False, jobs=1)
    pages = sorted((tmp_path / "r" / "payloads").glob("*.html"))
    assert len(pages) > 10 and (tmp_path / "r" / "assets" / "payload.js").is_file()
    for page in pages:
        html_text = page.read_text(encoding="utf-8")
        (text,) = conn.execute("SELECT text FROM payloads WHERE hash = ?", (page.stem,)).fetchone()
        assert f"{CODE_START}{escape_text(text)}{CODE_END}" in html_text
        assert '<script src="../assets/payload.js" defer></script>' in html_text
        assert '<span class="' not in html_text.split(CODE_START, 1)[1]  # coloured by the browser, not here
        assert (page.with_suffix(".txt")).read_bytes() == text.encode("utf-8")


def test_a_report_of_logs_none_of_which_can_be_read_says_why_and_writes_nothing(tmp_path):
    """Every PATH missing (or unreadable): the error names each path and why, not a temporary database with no run."""
    missing = [str(tmp_path / "gone.log"), str(tmp_path / "nowhere" / "rank_0.log")]
    result = CliRunner().invoke(cli, ["report", *missing, "-o", str(tmp_path / "out")])
    assert result.exit_code == 1
    said = " ".join(result.output.split())
    assert "nothing to report" in said and "tlindex-report-" not in said and "no run" not in said
    assert all(f"{path}: no such file or directory" in said for path in missing)
    assert not (tmp_path / "out").exists()


def test_raw_jsonl_rereads_a_log_only_while_it_is_the_file_ingested(tmp_path):
    """Reproduction: raw.jsonl was read from the ingested path at the old offsets after the file there was replaced
    by another log (2 lines instead of 104, no warning). Now a log whose first bytes no longer hash as ingested is
    said and its raw.jsonl not written; a log that only grew since is read as ingested."""
    from conftest import ingest

    (log,) = scenario_logs("graph_breaks")
    (other,) = scenario_logs("dynamic")
    live = tmp_path / "trace" / log.name
    live.parent.mkdir()
    shutil.copy(log, live)
    db = tmp_path / "t.db"
    ingest(db, [str(live)], jobs=1)
    whole = write_report(db, tmp_path / "whole", [1])
    lines = (tmp_path / "whole" / "raw.jsonl").read_text().splitlines()
    assert not whole.warnings and len(lines) > 100
    with open(live, "ab") as grown:  # the job went on writing
        grown.write(other.read_bytes())
    grown_report = write_report(db, tmp_path / "grown", [1])
    assert not grown_report.warnings and (tmp_path / "grown" / "raw.jsonl").read_text().splitlines() == lines
    shutil.copy(other, live)  # another log in its place
    replaced = write_report(db, tmp_path / "replaced", [1])
    assert not (tmp_path / "replaced" / "raw.jsonl").exists()
    (warning,) = [w for w in replaced.warnings if "raw.jsonl" in w]
    assert f"{live.resolve()} is no longer the log that was ingested" in warning and "ingest it again" in warning


@pytest.mark.parametrize("whole_up_to", [8, 3])
def test_a_ranked_runs_traces_are_written_under_tlparses_names(fixtures_db, tmp_path, monkeypatch, whole_up_to):
    """Each rank's trace in its folder (rank_<R>/chromium_events.json, as tlparse), and the whole run's beside the
    index while it has a few processes; a run of more (here: more than 3) gets its overview instead."""
    import tlindex.pages.run
    from tlindex.formats.chromium import trace_chunks

    monkeypatch.setattr(tlindex.pages.run, "WHOLE_TRACE_UP_TO", whole_up_to)
    conn = connect(fixtures_db)
    (run,) = scenario_run(conn, "ddp_4ranks_diverge")
    out = tmp_path / "report"
    write_report(fixtures_db, out, [run], overwrite=False)
    for rank in range(4):
        assert (out / f"rank_{rank}" / "chromium_events.json").read_bytes() == b"".join(trace_chunks(conn, run, [rank]))
    whole, overview = out / "chromium_events.json", out / "chromium_overview.json"
    if whole_up_to == 8:
        assert whole.read_bytes() == b"".join(trace_chunks(conn, run)) and not overview.exists()
    else:
        assert overview.read_bytes() == b"".join(trace_chunks(conn, run, overview=True)) and not whole.exists()
    index = (out / "index.html").read_text()
    assert all(f'href="rank_{rank}/chromium_events.json"' in index for rank in range(4))
    assert broken_links(out) == []


def test_a_ranks_trie_reads_that_ranks_compiles_through_the_index(fixtures_db):
    """A report writes a trie per rank: each reads its rank's compiles through the (run_id, rank) index, not every
    rank's rows of the run (`? IS NULL OR rank = ?` did: a 256-rank run's tries read its compiles 256 times)."""
    from tlindex.answers.sql import of_one_rank

    conn = connect(fixtures_db)
    of_rank, params = of_one_rank("rank", 1)
    plan = [row[3] for row in conn.execute(
        f"EXPLAIN QUERY PLAN SELECT id FROM compiles WHERE run_id = ?{of_rank} AND dynamo_start IS NOT NULL",
        (1, *params))]
    assert plan == ["SEARCH compiles USING INDEX compiles_run (run_id=? AND rank=?)"]
    assert of_one_rank("rank", None) == ("", ())
