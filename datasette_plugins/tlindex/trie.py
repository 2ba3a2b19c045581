"""The stack trie: every dynamo_start stack of a run (and rank) as one tree, as tlparse draws it.

Shared prefixes merge; a node with one child continues at the same
indentation (a single stack reads as a flat list, most recent call last); a
node with several children makes each child collapsible. Compile ids hang on
the frame that was compiled, coloured by status. Rendering stops after a
node budget and leaves the rest to be fetched when opened, so a run with
thousands of compiles still gives a small page.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field

from markupsafe import Markup

FrameKey = tuple  # (filename, line, name, loc)

STATUS_LEGEND = [
    ("ok", "Success"),
    ("break", "Success with restart (e.g. graph break)"),
    ("empty", "Empty graph"),
    ("error", "Error"),
    ("missing", "Metrics were missing"),
    ("none", "No compile id: [-/-], records outside any compilation"),
]


@dataclass
class Node:
    id: int
    frame: FrameKey | None
    children: dict[FrameKey, "Node"] = field(default_factory=dict)
    compiles: list[tuple[int, str, str, int | None]] = field(default_factory=list)  # (row id, compile id, status, rank)


def short_path(filename: str | None) -> str:
    if not filename:
        return "(unknown)"
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def _strip_dynamo_frames(frames: list[FrameKey]) -> list[FrameKey]:
    """Drop torch/_dynamo/convert_frame.py frames at the end of a stack (tlparse does too)."""
    while frames and (frames[-1][0] or "").endswith("torch/_dynamo/convert_frame.py"):
        frames.pop()
    return frames


def build_trie(conn: sqlite3.Connection, run_id: int, rank: int | None) -> Node:
    """The trie of the run's dynamo_start stacks (one rank, or every rank when rank is None)."""
    compiles = conn.execute("""
        SELECT id, compile_id, status, rank, dynamo_start, stack_print FROM compiles
        WHERE run_id = ? AND (? IS NULL OR rank = ?) AND dynamo_start IS NOT NULL ORDER BY id""",
        (run_id, rank, rank)).fetchall()
    # Most compiles share their stack with others: the frames of one dynamo_start are read per
    # distinct stack (compiles.stack_print), those of each compile only where the print is unknown.
    keys = [(stack_print,) if stack_print is not None else (None, start) for *_, start, stack_print in compiles]
    first_with: dict[tuple, int] = {}
    for key, (*_, start, _) in zip(keys, compiles):
        first_with.setdefault(key, start)
    stacks = _stacks(conn, list(first_with.values()))
    root = Node(0, None)
    count = 1
    for key, (compile_row, compile_id, status, rank, *_) in zip(keys, compiles):
        frames = stacks.get(first_with[key])
        if frames is None:  # no stack logged: not in the trie
            continue
        node = root
        for frame in frames:
            child = node.children.get(frame)
            if child is None:
                child = node.children[frame] = Node(count, frame)
                count += 1
            node = child
        node.compiles.append((compile_row, compile_id, status, rank))
    return root


def _stacks(conn: sqlite3.Connection, starts: list[int]) -> dict[int, list[FrameKey]]:
    """dynamo_start envelope id -> its stack, outermost first, Dynamo's own frames dropped."""
    frames: dict[int, list[tuple[int, FrameKey]]] = {}
    for start, depth, *frame in conn.execute("""
            SELECT f.envelope_id, f.depth, f.filename, f.line, f.name, f.loc FROM frames f
            WHERE f.envelope_id IN (SELECT value FROM json_each(?)) AND f.stack = 'stack'""", (json.dumps(starts),)):
        frames.setdefault(start, []).append((depth, tuple(frame)))
    return {start: _strip_dynamo_frames([frame for _, frame in sorted(found, key=lambda f: f[0])])
            for start, found in frames.items()}


def size(node: Node) -> int:
    return 1 + sum(size(child) for child in node.children.values())


def find(node: Node, node_id: int) -> Node | None:
    stack = [node]
    while stack:
        current = stack.pop()
        if current.id == node_id:
            return current
        stack.extend(current.children.values())
    return None


