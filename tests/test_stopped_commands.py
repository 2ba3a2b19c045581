"""Every long command, stopped midway, leaves nothing behind: no process, no partial folder, no temporary file.

The cases come from the command line's own registry: every click command of `tlindex.cli.cli` (groups
walked) has a recipe here (its arguments on a big input, and the points where it is stopped) or a
stated reason it is instant, and `test_every_command_has_a_recipe_or_a_reason` fails for a command
with neither, so a new command is covered the day it lands. Each case runs `python -m tlindex` in a
folder of its own with its own TMPDIR and an environment variable that its descendants inherit,
stops it at a point (SIGINT to its process group, as Ctrl-C does; SIGTERM or SIGHUP to the main
process alone, as `timeout`, a job runner or a closed terminal do), and checks, within 5 s of its
exit: no process carries the variable, TMPDIR is empty, and its folder holds nothing new but what
the recipe may leave (its database, a kept trace), none of it partial or staging.

A fast sample runs by default; the whole sweep (every recipe, point and way of stopping, and a full
disk) is marked slow.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest
from conftest import DATA, fixture_logs, fixture_paths, ingest

from tlindex.cli import cli

MARK = "TLINDEX_STOPPED_COMMAND_TEST"
SETTLE_S = 5  # what a stopped command leaves must be gone this long after it exits
REACH_S = 60  # a point not reached by then: the recipe's input is too small (or the command hangs)
CHROMIUM_COPIES = 400  # the biggest run's chromium events, copied in SQL: an export long enough to stop


# --- the inputs: real logs, and a database of them ---------------------------------------------

@dataclass(frozen=True)
class Inputs:
    logs: list[str]  # the folders of real logs (the sample set of tests/data: 33 logs, 22 MB)
    db: Path        # those logs ingested, with one big run (chromium events copied); no payload index
    big_run: int    # that run


@pytest.fixture(scope="session")
def inputs(tmp_path_factory) -> Inputs:
    folder = tmp_path_factory.mktemp("stop-inputs")
    db = folder / "traces.db"
    assert not ingest(db, fixture_paths(), jobs=2).problems
    conn = sqlite3.connect(db)
    (run,) = conn.execute("""SELECT s.run_id FROM chromium_events c JOIN sources s ON s.id = c.source_id
                             GROUP BY 1 ORDER BY count(*) DESC LIMIT 1""").fetchone()
    columns = "source_id, compile, name, cat, ph, ts_us, duration_us, begin_envelope, end_envelope"
    with conn:  # copies of its events, a microsecond apart: a trace of hundreds of thousands of spans
        conn.execute(f"""WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {CHROMIUM_COPIES})
            INSERT INTO chromium_events ({columns})
            SELECT c.source_id, c.compile, c.name, c.cat, c.ph, c.ts_us + n.i, c.duration_us, c.begin_envelope,
                   c.end_envelope FROM chromium_events c JOIN sources s ON s.id = c.source_id, n WHERE s.run_id = ?""",
                     (run,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return Inputs(fixture_paths(), db, run)


# --- one command run, and what it leaves -------------------------------------------------------

@dataclass
class Case:
    root: Path                     # work/ (the command's folder), tmp/ (its TMPDIR), its stdout and stderr
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    proc: subprocess.Popen | None = None
    started: float = 0.0
    before: set[str] = field(default_factory=set)

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    def start(self, args: list[str], env: dict[str, str], limit_file_bytes: int | None = None) -> None:
        """Run `python -m tlindex ARGS` in work/, in a process group of its own, marked by the token."""
        self.before = set(os.listdir(self.work))
        env = {**os.environ, **env, MARK: self.token, "TMPDIR": str(self.tmp)}

        def limit() -> None:  # a full disk, as far as this command can tell: every file stops growing here
            if limit_file_bytes is not None:
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_bytes, limit_file_bytes))

        self.started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "tlindex", *args], cwd=self.work, env=env,
                                     stdin=subprocess.DEVNULL, stdout=open(self.root / "stdout", "wb"),
                                     stderr=open(self.root / "stderr", "wb"), start_new_session=True,
                                     preexec_fn=limit)

    def processes(self) -> dict[int, bytes]:
        """The processes that carry this case's token (the command and its descendants): pid, command line."""
        found, needle = {}, f"{MARK}={self.token}".encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if needle in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                        found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
                except OSError:
                    continue  # gone, or not ours to read
        return found

    def workers(self) -> list[int]:
        """Its worker processes: started by multiprocessing (spawned), or forked (the command's own command line)."""
        main = self.processes().get(self.proc.pid)
        return [pid for pid, line in self.processes().items() if pid != self.proc.pid and b"resource_tracker" not in line
                and (b"multiprocessing" in line or line == main)]

    def new_entries(self) -> list[str]:
        return sorted(set(os.listdir(self.work)) - self.before)

    def stderr(self) -> str:
        return (self.root / "stderr").read_text(errors="replace")

    def left(self, outputs: tuple[str, ...]) -> dict[str, list]:
        """What is left that should not be: processes, temporary files, new entries of work/ no output pattern allows."""
        return {"processes": [line.replace(b"\0", b" ").decode(errors="replace") for line in self.processes().values()],
                "temporary files": sorted(os.listdir(self.tmp)),
                "in its folder": [name for name in self.new_entries()
                                  if not any(re.fullmatch(pattern, name) for pattern in outputs)]}

    def settled(self, outputs: tuple[str, ...]) -> dict[str, list]:
        """What is left SETTLE_S after the command exited (or nothing, as soon as nothing is)."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            left = self.left(outputs)
            if not any(left.values()) or time.monotonic() > deadline:
                return left
            time.sleep(0.1)

    def kill_everything(self) -> None:
        """After the test: whatever it left, killed (a failing case must not leave processes to the next)."""
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def case(tmp_path) -> Iterator[Case]:
    made = Case(tmp_path)
    made.work.mkdir()
    made.tmp.mkdir()
    yield made
    made.kill_everything()


# --- where to stop a command -------------------------------------------------------------------

Point = Callable[[Case], bool]


def after(seconds: float) -> Point:
    return lambda case: time.monotonic() - case.started > seconds


def has_workers(case: Case) -> bool:
    return bool(case.workers())


def entry(pattern: str) -> Point:
    """Something named like `pattern` appeared in the command's folder (a partial output, a staging folder)."""
    return lambda case: any(re.fullmatch(pattern, name) for name in case.new_entries())


