"""Secrets out of what a user typed, before it is stored: found by structure, then by shape.

`tlindex run` keeps the command line it ran (and makes the run's default label of it); labels are typed too.
Whatever stores such text passes it through here first (`redact_words` for a command's words, `redact_text` for a
line or a label), and migration 016 passes what older databases stored through the same functions. A text is split
into its parts before each part is judged; what is hidden is replaced by `***`, and the option, key, header name
and program stay, so the line is still recognisable:

- a *secret name* says its value is one: one of its words (split at `-`, `_`, `.` and case) is a secret word
  (`token`, `key`, `secret(s)`, `password(s)`, `pass`, `pw`, `pwd`, `passphrase`, `auth`, `authorization`,
  `bearer`, `credential(s)`, `cookie(s)`, `session`, ...), or a word has one glued in (`PGPASSWORD`, `DBPASS`,
  `clientsecret`, `authtoken`). Not secret: a name whose last word says it is where or how big a secret is
  (`--password-file /path`, `HF_TOKEN_PATH`, `--token-type`, `--max-token-length`: the path is useful and is not
  the secret), a tokenizer's special tokens (`pad_token`, `eos_token_id`), `tokens`, `keys`, `passes`;
- the value of an option of a secret name, whatever it starts with (`--token=***`, `--api-key ***`,
  `--password ***` for `-xS3CRET`), unless it is another option (`--token --verbose`: a long option, or `-` and
  one letter);
- URL parts: the password of `scheme://user:***@host` (to the last `@`, so it may hold `/` and `@`), and each
  query or fragment parameter (split at `&` and `;`) of a secret name, `sig` and `signature` included;
- `NAME=VALUE` anywhere (environment assignments, `a=1&b=2`, `a=1;b=2`, `a=1,b=2`: a value ends where the next
  `NAME=` starts), `Name: value` (HTTP headers, YAML; `Authorization: Bearer ***` keeps its scheme; the value
  runs to the end of the line, or of the quotes the pair opened in), `name = value` (TOML), and JSON's
  `"name": value` (a text that is JSON is also parsed, and every secret value in it, lists too, masked);
- `-p` is a password only after the programs known to take it so (`_PROGRAMS`): glued for mysql and mariadb
  (`mysql -p***`; their `-p NAME` prompts and NAME is a database), glued or not for sshpass and mongo, `-a` for
  redis-cli, and the password of curl's `-u user:***`. Anywhere else `-p` is a port, a plugin (`pytest -p`) or a
  path, and stays;
- tokens of the shapes secret scanners know, anywhere (tlindex.store.secret_shapes: `hf_`, `ghp_`, `sk-`, AKIA,
  JWTs, ...; `scrub` masks only those, for any text).

A whole word is judged, then cut: a word past WORD_CHARS is redacted before it is bounded, so no secret is cut into
a piece no rule knows. Redaction never raises on any text, takes time linear in its length (every search starts
only where its match may start), and changes nothing it already redacted.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

from tlindex.stopping import callback
from tlindex.store.secret_shapes import MASK, scrub

__all__ = ["MASK", "WORD_CHARS", "LINE_CHARS", "secret_name", "redact_text", "redact_words", "storable", "scrub",
           "redact_command", "register", "migration_notice"]

WORD_CHARS = 4_000  # a word past this is cut (a `-c` script of megabytes)
LINE_CHARS = 16_000  # words past this many characters in all are counted, not kept

SECRET_WORDS = frozenset({"token", "key", "apikey", "privatekey", "accesskey", "secret", "secrets", "password",
                          "passwords", "passwd", "pass", "pw", "pwd", "passphrase", "auth", "authorization", "bearer",
                          "credential", "credentials", "cookie", "cookies", "session"})
_GLUED_IN = ("password", "passwd", "passphrase", "secret", "credential")  # PGPASSWORD, clientsecret
_GLUED_AT_END = ("token", "pass", "pwd", "apikey")  # authtoken, DBPASS, dbpwd
_NOT_GLUED = frozenset({"bypass", "compass", "encompass", "surpass", "overpass", "underpass", "multipass"})
_WHERE_OR_HOW_BIG = frozenset({"file", "files", "path", "dir", "len", "length", "size", "count", "limit", "type"})
_SPECIAL_TOKENS = frozenset({"pad", "eos", "bos", "unk", "sep", "cls", "mask"})  # a tokenizer's, not a secret
_URL_WORDS = frozenset({"sig", "signature"})  # a query parameter of such a name is a signed URL's secret

_NAME_WORDS_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
_CLOSERS = "\"'`)]}>,;"  # kept after a mask: `{"a": "***"}`, `(token=***)`


def _words(name: str) -> list[str]:
    return [word.lower() for word in _NAME_WORDS_RE.findall(name)]


def _secret_word(words: list[str], i: int) -> bool:
    word = words[i]
    if word == "token" and i and words[i - 1] in _SPECIAL_TOKENS:
        return False
    if word in SECRET_WORDS:
        return True
    return word not in _NOT_GLUED and (any(part in word for part in _GLUED_IN) or word.endswith(_GLUED_AT_END))


def secret_name(name: str) -> bool:
    """Whether a name (an option's, a variable's, a key's, a header's) says its value is a secret: `HF_TOKEN`,
    `apiKey`, `x-api-key`, `PGPASSWORD`, `db_pass`; not `max_tokens`, `tokenizer`, `monkey`, `password_file`."""
    return _judged(name) if len(name) <= 100 else _judge(name)


@functools.lru_cache(maxsize=4096)  # a text repeats its names (`a=1&a=2&…`): each is judged once
def _judged(name: str) -> bool:
    return _judge(name)


def _judge(name: str) -> bool:
    words = _words(name)
    if not words or (len(words) > 1 and words[-1] in _WHERE_OR_HOW_BIG):
        return False
    return any(_secret_word(words, i) for i in range(len(words)))


def _url_secret_name(name: str) -> bool:
    return secret_name(name) or any(word in _URL_WORDS for word in _words(name))


def _mask(value: str, quote: str = "") -> str:
    """A value hidden, its opening quote and closing brackets and quotes kept (`"abc")` is `"***")`); an empty value
    has nothing to hide. `quote` wraps the mask (a JSON number becomes the string "***")."""
    lead = value[:1] if value[:1] in ("\"", "'") else ""
    core = value[len(lead):].rstrip(_CLOSERS)
    if not core:
        return value
    return f"{lead}{quote}{MASK}{quote}{value[len(lead) + len(core):]}"


# --- parts of a text, each a pass over it ---------------------------------------------------------------------------
# Each search begins with a character its match must begin with, then looks behind it: so it skips ahead at C speed
# and starts where a name starts, never inside one (`aaaa…=` is read once, not once per `a`). The passes that judge
# names run only on a text that has the beginning of a secret word somewhere (`a=1&b=2&…` costs no Python).

_NAME = r"[A-Za-z_-](?<![\w.-].)[\w.-]*"  # dashes lead an option's name: `--token`, `-Dpassword`
_STEMS = sorted({word[:3] for word in (*SECRET_WORDS, *_GLUED_IN, *_GLUED_AT_END, *_URL_WORDS)})
_VALUE_RE = re.compile(r""""[^"\n]*"|'[^'\n]*'|\S+""")
_FLAG_RE = re.compile(r"""(?:--[\w.-]*(?:=\S*)?|-[A-Za-z])["'`)\]}]*""")  # follows an option but is not its value


