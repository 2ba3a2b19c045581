"""What a page declares: its path with typed placeholders, its query arguments, its data, its template, its file.

A placeholder (`{run}`, `{compile}`, `{hash}`) has a type (`Placeholder`): what it matches in a path, how the
matched text becomes the value its data function takes, how `tlindex show` resolves a name a user gives
(`RUN:0/1`), and real values of a database for the tests and benchmarks (`sample`, SQL of
tlindex.answers.samples). A query argument (`Arg`: `?run=1&run=2`, `?q=`, `?mask=1`) says how a value is written
into a URL. A page's URL, its route, its report file and the tests' cases all come from these.
"""

from __future__ import annotations

import functools
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlencode

from tlindex.answers import samples
from tlindex.answers.clip import bound_texts
from tlindex.pages.rows import Args, row_id

ID = r"-?\d+"
RAW_TEXT = ".txt"  # a payload's raw text: its page's path and this (its download)
PLACEHOLDER_RE = re.compile(r"\{(\w+)\}")


def _run(conn: sqlite3.Connection, given: str, run: int | None) -> int:
    from tlindex.answers.names import resolve_run

    return resolve_run(conn, given)["id"]


def _compile(conn: sqlite3.Connection, given: str, run: int | None) -> int:
    from tlindex.answers.names import resolve_compile

    return resolve_compile(conn, given, run)


@dataclass(frozen=True)
class Placeholder:
    """The type of a path's `{name}`: ids are whole numbers (past 64 bits they name no row: 404)."""

    sample: str                          # SQL (tlindex.answers.samples): real values of a database (tests, benchmarks)
    regex: str = ID                      # what it matches in a path
    text: bool = False                   # taken as matched (a hash), not as an id
    names: Callable[[sqlite3.Connection, str, int | None], object] | None = None  # `tlindex show`'s names: a run
    shown: bool = True                   # whether `tlindex show` takes it (a payload's `.txt` it does not)
    run: bool = False                    # it names a run (a compile named after it is of that run)

    def parse(self, name: str, text: str):
        """A matched path's text as the data function takes it: NotFound for an id that can name no row."""
        return text if self.text else row_id(name, text)

    def write(self, value) -> str:
        """A value as its path writes it."""
        return str(value) if self.text else str(int(value))

    def resolve(self, conn: sqlite3.Connection, name: str, given: str, run: int | None):
        """A value as a user names it (`tlindex show`): a run by label, a compile as torch prints it."""
        if self.names is not None:
            return self.names(conn, given, run)
        return self.parse(name, given)


RUN = Placeholder(samples.ids("runs"), names=_run, run=True)
COMPILE = Placeholder(samples.ids("compiles"), names=_compile)
# Every placeholder a path may name, by name: a path naming another is refused when it is declared.
PLACEHOLDERS: dict[str, Placeholder] = {
    "run": RUN, "a": RUN, "b": Placeholder(samples.ids("runs", " DESC"), names=_run, run=True),
    "compile": COMPILE, "ca": COMPILE, "cb": Placeholder(samples.ids("compiles", " DESC"), names=_compile),
    "node": Placeholder(samples.values(1, 2)),
    "piece": Placeholder(samples.ids("piece_compiles")),
    "artifact": Placeholder(samples.ids("artifacts")),
    "hash": Placeholder(samples.PAYLOAD_HASHES, r"[0-9a-f]{32}", text=True),
    "ext": Placeholder(samples.values("", RAW_TEXT), f"(?:{re.escape(RAW_TEXT)})?", text=True, shown=False),
    "query": Placeholder(samples.values("failures"), r"[^/]+", text=True),  # a canned query (Datasette's page)
}
FORMAT = r"(?:\.json)?"  # a page's JSON twin: its path and `.json`
PAGE_SUFFIX = ".html"  # what a page's file in a report ends with (its file rule names it; the report counts them)


@dataclass(frozen=True)
class Arg:
    """A query argument a page's URL may carry: an id (`int`), a text, a `flag` (1, or absent); `many`: repeated."""

    name: str
    kind: str = "int"
    many: bool = False

    def pairs(self, value) -> list[tuple[str, object]]:
        """The URL's (name, value) pairs for a value (None: none)."""
        if self.many:
            values = [] if value is None else [value] if isinstance(value, (int, str)) else list(value)
            return [(self.name, int(v) if self.kind == "int" else v) for v in values]
        if value is None or value == "" or (self.kind == "flag" and not value):
            return []
        return [(self.name, 1 if self.kind == "flag" else int(value) if self.kind == "int" else value)]


