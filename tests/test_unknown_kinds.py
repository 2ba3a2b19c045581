"""Every record has a home: what tlindex knows of each kind is one registry (tlindex.ingest.normalize.known); records
of a kind it does not know are kept and listed, by the ingest summary and the run page; a compile worker's status is
attributed to the compile its payload names."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest
from click.testing import CliRunner
from conftest import VERSIONS, connect, fixture_logs, ingest, raw_envelopes, torch_versions

from tlindex.answers.runs import unknown_kinds
from tlindex.cli import cli
from tlindex.ingest.normalize.known import PLAIN_ARTIFACT_RE, PLAIN_ARTIFACTS, PLAIN_KINDS, known
from tlindex.pages.rows import Args

REAL_LOG = next((VERSIONS / "2.15.0" / "train_step").glob("*.log"))
PREFIX = b"V1206 20:49:09.487000 11494 torch/_inductor/compile_worker/subproc_pool.py:470] "


def record(envelope: dict, payload: bytes | None = None) -> bytes:
    """One record as torch writes it: the glog prefix, the envelope JSON (with has_payload), the payload's lines."""
    if payload is not None:
        envelope = {**envelope, "has_payload": hashlib.md5(payload).hexdigest()}
    lines = [PREFIX + json.dumps(envelope).encode()] + ([b"\t" + line for line in payload.split(b"\n")]
                                                        if payload is not None else [])
    return b"\n".join(lines) + b"\n"


# What the HAND-MADE records add (kind label -> records) that tlindex does not know.
UNKNOWN_ADDED = {"hand_made_kind": 2, "artifact hand_made_artifact": 1}


@pytest.fixture(scope="module")
def hand_made(tmp_path_factory):
    """HAND-MADE log (not written by torch): the real 2.15.0 train_step log with records put in while compile 0/0
    runs (after its dynamo_start): two `compile_worker_status` artifacts shaped as torch 2.14's
    torch/_inductor/compile_worker/subproc_pool.py writes them (no context keys, `suppress_context`; a JSON payload of
    the watchdog's status plus `compile_id`, the only field tlindex reads), one naming 0/0 and one a compile the log
    does not have; a `flex_gemm_problem` artifact (torch/_inductor/kernel/flex_gemm/debug.py's shape), which tlindex
    stores plain; and three records of kinds no torch writes (UNKNOWN_ADDED)."""
    lines = REAL_LOG.read_bytes().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if b'{"dynamo_start"' in line) + 1
    while lines[at].startswith(b"\t"):
        at += 1
    status = {"job_id": 7, "elapsed_s": 61.0, "phase": "queued"}
    added = (record({"artifact": {"name": "compile_worker_status", "encoding": "json"}},
                    json.dumps({**status, "compile_id": "0/0"}).encode())
             + record({"artifact": {"name": "compile_worker_status", "encoding": "json"}},
                      json.dumps({**status, "compile_id": "9/9"}).encode())
             + record({"artifact": {"name": "flex_gemm_problem", "encoding": "string", "verbosity": "concise",
                                    "lowering_name": "subgraph_0"}, "frame_id": 0, "frame_compile_id": 0,
                       "attempt": 0}, b"problem: m=4 n=4 k=8")
             + record({"hand_made_kind": {}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0})
             + record({"hand_made_kind": {"x": 1}})
             + record({"artifact": {"name": "hand_made_artifact", "encoding": "string"}, "frame_id": 0,
                       "frame_compile_id": 0, "attempt": 0}, b"text"))
    path = tmp_path_factory.mktemp("unknown") / "logs" / REAL_LOG.name
    path.parent.mkdir()
    path.write_bytes(b"".join(lines[:at]) + added + b"".join(lines[at:]))
    db = path.parent.parent / "traces.db"
    summary = ingest(db, [str(path.parent)], jobs=1)
    return path, db, summary


def test_the_ingest_summary_names_the_kinds_tlindex_does_not_know(hand_made):
    path, db, summary = hand_made
    assert summary.unknown == UNKNOWN_ADDED and summary.errors == 0
    line = "3 records of 2 kinds tlindex does not know yet: hand_made_kind ×2, artifact hand_made_artifact ×1"
    assert any(note.startswith(line) for note in summary.notes()), summary.notes()
    again = CliRunner().invoke(cli, ["ingest", str(path.parent), "--db", str(db.parent / "cli.db")])
    assert again.exit_code == 0 and line in again.output, again.output


def test_the_run_page_lists_them_with_links_to_their_records(hand_made):
    from tlindex.pages.run import run_data

    _, db, _ = hand_made
    conn = connect(db)
    (run,) = [row[0] for row in conn.execute("SELECT id FROM runs")]
    listed = {row["label"]: row["records"] for row in unknown_kinds(conn, run)}
    assert listed == UNKNOWN_ADDED
    page = run_data(conn, Args(), run)["run"]
    assert page["unknown_words"].startswith("3 records of 2 kinds tlindex does not know yet")
    assert [(row["kind"], row["name"]) for row in page["unknown_kinds"]] == [("hand_made_kind", None),
                                                                             ("artifact", "hand_made_artifact")]


