"""What changed between two runs: their compiles matched, each pair's changes named and ranked.

Matching. Compiles of run A and run B are the same code compiled again when they share the rank,
the code location (function name, file name without its directory, first line) and the frame's
compile number (`frame_compile_id`: 0 for the first compile, then recompiles). Frame ids are not
part of the key: a graph break added upstream renumbers every later frame, and matching on them
would show every compile as changed. Several compiles with one key (a `torch._dynamo.reset()`
compiles the same code again) pair in the order they happened. A compile left unmatched is tried
once more without its first line (the function moved in its file). Records without a compile id,
`[-/-]`, pair by process order within a rank.

Changes. For each pair, by name: `status`, `graph_breaks` (reasons added or removed),
`recompile_reason`, `compile_time` (when the whole compile moved by more than both
TIME_NOISE_S and TIME_NOISE_RATIO: timer noise of a small compile is not a regression; with the
phases, from the chromium spans, that moved by as much: dynamo, tracing, backend, aot, inductor,
codegen),
`cache` (hit/miss/bypass per cache), `guards` (guard lines added or removed; object and type ids, which
are addresses in one process, are not compared), `graph` (the FX
graph or the generated code differs once the names torch takes from process-wide counters, such as
AOT ids and `__compiled_fn_N`, are masked: tlindex.answers.counters), `dynamic_shapes` (symbols), `bytes`
(log bytes emitted, by more than BYTES_NOISE_RATIO, said only beside another change: byte counts
alone are no change). Ordered by what matters: failures and new graph breaks first, then compiles
present in one run only, then the biggest compile-time regressions, then other changes.

The torch each run ran comes first (`torch`: another version, or the same version from another commit): a new
torch alone changes graphs, guards, code and defaults, so the config keys say which moved with it (`cause`,
tlindex.answers.configs).
"""

from __future__ import annotations

import difflib
import sqlite3
from collections import defaultdict
from dataclasses import dataclass

from tlindex.answers.configs import config_changes, config_lines
from tlindex.answers.counters import content_key
from tlindex.answers.findings.words import rank_list, short
from tlindex.answers.names import resolve_run
from tlindex.ingest.guard_keys import guard_identity
from tlindex.store.kinds import GRAPH_KINDS

TIME_NOISE_S = 0.05
TIME_NOISE_RATIO = 0.2
BYTES_NOISE_RATIO = 0.1
# Chromium spans that time a compile's phases (torch's dynamo_timed names), as the diff names them.
PHASES = {"dynamo": "dynamo", "bytecode_tracing": "tracing", "backend_compile": "backend",
          "create_aot_dispatcher_function": "aot", "inductor_compile": "inductor", "code_gen": "codegen"}


@dataclass(slots=True)
class Side:
    """One compile as the diff sees it.

    What its compiles row does not hold is loaded only for the pairs that need it, and stays None
    elsewhere: contents and guards where the pair's prints (tlindex.ingest.fingerprints) are unknown or
    unequal (equal prints, equal contents), phases where the compile time moved.
    """

    id: int
    compile_id: str
    status: str
    duration_s: float | None
    co_name: str | None
    rank: int | None
    bytes: int
    recompile_reason: str | None = None
    guards_print: str | None = None  # compiles.guards_print
    content_print: int | None = None  # compiles.content_print
    guards: dict[int, tuple] | None = None  # guards.identity -> (type, guard)
    breaks: set[str] | None = None  # graph-break reasons
    caches: dict[str, list[str]] | None = None  # cache -> results in log order
    graphs: dict[str, set[str]] | None = None  # kind -> payloads
    symbols: set[str] | None = None
    phases: dict[str, float] | None = None  # phase -> seconds, from chromium spans

    def brief(self) -> dict:
        return {"id": self.id, "compile_id": self.compile_id, "status": self.status, "duration_s": self.duration_s,
                "co_name": self.co_name, "rank": self.rank, "bytes": self.bytes}


