"""tlindex: index torch.compile TORCH_TRACE logs into SQLite. `tlindex.Database` is the library (tlindex.database)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tlindex.version import __version__

__all__ = ["Database", "__version__"]

if TYPE_CHECKING:
    from tlindex.database import Database


def __getattr__(name: str):
    if name == "Database":  # imported when asked for: `tlindex --help` starts without the library
        from tlindex.database import Database

        return Database
    raise AttributeError(f"module 'tlindex' has no attribute {name!r}")
