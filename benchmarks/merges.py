"""When each chunk of a split log is parsed and merged, and how busy the cores are meanwhile.

    python benchmarks/merges.py LOG [--jobs 2] [--chunk-mb MB]

Ingests LOG (big enough to be split: 16 MB or more) into a new database in a temporary folder, in this
process, as `tlindex ingest` does, and prints:

  - one line per chunk: its size, when the main process took the worker's result (a result waits while the main
    process merges) and when it merged the chunk (chunks merge in order: one parsed early waits for the one before);
  - the main process's time in merges and in the full-text indexes between them, against the whole run;
  - the machine's busy cores, sampled every 0.25 s from /proc/stat (Linux), and how long the run went on
    with less than one and a half busy after the last result was taken: the serial tail.

It says where the wall time of a split ingest goes beyond its CPU time over the cores; docs/benchmarks.md
("Ingest at 6x tlparse") quotes it. The machine's other work shows in the busy cores: run it alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlindex import Database  # noqa: E402
from tlindex.ingest import chunks, pipeline  # noqa: E402

SAMPLE_S = 0.25


def busy_cores(samples: list[tuple[float, float]], stop: threading.Event, started: float) -> None:
    """(seconds since `started`, busy cores) every SAMPLE_S until `stop`, from /proc/stat's first line."""
    def jiffies() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        idle = values[3] + values[4]
        return sum(values[:8]) - idle, sum(values[:8])

    cores = os.cpu_count() or 1
    busy, total = jiffies()
    while not stop.wait(SAMPLE_S):
        now_busy, now_total = jiffies()
        if now_total > total:
            samples.append((time.perf_counter() - started, cores * (now_busy - busy) / (now_total - total)))
        busy, total = now_busy, now_total


def instrument(started: float, taken: dict, merged: list, between: list) -> None:
    """Record when the main process takes each task's result, each chunk's merge, each index refresh."""
    take, merge_chunk, refresh = pipeline.Merger.__call__, chunks.SplitFile._merge, pipeline.Merger.between

    def on_result(self, result):
        item = self.by_staging[result.staging]
        taken[item.chunk] = (item.size, time.perf_counter() - started)
        return take(self, result)

    def on_merge(self, conn, index, result, attach=None):
        begun = time.perf_counter() - started
        merge_chunk(self, conn, index, result, attach)
        merged.append((index, begun, time.perf_counter() - started))

    def on_between(self):
        begun = time.perf_counter() - started
        refresh(self)
        between.append((begun, time.perf_counter() - started))

    pipeline.Merger.__call__, chunks.SplitFile._merge, pipeline.Merger.between = on_result, on_merge, on_between


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--chunk-mb", type=float, help="chunks of this size (default: as `tlindex ingest` splits)")
    args = parser.parse_args()
    taken: dict[int, tuple[int, float]] = {}  # chunk: (bytes, when the main process took its result)
    merged: list[tuple[int, float, float]] = []
    between: list[tuple[float, float]] = []
    samples: list[tuple[float, float]] = []
    started = time.perf_counter()
    instrument(started, taken, merged, between)
    stop = threading.Event()
    sampler = threading.Thread(target=busy_cores, args=(samples, stop, started), daemon=True)
    sampler.start()
    with tempfile.TemporaryDirectory(prefix="tlindex-merges-") as folder:
        with Database(Path(folder) / "traces.db", create=True) as db:
            db.ingest([str(args.log)], jobs=args.jobs,
                      chunk_bytes=int(args.chunk_mb * 2**20) if args.chunk_mb else None)
        wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    print(f"{args.log.name}: {args.log.stat().st_size / 2**20:,.0f} MiB, {len(merged)} chunks, --jobs {args.jobs}")
    if not merged:
        print("not split into chunks (a log is from 16 MB, with more than one job): nothing to show")
        return
    print("| chunk | MiB | its result taken at s | merged s |\n|---|---|---|---|")
    for index, begun, ended in merged:
        size, at = taken.get(index, (0, 0.0))
        print(f"| {index} | {size / 2**20:,.1f} | {at:.2f} | {begun:.2f}-{ended:.2f} |")
    last_taken = max((at for _, at in taken.values()), default=0.0)
    tail = sum(SAMPLE_S for at, cores in samples if at > last_taken and cores < 1.5)
    print(f"wall {wall:.2f} s; main process merging {sum(e - b for _, b, e in merged):.2f} s, the first merge at "
          f"{min((b for _, b, _ in merged), default=0.0):.2f} s; indexes between merges "
          f"{sum(e - b for b, e in between):.2f} s; the last result taken at {last_taken:.2f} s; after it, "
          f"{tail:.2f} s with under 1.5 cores busy")
    print("busy cores: " + " ".join(f"{at:.1f}:{cores:.1f}" for at, cores in samples))


if __name__ == "__main__":
    main()
