"""Safe to share (issue 48): secrets a command line carries are never stored, and a report leaves out where and by
whom a run was made unless asked.

One secret of each shape, and words that look like them but must survive, are planted in a real `tlindex run` (its
command copies a real fixture log into $TORCH_TRACE, so it needs no torch); then every surface is searched for the
secrets: every table and column of the database (and its file's bytes), every page of the route table with its JSON
twin, Datasette's own pages of every table and canned query (HTML, JSON, CSV), every file of a report, and every
command of the click registry (their output and every file they write). The cases come from the registries
(tlindex.pages.PAGES, sqlite_master, queries/, tests/test_odd_values.RECIPES), so a new surface is covered the day
it lands.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import chdir
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner
from conftest import DATA
from crawl import route_seeds
from test_odd_values import RECIPES, Case

from tlindex import pages
from tlindex.cli import cli
from tlindex.ingest.runs import normalize_label
from tlindex.run import stored_command
from tlindex.store.redact import LINE_CHARS, WORD_CHARS, redact_text, redact_words, secret_name

SECRET = "S3CRET"  # every planted secret holds it; nothing tlindex shows may
PLANTED = ["--token=S3CRETa", "--api-key", "S3CRETb", "https://bob:S3CRETc@example.org/x", "HF_TOKEN=S3CRETd"]
REDACTED = ["--token=***", "--api-key", "***", "https://bob:***@example.org/x", "HF_TOKEN=***"]
SURVIVE = ["--max-tokens", "4096", "--keep-alive", "https://example.org/plain", "MAX_TOKENS=4096"]
CWD, HOST, USER = "cwd-Qz7", "host-Qz7", "user-Qz7"  # the run facts, recognisable wherever they show
LOG = next((DATA / "graph_breaks").glob("*.log"))
COPY = 'cp "$0" "$TORCH_TRACE/x.log"'


@pytest.mark.parametrize("words, expected", [
    (["--token=V"], ["--token=***"]),
    (["--api-key", "V"], ["--api-key", "***"]),
    (["--apiKey", "V", "--Session-Id=V", "--db-password", "V"], ["--apiKey", "***", "--Session-Id=***",
                                                                 "--db-password", "***"]),
    (["https://bob:V@example.org/x", "git+ssh://u:V@h/r", "https://bob:p@ss@h/x"],
     ["https://bob:***@example.org/x", "git+ssh://u:***@h/r", "https://bob:***@h/x"]),
    (["HF_TOKEN=V", "AWS_SECRET_ACCESS_KEY=V", "cookie=V"], ["HF_TOKEN=***", "AWS_SECRET_ACCESS_KEY=***", "cookie=***"]),
    (["--token", "--verbose"], ["--token", "--verbose"]),  # a flag before another option: nothing to hide
    (["sh", "-c", "export HF_TOKEN=V; run --password V"], ["sh", "-c", "export HF_TOKEN=*** run --password ***"]),
    (SURVIVE + ["--keys-file", "k", "--tokenizer", "t", "monkey=1"], SURVIVE + ["--keys-file", "k", "--tokenizer",
                                                                               "t", "monkey=1"]),
])
def test_each_shape_of_secret_is_redacted_and_lookalikes_survive(words, expected):
    assert redact_words(words) == expected
    assert redact_text(" ".join(words)) == " ".join(expected)
    assert redact_words(expected) == expected  # redacting again changes nothing (the migration may meet either)


def test_a_name_is_split_into_words_at_dashes_underscores_and_case():
    assert [secret_name(n) for n in ("HF_TOKEN", "apiKey", "APIKEY", "x-api-key", "Credentials", "passwd")] == [True] * 6
    assert [secret_name(n) for n in ("MAX_TOKENS", "keep-alive", "monkey", "tokenizer", "keys")] == [False] * 5


def test_bad_input_is_stored_bounded_and_never_fails_the_run():
    undecodable = b"caf\xe9-\xff".decode("utf-8", "surrogateescape")  # what argv holds for bytes not UTF-8
    words = ["prog", "a\x1b]0;x\x07\nb", undecodable, "x" * 5_000_000, *["--token=S3CRETx"] * 100_000]
    stored = redact_words(words)
    assert sum(map(len, stored)) < LINE_CHARS + WORD_CHARS + 100 and stored[-1].startswith("…(")
    assert stored[1] == "a\x1b]0;x\x07\nb"  # kept as the other names are; every output escapes it
    assert stored[2] == "caf\\xe9-\\xff" and SECRET not in json.dumps(stored)
    sqlite3.connect(":memory:").execute("SELECT ?", (json.dumps(stored),))  # storable
    with mock.patch("tlindex.run.redact_words", side_effect=RuntimeError("a bug")):
        assert stored_command(["/usr/bin/python3", "--token=S3CRETx"]) == ["python3"]  # the program, never a secret
    assert stored_command(["/usr/bin/python3", "train.py", "--token=S3CRETx"], program_only=True) == ["python3"]


def _tlindex_run(db: Path, cwd: Path, *options: str, env: dict | None = None):
    """A real `tlindex run` of a command carrying the planted secrets, in `cwd`, on a host and by a user of
    recognisable names (the run facts `tlindex run` keeps)."""
    cwd.mkdir(parents=True, exist_ok=True)
    args = ["run", "--db", str(db), *options, "--", "sh", "-c", COPY, str(LOG), *PLANTED, *SURVIVE]
    with mock.patch("socket.gethostname", return_value=HOST), mock.patch("getpass.getuser", return_value=USER), \
            chdir(cwd):
        return CliRunner().invoke(cli, args, env=env)


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, str]:
    """A database whose run 1 was made by `tlindex run` with the secrets on its command line (run 2: logs ingested);
    and what the run printed."""
    tmp = tmp_path_factory.mktemp("planted")
    db = tmp / "db" / "share.db"
    db.parent.mkdir()
    result = _tlindex_run(db, tmp / CWD)
    assert result.exit_code == 0, result.output
    ingested = CliRunner().invoke(cli, ["ingest", str(DATA / "dynamic"), "--db", str(db), "--silent"])
    assert ingested.exit_code == 0, ingested.output
    return db, result.output


def _leaks(text: str | bytes) -> bool:
    return (SECRET.encode() if isinstance(text, bytes) else SECRET) in text


def test_the_run_prints_and_keeps_its_command_redacted_and_its_facts(planted):
    db, printed = planted
    assert not _leaks(printed) and "--token=***" in printed
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).stdout)
    run = next(run for run in listed if run["id"] == 1)
    ran = run["ran"]
    assert ran["command"] == ["sh", "-c", COPY, str(LOG), *REDACTED, *SURVIVE]
    # the default label is the redacted command's first 200 characters (the fixture's path is as long as the checkout's)
    assert run["label"] == normalize_label(" ".join(ran["command"])[:200]) and not _leaks(run["label"])
    assert "HF_TOKEN=*** --max-tokens 4096" in " ".join(ran["command"])
    assert (ran["exit_code"], Path(ran["cwd"]).name, ran["host"], ran["user"]) == (0, CWD, HOST, USER)
    assert ran["duration_s"] is not None and ran["ended"] == "exit 0"


def test_no_column_of_any_table_holds_a_secret(planted):
    from conftest import connect

    db, _ = planted
    conn = connect(db)  # (the payload index reads the payloads view: the sqlar functions)
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert "runs" in tables and len(tables) > 20
    found = [(table, value) for table in tables for row in conn.execute(f'SELECT * FROM "{table}"')
             for value in row if isinstance(value, (str, bytes)) and _leaks(value)]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert found == []
    assert not _leaks(db.read_bytes())  # nor a page of the file: it was never written


def _datasette_urls(conn: sqlite3.Connection, base: str) -> list[str]:
    """Every page of the route table (a few of each, from the database's own values) with its JSON twin, and
    Datasette's own pages of every table and view, canned query and `?sql=`, as HTML, JSON and CSV."""
    from tlindex.answers.queries import load_queries

    urls = ["/", base, base + pages.path("runs"), base + pages.path("runs") + ".json"]
    for url in route_seeds(conn, base):
        urls.append(url)
        found = pages.match(url.split("?")[0][len(base):])
        if found and found[0].json_twin:
            path, _, query = url.partition("?")
            urls.append(path + ".json" + (f"?{query}" if query else ""))
    names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    queries = [f"{name}?run=1" if "run" in dict(q.params) else name for name, q in load_queries().items()]
    for name in [*names, *queries, "?sql=select+*+from+runs"]:
        path, _, query = name.partition("?")
        for suffix in ("", ".json", ".csv"):
            urls.append(f"{base}/{path}{suffix}" + (f"?{query}" if query else "") if path
                        else f"{base}{suffix}?{query}")
    return urls


@pytest.mark.asyncio
async def test_no_served_page_shows_a_secret(planted):
    from datasette.app import Datasette

    db, _ = planted
    conn = sqlite3.connect(db)
    urls = _datasette_urls(conn, "/share")
    conn.close()
    datasette = Datasette([str(db)])
    await datasette.invoke_startup()
    answered, leaks, facts = 0, [], 0
    for url in urls:
        response = await datasette.client.get(url)
        answered += response.status_code == 200
        if _leaks(response.text):
            leaks.append(url)
        facts += HOST in response.text  # the database's owner sees the run facts
    assert leaks == []
    assert answered > len(urls) * 0.8 and facts >= 4  # the run page, its twin, runs.json, runs.csv, ...


def _files_leaking(folder: Path, *words: str) -> list[tuple[str, str]]:
    return [(str(path.relative_to(folder)), word) for path in sorted(folder.rglob("*")) if path.is_file()
            for word in words if word.encode() in path.read_bytes()]


def test_a_report_shows_no_secret_and_leaves_the_run_facts_out_unless_asked(planted, tmp_path):
    db, _ = planted
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(out), "--silent", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert len(list(out.rglob("*.html"))) > 20
    assert _files_leaking(out, SECRET, CWD, HOST, USER) == []
    page = (out / "run-1" / "index.html").read_text()
    assert "left out of this report" in page and "--with-run-facts" in page
    assert "--token=***" in page  # the label (the command line, redacted) stays
    facts = tmp_path / "with-facts"
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(facts), "--silent", "-j", "2",
                                      "--with-run-facts"])
    assert result.exit_code == 0, result.output
    assert _files_leaking(facts, SECRET) == []
    page = (facts / "run-1" / "index.html").read_text()
    assert CWD in page and f"{USER}@{HOST}" in page and "--api-key &#39;***&#39;" in page
    assert "left out of this report" not in page