def _sides(conn: sqlite3.Connection, where: str, params: tuple) -> list[tuple[tuple, Side]]:
    """(key, side) of every compile WHERE says (of one run), in the order they happened."""
    rows = conn.execute(f"""
        SELECT id, compile_id, status, (SELECT t.compile_time_s FROM compile_times t WHERE t.compile = compiles.id),
               co_name, co_filename, co_firstlineno, frame_compile_id,
               compiled_autograd_id, rank, envelope_bytes + payload_bytes, recompile_reason, guards_print,
               content_print
        FROM compiles WHERE {where} ORDER BY id""", params).fetchall()
    keyed = []
    anonymous_position: dict[tuple, int] = defaultdict(int)
    for (row, compile_id, status, duration, name, filename, line, frame_compile, ca, rank, size,
         reason, guards_print, content_print) in rows:
        side = Side(row, compile_id, status, duration, name, rank, size, recompile_reason=reason,
                    guards_print=guards_print, content_print=content_print)
        if compile_id == "-/-":
            position = anonymous_position[rank]
            anonymous_position[rank] += 1
            key = (rank, "-/-", position)
        else:
            key = (rank, name, filename.replace("\\", "/").rsplit("/", 1)[-1] if filename else None, line,
                   "ca" if ca is not None else "", frame_compile)
        keyed.append((key, side))
    return keyed


def _by_id(pairs: list[tuple[Side, Side]]) -> dict[int, list[Side]]:
    """The sides of the pairs by compile id (two sides for one id in a run's diff with itself)."""
    sides: dict[int, list[Side]] = defaultdict(list)
    for a, b in pairs:
        sides[a.id].append(a)
        sides[b.id].append(b)
    return sides


def _differing(pairs: list[tuple[Side, Side]], print_of) -> dict[int, list[Side]]:
    """The sides of the pairs whose prints are unknown or unequal, by compile id."""
    return _by_id([(a, b) for a, b in pairs if print_of(a) is None or print_of(a) != print_of(b)])


def _rows_of(conn: sqlite3.Connection, select: str, ids: list[int], rest: str = "", column: str = "compile"):
    """Rows of `select ... WHERE <column> IN (ids) rest`, in chunks of at most 500 ids."""
    for start in range(0, len(ids), 500):
        chunk = ids[start:start + 500]
        yield from conn.execute(f"{select} WHERE {column} IN ({','.join('?' * len(chunk))}) {rest}", chunk)


def _load_contents(conn: sqlite3.Connection, pairs: list[tuple[Side, Side]]) -> None:
    """Break reasons, cache results, graphs and symbols of the paired compiles whose contents may differ."""
    sides = _differing(pairs, lambda side: side.content_print)
    for side in (side for group in sides.values() for side in group):
        side.breaks, side.caches, side.graphs, side.symbols = set(), {}, {}, set()
    ids = list(sides)
    for compile, reason in _rows_of(conn, "SELECT compile, reason FROM graph_break_events", ids):
        for side in sides[compile]:
            side.breaks.add(reason)
    for compile, cache, result in _rows_of(conn, "SELECT compile, cache, result FROM cache_events", ids, "ORDER BY id"):
        for side in sides[compile]:
            side.caches.setdefault(cache, []).append(result)
    kinds = ",".join(f"'{kind}'" for kind in GRAPH_KINDS)
    keys: dict[str, str] = {}  # payload -> its content with counters masked (tlindex.answers.counters)
    for compile, kind, payload, text in _rows_of(
            conn, "SELECT a.compile, a.kind, a.payload, p.text FROM artifacts a LEFT JOIN payloads p ON p.hash = a.payload",
            ids, f"AND a.kind IN ({kinds})", column="a.compile"):
        if payload not in keys:
            keys[payload] = content_key(text) if text is not None else payload
        for side in sides[compile]:
            side.graphs.setdefault(kind, set()).add(keys[payload])
    for compile, symbol, value_range in _rows_of(conn, "SELECT compile, symbol, value_range FROM symbols", ids):
        for side in sides[compile]:
            side.symbols.add(f"{symbol} {value_range or ''}".strip())


