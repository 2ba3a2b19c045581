"""Shared fixtures: databases built from the real logs in tests/data."""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pytest
import pytest_asyncio

from tlindex.store.db import apply_schema
from tlindex.store.tables import COLUMNS

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))  # tests read the scenario programs of generate.py
# The version matrix: tests/data/versions/<torch version>/<scenario>/ (tests/data/README.md). The tests that describe
# "the fixtures" mean the sample set beside it, tests/data/<scenario>/ (torch 2.13.0), and never look in here.
VERSIONS = DATA / "versions"
SHARED_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "tlparse"
ENVELOPE_RE = re.compile(rb"^(?:\[[^\]]*\]:)?[VIWEC]\d{4} [\d:.]+ +\d+ .+?:\d+\] (\{.*\})\r?$")


def sampled(params: list, every: int, ids=None) -> list:
    """Parameters of a sweep: every `every`-th one in the default run, all of them with the slow ones (CI's
    `-m "slow or not slow"`), so that a quick run still tries each kind and CI tries each one."""
    return [pytest.param(*(value if isinstance(value, tuple) else (value,)),
                         id=None if ids is None else ids(value), marks=() if i % every == 0 else pytest.mark.slow)
            for i, value in enumerate(params)]


def ingest(db_path: Path | str, paths: list[str], *, run_label: str | None = None, **options):
    """Ingest into the database at `db_path` (made if need be) as `tlindex ingest` does: tlindex.Database.ingest."""
    from tlindex import Database

    with Database(db_path, create=True) as db:
        return db.ingest(paths, run_label, **options)


def write_report(db_path: Path | str, out: Path, runs: list[int], overwrite: bool = False, **options):
    """Write the report of `runs` of the database at `db_path` (tlindex.report.write_report on its Database)."""
    from tlindex import Database
    from tlindex.report import write_report as write

    with Database(db_path) as db:
        return write(db.conn, db.path, Path(out), runs, overwrite, **options)


def scenario_logs(name: str) -> list[Path]:
    return sorted((DATA / name).iterdir())


def scenario_dirs(version: str | None = None) -> list[Path]:
    """The scenario folders of the sample set (tests/data/<scenario>/, torch 2.13.0: what the tests describe), or with
    a version those of that torch in the version matrix (tests/data/versions/<version>/<scenario>/)."""
    root = DATA if version is None else VERSIONS / version
    return sorted(folder for folder in root.iterdir() if folder.is_dir() and folder != VERSIONS)


def fixture_paths(version: str | None = None) -> list[str]:
    """scenario_dirs as the PATH arguments of an ingest (`tlindex ingest tests/data` would take versions/ too)."""
    return [str(folder) for folder in scenario_dirs(version)]


def fixture_logs(version: str | None = None) -> list[Path]:
    """The log files of scenario_dirs, as an ingest of them finds them."""
    from tlindex.ingest.discover import discover

    return discover(fixture_paths(version))[0]


