"""tlindex finds schema/ and queries/ from a built wheel and from an editable checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tlindex.store.resources import resource_dir

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import sqlite3, tlindex
from tlindex.store.resources import resource_dir
from tlindex.store.db import apply_schema
print(tlindex.__file__)
print(resource_dir("schema"))
print(resource_dir("queries"))
print(apply_schema(sqlite3.connect(":memory:")))
"""


def test_editable_checkout_finds_the_repository_folders():
    assert resource_dir("schema") == ROOT / "schema"
    assert resource_dir("queries") == ROOT / "queries"


@pytest.mark.slow
def test_built_wheel_carries_schema_and_queries(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
                   check=True)
    (wheel,) = wheels.glob("tlindex-*.whl")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                    str(wheel)], check=True)
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    package = Path(out[0]).parent
    assert package.parent == target
    assert Path(out[1]) == package / "schema" and Path(out[2]) == package / "queries"
    assert out[3] == str(sorted(p.stem for p in (ROOT / "schema").glob("[0-9]*.sql")))
