"""Run tlparse 0.4.3 (the reference) on a log and read what it wrote.

Used by tests/test_tlparse_conformance.py. tlparse comes from PyPI (the test
extra); where it is not installed, those tests skip.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

STATS_RE = re.compile(r"Stats \{ (.*?) \}")
TRIE_LINK_RE = re.compile(r"<a href='#\[([^\]]*)\]' class='status-(\w+)'>")
FAILURE_ROW_RE = re.compile(
    r"<tr> <td> <a href='[^']*'>\[([^\]]*)\]</a>\s*</td><td>(?:<pre>)?\s*(.*?)\s*(?:</pre>)?\s*</td>\s*"
    r"<td><pre>(.*?)</pre></td>", re.S)
ATTEMPT_RE = re.compile(r"_\d+$")


def tlparse_binary() -> str | None:
    """The tlparse executable of this Python's environment, or on PATH."""
    beside = Path(sys.executable).parent / "tlparse"
    if beside.exists():
        return str(beside)
    return shutil.which("tlparse")


def fold_attempt(key: str) -> str:
    """[0/0_1] -> 0/0: tlparse keys carry the attempt, tlindex folds attempts into one compile."""
    return ATTEMPT_RE.sub("", key.strip("[]"))


@dataclass
class TlparseOutput:
    stats: dict[str, int]
    directory: dict[str, list[str]]          # compile key (brackets and attempt kept) -> output names
    statuses: dict[str, set[str]] = field(default_factory=dict)   # folded key -> statuses in the trie
    failures: list[tuple[str, str, str]] = field(default_factory=list)  # (folded key, type, reason)
    report_directory: dict[str, list[str]] = field(default_factory=dict)  # tlindex report's compile_directory.json
    entries: dict[str, list[str]] = field(default_factory=dict)  # compile key -> "name #number" (+ " no url")
    raw: list[dict] = field(default_factory=list)  # raw.jsonl, each line parsed, payload_filename left out


def run_tlparse(binary: str, log: Path, out: Path) -> TlparseOutput:
    """tlparse LOG -o OUT, and what its Stats line, compile_directory.json, trie and failures page say."""
    proc = subprocess.run([binary, str(log), "-o", str(out), "--overwrite", "--no-browser"],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"tlparse failed on {log.name}: {proc.stderr[-2000:]}")
    match = STATS_RE.search(proc.stdout + proc.stderr)
    stats = {k: int(v) for k, v in (part.split(": ") for part in match.group(1).split(", "))} if match else {}
    written = json.loads((out / "compile_directory.json").read_text())
    directory = {key: [a["name"] for a in value["artifacts"]] for key, value in written.items()}
    index = (out / "index.html").read_text()
    statuses: dict[str, set[str]] = {}
    for key, status in TRIE_LINK_RE.findall(index):
        statuses.setdefault(fold_attempt(key), set()).add(status)
    failures_page = (out / "failures_and_restarts.html").read_text()
    failures = [(fold_attempt(key), html.unescape(kind).strip(), html.unescape(reason).strip())
                for key, kind, reason in FAILURE_ROW_RE.findall(failures_page)]
    raw = [comparable_raw_line(line) for line in (out / "raw.jsonl").read_text().splitlines()]
    return TlparseOutput(stats, directory, statuses, failures, raw=raw, entries=directory_entries(written))


def directory_entries(written: dict) -> dict[str, list[str]]:
    """compile_directory.json as compared: each artifact's name, number, and whether it has a url
    (the urls themselves lead into each tool's own layout)."""
    return {key: [f"{a['name']} #{a['number']}" + (" no url" if a.get("url") is None else "")
                  for a in value["artifacts"]] for key, value in written.items() if not key.startswith("unknown")}


def comparable_raw_line(line: str) -> dict:
    """A raw.jsonl line without what differs by design: payload_filename (each tool's layout) and the
    timestamp's year (glog has none: tlparse writes the current year, tlindex the year inferred at ingest)."""
    record = json.loads(line)
    record.pop("payload_filename", None)
    if isinstance(record.get("timestamp"), str):
        record["timestamp"] = record["timestamp"][4:]
    return record


def run_all_ranks(binary: str, directory: Path, out: Path) -> str:
    """tlparse DIR --all-ranks-html: the text of its multi-rank landing page."""
    subprocess.run([binary, str(directory), "--all-ranks-html", "-o", str(out), "--overwrite", "--no-browser"],
                   capture_output=True, text=True, timeout=300, check=True)
    return (out / "index.html").read_text()
