"""`tlindex run -- COMMAND`: one command from a script to answers.

COMMAND runs with TORCH_TRACE set to a fresh folder of the run's own (made and marked here, inside
--trace-dir or beside the database: logs already there are never taken for this run's) and the
user's terminal (it is the terminal's foreground job, so Ctrl-C reaches it and its workers; a SIGINT
or SIGTERM sent to tlindex is passed on to its whole process group). Whatever it wrote is then
ingested as one run, whose summary, findings and page are printed. The exit code is COMMAND's (128
+ the signal when one ended it; 127 when it cannot be started), so `tlindex run` drops into scripts
and CI.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from tlindex import owned
from tlindex.serve import DEFAULT_PORT as SERVE_PORT  # where Datasette answers by default
from tlindex.store.redact import redact_text, storable, stored_command

if TYPE_CHECKING:
    from tlindex.database import Database

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def trace_base(db_path: Path) -> Path:
    """Where the runs' trace folders go by default: beside the database, named by its stem (traces.db: traces.traces)."""
    return db_path.resolve().parent / f"{db_path.stem}.traces"


def new_trace_folder(base: Path, command: list[str]) -> Path:
    """A fresh folder of the run's own in `base`, named by time and command (<time>-<command>[-N]) and marked
    as tlindex's: the run ingests what was written there, and --no-keep-trace removes that folder alone."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    words = [Path(word).name for word in command[:3] if not word.startswith("-")]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(words))[:60] or "command"
    base.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        try:  # made here, never found: a folder of the same name (the user's, another run's) is not taken
            return owned.make_dir(base / (f"{stamp}-{name}" if n == 1 else f"{stamp}-{name}-{n}"), "trace")
        except FileExistsError:
            n += 1


@dataclass
class Ran:
    """What `tlindex run` knows of the command it ran, kept on the run's row (schema/014_run_facts.sql)."""

    command: list[str]
    cwd: str
    host: str
    user: str | None
    started: str  # UTC, as the runs' start_time is written
    duration_s: float
    exit_code: int | None  # None when a signal ended it
    signal: str | None

    @property
    def code(self) -> int:
        """The exit code `tlindex run` leaves with: COMMAND's, or 128 + the signal that ended it."""
        if self.signal is None:
            return self.exit_code or 0
        return 128 + int(signal.Signals[self.signal])

    def facts(self) -> dict:
        """The columns of the run's row, as stored (the command as a JSON list of its words)."""
        return {**asdict(self), "command": json.dumps(self.command)}


def run_command(command: list[str], trace_dir: Path, shown: list[str] | None = None,
                tick: Callable[[], None] | None = None, every: float = 2.0) -> Ran:
    """Run COMMAND with TORCH_TRACE=trace_dir as the terminal's foreground job; what happened (the command kept as
    `shown`, its stored words: stored_command); `tick()` every `every` seconds while it runs (`--watch`). Raises
    OSError when it cannot be started."""
    env = dict(os.environ, TORCH_TRACE=str(trace_dir))
    terminal = _terminal()
    started, clock = datetime.now(timezone.utc), time.monotonic()
    proc = subprocess.Popen(command, env=env, process_group=0)
    previous = {sig: signal.signal(sig, _forward_to(proc)) for sig in FORWARDED}
    if terminal is not None:
        _hand_terminal(terminal, proc.pid)
    try:
        code = _wait(proc, tick, every)
    finally:
        if terminal is not None:
            _hand_terminal(terminal, os.getpgrp())
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    user = _user()
    return Ran(command=list(shown if shown is not None else command), cwd=redact_text(storable(os.getcwd())),
               host=storable(socket.gethostname()), user=storable(user) if user is not None else None,
               started=started.replace(tzinfo=None).isoformat(timespec="microseconds"),
               duration_s=round(time.monotonic() - clock, 3), exit_code=code if code >= 0 else None,
               signal=_signal_name(-code) if code < 0 else None)


def _wait(proc: subprocess.Popen, tick: Callable[[], None] | None, every: float) -> int:
    """The command's exit code, `tick()` called every `every` seconds until it exits (a signal to tlindex meanwhile
    goes to the command: the handlers forward it)."""
    while True:
        try:
            return proc.wait(timeout=None if tick is None else every)
        except subprocess.TimeoutExpired:
            tick()


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name in the environment and no password entry (a bare container)
        return None


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _terminal() -> int | None:
    try:
        fd = sys.stdin.fileno()
        return fd if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp() else None
    except (OSError, ValueError):
        return None


def _hand_terminal(fd: int, group: int) -> None:
    """Make `group` the terminal's foreground process group (as a shell does for a job)."""
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # a background group may take the terminal back
    try:
        os.tcsetpgrp(fd, group)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTTOU, previous)


def _forward_to(proc: subprocess.Popen):
    def forward(signum, frame) -> None:
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass
    return forward


