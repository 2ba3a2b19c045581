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