def test_no_command_prints_or_writes_a_secret(planted, tmp_path):
    """Every command of the click registry (tests/test_odd_values.RECIPES: runs, findings, trend and its gate, show of
    every page, diff, query of every canned query, search, export, report, ...): its output and every file it writes."""
    db, _ = planted
    copy = tmp_path / "share.db"
    shutil.copy(db, copy)
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(LOG, logs / LOG.name)
    written = tmp_path / "written"
    written.mkdir()
    case = Case(logs, copy, written, ["2", "1"])  # `label` renames the first, `rm` removes the last: run 1 at the end
    leaks, ran = [], 0
    for command, recipe in RECIPES.items():
        for args in recipe(case):
            result = CliRunner().invoke(cli, [*command, *args])
            ran += 1
            if _leaks(result.stdout) or _leaks(result.stderr):
                leaks.append((command, args))
    assert leaks == [] and ran > 50
    assert _files_leaking(written, SECRET) == []


def test_no_command_keeps_only_the_program(tmp_path):
    for options, env in (["--no-command"], None), ([], {"TLINDEX_NO_COMMAND": "1"}):
        db = tmp_path / f"{len(options)}.db"
        result = _tlindex_run(db, tmp_path / "cwd", *options, env=env)
        assert result.exit_code == 0, result.output
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT command, label FROM runs").fetchall() == [('["sh"]', "sh")]
        conn.close()
        assert not _leaks(result.output) and not _leaks(db.read_bytes())
    # a label typed is redacted the same way (tlindex label, --label, ingest --run)
    result = CliRunner().invoke(cli, ["label", "1", "nightly HF_TOKEN=S3CRETe", "--db", str(tmp_path / "0.db")])
    assert result.exit_code == 0, result.output
    assert sqlite3.connect(tmp_path / "0.db").execute("SELECT label FROM runs").fetchone() == ("nightly HF_TOKEN=***",)


