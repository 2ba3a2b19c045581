"""Rows are tuples on the hot path (a named row costs ~2 µs each, seconds per GB): this test reads
every place that builds one and checks it against the columns it is inserted into.

A row is `sink.add("TABLE", (...))`, `_insert(conn, "TABLE", [(...)])` or the tuple a `row()`
method returns (Compile -> compiles, Process -> sources). Each must have as many values as
tlindex.store.tables.COLUMNS[TABLE] names, and every value whose expression names a column of the table
(`envelope_id`, `meta.get("symbol")`, `compile.id` -> compile, `n.next_id(...)` -> id) must stand
at that column's place. A column added in the wrong place of a tuple fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tlindex.store.tables import COLUMNS

ROOT = Path(__file__).resolve().parents[1] / "tlindex"
ROW_METHODS = {"Compile": "compiles", "Process": "sources"}
CONSTANT_TUPLES = {"CONTEXT_FIELDS": ("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "rank")}


def hint(node: ast.AST) -> str | None:
    """The column an expression names, if any."""
    if isinstance(node, ast.IfExp):
        return hint(node.body)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        if node.attr == "id" and isinstance(node.value, ast.Name):
            return node.value.id  # compile.id -> compile
        return node.attr
    if isinstance(node, ast.Call):
        func = node.func
        name = getattr(func, "attr", getattr(func, "id", None))
        if name == "next_id":
            return "id"
        if name == "get" and node.args and isinstance(node.args[0], ast.Constant):
            key = node.args[0].value
            return None if key == "id" else key  # a logged "id" is never the row's own id
        if name in ("_json", "_int", "str", "int") and node.args:
            return hint(node.args[0])
    return None


def expand(elements: list[ast.expr]) -> list[ast.expr | str | None]:
    """Tuple elements, *(data.get(f) for f in CONTEXT_FIELDS) expanded to the fields it names."""
    out: list = []
    for element in elements:
        if isinstance(element, ast.Starred):
            source = element.value
            generator = source.generators[0].iter if isinstance(source, ast.GeneratorExp) else None
            if isinstance(generator, ast.Name) and generator.id in CONSTANT_TUPLES:
                out.extend(CONSTANT_TUPLES[generator.id])
                continue
            return []  # cannot tell its length
        out.append(element)
    return out


def rows() -> list[tuple[str, int, str, list]]:
    """(file, line, table, elements) of every row built in tlindex/."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in ROW_METHODS:
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name == "row":
                        for ret in ast.walk(item):
                            if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple):
                                found.append((path.name, ret.lineno, ROW_METHODS[node.name], ret.value.elts))
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            args = node.args
            if name == "add" and len(args) == 2 and isinstance(args[0], ast.Constant) and isinstance(args[1], ast.Tuple):
                found.append((path.name, node.lineno, args[0].value, args[1].elts))
            if name == "_insert" and len(args) == 3 and isinstance(args[1], ast.Constant):
                rows_arg = args[2]
                element = rows_arg.elt if isinstance(rows_arg, ast.ListComp) else (
                    rows_arg.elts[0] if isinstance(rows_arg, ast.List) and rows_arg.elts else None)
                if isinstance(element, ast.Tuple):
                    found.append((path.name, node.lineno, args[1].value, element.elts))
    return found


ROWS = rows()


def test_rows_are_found_in_every_table_the_normalizer_writes():
    assert {table for _, _, table, _ in ROWS} >= set(COLUMNS) - {"payload_data", "files"} - {"volume"}


@pytest.mark.parametrize("where,table,elements", [(f"{f}:{line}", t, e) for f, line, t, e in ROWS],
                         ids=[f"{f}:{line}:{t}" for f, line, t, _ in ROWS])
def test_each_row_has_its_columns_in_the_schema_order(where, table, elements):
    columns = COLUMNS[table]
    values = expand(elements)
    if not values:
        pytest.skip("a row of computed length")
    assert len(values) == len(columns), f"{where}: {len(values)} values for {len(columns)} columns of {table}"
    for position, value in enumerate(values):
        name = value if isinstance(value, str) else hint(value)
        if name in columns and name != columns[position]:
            pytest.fail(f"{where}: {name!r} stands where {table}.{columns[position]} goes "
                        f"(its column is number {columns.index(name)})")
