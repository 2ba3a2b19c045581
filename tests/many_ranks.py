"""A run of hundreds of ranks made from a real multi-rank run: every rank file of a fixture copied under new rank
numbers (rank r of an n-rank fixture becomes ranks r, n + r, 2n + r, …), its `"rank"` keys, glog pids and file
name renumbered and nothing else changed. The copies are derived from real logs (tests/data), not written by hand:
rank 1 of `ddp_4ranks_diverge` recompiles alone, so in a 256-rank copy ranks 1, 5, 9, … 253 (64 of 256, every 4th
from 1) do.

Two changes a test may ask for, and must say it asked: a rank's copy `cut` right after the dynamo_start of one of its
compiles (the prefix of the real log, what the file held while that compile ran: a rank still compiling, or one
whose process died there), and a rank's copy made `slower` (HAND-MADE: seconds added to the
entire_frame_compile_time_s of its compilation metrics; the real logs have no rank slower than the others).

    python tests/many_ranks.py FIXTURE RANKS OUT_DIR
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
_RANK_KEY = re.compile(rb'"rank": -?\d+')
_GLOG = re.compile(rb"^([VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d{6}) +(\d+) ")
_FILE_RANK = re.compile(r"_rank_(\d+)_")
_FRAME = re.compile(rb'"frame_id": (\d+), "frame_compile_id": (\d+)')
_COMPILE_TIME = re.compile(rb'("entire_frame_compile_time_s": )([0-9.eE+-]+)')


def rank_files(fixture: Path) -> dict[int, Path]:
    """The fixture's rank files by the rank their names give."""
    found = {int(m.group(1)): path for path in sorted(fixture.glob("*.log"))
             if (m := _FILE_RANK.search(path.name))}
    if not found:
        raise ValueError(f"{fixture}: no rank files")
    return dict(sorted(found.items()))


def renumbered(line: bytes, rank: int, pid: int) -> bytes:
    """An envelope line under another rank and pid (a payload line, starting with a tab, as it is)."""
    if line.startswith(b"\t"):
        return line
    line = _GLOG.sub(lambda m: m.group(1) + b" " + str(pid).encode() + b" ", line, count=1)
    return _RANK_KEY.sub(b'"rank": ' + str(rank).encode(), line)


def cut_at(lines: list[bytes], cut: str) -> int:
    """Where a log's lines stop while compile `cut` ("4/0") runs: after its dynamo_start record and payload."""
    started = False
    for number, line in enumerate(lines):
        if started and not line.startswith(b"\t"):
            return number
        if b'"dynamo_start"' in line[:200] and (m := _FRAME.search(line)) and \
                f"{int(m.group(1))}/{int(m.group(2))}" == cut:
            started = True
    raise ValueError(f"no dynamo_start of {cut} to cut after")


def write_rank(source: Path, out: Path, rank: int, cut: str | None = None, slower: float = 0.0) -> Path:
    """`source` copied as rank `rank`'s file in `out` (its pid 100000 + rank, so every copy is its own process); with
    `cut` ("4/0"), only up to that compile's dynamo_start record; with `slower`, that many seconds added to each
    compile's entire_frame_compile_time_s."""
    target = out / _FILE_RANK.sub(f"_rank_{rank}_", source.name, count=1)
    lines = source.read_bytes().splitlines(keepends=True)
    lines = lines[:cut_at(lines, cut)] if cut else lines
    with open(target, "wb") as write:
        for line in lines:
            if slower and b'"compilation_metrics"' in line[:120]:
                line = _COMPILE_TIME.sub(lambda m: m.group(1) + repr(float(m.group(2)) + slower).encode(), line)
            write.write(renumbered(line, rank, 100_000 + rank))
    return target


def build(fixture: str | Path, ranks: int, out: Path, cut: dict[int, str] | None = None,
          slower: dict[int, float] | None = None) -> Path:
    """`out` filled with `ranks` rank files copied from the fixture (a name under tests/data, or a folder); `cut` and
    `slower` by rank, as write_rank takes them."""
    folder = DATA / fixture if isinstance(fixture, str) else fixture
    files = rank_files(folder)
    out.mkdir(parents=True, exist_ok=True)
    originals = list(files.values())
    for rank in range(ranks):
        write_rank(originals[rank % len(originals)], out, rank, (cut or {}).get(rank), (slower or {}).get(rank, 0.0))
    return out


if __name__ == "__main__":
    build(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]))
