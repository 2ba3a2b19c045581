"""tlindex removes, replaces and ingests only what it made: folders carry its marker (tlindex.owned).

`run --trace-dir` of a folder holding the user's files and older logs, `report --overwrite` of
tlparse's output, `export parquet --replace` of someone else's folder, and an ingest beside a folder
named like its staging folders: each leaves the user's files as they were.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from click.testing import CliRunner
from conftest import DATA, connect, scenario_logs, scenario_run

from tlindex import owned
from tlindex.cli import cli
from tlindex.ingest.pipeline import ingest

WRITER = """import os, shutil, sys
for log in sys.argv[1:]:  # as torch would: its log, into TORCH_TRACE
    shutil.copy(log, os.environ["TORCH_TRACE"])
"""


def user_folder(path: Path) -> dict[str, bytes]:
    """Every file under a folder, with its content: what must be the same after tlindex ran."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_run_into_a_trace_dir_of_the_user_s_takes_and_removes_only_its_own_folder(tmp_path, monkeypatch):
    """Reproduction: `run --trace-dir EXISTING --no-keep-trace` deleted EXISTING, and without it ingested the
    logs already there into the new run."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    shutil.copy(scenario_logs("graph_breaks")[0], mine)  # an older trace of the user's, in the same folder
    before = user_folder(mine)
    (tmp_path / "writer.py").write_text(WRITER)
    new_log = str(scenario_logs("recompiles")[0])
    db = tmp_path / "t.db"
    base = ["run", "--db", str(db), "--trace-dir", str(mine)]
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [*base, "--no-keep-trace", "--", sys.executable, "writer.py", new_log])
    assert result.exit_code == 0, result.output
    assert user_folder(mine) == before  # the user's files as they were, the run's own folder gone
    assert [Path(row[0]).name for row in connect(db).execute("SELECT path FROM files")] == [Path(new_log).name]
    other_log = str(scenario_logs("dynamic")[0])  # (the same bytes again would be taken for the first log, moved)
    result = CliRunner().invoke(cli, [*base, "--label", "kept", "--", sys.executable, "writer.py", other_log])
    assert result.exit_code == 0, result.output
    (kept,) = [p for p in mine.iterdir() if p.is_dir()]  # <time>-<command>, made by this run and marked
    assert owned.owns(kept, "trace") and (kept / Path(other_log).name).is_file()
    files = connect(db).execute("SELECT f.path FROM files f JOIN sources s ON s.file_id = f.id JOIN runs r "
                                "ON r.id = s.run_id WHERE r.label = 'kept'").fetchall()
    assert [Path(row[0]).parent for row in files] == [kept]  # only what the command wrote
    assert {name: body for name, body in user_folder(mine).items() if not name.startswith(kept.name)} == before


def test_a_command_that_writes_no_trace_leaves_no_folder_behind(tmp_path, monkeypatch):
    (tmp_path / "quiet.py").write_text("print('no torch here')\n")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, ["run", "--db", "t.db", "--trace-dir", "traces", "--", sys.executable, "quiet.py"])
    assert result.exit_code == 0 and "wrote no trace" in result.output
    assert list((tmp_path / "traces").iterdir()) == []


def test_overwrite_replaces_only_a_report_tlindex_wrote(fixtures_db, tmp_path):
    """Reproduction: `report --overwrite` wiped any folder holding a file named compile_directory.json."""
    (run,) = scenario_run(connect(fixtures_db), "graph_breaks")
    base = ["report", "--db", str(fixtures_db), "--run", str(run), "--silent", "--overwrite", "-o"]
    tlparse = tmp_path / "tl_out"  # tlparse's output, and the user's notes beside it
    tlparse.mkdir()
    (tlparse / "compile_directory.json").write_text("{}")
    (tlparse / "index.html").write_text("tlparse's index")
    (tlparse / "notes.txt").write_text("my notes")
    lookalikes = {"tlindex-report.json": '{"runs": [], "pages": 1}',  # a summary's name is not a marker
                  owned.MARKER: '{"tlindex": "export"}\n'}  # nor is another kind's marker
    for name, text in lookalikes.items():
        folder = tmp_path / name.strip(".")
        folder.mkdir()
        (folder / name).write_text(text)
        (folder / "data.csv").write_text("a,b\n")
    for folder in (tlparse, *(tmp_path / name.strip(".") for name in lookalikes)):
        before = user_folder(folder)
        result = CliRunner().invoke(cli, [*base, str(folder)])
        assert result.exit_code == 1 and "refusing to replace" in result.output, result.output
        assert "tlparse's output" in result.output and "Traceback" not in result.output
        assert user_folder(folder) == before
    out = tmp_path / "report"
    assert CliRunner().invoke(cli, [*base, str(out)]).exit_code == 0
    assert owned.owns(out, "report")
    (out / "index.html").write_text("an older report")
    assert CliRunner().invoke(cli, [*base, str(out)]).exit_code == 0  # tlindex's own: replaced
    assert (out / "index.html").read_text() != "an older report"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # nothing beside them


def test_export_replace_replaces_only_an_export_tlindex_wrote(fixtures_db, tmp_path):
    """`export parquet --replace` removed any non-empty folder."""
    base = ["export", "parquet", "--db", str(fixtures_db), "-t", "runs", "--replace"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "data.parquet").write_bytes(b"PAR1 the user's")
    report = tmp_path / "report"
    assert CliRunner().invoke(cli, ["report", "--db", str(fixtures_db), "--run", "1", "--silent", "-o", str(report)]
                              ).exit_code == 0
    for folder in (mine, report):  # not an export: a report is tlindex's, but of another kind
        before = user_folder(folder)
        result = CliRunner().invoke(cli, [*base, str(folder)])
        assert result.exit_code == 1 and "refusing to replace" in result.output, result.output
        assert user_folder(folder) == before
    out = tmp_path / "out"
    assert CliRunner().invoke(cli, [*base, str(out)]).exit_code == 0 and owned.owns(out, "export")
    result = CliRunner().invoke(cli, [*base, str(out), "-t", "compiles"])
    assert result.exit_code == 0 and (out / "compiles").is_dir()
    assert json.loads((out / "_manifest.json").read_text())["tables"].keys() == {"runs", "compiles"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine", "out", "report"]  # nothing beside them


def test_ingest_removes_only_staging_folders_an_ingest_made(tmp_path):
    """A killed ingest's staging folder is removed by the next one; a folder merely named like one is not."""
    db = tmp_path / "t.db"
    lookalike = tmp_path / ".t.db.staging-mine"  # the user's, named like a staging folder, long unlocked
    lookalike.mkdir()
    (lookalike / "keep.txt").write_text("mine")
    left = owned.make_dir(tmp_path / ".t.db.staging-killed", "staging")  # a killed ingest's
    (left / "0.db").write_bytes(b"half a staging database")
    empty = tmp_path / ".t.db.staging-empty"  # not even a file in it: still not one an ingest made
    empty.mkdir()
    old = time.time() - 3600
    for folder in (lookalike, left, empty):
        os.utime(folder, (old, old))
    assert not ingest(db, [str(DATA / "graph_breaks")], jobs=1).problems
    assert (lookalike / "keep.txt").read_text() == "mine" and empty.is_dir()
    assert not left.exists()


def test_a_marker_is_exactly_tlindex_s(tmp_path):
    """Only the marker tlindex writes, as a regular file in the folder itself, makes a folder tlindex's."""
    folder = owned.make_dir(tmp_path / "r", "report")
    assert owned.owns(folder, "report") and not owned.owns(folder, "export")
    (tmp_path / "link").symlink_to(folder)
    assert not owned.owns(tmp_path / "link", "report")  # a link to it is not it
    for text in ('{"tlindex": "report", "by": "me"}', '{"tlindex":"report"}', "", "\x00" * 10):
        other = tmp_path / f"o{len(text)}"
        other.mkdir()
        (other / owned.MARKER).write_text(text)
        assert not owned.owns(other, "report"), text
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / owned.MARKER).symlink_to(folder / owned.MARKER)
    assert not owned.owns(linked, "report")
    try:
        owned.remove(linked, "report")
    except owned.NotOwned as error:
        assert "left alone" in str(error)
    else:
        raise AssertionError("removed a folder that is not tlindex's")
    assert linked.exists()
