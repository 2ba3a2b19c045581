"""Every handler's state survives a continued ingest: a log read as it grows gives the database one pass gives.

Each real fixture log is written in four steps, cut at record boundaries and once in the middle
of a line (a log still being written), and ingested after each step; the result must equal one
ingest of the whole log (tests/test_chunks.py does the same for a file split across workers).
The handlers that keep state across records (string table, span pairing, compile state) are
exercised on every fixture, and every handler of tlindex.ingest.normalize.handlers is exercised by
some real log.
"""

from __future__ import annotations

import pytest
from conftest import SHARED_CORPUS, canonical, fixture_logs, indexes_out_of_step, ingest, raw_envelopes, sampled, sqlite_tables

from tlindex.ingest.discover import discover
from tlindex.ingest.normalize.handlers import ARTIFACT_HANDLERS, CACHE_NAME_RE, HANDLERS

LOGS = fixture_logs()


def cuts(content: bytes) -> list[int]:
    """Three record boundaries (the last one cut mid-line, as a writer at work leaves it)."""
    points = []
    for fraction in (0.3, 0.6, 0.85):
        at = content.find(b"\nV", int(len(content) * fraction))
        if at != -1:
            points.append(at + 1)
    if points:
        points[-1] = min(points[-1] + 25, len(content) - 1)
    return sorted(set(points))


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.parametrize("log", sampled(LOGS, 4, ids=lambda p: f"{p.parent.name}/{p.name}"))
def test_a_log_read_as_it_grows_equals_one_pass(tmp_path, log):
    content = log.read_bytes()
    live = tmp_path / "trace" / log.name
    live.parent.mkdir()
    db_path = tmp_path / "grown.db"
    for cut in cuts(content):
        live.write_bytes(content[:cut])
        ingest(db_path, [str(live)], jobs=1)
    live.write_bytes(content)
    summary = ingest(db_path, [str(live)], jobs=1)
    assert summary.continued == 1
    assert indexes_out_of_step(db_path) == []  # (its deleted rows left the search indexes, its new ones joined)
    whole = tmp_path / "whole.db"
    ingest(whole, [str(live)], jobs=1)
    grown, once = canonical(sqlite_tables(db_path)), canonical(sqlite_tables(whole))
    for table in once:
        assert grown[table] == once[table], table


def test_every_handler_is_exercised_by_a_real_log():
    """Each handler function runs on some real log (kinds that share one, like the metrics kinds, count once)."""
    logs = fixture_logs() + (discover([str(SHARED_CORPUS)])[0] if SHARED_CORPUS.is_dir() else [])
    kinds, artifacts = set(), set()
    for envelope in raw_envelopes(logs):
        kind = next(iter(envelope))
        kinds.add(kind)
        if kind == "artifact" and isinstance(envelope[kind], dict):
            artifacts.add(envelope[kind].get("name"))
    run = {HANDLERS[kind] for kind in kinds if kind in HANDLERS}
    missing = {handler.__name__ for handler in HANDLERS.values()} - {handler.__name__ for handler in run}
    if not SHARED_CORPUS.is_dir():
        missing -= {"on_dynamo_guards"}  # only older torch logged it: tlparse's corpus has it
    assert not missing, missing
    assert set(ARTIFACT_HANDLERS) <= artifacts, set(ARTIFACT_HANDLERS) - artifacts
    assert any(CACHE_NAME_RE.match(name or "") for name in artifacts)
