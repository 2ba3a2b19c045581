"""The canned queries of queries/*.sql: load, describe, run.

Each file starts with a comment header: the first line is the title, the next
lines describe what it answers, and lines of the form `-- :name  help` declare
its named parameters. An empty or missing parameter means "all" (or the
documented default). The same files are what `tlindex query NAME` runs and
what the Datasette plugin serves as canned queries.

    python -m tlindex.answers.queries > docs/queries.md
"""

from __future__ import annotations

import functools
import re
import sqlite3
import sys
from dataclasses import dataclass, field

from tlindex.errors import UsageError
from tlindex.store.resources import resource_dir

PARAM_RE = re.compile(r"^--\s*:(\w+)\s+(.*)$")
NEEDS_RE = re.compile(r"\bNeeds ((?::\w+)(?: or :\w+)*)")


@dataclass
class CannedQuery:
    name: str
    title: str
    description: str
    sql: str
    params: list[tuple[str, str]] = field(default_factory=list)  # (name, help)

    @property
    def needs(self) -> list[str]:
        """The parameters one of which must be given ("Needs :compile or :run" in its description): a query that
        cannot be bounded without one, in a database of many runs."""
        found = NEEDS_RE.search(self.description)
        return re.findall(r":(\w+)", found.group(1)) if found else []

    @property
    def body(self) -> str:
        """The SQL without its header comment (which says the same as title and description)."""
        lines = self.sql.splitlines()
        while lines and lines[0].startswith("--"):
            lines.pop(0)
        return "\n".join(lines).strip() + "\n"

    @property
    def summary(self) -> str:
        """The description's first sentence (a stop outside parentheses): what the query answers, in one line."""
        text, depth = self.description, 0
        for at, char in enumerate(text):
            depth += (char == "(") - (char == ")")
            if depth == 0 and char in ".:;" and text[at + 1:at + 2].isspace():
                text = text[:at]
                break
        if len(text) > 140:  # a long one without its parentheses
            text = re.sub(r"\s*\((?:[^()]|\([^()]*\))*\)", "", text)
        return text.rstrip(".:;") + "."


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


# What a canned query needs of a run to have anything to say (a query not listed here always may).
QUERY_NEEDS = {
    "rank_divergence": "SELECT count(DISTINCT process) > 1 FROM sources WHERE run_id = ?",
    "collectives": "SELECT EXISTS (SELECT 1 FROM collective_ops o JOIN compiles c ON c.id = o.compile "
                   "WHERE c.run_id = ?)",
    "export_issues": "SELECT EXISTS (SELECT 1 FROM export_issue_records e JOIN sources s ON s.id = e.source_id "
                     "WHERE s.run_id = ?)",
    "vllm_pieces": "SELECT EXISTS (SELECT 1 FROM piece_compiles p JOIN compiles c ON c.id = p.compile "
                   "WHERE c.run_id = ?)",
}


def run_queries(conn: sqlite3.Connection, run: int) -> list[CannedQuery]:
    """Every canned query that takes a run (a new one is listed without editing its callers), but those that cannot
    apply to this run (rank divergence of one process, vLLM's pieces of a run without them)."""
    return [query for query in load_queries().values() if any(p == "run" for p, _ in query.params)
            and _applies(conn, query.name, run)]


def _applies(conn: sqlite3.Connection, name: str, run: int) -> bool:
    sql = QUERY_NEEDS.get(name)
    return sql is None or bool(conn.execute(sql, (run,)).fetchone()[0])


class _Params(dict):
    """Named parameters; one not given binds NULL (which the queries read as "all")."""

    def __missing__(self, key: str) -> None:
        return None


# What a read-only query may do (SQLite authorizer action codes); anything else (writes,
# ATTACH and VACUUM INTO, which create files, DDL, transactions) is refused as it is prepared.
READ_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}
READ_PRAGMAS = {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
                "foreign_key_list", "database_list", "function_list", "pragma_list", "collation_list",
                "module_list", "compile_options"}
# The functions a query may call: SQLite's own scalar, aggregate, window, date, math and JSON
# functions, FTS5's auxiliary ones and the payloads view's sqlar_uncompress (bounded). Not:
# fts3_tokenizer (reads and registers native pointers), load_extension, fts5 (a pointer),
# sqlite_log, and zeroblob/randomblob (memory by the argument).
ALLOWED_FUNCTIONS = frozenset("""
    -> ->> abs acos acosh asin asinh atan atan2 atanh avg bm25 ceil ceiling changes char coalesce cos cosh
    count cume_dist current_date current_time current_timestamp date datetime degrees dense_rank exp
    first_value floor format glob group_concat hex highlight ifnull iif instr json json_array
    json_array_length json_extract json_group_array json_group_object json_insert json_object json_patch
    json_quote json_remove json_replace json_set json_type json_valid julianday lag last_insert_rowid
    last_value lead length like likelihood likely ln log log10 log2 lower ltrim match max min mod
    nth_value ntile nullif percent_rank pi pow power printf quote radians random rank replace round
    row_number rtrim sign sin sinh snippet soundex sqlite_compileoption_get sqlite_compileoption_used
    sqlite_source_id sqlite_version sqrt strftime string_agg substr substring subtype sum tan tanh time
    total total_changes trim trunc typeof unicode unixepoch unlikely upper json_each json_tree
    sqlar_uncompress""".split())
DENIED_FUNCTIONS = frozenset({"fts3_tokenizer", "load_extension", "fts5", "sqlite_log", "zeroblob", "randomblob"})


