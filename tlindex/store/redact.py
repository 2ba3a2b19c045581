"""Secrets out of what a user typed, before it is stored: one list of secret words, one function.

`tlindex run` keeps the command line it ran (and makes the run's default label of it); labels are typed too.
Whatever stores such text passes it through here first (`redact_words` for a command's words, `redact_text`
for a line or a label), and migration 016 passes what older databases stored through the same functions.
What is hidden, each replaced by `***` (the option, the name and the program stay, so the line is still
recognisable):

- the value of an option one of whose name's words (split at `-`, `_`, `.` and case) is a secret word:
  `--token=***`, `--api-key ***`;
- a URL's password: `https://bob:***@example.org/x`;
- the value of a `NAME=VALUE` whose name says so: `HF_TOKEN=***`.

A word is a whole word: `--max-tokens 4096`, `--keep-alive` and `MAX_TOKENS=4096` are left as they are. The
words of a command are made storable first (bytes the file system gave that are not UTF-8 shown as `\\xff`,
each word and the whole line bounded), and redaction never raises on any text.
"""

from __future__ import annotations

import json
import re
import sqlite3

from tlindex.stopping import callback

SECRET_WORDS = frozenset({"token", "key", "apikey", "secret", "password", "passwd", "pwd", "auth", "credential",
                          "credentials", "cookie", "session"})
MASK = "***"
WORD_CHARS = 4_000  # a word past this is cut (a `-c` script of megabytes)
LINE_CHARS = 16_000  # words past this many characters in all are counted, not kept

_NAME_WORDS_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_VALUE = r"""(?:"[^"]*"|'[^']*'|\S+)"""
_URL_PASSWORD_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*):([^\s/]+)@")  # to its last @: p@ss
_ASSIGNMENT_RE = re.compile(rf"(?<![\w.-])([A-Za-z_][\w.-]*)=({_VALUE})")
_OPTION_RE = re.compile(rf"(?<![\w.-])(-{{1,2}}([A-Za-z][\w.-]*))(?:(=)({_VALUE})|(\s+)(?!-)({_VALUE}))")
_BARE_OPTION_RE = re.compile(r"-{1,2}([A-Za-z][\w.-]*)")


def secret_name(name: str) -> bool:
    """Whether a name (an option's, a variable's) says its value is a secret: one of its words, split at `-`,
    `_`, `.` and case (`HF_TOKEN`, `apiKey`, `x-api-key`), is a secret word; `max_tokens` is not."""
    return any(word.lower() in SECRET_WORDS for word in _NAME_WORDS_RE.findall(name))


def _options(text: str) -> str:
    """Each secret option's value replaced; another option's value is not skipped over (`-c "… --token T"`: the
    search goes on right after the option's name)."""
    parts, at, search_from = [], 0, 0
    while (match := _OPTION_RE.search(text, search_from)) is not None:
        if not secret_name(match.group(2)):
            search_from = match.end(1)
            continue
        separator = "=" if match.group(3) else match.group(5)
        parts += [text[at:match.start()], f"{match.group(1)}{separator}{MASK}"]
        at = search_from = match.end()
    return "".join(parts) + text[at:]


def _assignment(match: re.Match) -> str:
    return f"{match.group(1)}={MASK}" if secret_name(match.group(1)) else match.group(0)


def redact_text(text: str) -> str:
    """A line (a label, a command line, one word of a command) with its secrets replaced by `***`."""
    if not isinstance(text, str) or not text:
        return text
    text = _URL_PASSWORD_RE.sub(rf"\1:{MASK}@", text)
    text = _ASSIGNMENT_RE.sub(_assignment, text)
    return _options(text)


def storable(word: str) -> str:
    """A word as it can be stored and shown: bytes that are not UTF-8 (kept by Python as surrogates) as `\\xff`,
    cut past WORD_CHARS characters (control characters stay: every output escapes them, as for other names)."""
    word = str(word).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return word if len(word) <= WORD_CHARS else word[:WORD_CHARS] + f"…({len(word) - WORD_CHARS:,} more characters)"


def redact_words(words: list[str]) -> list[str]:
    """A command's words as `tlindex run` stores them: each made storable, the line bounded (the words past
    LINE_CHARS counted in one last word), each word's secrets replaced, and the word after an option whose name
    is a secret (`--api-key VALUE`) replaced whole."""
    kept, size, hide_next = [], 0, False
    for i, raw in enumerate(words):
        word = storable(raw)
        if size + len(word) > LINE_CHARS and kept:
            kept.append(f"…({len(words) - i:,} more words)")
            break
        size += len(word)
        bare = _BARE_OPTION_RE.fullmatch(word)
        if hide_next and not word.startswith("-"):
            kept.append(MASK)
        else:
            kept.append(redact_text(word))
        hide_next = bool(bare) and secret_name(bare.group(1))
    return kept


def redact_command(stored: str | None) -> str | None:
    """A stored command (the JSON list of its words `runs.command` holds, or any text) with its secrets replaced."""
    if stored is None:
        return None
    try:
        words = json.loads(stored)
    except (TypeError, ValueError):
        return redact_text(str(stored))
    if not isinstance(words, list):
        return redact_text(str(stored))
    return json.dumps(redact_words([str(word) for word in words]))


def register(conn: sqlite3.Connection) -> sqlite3.Connection:
    """The SQL functions migration 016 redacts stored commands and labels with: tlindex_redact_command(command),
    tlindex_redact(text)."""
    conn.create_function("tlindex_redact_command", 1, callback(redact_command), deterministic=True)
    conn.create_function("tlindex_redact", 1, callback(redact_text), deterministic=True)
    return conn


def migration_notice(changes: list[int]) -> str | None:
    """What migration 016 says once, when it redacted something: from the changes of its statements, whose last two
    redact the commands, then the labels."""
    commands, labels = ([0, 0] + changes)[-2:]
    if not commands and not labels:
        return None
    return (f"secrets redacted from {commands} stored command line{'s' * (commands != 1)} and {labels} "
            f"label{'s' * (labels != 1)} (tlindex now redacts them before storing; see README, `tlindex run`)")
