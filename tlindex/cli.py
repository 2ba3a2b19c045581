"""The tlindex command line: a thin click layer over the library.

It imports what a command needs when the command runs (the library, sqlite3, pathlib, json), so that
`tlindex --help` and each command start without the others' modules.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from typing import TYPE_CHECKING

import click

from tlindex.errors import TlindexError
from tlindex.output import check_format, emit, gate_options, output_options, terminal_line
from tlindex.version import __version__

if TYPE_CHECKING:
    from pathlib import Path

    from tlindex.database import Database

DEFAULT_DB = "traces.db"


class ProgressBar:
    """A click progress bar on stderr, sized in bytes, labelled with MB and MB/s."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = None
        self.started = time.perf_counter()

    def update(self, done: int, total: int) -> None:
        if not self.enabled or total == 0:
            return
        if self.bar is None:
            self.bar = click.progressbar(length=total, file=sys.stderr, show_eta=True, show_percent=True)
            self.bar.__enter__()
        elapsed = max(time.perf_counter() - self.started, 1e-6)
        self.bar.label = f"Ingesting {done / 1e6:,.0f}/{total / 1e6:,.0f} MB {done / 1e6 / elapsed:,.1f} MB/s"
        self.bar.update(done - self.bar.pos)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)

    def abandoned(self) -> None:
        """A bar another process drew and did not end (tlindex.ingest.beside): the cursor shown, the line ended."""
        if self.enabled:
            sys.stderr.write("\033[?25h\n")


def say(text: str, **kwargs) -> None:
    """One line of output: what a log wrote (names, reasons, paths) cannot act on the terminal or start
    a line of its own (control characters, newlines included, escaped: tlindex.output.terminal_line)."""
    click.echo(terminal_line(text), **kwargs)


def database(db_path: str | Path, write: bool = False, create: bool = False) -> Database:
    """The command's one tlindex.Database (DatabaseError, said in one line, if there is none), read only unless
    `write` or `create`: opened once, passed down, closed on the way out (`with database(...) as db`)."""
    from tlindex.database import Database

    return Database(db_path, write=write, create=create)


