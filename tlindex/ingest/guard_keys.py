"""Guard lines compared across processes: the same guard, whatever object addresses it names."""

from __future__ import annotations

import re
import zlib

# Object and type ids in guards are addresses of one process: two runs never share them.
PROCESS_ADDRESS = re.compile(r"(?<=, )\d{6,}(?=\))|(?<=___unnamed_scope_)\d+")  # in guards naming ___


def masked(text: str) -> str:
    """The guard's text with the addresses of one process replaced by <id>."""
    return PROCESS_ADDRESS.sub("<id>", text) if "___" in text else text


def guard_key(guard_type: str | None, text: str) -> int:
    """crc32 of type and text (guards.key: the same guard within one process)."""
    return zlib.crc32(f"{guard_type}\0{text}".encode("utf-8", "surrogatepass"))


def guard_identity(guard_type: str | None, text: str) -> int:
    """crc32 of type and masked text (guards.identity: the same guard in any process)."""
    return guard_key(guard_type, masked(text))
