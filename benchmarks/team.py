"""A team's server under load: clients pushing real logs while readers crawl the pages (issue 63).

    python benchmarks/team.py [--work DIR] [--clients 4] [--readers 4] [--upload-mb 256] [--json OUT]

`tlindex serve --uploads` runs as a process on a database holding the tests' sample set. Then, at once:
- `--clients` clients push the tests' real logs (tests/data and the version matrix: single logs, `.gz`
  bodies and folders of 2 to 4 ranks packed as `.tar.gz` while they are sent), each upload followed to its run;
- `--readers` readers crawl the route table (tests/crawl.route_seeds: every page with the database's own values)
  over and over, each request timed;
- the server's RSS (and its ingest child's) is sampled every 50 ms.
After that phase, on an idle server: a 27 MB log (built from the real logs as benchmarks/ingest.py builds its
inputs) is pushed; the time from the end of its upload to its run being visible is set beside the time the same
log takes to ingest with `tlindex ingest`; and a `--upload-mb` log is posted to time the spool's intake on loopback
(the POST answers once the body is on disk and hashed). The figures are printed as JSON (and to --json).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from crawl import route_seeds  # noqa: E402
from ingest import build_file, source_records  # noqa: E402

import tlindex.push  # noqa: E402
from tlindex.push import push  # noqa: E402

tlindex.push.POLL_S = 0.05  # the run seen done within 50 ms of it being so

DATA = ROOT / "tests" / "data"
SAMPLE = ("recompiles", "graph_breaks", "dynamic")


def tlindex(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tlindex", *args], capture_output=True, text=True, check=True,
                          **kwargs)


def pushed_inputs(work: Path) -> list[Path]:
    """What the clients push: each scenario folder of the sample set and of the version matrix (multi-rank ones
    whole), a few of them as single logs, and one log as a .gz."""
    folders = sorted(p for p in DATA.iterdir() if p.is_dir() and p.name not in ("versions", "series", *SAMPLE))
    folders += sorted(p for p in (DATA / "versions").glob("*/*") if p.is_dir())
    inputs: list[Path] = []
    for folder in folders:
        logs = sorted(folder.glob("*.log"))
        if len(logs) == 1:
            inputs.append(logs[0])
        elif logs:
            inputs.append(folder)
    gz = work / "one.log.gz"
    with open(next(p for p in inputs if p.is_file()), "rb") as log, gzip.open(gz, "wb") as out:
        shutil.copyfileobj(log, out)
    return [*inputs, gz]


class Sampler(threading.Thread):
    """The peak RSS of a process and the largest of its children's (an upload's ingest, a SQL worker), every 50 ms."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.child_peak, self.stop = pid, 0, 0, threading.Event()

    @staticmethod
    def rss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/status") as status:
                return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            return 0

    def children(self) -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1]) == self.pid:
                    found.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
        return found

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.rss(self.pid))
            self.child_peak = max([self.child_peak, *(self.rss(child) for child in self.children())])
            time.sleep(0.05)


def reader(urls: list[str], stop: threading.Event, times: list[float], errors: list[str]) -> None:
    while not stop.is_set():
        for url in urls:
            if stop.is_set():
                return
            started = time.perf_counter()
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    response.read()
            except urllib.error.HTTPError as error:
                if error.code >= 500:
                    errors.append(f"{url}: {error.code}")
            except OSError as error:
                errors.append(f"{url}: {error}")
            times.append(time.perf_counter() - started)


def client(url: str, token: str, inputs: list[Path], said: list[dict]) -> None:
    for path in inputs:
        started = time.perf_counter()
        code = push(url, [str(path)], token=token, wait=True, say=lambda line: None)
        said.append({"input": path.name, "exit": code, "s": round(time.perf_counter() - started, 3)})