def label_value(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A run label given on the command line (tlindex.ingest.runs.check_label), else a usage error naming it."""
    if value is None:
        return None
    from tlindex.ingest.runs import check_label

    try:
        return check_label(value)
    except TlindexError as error:
        raise click.BadParameter(str(error)) from None


def db_option(fn):
    return click.option("--db", "db_path", default=DEFAULT_DB, show_default=True, envvar="TLINDEX_DB",
                        type=click.Path(dir_okay=False), help="SQLite database (env TLINDEX_DB)")(fn)


def push_options(fn):
    """The options of a push (`tlindex push`, `tlindex run --push`)."""
    fn = click.option("--wait", is_flag=True, help="Wait for the run to be made, and say its URL, findings and the "
                      "gate's verdict")(fn)
    return click.option("--token", envvar="TLINDEX_TOKEN", metavar="TOKEN",
                        help="An upload token (tlindex token create; env TLINDEX_TOKEN)")(fn)


LAST_RUNS = 50  # what a list over runs shows by default (the runs page's screen)


def run_list_options(fn):
    """--last N, --since DAY, --all: which runs a list over runs shows (the last 50 by default)."""
    fn = click.option("--all", "all_runs", is_flag=True, help="Every run (else the last 50)")(fn)
    fn = click.option("--since", metavar="YYYY-MM-DD", help="Only runs started on that day or later")(fn)
    return click.option("--last", type=click.IntRange(min=1), metavar="N",
                        help=f"Only the last N runs [default: {LAST_RUNS}]")(fn)


def chosen_runs(db: Database, last: int | None, since: str | None, all_runs: bool) -> list[int]:
    """The ids the run list options keep, oldest first; says on stderr how many were left out."""
    ids, matching = db.run_ids(None if all_runs else (last or LAST_RUNS), since)
    if len(ids) < matching:
        say(f"(the last {len(ids):,} of {matching:,} runs, oldest first: --last N, --since YYYY-MM-DD or --all "
            f"for more)", err=True)
    return ids


COMMAND_WORDS = "tlindex.command"  # ctx.meta: the words of the command running (`export parquet`)


class Commands(click.Group):
    """tlindex's commands. Each runs stoppable (tlindex.stopping: SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt,
    so every `with` and `finally` runs), and whatever way it ends, its workers are gone after it."""

    group_class = type  # `export`, and any group added later, is one of these too

    def resolve_command(self, ctx: click.Context, args: list[str]):
        name, command, rest = super().resolve_command(ctx, args)
        ctx.meta.setdefault(COMMAND_WORDS, []).append(name)
        return name, command, rest

    def invoke(self, ctx: click.Context):
        if ctx.parent is not None:  # a group within: the outermost one stops and cleans up
            return super().invoke(ctx)
        import signal

        from tlindex import stopping

        spared = stopping.children()  # (a process that calls the command line may have its own)
        with stopping.stoppable() as stop:
            try:
                result = super().invoke(ctx)
                if stop.signum is None:
                    return result
                stop.take()  # stopped, though the command carried on (a stop swallowed where SQLite called Python)
            except BaseException as error:
                if stop.signum is None and not isinstance(error, KeyboardInterrupt):
                    raise _one_line(error)
                if stop.signum is None:
                    stop.signum = signal.SIGINT  # (raised by Python itself: a Ctrl-C before the handlers)
                stop.take()  # stopped: however the command unwound (a statement the stop interrupted became an error)
            finally:
                left = stopping.end_children(spared)
                _say_what_is_left(" ".join(ctx.meta.get(COMMAND_WORDS, [])), stop, left)
        eval("None")  # CPython notes a KeyboardInterrupt that ended a string's exec or eval (a dataclass made at an
        # import, stopped), caught or not, and `python -m` dies of SIGINT at exit for it; the next string's eval forgets
        ctx.exit(stop.exit_code)  # 130 for Ctrl-C, 128 + N for the others


def _one_line(error: BaseException) -> BaseException:
    """What the command says of an error that ended it: a ClickException's message and the library's errors
    (TlindexError) as one safe line with their exit code, the disk's troubles in one line; anything else as it is
    (a bug: its traceback)."""
    import sqlite3

    if isinstance(error, click.ClickException):  # its message names what a log or a user named: one safe line
        error.message = terminal_line(error.message)
        return error
    if isinstance(error, TlindexError):  # the one place the library's errors become the command's one line
        failed = click.ClickException(terminal_line(str(error)))
        failed.exit_code = error.exit_code
        failed.__cause__ = None
        failed.__suppress_context__ = True
        return failed
    if isinstance(error, (OSError, sqlite3.OperationalError)):
        from tlindex.store.db import disk_message, disk_trouble

        if disk_trouble(error):
            return click.ClickException(terminal_line(disk_message(error)))
    return error


def _say_what_is_left(words: str, stop, left: list[str]) -> None:
    """One line when the command was stopped (and what it left, if anything could not be removed)."""
    if stop.signum is not None:
        say(f"tlindex {words}: stopped ({stop.name}); " + (f"left behind: {', '.join(left)}" if left else
            "nothing of it is left behind (its workers ended, its temporary files removed)"), err=True)
    elif left:
        say(f"warning: tlindex {words} left behind: {', '.join(left)}", err=True)


@click.group(cls=Commands)
@click.version_option(__version__, prog_name="tlindex")
def cli() -> None:
    """Index torch.compile TORCH_TRACE logs into SQLite and browse them with Datasette."""


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@db_option
@click.option("--run", "run_label", callback=label_value, help="Put every file given into the run of this label")
@click.option("--replace", is_flag=True, help="Re-ingest files ingested before")
@click.option("-j", "--jobs", type=click.IntRange(min=1), help="Files parsed in parallel [default: all cores]")
@click.option("--silent", is_flag=True, help="No progress bar")
def ingest(paths: tuple[str, ...], db_path: str, run_label: str | None, replace: bool,
           jobs: int | None, silent: bool) -> None:
    """Ingest log files, TORCH_TRACE directories, globs and .gz files into the database."""
    import sqlite3

    from tlindex.errors import DatabaseError
    from tlindex.ingest.discover import discover
    from tlindex.store.db import disk_message

    if not discover(list(paths))[0]:  # nothing to ingest creates no database
        for problem in discover(list(paths))[1]:
            say(f"error: {problem}", err=True)
        sys.exit(1)
    bar = ProgressBar(enabled=not silent and sys.stderr.isatty())
    try:
        with database(db_path, create=True) as db:
            summary = db.ingest(paths, run_label, replace=replace, jobs=jobs, progress=bar.update)
    except (sqlite3.OperationalError, OSError) as error:  # a full disk, a read-only folder: the database is intact
        raise DatabaseError(f"{db_path}: " + disk_message(error, "every file merged before stays whole, the rest is "
                                                          "not ingested (run the same command again once it is "
                                                          "fixed)", intact=True)) from None
    finally:
        bar.close()
    for problem in summary.problems:
        say(f"error: {problem}", err=True)
    for path, lines in summary.no_records:
        if lines:
            say(f"error: {path}: no trace record in {lines:,} line{'s' * (lines != 1)} (is it a TORCH_TRACE "
                f"log?); its lines are in ingest_errors", err=True)
        else:
            say(f"error: {path}: no trace record (an empty file, or one whose only line is cut off: see "
                f"ingest_errors)", err=True)
    if not silent:
        for note in summary.notes():
            say(f"note: {note}", err=True)
        say(summary.line(), err=True)
    if summary.problems or summary.no_records:
        sys.exit(1)


@cli.command()
@click.argument("paths", nargs=-1, required=True)
@db_option
@click.option("--run", "run_label", callback=label_value, help="Put every file given into the run of this label")
@click.option("--every", type=click.FloatRange(min=0.1), default=1.0, show_default=True, metavar="SECONDS",
              help="Seconds between two ingests (an ingest of logs that did not grow takes milliseconds)")
def watch(paths: tuple[str, ...], db_path: str, run_label: str | None, every: float) -> None:
    """Ingest growing logs every few seconds until Ctrl-C, saying what each rank is compiling.

    A job's TORCH_TRACE folder while it runs: each pass continues the logs that grew and takes new ones; the run
    page (`tlindex serve`) refreshes itself while they grow and says, per rank, what is compiling and for how long.
    """
    from tlindex.watch import Watcher

    with database(db_path, create=True) as db:
        say(f"watching {' '.join(paths)} every {every:g} s (Ctrl-C to stop)", err=True)
        Watcher(db, list(paths), say, run_label).follow(every)


def _params_with_values(params: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """-p NAME VALUE pairs, refusing a VALUE that is the next option (`-p run --db x`)."""
    for name, value in params:
        if value.startswith("--"):
            raise click.UsageError(f"-p {name} needs a value (got {value!r}): -p NAME VALUE")
    return params


@cli.command()
@click.argument("name_or_sql")
@click.option("-p", "--param", "params", nargs=2, multiple=True, metavar="NAME VALUE",
              help="A named parameter (repeatable)", callback=lambda ctx, param, value: _params_with_values(value))
@db_option
@output_options
def query(name_or_sql: str, params: tuple[tuple[str, str], ...], db_path: str, **output) -> None:
    """Run a canned query by name (see `tlindex queries`), or any SQL; a run or compile parameter by any name."""
    import sqlite3

    from tlindex.answers.queries import sql_error_message
    from tlindex.errors import QueryError

    check_format(output)
    with database(db_path) as db:
        try:
            cursor = db.cursor(name_or_sql, dict(params))
            emit([d[0] for d in cursor.description or []], cursor, **output)
        except sqlite3.DatabaseError as error:
            raise QueryError(f"SQL error: {sql_error_message(error)}") from None


@cli.command()
@click.argument("run", required=False)
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON")
@run_list_options
def findings(run: str | None, db_path: str, as_json: bool, last: int | None, since: str | None,
             all_runs: bool) -> None:
    """Say what is wrong with a run (or the last 50): failures, breaks, recompiles, rank divergence, ...

    Each finding is followed by what to try next; --json adds what its kind means (`explanation`), and
    `tlindex show glossary` explains every kind. Exits 1 when there is an error or a warning to report, 0 when
    there is nothing (so CI jobs can gate on it).
    """
    import json

    from tlindex.answers.findings import problems
    from tlindex.answers.glossary import findings_lines

    with database(db_path) as db:
        ids = chosen_runs(db, last, since, all_runs) if run is None else [db.run(run)["id"]]
        found = db.findings_of(ids)
        labels = {run_id: label for run_id, label in db.run_labels(ids).items()}
    report = [(run_id, labels[run_id], found[run_id]) for run_id in ids]
    if as_json:
        click.echo(json.dumps([{"run": run_id, "label": label, "findings": [f.as_dict() for f in found]}
                               for run_id, label, found in report], indent=2))
    else:
        for run_id, label, found in report:
            for line in findings_lines(run_id, label, found):
                say(line)
    if any(problems(found) for _, _, found in report):
        sys.exit(1)


@cli.command()
@click.argument("term")
@db_option
@click.option("--run", "run_name", help="Only this run (id, label or unique label prefix)")
@click.option("--json", "as_json", is_flag=True, help="Print the hits as a JSON list")
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True,
              help="Hits printed, best first (and read per index)")
@click.option("--base-url", default=None,
              help="Where `tlindex serve` answers: hits are printed as full URLs under it  [default: the URL of a "
                   "running `tlindex serve` of the database, else http://127.0.0.1:8001]")
def search(term: str, db_path: str, run_name: str | None, as_json: bool, limit: int, base_url: str | None) -> None:
    """Find where TERM appears across all logs: names, reasons, guards, errors and payload text.

    TERM is literal (kernel and op names such as aten.mm or triton_poi_fused_add_0 work as typed).
    """
    import json

    from tlindex.pages import hit_path

    with database(db_path) as db:
        hits, left = db.search(term, run_name, limit)
        labels = db.run_labels(sorted({hit.run for hit in hits if hit.run is not None}))
    prefix = _serve_prefix(db_path, base_url)

    def url(hit) -> str:
        return prefix + hit_path(hit)

    if as_json:
        click.echo(json.dumps([{**hit.as_dict(), "path": hit_path(hit), "url": url(hit)} for hit in hits], indent=2))
        return
    if not hits:
        say(f"no match for {term!r}")
        sys.exit(1)
    group = None
    for hit in hits:
        if (hit.run, hit.compile) != group:
            group = (hit.run, hit.compile)
            where = f"[{hit.compile_id}]" if hit.compile_id else "(no compile)"
            say(f"run {hit.run} {labels.get(hit.run, '')} {where}")
        say(f"  {hit.table}: {hit.snippet.strip()}  ({url(hit)})")
    if left:
        say(f"(and {left:,} more places: --limit N prints more, --run RUN narrows)", err=True)


def _serve_prefix(db_path: str, base_url: str | None) -> str:
    """The URL a page path of the database goes under: BASE_URL, else a running `tlindex serve`'s, else port 8001."""
    from pathlib import Path

    from tlindex.pages import database_path

    if base_url is None:
        from tlindex.serve import running_servers

        base_url, name = (running_servers(Path(db_path)) or [("http://127.0.0.1:8001", Path(db_path).stem)])[0]
    else:
        name = Path(db_path).stem
    return base_url.rstrip("/") + database_path(name)