def _hide_values(text: str, names: re.Pattern, value_of: Callable[[str, re.Match], tuple[int, int, str] | None]) -> str:
    """Text with the value after each match of `names` that `value_of(text, match)` finds, `(start, end, hidden)`,
    replaced; a match inside a value already hidden is passed over."""
    parts, at = [], 0
    for match in names.finditer(text):
        if match.start() >= at and (found := value_of(text, match)) is not None:
            start, end, hidden = found
            parts += [text[at:start], hidden]
            at = end
    return "".join(parts) + text[at:] if parts else text


_URL_RE = re.compile(r"[A-Za-z](?<![\w+.-].)[\w+.-]*://\S*")
_PORT_AND_PATH_RE = re.compile(r"\d+/")  # https://host:8080/a@b: no userinfo


def _url_password(match: re.Match) -> str:
    """`scheme://user:***@host`: the userinfo runs to the last `@` before the query (a password may hold `/`, `@`)."""
    url = match.group()
    start = url.index("://") + 3
    stop = min((i for i in (url.find("?", start), url.find("#", start)) if i >= 0), default=len(url))
    at = url.rfind("@", start, stop)
    colon = url.find(":", start, max(at, start))
    if colon < 0 or "/" in url[start:colon] or colon + 1 == at or _PORT_AND_PATH_RE.match(url, colon + 1, at):
        return url
    return f"{url[:colon + 1]}{MASK}{url[at:]}"


