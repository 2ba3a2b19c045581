"""The tree page: every run, under it its compiles as torch names them, under each its artifacts; a filter.

The filter (`?q=`) keeps an artifact whose path (its run, its compile, itself) holds every word of it, a
compile that matches or holds such an artifact, and a run that matches or holds such a compile; the page's
filter box does the same in the browser, as you type, on the texts each node is given (`text`, read by
tlindex.answers.tree, lower-cased as SQLite's `lower` does). A big database is listed up to a budget of compiles and artifacts;
what the budget leaves out is counted, per run and per compile, and said.
"""

from __future__ import annotations

import sqlite3

from tlindex.answers import tree
from tlindex.answers.names import without_attempt
from tlindex.errors import NotFound
from tlindex.pages.rows import Args

RUNS_SHOWN = 50  # without ?run=, the newest runs (the older ones are counted and said, not read)
COMPILES_SHOWN = 2_000
ARTIFACTS_SHOWN = 3_000
OPEN_UP_TO = 400  # artifacts listed: up to this many, every compile is shown open
QUERY_CHARS, QUERY_WORDS = 200, 8  # a filter longer than this is cut (what is kept is said)


def ascii_lower(text: str) -> str:
    """Lower-cased as SQLite's lower() does (A-Z only), so the page's words match the database's texts."""
    return text.translate(_LOWER)


_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def filter_words(query: str | None) -> list[str]:
    """The words of a filter, lower-cased, at most QUERY_WORDS of them within QUERY_CHARS characters."""
    return [without_attempt(word) for word in ascii_lower((query or "")[:QUERY_CHARS]).split()[:QUERY_WORDS]]


def matches(words: list[str], text: str) -> bool:
    return all(word in text for word in words)




class Budget:
    """What is left to list: compiles and artifacts."""

    def __init__(self, compiles: int, artifacts: int):
        self.compiles, self.artifacts = compiles, artifacts


def _run_node(conn: sqlite3.Connection, run: dict, compiles: list[dict], counts: dict[int, int],
              words: list[str], budget: Budget) -> dict | None:
    """A run with the compiles the filter keeps (as many as the budget lists), or None when it keeps none."""
    run_path = run["text"]
    kept = [c for c in compiles if counts.get(c["id"], 0) or matches(words, run_path + "\n" + c["text"])]
    if not kept and not matches(words, run_path):
        return None
    run["ranked"] = len({c["rank"] for c in compiles}) > 1 or (run["world_size"] or 0) > 1
    # compiles as run_health counts them; [-/-] (records outside any compile) is listed as a line of its own
    run["compile_count"], run["compiles"] = sum(bool(c["counted"]) for c in kept), []
    run["artifact_count"] = sum(counts.get(c["id"], 0) for c in kept)
    for compile in kept:
        # a row that is no compile ([-/-], one per process; an export's compile context) is listed without taking
        # from the budget
        if budget.compiles <= 0 and compile["counted"]:
            continue
        budget.compiles -= bool(compile["counted"])
        count = counts.get(compile["id"], 0)
        listed = (tree.tree_artifacts(conn, compile["id"], words, budget.artifacts)
                  if count and budget.artifacts > 0 else [])
        budget.artifacts -= len(listed)
        compile.update(artifact_count=count, artifacts=listed, artifacts_hidden=count - len(listed))
        run["compiles"].append(compile)
    run["compiles_hidden"] = len(kept) - len(run["compiles"])  # (never a row that is no compile)
    return run


def picked_artifact(conn: sqlite3.Connection, artifact: int) -> dict:
    """An artifact chosen first (`?a=`): what the page says of it while a second one is picked."""
    found = tree.picked_artifact(conn, artifact)
    if found is None:
        raise NotFound(f"No artifact {artifact}")
    return found


def tree_data(conn: sqlite3.Connection, args: Args) -> dict:
    """Runs → compiles → artifacts (of `?run=`, the newest 50 without), kept by `?q=`, listed up to a budget."""
    query = args.get("q") or ""
    words = filter_words(query)
    only = args.runs(conn) or None
    picked = args.integer("a")
    shown_runs, older = (only, 0) if only else tree.newest_runs(conn, RUNS_SHOWN)
    counts = tree.artifact_counts(conn, words, shown_runs)
    by_run = tree.tree_compiles(conn, shown_runs)
    budget, runs, kept = Budget(COMPILES_SHOWN, ARTIFACTS_SHOWN), [], {"runs": 0, "compiles": 0, "artifacts": 0}
    for run in tree.tree_runs(conn, shown_runs):
        shown = len(runs) < RUNS_SHOWN
        node = _run_node(conn, run, by_run.get(run["id"], []), counts, words, budget if shown else Budget(0, 0))
        if node is None:
            continue
        kept["runs"] += 1
        kept["compiles"] += node["compile_count"]
        kept["artifacts"] += node["artifact_count"]
        if shown:
            runs.append(node)
    listed = {"compiles": sum(bool(c["counted"]) for r in runs for c in r["compiles"]),
              "artifacts": sum(len(c["artifacts"]) for r in runs for c in r["compiles"])}
    return {"query": query, "words": words, "only": only, "runs": runs, "kept": kept, "listed": listed,
            "runs_hidden": kept["runs"] - len(runs), "open": listed["artifacts"] <= OPEN_UP_TO or bool(words),
            "complete": kept == {"runs": len(runs), **listed},
            "picked": picked_artifact(conn, picked) if picked is not None else None,
            "ungrouped": tree.ungrouped_compiles(conn), "older": older}
