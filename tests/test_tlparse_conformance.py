"""tlindex against tlparse 0.4.3 itself, log by log: every record belongs where tlparse puts it.

For every log of tests/data and of ../shared/corpus/tlparse (when present), tlparse
runs on the log and its own outputs are compared with the database: compile ids
(compile_directory.json keys, attempts folded), each compile's status (trie
colours), the outputs listed per compile, the failures page's rows, and its Stats
(`ok` + `other_rank` records, md5 failures) against the envelopes. Deliberate
differences are listed once, in KNOWN_DIFFERENCES, with the reason; docs/tlparse.md
says the same.

The logs of the version matrix (tests/data/versions/<torch version>/) are compared
the same way on VERSION_ASPECTS: compile ids, statuses, outputs, failures and Stats
(not the report, which the sample set checks), and the compiles tlindex calls
missing where tlparse draws no status (missing_compiles). Where tlindex is wrong on
them (issue 65), ISSUE_65_DIFFERENCES says so; each entry fails the test once the
difference is gone, so the fix removes it.
"""

from __future__ import annotations

import json
import math
import re
import sqlite3
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, SHARED_CORPUS, VERSIONS, connect, fixture_logs, sampled, scenario_dirs, torch_versions
from tlparse_output import TlparseOutput, comparable_raw_line, directory_entries, run_all_ranks, run_tlparse, tlparse_binary

from tlindex.answers.queries import load_queries, run_sql
from tlindex.cli import cli
from tlindex.formats.tlparse_files import raw_jsonl
from tlindex.formats.tlparse_names import compile_key, output_name
from tlindex.ingest.discover import discover
from tlindex.report.files import log_folders

TLPARSE = tlparse_binary()
pytestmark = pytest.mark.skipif(TLPARSE is None, reason="tlparse (pip install tlparse==0.4.3) is not installed")

FIXTURE_LOGS = fixture_logs()  # the sample set (torch 2.13.0); the version matrix below
VERSION_LOGS = [(version, log) for version in torch_versions() for log in fixture_logs(version)]
# What the logs of the version matrix are compared on: the sample set's aspects less the report's (it is written per
# run: the sample set's checks it), and missing_compiles, which the sample set is not compared on (its asserts stay
# as they were; its export and compiled_autograd logs have such compiles too).
VERSION_ASPECTS = {"compile_ids", "statuses", "missing_compiles", "outputs", "failures", "records", "md5"}
CORPUS_LOGS = discover([str(SHARED_CORPUS)])[0] if SHARED_CORPUS.is_dir() else []

# Where tlindex differs from tlparse on purpose: (logs, as globs of "directory/file"; the
# aspects that differ; why). docs/tlparse.md lists the same.
RANKLESS_AFTER_RANK = (
    "a rank's log has records without a \"rank\" key after its first ranked one (torch logs the "
    "torch_version artifact so): tlparse skips them as other_rank, so its [-/-] lacks them (or is "
    "missing); tlindex keeps them in the rank's process (its report's compile_directory.json leaves them out, as "
    "tlparse: the report_directory aspect matches)")
KNOWN_DIFFERENCES: list[tuple[str, set[str], str]] = [
    ("ddp_2ranks/*", {"compile_ids", "outputs"}, RANKLESS_AFTER_RANK),
    ("ddp_4ranks_diverge/*", {"compile_ids", "outputs"}, RANKLESS_AFTER_RANK),
    ("collectives_3ranks/*", {"compile_ids", "outputs"}, RANKLESS_AFTER_RANK),
    ("rank_restart/*", {"compile_ids", "outputs"}, RANKLESS_AFTER_RANK),
    ("export_in_ranks/*", {"compile_ids", "outputs"}, RANKLESS_AFTER_RANK),  # versions/ only
    ("closures/*", {"statuses"},
     "after torch._dynamo.reset() compile id 0/0 names two compiles (`inner`, which broke, and "
     "`after_reset`, ok): tlparse keys compiles by id and shows the first one's status for both; "
     "tlindex keeps each generation's compile with its own status"),
    ("mega_cache_warm/*", {"statuses"},  # versions/ only
     "a warm start from torch's mega-cache logs no compilation_metrics for its compile, but the guards it loads "
     "from the cache and the end of its whole-frame span: tlparse says missing, tlindex says ok (it finished; "
     "missing is a compile that began and never ended)"),
    ("draft_export/*", {"records"},
     "tlparse 0.4.3 cannot read torch 2.13's guard_added records whose frame_locals hold lists "
     "(Stats fail_json) and drops them; tlindex keeps them"),
]

