"""`tlindex report` against tlparse, and where the report's time goes, stage by stage.

    python benchmarks/report.py                  # tiny to 27 MB inputs, 3 rounds each
    python benchmarks/report.py --big            # and a 1 GB log (minutes)
    python benchmarks/report.py --quick          # one round of the small inputs

Inputs: two logs of tlparse's corpus (../shared, when present), one vLLM log of tests/data, a 27 MB
log and a folder of 4 rank files (11 MB) built from the real logs as benchmarks/ingest.py builds
its inputs (records replicated, frame ids shifted, payloads made distinct per copy). tlparse (with
`--all-ranks-html` on a folder) and `tlindex report` run alternately, each round in the same minute;
the script reads tlparse's Stats and refuses a ratio when tlparse skipped records. Peak memory is of the
whole process tree: the sum of its processes' PSS (a page a forked worker shares with its parent counts
once), and the sum of their RSS. Before each timed run the previous outputs are deleted and the disk is
left to settle (`--settle`).

Then, on each input, one report rendered in this process with `--jobs 1`, every stage timed
exclusively (a stage's time excludes the stages it calls): ingest, start-up (imports), SQL, templates,
highlighting, the handlers' own Python per page kind, relinking, writing files, the Perfetto trace and
tlparse's files. Figures go to benchmarks/out/report.json; the tables are printed as Markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest import build_file, fair, measure, run_tlparse, source_records, tlparse_binary  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
CORPUS = ROOT.parent / "shared" / "corpus" / "tlparse"
VLLM = ROOT / "tests" / "data" / "vllm_two_models"


def inputs(work: Path, big: bool, quick: bool) -> list[tuple[str, Path]]:
    """(name, path) of each input, built in `work` when it is not a real log."""
    found = []
    for name in ("comp_metrics.log", "cache_hit_miss.log"):
        if (CORPUS / name).exists():
            found.append((f"corpus {name}", CORPUS / name))
    found.append(("vLLM log of tests/data", min(VLLM.glob("*.log"), key=lambda p: p.name)))
    if quick:
        return found
    records = source_records()
    single = work / "single_27mb" / "dedicated_log_torch_trace_single.log"
    if not single.exists():
        single.parent.mkdir(parents=True, exist_ok=True)
        build_file(single, records, 27 << 20, 4343, None, distinct=True)
    found.append(("one log, 27 MB", single))
    ranks = work / "ranks_4x_11mb"
    if not ranks.exists():
        ranks.mkdir(parents=True)
        for rank in range(4):
            build_file(ranks / f"dedicated_log_torch_trace_rank_{rank}.log", records, (11 << 20) // 4,
                       6000 + rank, rank, distinct=True)
    found.append(("4 rank files, 11 MB", ranks))
    if big:
        huge = work / "single_1000mb" / "dedicated_log_torch_trace_single.log"
        if not huge.exists():
            huge.parent.mkdir(parents=True, exist_ok=True)
            build_file(huge, records, 1000 << 20, 4444, None, distinct=True)
        found.append(("one log, 1 GB", huge))
    return found


def size_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.iterdir() if p.is_file()]
    return round(sum(p.stat().st_size for p in files) / 2**20, 2)


def settle(folders: list[Path], seconds: float) -> None:
    """The previous runs' outputs deleted, written out and given time: each timed run starts on a quiet disk.
    (On ext4 mounted with `discard`, the blocks freed by deleting 50 MB of report slowed the next run's file
    creation up to tenfold, for whichever tool ran next.)"""
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)
    os.sync()
    time.sleep(seconds)


def run_report(path: Path, out: Path) -> dict:
    shutil.rmtree(out, ignore_errors=True)
    result = measure([sys.executable, "-m", "tlindex", "report", str(path), "-o", str(out), "--silent"])
    result.pop("output")
    return result


# --- stages -----------------------------------------------------------------------------------

class Stages:
    """Exclusive time per stage: entering a stage pauses the one it was called from."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack: list[list] = []

    def enter(self, stage: str) -> None:
        now = time.perf_counter()
        if self.stack:
            self.seconds[self.stack[-1][0]] += now - self.stack[-1][1]
        self.stack.append([stage, now])
        self.calls[stage] += 1

    def leave(self) -> None:
        now = time.perf_counter()
        stage, started = self.stack.pop()
        self.seconds[stage] += now - started
        if self.stack:
            self.stack[-1][1] = now

    def wrap(self, owner, name: str, stage) -> None:
        """Time owner.name (a function or coroutine function) as `stage` (a name, or a function of the
        call's arguments that names it)."""
        import inspect

        original = getattr(owner, name)
        label = stage if callable(stage) else (lambda *args, **kwargs: stage)
        if inspect.iscoroutinefunction(original):
            async def timed(*args, **kwargs):
                self.enter(label(*args, **kwargs))
                try:
                    return await original(*args, **kwargs)
                finally:
                    self.leave()
        else:
            def timed(*args, **kwargs):
                self.enter(label(*args, **kwargs))
                try:
                    return original(*args, **kwargs)
                finally:
                    self.leave()
        setattr(owner, name, timed)