def both(*points: Point) -> Point:
    return lambda case: all(point(case) for point in points)


def partial_holds(pattern: str) -> Point:
    """A partial folder named like `pattern` holds a folder already (a table of an export)."""
    def point(case: Case) -> bool:
        try:
            return any(re.fullmatch(pattern, name) and any(p.is_dir() for p in (case.work / name).iterdir())
                       for name in case.new_entries())
        except OSError:  # (gone meanwhile)
            return False
    return point


def file_grows(name: str) -> Point:
    return lambda case: (case.work / name).exists() and (case.work / name).stat().st_size > 0


def says(text: str) -> Point:
    return lambda case: text in case.stderr()


def has_open(name: str) -> Point:
    """The command holds a file of this name open (so it is past its imports, running)."""
    def point(case: Case) -> bool:
        try:
            return any(os.readlink(fd).endswith(f"/{name}") for fd in Path(f"/proc/{case.proc.pid}/fd").iterdir())
        except OSError:
            return False
    return point


# --- how to make each command long -------------------------------------------------------------

WRITER = """import os, shutil, sys, time
for number, log in enumerate(sys.argv[1:]):  # as torch would: one file per process, into TORCH_TRACE
    shutil.copy(log, os.path.join(os.environ["TORCH_TRACE"], f"{number}-" + os.path.basename(log)))
open("written", "w").close()
try:
    time.sleep(float(os.environ.get("SLEEP", "0")))
except KeyboardInterrupt:  # quietly, as a training script would not
    sys.exit(130)
"""


