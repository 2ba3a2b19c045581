"""An independent reading of TORCH_TRACE logs, written for the tests alone: it imports nothing of tlindex.

From the raw log lines it computes what `run_health` says of each run (compiles, recompiles, failures, graph
breaks, restarts, times, guards, cache lookups) and the graph-break groups of the graph-breaks page, so that
tests/test_oracle.py can hold tlindex to a second reading of the same bytes. It reads only what torch writes:
the glog prefix, the envelope JSON, and the tab-indented payload lines after it.

Its own rules, each stated where it is applied:
- a file holds processes, told apart by the pid of the glog prefix;
- a run is the processes of one directory whose time spans overlap (a process starting after every earlier one
  ended begins a new run: the next day's job, the restarted attempt);
- a compile is a process's (compiled autograd id, frame id, frame compile id) that Dynamo began (a `dynamo_start`)
  or finished (a `compilation_metrics`); a `dynamo_start` for an id whose compilation already finished, or for an
  attempt it already started, means torch._dynamo.reset() happened and the id names a new compile; records with no
  id at all are tlparse's [-/-], and an id with neither record (a torch.export's compile context) is no compile;
- a compile's time is its frame's (the first `entire_frame_compile_time_s` of its metrics, else the spans named
  `entire_frame_compile` that end under its id) and its backward's (its `bwd_compilation_metrics`' `duration_us`,
  else its `entire_backward_compile` spans): a span is a chromium B event and the next E event of its name in its
  process;
- a compile's restarts are its attempts after the first, or the restart reasons its metrics list when more.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = re.compile(r"^(?:\[[^\]]*\]:)?[VIWEC](\d{4}) (\d\d:\d\d:\d\d\.\d+) +(\d+) [^\]]+\] (\{.*\})\s*$")
CONTEXT = {"frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "rank", "has_payload", "stack"}
CACHE = re.compile(r"^(.+?)_cache_(hit|miss|bypass|pickle_failure)$")
BREAK_AT = re.compile(r"Graph break in user code at (.*):(\d+)")
GB_ID = re.compile(r"/gb/(gb\d{4})")


@dataclass
class Compile:
    key: tuple
    frame_compile_id: int | None
    attempts: set = field(default_factory=set)
    started: set = field(default_factory=set)
    finished: bool = False
    metrics: list = field(default_factory=list)
    bwd_metrics: list = field(default_factory=list)
    breaks: list = field(default_factory=list)
    cache: list = field(default_factory=list)
    spans: dict = field(default_factory=dict)  # span name -> seconds of its spans that ended under this id

    @property
    def anonymous(self) -> bool:
        return self.key == (None, None, None)

    @property
    def counted(self) -> bool:
        """A compile: Dynamo began or finished it."""
        return not self.anonymous and bool(self.started or self.metrics)

    @property
    def frames_s(self) -> float | None:
        logged = [m.get("entire_frame_compile_time_s") for m in self.metrics]
        first = next((v for v in logged if _number(v) is not None), None)
        return first if first is not None else self.spans.get("entire_frame_compile")

    @property
    def backward_s(self) -> float | None:
        logged = [_number(m.get("duration_us")) for m in self.bwd_metrics]
        known = [v for v in logged if v is not None]
        return sum(known) / 1e6 if known else self.spans.get("entire_backward_compile")

    @property
    def time_s(self) -> float | None:
        parts = [v for v in (self.frames_s, self.backward_s) if v is not None]
        return sum(parts) if parts else None

    @property
    def restarts(self) -> int:
        reasons = sum(len(m.get("restart_reasons") or []) for m in self.metrics)
        return max(max(self.attempts, default=0), reasons)


@dataclass
class Process:
    path: Path
    pid: str
    first: str = ""
    last: str = ""
    rank: int | None = None
    compiles: list = field(default_factory=list)


def records(path: Path):
    """(time, pid, envelope, payload text or None) of every envelope line of a file."""
    current, payload = None, []
    with open(path, encoding="utf-8", errors="replace") as file:
        for line in file:
            if line.startswith("\t"):
                if current is not None:
                    payload.append(line[1:].rstrip("\n"))
                continue
            match = PREFIX.match(line)
            if not match:
                continue
            if current is not None:
                yield (*current, "\n".join(payload) if payload else None)
            date, clock, pid, text = match.groups()
            try:
                envelope = json.loads(text)
            except ValueError:
                current = None
                continue
            current, payload = (f"{date} {clock}", pid, envelope), []
    if current is not None:
        yield (*current, "\n".join(payload) if payload else None)


def read_processes(path: Path) -> list[Process]:
    """The processes of one log file, their compiles folded from the records."""
    processes: dict[str, Process] = {}
    live: dict[str, dict] = {}
    opened: dict[str, dict[str, list]] = {}  # pid -> span name -> the ts of its B events still open
    for time, pid, envelope, payload in records(path):
        proc = processes.setdefault(pid, Process(path, pid, first=time))
        table = live.setdefault(pid, {})
        proc.last = time
        if proc.rank is None and isinstance(envelope.get("rank"), int):
            proc.rank = envelope["rank"]
        kind = next((k for k in envelope if k not in CONTEXT), None)
        if kind is None or kind == "str":
            continue
        key = (envelope.get("compiled_autograd_id"), envelope.get("frame_id"), envelope.get("frame_compile_id"))
        attempt = envelope.get("attempt") or 0
        compile = table.get(key)
        if kind == "dynamo_start" and compile is not None and (compile.finished or attempt in compile.started):
            table.clear()  # torch._dynamo.reset(): the ids start again
            compile = None
        if compile is None:
            compile = table[key] = Compile(key, envelope.get("frame_compile_id"))
            proc.compiles.append(compile)
        compile.attempts.add(attempt)
        if kind == "dynamo_start":
            compile.started.add(attempt)
        elif kind == "compilation_metrics":
            compile.metrics.append(envelope[kind])
            compile.finished = True
        elif kind == "bwd_compilation_metrics":
            compile.bwd_metrics.append(envelope[kind])
        elif kind == "chromium_event" and payload is not None:
            _span(opened.setdefault(pid, {}), compile, payload)
        elif kind == "artifact":
            name = envelope["artifact"].get("name") or ""
            if name == "dynamo_graph_break_reason" and payload is not None:
                compile.breaks.append(payload)
            elif CACHE.match(name):
                compile.cache.append(CACHE.match(name).groups())
    return list(processes.values())


def _span(opened: dict[str, list], compile: Compile, payload: str) -> None:
    """A chromium event: a B opens a span of its name; an E closes the latest, its seconds counted on the compile
    the E is logged under."""
    try:
        event = json.loads(payload)
    except ValueError:
        return
    if not isinstance(event, dict) or _number(event.get("ts")) is None:
        return
    name = event.get("name")
    if event.get("ph") == "B":
        opened.setdefault(name, []).append(event["ts"])
    elif event.get("ph") == "E" and opened.get(name):
        begun = opened[name].pop()
        compile.spans[name] = compile.spans.get(name, 0.0) + (event["ts"] - begun) / 1e6


def runs_of(directory: Path) -> list[list[Process]]:
    """The runs of a directory: its processes in start order, a new run where one starts after all before it ended."""
    processes = sorted((p for path in sorted(directory.glob("*.log")) for p in read_processes(path)),
                       key=lambda p: p.first)
    runs: list[list[Process]] = []
    end = ""
    for proc in processes:
        if not runs or proc.first > end:
            runs.append([])
        runs[-1].append(proc)
        end = max(end, proc.last)
    return runs


def _number(value) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _total(values, scale: float = 1.0) -> float | None:
    known = [v for v in map(_number, values) if v is not None]
    return round(sum(known) / scale, 3) if known else None


def health(run: list[Process]) -> dict:
    """What run_health says of one run, computed from its processes' records."""
    compiles = [c for proc in run for c in proc.compiles]
    counted = [c for c in compiles if c.counted]
    metrics = [m for c in compiles for m in c.metrics]
    bwd = [m for c in compiles for m in c.bwd_metrics]
    cache = [e for c in compiles for e in c.cache]
    fx_graph = [result for name, result in cache if name in ("fx_graph", "fx_graph_bundled")]
    return {
        "compiles": len(counted),
        "recompiles": sum((c.frame_compile_id or 0) > 0 for c in counted),
        "failures": sum(any(m.get("fail_type") for m in c.metrics) for c in compiles),
        "graph_breaks": sum(len(c.breaks) for c in compiles),
        "restarts": sum(c.restarts for c in compiles),
        "compile_time_s": _total(c.time_s for c in counted),
        "aot_time_s": _total(m.get("backend_compile_time_s") for m in metrics),
        "inductor_time_s": _total(m.get("inductor_compile_time_s") for m in metrics),
        "backward_time_s": _total(c.backward_s for c in counted),
        "autotune_time_s": _total((m.get("compile_time_autotune_time_us") for m in metrics + bwd), 1e6),
        "guards": _total(m.get("guard_count") for m in metrics),
        "cache_lookups": len(cache),
        "cache_hits": sum(result == "hit" for _, result in cache),
        "cache_misses": sum(result == "miss" for _, result in cache),
        "cache_bypasses": sum(result == "bypass" for _, result in cache),
        "fx_graph_hits": fx_graph.count("hit"),  # a warm start's bundled hits are FX-graph hits
        "fx_graph_misses": fx_graph.count("miss"),
        "aotautograd_hits": cache.count(("aotautograd", "hit")),
        "aotautograd_misses": cache.count(("aotautograd", "miss")),
    }