@cli.command(name="diff")
@click.argument("run_a")
@click.argument("run_b")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: a, b, summary, compiles")
@click.option("--graphs", is_flag=True, help="Print a unified diff of each changed FX graph and generated code")
def diff_command(run_a: str, run_b: str, db_path: str, as_json: bool, graphs: bool) -> None:
    """What changed between two runs (ids or unique label prefixes): compiles matched, changes ranked.

    Failures and new graph breaks come first, then the biggest compile-time regressions.
    """
    import json

    from tlindex.answers.diff import as_text

    with database(db_path) as db:
        result = db.diff(run_a, run_b, graphs=graphs)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    for line in as_text(result):
        say(line)


@cli.command()
@click.argument("paths", nargs=-1)
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder to write (must be empty, or a report with --overwrite)")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), envvar="TLINDEX_DB",
              help="Database to read (and, with PATHs, to ingest into) [default: traces.db; with PATHs a "
                   "temporary one]")
@click.option("--run", "run_names", multiple=True, help="Only this run (id or label prefix; repeatable)")
@click.option("--open", "open_browser", is_flag=True, help="Open the report in a browser")
@click.option("--overwrite", is_flag=True, help="Replace DIR when it holds a report already")
@click.option("-j", "--jobs", type=click.IntRange(min=1),
              help="Files parsed, and pages rendered, in parallel [default: all cores]")