@dataclass(frozen=True)
class Recipe:
    args: Callable[[Inputs], list[str]]     # its command line after `tlindex`, run in its own folder
    points: dict[str, Point]                # where to stop it (name: when it is there)
    outputs: tuple[str, ...] = ()           # what it may leave in its folder (full-match patterns)
    db: bool = False                        # a copy of the inputs' database is traces.db in its folder
    setup: Callable[[Case, Inputs], None] | None = None
    needs: str | None = None                # a module it needs, else skipped
    env: dict[str, str] = field(default_factory=dict)
    full_disk: int | None = None            # a file size past which it fails midway (RLIMIT_FSIZE): a full disk


DATABASE = (r"traces\.db", r"traces\.db-(wal|shm)", r"\.traces\.db\.claims")  # a database and its lock files


def _writer(case: Case, inputs: Inputs) -> None:
    (case.work / "writer.py").write_text(WRITER)


RECIPES: dict[str, Recipe] = {
    "ingest": Recipe(lambda i: ["ingest", *i.logs, "--db", "traces.db", "-j", "2"],
                     {"staging": entry(r"\.traces\.db\.staging-.*"), "workers": has_workers}, outputs=DATABASE,
                     full_disk=2 << 20),
    "report": Recipe(lambda i: ["report", *i.logs, "-o", "out", "-j", "2"],
                     {"ingest workers": both(has_workers, lambda case: not entry(r"\.out\..*")(case)),
                      "page workers": both(has_workers, entry(r"\.out\.partial-.*"))}, full_disk=2 << 20),
    "run": Recipe(lambda i: ["run", "--db", "traces.db", "--", sys.executable, "writer.py",
                             *map(str, fixture_logs())],
                  {"command": entry("written"), "ingest workers": both(entry("written"), has_workers)},
                  outputs=(*DATABASE, r"traces\.traces", "written"), setup=_writer, env={"SLEEP": "3"},
                  full_disk=6 << 20),  # (the biggest log it copies is 4.2 MB; the database grows past 6 MiB)
    "export parquet": Recipe(lambda i: ["export", "parquet", "out", "--db", "traces.db"],
                             {"started": entry(r"\.out\.partial-.*"), "writing": partial_holds(r"\.out\.partial-.*")},
                             db=True, outputs=DATABASE, full_disk=4 << 20),
    "export chromium": Recipe(lambda i: ["export", "chromium", "trace.json", "--db", "traces.db", "--run", str(i.big_run)],
                              {"writing": entry(r"(\.trace\.json\..*|trace\.json)")}, db=True, outputs=DATABASE,
                              full_disk=2 << 20),
    "query": Recipe(lambda i: ["query", "--db", "traces.db", "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 "
                               "FROM n) SELECT count(*) FROM n"],  # never ends
                    {"running": both(has_open("traces.db"), after(0.5))}, db=True, outputs=DATABASE),
    "serve": Recipe(lambda i: ["serve", "traces.db", "-p", "0"], {"serving": says("Uvicorn running")},
                    db=True, outputs=DATABASE),
    "watch": Recipe(lambda i: ["watch", *i.logs, "--db", "traces.db", "--every", "0.5"],
                    {"ingesting": has_workers,  # its first pass, of every log
                     "between passes": lambda case: b" run " in (case.root / "stdout").read_bytes()},
                    outputs=DATABASE),
    "spark-ingest": Recipe(lambda i: ["spark-ingest", *i.logs, "--out", "out"],
                           {"started": entry(r"\.out\.partial-.*")}, needs="pyspark"),
}