def served_url(db_path: Path, run_id: int, port: int = SERVE_PORT) -> str | None:
    """The run page's URL when a `tlindex serve` of this database answers on localhost, else None: the servers
    its markers name (tlindex.serve: whichever port each took; a marker left by a killed one is passed over), then
    Datasette's default port (a plain `datasette traces.db` leaves no marker)."""
    from tlindex.pages import database_path
    from tlindex.pages import path as page_path
    from tlindex.serve import running_servers

    candidates = [*running_servers(db_path), (f"http://127.0.0.1:{port}", db_path.stem)]
    for base, name in dict.fromkeys(candidates):
        url = base + database_path(name) + page_path("run", run=run_id)
        try:
            with urllib.request.urlopen(url, timeout=0.5) as response:
                if response.status == 200:
                    return url
        except (OSError, ValueError):
            continue
    return None


class GateCheck:
    """`tlindex run --baseline RUN --fail-on ...`: the baseline found before COMMAND runs, the new run judged after."""

    def __init__(self, baseline: str | None, clauses: list | None, allow_unjudged: bool = False):
        from tlindex.answers.gate import check_baseline

        if clauses:
            check_baseline(clauses, baseline)  # GateError for bounds that need a missing baseline, before COMMAND
        self.baseline, self.clauses, self.allow_unjudged = baseline, clauses, allow_unjudged
        self.baseline_id: int | None = None

    def prepare(self, db: Database | None, db_path: Path) -> None:
        """The baseline found in the database (a TlindexError when it is not there), before COMMAND runs."""
        from tlindex.errors import NotFound

        if self.baseline is None:
            return
        if db is None:
            raise NotFound(f"--baseline {self.baseline}: {db_path} does not exist yet (no run to compare with)")
        self.baseline_id = db.run(self.baseline)["id"]

    def judge(self, db: Database | None, run_id: int | None, code: int, echo: Callable[[str], None]) -> int:
        """Say how the new run compares (and, with bounds, the gate's verdict); the exit code to leave with:
        COMMAND's when it is not 0, else the gate's (1 when no run was written to judge)."""
        from tlindex.answers.gate import gate, lines
        from tlindex.answers.health import health
        from tlindex.answers.trend import Trend, against_baseline

        if run_id is None or db is None:
            if self.clauses:
                allowed = " (allowed by --allow-unjudged)" if self.allow_unjudged else ": FAILED"
                echo(f"gate: no run to judge (COMMAND wrote no trace){allowed}")
                return code or int(not self.allow_unjudged)
            return code
        base = health(db.conn, [self.baseline_id])[0] if self.baseline_id is not None else None
        verdict = gate(db.conn, run_id, self.baseline_id, self.clauses, why="just made",
                       allow_unjudged=self.allow_unjudged) if self.clauses else None
        rows = health(db.conn, [run_id])
        for line in against_baseline(Trend(rows, base, verdict, rows[0], "just made")):
            echo(line)
        if verdict is None:
            return code
        for line in lines(verdict):
            echo(line)
        return code or verdict.exit_code


def run_traced(db_path: Path, command: list[str], label: str | None, trace_dir: Path | None, keep_trace: bool,
               echo: Callable[[str], None], gate: GateCheck | None = None, program_only: bool = False,
               watch: float | None = None) -> int:
    """The whole of `tlindex run`; returns the exit code to leave with. The database is opened once: before COMMAND
    when it exists (checked, its baseline found), else after it, when there is a trace to ingest (with `watch`, the
    first time COMMAND has written one: its logs are ingested every `watch` seconds while it runs, into the run the
    first of those ingests makes). What is stored of the command, and what its folder and default label are made of,
    is its redacted words (only the program's with `program_only`)."""
    from tlindex.database import Database
    from tlindex.errors import DatabaseError

    try:
        db = Database(db_path, write=True) if db_path.exists() else None
    except DatabaseError as error:  # not a tlindex database: refused before the command runs
        echo(f"tlindex run: {error}")
        return 1
    try:
        if gate is not None:
            gate.prepare(db, db_path)
        shown = stored_command(command, program_only)
        folder = new_trace_folder(trace_dir or trace_base(db_path), shown)
        watching = _Watching(db, db_path, folder, label or " ".join(shown), "given" if label else "command", echo)
        try:
            ran = run_command(command, folder, shown, watching.tick if watch else None, watch or 0)
        except OSError as error:
            echo(f"tlindex run: cannot start {shown[0]!r}: {error.strerror or error}")
            owned.remove(folder, "trace")
            return 127
        db = watching.db
        code = ran.code
        if not any(p.is_file() and p.name != owned.MARKER for p in folder.rglob("*")):
            echo(f"tlindex run: {shown[0]} exited with {code} and wrote no trace in {folder} (did it call "
                 f"torch.compile or torch.export?)")
            owned.remove(folder, "trace")
            return gate.judge(db, None, code, echo) if gate else code
        if db is None:
            db = Database(db_path, create=True)
        code = _ingested(db, folder, watching.label(), watching.source, ran, echo, gate, unique=not watching.made)
        if not keep_trace:
            owned.remove(folder, "trace")
        return code
    finally:
        if db is not None:
            db.close()


