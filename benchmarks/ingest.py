"""Benchmark tlindex ingest against tlparse, and time the queries and pages on the result.

    python benchmarks/ingest.py                # 250 MB and 1 GB inputs, 3 rounds (long)
    python benchmarks/ingest.py --quick        # ~8 MB inputs, 1 round (what CI runs)

Inputs are built by replicating real logs (tests/data, versions/ aside, and, when present,
../shared/corpus/tlparse), record by record, shifting frame ids per copy so
compile ids stay distinct: (a) one single-process log, (b) a directory of 8
rank files. tlparse (from PyPI, into benchmarks/.venv-tlparse) and tlindex run
alternately; the script reports medians, the tlparse/tlindex ratio of each
round, peak RSS of the whole process tree, CPU time and database size, then
times every canned query and the Datasette pages on the largest database.
Figures go to benchmarks/out/results.json and, with --write-docs, to docs/benchmarks.md
and docs/benchmarks.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import platform
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
CORPUS = [ROOT / "tests" / "data", ROOT.parent / "shared" / "corpus" / "tlparse"]
STATS_RE = re.compile(r"Stats \{ (.*?) \}")
ENVELOPE_RE = re.compile(rb"^([VIWEC]\d{4} [\d:.]+ +)(\d+)( .+?:\d+\] )(\{.*\})(\r?\n)$")
DISTINCT_VERSION = 3  # the distinct-payload inputs (2: every payload but guards made distinct)
TEXT_KINDS = {"dynamo_output_graph", "inductor_output_code", "aot_forward_graph", "aot_backward_graph",
              "aot_joint_graph", "aot_inference_graph", "inductor_post_grad_graph", "inductor_pre_grad_graph",
              "graph_dump", "optimize_ddp_split_graph", "optimize_ddp_split_child"}
GUARD_KINDS = {"dynamo_cpp_guards_str", "dynamo_guards"}
FRAME_SHIFT = 1000  # frame ids of copy k are shifted by k * FRAME_SHIFT
INPUT_VERSION = 2  # inputs cached in the work folder are rebuilt when this changes (2: single log without ranks)


# --- inputs -----------------------------------------------------------------------------------

def source_records() -> list[list[bytes]]:
    """Every record (envelope line + payload lines) of the real logs, whole."""
    records: list[list[bytes]] = []
    for root in CORPUS:
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.suffix not in (".log", ".txt") or path.name == "README.md":
                continue
            if path.relative_to(root).parts[0] == "versions":  # tests/data/versions: the version matrix, not inputs
                continue
            current: list[bytes] | None = None
            for line in open(path, "rb"):
                if line.startswith(b"\t") and current is not None:
                    current.append(line if line.endswith(b"\n") else line + b"\n")
                    continue
                if ENVELOPE_RE.match(line if line.endswith(b"\n") else line + b"\n"):
                    current = [line if line.endswith(b"\n") else line + b"\n"]
                    records.append(current)
                else:
                    current = None  # damaged lines of the corpus are left out of the benchmark input
    return records


def distinct_payload(data: dict, lines: list[bytes], copy: int) -> list[bytes]:
    """A payload made unique to its copy number (0: left as it is), its md5 claim updated, so that an input built by replication
    has as much distinct payload text as a real log (where timestamps and ids differ everywhere): graphs
    and code get a last comment line, JSON and other text a last line of blanks (JSON allows them).
    Guards are left alone (a line there is a guard)."""
    kind = next(iter(data))
    if not copy or kind in GUARD_KINDS or not isinstance(data.get("has_payload"), str) \
            or any(not line.endswith(b"\n") or line.endswith(b"\r\n") for line in lines):
        return lines
    lines = [*lines, b"\t# copy %d\n" % copy if kind in TEXT_KINDS else b"\t" + b" " * copy + b"\n"]
    data["has_payload"] = hashlib.md5(b"\n".join(line[1:-1] for line in lines)).hexdigest()
    return lines


def rewrite(record: list[bytes], copy: int, pid: int, rank: int | None, distinct: bool = False) -> bytes:
    """The record with its frame id shifted, its pid and its rank set (for rank files) or removed (for the
    single-process log: one process is one rank, so tlparse reads every record of it); with `distinct`,
    its graph or code payload made unique to the copy."""
    match = ENVELOPE_RE.match(record[0])
    head, _, where, body, end = match.groups()
    payload = record[1:]
    if copy or rank is not None or b'"frame_id"' in body or b'"rank"' in body:
        data = orjson.loads(body)
        if distinct:
            payload = distinct_payload(data, payload, copy * 8 + (rank or 0))  # unique per copy and rank
        if isinstance(data.get("frame_id"), int):
            data["frame_id"] += copy * FRAME_SHIFT
        if rank is not None and next(iter(data)) not in ("str",):
            data["rank"] = rank
        elif rank is None:
            data.pop("rank", None)
        body = orjson.dumps(data)
    return b"".join([head, str(pid).encode(), where, body, end, *payload])


def build_file(path: Path, records: list[list[bytes]], size: int, pid: int, rank: int | None,
               distinct: bool = False) -> None:
    """Write copies of the records until the file reaches `size` bytes (records stay whole)."""
    written, copy = 0, 0
    with open(path, "wb") as out:
        while written < size:
            for record in records:
                chunk = rewrite(record, copy, pid, rank, distinct)
                out.write(chunk)
                written += len(chunk)
                if written >= size:
                    return
            copy += 1


def build_inputs(work: Path, size_mb: int, records) -> tuple[Path, Path]:
    """(single-process log, directory of 8 rank files), about size_mb each."""
    single = work / f"single_{size_mb}mb_v{INPUT_VERSION}" / "dedicated_log_torch_trace_bench0000.log"
    ranks = work / f"ranks_{size_mb}mb_v{INPUT_VERSION}"
    if not single.exists():
        single.parent.mkdir(parents=True, exist_ok=True)
        build_file(single, records, size_mb << 20, 4242, None)
    build_ranks(work, size_mb, records, distinct=False)
    return single, ranks


def build_ranks(work: Path, size_mb: int, records, distinct: bool) -> Path:
    """A directory of 8 rank files, about size_mb in all (with distinct payloads, or replicated ones)."""
    ranks = work / (f"ranks_{size_mb}mb_distinct_v{DISTINCT_VERSION}" if distinct else f"ranks_{size_mb}mb_v{INPUT_VERSION}")
    if not ranks.exists():
        ranks.mkdir(parents=True)
        for rank in range(8):
            build_file(ranks / f"dedicated_log_torch_trace_rank_{rank}.log", records, (size_mb << 20) // 8,
                       5000 + rank, rank, distinct)
    return ranks


def input_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in ([path] if path.is_file() else path.iterdir()))


# --- measuring --------------------------------------------------------------------------------

def tree_rss(pid: int) -> tuple[int, int]:
    """Resident bytes of a process and all its descendants, and their proportional set sizes (PSS)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, pss, stack = 0, 0, [pid]
    while stack:
        current = stack.pop()
        total += rss.get(current, 0)
        pss += proportional_bytes(current)
        stack.extend(children.get(current, []))
    return total, pss


