"""The canned queries of queries/*.sql: load, describe, run.

Each file starts with a comment header: the first line is the title, the next
lines describe what it answers, and lines of the form `-- :name  help` declare
its named parameters. An empty or missing parameter means "all" (or the
documented default). The same files are what `tlindex query NAME` runs and
what the Datasette plugin serves as canned queries.

    python -m tlindex.queries > docs/queries.md
"""

from __future__ import annotations

import functools
import re
import sqlite3
import sys
from dataclasses import dataclass, field

from .resources import resource_dir

PARAM_RE = re.compile(r"^--\s*:(\w+)\s+(.*)$")


@dataclass
class CannedQuery:
    name: str
    title: str
    description: str
    sql: str
    params: list[tuple[str, str]] = field(default_factory=list)  # (name, help)

    @property
    def body(self) -> str:
        """The SQL without its header comment (which says the same as title and description)."""
        lines = self.sql.splitlines()
        while lines and lines[0].startswith("--"):
            lines.pop(0)
        return "\n".join(lines).strip() + "\n"

    @property
    def summary(self) -> str:
        """The description's first sentence: what the query answers, in one line."""
        first = re.split(r"(?<=[.:;])\s", self.description, maxsplit=1)[0]
        return first.rstrip(".:;") + "."


def parse_query(name: str, text: str) -> CannedQuery:
    """Read a query file's header."""
    header = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        header.append(line)
    if not header:
        raise ValueError(f"queries/{name}.sql has no header comment")
    title = header[0].lstrip("- ").strip()
    description, params = [], []
    for line in header[1:]:
        match = PARAM_RE.match(line)
        if match:
            params.append((match.group(1), match.group(2).strip()))
        else:
            description.append(line.lstrip("- ").strip())
    return CannedQuery(name, title, " ".join(description), text, params)


@functools.lru_cache(maxsize=1)  # the files do not change under a running server
def load_queries() -> dict[str, CannedQuery]:
    """Every canned query, by name (the file name without .sql)."""
    return {path.stem: parse_query(path.stem, path.read_text())
            for path in sorted(resource_dir("queries").glob("*.sql"))}


class _Params(dict):
    """Named parameters; one not given binds NULL (which the queries read as "all")."""

    def __missing__(self, key: str) -> None:
        return None


# What a read-only query may do (SQLite authorizer action codes); anything else (writes,
# ATTACH and VACUUM INTO, which create files, DDL, transactions) is refused as it is prepared.
READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
READ_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
                "foreign_key_list", "database_list", "function_list", "pragma_list", "collation_list",
                "module_list", "compile_options"}


def _read_only(action: int, arg1, arg2, database, trigger) -> int:
    if action in READ_ACTIONS or (action == sqlite3.SQLITE_PRAGMA and arg1 in READ_PRAGMAS):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
        return sqlite3.SQLITE_OK  # asked when json_each and other table-valued functions start (no write)
    return sqlite3.SQLITE_DENY


def read_only(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Let the connection only read: SQL that would write or create a file fails with "not authorized"."""
    conn.set_authorizer(_read_only)
    return conn


def run_sql(conn: sqlite3.Connection, sql: str, params: dict[str, str] | None = None) -> sqlite3.Cursor:
    """Run a canned query's SQL (or any SQL) with named parameters."""
    return conn.execute(sql, _Params(params or {}))


INTEGER_PARAMS = {"run", "rank", "limit", "compile"}  # ids and counts; empty means "all"


def param_choices(help_text: str) -> list[str] | None:
    """The values a parameter documents as a list ("kind (default), emitter, ... or run"), if it does."""
    items = [re.sub(r"\s*\(.*?\)", "", item).strip() for item in re.split(r",\s*|\s+or\s+", help_text)]
    return items if len(items) > 1 and all(re.fullmatch(r"\w+", item) for item in items) else None


def check_params(query: CannedQuery, given: dict[str, str]) -> None:
    """Raise ValueError naming the query's parameters for an unknown one or a bad value."""
    helps = dict(query.params)
    listed = ", ".join(f":{name}" for name in helps) or "none"
    for name, value in given.items():
        if name not in helps:
            raise ValueError(f"{query.name} has no parameter :{name} (its parameters: {listed})")
        if value == "":
            continue
        if name in INTEGER_PARAMS:
            try:
                int(value)
            except ValueError:
                raise ValueError(f"-p {name} {value!r}: {helps[name]}: a whole number") from None
        elif (choices := param_choices(helps[name])) and value not in choices:
            raise ValueError(f"-p {name} {value!r}: one of {', '.join(choices)}")


def render_docs() -> str:
    lines = ["# Canned queries", "",
             "The SQL files in `queries/`, generated from their headers by `python -m tlindex.queries`.",
             "Run one with `tlindex query NAME [-p name value ...]`, list them with `tlindex queries`;",
             "Datasette serves the same files as canned queries. An empty parameter means every run,",
             "every rank, or the default.", ""]
    for query in load_queries().values():
        lines += [f"## {query.name}", "", f"**{query.title}.** {query.description}", ""]
        if query.params:
            lines += ["| parameter | meaning |", "|---|---|"]
            lines += [f"| `:{name}` | {help} |" for name, help in query.params]
            lines.append("")
        lines += [f"```\ntlindex query {query.name}" +
                  "".join(f" -p {name} ..." for name, _ in query.params[:1]) + "\n```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render_docs())
