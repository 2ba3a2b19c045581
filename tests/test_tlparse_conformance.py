"""tlindex against tlparse 0.4.3 itself, log by log: every record belongs where tlparse puts it.

For every log of tests/data and of ../shared/corpus/tlparse (when present), tlparse
runs on the log and its own outputs are compared with the database: compile ids
(compile_directory.json keys, attempts folded), each compile's status (trie
colours), the outputs listed per compile, the failures page's rows, and its Stats
(`ok` + `other_rank` records, md5 failures) against the envelopes. Deliberate
differences are listed once, in KNOWN_DIFFERENCES, with the reason; docs/tlparse.md
says the same.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from conftest import DATA, SHARED_CORPUS, connect
from tlindex.discover import discover
from tlindex.ingest import ingest
from tlindex.tlparse_names import compile_key, output_name
from tlparse_output import TlparseOutput, run_all_ranks, run_tlparse, tlparse_binary

TLPARSE = tlparse_binary()
pytestmark = pytest.mark.skipif(TLPARSE is None, reason="tlparse (pip install tlparse==0.4.3) is not installed")

FIXTURE_LOGS = discover([str(DATA)])[0]
CORPUS_LOGS = discover([str(SHARED_CORPUS)])[0] if SHARED_CORPUS.is_dir() else []

# (log file name, aspect) -> why tlindex differs from tlparse there, on purpose.
KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
}

OUTPUT_RE = re.compile(r"^(.*)_\d+\.(?:txt|json|html)$")


def tlparse_stem(name: str) -> str:
    """inductor_output_code_<hash>_4.html -> inductor_output_code; dynamo_output_graph_1.txt -> dynamo_output_graph."""
    match = OUTPUT_RE.match(name)
    stem = match.group(1) if match else name
    return "inductor_output_code" if stem.startswith("inductor_output_code") else stem


def tlindex_side(conn: sqlite3.Connection, log: Path) -> TlparseOutput:
    """What the database holds of one log, in the shape of tlparse's outputs."""
    (file_id,) = conn.execute("SELECT id FROM files WHERE path = ?", (str(log.resolve()),)).fetchone()
    compiles = conn.execute(
        "SELECT c.id, c.compiled_autograd_id, c.frame_id, c.frame_compile_id, c.status FROM compiles c "
        "JOIN sources s ON s.id = c.source_id WHERE s.file_id = ? ORDER BY c.id", (file_id,)).fetchall()
    keys = {row[0]: compile_key(*row[1:4]).strip("[]") for row in compiles}
    statuses: dict[str, set[str]] = {}
    for row in compiles:
        statuses.setdefault(keys[row[0]], set()).add(row[4])
    directory: dict[str, list[str]] = {key: [] for key in keys.values()}
    for compile, kind, name in conn.execute(
            "SELECT e.compile, e.kind, e.name FROM envelopes e JOIN sources s ON s.id = e.source_id "
            "WHERE s.file_id = ? AND e.compile IS NOT NULL ORDER BY e.id", (file_id,)):
        stem = output_name(kind, name)
        if stem is not None:
            directory[keys[compile]].append(stem)
    failures = []
    for compile, kind, fail_type, fail_reason, restarts in conn.execute(
            "SELECT m.compile, m.kind, m.fail_type, m.fail_reason, m.restart_reasons FROM metrics m "
            "JOIN envelopes e ON e.id = m.envelope_id JOIN sources s ON s.id = e.source_id "
            "WHERE s.file_id = ? AND m.kind = 'compilation_metrics' ORDER BY m.id", (file_id,)):
        for reason in json.loads(restarts) if restarts else []:
            failures.append((keys[compile], "RestartAnalysis", str(reason).strip()))
        if fail_type:
            failures.append((keys[compile], fail_type, (fail_reason or "").strip()))
    (records, md5_failures) = conn.execute(
        "SELECT count(*), coalesce(sum(md5_ok = 0), 0) FROM envelopes e JOIN sources s ON s.id = e.source_id "
        "WHERE s.file_id = ? AND e.kind != 'str'", (file_id,)).fetchone()
    return TlparseOutput({"records": records, "fail_payload_md5": md5_failures}, directory, statuses, failures)


def differences(theirs: TlparseOutput, ours: TlparseOutput) -> dict[str, str]:
    """Aspect -> what differs (empty when tlindex agrees with tlparse)."""
    found = {}
    their_keys = {key.strip("[]") for key in theirs.directory if not key.startswith("unknown")}
    their_folded = {re.sub(r"_\d+$", "", key) for key in their_keys}
    if their_folded != set(ours.directory):
        found["compile_ids"] = f"tlparse {sorted(their_folded)}, tlindex {sorted(ours.directory)}"
    wrong = {key: (status, ours.statuses.get(key)) for key, status in theirs.statuses.items()
             if ours.statuses.get(key) != status}
    if wrong:
        found["statuses"] = f"(tlparse, tlindex): {wrong}"
    their_outputs: dict[str, Counter] = {}
    for key, names in theirs.directory.items():
        their_outputs.setdefault(re.sub(r"_\d+$", "", key.strip("[]")), Counter()).update(map(tlparse_stem, names))
    ours_outputs = {key: Counter(names) for key, names in ours.directory.items()}
    differing = {key: (their_outputs.get(key, Counter()) - ours_outputs.get(key, Counter()),
                       ours_outputs.get(key, Counter()) - their_outputs.get(key, Counter()))
                 for key in set(their_outputs) | set(ours_outputs)}
    differing = {key: (dict(a), dict(b)) for key, (a, b) in differing.items() if a or b}
    if differing:
        found["outputs"] = f"compile: (only tlparse, only tlindex): {differing}"
    if Counter(theirs.failures) != Counter(ours.failures):
        found["failures"] = (f"only tlparse {list((Counter(theirs.failures) - Counter(ours.failures)).elements())}, "
                             f"only tlindex {list((Counter(ours.failures) - Counter(theirs.failures)).elements())}")
    seen = theirs.stats.get("ok", 0) + theirs.stats.get("other_rank", 0)
    if seen != ours.stats["records"]:
        found["records"] = f"tlparse Stats ok + other_rank = {seen}, tlindex non-str envelopes {ours.stats['records']}"
    if theirs.stats.get("fail_payload_md5", 0) != ours.stats["fail_payload_md5"]:
        found["md5"] = f"tlparse {theirs.stats.get('fail_payload_md5', 0)}, tlindex {ours.stats['fail_payload_md5']}"
    return found


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("tlparse-corpus") / "corpus.db"
    summary = ingest(path, [str(SHARED_CORPUS)], jobs=2)
    assert not summary.problems
    return path


def _check(db_path: Path, log: Path, tmp_path: Path) -> None:
    theirs = run_tlparse(TLPARSE, log, tmp_path / "tl_out")
    conn = connect(db_path)
    try:
        ours = tlindex_side(conn, log)
    finally:
        conn.close()
    found = differences(theirs, ours)
    known = {aspect for (name, aspect) in KNOWN_DIFFERENCES if name == log.name}
    unexplained = {aspect: text for aspect, text in found.items() if aspect not in known}
    assert not unexplained, f"{log.name} differs from tlparse: {unexplained}"
    assert known <= set(found), f"{log.name}: a known difference no longer occurs: {known - set(found)}"


@pytest.mark.parametrize("log", FIXTURE_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_log_agrees_with_tlparse(fixtures_db, log, tmp_path):
    _check(fixtures_db, log, tmp_path)


@pytest.mark.parametrize("log", CORPUS_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_log_agrees_with_tlparse(corpus_db, log, tmp_path):
    _check(corpus_db, log, tmp_path)
