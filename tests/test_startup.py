"""A command imports what it needs when it runs: `tlindex --help` loads no library module, `tlindex ingest` no page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tlindex.cli import cli

ROOT = Path(__file__).resolve().parents[1]
LOG = next((ROOT / "tests" / "data" / "draft_export").glob("*.log"))  # a small real log

# What no command needs before it runs, and `ingest` never: the server, Parquet, sqlite-utils, templates,
# highlighting, table printing, entry-point scans.
HEAVY = ("datasette", "pyarrow", "sqlite_utils", "jinja2", "pygments", "tabulate", "importlib.metadata", "depyf",
         "duckdb", "pyspark", "uvicorn")

PROBE = """
import sys
from tlindex.cli import cli
commands = [[]]
for arg in sys.argv[1:]:  # commands one after the other (";" between them), in this one interpreter
    commands.append([]) if arg == ";" else commands[-1].append(arg)
for args in commands:
    try:
        cli(args, prog_name="tlindex")
    except SystemExit:
        pass
sys.stderr.write("\\nMODULES " + " ".join(sorted(sys.modules)))
"""


def loaded_by(*args: str, cwd: Path) -> tuple[set[str], str]:
    """The modules commands leave loaded (run in a fresh interpreter; ";" between commands), and what they printed."""
    done = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    said, _, modules = done.stderr.rpartition("\nMODULES ")
    return set(modules.split()), done.stdout + said


def heavy(modules: set[str]) -> list[str]:
    return sorted(name for name in modules if name.split(".")[0] in HEAVY or name in HEAVY)


def test_help_lists_every_command_with_its_help_and_loads_only_the_command_line(tmp_path):
    modules, printed = loaded_by("--help", cwd=tmp_path)
    assert sorted(name for name in modules if name.startswith("tlindex")) == [
        "tlindex", "tlindex.cli", "tlindex.errors", "tlindex.output", "tlindex.version"]
    assert heavy(modules) == [] and "sqlite3" not in modules and "json" not in modules
    listed = " ".join(printed.split())
    for name, command in cli.commands.items():
        short = command.get_short_help_str(limit=45).removesuffix("...")
        assert f"{name} {short}" in listed, name


def test_every_command_s_help_loads_nothing_heavy(tmp_path):
    """`tlindex COMMAND --help` is read from the command's declaration: its library is not imported (only what every
    command runs under: tlindex.stopping and tlindex.owned, which clean up after it)."""
    names = sorted(cli.commands) + [f"export {name}" for name in cli.commands["export"].commands]
    modules, printed = loaded_by(*" ; ".join(f"{name} --help" for name in names).split(), cwd=tmp_path)
    assert heavy(modules) == []
    assert sorted(module for module in modules if module.startswith("tlindex.") and module not in (
        "tlindex.cli", "tlindex.errors", "tlindex.output", "tlindex.version", "tlindex.owned", "tlindex.stopping")) == []
    for name in names:
        assert f"Usage: tlindex {name} " in printed, name


def test_ingest_loads_the_ingest_and_nothing_heavy(tmp_path):
    """The ingest derives each run's findings and answers as it makes the run (tlindex.answers), and renders nothing."""
    modules, printed = loaded_by("ingest", str(LOG), "--db", str(tmp_path / "t.db"), cwd=tmp_path)
    assert "1 file ingested" in printed
    assert heavy(modules) == []
    assert "tlindex.answers.derived" in modules
    assert [name for name in modules if name.startswith(("tlindex.pages", "tlindex.report", "tlindex.render",
                                                           "tlindex.formats"))] == []


def test_a_query_printed_as_json_loads_no_table_printer_and_no_page(tmp_path):
    db = str(tmp_path / "t.db")
    modules, printed = loaded_by("ingest", str(LOG), "--db", db, "--silent", ";",
                                 "query", "SELECT compile_id FROM compiles", "--db", db, cwd=tmp_path)
    assert '"compile_id"' in printed
    assert heavy(modules) == []
    assert [name for name in modules if name.startswith(("tlindex.pages", "tlindex.report", "tlindex.formats"))] == []


def test_a_report_loads_the_renderer_without_datasette_or_the_plugin(tmp_path):
    """The report renders the pages with the server's renderer and templates (tlindex.render), not with Datasette
    (whose import was 0.05 s of every report) nor the plugin; it forks no worker for a log of a few pages, and
    imports no pool of them. (It imported one ahead whenever the log's ingest outlasted the renderer's set-up: the
    likeliest cause of this test's one failure in a full run.)"""
    modules, printed = loaded_by("report", str(LOG), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert "Report of 1 run" in printed and (tmp_path / "out" / "index.html").exists()
    assert "tlindex.render.report" in modules and "jinja2" in modules
    assert [name for name in modules if name.split(".")[0] in ("datasette", "datasette_tlindex", "yaml", "uvicorn")] == []
    assert "multiprocessing" not in modules


def test_the_report_s_tilde_encoding_is_datasette_s():
    """The report and the command line write names in URLs as Datasette does (tlindex.pages.tilde_encode, the one copy of
    datasette.utils.tilde_encode)."""
    from datasette.utils import tilde_encode

    from tlindex.pages import tilde_encode as report_tilde_encode

    names = ["traces", "a.b", "with space", "~/x%y+z", "ünï ☃", "".join(map(chr, range(1, 256))), "\U0001f600-_"]
    assert [report_tilde_encode(name) for name in names] == [tilde_encode(name) for name in names]
