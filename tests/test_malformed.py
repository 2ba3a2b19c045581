"""Malformed input: each defect lands in ingest_errors with its place, and the rest lands.

The inputs here are HAND-MADE: a real fixture log (tests/data/export) cut and
damaged on purpose by each test. They are not logs torch wrote.
"""

from __future__ import annotations

import gzip
import hashlib
import os

import pytest
from conftest import connect, ingest, scenario_logs

REAL = scenario_logs("export")[0]


def records(log=REAL) -> list[list[bytes]]:
    """The real log as records: an envelope line followed by its payload lines."""
    groups: list[list[bytes]] = []
    with open(log, "rb") as file:
        for line in file:
            if line.startswith(b"\t"):
                groups[-1].append(line)
            else:
                groups.append([line])
    return groups


def first_with_payload(groups: list[list[bytes]], min_lines: int = 3) -> int:
    return next(i for i, g in enumerate(groups) if len(g) >= min_lines and i > 2)


def write(tmp_path, name: str, groups: list[list[bytes]]) -> str:
    path = tmp_path / name
    path.write_bytes(b"".join(line for group in groups for line in group))
    return str(path)


def line_of(groups: list[list[bytes]], index: int) -> int:
    return 1 + sum(len(g) for g in groups[:index])


def ingest_one(tmp_path, path: str):
    db_path = tmp_path / "t.db"
    summary = ingest(db_path, [path], jobs=1)
    conn = connect(db_path)
    errors = [dict(r) for r in conn.execute("SELECT * FROM ingest_errors ORDER BY line")]
    return summary, conn, errors


def total_envelopes(groups) -> int:
    return len(groups)


def test_bad_json_is_an_error_with_its_line_and_the_rest_lands(tmp_path):
    groups = records()
    broken = 5
    groups[broken] = [groups[broken][0].replace(b"{", b"{{", 1)] + groups[broken][1:]
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "bad_json.log", groups))
    bad = [e for e in errors if e["kind"] == "bad_json"]
    assert len(bad) == 1 and bad[0]["line"] == line_of(groups, broken)
    assert bad[0]["bytes"] == len(groups[broken][0]) and bad[0]["excerpt"].startswith("V")
    envelopes = conn.execute("SELECT count(*) FROM envelopes").fetchone()[0]
    assert envelopes == len(groups) - 1
    if len(groups[broken]) > 1:  # its payload lines then have no record
        assert any(e["kind"] == "orphan_payload" for e in errors)


def test_bad_md5_keeps_the_payload_as_read(tmp_path):
    groups = records()
    index = first_with_payload(groups)
    payload_line = groups[index][1]
    groups[index][1] = payload_line[:-1] + b" tampered\n"
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "bad_md5.log", groups))
    assert [(e["kind"], e["line"]) for e in errors] == [("md5_mismatch", line_of(groups, index))]
    row = conn.execute("SELECT md5_ok, p.text FROM envelopes e JOIN payloads p ON p.hash = e.payload "
                       "WHERE e.line = ?", (line_of(groups, index),)).fetchone()
    assert row[0] == 0 and "tampered" in row[1]


def test_truncated_payload_in_the_middle_is_an_md5_mismatch(tmp_path):
    groups = records()
    index = first_with_payload(groups)
    groups[index] = groups[index][:2]
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "truncated.log", groups))
    assert [e["kind"] for e in errors] == ["md5_mismatch"]
    assert conn.execute("SELECT count(*) FROM envelopes").fetchone()[0] == len(groups)


def test_log_cut_off_mid_line_at_the_end(tmp_path):
    groups = records()
    groups = groups[:12]
    groups.append([b'V1122 08:45:49.000000 1 torch/_dynamo/utils.py:1] {"chromium_event": {}, "fra'])
    path = write(tmp_path, "cut.log", groups)
    summary, conn, errors = ingest_one(tmp_path, path)
    assert [(e["kind"], e["line"]) for e in errors] == [("incomplete_record", line_of(groups, 12))]
    (consumed,) = conn.execute("SELECT bytes_ingested FROM files").fetchone()
    assert consumed == os.path.getsize(path) - len(groups[-1][0])


def test_non_utf8_bytes_are_indexed_and_reported(tmp_path):
    groups = records()
    index = first_with_payload(groups)
    groups[index][1] = groups[index][1][:-1] + b"\xff\xfe\n"   # payload bytes (md5 fails too)
    groups[2] = [groups[2][0].replace(b'": ', b'": \xff', 1)] + groups[2][1:]  # inside the envelope JSON
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "latin.log", groups))
    kinds = sorted(e["kind"] for e in errors)
    assert "invalid_utf8" in kinds and "md5_mismatch" in kinds
    assert conn.execute("SELECT count(*) FROM envelopes").fetchone()[0] >= len(groups) - 1