def page_kind(path: str) -> str:
    """The kind of page a report file is (its handler's own time is counted under it)."""
    name = path.rsplit("/", 1)[-1]
    if path.startswith("payloads/"):
        return "payload text (.txt)" if name.endswith(".txt") else "payload pages"
    if path.startswith("assets/"):
        return "assets"
    if "/compiles/" in f"/{path}":
        for suffix, kind in (("-bytecode", "bytecode pages"), ("-passes", "passes pages")):
            if suffix in name:
                return kind
        return "compile pages"
    for part, kind in (("provenance/", "provenance pages"), ("queries/", "query pages"), ("trie", "trie pages"),
                       ("failures_and_restarts", "query pages"), ("vllm", "vLLM page")):
        if part in path:
            return kind
    return "run and runs pages"


def stage_times(path: Path, work: Path, settle_seconds: float = 0) -> dict:
    """One report of `path` in this process (jobs 1), every stage timed; ingest and start-up measured apart."""
    db = work / "stages.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tlindex", "ingest", str(path), "--db", str(db), "--silent"], check=True)
    ingest = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from tlindex.render.report import ReportRenderer; import tlindex.cli"],
                   check=True)
    startup = time.perf_counter() - started

    from contextlib import closing

    from tlindex import pages as page_table
    from tlindex.answers.runs import runs_by_name
    from tlindex.render import highlight, site
    from tlindex.render import page as render
    from tlindex.render.report import ReportRenderer
    from tlindex.report import build, output
    from tlindex.report import pages as report_pages
    from tlindex.store.db import connect_read_only

    stages = Stages()
    stages.wrap(report_pages.PageWriter, "render", lambda self, url, path, found: page_kind(path))
    stages.wrap(report_pages.PageWriter, "relink", "relinking")
    stages.wrap(output.Output, "save", "writing files")
    stages.wrap(report_pages.PageWriter, "write_chromium", "Perfetto trace")
    stages.wrap(build, "write_tlparse_files", "tlparse's files (compile_directory, raw.jsonl)")  # as build calls it
    stages.wrap(page_table.Page, "read", "data (SQL and the library)")  # each page's data
    stages.wrap(site.ReportSite, "render_template", "templates")
    for module in (render, highlight):
        for name in ("render_payload", "highlighted_lines", "highlighted"):
            if hasattr(module, name):
                stages.wrap(module, name, "highlighting")
    out = work / "stages_out"
    settle([out], settle_seconds)
    out.mkdir()
    started = time.perf_counter()
    with closing(connect_read_only(db)) as conn:
        summary = build.Report(conn, db, out, runs_by_name(conn, []), ReportRenderer).write(1)
    total = time.perf_counter() - started
    shutil.rmtree(out, ignore_errors=True)
    return {"ingest (tlindex ingest --jobs 1, its own process)": round(ingest, 3),
            "start-up (python, imports)": round(startup, 3),
            "render total (in process, jobs 1)": round(total, 3),
            "pages": summary.pages, "payloads": summary.payloads,
            "stages": {stage: [round(seconds, 3), stages.calls[stage]]
                       for stage, seconds in sorted(stages.seconds.items(), key=lambda item: -item[1])}}