# Commands that end in a moment on any input: nothing to stop midway, and nothing they could leave.
INSTANT = {
    "queries": "lists the canned queries of queries/: reads no database",
    "findings": "reads a run's aggregates; no worker, temporary file or output folder",
    "diff": "reads two runs' compiles; no worker, temporary file or output folder",
    "trend": "reads one row per run (and a diff of two runs for the gate); no worker, temporary file or output folder",
    "runs": "reads one row per run; no worker, temporary file or output folder",
    "rm": "one transaction: stopped, SQLite rolls it back; no worker or temporary file",
    "label": "one UPDATE; no worker or temporary file",
    "show": "reads one page's data; no worker, temporary file or output folder",
    "search": "reads the full-text indexes every ingest keeps; no worker, temporary file or output folder",
    "token create": "one write of the tokens file, replaced whole (its partial removed on the way out); no worker",
    "token list": "reads the tokens file; no worker, temporary file or output folder",
    "token revoke": "one write of the tokens file, replaced whole (its partial removed on the way out); no worker",
    "push": "writes nothing here (a folder is packed into a pipe); stopped, it is a client gone midway, whose partial "
            "upload the server removes (tests/test_team.py)",
}

WAYS = {  # how a command is stopped: (signal, to its whole process group?)
    "SIGINT to the group": (signal.SIGINT, True),
    "SIGTERM to the main process": (signal.SIGTERM, False),
    "SIGHUP to the main process": (signal.SIGHUP, False),
}