@click.option("--silent", is_flag=True, help="No progress")
@click.option("--last", type=click.IntRange(min=1), metavar="N",
              help=f"Without PATHs or --run: the last N runs of the database [default: {LAST_RUNS}]")
@click.option("--all", "all_runs", is_flag=True, help="Without PATHs or --run: every run of the database")
@click.option("--with-run-facts", is_flag=True, help="Show the command line (redacted), user, host and working "
              "directory `tlindex run` kept (left out by default: a report is made to be shared)")
@click.option("--scrub", is_flag=True, help="Mask tokens of known shapes (access tokens, API keys) in every file, "
              "the logs' own text included (error messages, paths, environment in generated code)")
def report(paths: tuple[str, ...], out_dir: str, db_path: str | None, run_names: tuple[str, ...],
           open_browser: bool, overwrite: bool, jobs: int | None, silent: bool, last: int | None,
           all_runs: bool, with_run_facts: bool, scrub: bool) -> None:
    """Write a folder of static pages: logs (PATHs, as ingest takes them) or runs of a database.

    With one run, DIR/index.html is its run page and DIR/compile_directory.json and DIR/raw.jsonl are
    in tlparse's formats; with several, DIR/index.html lists them and each has DIR/run-<id>/. Links are
    relative and assets local: the folder works from file:// and from any static host. What `tlindex run` kept of
    where and by whom a run was made is left out unless --with-run-facts; the logs' own text is as torch wrote it,
    unless --scrub masks the tokens of known shapes in it.
    """
    from pathlib import Path

    from tlindex.database import Database

    out = Path(out_dir)
    bar = ProgressBar(enabled=not silent and sys.stderr.isatty())
    show = not silent and sys.stderr.isatty()

    def progress(pages: int) -> None:
        if show and pages % 25 == 0:
            click.echo(f"\rWriting the report: {pages:,} pages", err=True, nl=False)

    opened = Database.temporary() if paths and not db_path else database(db_path or DEFAULT_DB, create=bool(paths))
    try:
        with opened as db:
            outcome = db.report(out, run_names, paths=paths, last=None if all_runs else (last or LAST_RUNS),
                                overwrite=overwrite, jobs=jobs, run_facts=with_run_facts, scrub=scrub, ingest_progress=bar.update,
                                progress=progress, say=None if silent else (lambda text: say(text, err=True)))
    finally:
        bar.close()
    if show:
        click.echo("", err=True)
    _say_report(out, outcome, silent)
    if open_browser:
        import webbrowser

        webbrowser.open((out / "index.html").resolve().as_uri())
    if outcome.problems:
        sys.exit(1)


def _say_report(out: Path, outcome, silent: bool) -> None:
    """What the report holds, what could not be read or rendered: one line each."""
    for problem in outcome.problems:
        say(f"error: {problem}", err=True)
    if outcome.summary is None:
        if not silent:
            say(f"Report: the logs hold no trace record; {out / 'index.html'} says so", err=True)
        return
    written, runs = outcome.summary, outcome.runs
    for warning in written.warnings:
        say(f"warning: {warning}", err=True)
    for path, what in written.degraded:
        say(f"warning: {out / path} could not be rendered ({what}); the rest of the report was written", err=True)
    if written.scrubbed is not None and not silent:
        say(f"scrubbed: {written.scrubbed:,} token{'s' * (written.scrubbed != 1)} of a known shape masked", err=True)
    if not silent:
        say(f"Report of {len(runs)} run{'s' * (len(runs) != 1)}: {written.pages:,} pages, "
            f"{written.payloads:,} payloads, {written.bytes / 1e6:,.1f} MB in {out} (open {out / 'index.html'})",
            err=True)


@cli.command()
@output_options
def queries(**output) -> None:
    """List the canned queries with their titles and parameters."""
    from tlindex.answers.queries import load_queries

    rows = [(q.name, q.title, " ".join(f":{name}" for name, _ in q.params), q.description)
            for q in load_queries().values()]
    if not any(output[flag] for flag in ("as_csv", "as_tsv", "as_json", "as_nl")):
        output["as_table"] = True  # a listing reads best as a table
    emit(["name", "title", "params", "description"], rows, **output)


@cli.group()
def export() -> None:
    """Export the database for other engines."""


