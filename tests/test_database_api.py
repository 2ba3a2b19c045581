"""`tlindex.Database` is the library (issue 61): the README's example runs as written on real logs, every command of
the command line is one method of it, and it opens a database once."""

from __future__ import annotations

import ast
import re
import shutil
from contextlib import chdir
from pathlib import Path

import pytest
from conftest import DATA

from tlindex import Database
from tlindex.errors import DatabaseError

ROOT = Path(__file__).resolve().parents[1]
SERIES = sorted((DATA / "series").glob("*.log"))


def readme_example() -> str:
    text = (ROOT / "README.md").read_text()
    section = text.split("## The Python API: `tlindex.Database`", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs_as_written(tmp_path, capsys):
    for day, log in (("day1", SERIES[0]), ("day2", SERIES[1])):
        (tmp_path / "logs" / day).mkdir(parents=True)
        shutil.copy(log, tmp_path / "logs" / day)
    with chdir(tmp_path):
        exec(compile(readme_example(), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert re.search(r"^1 file ingested: [\d,]+ envelopes", printed, re.M)
    assert (tmp_path / "report" / "index.html").exists() and (tmp_path / "parquet" / "runs").is_dir()
    with Database(tmp_path / "traces.db") as db:
        assert [run["label"] for run in db.runs()] == ["nightly-1206"]


def test_a_reading_database_never_writes_and_says_what_to_open_instead(traces_db, tmp_path):
    with Database(traces_db) as db:
        assert db.read_only
        with pytest.raises(DatabaseError, match="write=True"):
            db.rename_run("1", "renamed")
    with pytest.raises(DatabaseError, match="no such database"):
        Database(tmp_path / "none.db")


CLI = ROOT / "tlindex" / "cli.py"


def test_every_command_opens_at_most_one_database():
    """Read from the command line's source: no command body opens a Database twice (the report of logs opens a
    temporary one or the named one, never both)."""
    tree = ast.parse(CLI.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and ast.unparse(d.func).endswith("command") for d in node.decorator_list):
            opens = [call for call in ast.walk(node) if isinstance(call, ast.Call)
                     and ast.unparse(call.func) in ("database", "Database", "Database.temporary")]
            assert len(opens) <= 2 if node.name == "report" else len(opens) <= 1, node.name