def test_a_compile_worker_status_belongs_to_the_compile_its_payload_names(hand_made):
    _, db, _ = hand_made
    conn = connect(db)
    rows = conn.execute("""SELECT e.compile_id, p.text FROM envelopes e JOIN payloads p ON p.hash = e.payload
                           WHERE e.kind = 'artifact' AND e.name = 'compile_worker_status' ORDER BY e.id""").fetchall()
    assert [(compile_id, json.loads(text)["compile_id"]) for compile_id, text in rows] == [("0/0", "0/0"),
                                                                                            ("-/-", "9/9")]
    (artifact,) = conn.execute("SELECT c.compile_id FROM artifacts a JOIN compiles c ON c.id = a.compile "
                               "WHERE a.name = 'compile_worker_status' AND c.compile_id = '0/0'").fetchone()
    assert artifact == "0/0"


def test_every_kind_the_real_logs_hold_is_known():
    """Every envelope kind and artifact name of the sample set and the version matrix (read here without tlindex) is
    one tlindex reads or stores plain on purpose: a new torch's new kind fails here until it has a home."""
    logs = fixture_logs() + [log for version in torch_versions() for log in fixture_logs(version)]
    seen = Counter()
    for envelope in raw_envelopes(logs):
        kind = next(iter(envelope))
        meta = envelope[kind]
        seen[(kind, meta.get("name") if kind == "artifact" and isinstance(meta, dict) else None)] += 1
    assert [key for key in seen if not known(*key)] == []
    assert ("artifact", "aot_autograd_runtime_wrappers") in seen and ("artifact", "dynamo_cache_entries") in seen


def test_the_registry_names_no_kind_twice():
    """A plain kind is not a handled one, and a plain artifact name no pattern already covers."""
    from tlindex.ingest.normalize.handlers import ARTIFACT_HANDLERS, HANDLERS

    assert not PLAIN_KINDS & set(HANDLERS)
    assert not PLAIN_ARTIFACTS & set(ARTIFACT_HANDLERS)
    assert [name for name in PLAIN_ARTIFACTS if PLAIN_ARTIFACT_RE.search(name)] == []


WRAPPERS_2_14 = {"runtime_wrapper_orchestration", "compiled_fn_wrapper", "compiled_function_forward",
                 "compiled_function_backward", "backward_prologue", "backward_epilogue"}


def raw_wrapper_heads(log) -> list[list[str]]:
    """Per aot_autograd_runtime_wrappers record of a log, the `# name` heads of its payload lines, read here."""
    found, current = [], None
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.startswith("\t"):
            current = [] if '"name": "aot_autograd_runtime_wrappers"' in line else None
            if current is not None:
                found.append(current)
        elif current is not None and line.startswith("\t# ") and line[3:].isidentifier():
            current.append(line[3:])
    return found


def test_torch_2_15_s_runtime_wrappers_are_split_on_the_compile_page_as_2_14_logged_them(versions_db):
    """train_step: each compile's aot_autograd_runtime_wrappers (2.15.0) is shown as the wrappers its payload heads
    name, each linked to its line; and they are the names of the per-wrapper artifacts the same compile logs on
    2.14.1 (runtime_wrapper_orchestration, compiled_fn_wrapper, ... backward_epilogue)."""
    from tlindex.pages.compile import compile_data

    conn = connect(versions_db)
    shown, siblings = {}, {}
    for version, into in (("2.15.0", shown), ("2.14.1", siblings)):
        folder = VERSIONS / version / "train_step"
        for compile_id, compile in conn.execute(
                "SELECT c.compile_id, c.id FROM compiles c JOIN sources s ON s.id = c.source_id JOIN files f "
                "ON f.id = s.file_id WHERE f.directory = ? AND c.compile_id != '-/-'", (str(folder.resolve()),)):
            artifacts = compile_data(conn, Args(), compile)["compile"]["artifacts"]
            into[compile_id] = ([[w["name"] for w in a["wrappers"]] for a in artifacts if a["wrappers"]]
                                if version == "2.15.0" else
                                sorted(a["name"] for a in artifacts if a["name"] in WRAPPERS_2_14))
    (log,) = sorted((VERSIONS / "2.15.0" / "train_step").glob("*.log"))
    assert sorted(heads for heads in shown.values() for heads in heads) == sorted(raw_wrapper_heads(log))
    assert {compile_id: sorted(name for heads in wrappers for name in heads) for compile_id, wrappers in shown.items()
            } == siblings and siblings["0/0"], (shown, siblings)
