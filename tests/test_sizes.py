"""No function of tlindex or its plugin runs over 60 lines, no class over 250 (issue 40).

A long function holds several decisions; past these sizes, split it by decision. The lines counted
are the definition's own, decorators and docstring included, as `ast` reports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMITS = {ast.FunctionDef: 60, ast.AsyncFunctionDef: 60, ast.ClassDef: 250}


def oversized(source: str, where: str) -> list[str]:
    """Each definition in `source` longer than its limit, as 'where:line name (n lines > limit)'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        limit = LIMITS.get(type(node))
        if limit is None:
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        lines = node.end_lineno - first + 1
        if lines > limit:
            found.append(f"{where}:{node.lineno} {node.name} ({lines} lines > {limit})")
    return found


def test_the_check_sees_a_long_function_and_a_long_class():
    long_function = "def f():\n" + "    x = 1\n" * 60
    long_class = "class C:\n" + "    x = 1\n" * 250
    assert oversized(long_function, "a.py") == ["a.py:1 f (61 lines > 60)"]
    assert oversized(long_class, "b.py") == ["b.py:1 C (251 lines > 250)"]
    assert oversized("def f():\n" + "    x = 1\n" * 59, "c.py") == []


def test_no_function_over_60_lines_and_no_class_over_250():
    sources = [p for top in ("tlindex", "datasette_plugins") for p in sorted((ROOT / top).rglob("*.py"))]
    assert len(sources) > 50
    found = [f for p in sources for f in oversized(p.read_text(), str(p.relative_to(ROOT)))]
    assert found == []