def commands(group: click.Group = cli, prefix: str = "") -> Iterator[str]:
    """Every command of the command line, by its words (`export parquet`), groups walked."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}"


def uncovered(group: click.Group = cli) -> list[str]:
    """Commands with neither a recipe nor a reason they are instant."""
    return [name for name in commands(group) if name not in RECIPES and name not in INSTANT]


def test_every_command_has_a_recipe_or_a_reason():
    """A command added without a way to make it long (or a reason it is instant) fails here."""
    listed = sorted(commands())
    assert "export parquet" in listed and "report" in listed
    assert uncovered() == []
    assert sorted(set(RECIPES) | set(INSTANT)) == listed  # and none named that no longer exists
    grown = click.Group(commands={**cli.commands, "export": click.Group("export", commands={
        **cli.commands["export"].commands, "duckdb": click.Command("duckdb")})})
    assert uncovered(grown) == ["export duckdb"]  # the day a command lands


def stop_cases(sample: bool) -> Iterator:
    fast = {("report", "ingest workers", "SIGINT to the group"),
            ("ingest", "workers", "SIGTERM to the main process"),
            ("export parquet", "writing", "SIGINT to the group"),
            ("export chromium", "writing", "SIGTERM to the main process")}
    for name, recipe in RECIPES.items():
        for point in recipe.points:
            for way in WAYS:
                if ((name, point, way) in fast) == sample:
                    yield pytest.param(name, point, way, id=f"{name}-{point}-{way}".replace(" ", "_"),
                                       marks=() if sample else pytest.mark.slow)


def prepare(case: Case, recipe: Recipe, inputs: Inputs) -> None:
    if recipe.needs:
        pytest.importorskip(recipe.needs)
    if recipe.db:
        shutil.copy(inputs.db, case.work / "traces.db")
    if recipe.setup:
        recipe.setup(case, inputs)


def stop_midway(case: Case, name: str, inputs: Inputs, point: str, way: str) -> None:
    """Start the command, wait for the point, stop it the given way, and check what it leaves."""
    recipe = RECIPES[name]
    prepare(case, recipe, inputs)
    case.start(recipe.args(inputs), recipe.env)
    reached = recipe.points[point]
    while not reached(case):
        assert case.proc.poll() is None, f"it ended before {point!r} (input too small?): {case.stderr()}"
        assert time.monotonic() - case.started < REACH_S, f"{point!r} not reached in {REACH_S} s"
        time.sleep(0.02)
    signum, group = WAYS[way]
    (os.killpg if group else os.kill)(case.proc.pid, signum)
    code = case.proc.wait(timeout=120)
    err = case.stderr()
    assert code == 128 + signum, f"exit {code}, not {128 + signum}: {err}"
    assert "Traceback" not in err, err
    assert case.settled(recipe.outputs) == {"processes": [], "temporary files": [], "in its folder": []}, err
    if (name, point) != ("run", "command"):  # (a stopped command: tlindex's run ingests what it wrote, as said)
        assert re.search(r"^tlindex [a-z -]+: (stopped|interrupted)", err.strip().splitlines()[-1]), err


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_a_report_stopped_by_sigterm_leaves_no_worker_partial_folder_or_temporary_database(case, inputs):
    """Reproduction: SIGTERM to the report alone (`timeout`, a job runner, a closed terminal) left its page
    workers running, .OUT.partial-* beside OUT and tlindex-report-* (the temporary database) in TMPDIR."""
    stop_midway(case, "report", inputs, "page workers", "SIGTERM to the main process")


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("name, point, way", list(stop_cases(sample=True)))
def test_a_command_stopped_midway_leaves_nothing(case, inputs, name, point, way):
    stop_midway(case, name, inputs, point, way)


@pytest.mark.parametrize("name, point, way", list(stop_cases(sample=False)))
def test_every_command_stopped_at_every_point_leaves_nothing(case, inputs, name, point, way):
    stop_midway(case, name, inputs, point, way)


def full_disk_cases(sample: bool) -> Iterator:
    for name, recipe in RECIPES.items():
        if recipe.full_disk is not None and (name == "report") == sample:
            yield pytest.param(name, id=name.replace(" ", "_"), marks=() if sample else pytest.mark.slow)


def fill_the_disk(case: Case, recipe: Recipe, inputs: Inputs) -> None:
    """Run the command with files that cannot grow past recipe.full_disk: it fails in one line, leaving nothing."""
    prepare(case, recipe, inputs)
    case.start(recipe.args(inputs), {**recipe.env, "SLEEP": "0"}, limit_file_bytes=recipe.full_disk)
    code = case.proc.wait(timeout=300)
    err = case.stderr()
    assert code == 1 and "Traceback" not in err, err
    assert re.match(r"(Error|error): ", err.strip().splitlines()[-1]), err
    assert case.settled(recipe.outputs) == {"processes": [], "temporary files": [], "in its folder": []}, err


@pytest.mark.parametrize("name", list(full_disk_cases(sample=True)))
def test_a_command_that_fills_the_disk_fails_in_one_line_and_leaves_nothing(case, inputs, name):
    fill_the_disk(case, RECIPES[name], inputs)


@pytest.mark.parametrize("name", list(full_disk_cases(sample=False)))
def test_every_command_that_fills_the_disk_fails_in_one_line_and_leaves_nothing(case, inputs, name):
    fill_the_disk(case, RECIPES[name], inputs)


SWALLOWS = """
import sqlite3, sys
from tlindex.stopping import stoppable
from tlindex.store.compression import register
from tlindex.store.limits import connect

conn = register(connect(":memory:"))
try:
    with stoppable() as stop:
        print("ready", flush=True)
        while True:  # as a page that degrades alone would: a failed statement is not the end
            try:
                conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) "
                             "SELECT sum(length(sqlar_uncompress('x' || i, 1 + length(i)))) FROM n").fetchone()
            except sqlite3.OperationalError:
                pass
except KeyboardInterrupt:
    print("stopped by", stop.name, flush=True)
"""


def test_a_stop_swallowed_by_a_sqlite_function_is_raised_again():
    """A signal handled inside a function SQLite calls (tlindex's sqlar_uncompress, where a statement over payloads
    spends its time) would become an OperationalError, which code may catch and carry on from: the function ends its
    statement, and the stop is raised once SQLite has returned."""
    proc = subprocess.Popen([sys.executable, "-c", SWALLOWS], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.3)  # in the statement, nearly all of the time in the function
        proc.send_signal(signal.SIGTERM)
        assert proc.communicate(timeout=10)[0] == "stopped by SIGTERM\n"
    finally:
        proc.kill()


AUTHORIZED = """
import sqlite3
from tlindex.answers.queries import read_only, run_sql
from tlindex.stopping import stoppable
from tlindex.store.limits import connect

