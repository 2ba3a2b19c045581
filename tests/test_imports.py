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
    assert "tlindex.ingest.normalize.core" in graph and "datasette_plugins.datasette_tlindex.pages" in graph

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
    lazy = [path for path in (ROOT / "tlindex").rglob("*.py") if any(name in "".join(
            line for line in path.read_text().splitlines(True) if "import" in line)
        for name in ("datasette_plugins", "datasette_tlindex"))]
    assert lazy == []  # no import inside a function either


LAYERS = {  # lowest first: a module imports only from its own layer or below
    "tlindex": 0, "tlindex.errors": 0, "tlindex.store": 0, "tlindex.owned": 0, "tlindex.stopping": 0,
    "tlindex.worker_pool": 0,
    "tlindex.ingest": 1,
    "tlindex.answers": 2,
    "tlindex.formats": 3,
    "tlindex.pages": 4,
    "tlindex.report": 5,
    "tlindex.cli": 6, "tlindex.output": 6, "tlindex.run": 6, "tlindex.serve": 6, "tlindex.__main__": 6,
    "datasette_plugins": 7,
}


def layer_of(module: str) -> int:
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        if ".".join(parts[:length]) in LAYERS:
            return LAYERS[".".join(parts[:length])]
    raise AssertionError(f"{module} belongs to no layer: add its folder to LAYERS and to docs/architecture.md")


def test_folders_are_layers_and_imports_only_go_down():
    """store < ingest < answers < formats < pages (each page's data) < report < the command line < the plugin."""
    graph = import_graph()
    upward = sorted((name, target) for name, targets in graph.items() for target in targets
                    if layer_of(target) > layer_of(name))
    assert upward == []
    top_level = sorted(path.name for path in (ROOT / "tlindex").glob("*.py"))
    assert top_level == ["__init__.py", "__main__.py", "cli.py", "errors.py", "output.py", "owned.py", "run.py",
                         "serve.py", "stopping.py", "worker_pool.py"]
