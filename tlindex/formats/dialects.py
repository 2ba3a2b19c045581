"""Translate the DuckDB versions of the canned queries (queries/duckdb/) to Spark SQL (queries/spark/).

    python -m tlindex.formats.dialects      # rewrites queries/spark/*.sql

The DuckDB files are written by hand from queries/*.sql; the Spark files are
this translation of them, checked by a test so the two never drift.
"""

from __future__ import annotations

import re
import sys

from tlindex.store.resources import resource_dir


def _balanced(text: str, start: int) -> int:
    """Index just past the parenthesis that closes the one opened at text[start - 1]."""
    depth = 1
    i = start
    while depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return i


def _split_top_level(args: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in args:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        current += char
    return [*parts, current]


def _string_agg(args: str) -> str:
    """string_agg([DISTINCT] x, sep [ORDER BY y]) in Spark SQL (NULL when nothing to join, as in DuckDB)."""
    value, rest = _split_top_level(args)[0], ",".join(_split_top_level(args)[1:])
    separator, _, order = rest.partition(" ORDER BY ")
    separator = separator.strip()
    if value.strip().startswith("DISTINCT "):
        items = f"array_sort(collect_set({value.strip()[len('DISTINCT '):]}))"
    elif order:
        items = f"transform(array_sort(collect_list(struct({order.strip()} AS k, {value.strip()} AS v))), s -> s.v)"
    else:
        items = f"collect_list({value.strip()})"
    return f"nullif(array_join({items}, {separator}), '')"


def duckdb_to_spark(sql: str) -> str:
    sql = sql.replace("(DuckDB and Parquet: see docs/scale.md)", "(Spark SQL over Parquet: see docs/scale.md)")
    sql = sql.replace("in DuckDB's dialect", "in Spark SQL")
    sql = re.sub(r"\$(\w+)", r":\1", sql)
    sql = sql.replace("AS VARCHAR)", "AS STRING)").replace("arg_max(", "max_by(")
    sql = sql.replace("json_extract_string(", "get_json_object(")
    sql = sql.replace("round(100.0 * ", "round(100.0D * ")
    sql = re.sub(r"unnest\(CAST\(json\((\w+)\) AS VARCHAR\[\]\)\)", r"explode(from_json(\1, 'array<string>'))", sql)
    while (match := re.search(r"string_agg\(", sql)):
        end = _balanced(sql, match.end())
        sql = sql[:match.start()] + _string_agg(sql[match.end():end - 1]) + sql[end:]
    return sql


def main() -> None:
    root = resource_dir("queries")
    for source in sorted((root / "duckdb").glob("*.sql")):
        (root / "spark" / source.name).write_text(duckdb_to_spark(source.read_text()))
        print(f"queries/spark/{source.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
