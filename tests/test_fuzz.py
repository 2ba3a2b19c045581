"""Nothing lost, whatever the input: hostile variants of every real fixture log.

The variants are HAND-MADE from the real logs of tests/data (not written by torch): envelopes
of valid JSON in the wrong shapes (objects for lists, strings for numbers, nulls, missing keys,
huge integers, deep nesting), launcher noise with a bare carriage return between records, pids
too large for SQLite, damaged .gz files and logs truncated at every kind of boundary. One ingest
takes them all (with the untouched logs beside them); none may crash it, and for every file the
bytes of its envelopes and ingest errors add up to its (decompressed) size and their lines to
its line count: the README's "nothing lost", enforced.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib
from pathlib import Path

import pytest
from conftest import connect, fixture_logs, ingest

REAL_LOGS = fixture_logs()
ENVELOPE = re.compile(rb"^(?P<prefix>[VIWEC]\d{4} [\d:.]+ +)(?P<pid>\d+)(?P<rest> [^\]]+\] )(?P<json>\{.*\})$")
DEEP = 100_000


def wrong_shape(data: dict, variant: int) -> dict:
    """One of several wrong shapes of a valid envelope (a new dict)."""
    kind = next(iter(data))
    meta = data[kind]
    data = dict(data)
    if variant == 0:
        data["stack"] = {"not": "a list"}
        if isinstance(meta, dict):
            data[kind] = {**meta, "stack": {"0": {"line": 1}}, "user_stack": "x"}
    elif variant == 1 and isinstance(meta, dict):
        data[kind] = {key: {"x": [1]} for key in meta}               # objects everywhere
    elif variant == 2 and isinstance(meta, dict):
        data[kind] = {key: "zz" for key in meta}                      # strings for numbers and lists
    elif variant == 3 and isinstance(meta, dict):
        data[kind] = {key: None for key in meta}                      # nulls
    elif variant == 4:
        data[kind] = ["a", "list"] if isinstance(meta, dict) else {"an": "object"}
    elif variant == 5:
        data[kind] = {}                                               # every key missing
    elif variant == 6:
        data.update(frame_id="zz", frame_compile_id={"a": 1}, attempt=[1], rank="zero")
    elif variant == 7:
        data.update(frame_id=10 ** 30, rank=-(10 ** 25))
        if isinstance(meta, dict):
            data[kind] = {key: 10 ** 30 for key in meta}
    elif variant == 8:
        nested: object = 1
        for _ in range(300):  # parses (orjson reads 1024 deep) but orjson will not write it back
            nested = [nested]
        data[kind] = {"deep": nested} if isinstance(meta, dict) else nested
    return data


def mangle(raw: bytes) -> bytes:
    """Every envelope line in a wrong shape (cycling through the variants), and odd lines between records."""
    out = []
    variant = 0
    for number, line in enumerate(raw.split(b"\n")):
        match = ENVELOPE.match(line)
        if match and not line.startswith(b"\t"):
            data = json.loads(match["json"])
            data = wrong_shape(data, variant % 9) if "str" not in data else data
            variant += 1
            pid = match["pid"] if number % 97 else b"99999999999999999999999"  # past 64 bits
            line = match["prefix"] + pid + match["rest"] + json.dumps(data).encode()
            if number % 41 == 0:
                out.append(b"progress 10%\rprogress 50%\r")  # launcher noise, bare CRs, before a record
            if number % 53 == 0:
                out.append(match["prefix"] + match["pid"] + match["rest"] + b"[" * DEEP + b"]" * DEEP)
        out.append(line)
    return b"\n".join(out)


def truncations(raw: bytes) -> list[tuple[str, bytes]]:
    """The log cut at each kind of boundary."""
    first_payload = raw.find(b"\n\t")
    cuts = {
        "mid_envelope_line": raw.find(b"\n", len(raw) // 2) - 7,
        "after_envelope_line": raw.find(b"\n", first_payload - 1) + 1 if first_payload > 0 else len(raw) // 3,
        "mid_payload_line": first_payload + 5 if first_payload > 0 else len(raw) // 4,
        "after_payload_line": raw.find(b"\n", first_payload + 2) + 1 if first_payload > 0 else len(raw) // 5,
        "before_last_newline": len(raw) - 1,
    }
    return [(name, raw[:at]) for name, at in cuts.items() if 0 < at < len(raw)]


def decompressed(path: Path) -> bytes:
    """Every byte zlib can decompress of a (possibly damaged) .gz before the damage (one member)."""
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = []
    data = path.read_bytes()
    for start in range(0, len(data), 4096):  # 4 KB at a time; the block zlib stops in, byte by byte
        before = decompressor.copy()
        try:
            out.append(decompressor.decompress(data[start:start + 4096]))
            continue
        except zlib.error:
            decompressor = before
        for at in range(start, min(start + 4096, len(data))):
            try:
                out.append(decompressor.decompress(data[at:at + 1]))
            except zlib.error:
                return b"".join(out)
    return b"".join(out)


def line_count(data_size: int, data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, dict[Path, tuple[int, int]]]:
    """Every variant of every fixture log in one folder, ingested at once: (database, {file: (bytes, lines)})."""
    folder = tmp_path_factory.mktemp("hostile")
    expected: dict[Path, tuple[int, int]] = {}
    for number, log in enumerate(REAL_LOGS):
        raw = log.read_bytes()
        stem = f"{number:02d}_{log.parent.name}"
        variants = [("mangled", mangle(raw))] + truncations(raw)
        for name, data in variants:
            path = folder / f"{stem}_{name}.log"
            path.write_bytes(data)
            expected[path] = (len(data), line_count(len(data), data))
        packed = gzip.compress(raw)
        for name, data in [("gz_truncated", packed[:len(packed) * 2 // 3]),
                           ("gz_corrupt", packed[:len(packed) // 2] + bytes(b ^ 0x5A for b in packed[len(packed) // 2:]))]:
            path = folder / f"{stem}_{name}.log.gz"
            path.write_bytes(data)
            content = decompressed(path)
            expected[path] = (len(content), line_count(len(content), content))
    untouched = folder / "untouched"
    untouched.mkdir()
    for log in REAL_LOGS[:3]:
        copy = untouched / f"{log.parent.name}_{log.name}"
        copy.write_bytes(log.read_bytes() + b"")
        expected[copy] = (len(log.read_bytes()), line_count(0, log.read_bytes()))
    db_path = folder / "hostile.db"
    summary = ingest(db_path, [str(folder)], jobs=2)
    assert not summary.problems, summary.problems
    return db_path, expected


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_no_input_crashes_the_ingest_and_every_byte_and_line_is_accounted(hostile):
    db_path, expected = hostile
    conn = connect(db_path)
    files = {row["path"]: row["id"] for row in conn.execute("SELECT id, path FROM files")}
    assert set(files) == {str(path.resolve()) for path in expected}
    for path, (size, lines) in expected.items():
        file_id = files[str(path.resolve())]
        (indexed_bytes, indexed_lines) = conn.execute(
            "SELECT coalesce(sum(envelope_bytes + payload_bytes), 0), coalesce(sum(1 + payload_lines), 0) "
            "FROM envelopes e JOIN sources s ON s.id = e.source_id WHERE s.file_id = ?", (file_id,)).fetchone()
        (error_bytes, error_lines) = conn.execute(
            "SELECT coalesce(sum(bytes), 0), coalesce(sum(lines), 0) FROM ingest_errors "
            "WHERE file_id = ? AND bytes > 0", (file_id,)).fetchone()
        assert (indexed_bytes + error_bytes, indexed_lines + error_lines) == (size, lines), path.name


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_records_a_handler_cannot_read_are_handler_errors_with_their_envelope_kept(hostile):
    db_path, _ = hostile
    conn = connect(db_path)
    errors = conn.execute("SELECT e.line, e.message, f.path, f.id FROM ingest_errors e JOIN files f ON f.id = e.file_id "
                          "WHERE e.kind = 'handler_error'").fetchall()
    assert errors, "the wrong shapes reach no handler?"
    for line, message, path, file_id in errors:
        assert "_mangled.log" in path and " record not understood: " in message
        (kind,) = conn.execute("SELECT e.kind FROM envelopes e JOIN sources s ON s.id = e.source_id "
                               "WHERE s.file_id = ? AND e.line = ?", (file_id, line)).fetchone()
        assert message.startswith(f"{kind} record not understood")


def test_the_odd_lines_are_errors_named_by_file_and_line_and_records_after_them_land(hostile):
    db_path, _ = hostile
    conn = connect(db_path)
    for kind, needle in [("bad_prefix", "progress 10%"), ("out_of_range", None), ("bad_json", None)]:
        rows = conn.execute("SELECT e.line, e.offset, e.excerpt, f.path FROM ingest_errors e "
                            "JOIN files f ON f.id = e.file_id WHERE e.kind = ? AND f.compressed = 0", (kind,)).fetchall()
        assert rows, kind
        for line, offset, excerpt, path in rows[:50]:
            raw = Path(path).read_bytes()
            assert raw.count(b"\n", 0, offset) == line - 1  # the line number and offset agree
            if needle:
                assert needle in excerpt
    deep = conn.execute("SELECT count(*) FROM ingest_errors WHERE kind = 'bad_json' AND message LIKE '%nested%'")
    assert deep.fetchone()[0] > 0
    for path in {row[0] for row in conn.execute("SELECT path FROM files WHERE path LIKE '%_mangled.log'")}:
        raw = Path(path).read_bytes()
        records = len(re.findall(rb"(?m)^[VIWEC]\d{4} [\d:.]+ +\d+ [^\]\n]+\] [{\[]", raw))  # JSON follows
        (found,) = conn.execute("SELECT count(*) FROM envelopes e JOIN sources s ON s.id = e.source_id "
                                "JOIN files f ON f.id = s.file_id WHERE f.path = ?", (path,)).fetchone()
        (refused,) = conn.execute("SELECT count(*) FROM ingest_errors e JOIN files f ON f.id = e.file_id "
                                  "WHERE f.path = ? AND e.kind IN ('out_of_range', 'bad_json')", (path,)).fetchone()
        assert found + refused == records, Path(path).name  # every record after the noise landed


def test_a_damaged_gz_keeps_what_decompressed_and_says_where_it_stops(hostile):
    db_path, expected = hostile
    conn = connect(db_path)
    rows = conn.execute("SELECT f.path, e.offset, e.message FROM ingest_errors e JOIN files f ON f.id = e.file_id "
                        "WHERE e.kind = 'damaged_gzip'").fetchall()
    assert {Path(path).name for path, *_ in rows} == {p.name for p in expected if p.name.endswith(".gz")}
    for path, offset, message in rows:
        assert 0 <= offset <= expected[Path(path)][0] and "damaged after" in message
        (envelopes,) = conn.execute("SELECT count(*) FROM envelopes e JOIN sources s ON s.id = e.source_id "
                                    "JOIN files f ON f.id = s.file_id WHERE f.path = ?", (path,)).fetchone()
        assert envelopes > 0
