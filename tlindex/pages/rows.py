"""What every page's data function uses: a page's arguments, and the data as JSON."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Mapping

from tlindex.errors import NotFound, UsageError

SQLITE_MAX = (1 << 63) - 1


class Args:
    """A page's query-string arguments (and the options its caller sets, e.g. the plugin's settings)."""

    def __init__(self, pairs: list[tuple[str, str]] | Mapping[str, str] | None = None, **options):
        items = list(pairs.items()) if isinstance(pairs, Mapping) else list(pairs or [])
        self.pairs = [(str(k), str(v)) for k, v in items]
        self.options = options

    def get(self, name: str, default: str | None = None) -> str | None:
        return next((value for key, value in self.pairs if key == name), default)

    def getlist(self, name: str) -> list[str]:
        return [value for key, value in self.pairs if key == name]

    def integer(self, name: str, default: int | None = None) -> int | None:
        """A whole-number argument, or `default` when absent or empty; UsageError (400) for anything else."""
        text = self.get(name)
        return default if text in (None, "") else integer(name, text)

    def integers(self, name: str) -> list[int]:
        return [integer(name, text) for text in self.getlist(name)]

    def run(self, conn: sqlite3.Connection) -> int | None:
        """The run `?run=` names, by any of its names (tlindex.answers.names); None when absent or empty."""
        from tlindex.answers.names import run_id

        return run_id(conn, self.get("run"))

    def runs(self, conn: sqlite3.Connection) -> list[int]:
        """The runs the `?run=` arguments name (each by any of its names)."""
        from tlindex.answers.names import run_id

        return [run_id(conn, text) for text in self.getlist("run") if text != ""]


def integer(name: str, text: str) -> int:
    """A whole number within SQLite's range, or UsageError naming the argument."""
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, not {text!r}") from None
    if not -SQLITE_MAX <= value <= SQLITE_MAX:
        raise UsageError(f"{name} is out of range")
    return value


def row_id(name: str, text: str) -> int:
    """A page's id from its path (a run, a compile, an artifact): NotFound (404) when it can name no row."""
    try:
        value = int(text)
    except ValueError:
        raise NotFound(f"Not a number: {text}") from None
    if not -SQLITE_MAX <= value <= SQLITE_MAX:
        raise NotFound(f"No such {name}: {text}")
    return value


MAX_DEPTH = 400  # a stack trie nests as deep as the deepest stack; nothing else comes near


def as_data(value, depth: int = 0):
    """A page's data as JSON data: dicts, lists and dataclasses followed (an object's own `as_data()` first),
    functions left out, anything else as its text."""
    if depth > MAX_DEPTH:
        return None
    if hasattr(value, "as_data") and not isinstance(value, type):
        return as_data(value.as_data(), depth + 1)
    if isinstance(value, dict):
        return {str(key): as_data(item, depth + 1) for key, item in value.items() if not callable(item)}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [as_data(item, depth + 1) for item in items]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: as_data(getattr(value, field.name), depth + 1) for field in dataclasses.fields(value)}
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)
