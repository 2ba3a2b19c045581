"""Trust, second pass: what a hostile request, query or log must not be able to do.

Each test reproduces an attack that worked before its fix (issue 25) and shows it bounded now.
Hand-made inputs are made here and say so; the databases are the real fixtures'.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import time
import tracemalloc
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from datasette.app import Datasette
from waiting import until_busy

from tlindex.cli import cli

BOMB_BYTES = 500 * 1024 * 1024


@functools.lru_cache(maxsize=1)
def bomb_sql() -> str:
    """A deflate bomb nested twice: a 959-byte blob that inflates to 500 MB (HAND-MADE)."""
    deflate, zeros = zlib.compressobj(9), b"\0" * (1 << 20)
    inner = b"".join(deflate.compress(zeros) for _ in range(BOMB_BYTES >> 20)) + deflate.flush()
    outer = zlib.compress(inner, 9)
    return (f"select length(sqlar_uncompress(sqlar_uncompress(X'{outer.hex()}', {len(inner)}), {BOMB_BYTES})) "
            f"as n")


# The command's own peak (VmHWM starts afresh at exec; ru_maxrss would count the forked pytest process).
MEASURED = """
import re, sys
from tlindex.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="tlindex")
except SystemExit as end:
    peak = re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)
    print("peak_kb=" + peak, file=sys.stderr)
    raise
