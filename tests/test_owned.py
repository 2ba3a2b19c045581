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
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, connect, fixture_paths, ingest, scenario_logs, scenario_run

from tlindex import owned
from tlindex.cli import cli

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
    lookalike = tmp_path / ".t.db.staging-mine0000"  # the user's, named like a staging folder, long unlocked
    lookalike.mkdir()
    (lookalike / "keep.txt").write_text("mine")
    left = owned.make_dir(tmp_path / ".t.db.staging-killed00", "staging")  # a killed ingest's
    (left / "0.db").write_bytes(b"half a staging database")
    empty = tmp_path / ".t.db.staging-empty000"  # not even a file in it: still not one an ingest made
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


# --- single files, partial outputs, links and what is kept of lines that are not trace lines (issue 46) --------------

def file_outputs(group=cli, prefix: str = ""):
    """Every command argument or option that names one file tlindex writes (a click.Path that is not a folder)."""
    import click

    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from file_outputs(command, f"{prefix}{name} ")
            continue
        for param in command.params:
            if isinstance(param.type, click.Path) and not param.type.dir_okay and param.type.writable is not True:
                yield f"{prefix}{name}", param.name


def test_every_single_file_output_refuses_a_file_it_did_not_make(fixtures_db, tmp_path):
    """Reproduction: `export chromium train.py --run 1` overwrote the user's train.py with JSON, exit 0. Each
    single-file output of the command line (derived from its options) refuses a file it did not make, names it in
    one line and leaves it as it was; --replace overwrites it; a trace tlindex wrote is replaced without it."""
    owned_elsewhere = {"db_path": "the database: one tlindex did not make is refused (tlindex.store.db)"}
    assert sorted((c, p) for c, p in file_outputs() if p not in owned_elsewhere) == [("export chromium", "out")]
    (run,) = scenario_run(connect(fixtures_db), "ddp_2ranks")
    train = tmp_path / "train.py"
    train.write_text("import torch\n")
    link = tmp_path / "link.json"
    link.symlink_to(train)
    for out in (train, link):
        refused = CliRunner().invoke(cli, ["export", "chromium", str(out), "--db", str(fixtures_db), "--run", str(run)])
        assert refused.exit_code == 1 and f"{out}: exists and is not" in refused.output and "--replace" in refused.output
        assert len(refused.output.strip().splitlines()) == 1 and train.read_text() == "import torch\n"
    ours = tmp_path / "trace.json"
    for args in ([], [], ["--replace"]):  # new, then ours again, then with --replace
        result = CliRunner().invoke(cli, ["export", "chromium", str(ours), "--db", str(fixtures_db), "--run", str(run),
                                          *args])
        assert result.exit_code == 0, result.output
    assert json.loads(ours.read_text())["traceEvents"]
    replaced = CliRunner().invoke(cli, ["export", "chromium", str(train), "--db", str(fixtures_db), "--run", str(run),
                                        "--replace"])
    assert replaced.exit_code == 0 and json.loads(train.read_text())["traceEvents"]


def test_a_partial_file_a_killed_export_left_is_removed_by_the_next(fixtures_db, tmp_path):
    """A killed writer's `.OUT.partial-*` (tlindex's, nobody holding it) goes; one that is not tlindex's stays."""
    from tlindex.formats.chromium import HEAD

    (run,) = scenario_run(connect(fixtures_db), "ddp_2ranks")
    dead = owned.make_dir(tmp_path / ".trace.json.partial-k1ll3d00", "export")
    (dead / "trace.json").write_bytes(HEAD + b'{"name": "proc')
    other = tmp_path / ".trace.json.partial-notour00"
    other.write_text("someone's notes")
    result = CliRunner().invoke(cli, ["export", "chromium", str(tmp_path / "trace.json"), "--db", str(fixtures_db),
                                      "--run", str(run)])
    assert result.exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [".trace.json.partial-notour00", "trace.json"]