_BEARER_RE = re.compile(r"[Bb](?<![\w-].)(?i:earer)[ \t]+(?=[^\s\"'`,;)\]}>])")
_CREDENTIALS_RE = re.compile(r"[^\s\"'`,;)\]}>]+")  # a bearer token, basic's base64: no quote, no space


def _bearer(text: str, match: re.Match) -> tuple[int, int, str]:
    value = _CREDENTIALS_RE.match(text, match.end())
    return value.start(), value.end(), MASK


_OPTION_RE = re.compile(r"-(?<![\w.-]-)-?([A-Za-z][\w.-]*)[ \t]+")


def _option_value(text: str, match: re.Match) -> tuple[int, int, str] | None:
    """`--token VALUE` inside a text (`-c "… --token T"`), unless VALUE is another option."""
    value = _VALUE_RE.match(text, match.end())
    if not secret_name(match.group(1)) or value is None or _FLAG_RE.fullmatch(value.group()):
        return None
    return value.start(), value.end(), _mask(value.group())


_PAIR_RE = re.compile(rf"({_NAME})=")
_PAIR_VALUE_RE = re.compile(rf""""[^"\n]*"|'[^'\n]*'|(?:[^\s&;,?#]|[&;,?#](?!{_NAME}=|\s|\Z))*""")


def _pair_value(text: str, match: re.Match) -> tuple[int, int, str] | None:
    """`NAME=VALUE` anywhere: assignments, options, URL parameters, `a=1&b=2`, `a=1;b=2`, `a=1,b=2`."""
    in_url = match.start() > 0 and text[match.start() - 1] in "?&#;"
    if not (_url_secret_name if in_url else secret_name)(match.group(1)):
        return None
    value = _PAIR_VALUE_RE.match(text, match.end())
    return value.start(), value.end(), _mask(value.group())


_KEY_RE = re.compile(r"([A-Za-z_](?<![\w.-].)[\w.-]*)(?::[ \t]+|[ \t]+=[ \t]*)")
_SCHEME_RE = re.compile(r"(?i:bearer|basic|token|bot)[ \t]+(?=[^\s\"'`,;)\]}>])")


def _key_value(text: str, match: re.Match) -> tuple[int, int, str] | None:
    """`Name: value` (a header, YAML) and `name = value` (TOML): the value runs to the end of the line, or to the
    quote the pair opened in (`-H "X-Api-Key: ***"`); an auth scheme stays (`Authorization: Bearer ***`)."""
    if not secret_name(match.group(1)):
        return None
    start, end = match.end(), text.find("\n", match.end())
    end = len(text) if end < 0 else end
    opener = text[match.start() - 1] if match.start() and text[match.start() - 1] in "\"'" else ""
    if opener and (close := text.find(opener, start, end)) >= 0:
        end = close
    if scheme := _SCHEME_RE.match(text, start, end):
        start, end = scheme.end(), _CREDENTIALS_RE.match(text, scheme.end(), end).end()
    elif text[start:start + 1] in ("\"", "'") and (close := text.find(text[start], start + 1, end)) > 0:
        end = close + 1  # a quoted value: `password: "***" # and a comment`
    core = text[start:end].rstrip()
    return start, start + len(core), _mask(core)


_JSON_KEY_RE = re.compile(r"""(["'])([A-Za-z_][\w .-]*)\1\s*:\s*""")
_JSON_VALUE_RE = re.compile(r""""(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[^\s,}\]{\[]+""")
_NOT_SECRET_VALUES = frozenset({"true", "false", "null", "True", "False", "None"})


def _json_value(text: str, match: re.Match) -> tuple[int, int, str] | None:
    """JSON's (or a Python dict's) `"name": value` inside any text; an object or a list under a secret name is
    looked into, not hidden whole (its own secret names are found), and true, false and null stay."""
    value = _JSON_VALUE_RE.match(text, match.end())
    if not secret_name(match.group(2)) or value is None or value.group() in _NOT_SECRET_VALUES:
        return None
    quoted = value.group()[0] in "\"'"
    return value.start(), value.end(), _mask(value.group(), "" if quoted else match.group(1))


