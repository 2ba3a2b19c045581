"""Inductor provenance (tlparse -i): which lines of a compile's pre-grad graph, post-grad graph
and generated code belong together, from its `inductor_provenance_tracking_node_mappings`
artifact (logged with INDUCTOR_PROVENANCE=1).

The mapping names nodes and kernels; here they become line numbers. A graph line
defines the node named before its first `=` or `:`. A kernel is found in the
generated code after `def call(` (Python wrapper) or `::run_impl(` (AOTInductor
C++, where a Triton kernel is run by `call_<kernel>(`); a kernel named bare is
every call of it there, one with a debug handle (`name:3`, mapping version 2)
the first call after its `[Provenance debug handles] name:3` comment.
"""

from __future__ import annotations

import json
import re
import sqlite3
from bisect import bisect_right
from collections import defaultdict

PANES = ("pre", "post", "code")
PRE_GRAPHS = ("before_pre_grad_graph", "inductor_pre_grad_graph")
POST_GRAPHS = ("inductor_post_grad_graph", "after_post_grad_graph")
CODE = ("inductor_output_code", "inductor_aot_wrapper_code")
MAPPINGS = "inductor_provenance_tracking_node_mappings"
CODE_START_RE = re.compile(r"def call\(|::run_impl\(")


def node_lines(text: str) -> dict[str, list[int]]:
    """{node name: [line numbers (1-based) defining it]} of an FX graph's printed code."""
    found: dict[str, list[int]] = defaultdict(list)
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "def ", "class ", "return ")):
            continue
        name = re.split(r"[=:]", stripped, maxsplit=1)[0].strip()
        if name.isidentifier():
            found[name].append(number)
    return found