def _read_only(action: int, arg1, arg2, database, trigger) -> int:
    if action == sqlite3.SQLITE_FUNCTION:
        return sqlite3.SQLITE_OK if str(arg2).lower() in ALLOWED_FUNCTIONS else sqlite3.SQLITE_DENY
    if action in READ_ACTIONS or (action == sqlite3.SQLITE_PRAGMA and arg1 in READ_PRAGMAS):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
        return sqlite3.SQLITE_OK  # asked when json_each and other table-valued functions start (no write)
    return sqlite3.SQLITE_DENY


def read_only(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Let the connection only read and call ALLOWED_FUNCTIONS: SQL that would write or create a file,
    or call another function, fails with "not authorized"."""
    conn.set_authorizer(_read_only)
    return conn


def _functions_guarded(action: int, arg1, arg2, database, trigger) -> int:
    if action == sqlite3.SQLITE_FUNCTION and str(arg2).lower() in DENIED_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def guard_functions(conn: sqlite3.Connection) -> sqlite3.Connection:
    """For connections that also serve other code (Datasette's, whose plugins may register functions of
    their own): everything allowed but DENIED_FUNCTIONS. Canned queries run read_only, then back to this."""
    conn.set_authorizer(_functions_guarded)
    return conn


def run_sql(conn: sqlite3.Connection, sql: str, params: dict[str, str] | None = None) -> sqlite3.Cursor:
    """Run a canned query's SQL (or any SQL) with named parameters."""
    return conn.execute(sql, _Params(params or {}))


def canned_rows(conn: sqlite3.Connection, name: str, params: dict[str, str], limit: int) -> tuple[list[str], list]:
    """A canned query's columns and first `limit` rows, run read-only (the connection's authorizer unset after)."""
    cursor = run_sql(read_only(conn), load_queries()[name].sql, params)
    try:
        return [d[0] for d in cursor.description], cursor.fetchmany(limit)
    finally:
        conn.set_authorizer(None)


INTEGER_PARAMS = {"rank", "limit"}  # counts and ranks; empty means "all"


def param_choices(help_text: str) -> list[str] | None:
    """The values a parameter documents as a list ("kind (default), emitter, ... or run"), if it does."""
    items = [re.sub(r"\s*\(.*?\)", "", item).strip() for item in re.split(r",\s*|\s+or\s+", help_text)]
    return items if len(items) > 1 and all(re.fullmatch(r"\w+", item) for item in items) else None


def check_params(query: CannedQuery, given: dict[str, str]) -> None:
    """Raise UsageError naming the query's parameters for an unknown one or a bad value."""
    helps = dict(query.params)
    listed = ", ".join(f":{name}" for name in helps) or "none"
    if query.needs and not any(given.get(name) for name in query.needs):
        raise UsageError(f"{query.name} ({query.title}) needs {' or '.join(f'-p {name} ...' for name in query.needs)}")
    for name, value in given.items():
        if name not in helps:
            raise UsageError(f"{query.name} has no parameter :{name} (its parameters: {listed})")
        if value == "":
            continue
        if name in INTEGER_PARAMS:
            try:
                int(value)
            except ValueError:
                raise UsageError(f"-p {name} {value!r}: {helps[name]}: a whole number") from None
        elif (choices := param_choices(helps[name])) and value not in choices:
            raise UsageError(f"-p {name} {value!r}: one of {', '.join(choices)}")


def named_params(conn: sqlite3.Connection, given: dict[str, str]) -> dict[str, str]:
    """The parameters with a run or a compile given by name (a label, `0/1`, ...) as the ids the SQL compares;
    UnknownRun or UnknownCompile (listing the matches) for a name that names nothing, or several."""
    from tlindex.answers.names import resolve_compile, run_id

    resolved = dict(given)
    if resolved.get("run"):
        resolved["run"] = str(run_id(conn, resolved["run"]))
    if resolved.get("compile"):
        run = int(resolved["run"]) if resolved.get("run") else None
        resolved["compile"] = str(resolve_compile(conn, resolved["compile"], run))
    return resolved


def prepared(conn: sqlite3.Connection, name_or_sql: str, params: dict[str, str]) -> tuple[str, dict[str, str]]:
    """(SQL, parameters) of a canned query by name, its parameters checked and names resolved, or of any SQL."""
    canned = load_queries()
    if name_or_sql in canned:
        check_params(canned[name_or_sql], params)
        return canned[name_or_sql].sql, named_params(conn, params)
    if " " not in name_or_sql.strip():
        raise UsageError(f"no canned query named {name_or_sql!r}; see `tlindex queries`")
    return name_or_sql, params


def sql_error_message(error: sqlite3.Error) -> str:
    """What SQLite said, with what it means for a query of tlindex's (read-only, bounded functions)."""
    from tlindex.store.limits import too_big_message

    message = str(error)
    if message == "not authorized":
        return message + (" (tlindex query only reads, and calls SQLite's own functions: no writes, ATTACH, "
                          "VACUUM INTO, load_extension or fts3_tokenizer)")
    if message == "interrupted":
        return message
    if too_big_message(error):
        return too_big_message(error)
    if message == "user-defined function raised exception":
        return message + " (sqlar_uncompress inflates at most the largest payload stored: its size argument was larger)"
    return message


def render_docs() -> str:
    lines = ["# Canned queries", "",
             "The SQL files in `queries/`, generated from their headers by `python -m tlindex.answers.queries`.",
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
