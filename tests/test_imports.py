"""The modules of tlindex and its plugin import one another without circles (type-only imports count)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def import_graph() -> dict[str, set[str]]:
    modules = {}
    for top in ("tlindex", "datasette_plugins"):
        for path in (ROOT / top).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                for candidate in (f"{target}.{alias.name}", target):
                    if candidate in modules and candidate != name:
                        graph[name].add(candidate)
                        break
    return graph


def test_no_module_imports_itself_through_others():
    graph = import_graph()
    assert "tlindex.normalize.core" in graph and "datasette_plugins.tlindex.pages.compile" in graph

    def reaches(start: str) -> bool:
        seen, todo = set(), list(graph[start])
        while todo:
            node = todo.pop()
            if node == start:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph[node])
        return False

    assert [name for name in graph if reaches(name)] == []


def test_the_library_never_imports_the_plugin():
    """Layers: tlindex (reading, storing, answering) below datasette_plugins (hooks, pages, templates)."""
    graph = import_graph()
    upward = sorted((name, target) for name, targets in graph.items() if name.startswith("tlindex")
                    for target in targets if target.startswith("datasette_plugins"))
    assert upward == []
    lazy = [path for path in (ROOT / "tlindex").rglob("*.py") if "datasette_plugins" in
            "".join(line for line in path.read_text().splitlines(True) if "import" in line)]
    assert lazy == []  # no import inside a function either
