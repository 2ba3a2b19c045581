"""Every ingest option is documented in the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from tlindex.cli import cli

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


@pytest.mark.parametrize("option", [opt for param in cli.commands["ingest"].params
                                    for opt in param.opts if opt.startswith("--")])
def test_ingest_option_is_in_readme(option):
    assert f"`{option}" in README or f" {option}" in README


def test_every_command_is_in_readme():
    for name in cli.commands:
        assert f"tlindex {name}" in README


def test_the_architecture_names_every_module():
    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "architecture.md").read_text()
    missing = []
    for top in ("tlindex", "datasette_plugins/datasette_tlindex"):
        for path in sorted((root / top).rglob("*.py")):
            module = str(path.relative_to(root))
            # inside a package's own paragraph, a module may be named from the package: `core.py`, `pages/run.py`
            within = next((f"`{module[len(p):]}`" for p in ("tlindex/ingest/normalize/", "datasette_plugins/datasette_tlindex/")
                           if module.startswith(p)), None)
            if f"`{module}`" not in doc and (within is None or within not in doc):
                missing.append(module)
    assert missing == [], f"docs/architecture.md does not name {missing}"