conn = connect(":memory:")
conn.execute("CREATE TABLE t (x)")
wide = "SELECT " + ", ".join(["x"] * 2000) + " FROM t"  # its preparation: nearly all of it in the authorizer
try:
    with stoppable() as stop:
        print("ready", flush=True)
        while True:  # as a canned query's page that degrades alone would: a failed statement is not the end
            try:
                run_sql(read_only(conn), wide).fetchone()
            except sqlite3.Error:
                pass
            finally:
                conn.set_authorizer(None)
except KeyboardInterrupt:
    print("stopped by", stop.name, flush=True)
"""


def test_a_stop_swallowed_by_the_read_only_authorizer_is_raised_again():
    """Reproduction (CI, a report stopped by SIGTERM wrote every page and exited 0): a signal handled while SQLite
    asked the read-only authorizer became "not authorized", which a canned query's page degraded on, and the report
    carried on. Three processes, each stopped once mid-preparation: on the old code about half of them carried on."""
    procs = [subprocess.Popen([sys.executable, "-c", AUTHORIZED], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        for proc in procs:
            assert proc.stdout.readline() == "ready\n"
        time.sleep(0.3)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        assert [proc.communicate(timeout=10)[0] for proc in procs] == ["stopped by SIGTERM\n"] * 3
    finally:
        for proc in procs:
            proc.kill()


def command_script(name: str, body: str) -> str:
    """A program whose one command, of a click group with tlindex's Commands, runs `body`."""
    return ("import os, signal, click\nfrom tlindex.cli import Commands\n\n@click.group(cls=Commands)\ndef cli():\n"
            f"    pass\n\n@cli.command()\ndef {name}():\n{textwrap.indent(textwrap.dedent(body), '    ')}\ncli()\n")


CARRIES_ON = command_script("swallow", """
    try:
        os.kill(os.getpid(), signal.SIGTERM)
    except KeyboardInterrupt:
        pass  # code that carries on from a stop
    print("carried on", flush=True)
""")


