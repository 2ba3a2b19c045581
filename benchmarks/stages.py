"""Where ingest time goes, stage by stage, on one log in one process (no workers).

    python benchmarks/stages.py LOG [--rounds 3]

Each stage adds one step to the previous one, so the differences are the cost of each step:

  floor       read 1 MiB blocks, split lines, md5 each payload, insert one row per record (sqlite3,
              no indexes): the bare minimum any indexer of this format pays in CPython
  reader      tlindex's LogReader: records with parsed envelopes, payloads md5-verified
  normalize   + the normalizer, its rows dropped (no SQLite)
  stage       + the staging writer (rows and compressed payloads into a private SQLite file)
  ingest      the whole `tlindex ingest --jobs 1` (+ merge into traces.db, runs, FTS indexes)

Prints a table (seconds and MB/s, medians) and writes benchmarks/out/stages.json.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlindex.ingest.normalize import FileNormalizer  # noqa: E402
from tlindex.ingest.reader import Clock, LogReader  # noqa: E402
from tlindex.ingest.task import Task, run_task  # noqa: E402

BLOCK = 1 << 20


def floor(path: Path) -> None:
    """Read, split into lines, md5 the payload of each record, insert a row per record."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE r (line INTEGER, envelope BLOB, md5 TEXT, size INTEGER)")
    rows, record, payload, line_no, rest = [], None, [], 0, b""
    with open(path, "rb") as file:
        while block := file.read(BLOCK):
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            for line in lines:
                line_no += 1
                if line.startswith(b"\t"):
                    payload.append(line[1:])
                    continue
                if record is not None:
                    body = b"\n".join(payload)
                    rows.append((record[0], record[1], hashlib.md5(body).hexdigest(), len(body)))
                record, payload = (line_no, line), []
                if len(rows) >= 1000:
                    conn.executemany("INSERT INTO r VALUES (?, ?, ?, ?)", rows)
                    rows.clear()
    conn.executemany("INSERT INTO r VALUES (?, ?, ?, ?)", rows)
    conn.commit()


class NullSink:
    def add(self, table: str, row: tuple) -> None:
        pass

    def add_payload(self, digest: str, text: str, size: int) -> None:
        pass


def reader(path: Path, normalize: bool) -> None:
    stat = os.stat(path)
    with open(path, "rb") as disk:
        stream = io.BufferedReader(disk, BLOCK)
        normalizer = FileNormalizer(NullSink(), 1, path.name) if normalize else None
        for item in LogReader(stream, Clock(stat.st_mtime)):
            if normalizer is not None:
                normalizer.feed(item)
        if normalizer is not None:
            normalizer.finish()


def stage(path: Path, work: Path) -> None:
    staging = work / "staging.db"
    staging.unlink(missing_ok=True)
    run_task(Task(str(path), str(staging)))


def ingest(path: Path, work: Path) -> None:
    db = work / "traces.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "tlindex", "ingest", str(path), "--db", str(db), "--jobs", "1",
                    "--silent"], check=True, cwd=ROOT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    mb = args.log.stat().st_size / 2**20
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        stages = {"floor": lambda: floor(args.log), "reader": lambda: reader(args.log, False),
                  "normalize": lambda: reader(args.log, True), "stage": lambda: stage(args.log, work),
                  "ingest": lambda: ingest(args.log, work)}
        times: dict[str, list[float]] = {name: [] for name in stages}
        for _ in range(args.rounds):
            for name, run in stages.items():
                started = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - started)
    result = {"log": args.log.name, "mb": round(mb), "rounds": args.rounds,
              "stages": {name: round(statistics.median(values), 2) for name, values in times.items()}}
    print(f"{args.log.name}: {mb:,.0f} MB, {args.rounds} rounds, medians, one process")
    print(f"{'stage':10} {'s':>7} {'MB/s':>6} {'+s':>6}")
    previous = 0.0
    for name, seconds in result["stages"].items():
        print(f"{name:10} {seconds:7.2f} {mb / seconds:6.0f} {seconds - previous if name != 'floor' else 0:6.2f}")
        previous = seconds if name != "floor" else 0.0
    out = ROOT / "benchmarks" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "stages.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