def _load_guards(conn: sqlite3.Connection, pairs: list[tuple[Side, Side]]) -> None:
    """The guard lines of the paired compiles whose guards may differ (fingerprints unknown or unequal)."""
    sides = _differing(pairs, lambda side: side.guards_print)
    for side in (side for group in sides.values() for side in group):
        side.guards = {}
    # identity computed, not read: older databases have none
    for compile, guard_type, text in _rows_of(conn, "SELECT compile, guard_type, text FROM guards", list(sides),
                                              "ORDER BY id"):
        for side in sides[compile]:
            side.guards.setdefault(guard_identity(guard_type, text), (guard_type, text))


def _load_phases(conn: sqlite3.Connection, pairs: list[tuple[Side, Side]]) -> None:
    """The compile phases (chromium spans) of the paired compiles whose compile time moved."""
    sides = _by_id([(a, b) for a, b in pairs if None not in (a.duration_s, b.duration_s)
                    and _moved(a.duration_s, b.duration_s)])
    for side in (side for group in sides.values() for side in group):
        side.phases = {}
    names = ",".join(f"'{name}'" for name in PHASES)
    for compile, name, micros in _rows_of(conn, "SELECT compile, name, sum(duration_us) FROM chromium_events",
                                          list(sides), f"AND ph = 'X' AND name IN ({names}) GROUP BY compile, name"):
        for side in sides[compile] if micros is not None else ():
            side.phases[PHASES[name]] = round(micros / 1e6, 3)


def _moved(before: float, after: float) -> bool:
    """A time change beyond timer noise: more than TIME_NOISE_S and TIME_NOISE_RATIO of the time before."""
    delta = after - before
    return abs(delta) > TIME_NOISE_S and abs(delta) > TIME_NOISE_RATIO * max(before, 1e-9)


def _match(a: list[tuple[tuple, Side]], b: list[tuple[tuple, Side]]) -> list[tuple[tuple, Side | None, Side | None]]:
    """Pairs by key (n-th with n-th), then by key without the first line; the rest alone."""
    pairs, left_a = [], []
    queues: dict[tuple, list[Side]] = defaultdict(list)
    for key, side in b:
        queues[key].append(side)
    used: set[int] = set()
    for key, side in a:
        if queues.get(key):
            match = queues[key].pop(0)
            used.add(match.id)
            pairs.append((key, side, match))
        else:
            left_a.append((key, side))
    left_b = [(key, side) for key, side in b if side.id not in used]
    loose: dict[tuple, list[tuple[tuple, Side]]] = defaultdict(list)
    for key, side in left_b:
        loose[_without_line(key)].append((key, side))
    for key, side in left_a:
        candidates = loose.get(_without_line(key))
        if candidates:
            _, match = candidates.pop(0)
            used.add(match.id)
            pairs.append((key, side, match))
        else:
            pairs.append((key, side, None))
    pairs += [(key, None, side) for key, side in left_b if side.id not in used]
    return pairs


def _without_line(key: tuple) -> tuple:
    return key if key[1] == "-/-" else key[:3] + key[4:]


