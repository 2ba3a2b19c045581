"""The command line parses, opens one Database handle per command and says what the library returns: it holds no SQL
and raises only the library's errors (issue 49). Read from its source (AST), so that a new command is held too."""

from __future__ import annotations

import ast
import re
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from tlindex import Database
from tlindex.cli import cli

CLI = Path(__file__).resolve().parents[1] / "tlindex" / "cli.py"
SQL = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|PRAGMA|ATTACH)\b\s", re.IGNORECASE)


def _tree() -> ast.Module:
    return ast.parse(CLI.read_text())


def test_the_command_line_holds_no_sql():
    texts = [node.value for node in ast.walk(_tree()) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    fstrings = [ast.unparse(node) for node in ast.walk(_tree()) if isinstance(node, ast.JoinedStr)]
    assert [text for text in texts + fstrings if SQL.search(text) and "FROM " in text.upper() + " "] == []
    assert not any(isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "executescript")
                   for node in ast.walk(_tree()))


def test_the_command_line_raises_only_the_librarys_errors():
    """Every `raise` of a new error names a TlindexError (or click's usage error); the one ClickException made is
    where Commands turns an error into the command's one line (`_one_line`)."""
    tree = _tree()
    raised = {ast.unparse(node.exc.func) for node in ast.walk(tree)
              if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)}
    made = [node for node in ast.walk(tree)
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "click.ClickException"]
    assert raised - {"click.UsageError", "click.ClickException"} <= {
        "TlindexError", "UsageError", "NotFound", "DatabaseError", "QueryError", "click.BadParameter", "_one_line"}
    one_line = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "_one_line")
    assert {id(node) for node in made} <= {id(node) for node in ast.walk(one_line)}


def test_a_database_handle_closes_its_connection_on_the_way_out_even_on_an_error(traces_db):
    with pytest.raises(ZeroDivisionError):
        with Database(traces_db) as db:
            held = db.conn
            assert db.execute("SELECT count(*) FROM runs").fetchone()[0] > 0
            1 / 0
    with pytest.raises(sqlite3.ProgrammingError):  # closed
        held.execute("SELECT 1")


def test_a_database_handle_reads_only_unless_asked_to_write(traces_db, tmp_path):
    with Database(traces_db) as db:
        assert db.read_only
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            db.execute("UPDATE runs SET label = label")
    with pytest.raises(Exception, match="no such database"):
        Database(tmp_path / "none.db")


def test_an_error_of_a_statement_is_one_line_from_the_library(traces_db):
    result = CliRunner().invoke(cli, ["query", "SELECT nonsense FROM runs", "--db", str(traces_db)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1].startswith("Error: SQL error:")