class TrieRenderer:
    """Render a trie to HTML (everything escaped), within a node budget."""

    def __init__(self, compile_url, fragment_url, budget: int, open_all: bool, bytecode_url=None):
        self.compile_url = compile_url      # compile row id -> URL
        self.bytecode_url = bytecode_url    # compile row id -> URL of its bytecode page, or None
        self.fragment_url = fragment_url    # node id -> URL of its lazily loaded children
        self.budget = budget
        self.open_all = open_all            # small tries start fully open

    def frame(self, node: Node) -> Markup:
        filename, line, name, loc = node.frame
        text = Markup('<span class="frame">{}:{} in <b>{}</b></span>').format(short_path(filename), line, name)
        if loc:
            text += Markup('<code class="loc">{}</code>').format(loc)
        links = Markup(" ").join(self.badge(group) for group in _by_id_and_status(node.compiles))
        return Markup('<span class="node">{}{}</span>').format(links + (" " if links else ""), text)

    def badge(self, group: list[tuple]) -> Markup:
        """One compile id with one status, on one rank or on several: labelled with its ranks."""
        row, compile_id, status, _ = group[0]
        bytecode = self.bytecode_url(row) if self.bytecode_url else None
        extra = Markup(' <a class="bytecode" href="{}" title="Dynamo\'s bytecode of this resume function, '
                       'side by side">bytecode</a>').format(bytecode) if bytecode else Markup("")
        ranks = sorted(rank for *_, rank in group if rank is not None)
        if not ranks:
            return Markup('<a class="compile status-{}" href="{}">[{}]</a>{}').format(
                status, self.compile_url(row), compile_id, extra)
        label = f"r{ranks[0]}" if len(ranks) == 1 else f"r{_spans(ranks)}"
        distinct = sorted(set(ranks))
        title = f"{'rank' if len(distinct) == 1 else 'ranks'} {', '.join(map(str, distinct))}: {status}"
        if len(ranks) > len(distinct):  # the id compiled again after a reset, on some rank
            title += f" ({len(ranks)} compiles)"
        return Markup('<a class="compile status-{}" href="{}" title="{}">[{}]<sub class="ranks">{}</sub></a>{}').format(
            status, self.compile_url(row), title, compile_id, label, extra)

    def children(self, node: Node) -> Markup:
        """The items under `node`: a chain of single children stays flat; a fork nests."""
        parts = []
        while True:
            kids = list(node.children.values())
            if len(kids) == 1:
                node = kids[0]
                self.budget -= 1
                parts.append(Markup("<li>{}</li>").format(self.frame(node)))
                continue
            for kid in kids:
                parts.append(self.fork(kid))
            return Markup("").join(parts)

    def fork(self, node: Node) -> Markup:
        self.budget -= 1
        if not node.children:
            return Markup('<li class="leaf">{}</li>').format(self.frame(node))
        if self.budget <= 0:
            return Markup('<li><details class="lazy" data-src="{}"><summary>{}</summary>'
                          '<ul class="trie"><li class="loading">loading…</li></ul></details></li>').format(
                self.fragment_url(node.id), self.frame(node))
        inner = self.children(node)
        return Markup('<li><details{}><summary>{}</summary><ul class="trie">{}</ul></details></li>').format(
            Markup(" open") if self.open_all else "", self.frame(node), inner)

    def render(self, node: Node) -> Markup:
        return Markup('<ul class="trie">{}</ul>').format(self.children(node))


def _by_id_and_status(compiles: list[tuple]) -> list[list[tuple]]:
    """Compiles grouped by (compile id, status), first seen first: identical ranks share one badge."""
    groups: dict[tuple, list[tuple]] = {}
    for compile in compiles:
        groups.setdefault((compile[1], compile[2]), []).append(compile)
    return list(groups.values())


def _spans(ranks: list[int]) -> str:
    """0,1,2,3,5 -> 0-3,5"""
    ranks = sorted(set(ranks))
    parts, start = [], ranks[0]
    for previous, current in zip(ranks, ranks[1:] + [None]):
        if current != previous + 1 if current is not None else True:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = current
    return ",".join(parts)