def proportional_bytes(pid: int) -> int:
    """A process's proportional set size (a page shared by n processes counts 1/n in each): the sum over a
    tree is its memory, where a sum of RSS counts a page a forked worker shares with its parent twice."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def measure(command: list[str], env=None) -> dict:
    """Run a command; wall time, CPU time of the tree and peak RSS of the tree (sampled every 20 ms)."""
    before = os.times()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak = peak_pss = 0
    stop = threading.Event()

    def sample():
        nonlocal peak, peak_pss
        while not stop.is_set():
            rss, pss = tree_rss(process.pid)
            peak, peak_pss = max(peak, rss), max(peak_pss, pss)
            stop.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    stdout, stderr = process.communicate()
    stop.set()
    sampler.join()
    seconds = time.perf_counter() - started
    after = os.times()
    if process.returncode != 0:
        raise RuntimeError(f"{command[0]} failed: {stderr.decode()[-2000:]}")
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    return {"seconds": round(seconds, 3), "cpu_seconds": round(cpu, 3), "peak_rss_mb": round(peak / 2**20, 1),
            "peak_pss_mb": round(peak_pss / 2**20, 1),
            "output": (stdout + stderr).decode("utf-8", "replace")}


def tlparse_binary(skip: bool) -> str | None:
    if skip:
        return None
    venv = ROOT / "benchmarks" / ".venv-tlparse"
    binary = venv / "bin" / "tlparse"
    if not binary.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        result = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "tlparse"], capture_output=True)
        if result.returncode != 0:
            print("tlparse could not be installed; comparing nothing", file=sys.stderr)
            return None
    return str(binary)


def run_tlindex(input_path: Path, db: Path, jobs: int | None) -> dict:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    command = [sys.executable, "-m", "tlindex", "ingest", str(input_path), "--db", str(db), "--silent"]
    if jobs:
        command += ["--jobs", str(jobs)]
    result = measure(command)
    result.pop("output")
    result["db_mb"] = round(db.stat().st_size / 2**20, 1)
    return result


def run_tlparse(binary: str, input_path: Path, out: Path) -> dict:
    """tlparse on the input, with its own counters: the Stats lines it prints (summed over ranks)."""
    shutil.rmtree(out, ignore_errors=True)
    command = [binary, str(input_path), "-o", str(out), "--no-browser"]
    if input_path.is_dir():
        command.append("--all-ranks-html")
    result = measure(command)
    stats: dict[str, int] = {}
    for line in STATS_RE.findall(result.pop("output")):
        for field in line.split(", "):
            key, _, value = field.partition(": ")
            stats[key] = stats.get(key, 0) + int(value)
    result["stats"] = stats
    result["folder_mb"] = folder_mb(out)
    return result


def fair(tlparse: dict) -> str | None:
    """Why a comparison with this tlparse run would compare different work (None when it is fair)."""
    skipped = tlparse["stats"].get("other_rank", 0)
    if not tlparse["stats"]:
        return "tlparse printed no Stats"
    if skipped:
        return f"tlparse skipped {skipped:,} records of other ranks (Stats other_rank): it did less work"
    return None


def run_report(input_path: Path, out: Path, jobs: int | None) -> dict:
    """tlindex report on the input: ingest (into a temporary database) and every page, like tlparse's folder."""
    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "tlindex", "report", str(input_path), "-o", str(out), "--silent"]
    if jobs:
        command += ["--jobs", str(jobs)]
    result = measure(command)
    result.pop("output")
    result["folder_mb"] = folder_mb(out)
    return result