def test_crlf_line_endings_verify_md5(tmp_path):
    groups = [[line[:-1] + b"\r\n" for line in g] for g in records()]
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "crlf.log", groups))
    assert errors == []
    assert conn.execute("SELECT count(*) FROM envelopes WHERE md5_ok = 1").fetchone()[0] == \
        sum(len(g) > 1 for g in groups)


def test_tabs_inside_payload_lines_are_kept(tmp_path):
    """Only each payload line's first TAB is the format's: TABs after it (and a TAB-only line) are the payload's."""
    payload = b"\tindented\n\n\t\n\tcol1\tcol2\t\nend"
    digest = hashlib.md5(payload).hexdigest().encode()
    record = [b'V1122 08:45:49.000000 1 torch/_dynamo/utils.py:1] {"artifact": {"name": "t", "encoding": "string"}, '
              b'"has_payload": "' + digest + b'"}\n'] + [b"\t" + line + b"\n" for line in payload.split(b"\n")]
    groups = records()[:3] + [record] + records()[3:6]
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "tabs.log", groups))
    assert errors == []
    row = conn.execute("SELECT e.md5_ok, p.text FROM envelopes e JOIN payloads p ON p.hash = e.payload "
                       "WHERE e.line = ?", (line_of(groups, 3),)).fetchone()
    assert tuple(row) == (1, payload.decode())


def test_launcher_prefix_and_blank_lines(tmp_path):
    groups = [[b"[rank0]:" + line for line in g] for g in records()]
    groups.insert(4, [b"\n"])
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "prefixed.log", groups))
    assert [(e["kind"], e["line"]) for e in errors] == [("blank_line", line_of(groups, 4))]
    assert conn.execute("SELECT count(*) FROM envelopes WHERE md5_ok = 0").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM envelopes").fetchone()[0] == len(groups) - 1


def test_a_line_that_is_no_record(tmp_path):
    groups = records()
    groups.insert(3, [b"Traceback (most recent call last):\n"])
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "noise.log", groups))
    assert [(e["kind"], e["line"]) for e in errors] == [("bad_prefix", line_of(groups, 3))]


def test_interleaved_processes_become_one_source_each(tmp_path):
    groups = records()
    pid = groups[0][0].split(b" ")[2]
    other = [[g[0].replace(b" " + pid + b" ", b" 99999 ", 1)] + g[1:] for g in groups]
    mixed = [group for pair in zip(groups, other) for group in pair]
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "interleaved.log", mixed))
    assert errors == []
    sources = conn.execute("SELECT pid, envelope_count FROM sources ORDER BY pid").fetchall()
    assert [tuple(s) for s in sources] == [(int(pid), len(groups)), (99999, len(groups))]
    # each process resolves frame file names through its own string table
    assert conn.execute("SELECT count(*) FROM frames WHERE filename IS NULL").fetchone()[0] == 0


def test_gzip_input_gives_the_same_rows(tmp_path):
    path = tmp_path / "export.log.gz"
    path.write_bytes(gzip.compress(REAL.read_bytes()))
    _, conn, errors = ingest_one(tmp_path, str(path))
    assert errors == []
    assert conn.execute("SELECT count(*) FROM envelopes").fetchone()[0] == len(records())
    assert conn.execute("SELECT compressed, bytes_ingested FROM files").fetchone()[:] == (1, REAL.stat().st_size)


@pytest.mark.parametrize("name", ["empty.log"])
def test_empty_file(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"")
    summary, conn, errors = ingest_one(tmp_path, str(path))
    assert summary.files == 1 and errors == []
    assert conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 0


def test_string_table_is_per_process_not_per_file(tmp_path):
    """Like draft_export's second file: one process, two files, strings defined in the first."""
    groups = records()
    split = next(i for i, g in enumerate(groups) if b'"str"' not in g[0] and i > 10)
    first, second = groups[:split], groups[split:]
    assert any(b'"str"' in g[0] for g in first) and any(b'"filename"' in g[0] for g in second)
    trace = tmp_path / "trace"
    trace.mkdir()
    write(trace, "dedicated_log_torch_trace_aaaa.log", first)
    write(trace, "dedicated_log_torch_trace_bbbb.log", second)
    db_path = tmp_path / "t.db"
    ingest(db_path, [str(trace)], jobs=2)
    conn = connect(db_path)
    assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    resolved = conn.execute(
        "SELECT count(*), count(fr.filename) FROM frames fr JOIN envelopes e ON e.id = fr.envelope_id "
        "JOIN sources s ON s.id = e.source_id JOIN files f ON f.id = s.file_id "
        "WHERE f.name = 'dedicated_log_torch_trace_bbbb.log'").fetchone()
    assert resolved[0] > 0 and resolved[0] == resolved[1]