def _changes(a: Side, b: Side) -> tuple[list[str], dict]:
    changes, detail = [], {}
    if a.status != b.status:
        changes.append("status")
        detail["status"] = [a.status, b.status]
    if a.breaks is not None and a.breaks != b.breaks:
        changes.append("graph_breaks")
        detail["graph_breaks"] = {"added": sorted(b.breaks - a.breaks), "removed": sorted(a.breaks - b.breaks)}
    if (a.recompile_reason or None) != (b.recompile_reason or None):
        changes.append("recompile_reason")
        detail["recompile_reason"] = [a.recompile_reason, b.recompile_reason]
    if a.duration_s is not None and b.duration_s is not None and _moved(a.duration_s, b.duration_s):
        changes.append("compile_time")
        phases = {phase: [a.phases[phase], b.phases[phase]] for phase in PHASES.values()
                  if phase in a.phases and phase in b.phases and _moved(a.phases[phase], b.phases[phase])}
        detail["compile_time"] = {"a_s": a.duration_s, "b_s": b.duration_s,
                                  "delta_s": round(b.duration_s - a.duration_s, 3), "phases": phases}
    if a.caches is not None and a.caches != b.caches:
        changes.append("cache")
        detail["cache"] = {cache: [a.caches.get(cache), b.caches.get(cache)]
                           for cache in sorted(set(a.caches) | set(b.caches))
                           if a.caches.get(cache) != b.caches.get(cache)}
    if a.guards is not None and a.guards.keys() != b.guards.keys():
        changes.append("guards")
        detail["guards"] = {"added": _guard_lines(b.guards, b.guards.keys() - a.guards.keys()),
                            "removed": _guard_lines(a.guards, a.guards.keys() - b.guards.keys())}
    if a.graphs is not None:
        differing = sorted(kind for kind in set(a.graphs) & set(b.graphs) if a.graphs[kind] != b.graphs[kind])
        if differing:  # only kinds both logged: a warm cache logs fewer graphs, not different ones
            changes.append("graph")
            detail["graph"] = differing
    if a.symbols is not None and a.symbols != b.symbols:
        changes.append("dynamic_shapes")
        detail["dynamic_shapes"] = {"added": sorted(b.symbols - a.symbols), "removed": sorted(a.symbols - b.symbols)}
    if changes and abs(b.bytes - a.bytes) > BYTES_NOISE_RATIO * max(a.bytes, 1):  # alone, bytes are no change
        changes.append("bytes")
        detail["bytes"] = [a.bytes, b.bytes]
    return changes, detail


def _guard_lines(guards: dict[int, tuple], identities) -> list[str]:
    return sorted(f"{guard_type}: {text}" if guard_type else text
                  for guard_type, text in (guards[identity] for identity in identities))


def _importance(entry: dict) -> tuple:
    """Failures and new graph breaks first, then the biggest compile-time regressions."""
    a, b, changes = entry["a"], entry["b"], entry["changes"]
    failed = b is not None and b["status"] == "error" and (a is None or a["status"] != "error")
    new_breaks = bool(entry.get("detail", {}).get("graph_breaks", {}).get("added"))
    regression = entry.get("detail", {}).get("compile_time", {}).get("delta_s", 0.0)
    alone = a is None or b is None
    return (not failed, not new_breaks, not alone, -regression, not changes)


def _rank_order(entry: dict) -> tuple:
    rank = (entry["b"] or entry["a"])["rank"]
    return (rank is None, rank if isinstance(rank, int) else 0)


def diff(conn: sqlite3.Connection, run_a: str, run_b: str, graphs: bool = False) -> dict:
    """The diff of two runs (ids or label prefixes), as one JSON-ready dict; with graphs, each compile
    whose graphs changed carries `graph_diffs`, the unified diffs of its changed graphs and code."""
    a, b = resolve_run(conn, run_a), resolve_run(conn, run_b)
    compiles = []
    pairs = _match(_sides(conn, "run_id = ?", (a["id"],)), _sides(conn, "run_id = ?", (b["id"],)))
    matched = [(side_a, side_b) for _, side_a, side_b in pairs if side_a and side_b]
    _load_contents(conn, matched)
    _load_guards(conn, matched)
    _load_phases(conn, matched)
    for key, side_a, side_b in pairs:
        changes, detail = _changes(side_a, side_b) if side_a and side_b else ([], {})
        entry = {"key": _key_dict(key), "a": side_a.brief() if side_a else None,
                 "b": side_b.brief() if side_b else None, "changes": changes}
        if detail:
            entry["detail"] = detail
        compiles.append(entry)
    compiles.sort(key=lambda entry: (*_importance(entry), _rank_order(entry)))  # ranks in order, each in log order
    if graphs:
        for entry in compiles:
            if "graph" in entry["changes"]:
                entry["graph_diffs"] = [pair.unified() for pair in graph_pairs(conn, entry["a"]["id"], entry["b"]["id"])
                                        if pair.changed]
    summary_a, summary_b = _run_summary(conn, a), _run_summary(conn, b)
    return {"torch": torch_change(summary_a, summary_b), "a": summary_a, "b": summary_b,
            "config": config_changes(conn, a["id"], b["id"]), "summary": _summary(compiles), "compiles": compiles}