def folder_mb(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


# --- queries and pages ------------------------------------------------------------------------

def time_queries(db: Path) -> dict[str, float]:
    from tlindex.answers.queries import load_queries, run_sql
    from tlindex.store.compression import register

    conn = register(sqlite3.connect(db))
    timings = {}
    for name, query in load_queries().items():
        started = time.perf_counter()
        run_sql(conn, query.sql).fetchall()
        timings[name] = round(time.perf_counter() - started, 3)
    return timings


def time_pages(db: Path) -> dict[str, float]:
    from datasette.app import Datasette

    conn = sqlite3.connect(db)
    run = conn.execute("SELECT run_id FROM compiles GROUP BY run_id ORDER BY count(*) DESC LIMIT 1").fetchone()[0]
    compile_row = conn.execute("SELECT id FROM compiles ORDER BY envelope_bytes + payload_bytes DESC LIMIT 1").fetchone()[0]
    artifact = conn.execute("SELECT id FROM artifacts ORDER BY size DESC LIMIT 1").fetchone()[0]
    name = db.stem
    conn.close()
    # The search page reads the payload index the ingest built (tlindex.ingest.text_index, at write).
    from tlindex.answers.search import search

    index_conn = sqlite3.connect(db, isolation_level=None)
    started = time.perf_counter()
    hits = len(search(index_conn, "aten.mm"))
    search_s = round(time.perf_counter() - started, 3)
    # A diff of the biggest run with itself: every compile matched and compared (the most work a diff does).
    from tlindex.answers.diff import diff

    started = time.perf_counter()
    matched = diff(index_conn, str(run), str(run))["summary"]["matched"]
    diff_s = round(time.perf_counter() - started, 3)
    index_conn.close()
    pages = {"runs (findings of every run)": f"/{name}/-/tlindex",
             "diff (a run with itself)": f"/{name}/-/tlindex/diff/{run}/{run}",
             "run (its findings)": f"/{name}/-/tlindex/run/{run}", "trie": f"/{name}/-/tlindex/trie/{run}",
             "compile": f"/{name}/-/tlindex/compile/{compile_row}", "artifact": f"/{name}/-/tlindex/artifact/{artifact}",
             "search aten.mm": f"/{name}/-/tlindex/search?q=aten.mm"}
    # Datasette's own table pages, as the database page and tlindex's links open them
    for table in ("envelopes", "guards", "frames", "metrics", "chromium_events", "artifacts", "compiles",
                  "payloads", "payload_data"):
        pages[f"Datasette table {table}"] = f"/{name}/{table}"
    pages["Datasette envelopes sorted by time"] = f"/{name}/envelopes?_sort=time"
    pages["Datasette envelopes of one kind, faceted by name"] = f"/{name}/envelopes?kind=artifact&_facet=name"
    pages["Datasette envelopes without a compile id (trie link)"] = f"/{name}/envelopes?kind=artifact&compile_id=-/-"

    async def go():
        datasette = Datasette([str(db)])
        await datasette.invoke_startup()
        timings = {f"tlindex search aten.mm ({hits} hits)": search_s,
                   f"tlindex diff, a run with itself ({matched} compiles matched)": diff_s}
        for page, path in pages.items():
            started = time.perf_counter()
            response = await datasette.client.get(path)
            assert response.status_code == 200, path
            timings[page] = round(time.perf_counter() - started, 3)
            timings[f"{page}_kb"] = round(len(response.content) / 1024)
        return timings

    return asyncio.run(go())


# --- database size, jobs, scale ------------------------------------------------------------------

REAL_MULTI_RANK = [ROOT / "tests" / "data" / name for name in ("ddp_2ranks", "ddp_4ranks_diverge", "collectives_3ranks")] + \
    [ROOT.parent / "shared" / "corpus" / "tlparse" / name for name in ("multi_rank_logs", "multi_rank_schedule")]


def database_sizes(work: Path, binary: str | None) -> list[dict]:
    """Database bytes over log bytes on the real multi-rank logs (and tlparse's folder over them)."""
    sizes = []
    for folder in REAL_MULTI_RANK:
        if not folder.is_dir():
            continue
        db = work / f"size_{folder.name}.db"
        run_tlindex(folder, db, None)
        logs = input_bytes(folder)
        row = {"logs": f"{folder.parent.name}/{folder.name}", "log_kb": round(logs / 1024),
               "db_kb": round(db.stat().st_size / 1024), "db_ratio": round(db.stat().st_size / logs, 2)}
        conn = sqlite3.connect(db)
        row["payload_kb"] = round(conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'payload_data'")
                                  .fetchone()[0] / 1024)
        row["pages_of_empty_or_one_page_objects"] = conn.execute(
            "SELECT count(*) FROM (SELECT name FROM dbstat GROUP BY name HAVING count(*) = 1)").fetchone()[0]
        conn.close()
        if binary:
            out = work / f"size_{folder.name}_tlparse"
            run_tlparse(binary, folder, out)
            row["tlparse_ratio"] = round(folder_mb(out) * 2**20 / logs, 2)
        sizes.append(row)
    return sizes


def jobs_scaling(work: Path, inputs: list[tuple[str, Path]], jobs_values: list[int], rounds: int) -> list[dict]:
    """Ingest time of each input with each --jobs value (medians)."""
    rows = []
    for name, path in inputs:
        for jobs in jobs_values:
            runs = [run_tlindex(path, work / "bench_jobs.db", jobs) for _ in range(rounds)]
            rows.append({"input": name, "jobs": jobs, "seconds": statistics.median(r["seconds"] for r in runs),
                         "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
                         "peak_rss_mb": max(r["peak_rss_mb"] for r in runs)})
            print("jobs", rows[-1], file=sys.stderr)
    return rows


def scale(work: Path, sizes: list[int], records) -> list[dict]:
    """One ingest of 8 rank files of each size: time, peak memory of every process, database size."""
    rows = []
    for size in sizes:
        path = build_ranks(work, size, records, distinct=False)
        result = run_tlindex(path, work / "bench_scale.db", None)
        rows.append({"mb": round(input_bytes(path) / 2**20), **result})
        print("scale", rows[-1], file=sys.stderr)
    return rows


# --- report -----------------------------------------------------------------------------------

def machine() -> str:
    cpu = "unknown cpu"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} cores ({cpu}), {memory:.0f} GiB, Python {platform.python_version()}, "
            f"SQLite {sqlite3.sqlite_version}")


