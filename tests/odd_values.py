"""Real logs with odd values where their numbers were (HAND-MADE variants of the real fixtures).

`oddify` rewrites a log: a share of the numbers of each envelope, and of each JSON payload (whose md5
in `has_payload` is written anew, so the record still verifies), is replaced by one of ODD_VALUES, the
shapes a log written by another torch, a bug or a hostile hand can carry where a number belongs. The
choice is seeded: the same log and seed give the same variant.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

# What can stand where a number was: text, empty text, a list, an object, null, a negative, the largest
# double, an integer past 64 bits, a boolean.
ODD_VALUES: tuple = ("x", "", [1], {}, None, -1, 1e308, 2**70, True)
PREFIX_RE = re.compile(rb"^([VIWEC]\d{4} [\d:.]+ +\d+ [^\]]+\] )(\{.*\})$")
NEVER = {"has_payload"}  # the md5 of the payload: not a number
# The keys that place a record in its compile: kept in the variant that reaches every page of a compile.
CONTEXT = frozenset({"frame_id", "frame_compile_id", "attempt", "compiled_autograd_id"})


def _odd(value, rng: random.Random, share: float, keep: frozenset = frozenset()):
    """The value with a share of its numbers (at any depth) replaced by odd values; keys in `keep` kept at the top."""
    if isinstance(value, dict):
        return {k: (v if k in NEVER or k in keep else _odd(v, rng, share)) for k, v in value.items()}
    if isinstance(value, list):
        return [_odd(v, rng, share) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool) and rng.random() < share:
        return rng.choice(ODD_VALUES)
    return value


def _odd_payload(lines: list[bytes], rng: random.Random, share: float) -> tuple[list[bytes], str | None]:
    """A JSON payload's lines with odd numbers, and its new md5; the lines as they were when not JSON."""
    text = b"\n".join(line[1:] for line in lines)
    try:
        data = json.loads(text)
    except ValueError:
        return lines, None
    if not isinstance(data, (dict, list)):
        return lines, None
    new = json.dumps(_odd(data, rng, share), indent=0).encode()
    return [b"\t" + line for line in new.split(b"\n")], hashlib.md5(new).hexdigest()


def oddify(source: Path, target: Path, seed: int, share: float = 0.3, keep_context: bool = False) -> None:
    """Write `source` to `target` with a share of its envelopes' and JSON payloads' numbers made odd (with
    `keep_context`, not the ids that place a record in its compile, so every compile keeps its records)."""
    rng = random.Random(f"{seed}:{source.name}")
    out: list[bytes] = []
    lines = source.read_bytes().split(b"\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        payload = []
        j = i + 1
        while j < len(lines) and lines[j].startswith(b"\t"):
            payload.append(lines[j])
            j += 1
        match = PREFIX_RE.match(line)
        if match is None:
            out += [line, *payload]
            i = j
            continue
        envelope = json.loads(match.group(2))
        if payload and isinstance(envelope, dict) and "has_payload" in envelope:
            payload, digest = _odd_payload(payload, rng, share)
            if digest is not None:
                envelope["has_payload"] = digest
        odd = _odd(envelope, rng, share, CONTEXT if keep_context else frozenset())
        out += [match.group(1) + json.dumps(odd).encode(), *payload]
        i = j
    target.write_bytes(b"\n".join(out))


# --- long values and deep nesting (issue 46) --------------------------------------------------------------------------

MB = 1 << 20
DEEP = 200_000  # levels of `[`: valid JSON that Python's recursive parser cannot read


def long_text(size: int) -> str:
    """A line of `size` characters, words and spaces (so a cut at a word has words to cut at)."""
    return ("word " * (size // 5 + 1))[:size]


def deep_json() -> str:
    return "[" * DEEP + "]" * DEEP


def _stretch_value(value, text: str):
    """The value with its longest text (at any depth) replaced by `text`; a value without one, `text` itself."""
    best: list = [None, None, -1]  # container, key, length

    def walk(container, key, item):
        if isinstance(item, dict):
            for k, v in item.items():
                if k not in NEVER and k not in CONTEXT:
                    walk(item, k, v)
        elif isinstance(item, list):
            for i, v in enumerate(item):
                walk(item, i, v)
        elif isinstance(item, str) and len(item) > best[2]:
            best[:] = [container, key, len(item)]

    walk(None, None, value)
    if best[0] is None:
        return text
    best[0][best[1]] = text
    return value


def stretch(source: Path, target: Path, seed: int, sizes: tuple[int, ...] = (MB, 10 * MB)) -> None:
    """Write `source` to `target` with, for the first record of each kind (and artifact name), one of: the longest
    text of its envelope made a line of one of `sizes`, its JSON payload's longest text made one, its text payload
    given such a line after its first, or its JSON payload replaced by `[` x DEEP then `]` x DEEP. The choice is seeded."""
    rng = random.Random(f"stretch:{seed}:{source.name}")
    out: list[bytes] = []
    seen: set[str] = set()
    lines = source.read_bytes().split(b"\n")
    i = 0
    while i < len(lines):
        line, j = lines[i], i + 1
        while j < len(lines) and lines[j].startswith(b"\t"):
            j += 1
        payload = lines[i + 1:j]
        match = PREFIX_RE.match(line)
        envelope = json.loads(match.group(2)) if match else None
        key = _kind(envelope) if isinstance(envelope, dict) else None
        if key is None or key in seen:
            out += [line, *payload]
            i = j
            continue
        seen.add(key)
        text = long_text(rng.choice(sizes))
        if payload and "has_payload" in envelope:
            body = b"\n".join(p[1:] for p in payload).decode("utf-8", "replace")
            body = _stretch_payload(body, text, rng)
            envelope["has_payload"] = hashlib.md5(body.encode()).hexdigest()
            payload = [b"\t" + part for part in body.encode().split(b"\n")]
        else:
            envelope = _stretch_value(envelope, text) if rng.random() < 0.5 else envelope
        out += [match.group(1) + json.dumps(envelope).encode(), *payload]
        i = j
    target.write_bytes(b"\n".join(out))


def _kind(envelope: dict) -> str:
    """An envelope's kind as the handlers see it: its first key other than the context, and an artifact's name."""
    kind = next((k for k in envelope if k not in CONTEXT and k not in NEVER), "")
    if kind == "artifact" and isinstance(envelope[kind], dict):
        return f"artifact/{envelope[kind].get('name')}"
    return kind


def _stretch_payload(body: str, text: str, rng: random.Random) -> str:
    """A payload with a long text in it, or (JSON) nested DEEP levels."""
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, (dict, list)):
        if rng.random() < 0.4:
            return deep_json()
        return json.dumps(_stretch_value(data, text))
    first, _, rest = body.partition("\n")
    return f"{first}\n{text}\n{rest}" if rest else f"{first}\n{text}"
