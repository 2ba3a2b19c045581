"""Names are names (issue 37): a path that exists is taken literally, a label never shadows a run id, a
name from a log or a folder cannot forge a line or act on the terminal, and a full disk says so."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, connect, ingest
from test_odd_values import RECIPES, Case

from tlindex.cli import cli

LOG = next((DATA / "graph_breaks").glob("*.log"))


def test_a_path_that_exists_is_taken_literally_even_with_glob_characters(tmp_path):
    folder = tmp_path / "run[1]"
    folder.mkdir()
    shutil.copy(LOG, folder / "trace[a].log")
    (tmp_path / "run1").mkdir()  # what the pattern run[1] would match instead
    shutil.copy(next((DATA / "dynamic").glob("*.log")), tmp_path / "run1" / "other.log")
    db = tmp_path / "t.db"
    for path in (folder, folder / "trace[a].log"):
        result = CliRunner().invoke(cli, ["ingest", str(path), "--db", str(db), "--silent", "--replace"])
        assert result.exit_code == 0, result.output
        names = {row[0] for row in sqlite3.connect(db).execute("SELECT name FROM files")}
        assert names == {"trace[a].log"}
    # a pattern that names no existing path is still a pattern
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "run[1]" / "*.log"), "--db", str(db), "--silent"])
    assert result.exit_code == 0


def test_a_label_is_never_a_whole_number_and_an_id_always_names_its_run(tmp_path):
    db = tmp_path / "t.db"
    ingest(db, [str(DATA / "graph_breaks"), str(DATA / "dynamic")], jobs=1)
    for args in (["label", "1", "2"], ["label", "1", " 2 "], ["label", "1", ""],
                 ["ingest", str(DATA / "recompiles"), "--run", "7"]):
        result = CliRunner().invoke(cli, [*args, "--db", str(db)])
        assert result.exit_code == 2 and "label cannot be" in result.output, (args, result.output)
    # a database an older tlindex labelled with a number: the id still names its own run
    conn = sqlite3.connect(db)
    conn.execute("UPDATE runs SET label = '2' WHERE id = 1")
    conn.commit()
    result = CliRunner().invoke(cli, ["findings", "2", "--db", str(db), "--json"])
    assert '"run": 2' in result.output and '"run": 1' not in result.output


HOSTILE = "evil\nrun 99 FORGED: nothing to report\x1b]0;owned\x07\x1b[31m"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, Path]:
    """Real logs in a folder whose name, and a run whose label, carry a newline and escape sequences."""
    tmp = tmp_path_factory.mktemp("hostile")
    logs = tmp / HOSTILE.replace("/", "_")
    logs.mkdir()
    shutil.copy(LOG, logs / LOG.name)
    shutil.copy(next((DATA / "dynamic").glob("*.log")), logs / "second.log")
    db = tmp / "hostile.db"
    ingest(db, [str(logs / LOG.name)], jobs=1, run_label=HOSTILE)
    ingest(db, [str(logs / "second.log")], jobs=1)  # labelled by its folder
    return logs, db


def _forged(output: str, quoted_newlines: bool = False) -> list[str]:
    """Lines that a name from the log made: a raw escape or bell, or a line the label started (but in CSV and
    TSV, where a quoted value keeps its newline: that is data, read back whole)."""
    return [line for line in output.split("\n") if "\x1b" in line or "\x07" in line
            or (line.startswith("run 99 FORGED") and not quoted_newlines)]


def test_every_command_prints_names_from_logs_and_folders_escaped(hostile, tmp_path):
    """Every command of the registry (tests/test_odd_values.RECIPES) on runs named by a hostile label and
    folder: no output line carries a raw control character or begins with what the name holds."""
    logs, source = hostile
    db = tmp_path / "hostile.db"
    shutil.copy(source, db)
    conn = sqlite3.connect(db)
    case = Case(logs, db, tmp_path, [str(row[0]) for row in conn.execute("SELECT id FROM runs ORDER BY id")])
    conn.close()
    found = []
    for command, recipe in RECIPES.items():
        for args in recipe(case):
            result = CliRunner().invoke(cli, [*command, *args])
            quoted = "--csv" in args or "--tsv" in args
            for stream in (result.stdout, result.stderr):
                if _forged(stream, quoted):
                    found.append((command, args, _forged(stream, quoted)[:2]))
    assert not found, found[:3]
    # the names are there, escaped (in the database the recipes did not rename)
    result = CliRunner().invoke(cli, ["runs", "--db", str(source)])
    assert "evil⏎ run 99 FORGED" in result.output and "^[]0;owned^G" in result.output
    # and an error that names them is one escaped line too
    result = CliRunner().invoke(cli, ["findings", "evil\nrun 1", "--db", str(source)])
    assert result.exit_code == 1 and len(result.stderr.strip().split("\n")) == 1 and not _forged(result.stderr)


def test_csv_and_tsv_escape_control_characters(hostile):
    _, db = hostile
    for flag, separator in (("--csv", ","), ("--tsv", "\t")):
        result = CliRunner().invoke(cli, ["query", "select label from runs order by id", "--db", str(db), flag])
        assert result.exit_code == 0
        assert "\x1b" not in result.output and "\x07" not in result.output
        assert "^[]0;owned^G^[[31m" in result.output


@pytest.fixture
def small_disk(tmp_path) -> Path:
    """A 3 MB file system of this test's own (a tmpfs in a mount namespace), or a skip where none can be made."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    disk = tmp_path / "disk"
    disk.mkdir()
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount -t tmpfs -o size=3m tmpfs {disk}"],
                           capture_output=True)
    if probe.returncode:
        pytest.skip(f"cannot mount a small file system here: {probe.stderr.decode()[:200]}")
    return disk


