"""Huge values: no statement builds a value past the limit, on any connection tlindex opens or serves.

`tlindex.store.limits` caps the length of any string or blob a statement may build (issue 37), a setting of the
connection: SQLite's own functions run as they are (issue 61). These tests check that every connection carries the
cap (through each opener, and in the source: no other `sqlite3.connect`), reproduce the three reported cases (1-4 GB
and 5-16 s each before), and call every SQL function a user can reach with a huge argument in each position: through
`tlindex query` and through an anonymous Datasette request (whose SQL a worker process runs, bounded:
tests/test_bounded_requests.py), each surface in a process of its own whose peak is measured.
The functions come from the code's own registries (ALLOWED_FUNCTIONS for `tlindex query`; for Datasette,
every function its connections have but DENIED_FUNCTIONS), their arities from PRAGMA function_list, so a
function added tomorrow is called the day it is added. A fast sample runs by default; the sweep is slow.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.app import Datasette

from tlindex.answers.queries import ALLOWED_FUNCTIONS, DENIED_FUNCTIONS
from tlindex.cli import cli
from tlindex.store.limits import MAX_VALUE_BYTES

ROOT = Path(__file__).resolve().parents[1]
LIMITS_MODULE = ROOT / "tlindex" / "store" / "limits.py"
# Memory: what one call may add to its process, in values of the limit. max() of the longest text holds
# four (its argument, the aggregate's copy, the result and its copy out): 4 x 65 MiB on a base of 28 MB
# (`tlindex query`) or 45 MB (Datasette) is about 290 or 305 MB at peak, where the reported cases took
# 1-3.9 GB, 15 to 60 values of the limit.
MAX_COPIES = 4
LIMIT_MB = MAX_VALUE_BYTES / (1 << 20)
SLACK_MB = 16  # and the rest of a call: the statement, a page or two, the answer's Python objects
CLI_SECONDS = 5  # `tlindex query` has no time limit by design: this is "answers or refuses at once"
SQL_TIME_LIMIT_S = 1.0  # Datasette's default sql_time_limit_ms
# Datasette stops a statement between two steps: the last step runs to its end (with the limit, one pass
# over at most MAX_VALUE_BYTES: ~0.3 s here), then the request's own work; the rest is room for a
# machine shared with other tests.
DATASETTE_SECONDS = SQL_TIME_LIMIT_S + 1.0

# The three cases reported in issue 37: 1 GB in 9.5 s, 2 GB, and 21.7 s past Datasette's 1 s limit.
REPORTED = ("select printf('%.*c', 999999999, 'x')",
            "select hex(printf('%.*c', 400000000, 'x'))",
            "select replace(printf('%.*c', 900000000, 'x'), 'x', 'yy')")

LONGEST = f"printf('%.*c', {MAX_VALUE_BYTES - 1}, 'x')"  # the longest text a statement may build
HUGE = {  # what an argument holds (SQL), by what it is
    "the longest text": LONGEST,
    "the longest blob": f"cast({LONGEST} as blob)",
    "a count of 2e9": "2000000000",
    "-1": "-1",
    "1e308": "1e308",
    "'1e308' as text": "'1e308'",
    "2**70": str(2 ** 70),
    "'2**70' as text": f"'{2 ** 70}'",
}
# What the other arguments hold: beside a number, a format that counts and a text; beside the longest text
# (each such case builds 65 MiB: ~0.3 s), a text it matches and a number that is JSON; beside the blob, a text.
FILLERS = ("'%.*c'", "'x'")
LONGEST_FILLERS = {HUGE["the longest text"]: ("'x'", "1"), HUGE["the longest blob"]: ("'x'",)}

# Called in a form of their own rather than f(args): the operators, the table-valued functions (in FROM),
# and FTS5's functions, which work only in a full-text query of an FTS5 table (its first argument).
OPERATORS = {"->", "->>"}
TABLE_VALUED = {"json_each": (1, 2), "json_tree": (1, 2)}  # (not in PRAGMA function_list)
IN_FULL_TEXT_QUERY = {"match": 1, "highlight": 3, "snippet": 5, "bm25": 1}  # arguments after the table
# Functions no case calls, with why. None today: even FTS3's placeholders (matchinfo, offsets, optimize)
# answer a plain call, with an error. The sweep fails for a reachable function neither called nor here.
SKIPPED: dict[str, str] = {}
# Functions one call of which runs longer than the limit lets a C function run on a value (one pass), with
# why; Datasette's progress handler cannot stop a call, so such a case overruns its time limit by that call.
ONE_LONG_STEP = {
    "printf": "SQLite 3.40 counts %c to its precision one character at a time (3.5 s for 2^31), past the limit too: "
              "`tlindex query` runs its user's own SQL, which Ctrl-C stops; a request's runs in a worker, killed on time",
    "format": "as printf",
    "escape_fts": "Datasette's own, in Python: a regular expression over the whole text (~3 s at the limit)",
    "rtreecheck": "the R*Tree module quotes the table's name into the statements it prepares and parses them: a "
                  "name of the limit's length, in one step (1.5 s here, 2.1 s on CI's machine)",
}
ONE_LONG_STEP_SECONDS = 15
# Functions one call of which holds more than MAX_COPIES, with why; they may hold HELD_MORE_COPIES.
HELD_MORE = {
    # A path that is not a JSON path is quoted whole in the error message, which SQLite formats with its own
    # limit (1 GB), not the connection's: the argument, its copy, the message (grown by doubling) and its copy.
    "json_each": "a bad path of the limit's length quoted in the error message: 5 values (350 MB at peak)",
    "json_tree": "as json_each",
    "match": "FTS5 parses a query of the limit's length into a term and copies it: 5 values",
}
HELD_MORE_COPIES = 6


# --- every connection carries the limit ----------------------------------------------------------------

def limit_of(conn: sqlite3.Connection) -> int:
    """The longest string or blob the connection's statements may build."""
    return conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH)


