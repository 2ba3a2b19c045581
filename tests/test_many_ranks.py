"""Hundreds of ranks read like four, ranks compared by what they compiled, and a job watched while it runs.

The big runs are renumbered copies of real multi-rank logs (tests/many_ranks.py: derived from tests/data, each
file's ranks and pids renamed, nothing else changed unless a test says so); what a finding must say is read from
the copies' raw lines here (tests/oracle.py's reader, conftest.raw_envelopes), apart from tlindex.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
from collections import Counter
from datetime import datetime
from pathlib import Path

import many_ranks
import oracle
import pytest
from conftest import VERSIONS, connect, ingest, raw_envelopes, write_report

from tlindex import Database
from tlindex.answers.findings import findings, rank_list
from tlindex.answers.queries import load_queries, run_sql
from tlindex.watch import Watcher

WORLD = 256


def by_kind(conn: sqlite3.Connection, run: int) -> dict:
    return {f.kind: f for f in findings(conn, run)}


def rank_of(path: Path) -> int:
    return int(re.search(r"_rank_(\d+)_", path.name).group(1))


def compiles_in(path: Path) -> list[tuple]:
    """A log's compiles as its raw records say them: (frame id, frame compile id) of each dynamo_start."""
    return [(e.get("frame_id"), e.get("frame_compile_id")) for e in raw_envelopes([path]) if "dynamo_start" in e]


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> tuple[Path, Path]:
    """ddp_4ranks_diverge copied into 256 ranks (rank 1, which recompiles alone, into every 4th from 1), ingested."""
    root = tmp_path_factory.mktemp("ranks")
    logs = many_ranks.build("ddp_4ranks_diverge", WORLD, root / "logs")
    assert not ingest(root / "traces.db", [str(logs)], jobs=2).problems
    return logs, root / "traces.db"


def test_rank_sets_are_said_as_people_say_them():
    world = list(range(256))
    assert rank_list(list(range(1, 256, 4)), world) == "64 of 256 ranks (every 4th from 1)"
    assert rank_list([r for r in world if r % 4 != 1], world) == "192 of 256 ranks (all but every 4th from 1)"
    assert rank_list([r for r in world if r not in (3, 7)], world) == "all ranks but 3, 7"
    assert rank_list(list(range(128)), world) == "ranks 0–127"
    assert rank_list([r for r in range(1, 256, 4) if r != 37], world) == "63 of 256 ranks (every 4th from 1 except 37)"
    assert rank_list(list(range(1, 256, 2)), world) == "128 of 256 ranks (the odd ones)"
    assert rank_list(world, world) == "all 256 ranks" and rank_list([0, 1], [0, 1]) == "both ranks"
    assert rank_list([3]) == "rank 3" and rank_list([0, 2, 3], [0, 1, 2, 3]) == "ranks 0, 2, 3"
    scattered = [0, 5, 6, 7, 16, 24, 26, 30, 31, 40, 41, 50, 77, 91]  # no pattern: a few ranges, then how many more
    assert rank_list(scattered, world) == "14 of 256 ranks (0, 5–7, 16, 24, 26, 30, 31 and 5 more)"


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_every_finding_of_a_256_rank_run_fits_in_a_few_lines(big):
    logs, db = big
    counts = {rank_of(path): len(compiles_in(path)) for path in sorted(logs.iterdir())}
    more = sorted(rank for rank, n in counts.items() if n > min(counts.values()))  # those that compiled more
    assert more == list(range(1, WORLD, 4))
    conn = connect(db)
    (run,) = [row[0] for row in conn.execute("SELECT id FROM runs")]
    found = findings(conn, run)
    for finding in found:
        assert len(finding.text) < 320, finding.text  # a few lines
        words = [word for word in finding.text.split() if "/" not in word]  # (a user's file is as long as it is)
        assert max(len(word) for word in words) < 40, finding.text  # and they wrap
    divergence = by_kind(conn, run)["divergence:missing_compile"]
    assert divergence.text.startswith("Ranks diverge in compile ids: [0/1], [4/1] only on "
                                      f"{rank_list(more, list(range(WORLD)))}.")
    assert "64 of 256 ranks (every 4th from 1)" in divergence.text
    assert all(item["ranks"] == ", ".join(map(str, more)) for item in divergence.items)  # the whole list
    rows = [dict(r) for r in run_sql(conn, load_queries()["rank_divergence"].sql, {"run": run})]
    assert all(", " in row["ranks"] or "," not in row["ranks"] for row in rows)  # a wide list wraps


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_ranks_are_grouped_by_what_they_compiled(big):
    logs, db = big
    compiled = {rank_of(path): tuple(compiles_in(path)) for path in logs.iterdir()}
    alike: dict[tuple, list[int]] = {}
    for rank in sorted(compiled):
        alike.setdefault(compiled[rank], []).append(rank)
    conn = connect(db)
    groups = by_kind(conn, 1)["rank_groups"]
    assert sorted(item["ranks"] for item in groups.items) == sorted(", ".join(map(str, g)) for g in alike.values())
    largest = max(alike.values(), key=len)
    assert groups.text.startswith(f"{rank_list(largest, list(range(WORLD)))} like rank {largest[0]} (5 compiles")
    assert "64 differ: 64 of 256 ranks (every 4th from 1) like rank 1 (7 compiles" in groups.text
    assert "also [0/1], [4/1]" in groups.text


