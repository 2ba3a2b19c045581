"""The diff pages: two runs compared (tlindex.answers.diff), and two compiles' graphs and code side by side."""

from __future__ import annotations

import sqlite3

from tlindex.answers.configs import config_groups, shown
from tlindex.answers.diff import TORCH_MAY, compare, compile_run_labels, diff, graph_pairs, torch_words
from tlindex.errors import NotFound, UsageError
from tlindex.pages.hunks import hunks
from tlindex.pages.languages import language
from tlindex.pages.rows import Args

# Run-level rows of the summary table: (label, key of tlindex.answers.diff's run summary).
TOTALS = [("compiles", "compiles"), ("failures", "failures"), ("graph breaks", "graph_breaks"),
          ("recompiles", "recompiles"), ("compile time (s)", "compile_time_s")]
VOLUME_SHOWN = 12  # log kinds whose volume moved most
CHANGED_SHOWN = 500  # compiles that changed, most important first (`tlindex diff --json` has them all)
UNCHANGED_SHOWN = 200


def diff_pick(conn: sqlite3.Connection, args: Args) -> dict:
    """The runs page's form, ?a=RUN&b=RUN: the two runs to compare (the plugin redirects to their diff)."""
    a, b = args.integer("a"), args.integer("b")
    if a is None or b is None:
        raise UsageError("Pick two runs: ?a=RUN&b=RUN")
    return {"a": a, "b": b}


def diff_data(conn: sqlite3.Connection, args: Args, a: int, b: int) -> dict:
    result = diff(conn, str(a), str(b))  # UnknownRun (a NotFound) for a run that is not there
    run_a, run_b = result["a"], result["b"]
    result["totals"] = [(label, run_a[key], run_b[key], round(run_b[key] - run_a[key], 3)) for label, key in TOTALS]
    kinds = set(run_a["log_bytes_by_kind"]) | set(run_b["log_bytes_by_kind"])
    volume = [(kind, run_a["log_bytes_by_kind"].get(kind, 0), run_b["log_bytes_by_kind"].get(kind, 0)) for kind in kinds]
    volume.sort(key=lambda row: (-abs(row[2] - row[1]), row[0]))
    result["volume"] = [(kind, x, y, y - x) for kind, x, y in volume[:VOLUME_SHOWN]]
    result["volume_rest"] = max(len(volume) - VOLUME_SHOWN, 0)
    compiles = result.pop("compiles")
    changed = [c for c in compiles if c["changes"] or not (c["a"] and c["b"])]
    unchanged = [c for c in compiles if not c["changes"] and c["a"] and c["b"] and c["key"].get("compile") != "-/-"]
    result["changed_count"], result["changed"] = len(changed), changed[:CHANGED_SHOWN]
    result["unchanged_count"], result["unchanged"] = len(unchanged), unchanged[:UNCHANGED_SHOWN]
    result["torch_words"], result["torch_may"] = torch_words(result["torch"]), TORCH_MAY
    result["config_groups"] = [{"words": words, "rows": [(f"{c['config']}.{c['key']}", shown(c["a"]), shown(c["b"]),
                                                           " and ".join(side.upper() for side in c["set_in"]))
                                                          for c in items]}
                               for words, items in config_groups(result["config"], result["torch"])]
    result["multi_rank"] = len(set(run_a["ranks"]) | set(run_b["ranks"])) > 1
    return {"diff": result}


def pair_data(conn: sqlite3.Connection, args: Args, ca: int, cb: int) -> dict:
    """Two compiles (of any runs): what changed, and each graph and generated code side by side."""
    entry = compare(conn, ca, cb)
    if entry is None:
        raise NotFound(f"No compile {ca} or no compile {cb}")
    runs = compile_run_labels(conn, ca, cb)
    entry["a"]["run_label"], entry["b"]["run_label"] = runs.get(ca), runs.get(cb)
    entry["graphs"] = [{"kind": pair.kind, "name": pair.name, "a_artifact": pair.a_artifact,
                        "b_artifact": pair.b_artifact, "lang": language(pair.kind, pair.name, None, pair.a_text),
                        "hunks": hunks(pair.a_text, pair.b_text),
                        "a_lines": pair.a_text.count("\n") + 1, "b_lines": pair.b_text.count("\n") + 1}
                       for pair in graph_pairs(conn, ca, cb)]
    return {"entry": entry}