_NAMED_VALUES = ((_BEARER_RE, _bearer), (_OPTION_RE, _option_value), (_PAIR_RE, _pair_value), (_KEY_RE, _key_value),
                 (_JSON_KEY_RE, _json_value))


def _json_document(text: str) -> str:
    """A text that is JSON, parsed: every value under a secret name hidden (in lists too) and every string redacted;
    written again only if that changed something."""
    if text.lstrip()[:1] not in ("{", "["):
        return text
    try:
        document = json.loads(text)
        redacted = _redact_json(document, False)
        return text if redacted == document else json.dumps(redacted, ensure_ascii=False)
    except (ValueError, RecursionError):  # not JSON, or deeper than Python's stack: the passes above did their part
        return text


def _redact_json(value: object, secret: bool) -> object:
    if isinstance(value, dict):
        return {key: _redact_json(item, secret_name(str(key))) for key, item in value.items()}
    if isinstance(value, list):
        return [_redact_json(item, secret) for item in value]
    if isinstance(value, str):
        return MASK if secret and value else redact_text(value)
    if secret and isinstance(value, (int, float)) and not isinstance(value, bool):
        return MASK
    return value


# --- programs that take a password their own way ---------------------------------------------------------------------

@dataclass(frozen=True)
class _Password:
    """How a program takes a password on its command line."""
    options: tuple[str, ...]
    separate: bool = True  # the value may be the next word (`sshpass -p VALUE`); mysql's `-p NAME` prompts
    after_user: bool = False  # the value is `user:password`, only the password hidden (curl -u)

    def glued(self, word: str) -> str | None:
        """The word with the password glued to one of the options hidden (`-pVALUE`, `--user=bob:VALUE`), or None."""
        for option in self.options:
            prefix = option + "=" if option.startswith("--") else option
            if word.startswith(prefix) and len(word) > len(prefix):
                return prefix + self.hide(word[len(prefix):])
        return None

    def takes_next(self, word: str) -> bool:
        return self.separate and word in self.options

    def hide(self, value: str) -> str:
        if not self.after_user:
            return _mask(value)
        user, colon, password = value.partition(":")
        return f"{user}{colon}{_mask(password)}" if colon else value


_PROGRAMS = {
    **dict.fromkeys(("mysql", "mysqldump", "mysqladmin", "mysqlimport", "mysqlshow", "mysqlcheck", "mysqlpump",
                     "mariadb", "mariadb-dump", "mariadb-admin"), _Password(("-p",), separate=False)),
    **dict.fromkeys(("sshpass", "mongo", "mongosh", "mongodump", "mongorestore", "mongoexport", "mongoimport"),
                    _Password(("-p",))),
    "redis-cli": _Password(("-a",)),
    "curl": _Password(("-u", "-U", "--user", "--proxy-user"), after_user=True),
}
_PROGRAM_RE = re.compile(rf"(?:{'|'.join(map(re.escape, sorted(_PROGRAMS, key=len, reverse=True)))})(?![\w.+-])")
_COMMAND_END_RE = re.compile(r"[;|\n]|&&")
_TOKEN_RE = re.compile(r"\S+")


def _program_passwords(text: str) -> str:
    """The password a program of `_PROGRAMS` takes, inside a text: its words up to the first password or the end of
    its command (`;`, `|`, `&&`, a new line) read as redact_words reads a command's."""
    parts, at = [], 0
    for program in _PROGRAM_RE.finditer(text):
        before = text[program.start() - 1] if program.start() else " "
        if program.start() < at or before.isalnum() or before in "_.+-":
            continue
        rule, hide_next = _PROGRAMS[program.group()], False
        stop = _COMMAND_END_RE.search(text, program.end())
        end = stop.start() if stop else len(text)
        for token in _TOKEN_RE.finditer(text, program.end(), end):
            word = token.group().lstrip("\"'")
            hidden = rule.hide(word) if hide_next and not _FLAG_RE.fullmatch(word) else rule.glued(word)
            hide_next = rule.takes_next(word.rstrip(_CLOSERS))
            if hidden is not None:
                parts += [text[at:token.end() - len(word)], hidden]
                at = token.end()
                break  # one password: `sshpass -p *** ssh -p 2222 host`
        parts.append(text[at:end])
        at = end
    return "".join(parts) + text[at:]