def torch_change(a: dict, b: dict) -> dict:
    """The torch of two runs (their torch_version records) and what changed: "version", "commit" (the same version
    built from another commit), "unknown" (a run logged no torch_version) or None (the same build)."""
    sides = {side: {"version": run["torch_version"], "commit": run["torch_commit"]} for side, run in (("a", a), ("b", b))}
    if a["torch_version"] is None or b["torch_version"] is None:
        changed = None if a["torch_version"] is None and b["torch_version"] is None else "unknown"
    elif a["torch_version"] != b["torch_version"]:
        changed = "version"
    else:
        commits = (a["torch_commit"], b["torch_commit"])
        changed = "commit" if None not in commits and commits[0] != commits[1] else None
    return {**sides, "changed": changed}


def torch_words(torch: dict) -> str:
    """The torch of two runs in one line, as the diff says it first."""
    def build(side: dict) -> str:
        commit = f" ({side['commit'][:8]})" if side["commit"] else ""
        return f"{side['version']}{commit}" if side["version"] else "unknown (no torch_version record)"
    a, b, changed = torch["a"], torch["b"], torch["changed"]
    if changed is None:
        return f"torch {build(a)} in both runs" if a["version"] else "torch: neither run logged its version"
    if changed == "commit":
        return f"torch {a['version']} built from another commit: {a['commit'][:8]} -> {b['commit'][:8]}"
    return f"torch changed: {build(a)} -> {build(b)}"


TORCH_MAY = "a new torch alone can change graphs, guards, generated code, compile times and config defaults"


def _summary(compiles: list[dict]) -> dict:
    """How many compiles matched, changed or stand alone, as the runs' totals count them: without the
    records that carry no compile id (tlparse's [-/-], one per process), which are counted apart."""
    real = [c for c in compiles if c["key"].get("compile") != "-/-"]
    unattributed = [c for c in compiles if c["key"].get("compile") == "-/-"]
    return {"matched": sum(1 for c in real if c["a"] and c["b"]),
            "changed": sum(1 for c in real if c["changes"]),
            "only_a": sum(1 for c in real if c["b"] is None),
            "only_b": sum(1 for c in real if c["a"] is None),
            "without_compile_id": {"matched": sum(1 for c in unattributed if c["a"] and c["b"]),
                                   "changed": sum(1 for c in unattributed if c["changes"]),
                                   "alone": sum(1 for c in unattributed if not (c["a"] and c["b"]))}}


def compare(conn: sqlite3.Connection, compile_a: int, compile_b: int) -> dict | None:
    """Two compiles (row ids) as one entry of a diff, whether or not the diff would pair them; None if absent."""
    sides = {side.id: (key, side) for key, side in _sides(conn, "id IN (?, ?)", (compile_a, compile_b))}
    if compile_a not in sides or compile_b not in sides:
        return None
    (key, a), (_, b) = sides[compile_a], sides[compile_b]
    _load_contents(conn, [(a, b)])
    _load_guards(conn, [(a, b)])
    _load_phases(conn, [(a, b)])
    changes, detail = _changes(a, b)
    return {"key": _key_dict(key), "a": a.brief(), "b": b.brief(), "changes": changes, "detail": detail}