def markdown(results: dict) -> str:
    lines = ["# Benchmarks", "", f"Measured by `python benchmarks/ingest.py` on {results['machine']}.",
             f"tlparse {results.get('tlparse_version') or '(not run)'}; {results['rounds']} rounds, medians.", "",
             "| input | MB | tlindex s | tlindex MB/s | tlparse s | tlparse/tlindex (per round) "
             "| tlindex peak RSS MB | tlparse peak RSS MB | tlindex CPU s | DB MB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for case in results["cases"]:
        t = case["tlindex"]
        p = case.get("tlparse") or {}
        ratios = ", ".join(f"{r:.1f}×" for r in case.get("ratios", [])) or "–"
        lines.append(f"| {case['name']} | {case['mb']} | {t['seconds']} | {case['mb'] / t['seconds']:.0f} | "
                     f"{p.get('seconds', '–')} | {ratios} | {t['peak_rss_mb']} | {p.get('peak_rss_mb', '–')} | "
                     f"{t['cpu_seconds']} | {t['db_mb']} |")
    stats = [(case["name"], case["tlparse_stats"], case.get("unfair")) for case in results["cases"]
             if case.get("tlparse_stats")]
    if stats:
        lines += ["", "tlparse's own counters on each input (its Stats line; a comparison in which tlparse skipped "
                  "records would compare different work and is refused):", "",
                  "| input | tlparse Stats | compared |", "|---|---|---|"]
        lines += [f"| {name} | {', '.join(f'{k}: {v:,}' for k, v in s.items())} | {unfair or 'yes'} |"
                  for name, s, unfair in stats]
    reports = [case for case in results["cases"] if case.get("report")]
    if reports:
        lines += ["", "`tlindex report LOG -o DIR` (ingest included: every page, each payload once, tlparse's "
                  "compile_directory.json and raw.jsonl) against tlparse writing its folder from the same log:", "",
                  "| input | report s | tlparse s | tlparse/report (per round) | report peak RSS MB | "
                  "tlparse peak RSS MB | report folder MB | tlparse folder MB |", "|---|---|---|---|---|---|---|---|"]
        for case in reports:
            r, p = case["report"], case.get("tlparse") or {}
            ratios = ", ".join(f"{x:.2f}×" for x in case.get("report_ratios", [])) or "–"
            lines.append(f"| {case['name']} | {r['seconds']} | {p.get('seconds', '–')} | {ratios} | "
                         f"{r['peak_rss_mb']} | {p.get('peak_rss_mb', '–')} | {r['folder_mb']} | "
                         f"{p.get('folder_mb', '–')} |")
    if results.get("jobs_scaling"):
        lines += ["", f"Ingest time by `--jobs` on this {os.cpu_count()}-core machine (medians):", "",
                  "| input | --jobs | s | CPU s | peak RSS MB (all processes) |", "|---|---|---|---|---|"]
        lines += [f"| {r['input']} | {r['jobs']} | {r['seconds']} | {r['cpu_seconds']} | {r['peak_rss_mb']} |"
                  for r in results["jobs_scaling"]]
    if results.get("scale"):
        lines += ["", "Memory as the input grows (8 rank files, one ingest each, default --jobs):", "",
                  "| MB of logs | s | MB/s | peak RSS MB (all processes) | DB MB |", "|---|---|---|---|---|"]
        lines += [f"| {r['mb']} | {r['seconds']} | {r['mb'] / r['seconds']:.0f} | {r['peak_rss_mb']} | {r['db_mb']} |"
                  for r in results["scale"]]
    if results.get("database_sizes"):
        lines += ["", "Database size over log size on the real multi-rank logs (tlparse's folder for comparison):", "",
                  "| logs | log KB | DB KB | DB / logs | of which payload_data KB | one-page objects | "
                  "tlparse folder / logs |", "|---|---|---|---|---|---|---|"]
        lines += [f"| {r['logs']} | {r['log_kb']:,} | {r['db_kb']:,} | {r['db_ratio']} | {r['payload_kb']:,} | "
                  f"{r['pages_of_empty_or_one_page_objects']} | {r.get('tlparse_ratio', '–')} |"
                  for r in results["database_sizes"]]
    lines += ["", f"Queries on the {results['largest']} database (seconds):", "",
              "| query | s |", "|---|---|"]
    lines += [f"| {name} | {s} |" for name, s in results["queries"].items()]
    lines += ["", "Pages through Datasette's in-process client:", "", "| page | s | KB |", "|---|---|---|"]
    pages = results["pages"]
    lines += [f"| {name} | {value} | {pages.get(name + '_kb', '')} |" for name, value in pages.items()
              if not name.endswith("_kb")]
    notes = ROOT / "benchmarks" / "notes.md"
    if notes.exists():
        lines += ["", notes.read_text().rstrip()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny inputs, one round (for CI)")
    parser.add_argument("--sizes", default="250,1000", help="input sizes in MB, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, help="tlindex --jobs (default: all cores)")
    parser.add_argument("--no-tlparse", action="store_true", help="do not run tlparse")
    parser.add_argument("--no-report", action="store_true", help="do not time tlindex report")
    parser.add_argument("--work", type=Path, default=OUT / "work", help="where inputs and outputs go")
    parser.add_argument("--write-docs", action="store_true", help="also write docs/benchmarks.md")
    parser.add_argument("--distinct", action="store_true",
                        help="also 8 rank files whose graph and code payloads are distinct (as in real logs)")
    parser.add_argument("--jobs-scaling", default="", help="--jobs values timed on the largest inputs, e.g. 1,2")
    parser.add_argument("--scale", default="", help="sizes in MB of 8-rank inputs ingested once each for time "
                                                    "and peak memory (no tlparse), e.g. 1000,8000")
    args = parser.parse_args()
    sizes = [8] if args.quick else [int(s) for s in args.sizes.split(",")]
    rounds = 1 if args.quick else args.rounds
    args.work.mkdir(parents=True, exist_ok=True)
    records = source_records()
    binary = tlparse_binary(args.no_tlparse)
    results = {"machine": machine(), "rounds": rounds, "cases": []}
    if binary:
        results["tlparse_version"] = subprocess.run([binary, "--version"], capture_output=True,
                                                    text=True).stdout.strip()
    largest_db = None
    for size in sizes:
        single, ranks = build_inputs(args.work, size, records)
        cases = [(f"single file {size} MB", single), (f"8 ranks {size} MB", ranks)]
        if args.distinct:
            cases.append((f"8 ranks {size} MB, distinct payloads", build_ranks(args.work, size, records, True)))
        for name, path in cases:
            db = args.work / f"bench_{path.parent.name if path.is_file() else path.name}.db"
            tlindex_runs, tlparse_runs, report_runs, ratios, report_ratios = [], [], [], [], []
            unfair = None
            for _ in range(rounds):
                tlindex_runs.append(run_tlindex(path, db, args.jobs))
                if path.is_file() and not args.no_report:
                    report_runs.append(run_report(path, args.work / "report_out", args.jobs))
                if binary:
                    tlparse_runs.append(run_tlparse(binary, path, args.work / "tlparse_out"))
                    unfair = unfair or fair(tlparse_runs[-1])
                    ratios.append(tlparse_runs[-1]["seconds"] / tlindex_runs[-1]["seconds"])
                    if report_runs:
                        report_ratios.append(tlparse_runs[-1]["seconds"] / report_runs[-1]["seconds"])
                print(name, tlindex_runs[-1], report_runs[-1] if report_runs else "",
                      tlparse_runs[-1] if tlparse_runs else "", file=sys.stderr)
            median = lambda runs: {k: round(statistics.median(r[k] for r in runs), 3)  # noqa: E731
                                   for k in runs[0] if isinstance(runs[0][k], (int, float))}
            case = {"name": name, "mb": round(input_bytes(path) / 2**20), "tlindex": median(tlindex_runs),
                    "ratios": [] if unfair else [round(r, 2) for r in ratios]}
            if report_runs:
                case["report"] = median(report_runs)
                case["report_ratios"] = [] if unfair else [round(r, 2) for r in report_ratios]
            if tlparse_runs:
                case["tlparse"] = median(tlparse_runs)
                case["tlparse_stats"] = tlparse_runs[-1]["stats"]
            if unfair:
                case["unfair"] = unfair  # the ratios are left out: refuse to compare different work
                print(f"{name}: not compared: {unfair}", file=sys.stderr)
            results["cases"].append(case)
            largest_db = db
    largest = [(case_name, case_path) for case_name, case_path in cases]
    results["largest"] = largest_db.name
    if args.jobs_scaling:
        results["jobs_scaling"] = jobs_scaling(args.work, largest, [int(j) for j in args.jobs_scaling.split(",")],
                                               rounds)
    if args.scale:
        results["scale"] = scale(args.work, [int(x) for x in args.scale.split(",")], records)
    results["database_sizes"] = database_sizes(args.work, binary)
    results["queries"] = time_queries(largest_db)
    results["pages"] = time_pages(largest_db)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=2))
    report = markdown(results)
    if args.write_docs:
        (ROOT / "docs" / "benchmarks.md").write_text(report)
        (ROOT / "docs" / "benchmarks.json").write_text(json.dumps(results, indent=2))
    print(report)


if __name__ == "__main__":
    main()
