"""The stack trie: every dynamo_start stack of a run (and rank) as one tree, as tlparse draws it
(the plugin's trie.py renders it).

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

from tlindex.answers.sql import dicts, of_one_rank

FrameKey = tuple  # (filename, line, name, loc)



@dataclass
class Node:
    id: int
    frame: FrameKey | None
    children: dict[FrameKey, "Node"] = field(default_factory=dict)
    compiles: list[tuple[int, str, str, int | None]] = field(default_factory=list)  # (row id, compile id, status, rank)

    def as_data(self) -> dict:
        """The node as JSON data: its frame, its compiles, its children (a page's JSON twin, `tlindex show trie`)."""
        frame = dict(zip(("filename", "line", "name", "loc"), self.frame)) if self.frame else None
        return {"id": self.id, "frame": frame,
                "compiles": [dict(zip(("compile", "compile_id", "status", "rank"), c)) for c in self.compiles],
                "children": list(self.children.values())}


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
    of_rank, params = of_one_rank("rank", rank)
    compiles = conn.execute(f"""
        SELECT id, compile_id, status, rank, dynamo_start, stack_print FROM compiles
        WHERE run_id = ?{of_rank} AND dynamo_start IS NOT NULL ORDER BY id""", (run_id, *params)).fetchall()
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


def run_ranks(conn: sqlite3.Connection, run: int) -> list[int | None]:
    """The ranks of a run's processes, each once, in order (a trie is drawn for each)."""
    return [r[0] for r in conn.execute("SELECT DISTINCT rank FROM sources WHERE run_id = ? ORDER BY rank", (run,))]


def unattributed_kinds(conn: sqlite3.Connection, run: int, rank: int | None) -> list[dict]:
    """The kinds of record with a context stack but no compile id (of one rank, or every rank when None), counted."""
    # records without a compile id are those of the [-/-] compiles: found through them, not every envelope
    of_rank, params = of_one_rank("c.rank", rank)
    return dicts(conn.execute(f"""
        SELECT e.kind, count(*) AS n FROM compiles c CROSS JOIN envelopes e
        WHERE c.run_id = ?{of_rank} AND c.compile_id = '-/-' AND e.compile = c.id
          AND e.compile_id = '-/-'
          AND EXISTS (SELECT 1 FROM frames f WHERE f.envelope_id = e.id AND f.stack = 'context')
        GROUP BY e.kind ORDER BY n DESC, e.kind""", (run, *params)))


def anonymous_compiles(conn: sqlite3.Connection, run: int, rank: int | None, limit: int) -> list[dict]:
    """The first `limit` [-/-] compiles of a run (of one rank, or every rank when None), by rank."""
    of_rank, params = of_one_rank("rank", rank)
    return dicts(conn.execute(f"""
        SELECT id, rank, status, fail_type, envelope_count FROM compiles
        WHERE run_id = ?{of_rank} AND compile_id = '-/-' ORDER BY rank, id LIMIT ?""", (run, *params, limit)))

