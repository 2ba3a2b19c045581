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
    """Layers: tlindex (reading, storing, answering, rendering) below datasette_plugins (hooks, routes)."""
    graph = import_graph()
    upward = sorted((name, target) for name, targets in graph.items() if name.startswith("tlindex")
                    for target in targets if target.startswith("datasette_plugins"))
    assert upward == []


PLUGIN_NAMES = ("datasette_plugins", "datasette_tlindex")


def reaches_for_the_plugin(path: Path) -> list[str]:
    """Where a module names the plugin, or looks up entry points (how the library once found the plugin's renderer),
    in code: an import, a name, an attribute, a string (docstrings may say what the plugin does)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [getattr(node, "module", None) or ""] + [alias.name for alias in node.names]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            names = [node.value]
        else:
            continue
        if any(plugin in name for name in names for plugin in PLUGIN_NAMES) or "entry_points" in names:
            found.append(f"{path.name}:{node.lineno}")
    return found


def test_the_library_never_names_the_plugin_nor_looks_up_entry_points():
    """Not at import, not inside a function, not through importlib: the library knows nothing of the plugin (the
    report renders with tlindex.render, below both)."""
    assert [place for path in sorted((ROOT / "tlindex").rglob("*.py")) for place in reaches_for_the_plugin(path)] == []


def test_the_check_finds_a_library_reaching_for_the_plugin(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""Rendered by datasette_tlindex."""\nimport importlib\n\n\ndef f():\n'
                      '    from importlib.metadata import entry_points\n'
                      '    return importlib.import_module("datasette_tlindex.report_render"), entry_points\n')
    assert reaches_for_the_plugin(module) == ["m.py:6", "m.py:7", "m.py:7"]


FACE = ("tlindex", "tlindex.database")  # the package's face: `from tlindex import Database`, imported when asked for
LAYERS = {  # lowest first: a module imports only from its own layer or below
    "tlindex": 0, "tlindex.errors": 0, "tlindex.store": 0, "tlindex.owned": 0, "tlindex.stopping": 0,
    "tlindex.worker_pool": 0,
    "tlindex.ingest": 1,
    "tlindex.answers": 2,
    "tlindex.formats": 3,
    "tlindex.pages": 4,
    "tlindex.render": 5,
    "tlindex.report": 6,
    "tlindex.version": 0,
    "tlindex.database": 7, "tlindex.served_sql": 7, "tlindex.tokens": 0, "tlindex.uploads": 7, "tlindex.push": 7,
    "tlindex.cli": 7, "tlindex.output": 7, "tlindex.run": 7, "tlindex.serve": 7, "tlindex.__main__": 7,
    "tlindex.watch": 7,
    "datasette_plugins": 8,
}


def layer_of(module: str) -> int:
    parts = module.split(".")
    for length in range(len(parts), 0, -1):
        if ".".join(parts[:length]) in LAYERS:
            return LAYERS[".".join(parts[:length])]
    raise AssertionError(f"{module} belongs to no layer: add its folder to LAYERS and to docs/architecture.md")


def test_folders_are_layers_and_imports_only_go_down():
    """store < ingest < answers < formats < pages (each page's data) < render (its HTML) < report < the command line
    < the plugin."""
    graph = import_graph()
    upward = sorted((name, target) for name, targets in graph.items() for target in targets
                    if layer_of(target) > layer_of(name) and (name, target) != FACE)
    assert upward == []
    top_level = sorted(path.name for path in (ROOT / "tlindex").glob("*.py"))
    assert top_level == ["__init__.py", "__main__.py", "cli.py", "database.py", "errors.py", "output.py", "owned.py",
                         "push.py", "run.py", "serve.py", "served_sql.py", "stopping.py", "tokens.py", "uploads.py",
                         "version.py", "watch.py", "worker_pool.py"]