# --- texts and words --------------------------------------------------------------------------------------------------

def redact_text(text: str) -> str:
    """A line (a label, a command line, one word of a command) with its secrets replaced by `***`."""
    if not isinstance(text, str) or not text:
        return text
    text = scrub(text)
    if "://" in text:
        text = _URL_RE.sub(_url_password, text)
    text = _program_passwords(text)
    lowered = text.lower()
    if any(stem in lowered for stem in _STEMS):
        for names, value_of in _NAMED_VALUES:
            text = _hide_values(text, names, value_of)
    return _json_document(text)


def _escaped(word: object) -> str:
    """Bytes that are not UTF-8 (kept by Python as surrogates) shown as `\\xff`; a surrogate of no byte as `\\ud800`."""
    word = str(word)
    try:
        return word.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return word.encode("utf-8", "backslashreplace").decode("utf-8")


_CUT_RE = re.compile(r"…\(\d[\d,]* more characters\)")
_MORE_WORDS_RE = re.compile(r"…\(\d[\d,]* more words\)")


def _redacted_and_bounded(word: str) -> str:
    """A word redacted whole, then cut past WORD_CHARS; the head is redacted again (a cut may leave half of a
    value), and a word cut before (the migration meets stored words) has its head alone redacted, its count kept."""
    head, mark, tail = word.rpartition("…(")
    if mark and len(head) <= WORD_CHARS + len(MASK) and _CUT_RE.fullmatch(mark + tail):
        return redact_text(head) + mark + tail
    word = redact_text(word)
    if len(word) <= WORD_CHARS:
        return word
    return redact_text(word[:WORD_CHARS]) + f"…({len(word) - WORD_CHARS:,} more characters)"


def storable(word: str) -> str:
    """A word as it can be stored and shown: bytes that are not UTF-8 (kept by Python as surrogates) as `\\xff`,
    and past WORD_CHARS characters redacted, then cut (control characters stay: every output escapes them, as for
    other names)."""
    word = _escaped(word)
    return word if len(word) <= WORD_CHARS else _redacted_and_bounded(word)


_BARE_OPTION_RE = re.compile(r"-{1,2}([A-Za-z][\w.-]*)")


def redact_words(words: list[str]) -> list[str]:
    """A command's words as `tlindex run` stores them: each made storable, its secrets replaced, then bounded; the
    word after an option of a secret name (`--api-key VALUE`) or after a program's password option (`sshpass -p
    VALUE`, once) replaced whole; the line bounded (the words past LINE_CHARS counted in one last word)."""
    kept, size, hide_next, program = [], 0, None, None
    for i, raw in enumerate(words):
        word = _escaped(raw)
        if hide_next and not _FLAG_RE.fullmatch(word):
            word, program = hide_next(word), None if program and hide_next == program.hide else program
        elif program and (glued := program.glued(word)) is not None:
            word, program = glued, None  # one password: `sshpass -p *** ssh -p 2222 host`
        program = _PROGRAMS.get(PurePosixPath(word).name, program)
        bare = _BARE_OPTION_RE.fullmatch(word)
        hide_next = _mask if bare and secret_name(bare.group(1)) else \
            program.hide if program and program.takes_next(word) else None
        word = _redacted_and_bounded(word)
        if size + len(word) > LINE_CHARS and kept and not (i == len(words) - 1 and _MORE_WORDS_RE.fullmatch(word)):
            kept.append(f"…({len(words) - i:,} more words)")
            break
        size += len(word)
        kept.append(word)
    return kept


def stored_command(command: list[str], program_only: bool = False) -> list[str]:
    """The command's words as the run keeps them (its folder's name and default label are made of them too):
    redacted (secrets never stored), bounded and storable; only the program's name with
    `program_only` (--no-command), or should redaction itself fail (it never fails the run)."""
    program = storable(PurePosixPath(command[0]).name if command else "") or "command"
    if program_only:
        return [program]
    try:
        return redact_words(command)
    except Exception:  # a bug of the redaction must cost the command line, never the run or a secret
        return [program]


def redact_command(stored: str | None) -> str | None:
    """A stored command (the JSON list of its words `runs.command` holds, or any text) with its secrets replaced."""
    if stored is None:
        return None
    try:
        words = json.loads(stored)
    except (TypeError, ValueError, RecursionError):
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
