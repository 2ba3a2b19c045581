"""How findings say things: counts with their noun, texts cut short, locations, and ranks as people write them."""

from __future__ import annotations


def plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def short(text: str | None, limit: int = 140) -> str:
    """The text on one line, cut at a word to at most `limit` characters and the cut marked "…"; a bracket, backtick
    or quote left open by the cut is closed after the mark, so the sentence stays balanced."""
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    cut = cut.rstrip(" ,;:.") + "…"
    for opening, close in (("(", ")"), ("[", "]"), ("{", "}")):  # brackets the cut left open, then the quotes
        cut += close * max(0, cut.count(opening) - cut.count(close))
    closing = {"`": "`", "“": "”", "‘": "’"}
    for opening, close in closing.items():
        if opening == close and cut.count(opening) % 2:
            cut += close
        elif opening != close and cut.count(opening) > cut.count(close):
            cut += close
    return cut


def reason_line(reason: str | None) -> str:
    """A graph-break reason's first informative line (torch 2.13's start with a generic header)."""
    lines = [line.strip() for line in (reason or "").splitlines() if line.strip()]
    useful = [line for line in lines if not line.startswith("Encountered graph break when attempting")]
    return (useful or lines or [""])[0]


def short_location(location: str) -> str:
    """/a/b/c/train.py:12 -> c/train.py:12"""
    path, _, line = location.rpartition(":")
    return "/".join(path.replace("\\", "/").split("/")[-2:]) + ":" + line


MAX_PARTS = 6  # ranges a list of ranks names; past it, how many more (the whole list is the finding's items)


def ranges(ranks: list[int], limit: int = MAX_PARTS) -> str:
    """Sorted ranks as ranges, "0–2, 5, 7, 8"; past `limit` ranges, the first ones and how many ranks more."""
    parts, start = [], None
    for i, rank in enumerate(ranks):
        if start is None:
            start = rank
        if i + 1 == len(ranks) or ranks[i + 1] != rank + 1:
            parts.append((start, rank))
            start = None
    said = [str(a) if a == b else f"{a}–{b}" if b > a + 1 else f"{a}, {b}" for a, b in parts[:limit]]
    left = sum(b - a + 1 for a, b in parts[limit:])
    return ", ".join(said) + (f" and {left:,} more" if left else "")


EXCEPTIONS = 2  # ranks a repeating pattern may leave out or add ("every 4th from 1 except 37")


def _periodic(ranks: list[int], world: list[int]) -> str | None:
    """Ranks that repeat with a period in a world of consecutive ranks, as people say them: "every 4th from 1",
    "all but every 4th from 1", "the odd ones", "1, 2 of every 4", with a rank or two as exceptions ("every 4th
    from 1 except 37"); None when they do not."""
    if not world or world != list(range(world[0], world[0] + len(world))):
        return None
    chosen, low = set(ranks), world[0]
    for period in range(2, min(64, len(world) // 2) + 1):
        members = [[r for r in world if (r - low) % period == residue] for residue in range(period)]
        residues = [i for i, found in enumerate(members) if sum(r in chosen for r in found) * 2 > len(found)]
        if not residues or len(residues) == period:
            continue
        pattern = {r for i in residues for r in members[i]}
        out, extra = sorted(pattern - chosen), sorted(chosen - pattern)
        if len(out) + len(extra) > min(EXCEPTIONS, len(chosen) // 8):
            continue
        return _pattern(period, [low + i for i in residues], low) + \
            (f" except {ranges(out)}" if out else "") + (f", and {ranges(extra)}" if extra else "")
    return None


def _pattern(period: int, starts: list[int], low: int) -> str:
    if period == 2 and low == 0:
        return "the odd ones" if starts == [1] else "the even ones"
    if len(starts) == 1:
        return f"every {ordinal(period)} from {starts[0]}"
    if len(starts) == period - 1:
        (missing,) = set(range(low, low + period)) - set(starts)
        return f"all but every {ordinal(period)} from {missing}"
    return f"{ranges(starts)} of every {period}"


def rank_list(ranks: list[int | str], among: list[int | str] | None = None) -> str:
    """Ranks (or processes, "1 (restart 1)") as people say them, never enumerated past a few ranges: "rank 3",
    "ranks 0–127, 200"; of the run's ranks `among`: "all 256 ranks", "all ranks but 3, 7", "64 of 256 ranks (every
    4th from 1)", "46 of 256 ranks (0–5, 9, 11, 13, 17, 19 and 40 more)" (the whole list goes in a finding's items)."""
    named = sorted({r for r in ranks if not isinstance(r, int)}, key=str)
    ints = sorted({r for r in ranks if isinstance(r, int)})
    count = len(ints) + len(named)
    if count == 1:
        return f"rank {(ints or named)[0]}"
    plain = "ranks " + ", ".join(filter(None, [ranges(ints) if ints else "", *named[:MAX_PARTS]]))
    world = sorted({r for r in among or () if isinstance(r, int)})
    if named or not world or any(isinstance(r, str) for r in among or ()) or not set(ints) <= set(world):
        return plain
    if len(ints) == len(world):
        return "both ranks" if len(world) == 2 else f"all {len(world):,} ranks"
    rest = sorted(set(world) - set(ints))
    said = [plain, f"all ranks but {ranges(rest)}"]
    pattern = _periodic(ints, world)
    if pattern:
        said.append(f"{len(ints):,} of {len(world):,} ranks ({pattern})")
    whole = [text for text in said if " more" not in text]  # a list cut short only when nothing else says it all
    return min(whole, key=len) if whole else f"{len(ints):,} of {len(world):,} ranks ({ranges(ints)})"


def _order(rank: int | str) -> tuple:
    """Ranks in numeric order, named processes after them."""
    return (0, rank, "") if isinstance(rank, int) else (1, 0, str(rank))


MAX_GROUPS = 6  # groups of ranks a sentence names; past it, the largest stay unnamed, the smallest never


def group_ranks(values: dict, say=str, among: list | None = None) -> str:
    """Ranks grouped by value, the largest group first and every smaller one named, so the outlier is never the
    one left out: "ranks 0–2: 5 compiles; rank 3: 6 compiles" (`among`: the run's ranks, for "all but …")."""
    groups: dict[object, list] = {}
    for rank, value in values.items():
        groups.setdefault(value, []).append(rank)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), min(map(_order, item[1]))))
    shown = ordered if len(ordered) <= MAX_GROUPS else [ordered[0], *ordered[-(MAX_GROUPS - 1):]]
    text = "; ".join(f"{rank_list(ranks, among)}: {say(value)}" for value, ranks in shown)
    hidden = len(ordered) - len(shown)
    return text + (f"; {plural(hidden, 'other group')} of ranks" if hidden else "")