class Files(Protocol):
    """Where the report puts a page (tlindex.report.files): a path under DIR, or None (not reported)."""

    def of_run(self, run: int, name: str) -> str | None: ...
    def of_compile(self, compile: int, name: str) -> str | None: ...
    def of_piece(self, piece: int, name: str) -> str | None: ...
    def of_artifact(self, artifact: int, name: str) -> str | None: ...
    def of_rank(self, run: int, rank: int, name: str) -> str | None: ...
    def payload_page(self, artifact: int) -> str | None: ...
    def top(self, name: str) -> str | None: ...
    def of_runs(self, args: Args, name: str) -> str | None: ...
    def of_query(self, query: str, run: str | None, name: str) -> str | None: ...


FileRule = Callable[[Files, dict, Args], "str | None"]
Data = Callable[..., dict]


@dataclass(frozen=True)
class Page:
    name: str
    path: str                  # under the database's URL; {name} placeholders (PLACEHOLDERS)
    data: Data                 # (conn, args, **values) -> the page's data; NotFound / UsageError for 404 / 400
    template: str | None       # what the plugin renders it with (None: it is not HTML)
    file: FileRule | None      # where `tlindex report` writes it (None: server-only, and why)
    server_only: str = ""      # why a static report cannot have it
    kind: str = "html"         # html; json (streamed trace), text (raw payload), redirect, fragment (trie node)
    database: bool = True      # whether its data reads the database (`tlindex show` opens none for a page that does not)
    args: tuple[Arg, ...] = ()  # the query arguments its links carry, in their order in a URL
    without: str | None = None  # the page linked instead when a value of the path is None (a run's: the runs page)
    samples: tuple[tuple[str, str], ...] = ()  # a placeholder's sample for this page, where its type's has no data
    within: str | None = None  # the page whose values it shares, which the report renders it with (a compile's)
    keys: tuple[tuple[str, str], ...] = ()  # its JSON twin's top-level keys, in words (or in tlindex/pages/twins.py)

    def __post_init__(self):
        unknown = [name for name in self.placeholders if name not in PLACEHOLDERS]
        if unknown:
            raise ValueError(f"page {self.name}: no placeholder type for {unknown} (tlindex.pages.declare)")

    @property
    def json_twin(self) -> bool:
        """Whether it answers `<path>.json` with its data: every page that is not data itself."""
        return self.kind in ("html", "fragment")

    @functools.cached_property
    def placeholders(self) -> list[str]:
        return PLACEHOLDER_RE.findall(self.path)

    @functools.cached_property
    def parameters(self) -> tuple[str, ...]:
        """What a link to it takes, in order: its path's values, then its query arguments."""
        return (*self.placeholders, *(arg.name for arg in self.args))

    @functools.cached_property
    def pattern(self) -> str:
        """The path as a regular expression with named groups (no anchors, no database)."""
        out, last = "", 0
        for match in PLACEHOLDER_RE.finditer(self.path):
            out += re.escape(self.path[last:match.start()])
            out += f"(?P<{match.group(1)}>{PLACEHOLDERS[match.group(1)].regex})"
            last = match.end()
        out += re.escape(self.path[last:])
        return out + (f"(?P<format>{FORMAT})" if self.json_twin else "")

    @functools.cached_property
    def _pieces(self) -> list[str]:
        """The path cut at its placeholders: literal, name, literal, name, …, literal."""
        return PLACEHOLDER_RE.split(self.path)

    def sample(self, name: str) -> str:
        """SQL giving real values of the placeholder `name` for this page (the tests' and benchmarks' cases)."""
        return dict(self.samples).get(name) or PLACEHOLDERS[name].sample

    def values(self, found: dict[str, str]) -> dict:
        """A matched path's values as the data function takes them: ids as ints (NotFound past 64 bits)."""
        return {name: PLACEHOLDERS[name].parse(name, text) for name, text in found.items() if name != "format"}

    def written(self, values: dict) -> str:
        """The path with its values (a text left out: empty; an id left out: ValueError), without the database."""
        pieces = self._pieces
        out = [pieces[0]]
        for i in range(1, len(pieces), 2):
            name, kind = pieces[i], PLACEHOLDERS[pieces[i]]
            given = values.get(name)
            if given is None and not kind.text:
                raise ValueError(f"a link to the {self.name} page needs its {name}")
            out += [kind.write(given) if given is not None else "", pieces[i + 1]]
        return "".join(out)

    def query(self, values: dict) -> str:
        """The query string of a link (`?run=1&q=x`; empty without arguments)."""
        pairs = [pair for arg in self.args for pair in arg.pairs(values.get(arg.name))]
        return "?" + urlencode(pairs) if pairs else ""

    def read(self, conn: sqlite3.Connection, args: Args | None = None, **values) -> dict:
        """The page's data, no text in it longer than a page shows (tlindex.answers.clip.bound_texts; a raw payload,
        which is its download, whole)."""
        data = self.data(conn, args or Args(), **values)
        if self.json_twin and isinstance(data, dict) and not data.get("raw"):
            bound_texts(data)
        return data