HOLDS = """import sys, time
from pathlib import Path
from tlindex import owned
out = Path(sys.argv[1])
partial = owned.TemporaryFolder(f".{out.name}.partial-", out.parent, "report")
print(partial.path, flush=True)
time.sleep(60)
"""


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_a_report_killed_by_sigkill_leaves_a_partial_the_next_report_removes(tmp_path):
    """Reproduction: a report stopped by SIGKILL left a 26 MB `.OUT.partial-*` that the next report did not remove.
    The partial of a report still running (its lock held) is left alone."""
    import signal
    import subprocess

    out = tmp_path / "out"
    killed = subprocess.Popen([sys.executable, "-m", "tlindex", "report", *fixture_paths(), "-o", str(out), "-j", "2"],
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not [p for p in tmp_path.iterdir() if p.name.startswith(".out.partial-")  # writing pages, its marker written
               and any(q.name != owned.MARKER for q in p.iterdir())]:
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".out.partial-")]
    assert left and all(owned.owns(p, "report") for p in left)
    running = subprocess.Popen([sys.executable, "-c", HOLDS, str(out)], stdout=subprocess.PIPE, text=True)
    try:
        held = Path(running.stdout.readline().strip())
        result = CliRunner().invoke(cli, ["report", str(DATA / "graph_breaks"), "-o", str(out), "-j", "1", "--silent"])
        assert result.exit_code == 0, result.output
        assert [p for p in tmp_path.iterdir() if p.name.startswith(".out.")] == [held]  # the live one alone
    finally:
        running.kill()
        running.wait()
    assert (out / "index.html").exists()


SCRATCH_HOLDER = """import sys, time
from tlindex import owned
print(owned.TemporaryFolder("tlindex-report-").path, flush=True)
time.sleep(60)
"""


