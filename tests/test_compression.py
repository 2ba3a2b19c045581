"""Payloads stored compressed (payload_data) and read as text through the payloads view: by tlindex,
by Datasette, by the plain sqlite3 shell, and after upgrading a database written before."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess

import pytest
from conftest import connect, raw_envelopes, scenario_logs
from datasette.app import Datasette

from tlindex.store.compression import pack, sqlar_uncompress
from tlindex.store.db import apply_schema
from tlindex.store.resources import schema_files

SQLITE3 = shutil.which("sqlite3")


def test_every_payload_reads_back_as_its_text_and_is_stored_smaller(fixtures_db):
    conn = connect(fixtures_db)
    stored = texts = 0
    for hash_, size, text, data, text_size in conn.execute(
            "SELECT p.hash, p.size, p.text, d.data, d.text_size FROM payloads p JOIN payload_data d ON d.hash = p.hash"):
        raw = text.encode()
        assert len(raw) == text_size
        if "\ufffd" not in text:  # replaced invalid UTF-8 keeps the md5 of the original bytes
            assert hashlib.md5(raw).hexdigest() == hash_ and size == len(raw)
        stored, texts = stored + len(data), texts + len(raw)
    assert stored < 0.4 * texts  # FX graphs, code and JSON compress about 4x


def test_tiny_payloads_are_kept_as_they_are():
    size, data = pack("{}")
    assert (size, data) == (2, b"{}") and sqlar_uncompress(data, size) == b"{}"
    size, data = pack("x = 1\n" * 100)
    assert len(data) < size and sqlar_uncompress(data, size) == ("x = 1\n" * 100).encode()


@pytest.mark.skipif(not SQLITE3 and not os.environ.get("CI"), reason="no sqlite3 shell (apt-get install sqlite3)")
def test_the_plain_sqlite3_shell_reads_the_payloads_view(fixtures_db):
    assert SQLITE3, ".ci/run installs the sqlite3 shell"
    conn = connect(fixtures_db)
    sample = conn.execute("SELECT hash, text FROM payloads WHERE length(text) > 2000 ORDER BY hash LIMIT 5").fetchall()
    for hash_, text in sample:
        shown = subprocess.run([SQLITE3, "-readonly", str(fixtures_db), f"SELECT text FROM payloads WHERE hash = '{hash_}'"],
                               capture_output=True, text=True, check=True).stdout
        assert shown == text + "\n"


def test_a_database_written_before_compression_is_upgraded_in_place(tmp_path):
    """Migrations 001-003 and rows as an older tlindex wrote them; opening it compresses them."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE _tlindex_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
    for file in [f for f in schema_files() if f.stem < "004"]:
        conn.executescript(file.read_text())
        conn.execute("INSERT INTO _tlindex_migrations VALUES (?, '')", (file.stem,))
    payloads = [f"def forward(self, x):\n    return x * {n}\n" * 50 for n in range(3)]
    for text in payloads:
        conn.execute("INSERT INTO payloads (hash, size, text) VALUES (?, ?, ?)",
                     (hashlib.md5(text.encode()).hexdigest(), len(text.encode()), text))
    conn.commit()
    assert apply_schema(conn)[0] == "004_compressed_payloads"
    assert [r[0] for r in conn.execute("SELECT text FROM payloads ORDER BY id")] == payloads
    assert conn.execute("SELECT sum(length(data)) FROM payload_data").fetchone()[0] < sum(map(len, payloads)) / 4
    # the envelopes' foreign key follows the rows
    references = {row[2] for row in conn.execute("PRAGMA foreign_key_list(envelopes)")}
    assert "payload_data" in references and "payloads" not in references
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


@pytest.mark.asyncio
async def test_datasette_shows_payload_text_and_skips_facet_suggestions_on_tlindex_tables(traces_db, tmp_path):
    ds = Datasette([str(traces_db)])
    await ds.invoke_startup()
    (hash_, text) = connect(traces_db).execute(
        "SELECT hash, text FROM payloads WHERE text LIKE '%GraphModule%' LIMIT 1").fetchone()
    rows = (await ds.client.get(f"/traces/payloads.json?hash={hash_}&_shape=array")).json()
    assert rows[0]["text"] == text
    page = (await ds.client.get("/traces/envelopes")).text
    assert "suggested-facets" not in page and "_nosuggest=1" in page  # kept on the page's own links
    picked = (await ds.client.get("/traces/envelopes?_facet=kind")).text
    assert 'data-column="kind"' in picked or "facet-kind" in picked  # facets a user picks still work
    # another database on the same server keeps Datasette's suggestions
    other = tmp_path / "other.db"
    plain = sqlite3.connect(other)
    plain.execute("CREATE TABLE t (kind TEXT)")
    plain.executemany("INSERT INTO t VALUES (?)", [("a",), ("b",)] * 20)
    plain.commit()
    ds2 = Datasette([str(traces_db), str(other)])
    await ds2.invoke_startup()
    assert "suggested-facets" in (await ds2.client.get("/other/t")).text
    ds3 = Datasette([str(traces_db)], metadata={"plugins": {"tlindex": {"suggest_facets": True}}})
    await ds3.invoke_startup()
    assert "_nosuggest" not in (await ds3.client.get("/traces/envelopes")).text


def test_payload_texts_equal_the_raw_logs_payloads(fixtures_db):
    conn = connect(fixtures_db)
    wanted = {}
    for path in scenario_logs("graph_breaks"):
        data = path.read_bytes().split(b"\n")
        for k, line in enumerate(data):
            if b'"has_payload"' in line and not line.startswith(b"\t"):
                payload = []
                for follow in data[k + 1:]:
                    if not follow.startswith(b"\t"):
                        break
                    payload.append(follow[1:])
                body = b"\n".join(payload)
                wanted[hashlib.md5(body).hexdigest()] = body.decode()
    assert len(raw_envelopes(scenario_logs("graph_breaks"))) > len(wanted) > 50
    for hash_, text in wanted.items():
        assert conn.execute("SELECT text FROM payloads WHERE hash = ?", (hash_,)).fetchone()[0] == text