def break_group(payload: str) -> tuple[str, str, str]:
    """A graph break's (torch's gb id or "", its title, user file:line): what the graph-breaks page groups by.
    The title is the first line of the reason that is not torch 2.13's generic "Encountered graph break" header."""
    at = BREAK_AT.search(payload)
    reason = payload.split("Graph Break Reason: ", 1)[-1]
    reason = reason.split("\nUser code traceback:", 1)[0].split("\n\nTraceback (most recent call last)", 1)[0]
    lines = [line.strip() for line in reason.strip().splitlines() if line.strip()]
    if lines and lines[0].startswith("Encountered graph break when attempting") and "\n\n" in reason:
        lines = lines[1:]
    gb = GB_ID.search(reason)
    return (gb.group(1) if gb else "", lines[0] if lines else "", f"{at.group(1)}:{at.group(2)}" if at else "")


def break_groups(run: list[Process]) -> dict[tuple[str, str, str], int]:
    """The run's graph breaks counted by group."""
    groups: dict[tuple[str, str, str], int] = defaultdict(int)
    for proc in run:
        for compile in proc.compiles:
            for payload in compile.breaks:
                groups[break_group(payload)] += 1
    return dict(groups)


def break_costs(run: list[Process]) -> dict[tuple[str, str, str], float]:
    """The compile time each group's analysis restarts threw away: a restarted compile's dynamo_time_before_restart_s,
    shared among its breaks."""
    costs: dict[tuple[str, str, str], float] = defaultdict(float)
    for proc in run:
        for compile in proc.compiles:
            if compile.breaks and compile.restarts > 0:
                spent = sum(m.get("dynamo_time_before_restart_s") or 0 for m in compile.metrics)
                for payload in compile.breaks:
                    costs[break_group(payload)] += spent / len(compile.breaks)
    return dict(costs)