def run_pushed(url: str, db_path: Path, command: list[str], label: str | None, trace_dir: Path | None,
               keep_trace: bool, echo: Callable[[str], None], token: str | None, wait: bool, baseline: str | None,
               fail_on: str | None, allow_unjudged: bool, program_only: bool = False) -> int:
    """`tlindex run --push URL`: COMMAND run traced, what it wrote posted to a team's server with the run's facts
    (tlindex.push), judged there; the exit code: COMMAND's when it is not 0, else the push's."""
    from tlindex.push import push

    shown = stored_command(command, program_only)
    folder = new_trace_folder(trace_dir or trace_base(db_path), shown)
    try:
        ran = run_command(command, folder, shown)
    except OSError as error:
        echo(f"tlindex run: cannot start {shown[0]!r}: {error.strerror or error}")
        owned.remove(folder, "trace")
        return 127
    if not any(p.is_file() and p.name != owned.MARKER for p in folder.rglob("*")):
        echo(f"tlindex run: {shown[0]} exited with {ran.code} and wrote no trace in {folder}: nothing to push")
        owned.remove(folder, "trace")
        return ran.code or (1 if fail_on else 0)
    facts = {**asdict(ran), "command": ran.command}
    pushed = push(url, [str(folder)], token=token, label=label, facts=facts, baseline=baseline, fail_on=fail_on,
                  allow_unjudged=allow_unjudged, wait=wait, say=echo)
    if not keep_trace:
        owned.remove(folder, "trace")
    return ran.code or pushed


class _Watching:
    """`tlindex run --watch`: COMMAND's trace folder ingested at each tick once it holds a log (the database made
    then, when there was none), into one new run; the ingest after COMMAND grows that run."""

    def __init__(self, db: Database | None, db_path: Path, folder: Path, label: str, source: str,
                 echo: Callable[[str], None]):
        self.db, self.db_path, self.folder, self.source, self.echo = db, db_path, folder, source, echo
        self.wanted = label
        self.watcher = None

    @property
    def made(self) -> bool:
        """Whether a tick made the run."""
        return self.watcher is not None and not self.watcher.unique_label

    def label(self) -> str:
        """The label the ingest after COMMAND gives: the run's a tick made, else the one asked for."""
        return self.watcher.label if self.made else _label_of(self.wanted)

    def tick(self) -> None:
        from tlindex.database import Database
        from tlindex.watch import Watcher

        if not any(p.is_file() and p.name != owned.MARKER for p in self.folder.rglob("*")):
            return
        if self.db is None:
            self.db = Database(self.db_path, create=True)
        if self.watcher is None:
            self.watcher = Watcher(self.db, [str(self.folder)], self.echo, _label_of(self.wanted), unique_label=True,
                                   label_source=self.source)
        self.watcher.once()


def _ingested(db: Database, folder: Path, label: str, source: str, ran: Ran, echo: Callable[[str], None],
              gate: GateCheck | None, unique: bool = True) -> int:
    """What COMMAND wrote in `folder` ingested as one new run (its label made unique as the run is made; not
    `unique`: into the run of that label, which `--watch` made), its facts kept, its summary and findings said, and
    where to see it; the exit code to leave with."""
    from tlindex.answers.glossary import findings_lines
    from tlindex.pages import database_path
    from tlindex.pages import path as page_path

    summary = db.ingest([folder], label if not unique else _label_of(label), unique_label=unique, label_source=source)
    _echo_summary(summary.problems, summary.notes(), summary.line(), echo)
    runs = db.runs_of([folder])  # one: every file was given the run's label
    if not runs:
        return gate.judge(db, None, ran.code, echo) if gate else ran.code
    db.record_facts(runs[0], ran.facts())
    run = db.run(runs[0])
    for line in findings_lines(run["id"], run["label"], db.findings(run["id"])):
        echo(line)
    url = served_url(db.path, run["id"])
    if url:
        echo(f"open {url}")
    else:
        echo(f"see it: tlindex serve {shlex.quote(str(db.path))}  (it prints its URL; this run's page is "
             f"{database_path(db.path.stem)}{page_path('run', run=run['id'])} under it)")
    return gate.judge(db, run["id"], ran.code, echo) if gate is not None else ran.code


def _echo_summary(problems: list[str], notes: list[str], line: str, echo: Callable[[str], None]) -> None:
    """The ingest's problems, notes and its one-line summary, as `tlindex ingest` says them."""
    for problem in problems:
        echo(f"error: {problem}")
    for note in notes:
        echo(f"note: {note}")
    echo(line)


def _label_of(wanted: str) -> str:
    """The run's label from the command line (made unique by the ingest, as the run is made)."""
    from tlindex.ingest.runs import normalize_label

    wanted = normalize_label(wanted[:200])
    if re.fullmatch(r"\s*[-+]?\d+\s*", wanted):  # a command line that reads as a run id (check_label)
        wanted = f"run {wanted.strip()}"
    return wanted