def test_a_command_that_carries_on_from_a_stop_still_exits_as_stopped():
    """Whatever swallowed the stop, a command that was stopped says so and exits 128 + the signal, not 0."""
    result = subprocess.run([sys.executable, "-c", CARRIES_ON, "swallow"], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (128 + signal.SIGTERM, "carried on\n"), result.stderr
    assert "tlindex swallow: stopped (SIGTERM)" in result.stderr


STOPPED_IN_EXEC = command_script("made", """
    exec("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", {})  # as a dataclass is made, at an import
""")


def test_a_command_stopped_inside_a_strings_exec_exits_as_stopped(tmp_path):
    """Reproduction (CI, an ingest stopped by SIGTERM at its staging folder died of SIGINT, saying it stopped): under
    `python -m`, CPython turns a KeyboardInterrupt that ended a string's exec into a SIGINT death at exit, even once it
    is caught; the command exits 128 + the signal all the same."""
    (tmp_path / "stopped_in_exec.py").write_text(STOPPED_IN_EXEC)
    result = subprocess.run([sys.executable, "-m", "stopped_in_exec", "made"], capture_output=True, text=True,
                            timeout=60, cwd=tmp_path)
    assert result.returncode == 128 + signal.SIGTERM, result.stderr
    assert "tlindex made: stopped (SIGTERM)" in result.stderr


# --- a stopped ingest leaves no row without a run, and nothing for the next run to adopt ----------------------------

NEXT = DATA / "graph_breaks"  # what the next ingest reads, as a run of its own (one log, one process)


def rows_without_a_run(db: Path) -> dict[str, int]:
    """Sources, compiles and files (with a process) that belong to no run: none, on every way out."""
    conn = sqlite3.connect(db)
    try:
        return {"sources": conn.execute("SELECT count(*) FROM sources WHERE run_id IS NULL").fetchone()[0],
                "compiles": conn.execute("SELECT count(*) FROM compiles WHERE run_id IS NULL").fetchone()[0],
                "files": conn.execute("SELECT count(*) FROM files f WHERE EXISTS (SELECT 1 FROM sources s WHERE "
                                      "s.file_id = f.id) AND NOT EXISTS (SELECT 1 FROM sources s JOIN runs r ON "
                                      "r.id = s.run_id WHERE s.file_id = f.id)").fetchone()[0]}
    finally:
        conn.close()


def next_run_holds_its_own(case: Case, tmp: Path) -> str:
    """After the stop: `tlindex ingest NEXT --run simple-only` makes a run of NEXT's processes and compiles alone
    (as a fresh database of NEXT alone counts them), and still nothing is without a run."""
    db = case.work / "traces.db"
    alone = tmp / "alone.db"
    ingest(alone, [str(NEXT)], run_label="simple-only", jobs=1)
    counts = "SELECT (SELECT count(*) FROM sources WHERE run_id = r.id), (SELECT count(*) FROM compiles WHERE " \
             "run_id = r.id) FROM runs r WHERE label = 'simple-only'"
    expected = sqlite3.connect(alone).execute(counts).fetchone()
    result = subprocess.run([sys.executable, "-m", "tlindex", "ingest", str(NEXT), "--db", str(db), "--run",
                             "simple-only"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert sqlite3.connect(db).execute(counts).fetchone() == expected
    assert rows_without_a_run(db) == {"sources": 0, "compiles": 0, "files": 0}
    return result.stderr


def merged_cases(sample: bool) -> Iterator:
    fast = {("ingest", "workers", "SIGTERM to the main process"), ("run", "ingest workers", "SIGINT to the group")}
    for name in ("ingest", "run"):
        for point in RECIPES[name].points:
            for way in WAYS:
                if ((name, point, way) in fast) == sample:
                    yield pytest.param(name, point, way, id=f"{name}-{point}-{way}".replace(" ", "_"),
                                       marks=() if sample else pytest.mark.slow)


def _stopped_with_rows(case: Case, name: str, inputs: Inputs, point: str, way: str | None) -> None:
    """Stop the command at the point (kill -9 to its group when `way` is None) once it has merged a file."""
    if way is not None:
        stop_midway(case, name, inputs, point, way)
        return
    recipe = RECIPES[name]
    prepare(case, recipe, inputs)
    case.start(recipe.args(inputs), recipe.env)
    deadline = time.monotonic() + REACH_S
    while not (recipe.points[point](case) and (case.work / "traces.db").exists()
               and _merged(case.work / "traces.db")):
        assert case.proc.poll() is None and time.monotonic() < deadline, case.stderr()
        time.sleep(0.02)
    os.killpg(case.proc.pid, signal.SIGKILL)
    case.proc.wait(timeout=60)


def _merged(db: Path) -> bool:
    try:
        return bool(sqlite3.connect(db, timeout=0.1).execute("SELECT count(*) FROM files").fetchone()[0])
    except sqlite3.Error:
        return False


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("name, point, way", list(merged_cases(sample=True)))
def test_a_stopped_ingest_leaves_no_row_without_a_run(case, inputs, tmp_path, name, point, way):
    """Reproduction: a stopped ingest left sources (and their files and compiles) without a run, which the next
    `ingest --run LABEL`, or the next `tlindex run`, took into its own run."""
    _stopped_with_rows(case, name, inputs, point, way)
    if (case.work / "traces.db").exists():
        assert rows_without_a_run(case.work / "traces.db") == {"sources": 0, "compiles": 0, "files": 0}
        next_run_holds_its_own(case, tmp_path)


@pytest.mark.parametrize("name, point, way", list(merged_cases(sample=False)))
def test_every_stopped_ingest_leaves_no_row_without_a_run(case, inputs, tmp_path, name, point, way):
    test_a_stopped_ingest_leaves_no_row_without_a_run(case, inputs, tmp_path, name, point, way)


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("name, point", [("ingest", "workers"), ("run", "ingest workers")])
def test_an_ingest_killed_after_a_merge_leaves_runs_the_next_ingest_regroups(case, inputs, tmp_path, name, point):
    """kill -9 after a file is merged: what it merged is in a run already (the run of its label, or a provisional
    run of that ingest); the next ingest groups a provisional one as the killed ingest would have, and says so."""
    _stopped_with_rows(case, name, inputs, point, None)
    db = case.work / "traces.db"
    assert rows_without_a_run(db) == {"sources": 0, "compiles": 0, "files": 0}
    provisional = sqlite3.connect(db).execute("SELECT count(*) FROM runs WHERE ingest IS NOT NULL").fetchone()[0]
    assert bool(provisional) == (name == "ingest")  # `tlindex run` always has a label: its run is the final one
    said = next_run_holds_its_own(case, tmp_path)
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM runs WHERE ingest IS NOT NULL").fetchone()[0] == 0
    assert ("what a stopped ingest had merged, grouped into a run of its own now" in said) == bool(provisional), said


def test_a_search_leaves_its_connection_stoppable():
    """Reproduction: the payload scan of `tlindex search` bounded its statement with a progress handler of its own and
    then set none, so a stop no longer interrupted the connection's statements (and one handled inside the scan's
    handler was swallowed as its deadline): the scan's deadline now keeps the stop, and puts it back after."""
    from tlindex.answers.search import _payload_scan
    from tlindex.stopping import STOP
    from tlindex.store.limits import connect

    conn = connect(":memory:")
    conn.execute("CREATE TABLE payloads (hash TEXT, text TEXT)")
    conn.execute("INSERT INTO payloads VALUES ('h', 'nothing to find')")
    assert _payload_scan(conn, "absent", None, 10, 5.0) == ([], True)
    STOP.pending = True
    try:
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            conn.execute("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000000) "
                         "SELECT count(*) FROM n").fetchone()
    finally:
        STOP.pending = False


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # (the callbacks' StatementStopped)
def test_a_connection_stays_stoppable_whatever_handlers_are_set_on_it():
    """Every connection tlindex opens (tlindex.store.limits.connect) keeps its statements stoppable, whoever sets a
    handler on it: an authorizer runs as a callback (a stop noted inside is not swallowed, its statement ends), a
    progress handler of one's own still ends its statement when a stop comes, and none is the stop's handler again."""
    import sys

    from tlindex.stopping import STOP, _in_callback
    from tlindex.store.limits import connect

    long = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000000) SELECT count(*) FROM n"
    conn = connect(":memory:")
    inside = []
    conn.set_authorizer(lambda *args: inside.append(_in_callback(sys._getframe())) or sqlite3.SQLITE_OK)
    conn.execute("SELECT 1").fetchone()
    assert inside and all(inside)  # a signal handled there is noted, to be raised once SQLite has returned
    STOP.pending = True
    try:
        with pytest.raises(sqlite3.DatabaseError, match="not authorized"):
            conn.execute("SELECT 2")
        conn.set_authorizer(None)
        conn.set_progress_handler(lambda: False, 1_000)  # a handler of one's own, which would never interrupt
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            conn.execute(long).fetchone()
        conn.set_progress_handler(None, 0)  # none: the stop's handler again
        with pytest.raises(sqlite3.OperationalError, match="interrupted"):
            conn.execute(long).fetchone()
    finally:
        STOP.pending = False
    assert conn.execute("SELECT 3").fetchone() == (3,)