def compile_run_labels(conn: sqlite3.Connection, compile_a: int, compile_b: int) -> dict[int, str]:
    """The labels of two compiles' runs, by compile (a compile in no run has none)."""
    return dict(conn.execute("SELECT c.id, r.label FROM compiles c JOIN runs r ON r.id = c.run_id "
                             "WHERE c.id IN (?, ?)", (compile_a, compile_b)).fetchall())


def _key_dict(key: tuple) -> dict:
    if key[1] == "-/-":
        return {"rank": key[0], "compile": "-/-", "position": key[2]}
    return {"rank": key[0], "co_name": key[1], "file": key[2], "line": key[3], "frame_compile_id": key[5]}


def _run_summary(conn: sqlite3.Connection, run: dict) -> dict:
    totals = conn.execute("SELECT compiles, failures, recompiles, graph_breaks, compile_time_s FROM run_totals "
                          "WHERE run_id = ?", (run["id"],)).fetchone() or (0, 0, 0, 0, 0.0)
    version, commit = conn.execute("SELECT torch_version, torch_commit FROM runs WHERE id = ?", (run["id"],)).fetchone()
    volume = dict(conn.execute("SELECT v.kind, sum(v.bytes) FROM volume v JOIN sources s ON s.id = v.source_id "
                               "WHERE s.run_id = ? GROUP BY v.kind", (run["id"],)).fetchall())
    ranks = [r[0] for r in conn.execute("SELECT DISTINCT rank FROM sources WHERE run_id = ? ORDER BY rank",
                                        (run["id"],))]
    return {**run, "torch_version": version, "torch_commit": commit, "compiles": totals[0] or 0,
            "failures": totals[1] or 0, "recompiles": totals[2] or 0, "graph_breaks": totals[3] or 0,
            "compile_time_s": totals[4] or 0.0, "ranks": ranks,
            "log_bytes_by_kind": volume}


@dataclass
class GraphPair:
    """One FX graph or generated code of a kind both compiles logged, A's and B's (the n-th of each)."""

    kind: str
    name: str
    a_artifact: int
    b_artifact: int
    a_text: str
    b_text: str

    @property
    def changed(self) -> bool:
        return self.a_text != self.b_text

    def unified(self, context: int = 3) -> str:
        """A unified diff of the two texts ('' when they are the same)."""
        return "".join(difflib.unified_diff(
            self.a_text.splitlines(keepends=True), self.b_text.splitlines(keepends=True),
            fromfile=f"a/{self.name} (artifact {self.a_artifact})",
            tofile=f"b/{self.name} (artifact {self.b_artifact})", n=context))


def graph_pairs(conn: sqlite3.Connection, compile_a: int, compile_b: int) -> list[GraphPair]:
    """The graphs and generated code of two compiles, paired per kind in log order (kinds both logged)."""
    kinds = ",".join(f"'{kind}'" for kind in GRAPH_KINDS)
    logged: dict[int, dict[str, list[tuple]]] = {compile_a: {}, compile_b: {}}
    for compile, artifact, kind, name, text in conn.execute(f"""
            SELECT a.compile, a.id, a.kind, coalesce(a.name, a.kind), p.text FROM artifacts a
            JOIN payloads p ON p.hash = a.payload
            WHERE a.compile IN (?, ?) AND a.kind IN ({kinds}) ORDER BY a.id""", (compile_a, compile_b)):
        logged[compile].setdefault(kind, []).append((artifact, name, text))
    pairs = []
    for kind in GRAPH_KINDS:
        for (a_id, name, a_text), (b_id, _, b_text) in zip(logged[compile_a].get(kind, []),
                                                           logged[compile_b].get(kind, [])):
            pairs.append(GraphPair(kind, name, a_id, b_id, a_text, b_text))
    return pairs