# --- main -------------------------------------------------------------------------------------

def compile_bytecode() -> None:
    """The project's modules compiled to bytecode (__pycache__), as an installed wheel has them: where Python may not
    write it at import (PYTHONDONTWRITEBYTECODE, a read-only checkout), every run compiled ~100 modules from source
    first, 0.1-0.2 s of start-up that no user of an installed tlindex pays."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "tlindex"), str(ROOT / "datasette_plugins")],
                   check=True, stdout=subprocess.DEVNULL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--big", action="store_true", help="also a 1 GB log")
    parser.add_argument("--quick", action="store_true", help="one round of the small inputs")
    parser.add_argument("--settle", type=float, default=6.0,
                        help="seconds the disk is left to settle before each timed run [6; --quick: 0]")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "tlindex-report-bench")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    args.settle = 0 if args.quick else args.settle
    args.work.mkdir(parents=True, exist_ok=True)
    compile_bytecode()
    binary = tlparse_binary(False)
    results = []
    for name, path in inputs(args.work, args.big, args.quick):
        ours, theirs = [], []
        for _ in range(rounds):
            settle([args.work / "report", args.work / "tlparse"], args.settle)
            ours.append(run_report(path, args.work / "report"))
            if binary:
                settle([args.work / "report", args.work / "tlparse"], args.settle)
                theirs.append(run_tlparse(binary, path, args.work / "tlparse"))
        case = {"input": name, "mb": size_mb(path), "report": ours, "tlparse": theirs,
                "unfair": fair(theirs[-1]) if theirs else "no tlparse",
                "stages": stage_times(path, args.work, args.settle)}
        print(json.dumps({k: v for k, v in case.items() if k != "stages"}), file=sys.stderr)
        results.append(case)
    OUT.mkdir(exist_ok=True)
    (OUT / "report.json").write_text(json.dumps(results, indent=2))
    print(markdown(results))


def markdown(results: list[dict]) -> str:
    lines = ["| input | MB | report s | tlparse s | report − tlparse s | tlparse/report | report CPU s | "
             "report peak memory MB (PSS; RSS) | tlparse peak RSS MB |", "|---|---|---|---|---|---|---|---|---|"]
    for case in results:
        ours = [r["seconds"] for r in case["report"]]
        theirs = [r["seconds"] for r in case["tlparse"]]
        mine, other = statistics.median(ours), statistics.median(theirs) if theirs else None
        ratio = "–" if case["unfair"] or not other else ", ".join(f"{t / o:.2f}×" for o, t in zip(ours, theirs))
        lines.append(f"| {case['input']} | {case['mb']} | {', '.join(f'{s:.2f}' for s in ours)} | "
                     f"{', '.join(f'{s:.2f}' for s in theirs) or '–'} | "
                     f"{'–' if other is None else f'{mine - other:+.2f}'} | {ratio} | "
                     f"{statistics.median(r['cpu_seconds'] for r in case['report']):.2f} | "
                     f"{max(r.get('peak_pss_mb', 0) for r in case['report'])}; "
                     f"{max(r['peak_rss_mb'] for r in case['report'])} | "
                     f"{max((r['peak_rss_mb'] for r in case['tlparse']), default='–')} |")
        if case["unfair"]:
            lines.append(f"| ↳ not compared: {case['unfair']} | | | | | | | | |")
    for case in results:
        s = case["stages"]
        lines += ["", f"Stages of `tlindex report` on {case['input']} ({s['pages']} pages, {s['payloads']} payload "
                  "texts; seconds, exclusive):", "", "| stage | s | calls |", "|---|---|---|"]
        for key in ("ingest (tlindex ingest --jobs 1, its own process)", "start-up (python, imports)"):
            lines.append(f"| {key} | {s[key]} | 1 |")
        for stage, (seconds, calls) in s["stages"].items():
            lines.append(f"| {stage} | {seconds} | {calls} |")
        lines.append(f"| render total (in process, jobs 1) | {s['render total (in process, jobs 1)']} | |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
