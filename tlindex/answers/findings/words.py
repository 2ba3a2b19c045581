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


def rank_list(ranks: list[int | str]) -> str:
    """Ranks (or processes, "1 (restart 1)") as people write them: "rank 3", "ranks 0–2, 5, 1 (restart 1)"."""
    named = sorted({r for r in ranks if not isinstance(r, int)}, key=str)
    ranks = sorted({r for r in ranks if isinstance(r, int)})
    parts, start = [], None
    for i, rank in enumerate(ranks):
        if start is None:
            start = rank
        if i + 1 == len(ranks) or ranks[i + 1] != rank + 1:
            parts.append(str(start) if start == rank else f"{start}–{rank}" if rank > start + 1 else f"{start}, {rank}")
            start = None
    return ("rank " if len(ranks) + len(named) == 1 else "ranks ") + ", ".join(parts + [str(n) for n in named])


MAX_GROUPS = 6  # groups of ranks a sentence names; past it, the largest stay unnamed, the smallest never


def group_ranks(values: dict[int, object], say=str) -> str:
    """Ranks grouped by value, the largest group first and every smaller one named in full, so the outlier is
    never the one left out: "ranks 0–2: 5 compiles; rank 3: 6 compiles"."""
    groups: dict[object, list[int]] = {}
    for rank, value in values.items():
        groups.setdefault(value, []).append(rank)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), min(item[1])))
    shown = ordered if len(ordered) <= MAX_GROUPS else [ordered[0], *ordered[-(MAX_GROUPS - 1):]]
    text = "; ".join(f"{rank_list(ranks)}: {say(value)}" for value, ranks in shown)
    hidden = len(ordered) - len(shown)
    return text + (f"; {plural(hidden, 'other group')} of ranks" if hidden else "")
