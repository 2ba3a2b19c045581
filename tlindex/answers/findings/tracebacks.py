"""torch's texts read for what a user acts on: the user's frame in a traceback, and torch's reason quoted.

A frame is the user's when its file is not Python's nor an installed package's (torch, its libraries): a failure
quotes the innermost such frame of torch's own texts, the `dynamo_error` traceback ("from user code:" first), the
graph break's "User code traceback:", then the compile's `dynamo_start` stack.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')
LIBRARY = ("/site-packages/", "/dist-packages/", "<frozen ", "<string>", "<eval_with_key>")
STDLIB = re.compile(r"/lib/python3\.\d+/")
RAISED = re.compile(r"raised exception (?P<type>[A-Za-z_][\w.]*)\((?P<quote>['\"])(?P<message>.*)(?P=quote)\)")
SKIPPED = ("Hint:", "Developer debug context:", "For more details", "Set TORCHDYNAMO_VERBOSE", "Traceback (most recent",
           "from user code:", "User code traceback:", "Graph break in user code", "Explanation:")
GENERIC = ("Failed to handle graph break gracefully", "Observed exception")


@dataclass(frozen=True)
class UserFrame:
    file: str
    line: int
    name: str = ""
    source: str = ""  # the source line, when torch printed it

    def where(self) -> str:
        """`dir/file.py:12`, with its source line when known: `dir/file.py:12 `y = x * n``."""
        from tlindex.answers.findings.words import short, short_location

        at = short_location(f"{self.file}:{self.line}")
        return f"{at} `{short(self.source, 100)}`" if self.source else at


def is_user_file(path: str | None) -> bool:
    """Whether a file is the user's: not inside Python itself or an installed package."""
    return bool(path) and not any(mark in path for mark in LIBRARY) and not STDLIB.search(path)


def frames(text: str) -> list[UserFrame]:
    """The frames a traceback text prints, outermost first, each with its source line when printed."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        match = FRAME.match(line)
        if not match:
            continue
        source = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if FRAME.match(source) or set(source) <= set("^~ "):
            source = ""
        found.append(UserFrame(match["file"], int(match["line"]), match["name"].strip(), source))
    return found


def section(text: str, title: str) -> str:
    """The lines of a traceback text after `title` (as torch's "from user code:"), up to the next blank line."""
    at = text.find(title)
    if at < 0:
        return ""
    body = text[at + len(title):].lstrip("\n")
    end = body.find("\n\n")
    return body if end < 0 else body[:end]


def user_frame(*texts: str | None) -> UserFrame | None:
    """The innermost user frame of the first text that has one, reading each text's user-code section first."""
    for text in texts:
        if not text:
            continue
        for part in (section(text, "from user code:"), section(text, "User code traceback:"), text):
            users = [frame for frame in frames(part) if is_user_file(frame.file)]
            if users:
                return users[-1]
    return None


def raised(text: str | None) -> str | None:
    """The exception torch says the user's code raised ("Observed exception"): `NotImplementedError: message`."""
    match = RAISED.search(text or "")
    if not match:
        return None
    return f"{match['type'].rsplit('.', 1)[-1]}: {match['message']}"


def reason(text: str | None) -> str:
    """torch's reason in its own words, on one line: the exception the user's code raised when torch names one, else
    the reason's title and explanation, without its hints, debug context, links and tracebacks."""
    exception = raised(text)
    if exception:
        return exception
    kept = []
    for line in (text or "").splitlines():
        stripped = line.strip()
        if stripped.startswith("Explanation:") and kept:
            kept[-1] = kept[-1].rstrip(":.") + ":"
            stripped = stripped[len("Explanation:"):].strip()
        elif not stripped or stripped.startswith(SKIPPED) or FRAME.match(line):
            if kept and stripped.startswith(("Hint:", "Developer", "For more", "Set TORCH", "Traceback", "from user")):
                break
            continue
        kept.append(stripped)
    return " ".join(kept)


SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`'\"(])")


def quote(text: str, limit: int = 240) -> str:
    """Whole sentences of `text`, as many as fit in `limit` characters (the first always, cut at a word and marked
    "…" when it alone is longer), in quotation marks that are always closed."""
    from tlindex.answers.findings.words import short

    sentences = SENTENCE_END.split(" ".join(text.split()))
    said = sentences[0] if sentences else ""
    for sentence in sentences[1:]:
        if len(said) + 1 + len(sentence) > limit:
            break
        said += " " + sentence
    return f"“{short(said, limit)}”"


def is_generic(title: str | None) -> bool:
    """Whether a graph-break or failure title is torch's generic header rather than what happened."""
    return bool(title) and title.strip().startswith(GENERIC)