def compile_id(compile: Compile) -> str:
    """A compile's id as torch prints it: 0/1, !0/1/2 with compiled autograd, !3 for compiled autograd alone."""
    ca, frame, number = compile.key
    base = f"{frame}/{number}" if frame is not None else ""
    return f"!{ca}/{base}" if ca is not None and base else f"!{ca}" if ca is not None else base or "-/-"


def ids_not_on_every_rank(run: list[Process]) -> dict[str, set[int]]:
    """The compile ids some ranks of a run compiled and others did not, with the ranks that did."""
    by_rank: dict[int, set[str]] = defaultdict(set)
    for proc in run:
        if proc.rank is not None:
            by_rank[proc.rank] |= {compile_id(c) for c in proc.compiles if not c.anonymous}
    every = set.intersection(*by_rank.values()) if by_rank else set()
    return {cid: {r for r, ids in by_rank.items() if cid in ids} for cid in set().union(*by_rank.values()) - every}


def compile_times(run: list[Process]) -> list[dict]:
    """Every compile of a run, in log order per process: its rank, id and seconds (frame, backward, both)."""
    return [{"rank": proc.rank, "compile_id": compile_id(c), "frames_s": c.frames_s, "backward_s": c.backward_s,
             "total_s": c.time_s} for proc in run for c in proc.compiles if c.counted]