def test_a_report_killed_by_sigkill_leaves_a_scratch_database_the_next_report_removes(tmp_path, monkeypatch):
    """Reproduction: `tlindex report LOG` killed by SIGKILL left its scratch folder (the logs' database) in TMPDIR,
    and every later report left it there. The next report removes it; a running report's (its lock held) stays, and
    so does a folder named like one that tlindex did not mark."""
    import signal
    import subprocess
    import tempfile

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "TMPDIR": str(temporary)}
    killed = subprocess.Popen([sys.executable, "-m", "tlindex", "report", *fixture_paths(), "-o", str(tmp_path / "killed")],
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while not [p for p in temporary.glob("tlindex-report-*") if owned.owns(p, "scratch") and (p / "traces.db").exists()]:
        assert killed.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait()
    left = list(temporary.glob("tlindex-report-*"))
    assert len(left) == 1
    foreign = temporary / "tlindex-report-not-tlindex-s"
    foreign.mkdir()
    (foreign / "traces.db").write_text("not ours")
    running = subprocess.Popen([sys.executable, "-c", SCRATCH_HOLDER], stdout=subprocess.PIPE, text=True, env=env)
    try:
        held = Path(running.stdout.readline().strip())
        monkeypatch.setattr(tempfile, "tempdir", str(temporary))
        result = CliRunner().invoke(cli, ["report", str(DATA / "graph_breaks"), "-o", str(tmp_path / "out"), "--silent"])
        assert result.exit_code == 0, result.output
        assert sorted(temporary.iterdir()) == sorted([held, foreign])  # the killed one's gone, the new one's too
    finally:
        running.kill()
        running.wait()


def left_unfinished(folder: Path, marker: str | None, age_s: float, other: str | None = None) -> Path:
    """A folder as a command killed (kill -9) as it made it leaves it: no marker, or the first bytes of one."""
    folder.mkdir(parents=True)
    if marker is not None:
        (folder / owned.MARKER).write_text(marker)
    if other is not None:
        (folder / other).write_text("someone's notes")
    os.utime(folder, (time.time() - age_s, time.time() - age_s))
    return folder


def test_folders_of_commands_killed_before_their_marker_was_whole_are_removed_by_the_next(tmp_path, monkeypatch):
    """Reproduction: a report killed while it wrote its partial's marker left an unmarked `.OUT.partial-*` that no
    later report removed; so did a scratch folder in TMPDIR and an ingest's staging folder killed as they were
    marked, and the old report a killed `--overwrite` was removing (`.OUT.old-*`, unmarked then).
    The next command removes those that hold nothing but an empty or cut marker once a minute old (a running
    command's may be that young; a staging folder without its lock file, once ten minutes old), and the old
    report's folder, now marked, once a newer report is in place (before, it is the only copy). A young one, one
    holding anything else (a copy of a report named like an old one), or one without a marker stays."""
    import tempfile

    cut = owned.marker_text("report")[:7]
    out, temporary = tmp_path / "out", tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    old = owned.make_dir(tmp_path / ".out.old-k1ll3d00", "report")  # killed between its two renames: no `out` yet
    owned.make_dir(old / "report", "report")
    (old / "report" / "index.html").write_text("the old report, moved aside")
    copy = owned.make_dir(tmp_path / ".out.old-mine0000", "report")  # a copy of a report the user named so
    (copy / "index.html").write_text("a report")
    report = ["report", str(DATA / "graph_breaks"), "-o", str(out), "--silent", "--overwrite"]
    failed = CliRunner().invoke(cli, [*report[:-2], "--run", "no-such-run", "--silent"])
    assert failed.exit_code != 0 and not out.exists()
    assert (old / "report" / "index.html").exists()  # the only copy still: kept
    gone = [left_unfinished(tmp_path / ".out.partial-cut00000", cut, 120), left_unfinished(tmp_path / ".out.partial-empty000",
            "", 120), left_unfinished(temporary / "tlindex-report-cut00000", owned.marker_text("scratch")[:3], 120)]
    kept = [left_unfinished(tmp_path / ".out.partial-young000", cut, 1), left_unfinished(tmp_path / ".out.partial-notes000",
            cut, 120, other="notes.txt"), left_unfinished(temporary / "tlindex-report-notes000", None, 120, "notes.txt"),
            left_unfinished(tmp_path / ".out.partial-none0000", None, 120)]  # no marker at all: anyone's (a mount point)
    other_output = owned.make_dir(tmp_path / ".out.old-foo.old-x1y2z3w4", "report")  # the old one of `out.old-foo`
    owned.make_dir(other_output / "report", "report")
    kept.append(other_output)
    result = CliRunner().invoke(cli, report)
    assert result.exit_code == 0, result.output
    assert not [p for p in gone + [old] if p.exists()]  # a newer `out` in place: the old one is superseded
    assert sorted(p for p in [*tmp_path.iterdir(), *temporary.iterdir()] if p.name not in ("out", "tmp")) == sorted(
        kept + [copy])
    staging = left_unfinished(tmp_path / ".traces.db.staging-cut00000", owned.marker_text("staging")[:1], 120)
    assert ingest(tmp_path / "traces.db", [str(DATA / "graph_breaks")]).files
    assert not staging.exists()
    report_cut = left_unfinished(tmp_path / "cut", owned.marker_text("report")[:-4], 120)  # '{"tlindex": "rep'
    assert owned._unfinished(report_cut, "report") and not owned._unfinished(report_cut, "export")


def test_a_folder_is_locked_before_it_is_marked_and_unmarked_last(tmp_path, monkeypatch):
    """Review: a report's partial folder (and the old report moved aside) was marked before its command locked it:
    a command paused there had its folder taken for a killed one's and removed. And shutil.rmtree removes in the
    folder's listing order, marker first as often as not: killed midway, a removal left an unmarked folder that no
    command removes. Every folder is now locked before its marker is written (an ingest's staging folder too), and
    removed marker last."""
    real_mark, real_unlink, unlinked = owned.mark, os.unlink, []

    def mark(folder: Path, kind: str) -> None:
        probe = os.open(folder, os.O_RDONLY)
        try:
            assert not owned._lock(probe), f"{folder} marked before it was locked"
        finally:
            os.close(probe)
        real_mark(folder, kind)

    monkeypatch.setattr(owned, "mark", mark)
    out = tmp_path / "out"
    for _ in range(2):  # the second one moves the first aside
        with owned.atomic_dir(out, "report") as partial:
            for n in range(40):
                (partial / f"page-{n}.html").write_text("a page")
    assert ingest(tmp_path / "t.db", [str(DATA / "graph_breaks")]).files  # its staging folder: the same way

    def unlink(path, *args, **kwargs):
        unlinked.append(os.path.basename(path))
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    owned.remove(out, "report")
    assert not out.exists() and len(unlinked) == 41 and unlinked[-1] == owned.MARKER


def test_a_sweep_follows_no_link_swapped_in_for_the_folder_it_removes(tmp_path, monkeypatch):
    """Review: in a shared TMPDIR another user can make a `tlindex-report-*` folder with the scratch marker, and swap
    it for a link to the victim's folder while the victim's next report removes it: the removal, by path, went on
    through the link and emptied the victim's folder. It now works through the folder it opened (and locked)."""
    import tempfile

    victim, temporary = tmp_path / "victim", tmp_path / "tmp"
    temporary.mkdir()
    planted = owned.make_dir(temporary / "tlindex-report-evil0000", "scratch")  # marked as a dead report's scratch
    for folder in (victim / "docs", planted / "docs"):
        folder.mkdir(parents=True)
    for name in ("a", "b", "c", "docs/paper"):
        (victim / name).write_text("the victim's")
        (planted / name).write_text("planted")
    before, real_unlink = user_folder(victim), os.unlink

    def unlink(path, *args, **kwargs):
        if not planted.is_symlink():  # the swap, as the first entry goes
            os.rename(planted, tmp_path / "planted.real")
            os.symlink(victim, planted)
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    owned.sweep(temporary, "tlindex-report-", "scratch")
    monkeypatch.undo()
    assert user_folder(victim) == before


def test_what_cannot_be_removed_stays_marked_for_the_next_command(tmp_path, monkeypatch):
    """Review: a sweep that met an entry it could not remove fell back to shutil.rmtree, which took the marker
    with everything else it could: the rest, unmarked, was left for good. It now stays marked."""
    dead = owned.make_dir(tmp_path / ".out.partial-dead0000", "report")
    for name in ("index.html", "stuck.html", "trie.html"):
        (dead / name).write_text("a page")
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):
        if os.path.basename(path) == "stuck.html":
            raise PermissionError(1, "Operation not permitted", path)
        real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    owned.sweep(tmp_path, ".out.partial-", "report")
    assert owned.owns(dead, "report") and (dead / "stuck.html").exists()
    monkeypatch.undo()
    owned.sweep(tmp_path, ".out.partial-", "report")  # the next command
    assert not dead.exists()


