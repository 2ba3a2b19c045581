"""The per-process string table: {"str": [value, id]} records, and stack frames that refer to it.

The table is a process's state across records; its three places are here: the
handler, the restore for a grown log, and the fitting of a chunk of a split file
(frames and guards whose file was defined in a chunk before it).
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING

from tlindex.ingest.normalize.protocols import Normalizer

if TYPE_CHECKING:
    from tlindex.ingest.normalize.state import Process
    from tlindex.ingest.reader import Record

STRING_REF_RE = re.compile(r"^<string (\d+)>")


def on_str(n: Normalizer, proc: Process, rec: Record, envelope_id: int, compile, meta, text) -> None:
    if isinstance(meta, list) and len(meta) == 2 and isinstance(meta[1], int):
        value, string_id = meta
        proc.strings[string_id] = str(value)
        n.sink.add("strings", (proc.source_id, string_id, str(value)))


def restore_strings(conn: sqlite3.Connection, proc: "Process", source_id: int) -> None:
    """The string table a grown log's process had defined when it was last read."""
    proc.strings = dict(conn.execute("SELECT string_id, value FROM strings WHERE source_id = ?",
                                     (source_id,)).fetchall())


def fill_string_references_of_chunk(conn: sqlite3.Connection, proc: Process) -> None:
    """File names the chunk could not resolve: strings defined earlier in the process."""
    envelopes = "SELECT id FROM staging.envelopes WHERE source_id = :source"
    conn.execute(f"UPDATE staging.frames SET filename = (SELECT value FROM main.strings s WHERE "
                 f"s.source_id = -:source AND s.string_id = frames.filename_id) WHERE filename IS NULL "
                 f"AND filename_id IS NOT NULL AND envelope_id IN ({envelopes})", {"source": proc.source_id})
    for guard_id, user_code in conn.execute(
            f"SELECT id, user_code FROM staging.guards WHERE substr(user_code, 1, 8) = '<string ' "
            f"AND envelope_id IN ({envelopes})", {"source": proc.source_id}).fetchall():
        match = STRING_REF_RE.match(user_code)
        value = proc.strings.get(int(match.group(1))) if match else None
        if value is not None:
            conn.execute("UPDATE staging.guards SET user_code = ? WHERE id = ?",
                         (value + user_code[match.end():], guard_id))
