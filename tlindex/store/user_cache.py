"""The user's cache folder for what tlindex makes once and keeps between commands (compiled templates, the schema's
image): XDG_CACHE_HOME (else ~/.cache) / tlindex / KIND. A cache is never needed: without one, the work is done again."""

from __future__ import annotations

import os
from pathlib import Path


def cache_folder(kind: str) -> Path | None:
    """The folder of one kind of cached file, made if need be; None when it cannot be made."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tlindex" / kind
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return root

