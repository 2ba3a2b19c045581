"""How long the trend and its CI gate take on a database of many runs.

    python benchmarks/trend.py [--runs 100] [--db DB] [--rounds 5]

The database holds the four days of tests/data/series copied into runs/4 folders (each folder's four logs
are four runs, one a day, as a model trained daily gives), ingested once (kept at DB for the next rounds).
Times, medians of the rounds: `health` (every run's row of the view run_health), the trend with the gate
on its newest run against the first (`tlindex trend --baseline ... --fail-on ...` in the library, the
diff of the two runs included), the same command as a process (Python's start and imports included), and
the trend and graph-breaks pages served by Datasette (in process, through its test client).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlindex.answers.gate import parse_fail_on  # noqa: E402
from tlindex.answers.health import health  # noqa: E402
from tlindex.answers.trend import trend  # noqa: E402
from tlindex.ingest.pipeline import ingest  # noqa: E402
from tlindex.store.db import connect_read_only  # noqa: E402

SERIES = ROOT / "tests" / "data" / "series"
FAIL_ON = "compile_time>+20%,recompiles>+0,graph_breaks>+0,failures>0"


def build(db: Path, runs: int) -> None:
    """A database of `runs` runs: the series' four logs copied into runs/4 folders, ingested."""
    with tempfile.TemporaryDirectory(prefix="tlindex-trend-") as tmp:
        for n in range((runs + 3) // 4):
            folder = Path(tmp) / f"model-{n:03d}"
            folder.mkdir()
            for log in sorted(SERIES.glob("*.log"))[: runs - 4 * n]:
                shutil.copy2(log, folder / log.name)
        summary = ingest(db, [tmp], jobs=2)
        assert not summary.problems, summary.problems


def timed(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(db: Path, rounds: int) -> dict[str, float]:
    clauses = parse_fail_on(FAIL_ON)
    conn = connect_read_only(db)
    try:
        first = conn.execute("SELECT id FROM runs ORDER BY start_time, id LIMIT 1").fetchone()[0]
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
        figures = {"runs": runs,
                   "health_s": timed(lambda: health(conn), rounds),
                   "trend_and_gate_s": timed(lambda: trend(conn, baseline=str(first), clauses=clauses), rounds)}
    finally:
        conn.close()
    command = [sys.executable, "-m", "tlindex", "trend", "--db", str(db), "--baseline", str(first), "--fail-on", FAIL_ON]
    figures["command_s"] = timed(lambda: subprocess.run(command, capture_output=True, check=False), rounds)
    figures.update(pages(db, rounds))
    return figures


def pages(db: Path, rounds: int) -> dict[str, float]:
    """The trend page and the graph-breaks page over every run, each rendered by Datasette (HTML)."""
    import asyncio

    from datasette.app import Datasette

    async def measure_pages() -> dict[str, float]:
        datasette = Datasette([str(db)])
        await datasette.invoke_startup()
        found = {}
        for name, path in (("trend_page_s", "/-/tlindex/trend"), ("graph_breaks_page_s", "/-/tlindex/graph-breaks")):
            url = f"/{db.stem}{path}"
            assert (await datasette.client.get(url)).status_code == 200, url
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                await datasette.client.get(url)
                times.append(time.perf_counter() - started)
            found[name] = statistics.median(times)
        return found

    return asyncio.run(measure_pages())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--db", type=Path, default=ROOT / "benchmarks" / "out" / "trend.db")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not args.db.exists():
        args.db.parent.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        build(args.db, args.runs)
        print(f"built {args.db} ({args.runs} runs) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    for name, value in measure(args.db, args.rounds).items():
        print(f"{name:>18}: {value:.3f}" if isinstance(value, float) else f"{name:>18}: {value}")


if __name__ == "__main__":
    main()