CALL_RE = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*?)(?:\.run)?\(")
HANDLE_RE = re.compile(r"\[Provenance debug handles\]\s*(.*)$")


def kernel_lines(text: str, kernels) -> dict[str, list[int]]:
    """{kernel as the mapping names it: [lines of the generated code that run it]}, in one pass."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if CODE_START_RE.search(line)), 0)
    calls: dict[str, list[int]] = defaultdict(list)     # called name -> line numbers, in order
    markers: dict[str, int] = {}                         # "name:handle" -> line number of its comment
    for number, line in enumerate(lines[start:], start + 1):
        stripped = line.strip()
        if stripped.startswith(("#", "//")):
            if (handles := HANDLE_RE.search(stripped)):
                for handle in re.split(r"[\s,]+", handles.group(1)):
                    markers.setdefault(handle, number)
            continue
        if "_xnumel =" in stripped:
            continue
        for name in {m.group(1) for m in CALL_RE.finditer(stripped)}:
            calls[name.removeprefix("call_")].append(number)
    found: dict[str, list[int]] = {}
    for kernel in kernels:
        bare, handle = kernel, None
        if ":" in kernel and kernel.rsplit(":", 1)[1].isdigit():
            bare, handle = kernel.rsplit(":", 1)
        if handle is None:
            if calls.get(bare):
                found[kernel] = calls[bare]  # a bare name: every call of that kernel
        elif kernel in markers:  # a debug handle: the first call after its comment
            after = bisect_right(calls.get(bare, []), markers[kernel])
            if after < len(calls.get(bare, [])):
                found[kernel] = [calls[bare][after]]
    return found


def _code_maps(mappings: dict) -> tuple[dict, dict]:
    """(code kernel -> post nodes, post node -> code kernels), whatever the backend's key names."""
    to_post = next((v for k, v in mappings.items() if k.endswith("CodeToPost") and isinstance(v, dict)), {})
    from_post = next((v for k, v in mappings.items() if k.startswith("postTo") and k.endswith("Code")
                      and isinstance(v, dict)), {})
    return to_post, from_post


def line_links(mappings: dict, pre: str, post: str, code: str) -> dict[str, dict[int, dict[str, list[int]]]]:
    """{pane: {line: {other pane: [lines]}}} for every line that the mapping ties to another pane."""
    pre_to_post = mappings.get("preToPost") or {}
    post_to_pre = mappings.get("postToPre") or {}
    code_to_post, post_to_code = _code_maps(mappings)
    pre_nodes, post_nodes = node_lines(pre), node_lines(post)
    kernels = kernel_lines(code, set(code_to_post) | {k for ks in post_to_code.values() for k in ks})

    def lines_of(names, where) -> list[int]:
        return sorted({line for name in names for line in where.get(name, [])})

    links: dict[str, dict[int, dict[str, list[int]]]] = {pane: {} for pane in PANES}

    def add(pane: str, lines: list[int], targets: dict[str, list[int]]) -> None:
        targets = {k: v for k, v in targets.items() if v}
        for line in lines:
            if targets:
                entry = links[pane].setdefault(line, {})
                for other, found in targets.items():
                    entry[other] = sorted(set(entry.get(other, [])) | set(found))

    for node, posts in pre_to_post.items():
        add("pre", pre_nodes.get(node, []), {"post": lines_of(posts, post_nodes), "code": lines_of(
            [k for p in posts for k in post_to_code.get(p, [])], kernels)})
    for node in dict.fromkeys([*post_to_pre, *post_to_code]):  # in the mapping's order (a set's varies by process)
        add("post", post_nodes.get(node, []), {"pre": lines_of(post_to_pre.get(node, []), pre_nodes),
                                               "code": lines_of(post_to_code.get(node, []), kernels)})
    for kernel, posts in code_to_post.items():
        add("code", kernels.get(kernel, []), {"post": lines_of(posts, post_nodes), "pre": lines_of(
            [n for p in posts for n in post_to_pre.get(p, [])], pre_nodes)})
    return links


PANE_TITLES = {"pre": "pre-grad graph", "post": "post-grad graph", "code": "generated code"}


def _own_artifact(conn: sqlite3.Connection, mapping: dict, names: tuple[str, ...]) -> dict | None:
    """The artifact named `names` (or of that kind) that the mapping describes: of its compile (without one:
    of its process), the last logged before the mapping, else the first after it. A training compile logs
    the forward's graph, code and mapping, then the backward's: each mapping gets its own half's."""
    marks = ", ".join("?" * len(names))
    return _one(conn, f"""
        SELECT a.id, a.name, p.text FROM artifacts a JOIN payloads p ON p.hash = a.payload
        JOIN envelopes e ON e.id = a.envelope_id
        WHERE a.compile IS ? AND e.source_id = ? AND (a.name IN ({marks}) OR a.kind IN ({marks}))
        ORDER BY a.id > :mapping, CASE WHEN a.id < :mapping THEN -a.id ELSE a.id END LIMIT 1""".replace(
        ":mapping", str(int(mapping["id"]))), (mapping["compile"], mapping["source_id"], *names, *names))


def provenance_data(conn: sqlite3.Connection, artifact_id: int) -> dict | None:
    """The three panes and their line links for one inductor_provenance_tracking_node_mappings artifact."""
    mapping = _one(conn, """
        SELECT a.id, a.compile, e.source_id, p.text, c.compile_id, c.co_name, s.run_id
        FROM artifacts a JOIN payloads p ON p.hash = a.payload JOIN envelopes e ON e.id = a.envelope_id
        JOIN sources s ON s.id = e.source_id LEFT JOIN compiles c ON c.id = a.compile
        WHERE a.id = ? AND a.name = ?""", (artifact_id, MAPPINGS))
    if mapping is None:
        return None
    try:
        parsed = json.loads(mapping["text"])
    except ValueError:
        parsed = None
    panes = {pane: _own_artifact(conn, mapping, names)
             for pane, names in zip(PANES, (PRE_GRAPHS, POST_GRAPHS, CODE))}
    texts = {pane: (artifact or {}).get("text") or "" for pane, artifact in panes.items()}
    links = line_links(parsed, texts["pre"], texts["post"], texts["code"]) if isinstance(parsed, dict) else {}
    return {"mapping": mapping, "valid": isinstance(parsed, dict),
            "panes": [{"key": pane, "title": PANE_TITLES[pane], "artifact": panes[pane],
                       "lines": texts[pane].split("\n") if texts[pane] else [],
                       "linked": set(links.get(pane, {}))} for pane in PANES],
            "links": links}


def _one(conn: sqlite3.Connection, sql: str, params=()) -> dict | None:
    cursor = conn.execute(sql, params)
    row = cursor.fetchone()
    return dict(zip([d[0] for d in cursor.description], row)) if row is not None else None