def as_text(result: dict) -> list[str]:
    """A diff as `tlindex diff` prints it: the two runs, the counts, then each compile that changed."""
    a, b, summary = result["a"], result["b"], result["summary"]
    torch = result["torch"]
    lines = [torch_words(torch) + (f"; {TORCH_MAY}" if torch["changed"] in ("version", "commit") else "")]
    lines += [f"{side}: run {run['id']} {run['label']}: {run['compiles']} compiles, {run['failures']} failed, "
              f"{run['graph_breaks']} graph breaks, {run['recompiles']} recompiles, {run['compile_time_s']} s"
              for side, run in (("A", a), ("B", b))]
    if a["id"] == b["id"]:
        lines.append("(the same run twice: nothing can have changed)")
    lines += config_lines(result.get("config") or [], torch)
    lines.append(f"{summary['matched']} compiles matched ({summary['changed']} changed, "
                 f"{summary['matched'] - summary['changed']} unchanged), "
                 f"{summary['only_a']} only in A, {summary['only_b']} only in B")
    loose = summary.get("without_compile_id") or {}
    if any(loose.values()):
        lines.append(f"records without a compile id ([-/-], one set per process): {loose['matched']} matched, "
                     f"{loose['changed']} changed, {loose['alone']} in one run only")
    alone = _alone_on_ranks(result["compiles"])
    for entry in result["compiles"]:
        if not entry["changes"] and entry["a"] and entry["b"]:
            continue
        group = alone.get(id(entry))
        if group is None:
            lines += entry_lines(entry)
        elif group:  # the first of its group: one line for every rank
            side = entry["b"] or entry["a"]
            lines.append(f"  [{side['compile_id']}] {side['co_name'] or ''}: {_where(entry)}, on {len(group)} ranks "
                         f"({rank_list(group)})")
    return lines


def _where(entry: dict) -> str:
    return "only in A" if entry["b"] is None else "only in B" if entry["a"] is None else ", ".join(entry["changes"])


def _alone_on_ranks(compiles: list[dict]) -> dict[int, list[int]]:
    """The compiles of one run only that several ranks share (the same compile id and function, e.g. every rank a
    256-rank run has and a 4-rank run lacks): said in one line. {id(entry): its group's ranks for the first entry of a
    group, [] for the others}."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for entry in compiles:
        side = entry["b"] or entry["a"]
        if (entry["a"] is None or entry["b"] is None) and isinstance(side["rank"], int):
            groups[(entry["a"] is None, side["compile_id"], side["co_name"])].append(entry)
    said: dict[int, list[int]] = {}
    for entries in groups.values():
        if len(entries) > 1:
            said.update({id(entry): [] for entry in entries})
            said[id(entries[0])] = [(entry["b"] or entry["a"])["rank"] for entry in entries]
    return said


def entry_lines(entry: dict) -> list[str]:
    """One compile of a diff as `tlindex diff` prints it: what changed, then its guards, new breaks and graphs."""
    lines = []
    side = entry["b"] or entry["a"]
    where = _where(entry)
    rank = f" rank {side['rank']}" if side["rank"] is not None else ""
    detail = entry.get("detail", {})
    time_change, extra = detail.get("compile_time"), ""
    if time_change:
        phases = ", ".join(f"{name} {a_s:.2f} -> {b_s:.2f}" for name, (a_s, b_s) in time_change["phases"].items())
        extra = f" ({time_change['a_s']:.2f} s -> {time_change['b_s']:.2f} s" + (f"; {phases}" if phases else "") + ")"
    lines.append(f"  [{side['compile_id']}]{rank} {side['co_name'] or ''}: {where}{extra}")
    if detail.get("guards"):
        lines.append(f"      guards: {len(detail['guards']['added'])} added, {len(detail['guards']['removed'])} removed")
    for reason in detail.get("graph_breaks", {}).get("added", []):
        lines.append("      new graph break: "  # cut at a word; --json carries it whole
                     + short(" / ".join(line.strip() for line in reason.splitlines() if line.strip()
                                       and not line.startswith("Encountered graph break when attempting")), 200))
    for text in entry.get("graph_diffs", []):
        lines += ["      " + line for line in text.rstrip("\n").split("\n")]
    return lines