@export.command()
@click.argument("out_dir", type=click.Path(file_okay=False))
@db_option
@click.option("--tables", "-t", multiple=True, help="Only these tables (repeatable; default: all)")
@click.option("--replace", is_flag=True, help="Overwrite OUT_DIR when it is not empty")
def parquet(out_dir: str, db_path: str, tables: tuple[str, ...], replace: bool) -> None:
    """Write every table as a Parquet dataset in OUT_DIR/<table>/, hive-partitioned by run and rank."""
    with database(db_path) as db:
        manifest = db.export_parquet(out_dir, tables, replace)
    rows = sum(t["rows"] for t in manifest["tables"].values())
    say(f"exported {len(manifest['tables'])} tables, {rows:,} rows to {out_dir}", err=True)


@export.command()
@click.argument("out", type=click.Path(dir_okay=False, allow_dash=True))
@db_option
@click.option("--run", "run_name", required=True, help="The run (id, label, log directory or unique label prefix)")
@click.option("--rank", "ranks", type=int, multiple=True, help="Only this rank's processes (repeat for several)")
@click.option("--overview", is_flag=True, help="Only each process's outermost spans (its compiles): a trace of "
              "hundreds of ranks that a trace viewer opens")
@click.option("--replace", is_flag=True, help="Overwrite OUT when it is a file tlindex did not write")
def chromium(out: str, db_path: str, run_name: str, ranks: tuple[int, ...], overview: bool, replace: bool) -> None:
    """Write a run's chromium events as one trace for Perfetto or chrome://tracing (OUT, - for stdout).

    Each rank is a process; spans carry the args of their begin and end events. An existing OUT that is not a
    trace tlindex wrote is refused without --replace.
    """
    from pathlib import Path

    from tlindex.formats.chromium import HEAD
    from tlindex.owned import atomic_file

    with database(db_path) as db:
        chunks = db.chromium_trace(run_name, list(ranks) or None, overview)
        if out == "-":
            for chunk in chunks:
                sys.stdout.buffer.write(chunk)
        else:  # written beside OUT, moved in when whole: stopped or failing midway, OUT is as it was
            atomic_file(Path(out), chunks, HEAD, "chromium trace", replace)