def test_ranks_whose_ids_an_export_shifted_compiled_the_same(tmp_path):
    """2.15 numbers rank 0's compiles one off (its export took frame id 0); they are the same code objects."""
    folder = VERSIONS / "2.15.0" / "export_in_ranks"
    names = {}
    for path in sorted(folder.iterdir()):
        metrics = [e["compilation_metrics"] for e in raw_envelopes([path]) if "compilation_metrics" in e]
        names[rank_of(path)] = ([m["compile_id"] for m in metrics if m.get("co_name")],
                                Counter(m["co_name"] for m in metrics if m.get("co_name")))
    assert names[0][0] != names[1][0] and names[0][1] == names[1][1]  # other ids, the same functions
    ingest(tmp_path / "t.db", [str(folder)], jobs=1)
    found = by_kind(connect(tmp_path / "t.db"), 1)
    assert not [kind for kind in found if kind.startswith("divergence")]
    assert found["rank_groups"].text.startswith("Both ranks compiled the same: 2 compiles")


def test_a_rank_far_slower_than_the_ranks_that_compiled_the_same_is_named(tmp_path):
    """HAND-MADE change to real logs: rank 6 of 16 copies of ddp_4ranks_diverge given 30 s more per compile."""
    logs = many_ranks.build("ddp_4ranks_diverge", 16, tmp_path / "logs", slower={6: 30.0})
    seconds = {rank_of(path): sum(e["compilation_metrics"]["entire_frame_compile_time_s"] or 0
                                  for e in raw_envelopes([path]) if "compilation_metrics" in e)
               for path in logs.iterdir()}
    same = sorted(seconds[rank] for rank in range(16) if rank % 4 != 1)  # the ranks that compiled as rank 6 did
    median = (same[len(same) // 2 - 1] + same[len(same) // 2]) / 2
    ingest(tmp_path / "t.db", [str(logs)], jobs=1)
    slow = by_kind(connect(tmp_path / "t.db"), 1)["slow_rank"]
    assert slow.text.startswith(f"Rank 6 compiled far slower than the ranks that compiled the same: "
                                f"{round(seconds[6], 1)} s compiling, {round(seconds[6] - median, 1)} s more than "
                                f"the median ({round(median, 1)} s) of the {len(same)} that compiled the same")
    # and its compiles' pages name it the slowest of its rank group, with its own time beside theirs
    from tlindex.answers.compiles import compile_row
    from tlindex.pages.compile import alike_data

    conn = connect(tmp_path / "t.db")
    (forward,) = conn.execute("SELECT c.id FROM compiles c JOIN sources s ON s.id = c.source_id "
                              "WHERE s.rank = 0 AND c.compile_id = '4/0'").fetchone()
    alike = alike_data(conn, compile_row(conn, forward))
    times = {int(row["rank"]): row["compile_time_s"] for row in alike["rows"]}
    assert sorted(times) == [rank for rank in range(16) if rank % 4 != 1]
    assert alike["spread"]["slowest"]["rank"] == "6" and times[6] - times[0] > 29  # the 30 s added to its metrics


def _clock(text: str) -> float:
    return datetime.strptime(text[5:], "%H:%M:%S.%f").timestamp()


def test_a_rank_behind_every_other_is_said_while_its_log_stops_and_gone_once_it_grows(tmp_path):
    """Rank 5 of 16 copies of ddp_4ranks_diverge cut right after its [4/0] dynamo_start (its real log's prefix, as the
    file stood while that compile ran), the others whole; then its log grows to the end, as a job's would."""
    logs = many_ranks.build("ddp_4ranks_diverge", 16, tmp_path / "logs", cut={5: "4/0"})
    last = max(_clock(t) for path in logs.iterdir() for t, *_ in oracle.records(path))
    began = min(_clock(t) for t, _, e, _ in oracle.records(next(logs.glob("*_rank_5_*")))
                if (e.get("frame_id"), e.get("frame_compile_id")) == (4, 0))
    said: list[str] = []
    with Database(tmp_path / "t.db", create=True) as db:
        watcher = Watcher(db, [str(logs)], said.append)
        watcher.once()
        behind = by_kind(db.conn, 1)["rank_behind"]
        assert behind.text == (f"Rank 5 is behind every other: compiling [4/0] forward for {round(last - began, 1)} s "
                               f"at the last record; the other 15 ranks finished it, the last "
                               f"{behind.items[0]['behind'].rsplit('the last ', 1)[1]}.")
        assert any(line.strip().startswith("rank 5: compiling [4/0] forward") for line in said)
        source = many_ranks.rank_files(many_ranks.DATA / "ddp_4ranks_diverge")[1]
        whole = tmp_path / "whole"
        whole.mkdir()
        (logs / next(logs.glob("*_rank_5_*")).name).write_bytes(many_ranks.write_rank(source, whole, 5).read_bytes())
        watcher.once()  # the log grew: continued, the run derived again
        found = by_kind(db.conn, 1)
        assert "rank_behind" not in found and "mid_compile" not in found
        alike = [rank for rank in range(16) if rank % 4 != 1]  # rank 5 in its group again
        assert found["rank_groups"].text.startswith(f"{rank_list(alike, list(range(16))).capitalize()} like rank 0")


def test_logs_that_stop_mid_compile_are_said_and_the_run_page_follows_them(tmp_path, monkeypatch):
    """Every rank of ddp_2ranks cut right after its [4/0] dynamo_start (the real logs' prefix, as they stood while
    the job compiled forward): no rank is behind another, every log stops mid-compile."""
    from click.testing import CliRunner

    from tlindex.cli import cli
    from tlindex.pages import run as run_page

    logs = many_ranks.build("ddp_2ranks", 2, tmp_path / "logs", cut={0: "4/0", 1: "4/0"})
    ingest(tmp_path / "t.db", [str(logs)], jobs=1)
    conn = connect(tmp_path / "t.db")
    found = by_kind(conn, 1)
    assert "rank_behind" not in found
    assert found["mid_compile"].text.startswith("2 logs stop mid-compile (both ranks: [4/0] forward, ")
    data = run_page.run_data(conn, None, 1)["run"]
    assert data["compiling"][0].startswith("both ranks: compiling [4/0] forward for ")
    assert data["refresh_s"] == run_page.REFRESH_S  # just ingested: the page refreshes itself
    monkeypatch.setattr(run_page, "LIVE_S", 0)
    assert run_page.run_data(conn, None, 1)["run"]["refresh_s"] is None
    shown = CliRunner().invoke(cli, ["findings", "1", "--db", str(tmp_path / "t.db")])
    assert "logs stop mid-compile" in shown.output


def compile_pages(folder: Path) -> dict[str, list[str]]:
    """A report's compile pages (not their bytecode or passes pages) by the compile id each shows."""
    found: dict[str, list[str]] = {}
    for page in (folder / "compiles").glob("*.html"):
        if page.stem.isdigit():
            shown = re.search(r'<h1><span class="compile [^"]*">\[([^\]]+)\]', page.read_text(encoding="utf-8"))
            found.setdefault(shown.group(1), []).append(page.name)
    return found


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_a_256_rank_report_writes_a_compile_page_per_rank_group_not_per_rank(big, tmp_path):
    from test_report import broken_links

    logs, db = big
    compiled = {rank_of(path): compiles_in(path) for path in logs.iterdir()}
    groups: dict[tuple, list[int]] = {}
    for rank in sorted(compiled):
        groups.setdefault(tuple(compiled[rank]), []).append(rank)
    write_report(db, tmp_path / "report", [1], jobs=2)
    pages = compile_pages(tmp_path / "report")
    # a page for each compile of each group (its first rank's), and [-/-] (what a process logged outside any
    # compile: never another's) for each of the 256
    expected = Counter(f"{frame}/{count}" for ranks in groups.values() for frame, count in compiled[ranks[0]])
    assert {cid: len(files) for cid, files in pages.items() if cid != "-/-"} == expected
    assert len(pages["-/-"]) == WORLD and len(groups) == 2
    assert broken_links(tmp_path / "report") == []  # every rank's compile links lead to its group's page
    # [4/1] (rank 1's recompile, and its 63 copies'): one page, listing each rank of the group with its own row
    (recompile,) = pages["4/1"]
    text = (tmp_path / "report" / "compiles" / recompile).read_text(encoding="utf-8")
    rows = text.split('<table class="rows-and-columns alike">')[1].split("</table>")[0]
    with_it = sorted(rank for rank, ids in compiled.items() if (4, 1) in ids)
    assert re.findall(r'<tr(?: class="here")?><td><a href="[^"]*">(\d+)</a>', rows) == [str(r) for r in with_it]
    assert f"compiled the same on {rank_list(with_it, list(range(WORLD)))}, the rank group of rank 1" in text
    assert " s on each." in text  # copies of one rank's log: one time, no slowest named


@pytest.mark.asyncio
async def test_a_compile_page_lists_the_same_compile_on_each_rank_of_its_group(big):
    from datasette.app import Datasette

    logs, db = big
    compiled = {rank_of(path): compiles_in(path) for path in logs.iterdir()}
    like_0 = [rank for rank in sorted(compiled) if compiled[rank] == compiled[0]]
    conn = connect(db)
    (compile,) = conn.execute("SELECT c.id FROM compiles c JOIN sources s ON s.id = c.source_id "
                              "WHERE s.rank = 38 AND c.compile_id = '4/0'").fetchone()
    page = (await Datasette([str(db)]).client.get(f"/traces/-/tlindex/compile/{compile}.json")).json()
    alike = page["compile"]["alike"]
    assert [int(row["rank"]) for row in alike["rows"]] == like_0 and alike["first"] == "0"
    ids = dict(conn.execute("SELECT s.rank, c.id FROM compiles c JOIN sources s ON s.id = c.source_id "
                            "WHERE c.compile_id = '4/0'").fetchall())
    assert [row["id"] for row in alike["rows"]] == [ids[rank] for rank in like_0]  # each rank's own [4/0]
    assert alike["said"] == "192 of 256 ranks (all but every 4th from 1)"


@pytest.mark.asyncio
async def test_the_run_page_of_256_ranks_shows_groups_not_ranks(big):
    from datasette.app import Datasette

    _, db = big
    html = (await Datasette([str(db)]).client.get("/traces/-/tlindex/run/1")).text
    groups = html.split('class="rows-and-columns rank-groups"')[1].split("</table>")[0]
    assert "192 of 256 ranks (all but every 4th from 1)" in groups and "64 of 256 ranks (every 4th from 1)" in groups
    assert '<details class="per-rank"><summary>Every rank (256)</summary>' in html  # folded
    assert html.count('href="/traces/-/tlindex/trie/1?rank=') == 2  # a stack trie per group, not per rank
    for trie in ("/traces/-/tlindex/trie/1", "/traces/-/tlindex/trie/1?rank=37"):  # and so do the tries' own links
        links = (await Datasette([str(db)]).client.get(trie)).text.split('class="trie-links"')[1].split("</p>")[0]
        assert links.count("?rank=") == 2 and "and the 191 like it" in links, links
    assert 'http-equiv="refresh"' in html  # ingested a moment ago


def test_tlindex_watch_is_a_loop_over_ingest_stopped_by_ctrl_c(tmp_path):
    """The stop itself is tests/test_stopped_commands.py's (recipe `watch`); here: passes say only what changed."""
    logs = tmp_path / "logs"
    shutil.copytree(many_ranks.DATA / "ddp_2ranks", logs)
    said: list[str] = []
    with Database(tmp_path / "t.db", create=True) as db:
        watcher = Watcher(db, [str(logs)], said.append)
        watcher.follow(every=0.1, passes=3)
    assert len([line for line in said if " run 1 " in line]) == 1  # the first pass; the others found nothing new
    assert watcher.runs == [1]


GROWING = """import os, sys, time
sys.path.insert(0, sys.argv[1])
import many_ranks
# as a job's ranks would: each real log written up to its [4/0] dynamo_start, a pause while forward compiles, the rest
sources = list(many_ranks.rank_files(many_ranks.DATA / "ddp_2ranks").values())
lines = [path.read_bytes().splitlines(keepends=True) for path in sources]
cuts = [many_ranks.cut_at(found, "4/0") for found in lines]
files = [open(os.path.join(os.environ["TORCH_TRACE"], path.name), "wb") for path in sources]
for file, found, cut in zip(files, lines, cuts):
    file.writelines(found[:cut]); file.flush()
time.sleep(float(sys.argv[2]))
for file, found, cut in zip(files, lines, cuts):
    file.writelines(found[cut:]); file.close()
"""


def test_tlindex_run_watch_ingests_while_the_command_runs_into_one_run(tmp_path):
    import subprocess
    import sys

    (tmp_path / "growing.py").write_text(GROWING)
    done = subprocess.run([sys.executable, "-m", "tlindex", "run", "--db", str(tmp_path / "t.db"), "--watch", "0.2",
                           "--", sys.executable, str(tmp_path / "growing.py"), str(Path(__file__).parent), "2"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "both ranks: compiling [4/0] forward for " in done.stderr  # said by a pass while the command ran
    conn = connect(tmp_path / "t.db")
    assert [row[0] for row in conn.execute("SELECT count(*) FROM runs")] == [1]  # the passes and the end: one run
    found = by_kind(conn, 1)
    assert "mid_compile" not in found and found["rank_groups"].text.startswith("Both ranks compiled the same")
    assert conn.execute("SELECT exit_code FROM runs").fetchone()[0] == 0  # its facts kept on that run
