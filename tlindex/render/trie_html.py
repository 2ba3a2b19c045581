"""The stack trie as HTML (tlindex.answers.trie builds it): nodes within a budget, compile badges by status.

Rendering stops after a node budget and leaves the rest to be fetched when opened, so a run with
thousands of compiles still gives a small page.
"""

from __future__ import annotations

from markupsafe import Markup

from tlindex.answers.trie import Node, short_path

STATUS_LEGEND = [
    ("ok", "Success"),
    ("break", "Success with restart (e.g. graph break)"),
    ("empty", "Empty graph"),
    ("error", "Error"),
    ("missing", "Began, never ended (metrics missing: cut off)"),
    ("none", "No compile: [-/-], records outside any compilation, or an export's compile context"),
]


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