def test_a_database_written_before_redaction_is_redacted_once_and_says_so(planted, tmp_path):
    """What an older tlindex stored (its command line and label, secrets and all), redacted by the migration the
    first time a command writes to the database; it says how many it changed, once; two labels that become one
    are told apart by their ids."""
    db = tmp_path / "old.db"
    shutil.copy(planted[0], db)
    conn = sqlite3.connect(db)
    command = json.dumps(["python", "train.py", *PLANTED, *SURVIVE])
    conn.execute("UPDATE runs SET command = ?, label = ? WHERE id = 1", (command, "python train.py --token=S3CRETa"))
    conn.execute("UPDATE runs SET label = 'python train.py --token=S3CRETf' WHERE id = 2")
    migration = conn.execute("SELECT name FROM _tlindex_migrations WHERE name LIKE '%redacted_secrets'").fetchone()[0]
    conn.execute("DELETE FROM _tlindex_migrations WHERE name = ?", (migration,))
    conn.commit()
    conn.close()
    first = CliRunner().invoke(cli, ["ingest", str(DATA / "dynamic"), "--db", str(db), "--silent"])
    assert first.exit_code == 0, first.output
    assert "secrets redacted from 1 stored command line and 2 labels" in first.stderr
    again = CliRunner().invoke(cli, ["ingest", str(DATA / "dynamic"), "--db", str(db), "--silent"])
    assert "redacted" not in again.stderr
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT id, label, command FROM runs ORDER BY id").fetchall()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert rows[0][1:] == ("python train.py --token=*** (run 1)", json.dumps(["python", "train.py", *REDACTED,
                                                                               *SURVIVE]))
    assert rows[1][1] == "python train.py --token=***"  # the last of those that met takes the name
    assert not _leaks(db.read_bytes())


def test_a_hostile_command_line_is_stored_bounded_and_the_run_keeps_its_exit_code(tmp_path):
    """Control characters, undecodable bytes and a 100 KB argument on the command line of a real run: the run is
    ingested, its exit code is the command's, the stored line is bounded and every line printed is escaped."""
    db = tmp_path / "t.db"
    undecodable = b"\xff\xfe".decode("utf-8", "surrogateescape")
    args = ["run", "--db", str(db), "--", "sh", "-c", COPY + "; exit 3", str(LOG), undecodable, "a\x1b[31m\nb",
            "x" * 100_000, "--password", "S3CRETg"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 3, result.output
    (command, label), = sqlite3.connect(db).execute("SELECT command, label FROM runs").fetchall()
    words = json.loads(command)
    assert words[4:6] == ["\\xff\\xfe", "a\x1b[31m\nb"] and len(words[6]) < WORD_CHARS + 50
    assert words[-2:] == ["--password", "***"] and len(label) <= 200
    listed = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert "\x1b" not in listed.output and "^[[31m⏎ b" in listed.output and not _leaks(listed.output)