def torch_versions() -> list[str]:
    """The torch versions of the version matrix, oldest first."""
    def release(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", version))

    return sorted((folder.name for folder in VERSIONS.iterdir() if folder.is_dir()), key=release) \
        if VERSIONS.is_dir() else []


def raw_envelopes(paths: list[Path]) -> list[dict]:
    """The envelope JSON of every envelope line, parsed independently of tlindex."""
    found = []
    for path in paths:
        with open(path, "rb") as file:
            for line in file:
                if not line.startswith(b"\t"):
                    match = ENVELOPE_RE.match(line.rstrip(b"\n"))
                    if match:
                        found.append(json.loads(match.group(1)))
    return found


def indexes_out_of_step(db_path) -> list[str]:
    """The full-text indexes that do not hold exactly their table's rows (FTS5's check against the content)."""
    from tlindex.ingest.text_index import FTS_COLUMNS, PAYLOAD_INDEX

    conn, wrong = connect(Path(db_path)), []
    for index, table in [(f"{t}_fts", t) for t in FTS_COLUMNS] + [(PAYLOAD_INDEX, "payloads")]:
        try:
            conn.execute(f"INSERT INTO [{index}] ([{index}], rank) VALUES ('integrity-check', 1)")
        except sqlite3.DatabaseError as error:
            wrong.append(f"{index}: {error}")
        if conn.execute(f"SELECT count(*) FROM [{index}_docsize]").fetchone() != \
                conn.execute(f"SELECT count(*) FROM [{table}]").fetchone():
            wrong.append(f"{index}: not one entry per row")
    conn.close()
    return wrong


def connect(path: Path) -> sqlite3.Connection:
    """A connection that reads the payloads view as every tlindex connection does (sqlar functions)."""
    from tlindex.store.compression import register

    conn = register(sqlite3.connect(path))
    conn.row_factory = sqlite3.Row
    _OPENED.append(conn)  # closed when the module ends, if the test did not (below)
    return conn


@pytest.fixture(scope="session")
def fixtures_db(tmp_path_factory) -> Path:
    """Every real fixture of the sample set (tests/data, versions/ aside) ingested once, two files at a time."""
    path = tmp_path_factory.mktemp("db") / "traces.db"
    summary = ingest(path, fixture_paths(), jobs=2)
    assert not summary.problems
    return path


@pytest.fixture(scope="session")
def versions_db(tmp_path_factory) -> Path:
    """Every log of the version matrix (tests/data/versions/<torch version>/) ingested once, two files at a time."""
    path = tmp_path_factory.mktemp("versions") / "versions.db"
    summary = ingest(path, [folder for version in torch_versions() for folder in fixture_paths(version)], jobs=2)
    assert not summary.problems
    return path


@pytest.fixture(scope="session")
def corpus_db(tmp_path_factory) -> Path:
    """tlparse's own test logs (../shared/corpus/tlparse) ingested once; skips where they are absent."""
    if not SHARED_CORPUS.is_dir():
        pytest.skip("../shared/corpus/tlparse is absent")
    path = tmp_path_factory.mktemp("corpus") / "corpus.db"
    summary = ingest(path, [str(SHARED_CORPUS)], jobs=2)
    assert not summary.problems
    return path


@pytest.fixture(scope="session")
def traces_db(fixtures_db, tmp_path_factory) -> Path:
    """A copy of the fixtures database named traces.db (so Datasette serves it at /traces)."""

    return copy_db(fixtures_db, tmp_path_factory.mktemp("served") / "traces.db")


def copy_db(source: Path, path: Path) -> Path:
    """A copy of a database whose writes may still sit in its WAL (checkpointed first)."""
    import shutil

    conn = sqlite3.connect(source)
    conn.execute("PRAGMA wal_checkpoint(FULL)")
    conn.close()
    shutil.copy(source, path)
    return path


@pytest.fixture
def db(fixtures_db) -> sqlite3.Connection:
    conn = connect(fixtures_db)
    yield conn
    conn.close()


def scenario_run(conn: sqlite3.Connection, name: str) -> list[int]:
    """Run ids of the runs whose files come from tests/data/<name>."""
    return [row[0] for row in conn.execute(
        "SELECT DISTINCT s.run_id FROM sources s JOIN files f ON f.id = s.file_id "
        "WHERE f.directory LIKE ? ORDER BY s.run_id", (f"%/{name}",))]


HISTORY = {"runs": ("last_ingest",)}  # which ingest wrote a row (a staging folder's random name): not what it holds


def sqlite_tables(path: Path) -> dict[str, list[dict]]:
    """Every row of every schema table of a database, as dicts (without the HISTORY columns)."""
    conn = connect(path)
    try:
        # payload_data compared by content: a deflater may encode the same text differently (ISA-L does, rarely)
        select = {"payload_data": "SELECT hash, size, text_size, sqlar_uncompress(data, text_size) AS data FROM payload_data"}
        return {table: [{column: value for column, value in dict(row).items() if column not in HISTORY.get(table, ())}
                        for row in conn.execute(select.get(table, f"SELECT * FROM {table}"))]
                for table in [*COLUMNS, "runs"]}
    finally:
        conn.close()


def canonical(tables: dict[str, list[dict]]) -> dict[str, Counter]:
    conn = sqlite3.connect(":memory:")
    try:
        apply_schema(conn)
        references = {t: {r[3]: r[2] for r in conn.execute(f"PRAGMA foreign_key_list({t})")} for t in tables}
    finally:
        conn.close()  # the schema's functions hold the connection: dropped, it would never be freed
    keys: dict[str, dict[int, object]] = {}
    rows = {t: {r["id"]: r for r in tables.get(t, [])} for t in ("files", "runs", "sources", "envelopes", "compiles")}
    keys["files"] = {i: r["path"] for i, r in rows["files"].items()}
    keys["runs"] = {i: r["label"] for i, r in rows["runs"].items()}
    keys["sources"] = {i: (keys["files"][r["file_id"]], r["pid"]) for i, r in rows["sources"].items()}
    keys["envelopes"] = {i: (keys["sources"][r["source_id"]], r["line"]) for i, r in rows["envelopes"].items()}
    keys["compiles"] = {i: (keys["sources"][r["source_id"]], r["generation"], r["compile_id"])
                        for i, r in rows["compiles"].items()}
    result = {}
    for table, table_rows in tables.items():
        canon = Counter()
        for row in table_rows:
            values = []
            for column in sorted(row):
                value = row[column]
                if column == "id":
                    value = keys[table][value] if table in keys else None
                elif column in references[table] and references[table][column] in keys and value is not None:
                    value = keys[references[table][column]][value]
                elif column == "ingested_at":
                    value = None
                values.append((column, value))
            canon[tuple(values)] += 1
        result[table] = canon
    return result


HOSTILE_PAYLOAD = b"<script>alert('x')</script>\n<img src=x onerror=alert(1)>"
HOSTILE_ARTIFACT = (b'{"artifact": {"name": "<script>name</script>", "encoding": "string"}, "frame_id": 0, '
                    b'"frame_compile_id": 0, "attempt": 0')


def stop_at_chunk_fit(monkeypatch, call: int) -> None:
    """Make the ingest stop (KeyboardInterrupt) when it fits a split log's `call`-th chunk, between merges."""
    import tlindex.ingest.chunks

    fit, calls = tlindex.ingest.chunks.fit_chunk, []

    def stopped(*args):
        calls.append(1)
        if len(calls) == call:
            raise KeyboardInterrupt
        return fit(*args)

    monkeypatch.setattr(tlindex.ingest.chunks, "fit_chunk", stopped)


def write_hostile_log(path: Path, records: list[tuple[bytes, bytes]] | None = None) -> Path:
    """Write a HAND-MADE log (not written by torch) whose names are hostile HTML: a string-table path,
    a frame name and source line, then one record per (envelope JSON without its closing has_payload,
    payload) given (by default, an artifact whose name and payload are hostile)."""
    import hashlib

    lines = [b'V1122 09:00:00.000000 7 torch/_logging/structured.py:28] {"str": ["/tmp/<b>evil</b>.py", 0]}',
             b'V1122 09:00:00.100000 7 torch/_dynamo/convert_frame.py:1] {"dynamo_start": {"stack": [{"line": 1, '
             b'"name": "<script>f</script>", "filename": 0, "loc": "x = \\"<script>\\""}]}, "frame_id": 0, '
             b'"frame_compile_id": 0, "attempt": 0}']
    for envelope, payload in records or [(HOSTILE_ARTIFACT, HOSTILE_PAYLOAD)]:
        lines.append(b"V1122 09:00:00.200000 7 torch/_dynamo/guards.py:1] " + envelope + b', "has_payload": "'
                     + hashlib.md5(payload).hexdigest().encode() + b'"}')
        lines += [b"\t" + line for line in payload.split(b"\n")]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


@pytest_asyncio.fixture
async def ds(traces_db):
    """Datasette serving the fixtures database at /traces (a module may define its own `ds`)."""
    from datasette.app import Datasette

    datasette = Datasette([str(traces_db)])
    await datasette.invoke_startup()
    return datasette


def close_datasette(datasette) -> None:
    """Release what a Datasette holds: its connections and the threads that keep them. Datasette's
    threads keep a connection each (a thread-local) whose functions hold the Datasette itself, so an
    instance a test drops is never freed; and SQLite's heap limit is one for the whole process
    (tlindex.store.limits.cap_heap), so a long session of tests ends in "out of memory". The plugin's schema copies
    (datasette_tlindex.reads.schema_of) are closed too: their functions hold them, and Datasette."""
    for _, copy in datasette.__dict__.pop("_tlindex_schemas", {}).values():
        copy.close()
    if hasattr(datasette, "close"):  # Datasette 1.0a
        datasette.close()
        return
    for database in datasette.databases.values():
        database.close()
    if datasette.executor is not None:
        datasette.executor.shutdown(wait=True, cancel_futures=True)


_MADE: list = []  # every Datasette made since the session began and not yet closed
_OPENED: list[sqlite3.Connection] = []  # every connection `connect` opened, likewise: its functions hold it (register)


@pytest.fixture(scope="session", autouse=True)
def _datasettes_are_counted():
    """Each Datasette any test makes, however it made it, is remembered to be closed (below)."""
    from datasette.app import Datasette

    original = Datasette.__init__

    def counted(self, *args, **kwargs):
        original(self, *args, **kwargs)
        _MADE.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Datasette, "__init__", counted)
        yield


@pytest.fixture(scope="module", autouse=True)
def _closed_when_the_module_ends(_datasettes_are_counted):
    """The Datasettes and connections a module made are closed when it ends (its fixtures may share them)."""
    made, opened = len(_MADE), len(_OPENED)
    yield
    for datasette in _MADE[made:]:
        close_datasette(datasette)
    for conn in _OPENED[opened:]:
        conn.close()
    del _MADE[made:], _OPENED[opened:]
