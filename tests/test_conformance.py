"""Conformance with the real logs tlparse is tested on (../shared/corpus/tlparse, when present)."""

from __future__ import annotations

import pytest
from conftest import SHARED_CORPUS, connect, ingest

from tlindex.ingest.discover import discover

pytestmark = pytest.mark.skipif(not SHARED_CORPUS.is_dir(), reason="../shared/corpus/tlparse is absent")


def test_no_line_of_the_corpus_is_lost(corpus_db):
    conn = connect(corpus_db)
    files, _ = discover([str(SHARED_CORPUS)])
    ingested = {row["path"]: row for row in conn.execute("SELECT * FROM files")}
    assert set(ingested) == {str(path) for path in files}  # byte-identical copies too, each its own file
    for path in files:
        data = path.read_bytes()
        row = ingested[str(path)]
        (lines, nbytes) = conn.execute(
            "SELECT coalesce(sum(1 + payload_lines), 0), coalesce(sum(envelope_bytes + payload_bytes), 0) "
            "FROM envelopes e JOIN sources s ON s.id = e.source_id WHERE s.file_id = ?", (row["id"],)).fetchone()
        (error_lines, error_bytes) = conn.execute(
            "SELECT coalesce(sum(lines), 0), coalesce(sum(bytes), 0) FROM ingest_errors "
            "WHERE file_id = ? AND bytes > 0", (row["id"],)).fetchone()
        assert nbytes + error_bytes == len(data), path.name
        assert lines + error_lines == len(data.splitlines()), path.name


def test_corpus_defects_are_reported_where_they_are(corpus_db):
    conn = connect(corpus_db)
    errors = {(r["name"], r["kind"], r["line"]) for r in conn.execute(
        "SELECT f.name, e.kind, e.line FROM ingest_errors e JOIN files f ON f.id = e.file_id")}
    # simple_corrupted_json.log is simple.log with one chromium payload damaged (its README says so)
    damaged = [e for e in errors if e[0] == "simple_corrupted_json.log"]
    assert [e[1] for e in damaged] == ["md5_mismatch"]
    line = damaged[0][2]
    source = (SHARED_CORPUS / "simple_corrupted_json.log").read_bytes().splitlines()[line - 1]
    assert b'"chromium_event"' in source
    assert not [e for e in errors if e[0] == "simple.log"]


def test_crlf_rank_log_verifies_every_md5(corpus_db):
    conn = connect(corpus_db)
    row = conn.execute(
        "SELECT count(*), sum(md5_ok) FROM envelopes e JOIN sources s ON s.id = e.source_id JOIN files f "
        "ON f.id = s.file_id WHERE f.name = 'dedicated_log_torch_trace_rank_1.log' AND e.payload IS NOT NULL"
    ).fetchone()
    assert row[0] > 0 and row[0] == row[1]


def test_older_dynamo_guards_lists_keep_code_and_stacks(corpus_db):
    conn = connect(corpus_db)
    rows = conn.execute("SELECT g.text, g.envelope_id FROM guards g JOIN envelopes e ON e.id = g.envelope_id "
                        "WHERE g.origin = 'dynamo_guards'").fetchall()
    assert any(r["text"] == "utils_device.CURRENT_DEVICE == None" for r in rows)
    stacks = conn.execute("SELECT count(*) FROM frames WHERE stack LIKE 'guards[%].stack'").fetchone()[0]
    assert stacks > 0


@pytest.mark.parametrize("name", ["inductor_provenance_jit_log.txt", "inductor_provenance_aot_log.txt",
                                  "inductor_provenance_extended_log.txt"])
def test_provenance_finds_every_node_and_kernel_of_tlparse_provenance_logs(tmp_path, name):
    """JIT (Python wrapper), AOTInductor CPU and CUDA (C++ wrapper, Triton kernels run by call_<name>)."""
    import json
    import re

    from tlindex.answers.provenance import provenance_data

    db_path = tmp_path / "t.db"
    ingest(db_path, [str(SHARED_CORPUS / name)], jobs=1)
    conn = connect(db_path)
    (artifact,) = conn.execute("SELECT id FROM artifacts WHERE name = 'inductor_provenance_tracking_node_mappings' "
                               "AND payload IS NOT NULL").fetchone()
    data = provenance_data(conn, artifact)
    mapping = json.loads(data["mapping"]["text"])
    pre, post, code = (pane["lines"] for pane in data["panes"])
    assert pre and post and code
    node = lambda lines, n: re.split(r"[=:]", lines[n - 1].strip(), maxsplit=1)[0].strip()  # noqa: E731
    assert {node(pre, n) for n in data["links"]["pre"]} == set(mapping["preToPost"])
    assert {node(post, n) for n in data["links"]["post"]} == set(mapping["postToPre"]) | set(mapping["postToCppCode"])
    kernels = mapping["cppCodeToPost"]
    for kernel in kernels:
        assert any(kernel + "(" in code[n - 1] for n in data["links"]["code"]), kernel