@cli.command(name="spark-ingest")
@click.argument("paths", nargs=-1, required=True)
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory for the Parquet tables (the layout of `tlindex export parquet`)")
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL")
@click.option("--run", "run_label", callback=label_value, help="Put every file given into the run of this label")
@click.option("--replace", is_flag=True, help="Overwrite --out when it is not empty")
def spark_ingest(paths: tuple[str, ...], out_dir: str, master: str, run_label: str | None, replace: bool) -> None:
    """Ingest logs with Apache Spark (one task per file) straight into Parquet; needs tlindex[spark]."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        raise TlindexError("spark-ingest needs pyspark: pip install 'tlindex[spark]'")
    from tlindex.formats.spark import spark_ingest as run_spark_ingest

    manifest = run_spark_ingest(list(paths), out_dir, master=master, replace=replace, run_label=run_label)
    spark = manifest["spark"]
    say(f"{spark['files']} files ingested with Spark: {spark['envelopes']:,} envelopes, "
               f"{spark['ingest_errors']:,} ingest errors -> {out_dir}", err=True)


@cli.command(name="runs")
@db_option
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON list")
@run_list_options
def runs_command(db_path: str, as_json: bool, last: int | None, since: str | None, all_runs: bool) -> None:
    """List the last 50 runs, oldest first (as every page and command lists them): id, label (and whether it is
    kept), start, ranks, compiles, failures, worst finding; a run that `tlindex run` wrote also shows its command
    line, how it ended, how long it took, where and by whom."""
    import json

    with database(db_path) as db:
        listed = db.runs(chosen_runs(db, last, since, all_runs))
    if as_json:
        click.echo(json.dumps(listed, indent=2))
        return
    for run in listed:
        ranks = run["ranks_text"]
        say(f"{run['id']:>4}  {run['label']}{' (kept)' * run['kept']}  {(run['start'] or '')[:19]}  {ranks}, "
            f"{run['compiles']} compiles, {run['failures']} failed  {run['worst_finding'] or 'nothing to report'}")
        ran = run["ran"]
        if ran:
            where = ", ".join(part for part in (ran["user"] and f"{ran['user']}@{ran['host']}" or ran["host"],
                                                ran["cwd"]) if part)
            say(f"      $ {ran['line']}  ({ran['ended']} after {ran['duration_s']} s; {where})")




@cli.command(name="rm")
@click.argument("runs", nargs=-1, required=True)
@db_option
def rm_command(runs: tuple[str, ...], db_path: str) -> None:
    """Delete runs (ids, labels or unique label prefixes) and every row that is only theirs, in one transaction.

    Each run deleted is named with its id and label; a name that matches several runs deletes nothing."""
    with database(db_path, write=True) as db:
        removed = db.remove_runs(runs)
    for run_id, label in removed["removed"].items():
        say(f"removed run {run_id} {label}", err=True)
    say(f"removed {removed['runs']} run{'s' * (removed['runs'] != 1)}: {removed['sources']} processes, "
        f"{removed['files']} log files", err=True)


@cli.command(name="label")
@click.argument("run")
@click.argument("new_label", required=False, callback=label_value)
@click.option("--keep/--no-keep", "kept", default=None,
              help="Mark the run kept (a run to stay, such as a baseline), or no longer kept")
@db_option
def label_command(run: str, new_label: str | None, kept: bool | None, db_path: str) -> None:
    """Rename a run (an id, label or unique label prefix) to NEW_LABEL, and with --keep mark it kept (--no-keep: not).

    A re-ingest of its logs (--replace, a log rewritten in place) keeps its label, its kept mark and what `tlindex
    run` knew of its command."""
    if new_label is None and kept is None:
        raise click.UsageError("give NEW_LABEL, --keep or --no-keep")
    with database(db_path, write=True) as db:
        renamed = db.rename_run(run, new_label, kept)
    named = f" {renamed['new']!r}" if new_label is None else f": {renamed['old']!r} is now {renamed['new']!r}"
    mark = "" if kept is None else " (kept)" if renamed["kept"] else " (not kept)"
    say(f"run {renamed['id']}{named}{mark}", err=True)


@cli.command(name="run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@db_option
@click.option("--label", callback=label_value, help="The run's label (default: the command line)")
@click.option("--trace-dir", type=click.Path(file_okay=False), help="Where the run's own trace folder is made, named "
              "by time and command; TORCH_TRACE points at it [default: <stem>.traces beside the database]")
@click.option("--keep-trace/--no-keep-trace", default=True, show_default=True,
              help="Keep the run's trace folder once it is ingested")
@click.option("--no-command", "program_only", is_flag=True, envvar="TLINDEX_NO_COMMAND",
              help="Keep only the program's name of COMMAND, not its arguments (env TLINDEX_NO_COMMAND=1)")
@gate_options
@click.option("--push", "push_url", metavar="URL", help="Post what COMMAND wrote to a team's server (`tlindex serve "
              "--uploads`) instead of ingesting it here; the gate is judged there")
@push_options
@click.option("--watch", "watch_every", type=click.FloatRange(min=0.1), is_flag=False, flag_value=1.0,
              metavar="[SECONDS]", help="Ingest what COMMAND writes while it runs, every second (or SECONDS), as "
              "`tlindex watch` does: the run page follows it")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_command(db_path: str, label: str | None, trace_dir: str | None, keep_trace: bool, program_only: bool,
                baseline: str | None, fail_on, allow_unjudged: bool, push_url: str | None, token: str | None,
                wait: bool, watch_every: float | None, command: tuple[str, ...]) -> None:
    """Run COMMAND with TORCH_TRACE set, then ingest what it wrote as one run and say what is wrong.

    `tlindex run -- python train.py` or `tlindex run -- torchrun --nproc-per-node 2 train.py`. Exits
    with COMMAND's exit code (128 + the signal when it was killed); Ctrl-C goes to COMMAND. With --fail-on,
    the new run is judged as `tlindex trend` judges a run: COMMAND's exit code when it is not 0, else 1 when a
    bound is crossed or something could not be judged (no run written, no compile finished, a metric not logged;
    --allow-unjudged lets those pass), else 0.
    """
    from pathlib import Path

    from tlindex.run import GateCheck, run_pushed, run_traced

    if push_url:
        spec = ",".join(clause.text for clause in fail_on) if fail_on else None
        sys.exit(run_pushed(push_url, Path(db_path), list(command), label=label,
                            trace_dir=Path(trace_dir) if trace_dir else None, keep_trace=keep_trace,
                            echo=lambda text: say(text, err=True), token=token, wait=wait, baseline=baseline,
                            fail_on=spec, allow_unjudged=allow_unjudged, program_only=program_only))
    gate = GateCheck(baseline, fail_on, allow_unjudged) if (baseline or fail_on) else None
    sys.exit(run_traced(Path(db_path), list(command), label=label,
                        trace_dir=Path(trace_dir) if trace_dir else None, keep_trace=keep_trace,
                        echo=lambda text: say(text, err=True), gate=gate, program_only=program_only,
                        watch=watch_every))


@cli.command()
@click.argument("page", metavar="PAGE")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@db_option
@click.option("--arg", "args", multiple=True, metavar="KEY=VALUE", help="A page argument (repeatable): rank=1, q=aten")
@click.option("--json", "as_json", is_flag=True, help="Print exactly the page's JSON twin")
def show(page: str, names: tuple[str, ...], db_path: str, args: tuple[str, ...], as_json: bool) -> None:
    """Print a page's data: what the page shows, and its JSON twin serves.

    `tlindex show compile 0/1`, `show run train`, `show trie RUN --arg rank=1`, `show artifact 12`,
    `show vllm RUN`, `show passes RUN:0/1`, `show runs`, `show glossary` (what the pages' words mean). Runs and
    compiles are named as everywhere.
    """
    import json

    from tlindex.errors import UsageError
    from tlindex.pages import BY_NAME, read_named
    from tlindex.pages.rows import Args, as_data
    from tlindex.pages.screens import screen

    pairs = [arg.split("=", 1) for arg in args]
    if any(len(pair) != 2 for pair in pairs):
        raise UsageError(f"--arg takes KEY=VALUE, not {next(a for a in args if '=' not in a)!r}")
    given = Args([tuple(pair) for pair in pairs])
    if getattr(BY_NAME.get(page), "database", True):
        with database(db_path) as db:
            data = as_data(read_named(db.conn, page, list(names), given))
    else:  # the glossary needs none
        data = as_data(read_named(None, page, list(names), given))
    if as_json:
        click.echo(json.dumps(data, indent=2, default=str))
        return
    if page == "glossary":  # definitions read whole, not as an outline's first 200 characters
        from tlindex.answers.glossary import lines
        shown = lines()
    else:  # what the page shows first, in a screen
        shown = screen(page, data, " ".join(["tlindex show", page, *map(shlex.quote, names)]))
    for line in shown:
        say(line)


@cli.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("db", required=False)
@click.option("-h", "--host", help="Host to serve on [default: 127.0.0.1]; with 0.0.0.0 (every interface) the URL "
                                   "printed says 127.0.0.1")
@click.option("-p", "--port", type=click.IntRange(0, 65535),
              help="Port to serve on; when it is taken, an error, not another port (0: any free port) [default: "
                   "8001, or the next free port when 8001 is taken]")
@click.option("-o", "--open", "open_browser", is_flag=True,
              help="Open the tlindex runs page in a browser once the server answers (with --root, Datasette opens "
                   "its sign-in URL)")
@click.option("--uploads", is_flag=True, help="Take logs posted to /<db>/-/tlindex/upload with a token (tlindex push, "
              "the runs page's form), each ingested as a run")
@click.option("--max-upload", metavar="SIZE", help="With --uploads: the largest upload taken, e.g. 500M [default: 1G]")
@click.option("--max-queued", type=click.IntRange(min=1), metavar="N",
              help="With --uploads: uploads waiting at once; past it a 503 with Retry-After [default: 64]")
@click.option("--keep-runs", type=click.IntRange(min=1), metavar="N",
              help="With --uploads: keep the newest N runs (runs people named, and baselines, are kept)")
@click.option("--keep-days", type=click.FloatRange(min=0, min_open=True), metavar="D",
              help="With --uploads: keep the runs of the last D days (runs people named, and baselines, are kept)")
@click.option("--private", is_flag=True, help="Every page needs an actor: a token, or a user signed in through a "
              "Datasette auth plugin")
@click.pass_context
def serve(ctx: click.Context, db: str | None, host: str | None, port: int | None, open_browser: bool, uploads: bool,
          max_upload: str | None, max_queued: int | None, keep_runs: int | None, keep_days: float | None,
          private: bool) -> None:
    """Browse the database with Datasette; the URL of its tlindex runs page is printed first.

    Without --port it serves on 8001, or on the next free port when 8001 is taken, and says so; a --port
    that is taken is an error (exit 1), never another port. While it serves, `tlindex run` finds it (a marker
    beside the database). Other options go to `datasette serve` (--uds, --get: handed over as they are).
    """
    from contextlib import ExitStack

    from tlindex.serve import interrupt_on_stop, parse_size, taking_uploads
    from tlindex.serve import private as private_options

    if (max_upload or max_queued or keep_runs or keep_days) and not uploads:
        raise click.UsageError("--max-upload, --max-queued, --keep-runs and --keep-days go with --uploads")
    with database(db or os.environ.get("TLINDEX_DB", DEFAULT_DB)) as opened:  # checked, brought up to date
        path = opened.path
    args = list(ctx.args)
    interrupt_on_stop()
    with ExitStack() as serving:
        if private:
            args += serving.enter_context(private_options(args))
        if uploads:
            serving.enter_context(taking_uploads(path, parse_size(max_upload), max_queued, keep_runs, keep_days))
        _serve_with_datasette(path, host, port, open_browser, args, uploads)


def _serve_with_datasette(path: Path, host: str | None, port: int | None, open_browser: bool, args: list[str],
                          uploads: bool) -> None:
    """`datasette serve` on the database, on the port chosen, its runs page's URL said first and a marker beside the
    database while it serves (a server on no port: Datasette's options handed over as they are)."""
    import signal

    from datasette.cli import serve as datasette_serve

    from tlindex.serve import DEFAULT_HOST, Served, marked, open_when_answering, passes_through, pick_port, scheme_of
    from tlindex.stopping import relay

    if passes_through(args):  # no server on a port: nothing to pick, print or find
        given = [*(["-h", host] if host is not None else []), *(["-p", str(port)] if port is not None else []),
                 *(["--open"] if open_browser else [])]
        datasette_serve.main([str(path), *given, *args], prog_name="tlindex serve", standalone_mode=True)
        return
    host = DEFAULT_HOST if host is None else host
    chosen, note = pick_port(host, port)  # tried just before Datasette binds it
    served = Served(host, chosen, path.stem, scheme_of(args))
    if note:
        say(note)
    with marked(path, served):  # while it serves, `tlindex run` finds it
        say(f"tlindex: {served.runs_url}  (runs, findings, trend{'; it takes uploads' if uploads else ''}; "
            f"Datasette: {served.base}/)")
        if open_browser and "--root" in args:
            args.append("--open")  # Datasette's: its sign-in URL, which the runs page would need first
        elif open_browser:
            open_when_answering(served.runs_url, lambda text: say(text, err=True))
        if hasattr(signal, "SIGHUP"):  # the server stops gracefully on SIGTERM; a closed terminal, the same way
            relay(signal.SIGHUP, signal.SIGTERM)
        datasette_serve.main([str(path), "-h", host, "-p", str(chosen), *args], prog_name="tlindex serve",
                             standalone_mode=True)


@cli.group()
def token() -> None:
    """The tokens that may post logs to `tlindex serve --uploads` (kept hashed beside the database)."""


@token.command(name="create")
@click.argument("name")
@db_option
@click.option("--can", type=click.Choice(["upload", "admin"]), default="upload", show_default=True,
              help="What it may do: post logs, or also relabel and remove runs over HTTP")
@click.option("--expires", metavar="DURATION", help="When it stops working: 30d, 12h, 90m [default: never]")
def token_create(name: str, db_path: str, can: str, expires: str | None) -> None:
    """Make a token NAME and print it once, alone on the last line (only its hash is kept)."""
    from pathlib import Path

    from tlindex import tokens

    with database(db_path):  # (a tlindex database: the tokens are kept beside it)
        made = tokens.create(Path(db_path), name, can, expires)
    say(f"token {name} ({can}{f', expires in {expires}' if expires else ''}); it is shown once, keep it:", err=True)
    click.echo(made)


@token.command(name="list")
@db_option
def token_list(db_path: str) -> None:
    """List the database's tokens: name, what it may do, when made, expires, and whether valid."""
    from pathlib import Path

    from tlindex import tokens

    for made in tokens.load(Path(db_path)):
        say(f"{made.name}  {made.can}  made {made.created}  expires {made.expires or 'never'}  {made.state()}")


@token.command(name="revoke")
@click.argument("name")
@db_option
def token_revoke(name: str, db_path: str) -> None:
    """Revoke the token NAME: it stops working at once."""
    from pathlib import Path

    from tlindex import tokens

    tokens.revoke(Path(db_path), name)
    say(f"revoked token {name}", err=True)


@cli.command()
@click.argument("url")
@click.argument("paths", nargs=-1, required=True)
@click.option("--label", callback=label_value, help="The run's label (default: the folder's or file's name)")
@push_options
@gate_options
def push(url: str, paths: tuple[str, ...], label: str | None, token: str | None, wait: bool, baseline: str | None,
         fail_on, allow_unjudged: bool) -> None:
    """Post logs, .gz files, archives or TORCH_TRACE folders to a team's server (`tlindex serve --uploads`) and say
    where their run is. Exit 0 done, 1 the gate crossed a bound, 2 usage, 3 the server refused or the ingest failed."""
    from tlindex.push import progress_line
    from tlindex.push import push as push_logs

    spec = ",".join(clause.text for clause in fail_on) if fail_on else None
    sys.exit(push_logs(url, list(paths), token=token, label=label, baseline=baseline, fail_on=spec,
                       allow_unjudged=allow_unjudged, wait=wait, say=say, progress=progress_line(sys.stderr.isatty())))


@cli.command(name="trend")
@click.argument("runs", nargs=-1)
@db_option
@click.option("--label", "label_prefix", metavar="PREFIX", help="Only runs whose label starts with PREFIX")
@click.option("--json", "as_json", is_flag=True, help="Print the runs' health as a JSON list")
@click.option("--last", type=click.IntRange(min=1), metavar="N", help="Only the last N runs [default: 100]")
@click.option("--all", "all_runs", is_flag=True, help="Every run (else the last 100)")
@click.option("--run", "judged", metavar="RUN", help="The run compared with --baseline and judged by --fail-on "
              "[default: the run ingested last]")
@gate_options
def trend_command(runs: tuple[str, ...], db_path: str, label_prefix: str | None, as_json: bool, last: int | None,
                  all_runs: bool, judged: str | None, baseline: str | None, fail_on, allow_unjudged: bool) -> None:
    """Compile health run after run, oldest first: compiles, recompiles, failures, graph breaks, restarts, compile
    time (Dynamo, AOTAutograd, Inductor, backward, autotuning), guards, cache hits and misses.

    RUNS are ids, labels or unique label prefixes (default: the last 100 runs). With --fail-on, the run --run names,
    else the run ingested last (not the newest by its logs' clocks), is judged (against --baseline for signed
    bounds): exit 1 naming each bound crossed and the compiles that changed most, or what could not be judged (the
    baseline itself, a run that finished no compile, a metric not logged; --allow-unjudged lets those pass), 0
    otherwise; a malformed --fail-on is a usage error (exit 2).
    """
    import json

    from tlindex.answers.gate import lines as gate_lines
    from tlindex.answers.health import table
    from tlindex.answers.trend import against_baseline, torch_change_lines
    from tlindex.errors import NotFound
    from tlindex.output import table_lines

    with database(db_path) as db:
        kept = None if runs or all_runs else (last or 100)
        result = db.trend(runs, label_prefix, baseline, fail_on, judged, allow_unjudged, last=kept)
        matching = len(result.rows) if kept is None else db.run_ids(None, label=label_prefix)[1]
    if fail_on and not result.rows:
        raise NotFound("no run to judge: no run matches" + (f" --label {label_prefix!r}" if label_prefix else ""))
    if len(result.rows) < matching:
        say(f"(the last {len(result.rows):,} of {matching:,} runs: --last N or --all for more)", err=True)
    if as_json:
        click.echo(json.dumps(result.rows, indent=2))
    elif result.rows:
        headers, cells = table(result.rows, result.baseline["run_id"] if result.baseline else None)
        for line in table_lines(headers, cells) + torch_change_lines(result.rows) + against_baseline(result):
            say(line)
    else:
        say("no run matches" + (f" --label {label_prefix!r}" if label_prefix else ""), err=True)
    if result.gate is not None:
        for line in gate_lines(result.gate):
            say(line, err=as_json)  # with --json, stdout stays one JSON document
        sys.exit(result.gate.exit_code)


if __name__ == "__main__":
    cli()