def p95(values: list[float]) -> float:
    return round(statistics.quantiles(values, n=20)[-1], 3) if len(values) >= 20 else round(max(values), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--upload-mb", type=int, default=256)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="tlindex-team-"))
    shutil.rmtree(work / "server", ignore_errors=True)
    (work / "server").mkdir(parents=True)
    db = work / "server" / "traces.db"
    tlindex("ingest", *(str(DATA / name) for name in SAMPLE), "--db", str(db), "--silent")
    token = tlindex("token", "create", "bench", "--db", str(db)).stdout.strip().splitlines()[-1]
    inputs = pushed_inputs(work)
    big = work / "big" / "dedicated_log_torch_trace_27mb.log"
    spooled = work / "spool" / f"dedicated_log_torch_trace_{args.upload_mb}mb.log"
    records = source_records()
    for path, size, pid in ((big, 27 << 20, 4343), (spooled, args.upload_mb << 20, 4545)):
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            build_file(path, records, size, pid, None, distinct=True)
    server = subprocess.Popen([sys.executable, "-m", "tlindex", "serve", str(db), "--uploads", "--port",
                               str(args.port), "--max-upload", "4G"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{args.port}"
    try:
        result = measure(args, server, base, db, token, inputs, big, spooled, work)
    finally:
        server.terminate()
        server.wait(30)
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


def measure(args, server, base: str, db: Path, token: str, inputs: list[Path], big: Path, spooled: Path,
            work: Path) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{base}/traces/-/tlindex", timeout=2).read()
            break
        except OSError:
            time.sleep(0.2)
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    urls = route_seeds(conn, f"{base}/traces")
    conn.close()
    sampler = Sampler(server.pid)
    sampler.start()
    stop, times, errors, said = threading.Event(), [], [], []
    readers = [threading.Thread(target=reader, args=(urls[i::args.readers], stop, times, errors), daemon=True)
               for i in range(args.readers)]
    clients = [threading.Thread(target=client, args=(f"{base}/traces", token, inputs[i::args.clients], said))
               for i in range(args.clients)]
    started = time.perf_counter()
    for thread in readers + clients:
        thread.start()
    for thread in clients:
        thread.join()
    loaded = time.perf_counter() - started
    stop.set()
    for thread in readers:
        thread.join()
    visible = _visible_after_upload(base, token, big)
    ingest_s = _ingest_time(big, work)
    intake = _intake(base, token, spooled)
    sampler.stop.set()
    sampler.join()
    return {"uploads": len(said), "uploads_failed": [s for s in said if s["exit"] != 0],
            "load_phase_s": round(loaded, 1), "reads": len(times), "read_p50_s": round(statistics.median(times), 3),
            "read_p95_s": p95(times), "read_max_s": round(max(times), 3), "read_errors": errors[:5],
            "big_log_mb": round(big.stat().st_size / 2**20, 1), "big_visible_after_upload_s": visible,
            "big_ingest_alone_s": ingest_s, "intake_mb": args.upload_mb, "intake_mb_per_s": intake,
            "server_peak_rss_mb": round(sampler.peak / 2**20, 1),
            "child_peak_rss_mb": round(sampler.child_peak / 2**20, 1)}  # a child: an ingest or a SQL worker


def _visible_after_upload(base: str, token: str, log: Path) -> float:
    """Seconds from the end of the log's upload (the POST's answer) to its run being visible (its status done)."""
    answered = []
    code = push(f"{base}/traces", [str(log)], token=token, wait=True,
                say=lambda line: answered.append(time.perf_counter()))
    assert code == 0 and len(answered) >= 2, code
    return round(answered[1] - answered[0], 3)  # "uploaded: …", then "run N: …" once it is done


def _ingest_time(log: Path, work: Path) -> float:
    db = work / "alone.db"
    for stale in work.glob("alone.db*"):
        stale.unlink()
    tlindex("ingest", str(DATA / "recompiles"), "--db", str(db), "--silent")
    started = time.perf_counter()
    tlindex("ingest", str(log), "--db", str(db), "--silent")
    return round(time.perf_counter() - started, 3)


def _intake(base: str, token: str, log: Path) -> float:
    """MB/s of one POST of the log: streamed to the spool, hashed, recorded (the ingest after is not timed)."""
    started = time.perf_counter()
    push(f"{base}/traces", [str(log)], token=token, say=lambda line: None)
    return round(log.stat().st_size / 2**20 / (time.perf_counter() - started), 1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