# Where tlindex disagrees with tlparse on the logs of the version matrix because of issue 65's bugs (tlindex is
# wrong where tlparse is not): (logs, as globs of "version/scenario/file"; aspects; why). The fix of each bug makes its
# entries fail ("a known difference no longer occurs"): then remove them. The deliberate differences of
# KNOWN_DIFFERENCES apply to the version matrix too. None is left: the compile ids of an export's compile context
# (torch 2.15) and of a strict export are status none, as tlparse draws no status for them.
ISSUE_65_DIFFERENCES: list[tuple[str, set[str], str]] = []
# The same for tlparse --all-ranks-html: (rank directory, aspects, why).
KNOWN_RANK_DIFFERENCES: list[tuple[str, set[str], str]] = [
    ("ddp_2ranks", {"compile_ids"},
     "tlparse warns of diverging compile ids because rank 1's [-/-] is empty to it (see above); "
     "both ranks compiled the same ids, and [-/-] is no compilation"),
    ("export_in_ranks", {"compile_ids"},  # versions/ only; on 2.15 tlparse warns (ids shifted by the export), tlindex
     # matches compiles by code object and does not (tests/test_torch_versions.py)
     "tlparse warns of diverging compile ids because rank 1's [-/-] is empty to it and rank 0's holds its "
     "export's records; both ranks compiled the same functions"),
]

OUTPUT_RE = re.compile(r"^(.*)_\d+\.(?:txt|json|html)$")


def tlparse_stem(name: str) -> str:
    """inductor_output_code_<hash>_4.html -> inductor_output_code; dynamo_output_graph_1.txt -> dynamo_output_graph."""
    match = OUTPUT_RE.match(name)
    stem = match.group(1) if match else name
    return "inductor_output_code" if stem.startswith("inductor_output_code") else stem


_REPORTS: dict[tuple[str, int], Path] = {}  # (database, run) -> the folder `tlindex report` wrote


def reported_directory(db_path: Path, conn: sqlite3.Connection, file_id: int, tmp_path: Path) -> dict:
    """The compile_directory.json that the `tlindex report` command wrote for one log (one report per run)."""
    (run,) = conn.execute("SELECT run_id FROM sources WHERE file_id = ? LIMIT 1", (file_id,)).fetchone()
    out = _REPORTS.get((str(db_path), run))
    if out is None:
        out = tmp_path / f"report-{run}"
        result = CliRunner().invoke(cli, ["report", "--db", str(db_path), "--run", str(run), "-o", str(out),
                                          "--silent", "-j", "1"])
        assert result.exit_code == 0, result.output
        _REPORTS[(str(db_path), run)] = out
    folders = log_folders(conn, run)
    folder = out if len(folders) == 1 else out / folders[file_id]
    return json.loads((folder / "compile_directory.json").read_text())


def tlindex_side(conn: sqlite3.Connection, log: Path, db_path: Path, tmp_path: Path,
                 whole: bool = True) -> TlparseOutput:
    """What the database holds of one log, in the shape of tlparse's outputs (compile_directory.json as the
    `tlindex report` command wrote it; not `whole`: without the report and raw.jsonl, left empty)."""
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
    written = reported_directory(db_path, conn, file_id, tmp_path) if whole else {}
    report_directory = {key: [a["name"] for a in value["artifacts"]] for key, value in written.items()}
    raw = [comparable_raw_line(line) for line in raw_jsonl(conn, file_id, lambda digest: digest)] if whole else []
    return TlparseOutput({"records": records, "fail_payload_md5": md5_failures}, directory, statuses, failures,
                         report_directory, raw=raw, entries=directory_entries(written))