def test_no_connection_is_opened_around_the_limit():
    """Every `sqlite3.connect` of tlindex and its plugin is the one in tlindex.store.limits."""
    opener = re.compile(r"\bsqlite3\s*\.\s*(connect|Connection)\s*\(|\bfrom\s+sqlite3\s+import\b.*\bconnect\b")
    found = [f"{path.relative_to(ROOT)}:{number}"
             for top in ("tlindex", "datasette_plugins") for path in sorted((ROOT / top).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if opener.search(line) and path != LIMITS_MODULE]
    assert found == []
    assert opener.search(LIMITS_MODULE.read_text())  # the scan would see one


def test_every_opener_gives_a_limited_connection(traces_db, tmp_path):
    from schema_reads import schema_copy, tables_read

    from tlindex import Database
    from tlindex.ingest.staging import StagingWriter
    from tlindex.store.db import connect_read_only

    tables_read("select * from runs")
    staging = StagingWriter(tmp_path / "staging.db", main_db=traces_db)
    opened = {"connect_read_only (the report's, the CLI's)": connect_read_only(traces_db),
              "Database": Database(tmp_path / "new.db", create=True).conn, "staging": staging.conn,
              "staging's look-up": staging.main,
              "tables_read": schema_copy().conn}
    try:
        limits = {name: limit_of(conn) for name, conn in opened.items()}
        assert limits.pop("tables_read") <= MAX_VALUE_BYTES  # an empty schema copy: a smaller limit of its own
        assert limits == {name: MAX_VALUE_BYTES for name in limits}
    finally:
        staging.discard()
        opened["connect_read_only (the report's, the CLI's)"].close()
        opened["Database"].close()


@pytest.mark.asyncio
async def test_datasette_limits_tlindex_databases_only(traces_db, tmp_path):
    """A database tlindex did not make may hold longer values, and Datasette's own are Datasette's: the plugin leaves
    them as Datasette opens them."""
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("create table photos (data blob)").connection.close()
    datasette = Datasette([str(traces_db), str(other)], memory=True)
    await datasette.invoke_startup()
    limits = {name: await datasette.get_database(name).execute_fn(limit_of) for name in ("traces", "_memory", "other")}
    default = sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_LENGTH)
    assert limits == {"traces": MAX_VALUE_BYTES, "_memory": default, "other": default}