@pytest.mark.parametrize("block", [7, 64, 1000, 4096])
def test_records_split_across_read_blocks_are_read_whole(tmp_path, monkeypatch, block):
    """The reader splits its input in blocks; a record may straddle any block boundary."""
    import tlindex.ingest.reader

    monkeypatch.setattr(tlindex.ingest.reader, "READ_BLOCK", block)
    summary, conn, errors = ingest_one(tmp_path, str(REAL))
    assert errors == []
    assert conn.execute("SELECT count(*), sum(md5_ok) FROM envelopes").fetchone()[0] == len(records())
    assert conn.execute("SELECT count(*) FROM envelopes WHERE md5_ok = 0").fetchone()[0] == 0


def test_a_bare_carriage_return_between_records_cuts_nothing(tmp_path):
    groups = records()
    at = len(groups) // 2
    noisy = groups[:at] + [[b"progress 10%\rprogress 50%\n"]] + groups[at:]
    summary, conn, errors = ingest_one(tmp_path, write(tmp_path, "noisy.log", noisy))
    assert conn.execute("SELECT count(*) FROM envelopes").fetchone()[0] == len(groups)
    assert [(e["kind"], e["line"], e["lines"]) for e in errors] == [("bad_prefix", line_of(noisy, at), 1)]
    last = groups[-1]
    assert conn.execute("SELECT max(line) FROM envelopes").fetchone()[0] == line_of(noisy, len(noisy) - 1)
    assert len(last) >= 1 and summary.files == 1


def test_a_bare_carriage_return_inside_a_payload_line_keeps_line_numbers(tmp_path):
    groups = records()
    index = first_with_payload(groups)
    damaged = [list(g) for g in groups]
    damaged[index][1] = damaged[index][1].replace(b"\n", b"\rmore\n")  # md5 no longer matches
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "cr.log", damaged))
    assert [(e["kind"], e["line"]) for e in errors] == [("md5_mismatch", line_of(groups, index))]
    lines = [r[0] for r in conn.execute("SELECT line FROM envelopes ORDER BY line")]
    assert lines == [line_of(groups, i) for i in range(len(groups))]


def test_a_dynamo_start_whose_stack_is_an_object_is_a_handler_error_and_the_rest_lands(tmp_path):
    (real,) = scenario_logs("graph_breaks")
    groups = records(real)
    index = next(i for i, g in enumerate(groups) if b'{"dynamo_start"' in g[0])
    odd = [list(g) for g in groups]
    odd[index][0] = odd[index][0].replace(b'{"dynamo_start": {"stack": [', b'{"dynamo_start": {"stack": {"0": [', 1)
    odd[index][0] = odd[index][0].replace(b']}, "frame_id"', b']}}, "frame_id"', 1)
    good = tmp_path / "good.log"
    good.write_bytes(real.read_bytes())
    path = write(tmp_path, "odd.log", odd)
    db_path = tmp_path / "t.db"
    summary = ingest(db_path, [path, str(good)], jobs=1)
    conn = connect(db_path)
    assert summary.files == 2 and not summary.problems
    (error,) = conn.execute("SELECT f.name, e.line, e.kind, e.message FROM ingest_errors e JOIN files f "
                            "ON f.id = e.file_id").fetchall()
    assert error[:3] == ("odd.log", line_of(groups, index), "handler_error")
    assert error[3].startswith("dynamo_start record not understood: ")
    assert conn.execute("SELECT count(*) FROM envelopes").fetchone()[0] == 2 * len(groups)


def test_blank_lines_after_a_last_record_whose_md5_fails_are_accounted(tmp_path):
    groups = records()
    index = first_with_payload(groups)
    cut = groups[:index] + [groups[index][:-1], [b"\n", b"\n"]]  # last payload line lost, blank lines after
    path = write(tmp_path, "cut.log", cut)
    _, conn, errors = ingest_one(tmp_path, path)
    size = os.path.getsize(path)
    (indexed,) = conn.execute("SELECT sum(envelope_bytes + payload_bytes) FROM envelopes").fetchone()
    assert indexed + sum(e["bytes"] for e in errors) == size
    assert [e["kind"] for e in errors] == ["md5_mismatch", "blank_line"]  # a run of blank lines is one row
    assert errors[1]["lines"] == 2


def test_a_pid_past_64_bits_is_an_error_of_its_line(tmp_path):
    groups = records()
    huge = [list(g) for g in groups]
    pid = huge[3][0].split(b" ")[2]
    huge[3][0] = huge[3][0].replace(b" " + pid + b" ", b" 123456789012345678901234567890 ", 1)
    _, conn, errors = ingest_one(tmp_path, write(tmp_path, "pid.log", huge))
    assert [(e["kind"], e["line"]) for e in errors if e["bytes"]][:1] == [("out_of_range", line_of(groups, 3))]
    assert conn.execute("SELECT count(*) FROM envelopes").fetchone()[0] == len(groups) - 1