def _close(a, b) -> bool:
    """Equal JSON, floats to the last bits (tlparse's float parsing rounds differently from Python's)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


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
    # frame compiles tlindex calls missing (no compilation_metrics) that tlparse draws no status for: its stack trie
    # lists only compiles with a dynamo_start ([-/-] and compiled autograd's own !N/-/- are no frames: left out). An
    # aspect of the version matrix only: see VERSION_ASPECTS.
    invented = {key: sorted(status) for key, status in ours.statuses.items()
                if "missing" in status and key not in theirs.statuses and not key.endswith("-/-")}
    if invented:
        found["missing_compiles"] = f"tlindex says missing, tlparse shows no status: {invented}"
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
    their_directory = {key: names for key, names in theirs.directory.items() if not key.startswith("unknown")}
    if list(their_directory.items()) != list(ours.report_directory.items()):
        found["report_directory"] = (f"tlparse compile_directory.json {their_directory}, tlindex report's "
                                     f"{ours.report_directory}")
    elif theirs.entries != ours.entries:  # same names: then the numbers and which entries have a url
        differing = {key: (theirs.entries.get(key), ours.entries.get(key)) for key in theirs.entries
                     if theirs.entries.get(key) != ours.entries.get(key)}
        found["report_numbers"] = f"(tlparse, tlindex report) numbers and urls differ: {differing}"
    if not _close(theirs.raw, ours.raw):
        differing = next((i for i, (a, b) in enumerate(zip(theirs.raw, ours.raw)) if not _close(a, b)),
                         min(len(theirs.raw), len(ours.raw)))
        found["raw_jsonl"] = (f"{len(theirs.raw)} lines from tlparse, {len(ours.raw)} from tlindex; first differing "
                              f"line {differing + 1}")
    seen = theirs.stats.get("ok", 0) + theirs.stats.get("other_rank", 0)
    if seen != ours.stats["records"]:
        found["records"] = f"tlparse Stats ok + other_rank = {seen}, tlindex non-str envelopes {ours.stats['records']}"
    if theirs.stats.get("fail_payload_md5", 0) != ours.stats["fail_payload_md5"]:
        found["md5"] = f"tlparse {theirs.stats.get('fail_payload_md5', 0)}, tlindex {ours.stats['fail_payload_md5']}"
    return found


def _check(db_path: Path, log: Path, tmp_path: Path, version: str | None = None) -> None:
    """tlparse and tlindex on one log: on every aspect, or for a log of the version matrix on VERSION_ASPECTS."""
    theirs = run_tlparse(TLPARSE, log, tmp_path / "tl_out")
    conn = connect(db_path)
    try:
        ours = tlindex_side(conn, log, db_path, tmp_path, whole=version is None)
    finally:
        conn.close()
    found = differences(theirs, ours)
    if version is None:
        found.pop("missing_compiles", None)
        _compare(f"{log.parent.name}/{log.name}", found, KNOWN_DIFFERENCES)
    else:
        _compare(f"{version}/{log.parent.name}/{log.name}", {k: v for k, v in found.items() if k in VERSION_ASPECTS},
                 ISSUE_65_DIFFERENCES, allowed=KNOWN_DIFFERENCES)


def _compare(name: str, found: dict[str, str], known_list: list[tuple[str, set[str], str]],
             allowed: list[tuple[str, set[str], str]] = ()) -> None:
    """Every difference is a known one, and every known one listed for this input still occurs. Those `allowed`
    may occur, need not: the deliberate differences of the sample set, on the version matrix, where a pattern
    without a version ("ddp_2ranks/*") matches every version's folder of that name."""
    entries = [aspects for pattern, aspects, _ in known_list if fnmatch(name, pattern)]
    known = set().union(*entries, *[aspects for pattern, aspects, _ in allowed if fnmatch(name, f"*/{pattern}")])
    unexplained = {aspect: text for aspect, text in found.items() if aspect not in known}
    assert not unexplained, f"{name} differs from tlparse: {unexplained}"
    for aspects in entries:
        assert aspects & set(found), f"{name}: a known difference no longer occurs: {aspects}"


@pytest.mark.parametrize("version, log", sampled(
    [(None, log) for log in FIXTURE_LOGS] + VERSION_LOGS, 3,
    ids=lambda pair: "/".join([*([pair[0]] if pair[0] else []), pair[1].parent.name, pair[1].name])))