def test_where_no_lock_can_be_taken_a_report_is_written_and_nothing_is_swept(fixtures_db, tmp_path, monkeypatch):
    """Review: on a file system that refuses flock (NFS without its lock daemon: ENOLCK) every report failed, its
    fresh partial said to be "locked by another process". It is written; and since whether another command still
    holds a partial cannot be known there, none is swept."""
    import errno
    import fcntl

    def flock(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    dead = owned.make_dir(tmp_path / ".out.partial-dead0000", "report")
    (run,) = scenario_run(connect(fixtures_db), "ddp_2ranks")
    monkeypatch.setattr(fcntl, "flock", flock)
    result = CliRunner().invoke(cli, ["report", "--db", str(fixtures_db), "--run", str(run), "-o", str(tmp_path / "out"),
                                      "--silent", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "index.html").exists() and dead.exists()


def test_ingest_reads_no_link_that_leaves_the_folder_and_says_so(tmp_path):
    """Reproduction: a link named like a trace log, pointing at secret/id_rsa, was followed and the key's lines
    stored in ingest_errors (served by /db/ingest_errors.json). The key here is hand-made text, not a key."""
    secret = tmp_path / "secret" / "id_rsa"
    secret.parent.mkdir()
    secret.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n" + "c2VjcmV0IGtleSBsaW5lIG5vdCBhIHJlYWwga2V5\n" * 20)
    logs = tmp_path / "trace"
    logs.mkdir()
    real = next((DATA / "graph_breaks").glob("*.log"))
    shutil.copy(real, logs / real.name)
    (logs / "dedicated_log_torch_trace_evil.log").symlink_to(secret)
    (logs / "dedicated_log_torch_trace_same.log").symlink_to(logs / real.name)  # inside the folder: fine
    db = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["ingest", str(logs), "--db", str(db), "--silent"])
    assert result.exit_code == 1
    assert f"dedicated_log_torch_trace_evil.log: a link to {secret}, outside {logs}: not read" in result.output
    conn = connect(db)
    assert [row[0] for row in conn.execute("SELECT path FROM files")] == [str(logs / real.name)]
    assert not conn.execute("SELECT count(*) FROM ingest_errors WHERE excerpt LIKE '%c2VjcmV0%'").fetchone()[0]


def test_what_ingest_errors_keeps_of_lines_that_are_not_trace_lines_is_bounded(tmp_path):
    """A file named like a log that is none (hand-made: 40 lines of text) keeps the start of its first 3 lines,
    the others say where they are; a real log with a script's output after its records keeps each such line."""
    from tlindex.ingest.normalize.core import FOREIGN_EXCERPTS

    notes = tmp_path / "notes.log"
    notes.write_text("".join(f"private line {n} of a file that is no trace log\n" for n in range(40)))
    noisy = tmp_path / "noisy.log"  # a real log, with what a script printed after it (hand-appended)
    noisy.write_bytes(next((DATA / "graph_breaks").glob("*.log")).read_bytes()
                      + b"".join(b"epoch %d loss 0.5\n" % n for n in range(40)))
    db = tmp_path / "t.db"
    ingest(db, [str(notes), str(noisy)], jobs=1)
    conn = connect(db)
    rows = conn.execute("SELECT f.name, e.line, e.excerpt, e.message FROM ingest_errors e JOIN files f "
                        "ON f.id = e.file_id WHERE e.kind = 'bad_prefix' ORDER BY f.name, e.line").fetchall()
    kept = [line for name, line, excerpt, _ in rows if name == "notes.log" and excerpt]
    assert kept == [1, 2, 3] == list(range(1, FOREIGN_EXCERPTS[0] + 1))
    said = [message for name, _, excerpt, message in rows if name == "notes.log" and not excerpt]
    assert len(said) == 37 and all("its text is not kept" in m and "line and offset say where" in m for m in said)
    assert len([1 for name, _, excerpt, _ in rows if name == "noisy.log" and excerpt]) == 40


def test_a_stop_held_back_while_a_temporary_folder_was_made_removes_it(tmp_path, monkeypatch):
    """SIGTERM arrives while the folder is made (signals held): it is raised as they are let through, before any
    `with` could remove the folder, so the folder removes itself."""
    import signal

    from tlindex import stopping

    marked = owned.mark

    def mark_then_signalled(path, kind):
        marked(path, kind)
        # pending: held until the folder is whole. Sent to the main thread: sent to the process, another thread of
        # the test's worker (pytest-xdist's) may take it, and Python runs the handler at once (the next test) or only
        # once the main thread has left the step (about 1 in 700): a process's signal reaches the thread the kernel picks
        signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)

    monkeypatch.setattr(owned, "mark", mark_then_signalled)
    with stopping.stoppable(), pytest.raises(KeyboardInterrupt):
        owned.TemporaryFolder(".t.partial-", tmp_path, "export")
    assert list(tmp_path.iterdir()) == []


def test_a_stop_another_thread_took_while_signals_were_held_is_raised_after_the_step(tmp_path):
    """The handler runs in the main thread whichever thread took the signal: one that runs while the main thread holds
    signals back (another thread took it) is raised when the step is done, not inside it."""
    import signal

    from tlindex import stopping

    steps = []
    with stopping.stoppable(), pytest.raises(KeyboardInterrupt):
        with stopping.signals_held():
            stopping.STOP.handle(signal.SIGTERM, None)  # as the handler runs when another thread took the signal
            steps.append("the step went on")
        steps.append("after the step")  # never: raised as the step ended
    assert steps == ["the step went on"] and stopping.STOP.signum == signal.SIGTERM and stopping.STOP.count == 1
