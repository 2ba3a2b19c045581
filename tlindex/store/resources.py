"""Locate the schema/ and queries/ folders, installed or in a checkout."""

from __future__ import annotations

from pathlib import Path


def resource_dir(name: str) -> Path:
    """Return the folder `name` (schema or queries) shipped with tlindex.

    A wheel carries it inside the package (tlindex/<name>); an editable install
    of a checkout does not, so fall back to the folder at the repository root.
    """
    # The package's own folder, found from this file: importlib.resources finds the same one, at the cost of
    # importing zipfile and its readers in every command.
    packaged = Path(__file__).resolve().parents[1] / name
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parents[2] / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"tlindex cannot find its {name}/ folder (looked in {packaged} and {checkout})")


def schema_files() -> list[Path]:
    """The schema migrations (schema/NNN_name.sql) in the order they apply."""
    return sorted(resource_dir("schema").glob("[0-9][0-9][0-9]_*.sql"))


def current_schema() -> Path:
    """schema/current.sql: the whole schema as of a migration, one script for a new database."""
    return resource_dir("schema") / "current.sql"
