"""What every page, canned query and command costs as a database grows from 10 to thousands of runs.

    python benchmarks/scale.py [--runs 10,300,3000] [--ranks 256] [--work DIR] [--rounds 3] [--only PAGE,...]
                               [--json OUT]

For each N, a database of N log folders is built once (kept in --work for the next rounds): the tests' real
fixtures (tests/data, `series` aside: it is four runs by design, and versions/, the version matrix), one fixture a
folder in turn, each folder's copy with times of its own (its glog times moved to start N hours after the first
folder's: the runs interleave as a team's nightly runs do, and no two files are byte-identical), ingested in one
`tlindex ingest` (each folder one run or two, by the fixture: a cold and a warm start are two runs). Then, with
`tlindex serve` on it as a process, started after the ingest:
- every page of the route table (generated from `tlindex.pages.PAGES`: a page added later is timed the day it
  lands), each with its JSON twin, about one run in the middle of the database;
- every canned query (`queries/*.sql`) through Datasette, with `run=` given and without;
- the commands `runs`, `findings`, `search`, `trend`, `show run` and `report --run` (of a 4-rank run) as whole
  processes;
each as its first request (the first reader's costs: the server's, SQLite's page cache) and the median of --rounds
after it; the server's RSS after the crawl. A table per page with the growth factor from the smallest N to the
largest follows. `--ranks 256` also builds one run of 256 rank files from real multi-rank logs (benchmarks/ranks.py)
and times its ingest, its pages, its timelines' bytes and `tlindex report` against `tlparse --all-ranks-html`.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tlindex.answers.queries import load_queries  # noqa: E402
from tlindex.pages import PAGES, path  # noqa: E402

DATA = ROOT / "tests" / "data"
TLINDEX = [sys.executable, "-m", "tlindex"]
# A value of each placeholder, belonging to the run chosen (the middle run that has one of that kind).
SAMPLES = {
    "run": "SELECT id FROM runs ORDER BY abs(id - :mid), id LIMIT 1",
    "a": "SELECT id FROM runs ORDER BY abs(id - :mid), id LIMIT 1",
    "b": "SELECT id FROM runs WHERE id > :mid ORDER BY id LIMIT 1",
    "compile": "SELECT id FROM compiles WHERE compile_id != '-/-' ORDER BY abs(run_id - :mid), id LIMIT 1",
    "ca": "SELECT id FROM compiles WHERE compile_id != '-/-' ORDER BY abs(run_id - :mid), id LIMIT 1",
    "cb": "SELECT id FROM compiles WHERE compile_id != '-/-' AND run_id > :mid ORDER BY run_id, id LIMIT 1",
    "piece": "SELECT p.id FROM piece_compiles p JOIN compiles c ON c.id = p.compile ORDER BY abs(c.run_id - :mid), "
             "p.id LIMIT 1",
    "artifact": "SELECT a.id FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE a.payload IS NOT NULL "
                "ORDER BY abs(c.run_id - :mid), a.id LIMIT 1",
    "hash": "SELECT a.payload FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE a.payload IS NOT NULL "
            "ORDER BY abs(c.run_id - :mid), a.id LIMIT 1",
    "ranked": "SELECT run_id FROM sources WHERE rank IS NOT NULL GROUP BY run_id HAVING count(DISTINCT rank) = 4 "
              "ORDER BY abs(run_id - :mid), run_id LIMIT 1",
    "node": "SELECT 1",
    "ext": "SELECT ''",
}
_NEAR = "ORDER BY abs(c.run_id - :mid), a.id LIMIT 1"
# Pages that show one kind of thing take a value that has it (a vLLM run, a resume function, a mapping).
PAGE_SAMPLES = {
    "vllm": {"run": "SELECT c.run_id FROM piece_compiles p JOIN compiles c ON c.id = p.compile "
                    "ORDER BY abs(c.run_id - :mid), p.id LIMIT 1"},
    "bytecode": {"compile": "SELECT a.compile FROM artifacts a JOIN compiles c ON c.id = a.compile "
                            "WHERE a.name LIKE '%\\_MODIFIED\\_BYTECODE' ESCAPE '\\' " + _NEAR},
    "provenance": {"artifact": "SELECT a.id FROM artifacts a JOIN compiles c ON c.id = a.compile WHERE a.name = "
                               "'inductor_provenance_tracking_node_mappings' AND a.payload IS NOT NULL " + _NEAR},
}
QUERY_STRINGS = {"search": "q=forward", "tree": "q=forward", "diff_pick": "a={a}&b={b}",
                 "artifact_diff": "a={artifact}&b={artifact}"}


# These first, so that a small database has a run of each kind of page (vLLM, provenance, resume functions, ranks).
FIRST = ("vllm_piecewise", "provenance", "closures", "graph_breaks", "ddp_4ranks_diverge", "recompiles")


def fixtures() -> list[Path]:
    found = [folder for folder in sorted(DATA.iterdir())
             if folder.is_dir() and folder.name not in ("series", "versions")
             and any(folder.glob("*.log"))]
    return sorted(found, key=lambda folder: (FIRST.index(folder.name) if folder.name in FIRST else len(FIRST)))


GLOG_RE = re.compile(rb"^([VIWEC])(\d{4} \d\d:\d\d:\d\d\.\d{6})")
FIRST_START = datetime(2026, 1, 2)  # folder n's first record is n hours after this (no year boundary within 8,000)


def build(db: Path, folders: int, work: Path) -> None:
    """N folders of the fixtures, each with times of its own, ingested into `db` in one command (kept when it
    exists)."""
    if db.exists():
        return
    logs = work / f"logs-{folders}"
    kinds = fixtures()
    for n in range(folders):
        folder = logs / f"nightly-{n:05d}"
        if folder.exists():
            continue
        partial = logs / f".nightly-{n:05d}"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        paths = sorted(kinds[n % len(kinds)].glob("*.log"))
        shift = FIRST_START + timedelta(hours=n) - min(first_time(path) for path in paths)
        for log in paths:
            retimed(log, partial / log.name, shift)
        partial.rename(folder)
    started = time.perf_counter()
    subprocess.run([*TLINDEX, "ingest", str(logs), "--db", str(db), "--silent"], check=True)
    print(f"built {db.name}: {folders} folders in {time.perf_counter() - started:.0f} s, "
          f"{db.stat().st_size / 1e6:.0f} MB", file=sys.stderr)


def _glog_time(stamp: bytes) -> datetime:
    return datetime.strptime("2026" + stamp.decode(), "%Y%m%d %H:%M:%S.%f")


def first_time(log: Path) -> datetime:
    with open(log, "rb") as lines:
        for line in lines:
            found = GLOG_RE.match(line)
            if found:
                return _glog_time(found.group(2))
    return FIRST_START


def retimed(log: Path, out: Path, shift: timedelta) -> None:
    """The log with every glog time moved by `shift` (payload lines, and the payloads' md5, as they were)."""
    with open(log, "rb") as lines, open(out, "wb") as written:
        for line in lines:
            found = GLOG_RE.match(line)
            if found:
                moved = (_glog_time(found.group(2)) + shift).strftime("%m%d %H:%M:%S.%f").encode()
                line = found.group(1) + moved + line[found.end():]
            written.write(line)


def samples(db: Path) -> dict[str, dict[str, object]]:
    """The placeholders' values of every page (by name; "" for the common ones)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        mid = conn.execute("SELECT (min(id) + max(id)) / 2 FROM runs").fetchone()[0]

        def value(sql: str) -> object:
            return (conn.execute(sql, {"mid": mid}).fetchone() or [None])[0]
        common = {name: value(sql) for name, sql in SAMPLES.items()}
        return {"": common, **{page: {**common, **{name: value(sql) for name, sql in overrides.items()}}
                               for page, overrides in PAGE_SAMPLES.items()}}
    finally:
        conn.close()


def urls(db: Path, sampled: dict[str, dict[str, object]], only: set[str] | None) -> list[tuple[str, str]]:
    """(what, URL path) of every page of the route table with its JSON twin, and every canned query."""
    base = "/" + db.stem
    out = []
    for page in PAGES:
        if only and page.name not in only:
            continue
        values = sampled.get(page.name, sampled[""])
        names = page.placeholders
        if any(values.get(name) is None for name in names):
            continue
        query = QUERY_STRINGS.get(page.name, "").format(**values)
        where = path(page.name, **{name: values[name] for name in names})
        out.append((page.name, base + where + (f"?{query}" if query else "")))
        if page.json_twin:
            out.append((page.name + ".json", base + where + ".json" + (f"?{query}" if query else "")))
    values = sampled[""]
    for name, canned in sorted(load_queries().items()):
        if only and f"query:{name}" not in only:
            continue
        params = set(re.findall(r"(?<!:):(\w+)", canned.sql))
        given = {"compile": values["compile"]} if "compile" in params else {}
        out.append((f"query:{name}", f"{base}/{name}.json?_size=max&" + "&".join(f"{k}={v}" for k, v in given.items())))
        if "run" in params:
            out.append((f"query:{name}?run", f"{base}/{name}.json?_size=max&run={values['run']}&"
                        + "&".join(f"{k}={v}" for k, v in given.items())))
    return out


def serve(db: Path, port: int) -> subprocess.Popen:
    server = subprocess.Popen([*TLINDEX, "serve", str(db), "--port", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/-/versions.json", timeout=1).read()
            return server
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    server.kill()
    raise SystemExit("tlindex serve did not answer")


TIMEOUT_S = 60.0  # a request still unanswered then is written down as ">60 s" (status 0) and not asked again


def fetch(url: str) -> tuple[float, int, int]:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
            size, status = len(answer.read()), answer.status
    except urllib.error.HTTPError as error:
        size, status = len(error.read()), error.code
    except (TimeoutError, urllib.error.URLError):
        return TIMEOUT_S, -1, 0
    return time.perf_counter() - started, status, size


def timed(run, rounds: int) -> tuple[float, float]:
    """(the first call, the median of `rounds` calls after it); a first call past TIMEOUT_S is not repeated."""
    started = time.perf_counter()
    run()  # the first request: what the first reader pays
    first = time.perf_counter() - started
    if first >= TIMEOUT_S:
        return TIMEOUT_S, TIMEOUT_S
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return first, statistics.median(times)


def rss_kb(pid: int) -> int:
    """The resident memory of a process and its children, in kB."""
    total = 0
    for task in [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]:
        for line in Path(f"/proc/{task}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def measure(db: Path, rounds: int, only: set[str] | None, port: int) -> dict[str, dict]:
    sampled = samples(db)
    values = sampled[""]
    figures: dict[str, dict] = {}
    server = serve(db, port)
    try:
        for what, where in urls(db, sampled, only):
            url = f"http://127.0.0.1:{port}{where}"
            status: list[int] = []
            first, seconds = timed(lambda: status.append(fetch(url)[1]), rounds)
            figures[what] = {"s": seconds, "first": first, "status": status[-1], "url": where}
        figures["serve RSS MB"] = {"s": rss_kb(server.pid) / 1024, "status": 0, "url": ""}
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:  # a request still running holds it: stop it all the same
            server.kill()
            server.wait()
    report = db.parent / f"{db.stem}-report"
    commands = {"cmd: runs": ["runs"], "cmd: runs --json": ["runs", "--json"], "cmd: findings": ["findings"],
                "cmd: search forward": ["search", "forward"], "cmd: trend": ["trend"],
                "cmd: show run": ["show", "run", str(values["run"])],
                "cmd: report --run (4 ranks)": ["report", "--run", str(values["ranked"]), "-o", str(report),
                                                "--overwrite", "--silent"]}
    for what, args in commands.items():
        if only and what not in only:
            continue
        codes: list[int] = []
        run = [*TLINDEX, *args, "--db", str(db)]
        first, seconds = timed(lambda: codes.append(command(run)), rounds)
        figures[what] = {"s": seconds, "first": first, "status": codes[-1], "url": " ".join(args)}
    return figures


def command(run: list[str]) -> int:
    try:
        return subprocess.run(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        return -1


def table(results: dict[int, dict[str, dict]]) -> str:
    """Each figure at each size as `warm (first)`: the median after the first request, and the first."""
    sizes = sorted(results)
    rows = [f"| what | {' | '.join(f'{n} folders: warm (first)' for n in sizes)} | growth (warm) |",
            "|---" * (len(sizes) + 2) + "|"]
    for what in results[sizes[-1]]:
        cells, first, last = [], None, None
        for n in sizes:
            got = results[n].get(what)
            if got is None:
                cells.append("–")
                continue
            flag = "" if got["status"] in (0, 200, 302) else " (timeout)" if got["status"] == -1 else \
                f" ({got['status']})"
            once = f" ({got['first']:.3f})" if "first" in got else ""
            cells.append(f"{got['s']:.3f}{once}{flag}" if what != "serve RSS MB" else f"{got['s']:.0f}")
            first = got["s"] if first is None else first
            last = got["s"]
        growth = f"{last / first:.1f}x" if first and last else "–"
        rows.append(f"| {what} | {' | '.join(cells)} | {growth} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="10,300,3000", help="folder counts, comma-separated")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tlindex-scale"), help="where databases are kept")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="only these pages, queries (query:NAME) or commands (cmd: NAME)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--json", dest="json_out", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--build-only", action="store_true", help="build the databases and stop")
    parser.add_argument("--ranks", type=int, default=0, help="also one run of this many rank files (256)")
    options = parser.parse_args()
    options.work.mkdir(parents=True, exist_ok=True)
    only = {name.strip() for name in options.only.split(",") if name.strip()} or None
    results = {}
    for folders in (int(n) for n in options.runs.split(",")):
        db = options.work / f"scale{folders}-v2.db"  # v2: folders with times of their own
        build(db, folders, options.work)
        if not options.build_only:
            results[folders] = measure(db, options.rounds, only, options.port)
            if options.json_out:  # kept as it goes: a long run stopped midway keeps what it measured
                options.json_out.write_text(json.dumps(results, indent=1))
    if results:
        print(table(results))
    if options.ranks:
        from ranks import measure_ranks

        found = measure_ranks(options.work, options.ranks, options.rounds, options.port)
        if options.json_out:
            options.json_out.with_suffix(".ranks.json").write_text(json.dumps(found, indent=1))
    if options.json_out:
        options.json_out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
