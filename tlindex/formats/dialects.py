"""The canned queries in other engines' dialects, generated from one source.

    python -m tlindex.formats.dialects      # rewrites queries/duckdb/*.sql and queries/spark/*.sql

queries/*.sql (SQLite) is the source. Its DuckDB version (queries/duckdb/) is `sqlite_to_duckdb` of it,
except for the queries in DUCKDB_BY_HAND, which SQLite writes in ways no rewrite rule should guess
(json_each, correlated subqueries over views the Parquet export does not carry, GROUP BY of
aggregates); those are kept by hand and checked like the rest: tests/test_export.py runs every DuckDB
query over the Parquet export and compares its answer with SQLite's. The Spark version
(queries/spark/) is `duckdb_to_spark` of the DuckDB one. A test fails when a file is not what this
module writes.
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


# Queries whose DuckDB version is written by hand, and why.
# (run_health, compile_time_totals, vllm_pieces, rank_divergence and top_graph_breaks compute every run from the raw
# tables there; SQLite reads the runs' rows stored once, tlindex.answers.run_answers: the Parquet export carries them,
# unread.)
DUCKDB_BY_HAND = {
    "compile_time": "reads the view compile_times, which the Parquet export does not carry",
    "compile_time_totals": "reads the view compile_times and the runs' stored rows through the view run_answers_fresh, "
                           "which Parquet does not carry",
    "collectives": "SQLite orders group_concat by a sorted subquery; DuckDB says ORDER BY inside string_agg",
    "dynamic_shapes": "an integer column used as a boolean",
    "export_issues": "reads the view export_issue_records, which the Parquet export does not carry",
    "failures": "json_each becomes unnest",
    "log_volume": "a GROUP BY chosen by a parameter, written as one CASE per grouping",
    "rank_divergence": "json_each, window functions over correlated subqueries",
    "recompile_reasons": "the first row's columns beside min() (min_by), string_agg in order, chr(10)",
    "run_health": "reads the views run_health and run_totals, which the Parquet export does not carry",
    "top_graph_breaks": "char(10) is chr(10); a correlated subquery in a CASE becomes a join (for Spark)",
    "vllm_pieces": "reads the view piece_compile_spans, which the Parquet export does not carry",
}


def _header(name: str, sql: str) -> tuple[str, str]:
    """(DuckDB header, body) of a SQLite canned query: the title, a line naming the source, its parameters."""
    lines = sql.splitlines(keepends=True)
    header = [line for line in lines if line.startswith("--")]
    body = "".join(lines[len(header):]) if all(line.startswith("--") for line in lines[:len(header)]) else sql
    params = [line.replace("(empty: ", "(NULL: ") for line in header if re.match(r"-- :\w+", line)]
    title = header[0][3:].strip() if header else name
    return (f"-- {title} (DuckDB and Parquet: see docs/scale.md)\n"
            f"-- The same answer as queries/{name}.sql, in DuckDB's dialect (python -m tlindex.formats.dialects).\n"
            + "".join(params)), body


def _top_level(text: str) -> str:
    """The text with what stands inside parentheses blanked out."""
    out, depth = [], 0
    for char in text:
        depth -= char == ")"
        out.append(char if depth == 0 else " ")
        depth += char == "("
    return "".join(out)


def sqlite_to_duckdb(name: str, sql: str) -> str:
    """A SQLite canned query in DuckDB's dialect: parameters as $name (NULL for "all"), group_concat as
    string_agg, json_extract as json_extract_string, IS between expressions as IS NOT DISTINCT FROM."""
    header, body = _header(name, sql)
    body = re.sub(r"coalesce\(:(\w+), ''\) = ''", r"$\1 IS NULL", body)
    body = re.sub(r"coalesce\(nullif\(:(\w+), ''\), ", r"coalesce($\1, ", body)
    body = re.sub(r"CAST\(:(\w+) AS INTEGER\)", r"$\1", body)
    body = re.sub(r"(?<![:\w]):(\w+)", r"$\1", body)
    body = body.replace("json_extract(", "json_extract_string(")
    body = re.sub(r" IS (?!NULL\b|NOT\b)", " IS NOT DISTINCT FROM ", body)
    start = 0
    while (match := re.search(r"\bsum\(", body[start:])):  # sum of a comparison: count_if (Spark sums no boolean)
        begin, open_end = start + match.start(), start + match.end()
        end = _balanced(body, open_end)
        inner = body[open_end:end - 1]
        comparison = re.search(r" (=|!=|<>|<|>|<=|>=|LIKE|IN) ", _top_level(inner))
        if comparison and len(_split_top_level(inner)) == 1 and not inner.lstrip().startswith("CASE"):
            body = body[:begin] + f"count_if({inner})" + body[end:]
        start = begin + 1
    while (match := re.search(r"group_concat\(", body)):
        end = _balanced(body, match.end())
        args = _split_top_level(body[match.end():end - 1])
        value = args[0].strip()
        distinct = value.startswith("DISTINCT ")
        value = value[len("DISTINCT "):] if distinct else value
        separator = args[1].strip() if len(args) > 1 else "','"
        body = (body[:match.start()] + f"string_agg({'DISTINCT ' if distinct else ''}CAST({value} AS VARCHAR), "
                f"{separator})" + body[end:])
    return header + body


def duckdb_to_spark(sql: str) -> str:
    sql = sql.replace("(DuckDB and Parquet: see docs/scale.md)", "(Spark SQL over Parquet: see docs/scale.md)")
    sql = sql.replace("in DuckDB's dialect", "in Spark SQL")
    sql = re.sub(r"\$(\w+)", r":\1", sql)
    sql = sql.replace("AS VARCHAR)", "AS STRING)").replace("arg_max(", "max_by(")
    sql = sql.replace("json_extract_string(", "get_json_object(")
    sql = sql.replace("round(100.0 * ", "round(100.0D * ").replace(" // ", " div ")  # DuckDB's integer division
    sql = re.sub(r'(AS |\w\.)"(\w+)"', r"\1`\2`", sql)  # a quoted name: Spark quotes names with backticks
    sql = re.sub(r"unnest\(CAST\(json\((\w+)\) AS VARCHAR\[\]\)\)", r"explode(from_json(\1, 'array<string>'))", sql)
    while (match := re.search(r"\bepoch\(", sql)):  # DuckDB's seconds since the epoch, of a timestamp
        end = _balanced(sql, match.end())
        sql = sql[:match.start()] + f"(unix_micros({sql[match.end():end - 1]}) / 1e6)" + sql[end:]
    while (match := re.search(r"string_agg\(", sql)):
        end = _balanced(sql, match.end())
        sql = sql[:match.start()] + _string_agg(sql[match.end():end - 1]) + sql[end:]
    return _trim_from(sql)


def _trim_from(sql: str) -> str:
    """Two-argument trim(text, characters) as Spark's trim(BOTH characters FROM text): Spark's own two-argument form
    takes the characters first."""
    out, at = [], 0
    for match in re.finditer(r"\btrim\(", sql):
        if match.start() < at:
            continue
        end = _balanced(sql, match.end())
        args = _split_top_level(sql[match.end():end - 1])
        if len(args) == 2:
            out += [sql[at:match.start()], f"trim(BOTH {args[1].strip()} FROM {_trim_from(args[0])})"]
            at = end
    return "".join(out) + sql[at:]


def main() -> None:
    root = resource_dir("queries")
    for source in sorted(root.glob("*.sql")):
        if source.stem not in DUCKDB_BY_HAND:
            (root / "duckdb" / source.name).write_text(sqlite_to_duckdb(source.stem, source.read_text()))
            print(f"queries/duckdb/{source.name}", file=sys.stderr)
    for source in sorted((root / "duckdb").glob("*.sql")):
        (root / "spark" / source.name).write_text(duckdb_to_spark(source.read_text()))
        print(f"queries/spark/{source.name}", file=sys.stderr)


if __name__ == "__main__":
    main()
