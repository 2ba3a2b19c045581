"""One run of hundreds of ranks: its ingest, its pages, its timelines and its report, against tlparse.

    python benchmarks/ranks.py [--ranks 256] [--work DIR] [--rounds 3]   (or scale.py --ranks 256)

The run is built from real multi-rank logs (tests/data/ddp_4ranks_diverge: rank 1 compiles two functions
the others do not): rank R is a copy of rank R mod 4's log with its `rank` and its pid set to its own, so 64 of 256
ranks diverge, as one rank of 4 does. It is ingested into a database of its own; with `tlindex serve` on it, its run
page, stack trie, a compile page and its timelines (the whole run, the overview, one rank: bytes sent, plain and
gzip-encoded) are timed as the first request and the median of --rounds after it; then `tlindex report` of the
folder (ingest and render), of the database (render only) and `tlparse --all-ranks-html` of the same folder, each a
whole process, alternated --rounds times, with the peak memory of its process tree.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest import measure, tlparse_binary  # noqa: E402
from scale import TLINDEX, fetch, serve, timed  # noqa: E402

SOURCE = ROOT / "tests" / "data" / "ddp_4ranks_diverge"
ENVELOPE_RE = re.compile(rb"^([VIWEC]\d{4} [\d:.]+ +)(\d+)( .+?:\d+\] )(\{.*\})(\r?\n)$")


def build_ranks(folder: Path, ranks: int) -> Path:
    """`ranks` rank files, rank R a copy of rank R mod 4 of the real logs with its own rank and pid (kept)."""
    if folder.exists():
        return folder
    logs = sorted(SOURCE.glob("*.log"), key=lambda p: int(re.search(r"rank_(\d+)", p.name).group(1)))
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    for rank in range(ranks):
        with open(logs[rank % len(logs)], "rb") as lines, \
                open(partial / f"dedicated_log_torch_trace_rank_{rank}_bench.log", "wb") as out:
            for line in lines:
                found = ENVELOPE_RE.match(line)
                if found:
                    head, _, where, body, end = found.groups()
                    if b'"rank"' in body:
                        data = orjson.loads(body)
                        data["rank"] = rank
                        body = orjson.dumps(data)
                    line = head + str(40000 + rank).encode() + where + body + end
                out.write(line)
    partial.rename(folder)
    return folder


def page_urls(db: Path) -> dict[str, str]:
    """The pages timed, by what they are: of the run, of a compile on its last rank, its timelines."""
    import sqlite3

    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        run, last = conn.execute("SELECT run_id, max(rank) FROM sources").fetchone()
        (compile,) = conn.execute("SELECT id FROM compiles WHERE rank = ? AND compile_id != '-/-' ORDER BY id LIMIT 1",
                                  (last,)).fetchone()
    finally:
        conn.close()
    base = f"/{db.stem}/-/tlindex"
    return {"run page": f"{base}/run/{run}", "run page .json": f"{base}/run/{run}.json",
            "stack trie": f"{base}/trie/{run}", f"compile page (rank {last})": f"{base}/compile/{compile}",
            "timeline: whole run": f"{base}/run/{run}/chromium.json",
            "timeline: overview": f"{base}/run/{run}/chromium.json?overview=1",
            "timeline: one rank": f"{base}/run/{run}/chromium.json?rank={last}"}


def sent_bytes(url: str, gzipped: bool) -> int:
    request = urllib.request.Request(url, headers={"accept-encoding": "gzip" if gzipped else "identity"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return len(answer.read())  # urllib decodes nothing: what was sent


def time_pages(db: Path, rounds: int, port: int) -> dict[str, dict]:
    figures = {}
    server = serve(db, port)
    try:
        for what, where in page_urls(db).items():
            url = f"http://127.0.0.1:{port}{where}"
            first, warm = timed(lambda: fetch(url), rounds)
            figures[what] = {"first": first, "s": warm}
            if what.startswith("timeline"):
                figures[what] |= {"bytes": sent_bytes(url, False), "gzip bytes": sent_bytes(url, True)}
    finally:
        server.terminate()
        server.wait(10)
    return figures


def time_reports(work: Path, folder: Path, db: Path, rounds: int) -> dict[str, dict]:
    """tlindex report of the folder and of the database, and tlparse --all-ranks-html of the folder, alternated."""
    out = work / "ranks-out"
    commands = {"tlindex report FOLDER": [*TLINDEX, "report", str(folder), "-o", str(out), "--overwrite", "--silent"],
                "tlindex report --db (render only)": [*TLINDEX, "report", "--db", str(db), "--run", "1", "-o",
                                                      str(out), "--overwrite", "--silent"]}
    beside = Path(sys.executable).parent / "tlparse"  # the test extras' tlparse 0.4.3, else benchmarks' own venv
    binary = str(beside) if beside.exists() else tlparse_binary(False)
    if binary:
        commands["tlparse --all-ranks-html"] = [binary, str(folder), "--all-ranks-html", "-o", str(out),
                                                "--no-browser", "--overwrite"]
    found: dict[str, list[dict]] = {what: [] for what in commands}
    for _ in range(rounds):
        for what, command in commands.items():
            shutil.rmtree(out, ignore_errors=True)
            found[what].append(measure(command))
    return {what: {"s": statistics.median(r["seconds"] for r in runs),
                   "cpu s": statistics.median(r["cpu_seconds"] for r in runs),
                   "peak MB": statistics.median(r["peak_rss_mb"] for r in runs)} for what, runs in found.items()}


def measure_ranks(work: Path, ranks: int, rounds: int, port: int) -> dict:
    folder = build_ranks(work / f"ranks-{ranks}", ranks)
    db = work / f"ranks{ranks}.db"
    ingest = None
    if not db.exists():
        started = time.perf_counter()
        subprocess.run([*TLINDEX, "ingest", str(folder), "--db", str(db), "--silent"], check=True)
        ingest = time.perf_counter() - started
    found = {"ranks": ranks, "log MB": sum(p.stat().st_size for p in folder.iterdir()) / 1e6, "ingest s": ingest,
             "pages": time_pages(db, rounds, port), "reports": time_reports(work, folder, db, rounds)}
    print(json.dumps(found, indent=1))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tlindex-scale"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=8766)
    options = parser.parse_args()
    options.work.mkdir(parents=True, exist_ok=True)
    measure_ranks(options.work, options.ranks, options.rounds, options.port)


if __name__ == "__main__":
    main()
