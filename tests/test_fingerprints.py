"""Compile fingerprints (tlindex.ingest.fingerprints): one print is one content, and every reader gives the same
answer with them as without them (a database written before the columns)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from conftest import connect, ingest, scenario_run

from tlindex.answers.diff import _load_contents, _sides, diff
from tlindex.answers.trie import Node, build_trie


@pytest.fixture(scope="module")
def without_prints(fixtures_db, tmp_path_factory) -> sqlite3.Connection:
    """The fixtures database as a tlindex before the prints wrote it: every print NULL."""
    copy = tmp_path_factory.mktemp("old") / "no_prints.db"
    source = sqlite3.connect(fixtures_db)
    source.execute("VACUUM INTO ?", (str(copy),))
    source.close()
    conn = connect(copy)
    conn.execute("UPDATE compiles SET stack_print = NULL, content_print = NULL, guards_print = NULL")
    conn.commit()
    return conn


def stack_of(db, compile_row: int) -> tuple:
    return tuple(db.execute("""SELECT f.filename, f.line, f.name, f.loc FROM compiles c
        JOIN frames f ON f.envelope_id = c.dynamo_start AND f.stack = 'stack' WHERE c.id = ? ORDER BY f.depth""",
                            (compile_row,)).fetchall())


def test_one_stack_print_is_one_stack(db):
    rows = db.execute("SELECT id, stack_print FROM compiles").fetchall()
    stacks = {row: stack_of(db, row) for row, _ in rows}
    assert all((print_ is None) == (not stacks[row]) for row, print_ in rows)  # NULL exactly when no stack
    by_print: dict[int, set] = {}
    for row, print_ in rows:
        if print_ is not None:
            by_print.setdefault(print_, set()).add(stacks[row])
    assert len(by_print) > 20 and all(len(group) == 1 for group in by_print.values())
    assert len({next(iter(group)) for group in by_print.values()}) == len(by_print)  # one stack, one print
    # ranks and repeated compiles share prints: that is what spares the trie reading every stack
    assert len(by_print) < sum(1 for _, print_ in rows if print_ is not None)


def contents(db, rows: list[int]) -> dict[int, tuple]:
    """What the diff compares beyond the compiles row, per compile, as the diff itself loads it."""
    sides = [side for _, side in _sides(db, f"id IN ({','.join(map(str, rows))})", ())]
    for side in sides:
        side.content_print = None  # unknown: load
    _load_contents(db, [(side, side) for side in sides])
    return {side.id: (frozenset(side.breaks), tuple(sorted((cache, tuple(results)) for cache, results in side.caches.items())),
                      tuple(sorted((kind, frozenset(payloads)) for kind, payloads in side.graphs.items())),
                      frozenset(side.symbols)) for side in sides}


def test_one_content_print_is_one_content(db):
    rows = db.execute("SELECT id, content_print FROM compiles").fetchall()
    assert all(print_ is not None for _, print_ in rows)
    loaded = contents(db, [row for row, _ in rows])
    by_print: dict[int, set] = {}
    for row, print_ in rows:
        by_print.setdefault(print_, set()).add(loaded[row])
    assert all(len(group) == 1 for group in by_print.values())
    # two prints may load as one content: the diff masks counters (AOT ids, ...) that the prints hash
    # (inductor_break_added's `finish` is such a pair); it never merges two contents under one print
    assert len({next(iter(group)) for group in by_print.values()}) >= len(by_print) - 2
    assert len(by_print) > 50 and any(any(content) for content in loaded.values())


def test_diffs_are_the_same_without_prints(db, without_prints):
    cold, warm = scenario_run(db, "cache")
    (four,) = scenario_run(db, "ddp_4ranks_diverge")
    (two,) = scenario_run(db, "ddp_2ranks")
    pairs = [(cold, warm), (warm, cold), (four, two), (four, four)]
    pairs += [tuple(scenario_run(db, "break_added"))]
    for a, b in pairs:
        with_prints = diff(db, str(a), str(b))
        assert diff(without_prints, str(a), str(b)) == with_prints, (a, b)
        assert with_prints["summary"]["matched"] > 0


def shape(node: Node) -> list:
    return [(frame, child.id, child.compiles, shape(child)) for frame, child in node.children.items()]


def test_the_trie_is_the_same_without_prints(db, without_prints):
    runs = [run for (run,) in db.execute("SELECT id FROM runs")]
    assert len(runs) > 10
    for run in runs:
        for rank in [None] + [r for (r,) in db.execute("SELECT DISTINCT rank FROM sources WHERE run_id = ? "
                                                       "AND rank IS NOT NULL", (run,))]:
            assert shape(build_trie(db, run, rank)) == shape(build_trie(without_prints, run, rank)), (run, rank)


def test_a_string_id_given_another_file_is_another_stack(tmp_path: Path):
    """HAND-MADE log (not written by torch, which defines each string id once): two dynamo_starts log the
    same stack text, but string id 0 names another file in between. The trie must show both files."""
    line = (b'V1122 09:00:0{s}.000000 7 torch/_dynamo/convert_frame.py:1] {{"dynamo_start": {{"stack": [{{"line": 3, '
            b'"name": "f", "filename": 0}}]}}, "frame_id": {frame}, "frame_compile_id": 0, "attempt": 0}}')
    lines = [b'V1122 09:00:00.000000 7 torch/_logging/structured.py:28] {"str": ["/tmp/first.py", 0]}',
             line.replace(b"{s}", b"1").replace(b"{frame}", b"0").replace(b"{{", b"{").replace(b"}}", b"}"),
             b'V1122 09:00:02.000000 7 torch/_logging/structured.py:28] {"str": ["/tmp/second.py", 0]}',
             line.replace(b"{s}", b"3").replace(b"{frame}", b"1").replace(b"{{", b"{").replace(b"}}", b"}")]
    log = tmp_path / "dedicated_log_torch_trace_strings.log"
    log.write_bytes(b"\n".join(lines) + b"\n")
    ingest(tmp_path / "t.db", [str(log)])
    conn = connect(tmp_path / "t.db")
    prints = [p for (p,) in conn.execute("SELECT stack_print FROM compiles WHERE dynamo_start IS NOT NULL")]
    assert len(prints) == 2 and prints[0] != prints[1]
    (run,) = [r for (r,) in conn.execute("SELECT id FROM runs")]
    files = {frame[0] for frame in build_trie(conn, run, None).children}
    assert files == {"/tmp/first.py", "/tmp/second.py"}
