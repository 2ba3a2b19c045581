"""Generate docs/schema.md from the comments in schema/*.sql.

    python -m tlindex.formats.schema_doc > docs/schema.md
"""

from __future__ import annotations

import re
import sys

from tlindex.ingest.reader import ERROR_KINDS
from tlindex.store.resources import schema_files

TABLE_RE = re.compile(r"((?:--[^\n]*\n)*)CREATE TABLE (\w+) \((.*?)\n\);", re.S)
COLUMN_RE = re.compile(r"^\s+(\w+) ([A-Z]+)([^-]*?)(?:,)?\s*--\s*(.*)$")
ADD_COLUMN_RE = re.compile(r"^ALTER TABLE (\w+) ADD COLUMN (\w+ [A-Z]+[^-]*?;\s*--.*)$", re.M)
ALTER_RE = re.compile(r"^ALTER TABLE (\w+) (RENAME TO|DROP COLUMN) (\w+);", re.M)
VIEW_COLUMN_RE = re.compile(r"(\w+)\s*,?\s*--\s*(.*)$")
VIEW_RE = re.compile(r"((?:--[^\n]*\n)*)CREATE VIEW (\w+) AS\n(.*?);", re.S)
DROP_RE = re.compile(r"^DROP (?:TABLE|VIEW) (?:IF EXISTS )?(\w+);", re.M)
# A later migration's new meaning of a column (SQLite keeps no comment of its own): `-- column TABLE.COLUMN: text`
COLUMN_DOC_RE = re.compile(r"^-- column (\w+)\.(\w+): (.*)$", re.M)


def tables() -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """(table, description, [(column, type, description)]) for every table of the schema."""
    found: dict[str, tuple[str, str, list[tuple[str, str, str]]]] = {}
    for path in schema_files():
        text = path.read_text()
        for name in DROP_RE.findall(text):  # a later migration's drops (before what it makes again)
            found.pop(name, None)
        for comment, name, body in TABLE_RE.findall(text):
            description = " ".join(line.lstrip("- ").strip() for line in comment.strip().splitlines())
            columns = [column for line in body.splitlines() if (column := _column(line))]
            found[name] = (name, description, columns)
        for name, change, target in ALTER_RE.findall(text):  # a later migration's renames and drops
            if name not in found:
                continue
            if change == "RENAME TO":
                found = {(target if key == name else key): ((target, *value[1:]) if key == name else value)
                         for key, value in found.items()}
            else:
                found[name][2][:] = [column for column in found[name][2] if column[0] != target]
        for name, definition in ADD_COLUMN_RE.findall(text):  # a later migration's new columns
            column = _column(" " + definition.replace(";", ",", 1))
            if column and name in found:
                found[name][2].append(column)
        for name, column, said in COLUMN_DOC_RE.findall(text):
            if name in found:
                found[name][2][:] = [(c, t, said if c == column else d) for c, t, d in found[name][2]]
        for comment, name, select in VIEW_RE.findall(text):
            description = " ".join(line.lstrip("- ").strip() for line in comment.strip().splitlines()
                                   if not line.startswith("-- tlindex schema"))
            columns = [(match[1], "", match[2].strip()) for line in select.splitlines()
                       if (match := VIEW_COLUMN_RE.search(line))]
            found[name] = (name, f"A view: {description}", columns)
    return list(found.values())


def _column(line: str) -> tuple[str, str, str] | None:
    """(column, type, description) of one commented column definition."""
    match = COLUMN_RE.match(line)
    if match is None:
        return None
    column, type_, extra, text = match.groups()
    reference = re.search(r"REFERENCES (\w+)\((\w+)\)", extra)
    if reference:
        text += f" → `{reference.group(1)}.{reference.group(2)}`"
    return column, type_, text.strip()


def escape_pipes(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    lines = ["# tlindex database schema", "",
             "Generated from the comments in `schema/*.sql` by `python -m tlindex.formats.schema_doc`;",
             "a test fails when this file and the schema drift apart. The schema is tlindex's public",
             "API: query it with `sqlite3`, `sqlite-utils`, Datasette or anything that reads SQLite.",
             "", "Times are the local wall-clock times the logging machine wrote, as ISO 8601 without a",
             "zone; glog has no year, so it is inferred from the file's modification time.", ""]
    for name, description, columns in tables():
        lines += [f"## {name}", "", description, "", "| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{column}` | {type_} | {escape_pipes(text)} |" for column, type_, text in columns]
        lines.append("")
    lines += ["## Ingest error kinds", "", "The `kind` of an `ingest_errors` row. Rows with `bytes` > 0 cover lines",
              "that are not in `envelopes`, so envelope bytes plus error bytes add up to each file's size.", "",
              "| kind | meaning |", "|---|---|"]
    lines += [f"| `{kind}` | {escape_pipes(text)} |" for kind, text in ERROR_KINDS.items()]
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(render())
