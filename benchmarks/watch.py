"""How long `tlindex watch` takes from a record written to the run page showing it.

    python benchmarks/watch.py [--ranks 256] [--every 2] [--trials 5] [--work DIR]

A job of --ranks ranks is made of renumbered copies of the real ddp_4ranks_diverge logs (tests/many_ranks.py), each
rank's log written up to its [3/0] dynamo_start: every rank compiling [3/0]. It is ingested, then `tlindex watch
--every` and `tlindex serve` run on it as processes. Each trial appends to one rank's log its records up to its [4/0]
dynamo_start (what torch writes as that rank moves on) and polls the run page's JSON twin until that rank is said to
be compiling [4/0]: the delay is from the write to the page's data showing it. A browser showing the page adds up to
its refresh period (tlindex.pages.run.REFRESH_S).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

import many_ranks  # noqa: E402

TLINDEX = [sys.executable, "-m", "tlindex"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def compiling(url: str) -> dict:
    """{rank: compile id} of what the run page says each rank is compiling."""
    with urllib.request.urlopen(url, timeout=5) as response:
        found = json.loads(response.read())["run"]["findings"]
    return {item["rank"]: item["compile_id"] for f in found if f["kind"] in ("mid_compile", "rank_behind")
            for item in f["items"]}


def wait_for(predicate, timeout: float = 120.0) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise TimeoutError("not shown in time")
        time.sleep(0.05)
    return time.monotonic()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="tlindex-watch-bench-"))
    logs, db = work / "logs", work / "traces.db"
    sources = list(many_ranks.rank_files(many_ranks.DATA / "ddp_4ranks_diverge").values())
    lines = [path.read_bytes().splitlines(keepends=True) for path in sources]
    cuts = [(many_ranks.cut_at(found, "3/0"), many_ranks.cut_at(found, "4/0")) for found in lines]
    logs.mkdir(parents=True)
    for rank in range(args.ranks):  # every rank's log up to its [3/0] dynamo_start
        original = rank % len(sources)
        with open(logs / f"dedicated_log_torch_trace_rank_{rank}_bench.log", "wb") as out:
            out.writelines(many_ranks.renumbered(line, rank, 100_000 + rank) for line in lines[original][:cuts[original][0]])
    subprocess.run([*TLINDEX, "ingest", str(logs), "--db", str(db), "--silent"], check=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}/{db.stem}/-/tlindex/run/1.json"
    serve = subprocess.Popen([*TLINDEX, "serve", str(db), "-p", str(port)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    watch = subprocess.Popen([*TLINDEX, "watch", str(logs), "--db", str(db), "--every", str(args.every)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    delays = []
    try:
        wait_for(lambda: _answers(url))
        for trial in range(args.trials):
            rank = 1 + trial * (args.ranks // max(1, args.trials))
            original = rank % len(sources)
            start, end = cuts[original]
            with open(logs / f"dedicated_log_torch_trace_rank_{rank}_bench.log", "ab") as out:
                out.writelines(many_ranks.renumbered(line, rank, 100_000 + rank) for line in lines[original][start:end])
                out.flush()
                os.fsync(out.fileno())
            written = time.monotonic()
            shown = wait_for(lambda: compiling(url).get(rank) == "4/0")
            delays.append(shown - written)
            print(f"rank {rank}: [4/0] shown {shown - written:.2f} s after it was written", flush=True)
    finally:
        for proc in (watch, serve):
            proc.terminate()
            proc.wait(timeout=30)
    print(f"{args.ranks} ranks, watch --every {args.every:g}: delay median {statistics.median(delays):.2f} s, "
          f"max {max(delays):.2f} s over {len(delays)} trials (a browser adds up to its refresh period)")


def _answers(url: str) -> bool:
    try:
        return bool(compiling(url))
    except OSError:
        return False


if __name__ == "__main__":
    main()
