"""What every page, canned query and command costs as a database grows from 10 to thousands of runs.

    python benchmarks/scale.py [--runs 10,300,3000] [--work DIR] [--rounds 3] [--only PAGE,...] [--json OUT]

For each N, a database of N log folders is built once (kept in --work for the next rounds): the tests' real
fixtures (tests/data, `series` aside: it is four runs by design, and versions/, the version matrix) hard-linked
into N folders, one fixture a folder in turn, and ingested in one `tlindex ingest` (each folder one run or two,
by the fixture: a cold and a warm start are two runs). Then, with `tlindex serve` on it as a process:
- every page of the route table (generated from `tlindex.pages.PAGES`: a page added later is timed the day it
  lands), each with its JSON twin, about one run in the middle of the database;
- every canned query (`queries/*.sql`) through Datasette, with `run=` given and without;
- the commands `runs`, `findings`, `search`, `trend`, `show run` as whole processes;
each the median of --rounds after one warm-up; the server's RSS after the crawl. A table per page with the
growth factor from the smallest N to the largest follows.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
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


def build(db: Path, folders: int, work: Path) -> None:
    """N folders of hard-linked fixtures, ingested into `db` in one command (kept when it exists)."""
    if db.exists():
        return
    logs = work / f"logs-{folders}"
    kinds = fixtures()
    for n in range(folders):
        folder = logs / f"nightly-{n:05d}"
        if folder.exists():
            continue
        folder.mkdir(parents=True)
        for log in kinds[n % len(kinds)].glob("*.log"):
            os.link(log, folder / log.name)
    started = time.perf_counter()
    subprocess.run([*TLINDEX, "ingest", str(logs), "--db", str(db), "--silent"], check=True)
    print(f"built {db.name}: {folders} folders in {time.perf_counter() - started:.0f} s, "
          f"{db.stat().st_size / 1e6:.0f} MB", file=sys.stderr)


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


def timed(run, rounds: int) -> float:
    """The median of `rounds` calls after a warm-up; one call past TIMEOUT_S is not repeated."""
    started = time.perf_counter()
    run()  # the warm-up
    if time.perf_counter() - started >= TIMEOUT_S:
        return TIMEOUT_S
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


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
            seconds = timed(lambda: status.append(fetch(url)[1]), rounds)
            figures[what] = {"s": seconds, "status": status[-1], "url": where}
        figures["serve RSS MB"] = {"s": rss_kb(server.pid) / 1024, "status": 0, "url": ""}
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:  # a request still running holds it: stop it all the same
            server.kill()
            server.wait()
    commands = {"cmd: runs": ["runs"], "cmd: runs --json": ["runs", "--json"], "cmd: findings": ["findings"],
                "cmd: search forward": ["search", "forward"], "cmd: trend": ["trend"],
                "cmd: show run": ["show", "run", str(values["run"])]}
    for what, args in commands.items():
        if only and what not in only:
            continue
        codes: list[int] = []
        run = [*TLINDEX, *args, "--db", str(db)]
        seconds = timed(lambda: codes.append(command(run)), rounds)
        figures[what] = {"s": seconds, "status": codes[-1], "url": " ".join(args)}
    return figures


def command(run: list[str]) -> int:
    try:
        return subprocess.run(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        return -1


def table(results: dict[int, dict[str, dict]]) -> str:
    sizes = sorted(results)
    rows = [f"| what | {' | '.join(f'{n} folders' for n in sizes)} | growth |", "|---" * (len(sizes) + 2) + "|"]
    for what in results[sizes[-1]]:
        cells, first, last = [], None, None
        for n in sizes:
            got = results[n].get(what)
            if got is None:
                cells.append("–")
                continue
            flag = "" if got["status"] in (0, 200, 302) else " (timeout)" if got["status"] == -1 else \
                f" ({got['status']})"
            cells.append(f"{got['s']:.3f}{flag}" if what != "serve RSS MB" else f"{got['s']:.0f}")
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
    options = parser.parse_args()
    options.work.mkdir(parents=True, exist_ok=True)
    only = {name.strip() for name in options.only.split(",") if name.strip()} or None
    results = {}
    for folders in (int(n) for n in options.runs.split(",")):
        db = options.work / f"scale{folders}.db"
        build(db, folders, options.work)
        if not options.build_only:
            results[folders] = measure(db, options.rounds, only, options.port)
            if options.json_out:  # kept as it goes: a long run stopped midway keeps what it measured
                options.json_out.write_text(json.dumps(results, indent=1))
    if results:
        print(table(results))
    if options.json_out:
        options.json_out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