def _on_small_disk(folder: Path, args: list[str]) -> subprocess.CompletedProcess:
    script = f"mount -t tmpfs -o size=3m tmpfs {folder} && exec \"$@\""
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", sys.executable, "-m", "tlindex", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", ["ingest", "report"])
def test_a_full_disk_says_the_disk_is_full_and_that_nothing_was_lost(small_disk, fixtures_db, command):
    folder = small_disk
    logs = [str(DATA / name) for name in ("train_step", "vllm_piecewise", "graph_breaks", "collectives_3ranks")]
    args = ([command, *logs, "--db", str(folder / "x.db")] if command == "ingest"
            else [command, "--db", str(fixtures_db), "-o", str(folder / "report"), "-j", "1"])
    proc = _on_small_disk(folder, args)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().split("\n")[-1]
    assert "the disk is full" in last and "nothing was lost" in last and "Traceback" not in proc.stderr
    assert "cannot rollback" not in proc.stderr


def test_an_ingest_stopped_by_a_full_disk_leaves_a_database_that_reads(tmp_path, small_disk):
    """What was merged before the disk filled is whole: the database opens and its files are complete."""
    folder = small_disk
    db = folder / "x.db"
    script = (f"mount -t tmpfs -o size=3m tmpfs {folder} && \"$0\" -m tlindex ingest {DATA / 'train_step'} "
              f"{DATA / 'vllm_piecewise'} {DATA / 'graph_breaks'} --db {db} -j 1; "
              f"cp {db}* {tmp_path}/ 2>/dev/null; true")
    subprocess.run(["unshare", "-rm", "sh", "-c", script, sys.executable], capture_output=True, timeout=120)
    copied = tmp_path / "x.db"
    assert copied.exists(), "the first files fit: the database exists"
    conn = connect(copied)
    for (file_id, lines) in conn.execute("SELECT id, lines_ingested FROM files").fetchall():
        counted = conn.execute("SELECT coalesce(sum(payload_lines + 1), 0) FROM envelopes e JOIN sources s "
                               "ON s.id = e.source_id WHERE s.file_id = ?", (file_id,)).fetchone()[0]
        errors = conn.execute("SELECT coalesce(sum(lines), 0) FROM ingest_errors WHERE file_id = ? AND bytes > 0",
                              (file_id,)).fetchone()[0]
        assert counted + errors == lines


@pytest.mark.asyncio
async def test_canned_queries_on_datasette_take_runs_and_compiles_by_name(db, ds):
    """Every canned query with a `run` parameter, asked on Datasette with the run's label (or a unique prefix of it),
    answers what it answers with the id (a redirect to it); a compile as torch prints it the same; a name that
    matches nothing or several is a 404 that says so."""
    from tlindex.answers.queries import load_queries

    run_id, label = db.execute("""SELECT r.id, r.label FROM runs r JOIN compiles c ON c.run_id = r.id
        WHERE c.compile_id = '0/1' ORDER BY r.id LIMIT 1""").fetchone()
    with_run = [q for q in load_queries().values() if "run" in {name for name, _ in q.params}]
    assert len(with_run) >= 5
    for query in with_run:
        by_name = await ds.client.get(f"/traces/{query.name}.json", params={"run": label, "_shape": "array"})
        assert by_name.status_code == 302, (query.name, by_name.text)
        assert by_name.headers["location"].endswith(f"/traces/{query.name}.json?run={run_id}&_shape=array")
        followed = await ds.client.get(by_name.headers["location"])
        by_id = await ds.client.get(f"/traces/{query.name}.json", params={"run": str(run_id), "_shape": "array"})
        assert followed.status_code == by_id.status_code == 200 and followed.json() == by_id.json(), query.name
    compile_id = db.execute("SELECT id FROM compiles WHERE run_id = ? AND compile_id = '0/1' ORDER BY rank LIMIT 1",
                            (run_id,)).fetchone()[0]
    asked = await ds.client.get("/traces/guards_diff", params={"run": label, "compile": "[0/1]"})
    assert asked.status_code == 302 and f"compile={compile_id}" in asked.headers["location"]
    nothing = await ds.client.get("/traces/failures", params={"run": "<b>no such run</b>"})
    assert nothing.status_code == 404 and "no run matches" in nothing.text
    assert nothing.headers["content-type"].startswith("text/plain")
    several = db.execute("SELECT count(*) FROM runs WHERE label LIKE 'series@%'").fetchone()[0]
    ambiguous = await ds.client.get("/traces/failures", params={"run": "series@"})
    assert several > 1 and ambiguous.status_code == 404 and f"{several} runs match" in ambiguous.text


@pytest.mark.asyncio
async def test_pages_take_a_run_by_any_of_its_names(db, ds):
    """The runs, search, trend and graph-breaks pages' `?run=` is a run as users name it, as in every command."""
    run_id, label, directory = db.execute(
        "SELECT id, label, directory FROM runs WHERE label LIKE 'series@%' ORDER BY id DESC LIMIT 1").fetchone()
    for name in (label, str(run_id)):
        runs = (await ds.client.get("/traces/-/tlindex.json", params={"run": name})).json()
        assert [r["id"] for r in runs["runs"]] == [run_id]
        search = (await ds.client.get("/traces/-/tlindex/search.json", params={"q": "graph_break", "run": name})).json()
        assert search["run"] == run_id and {g["run"] for g in search["groups"]} <= {run_id}
        breaks = (await ds.client.get("/traces/-/tlindex/graph-breaks.json", params={"run": name})).json()
        assert breaks["run"] == run_id
    unknown = await ds.client.get("/traces/-/tlindex/search", params={"q": "x", "run": "<i>nope</i>"})
    assert unknown.status_code == 404 and "<i>nope" not in unknown.text