def test_fixture_log_agrees_with_tlparse(request, version, log, tmp_path):
    """Each log of the sample set, then each of every torch version's (tests/data/versions/<version>/)."""
    _check(request.getfixturevalue("fixtures_db" if version is None else "versions_db"), log, tmp_path, version)


@pytest.mark.parametrize("log", CORPUS_LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_log_agrees_with_tlparse(corpus_db, log, tmp_path):
    _check(corpus_db, log, tmp_path)


MULTI_RANK = ("ddp_2ranks", "ddp_4ranks_diverge", "collectives_3ranks", "export_in_ranks")
RANK_DIRECTORIES = [DATA / "ddp_2ranks", DATA / "ddp_4ranks_diverge", DATA / "collectives_3ranks"] + (
    [SHARED_CORPUS / "multi_rank_logs", SHARED_CORPUS / "multi_rank_schedule"] if SHARED_CORPUS.is_dir() else []) + [
    folder for version in torch_versions() for folder in scenario_dirs(version) if folder.name in MULTI_RANK]
THEIR_GROUP_RE = re.compile(r"^\s*Ranks: (\d[\d, ]*)$", re.M)     # tlparse: a line "Ranks: 0, 2"


def _groups(pattern: re.Pattern, text: str) -> set[frozenset[int]]:
    return {frozenset(int(r) for r in group.replace(" ", "").split(",") if r) for group in pattern.findall(text)}


def their_divergence(landing_html: str) -> dict[str, object]:
    """What tlparse's multi-rank landing page warns of: compile ids, cache and collective groups."""
    text = re.sub(r"<[^>]+>", "\n", landing_html)
    found: dict[str, object] = {"compile_ids": "Diverging Compilation IDs" in text}
    for aspect, heading in (("cache_pattern", "Diverging Cache hit/miss patterns"),
                            ("collective_schedule", "Diverging collective operation sequences")):
        at = text.find(heading)
        section = text[at:text.find("Warning", at + len(heading))] if at != -1 else ""
        found[aspect] = _groups(THEIR_GROUP_RE, section)
    return found


def our_divergence(db_path: Path, directory: Path) -> dict[str, object]:
    conn = connect(db_path)
    try:
        (run,) = {row[0] for row in conn.execute(
            "SELECT s.run_id FROM sources s JOIN files f ON f.id = s.file_id WHERE f.directory = ?",
            (str(directory.resolve()),))}
        rows = [dict(r) for r in run_sql(conn, load_queries()["rank_divergence"].sql, {"run": run})]
    finally:
        conn.close()
    found: dict[str, object] = {"compile_ids": any(r["finding"] == "missing_compile" for r in rows)}
    for aspect in ("cache_pattern", "collective_schedule"):  # a row per group of ranks, its ranks "0, 2"
        found[aspect] = {frozenset(int(rank) for rank in r["ranks"].split(", ")) for r in rows if r["finding"] == aspect}
    return found


def rank_directory_name(directory: Path) -> str:
    """ddp_2ranks; 2.15.0/ddp_2ranks in the version matrix."""
    return f"{directory.parent.name}/{directory.name}" if directory.parent.parent == VERSIONS else directory.name


@pytest.mark.parametrize("directory", RANK_DIRECTORIES, ids=rank_directory_name)
def test_rank_divergence_agrees_with_tlparse_all_ranks(request, directory, tmp_path):
    """tlparse --all-ranks-html warns of the divergences rank_divergence finds, with the same rank groups."""
    landing = run_all_ranks(TLPARSE, directory, tmp_path / "tl_out")
    theirs = their_divergence(landing)
    db = {DATA: "fixtures_db", SHARED_CORPUS: "corpus_db"}.get(directory.parent, "versions_db")
    ours = our_divergence(request.getfixturevalue(db), directory)
    found = {aspect: f"tlparse {theirs[aspect]}, tlindex {ours[aspect]}" for aspect in theirs
             if theirs[aspect] != ours[aspect]}
    if directory.parent.parent == VERSIONS:  # on every version the same program runs: its differences may occur
        _compare(rank_directory_name(directory), found, [], allowed=KNOWN_RANK_DIFFERENCES)
    else:
        _compare(rank_directory_name(directory), found, KNOWN_RANK_DIFFERENCES)