def test_tlindex_query_says_in_one_line_what_the_limit_refused(traces_db):
    result = CliRunner().invoke(cli, ["query", "select hex(printf('%.*c', 40000000, 'x'))", "--db", str(traces_db)])
    assert result.exit_code == 1
    assert result.output == (f"Error: SQL error: a value would exceed {MAX_VALUE_BYTES >> 20} MiB, the longest string "
                             f"or blob a statement may build here (longer than any value the database stores)\n")


def test_a_whole_payload_still_reads_and_the_fixtures_still_ingest(traces_db):
    """The limit is above every payload (and the fixtures database was ingested under it: see conftest)."""
    result = CliRunner().invoke(cli, ["query", "select count(*) as n, sum(length(cast(text as blob)) = text_size) as whole "
                                               "from payloads join payload_data using (hash)", "--db", str(traces_db)])
    assert result.exit_code == 0
    counted = json.loads(result.output)[0]
    assert counted["n"] == counted["whole"] > 1000


# --- calls generated from the registries -------------------------------------------------------------

def registered(conn: sqlite3.Connection, names: set[str]) -> dict[str, list[tuple[str, int]]]:
    """Each function's (type, narg) from PRAGMA function_list (-1: variadic); none for one it lacks."""
    found: dict[str, list[tuple[str, int]]] = {name: [] for name in names}
    for name, kind, narg in conn.execute("select name, type, narg from pragma_function_list"):
        if name in found:
            found[name].append((kind, narg))
    return found