"""


def test_the_bomb_is_refused_by_tlindex_query_fast_and_small(traces_db):
    sql = bomb_sql()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", MEASURED, "query", sql, "--db", str(traces_db)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "sqlar_uncompress inflates at most the largest payload" in proc.stderr
    assert time.monotonic() - started < 10
    peak_kb = int(proc.stderr.rsplit("peak_kb=", 1)[1])
    assert peak_kb < 100 * 1024  # the whole process, interpreter included (it was 1 GB)


@pytest.mark.asyncio
async def test_the_bomb_is_refused_by_datasette_without_allocating(traces_db):
    datasette = Datasette([str(traces_db)])
    await datasette.invoke_startup()
    sql = bomb_sql()
    tracemalloc.start()
    try:
        response = await datasette.client.get("/traces.json", params={"sql": sql}, follow_redirects=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 400
    assert peak < 20 * 1024 * 1024  # it inflated 4 GB before
    # the payloads view still reads every payload
    rows = (await datasette.client.get("/traces.json", params={
        "sql": "select count(*) as n, sum(length(text) > 0) as read from payloads", "_shape": "array"},
        follow_redirects=True)).json()
    assert rows[0]["n"] == rows[0]["read"] > 100


@pytest.mark.parametrize("sql,says", [
    ("select hex(fts3_tokenizer('simple'))", "fts3_tokenizer"),
    ("select fts3_tokenizer('evil', X'0000000000000000')", "fts3_tokenizer"),
    ("select load_extension('/tmp/x.so')", "load_extension"),
    ("select length(zeroblob(1000000000))", "zeroblob"),
])
def test_functions_outside_the_allowlist_are_refused(traces_db, sql, says):
    result = CliRunner().invoke(cli, ["query", sql, "--db", str(traces_db)])
    assert result.exit_code == 1 and f"not authorized to use function: {says}" in result.output


@pytest.mark.asyncio
async def test_datasette_refuses_the_pointer_functions_too(traces_db):
    datasette = Datasette([str(traces_db)])
    await datasette.invoke_startup()
    response = await datasette.client.get("/traces.json", params={"sql": "select hex(fts3_tokenizer('simple'))"},
                                          follow_redirects=True)
    assert response.status_code == 400 and "not authorized" in response.text
    ok = await datasette.client.get("/traces.json", params={"sql": "select json_extract('{\"a\": 1}', '$.a') as a"},
                                    follow_redirects=True)
    assert ok.status_code == 200


def test_ctrl_c_stops_a_runaway_query(traces_db):
    proc = subprocess.Popen([sys.executable, "-m", "tlindex", "query",
                             "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c",
                             "--db", str(traces_db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    until_busy(proc.pid, 1.5)  # past its start-up (under 1 s of CPU): in the statement
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and err.strip().startswith("tlindex query: stopped (SIGINT)")


def test_a_payload_larger_than_the_floor_reads_once_it_is_stored(tmp_path):
    import sqlite3

    from tlindex import Database
    from tlindex.store.compression import INFLATE_FLOOR, pack, register

    db = Database(tmp_path / "big.db", create=True).conn
    text = "x = torch.ones(3)\n" * (INFLATE_FLOOR // 10)  # 1.8 MB: past the floor
    size, data = pack(text)
    reader = register(sqlite3.connect(tmp_path / "big.db"))  # one long-lived connection, as a server has
    with pytest.raises(sqlite3.OperationalError):  # nothing that large is stored yet: refused
        reader.execute("SELECT sqlar_uncompress(?, ?)", (data, size)).fetchone()
    db.execute("INSERT INTO payload_data (hash, size, text_size, data) VALUES ('h', ?, ?, ?)", (size, size, data))
    db.commit()
    (read,) = reader.execute("SELECT text FROM payloads WHERE hash = 'h'").fetchone()
    assert read == text
    # and the same bytes asked for at another size are not what the row holds: NULL, as the shell answers
    assert reader.execute("SELECT sqlar_uncompress(?, ?)", (data, size - 1)).fetchone() == (None,)


def test_text_for_a_terminal_shows_control_characters_escaped(tmp_path):
    """HAND-MADE log: a function name and a failure reason that carry OSC and CSI escape sequences."""
    import json as json_module

    from tlindex.output import terminal_safe

    evil = "f\x1b]0;owned\x07\x1b[2J\x9b31m"
    assert terminal_safe(evil) == "f^[]0;owned^G^[[2JM-^[31m" and terminal_safe("a\tb\nc") == "a\tb\nc"
    log = tmp_path / "dedicated_log_torch_trace_evil.log"
    metrics = {"co_name": evil, "co_filename": "/x.py", "co_firstlineno": 1, "fail_type": "Unsupported",
               "fail_reason": evil, "frame_key": "1"}
    log.write_text(
        'V1123 10:00:00.000000 1 torch/_dynamo/convert_frame.py:1] {"dynamo_start": {"stack": []}, '
        '"frame_id": 0, "frame_compile_id": 0, "attempt": 0}\n'
        'V1123 10:00:01.000000 1 torch/_dynamo/utils.py:1] {"compilation_metrics": '
        + json_module.dumps(metrics) + ', "frame_id": 0, "frame_compile_id": 0, "attempt": 0}\n')
    db = tmp_path / "evil.db"
    assert CliRunner().invoke(cli, ["ingest", str(log), "--db", str(db)]).exit_code == 0
    for args in (["findings"], ["search", "owned"], ["query", "select co_name, fail_reason from compiles", "-t"]):
        result = CliRunner().invoke(cli, [*args, "--db", str(db)])
        assert "\x1b" not in result.output and "\x07" not in result.output and "\x9b" not in result.output
        assert args == ["findings"] or "^[]0;owned^G" in result.output, (args, result.output)
    as_json = CliRunner().invoke(cli, ["query", "select co_name from compiles where co_name like 'f%'", "--db", str(db)])
    assert json_module.loads(as_json.output)[0]["co_name"] == evil  # JSON keeps the bytes as they were


def test_the_report_folder_is_swapped_in_whole_and_links_are_refused(fixtures_db, tmp_path, monkeypatch):
    from conftest import connect, scenario_run

    (run,) = scenario_run(connect(fixtures_db), "graph_breaks")
    base = ["report", "--db", str(fixtures_db), "--run", str(run), "--silent"]
    first = tmp_path / "r2"
    assert CliRunner().invoke(cli, [*base, "-o", str(first)]).exit_code == 0
    (first / "old-marker.txt").write_text("from the old report")
    monkeypatch.chdir(first)  # inside the old report: -o . --overwrite
    result = CliRunner().invoke(cli, [*base, "-o", ".", "--overwrite"])
    assert result.exit_code == 0, result.output
    assert (first / "index.html").is_file() and not (first / "old-marker.txt").exists()
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli, [*base, "-o", "r2/sub/..", "--overwrite"])
    assert result.exit_code == 0, result.output
    assert (first / "index.html").is_file() and not (tmp_path / "r2" / "sub").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".r2.")]  # nothing left beside it
    assert (first.stat().st_mode & 0o777) == (0o777 & ~_umask())  # as readable as the files in it
    for link, target in (("link", first), ("dangling", tmp_path / "nowhere")):
        (tmp_path / link).symlink_to(target)
        result = CliRunner().invoke(cli, [*base, "-o", link, "--overwrite"])
        assert result.exit_code == 1 and "a symbolic link" in result.output and "Traceback" not in result.output
    assert (first / "index.html").is_file()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_record_too_long_to_hold_is_counted_not_held(tmp_path, monkeypatch):
    """HAND-MADE: a real log with a 3 MB line of zeros (no newline) spliced between two records."""
    from conftest import DATA, connect, ingest

    from tlindex.ingest import reader

    monkeypatch.setattr(reader, "MAX_RECORD_BYTES", 1 << 20)  # the real limit is 64 MiB: same code path
    real = next((DATA / "graph_breaks").iterdir()).read_bytes()
    cut = real.index(b"\nV", len(real) // 2) + 1
    spliced = real[:cut] + b"\0" * (3 << 20) + b"\n" + real[cut:]
    log = tmp_path / "dedicated_log_torch_trace_long.log"
    log.write_bytes(spliced)
    summary = ingest(tmp_path / "t.db", [str(log)], jobs=1)
    conn = connect(tmp_path / "t.db")
    (kind, lines, size), = conn.execute("SELECT kind, lines, bytes FROM ingest_errors").fetchall()
    assert (kind, lines, size) == ("too_long", 1, (3 << 20) + 1)
    (indexed,) = conn.execute("SELECT sum(envelope_bytes + payload_bytes) FROM envelopes").fetchone()
    assert indexed + size == len(spliced)  # every byte accounted, the records after it landed
    assert summary.envelopes == real.count(b"\nV") + 1


def test_runs_of_blank_lines_are_one_row_and_a_gzip_bomb_streams(tmp_path):
    """HAND-MADE: a gzip of a million newlines; a gzip of 256 MB of zeros read through the tolerant reader."""
    import gzip

    from conftest import connect, ingest

    from tlindex.ingest.task import TolerantGzip

    newlines = tmp_path / "newlines.log.gz"
    with gzip.open(newlines, "wb") as out:
        out.write(b"\n" * 1_000_000)
    ingest(tmp_path / "n.db", [str(newlines)], jobs=1)
    rows = connect(tmp_path / "n.db").execute("SELECT kind, lines, bytes FROM ingest_errors").fetchall()
    assert [tuple(row) for row in rows] == [("blank_line", 1_000_000, 1_000_000)]
    zeros = tmp_path / "zeros.log.gz"
    with gzip.open(zeros, "wb", compresslevel=9) as out:
        for _ in range(16):
            out.write(b"\0" * (16 << 20))
    tracemalloc.start()
    try:
        with open(zeros, "rb") as disk:
            stream, total = TolerantGzip(disk), 0
            buffer = bytearray(1 << 20)
            while (size := stream.readinto(buffer)):
                total += size
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total == 256 << 20 and peak < 8 << 20  # it held each step's whole output (64 MB) before


def test_a_file_whose_only_line_is_cut_off_exits_1(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_cut.log"  # HAND-MADE
    log.write_bytes(b'V1123 10:00:00.000000 1 torch/_dynamo/convert_frame.py:1] {"dynamo_start": {"st')
    result = CliRunner().invoke(cli, ["ingest", str(log), "--db", str(tmp_path / "t.db")])
    assert result.exit_code == 1 and "no trace record" in result.output


@pytest.mark.asyncio
async def test_a_compile_not_yet_grouped_into_a_run_still_has_its_page(fixtures_db, tmp_path):
    """Between a merge and run grouping (or after an ingest killed there) compiles have no run."""
    import shutil
    import sqlite3

    from conftest import connect

    copy = tmp_path / "window.db"
    source = sqlite3.connect(fixtures_db)
    source.execute("PRAGMA wal_checkpoint(FULL)")
    source.close()
    shutil.copy(fixtures_db, copy)
    conn = sqlite3.connect(copy)
    (compile_id,) = conn.execute("SELECT id FROM compiles WHERE compile_id = '0/0' LIMIT 1").fetchone()
    conn.execute("UPDATE compiles SET run_id = NULL WHERE id = ?", (compile_id,))
    conn.execute("UPDATE sources SET run_id = NULL WHERE id = (SELECT source_id FROM compiles WHERE id = ?)",
                 (compile_id,))
    conn.commit()
    conn.close()
    datasette = Datasette([str(copy)])
    await datasette.invoke_startup()
    page = await datasette.client.get(f"/window/-/tlindex/compile/{compile_id}")
    assert page.status_code == 200 and "not grouped into a run yet" in page.text
    assert connect(copy).execute("SELECT count(*) FROM compiles WHERE run_id IS NULL").fetchone()[0] >= 1


def test_a_full_disk_is_one_line_and_the_database_stays_consistent(tmp_path, monkeypatch):
    import sqlite3

    from conftest import DATA

    from tlindex.ingest import pipeline as ingest_module

    def full(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(ingest_module, "merge", full)
    db = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["ingest", str(DATA / "graph_breaks"), "--db", str(db), "-j", "1"])
    assert result.exit_code == 1 and "database or disk is full" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
    assert sqlite3.connect(db).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_odd_names_are_one_line_each_and_the_good_log_lands(tmp_path):
    """HAND-MADE names for real logs: not UTF-8, a rank past 64 bits, a FIFO."""
    from conftest import DATA, connect

    good = tmp_path / "good.log"
    good.write_bytes(next((DATA / "graph_breaks").iterdir()).read_bytes())
    bad = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xff.log"))
    bad.write_bytes(good.read_bytes())
    huge = tmp_path / "dedicated_log_torch_trace_rank_99999999999999999999999_x.log"
    huge.write_bytes(next((DATA / "dynamic").iterdir()).read_bytes())
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    db = tmp_path / "t.db"
    result = CliRunner().invoke(cli, ["ingest", str(good), str(bad), str(huge), str(fifo), "--db", str(db)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "bad\\xff.log: the file name is not valid UTF-8" in result.output
    assert "fifo.log: not a regular file" in result.output
    conn = connect(db)
    names = {row[0]: row[1] for row in conn.execute(
        "SELECT f.name, typeof(s.file_rank) FROM files f JOIN sources s ON s.file_id = f.id")}
    assert names == {"good.log": "null", huge.name: "null"}  # a rank past 64 bits is no rank (not a REAL)
    run = conn.execute("SELECT id FROM runs WHERE id = (SELECT run_id FROM sources LIMIT 1)").fetchone()[0]
    report = CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(tmp_path / "r"), "--silent"])
    assert report.exit_code == 0, report.output
    assert run