def arities(name: str, forms: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The (type, argument count) a function is called with: variadic ones with 1-3, unknown ones with 1-2."""
    if name in TABLE_VALUED:
        return [("t", n) for n in TABLE_VALUED[name]]
    if name in IN_FULL_TEXT_QUERY:
        return [("fts", IN_FULL_TEXT_QUERY[name])]
    if not forms:  # in the allowlist, not in this SQLite (string_agg before 3.44): refused, but called
        return [("s", 1), ("s", 2)]
    return sorted({(kind, n) for kind, narg in forms for n in ((1, 2, 3) if narg < 0 else (narg,))})


def call(name: str, kind: str, args: list[str], fts: tuple[str, str]) -> str:
    """A statement calling the function with these arguments, its result's type selected (not the result)."""
    joined = ", ".join(args)
    if kind == "t":
        return f"select count(*) from {name}({joined})"
    if kind == "fts":
        table, term = fts
        if name == "match":
            return f"select count(*) from {table} where {table} match {joined}"
        return f"select typeof({name}({table}, {joined})) from {table} where {table} match '{term}' limit 1"
    expression = f"({args[0]}) {name} ({args[1]})" if name in OPERATORS else f"{name}({joined})"
    return f"select typeof({expression}{' over ()' if kind == 'w' else ''})"


def generated(functions: dict[str, list[tuple[str, int]]], fts: tuple[str, str],
              huge=tuple(HUGE.values())) -> list[tuple[str, str]]:
    """(function, SQL): each function with each huge value in each argument position, the others filled."""
    cases = []
    for name in sorted(set(functions) - set(SKIPPED)):
        for kind, count in arities(name, functions[name]):
            if count == 0:
                cases.append((name, call(name, kind, [], fts)))
            for position in range(count):
                for value in huge:
                    for filler in LONGEST_FILLERS.get(value, FILLERS):
                        args = [value if i == position else filler for i in range(count)]
                        cases.append((name, call(name, kind, args, fts)))
    return cases


def full_text_table(db: Path) -> tuple[str, str]:
    """An FTS5 table of the database and a term it matches (for the functions of a full-text query)."""
    conn = sqlite3.connect(db)
    try:
        (table,) = conn.execute("select name from sqlite_master where sql like 'CREATE VIRTUAL TABLE%fts5%' "
                                "order by name limit 1").fetchone()
        text = " ".join(str(v) for v in conn.execute(f"select * from {table} limit 1").fetchone())
    finally:
        conn.close()
    return table, re.search(r"[A-Za-z]{3,}", text).group(0)


def cli_functions(db: Path) -> dict[str, list[tuple[str, int]]]:
    """What `tlindex query` lets a statement call: ALLOWED_FUNCTIONS."""
    from tlindex.store.db import connect_read_only

    conn = connect_read_only(db)
    try:
        return registered(conn, set(ALLOWED_FUNCTIONS))
    finally:
        conn.close()


async def datasette_functions(db: Path) -> dict[str, list[tuple[str, int]]]:
    """What an anonymous request may call: every function of Datasette's connections but DENIED_FUNCTIONS."""
    datasette = Datasette([str(db)])
    await datasette.invoke_startup()

    def read(conn):
        names = {row[0] for row in conn.execute("select name from pragma_function_list")}
        return registered(conn, (names | ALLOWED_FUNCTIONS) - DENIED_FUNCTIONS)

    return await datasette.get_database(db.stem).execute_fn(read)


# Runs in a process of its own: each case's time and peak (VmHWM, reset before each case through
# /proc/self/clear_refs; where that cannot be reset, the peak of all cases so far: an upper bound). Memory
# freed by the cases before is first handed back (malloc_trim: glibc keeps it in each thread's arena),
# so that a case's peak is the process's base and that case's own cost, as in a process of its own.
DRIVER = r"""
import asyncio, contextlib, ctypes, json, os, re, sys, time

def peak_mb():
    return int(re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1)) // 1024

try:
    trim = ctypes.CDLL("libc.so.6").malloc_trim
except (OSError, AttributeError):
    trim = lambda pad: 0

def reset_peak():
    global base_mb
    trim(0)
    base_mb = int(re.search(r"VmRSS:\s+(\d+)", open("/proc/self/status").read()).group(1)) // 1024
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
    except OSError:
        pass

def report(sql, started, outcome):
    wall, cpu = started
    print(json.dumps({"sql": sql, "seconds": time.process_time() - cpu, "wall": time.monotonic() - wall,
                      "peak_mb": peak_mb(), "base_mb": base_mb, "outcome": outcome}), flush=True)

def cli_cases(db, cases):
    from click import ClickException
    from tlindex.cli import cli
    for sql in cases:
        reset_peak()
        started = time.monotonic(), time.process_time()
        with open(os.devnull, "w") as out, contextlib.redirect_stdout(out):
            try:
                cli.main(["query", sql, "--db", db], prog_name="tlindex", standalone_mode=False)
                outcome = "answered"
            except ClickException as error:
                outcome = "refused: " + error.format_message()
            except BaseException as error:
                outcome = f"crashed: {error!r}"
        report(sql, started, outcome)

async def datasette_cases(db, cases):
    from datasette.app import Datasette
    datasette = Datasette([db])
    await datasette.invoke_startup()
    name = os.path.basename(db).rsplit(".", 1)[0]
    for sql in cases:
        reset_peak()
        started = time.monotonic(), time.process_time()
        response = await datasette.client.get(f"/{name}.json", params={"sql": sql, "_shape": "array"},
                                              follow_redirects=True)
        if response.status_code == 200:
            outcome = "answered"
        elif response.status_code in (400, 500) and "json" in response.headers.get("content-type", ""):
            # (Datasette answers 500 for the errors SQLite's Python module raises as InterfaceError)
            body = response.json()
            outcome = "refused: " + str(body.get("error") if isinstance(body, dict) else body)[:300]
        else:
            outcome = f"crashed: HTTP {response.status_code} {response.text[:300]}"
        report(sql, started, outcome)

surface, db = sys.argv[1:3]
cases = json.load(sys.stdin)
if surface == "cli":
    cli_cases(db, cases)
else:
    asyncio.run(datasette_cases(db, cases))
"""


# The cases are dealt in turn to this many processes at once, each on its own copy of the database: CI's two cores,
# where one process left the other idle for 15 minutes. A case's time is its process's CPU and its memory that
# process's own, so the figures do not depend on how many run beside it.
WORKERS = 2


def run_cases(surface: str, db: Path, cases: list[str], seconds_each: float = CLI_SECONDS) -> list[dict]:
    """Each case's outcome, seconds and peak, run in WORKERS processes of the surface (cli or datasette)."""
    from concurrent.futures import ThreadPoolExecutor

    from conftest import copy_db

    folder = Path(tempfile.mkdtemp(prefix=f"{surface}-", dir=db.parent))

    def deal(index: int) -> list[dict]:  # the cases index, index + WORKERS, ... in a process of their own
        own = folder / str(index)
        own.mkdir()
        return _run_hand(surface, copy_db(db, own / db.name), cases[index::WORKERS], seconds_each)

    hands = [index for index in range(WORKERS) if cases[index::WORKERS]]
    try:
        with ThreadPoolExecutor(len(hands)) as pool:
            dealt = list(pool.map(deal, hands))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    results: list[dict] = [{}] * len(cases)
    for index, outcomes in zip(hands, dealt):
        results[index::WORKERS] = outcomes
    return results


def _run_hand(surface: str, db: Path, cases: list[str], seconds_each: float) -> list[dict]:
    """The outcomes of one process's cases, in their order."""
    budget = 60 + len(cases) * seconds_each
    with open(db.parent / f"{surface}.stderr", "wb+") as stderr:  # Datasette logs each error, a path of 65 MiB too
        proc = subprocess.run([sys.executable, "-c", DRIVER, surface, str(db)], input=json.dumps(cases),
                              stdout=subprocess.PIPE, stderr=stderr, text=True, timeout=budget)
        stderr.seek(max(0, stderr.seek(0, 2) - 3000))
        errors = stderr.read().decode("utf-8", "replace")
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and len(results) == len(cases), errors
    return results


def over_budget(surface: str, cases: list[tuple[str, str]], results: list[dict]) -> list[str]:
    """The cases that crashed, took longer than the surface allows, or added more than MAX_COPIES values of the
    limit to the memory of the process (its peak less its base when the case started). Time is the process's
    CPU time: the work a case costs, which a machine busy with other tests does not inflate as it does the wall."""
    found = []
    for (name, sql), result in zip(cases, results):
        seconds = (ONE_LONG_STEP_SECONDS if name in ONE_LONG_STEP else CLI_SECONDS if surface == "cli"
                   else DATASETTE_SECONDS)
        added = result["peak_mb"] - result["base_mb"]
        copies = HELD_MORE_COPIES if name in HELD_MORE else MAX_COPIES
        if result["outcome"].startswith("crashed") or result["seconds"] > seconds or added > copies * LIMIT_MB + SLACK_MB:
            found.append(f"{result['seconds']:.1f} s CPU ({result['wall']:.1f} s) +{added} MB "
                         f"{result['outcome'][:120]}: {sql[:200]}")
    return found


# --- both arguments long: no call runs longer than a time limit can stop (issue 46) -----------------------------

# A long text and a long one that almost matches it at every position: what makes a function that compares its
# second argument at every position of its first (instr, replace, LIKE, GLOB, trim) cost their lengths multiplied
# (instr of these took 20.7 s in one step: a request's statement runs in a worker, killed past its time). Each
# pattern form: plain, after a
# wildcard, after a one-character wildcard (LIKE's and GLOB's), and a set of characters (trim's).
LONG_TEXT = "printf('%.*c', 4000000, 'a')"
LONG_PATTERNS = ("printf('%.*c', 100000, 'a') || 'b'", "'%' || printf('%.*c', 100000, 'a') || 'b'",
                 "'*' || printf('%.*c', 100000, 'a') || 'b'", "'_%' || printf('%.*c', 40000, 'a') || 'b'",
                 "'*?' || printf('%.*c', 40000, 'a') || 'b'", "printf('%.*c', 100000, 'a') || 'bcdefgh'")


def both_long(functions: dict[str, list[tuple[str, int]]], fts: tuple[str, str]) -> list[tuple[str, str]]:
    """(function, SQL): each function of two or more arguments with the long text and a long pattern in its first
    two positions, both ways round (the operators LIKE and GLOB as written too)."""
    cases = []
    for name in sorted(set(functions) - set(SKIPPED) - set(IN_FULL_TEXT_QUERY)):
        for kind, count in arities(name, functions[name]):
            if count < 2:
                continue
            for pattern in LONG_PATTERNS:
                for first, second in ((LONG_TEXT, pattern), (pattern, LONG_TEXT)):
                    args = [first, second] + ["'x'"] * (count - 2)
                    cases.append((name, call(name, kind, args, fts)))
    for operator in ("like", "glob"):
        cases += [(operator, f"select ({LONG_TEXT}) {operator} ({pattern})") for pattern in LONG_PATTERNS]
    return cases


COSTLY = ("instr", "replace", "like", "glob", "trim", "ltrim", "rtrim")


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.asyncio
async def test_no_call_with_two_long_arguments_outlasts_the_time_limit_sample(traces_db):
    """Through an anonymous Datasette request: each call of the functions whose cost is the product of their
    arguments' lengths, both arguments long, answers or is refused within the surface's time (its worker is killed
    past the limit: the server's own process does none of the work)."""
    functions = await datasette_functions(traces_db)
    cases = both_long({name: functions[name] for name in COSTLY}, full_text_table(traces_db))
    results = run_cases("datasette", traces_db, [sql for _, sql in cases])
    assert over_budget("datasette", cases, results) == []
    assert any(r["outcome"] == "answered" for r in results) and any("refused" in r["outcome"] for r in results)


@pytest.mark.slow
@pytest.mark.asyncio
async def test_every_reachable_function_with_two_long_arguments_through_datasette(traces_db):
    functions = await datasette_functions(traces_db)
    cases = both_long(functions, full_text_table(traces_db))
    results = run_cases("datasette", traces_db, [sql for _, sql in cases])
    assert over_budget("datasette", cases, results) == []


SAMPLE = ("replace", "hex", "group_concat", "sqlar_uncompress", "json_each")


def sample(functions: dict[str, list[tuple[str, int]]], fts: tuple[str, str]) -> list[tuple[str, str]]:
    """The reported cases, then a few functions with each huge value but the blob in each position."""
    chosen = {name: functions[name] for name in SAMPLE}
    values = tuple(sql for what, sql in HUGE.items() if what != "the longest blob")
    return [("printf", sql) for sql in REPORTED] + generated(chosen, fts, huge=values)


@pytest.mark.slow
def test_huge_arguments_through_tlindex_query_sample(traces_db):
    cases = sample(cli_functions(traces_db), full_text_table(traces_db))
    results = run_cases("cli", traces_db, [sql for _, sql in cases])
    assert over_budget("cli", cases, results) == []
    assert any(r["outcome"].startswith("refused: SQL error: a value would exceed") for r in results)


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.asyncio
async def test_huge_arguments_through_datasette_sample(traces_db):
    cases = sample(await datasette_functions(traces_db), full_text_table(traces_db))
    results = run_cases("datasette", traces_db, [sql for _, sql in cases])
    assert over_budget("datasette", cases, results) == []
    assert any(r["outcome"] == "refused: string or blob too big" for r in results)


@pytest.mark.asyncio
async def test_the_lists_of_exceptions_name_functions_a_user_can_reach(traces_db):
    """SKIPPED, ONE_LONG_STEP and the special forms are checked lists: each names a reachable function."""
    cli_reachable, datasette_reachable = set(cli_functions(traces_db)), set(await datasette_functions(traces_db))
    assert set(SKIPPED) | OPERATORS | set(TABLE_VALUED) | set(IN_FULL_TEXT_QUERY) | set(SAMPLE) <= cli_reachable
    assert set(ONE_LONG_STEP) | set(HELD_MORE) <= cli_reachable | datasette_reachable


@pytest.mark.slow
def test_every_allowed_function_with_huge_arguments_through_tlindex_query(traces_db):
    functions = cli_functions(traces_db)
    cases = generated(functions, full_text_table(traces_db))
    assert {name for name, _ in cases} | set(SKIPPED) == set(functions)
    results = run_cases("cli", traces_db, [sql for _, sql in cases])
    assert over_budget("cli", cases, results) == []


@pytest.mark.slow
@pytest.mark.asyncio
async def test_every_reachable_function_with_huge_arguments_through_datasette(traces_db):
    functions = await datasette_functions(traces_db)
    cases = generated(functions, full_text_table(traces_db))
    assert {name for name, _ in cases} | set(SKIPPED) == set(functions)
    results = run_cases("datasette", traces_db, [sql for _, sql in cases])
    assert over_budget("datasette", cases, results) == []


# --- the ingest stores nothing a connection could not read back --------------------------------------

def envelope(meta: bytes, payload: bytes | None = None) -> bytes:
    """One glog record of a TORCH_TRACE log, with its payload lines (HAND-MADE)."""
    import hashlib

    prefix = b"V1122 15:18:11.933000 12384 torch/_logging/_internal.py:1578] "
    if payload is None:
        return prefix + meta + b"\n"
    digest = hashlib.md5(payload).hexdigest().encode()
    return prefix + meta[:-1] + b', "has_payload": "' + digest + b'"}\n\t' + payload.replace(b"\n", b"\n\t") + b"\n"


def test_values_a_log_widens_past_the_limit_are_cut_or_left_out_and_the_rest_ingests(tmp_path, monkeypatch):
    """At a 64 KiB scale (the same code as at 64 MiB): invalid UTF-8 triples in size as U+FFFD, `1e15` written
    again as JSON is `1000000000000000.0`, and a compile's break reasons join into one text for its print."""
    from conftest import ingest

    import tlindex.ingest.normalize.core as core
    import tlindex.ingest.staging as staging
    import tlindex.store.limits as limits
    from tlindex.store.db import connect_read_only

    record = 64 << 10
    for module, name, value in ((limits, "MAX_VALUE_BYTES", record + (1 << 10)), (staging, "MAX_RECORD_BYTES", record),
                                (core, "MAX_RECORD_BYTES", record)):
        monkeypatch.setattr(module, name, value)
    ids = b'"frame_id": 0, "frame_compile_id": 0, "attempt": 0}'
    artifact = b'{"artifact": {"name": "%s", "encoding": "string"}, ' + ids
    log = [envelope(b'{"dynamo_start": {"stack": []}, ' + ids),
           envelope(artifact % b"invalid", b"\xff" * (40 << 10)),
           envelope(b'{"optimize_ddp_split_graph": {"x": [' + b",".join([b"1e15"] * 6000) + b"]}, " + ids),
           *(envelope(artifact % b"dynamo_graph_break_reason", b"Graph Break Reason: %d " % n + b"r" * (30 << 10))
             for n in range(3)),
           envelope(artifact % b"fine", b"a fine payload")]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "dedicated_log_torch_trace_widened.log").write_bytes(b"".join(log))

    summary = ingest(tmp_path / "traces.db", [str(tmp_path / "logs")], jobs=1)
    assert not summary.problems
    conn = connect_read_only(tmp_path / "traces.db")
    assert limit_of(conn) == record + (1 << 10)
    texts = {kind: (metadata, text) for kind, metadata, text in conn.execute(
        "select e.kind || coalesce('/' || e.name, ''), e.metadata, p.text "
        "from envelopes e left join payloads p on p.hash = e.payload")}
    assert texts["artifact/fine"][1] == "a fine payload"
    assert len(texts["artifact/invalid"][1].encode()) == record - record % 3  # cut between two U+FFFD
    assert texts["optimize_ddp_split_graph"][0] is None
    assert conn.execute("select content_print from compiles").fetchall() == [(None,)]
    (note,) = conn.execute("select message from ingest_errors where kind = 'invalid_utf8'").fetchone()
    assert "cut to its first" in note
    conn.execute("select * from envelopes").fetchall()  # every row reads whole


@pytest.mark.asyncio
async def test_a_page_over_its_time_is_stopped_and_says_so(traces_db):
    """A page's data is read within the plugin's `page_time_limit_s`: past it, its statement is interrupted (the
    request's thread is free again) and the page answers 503 saying so; Datasette's own SQL has its time limit."""
    datasette = Datasette([str(traces_db)], metadata={"plugins": {"tlindex": {"page_time_limit_s": 0}}})
    await datasette.invoke_startup()
    response = await datasette.client.get("/traces/-/tlindex/graph-breaks")  # (one statement over every run)
    assert response.status_code == 503 and "took longer than 0 s" in response.text
    fine = Datasette([str(traces_db)])
    await fine.invoke_startup()
    assert (await fine.client.get("/traces/-/tlindex/graph-breaks")).status_code == 200
