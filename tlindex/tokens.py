"""The tokens that may post logs to a team's server (`tlindex token create NAME`): each shown once, stored hashed.

A token is 32 random bytes, shown once as `tli_` and their URL-safe base64 (the `tli_` prefix lets secret scanners
and tlindex's redaction recognise one). The server keeps only its SHA-256 (a random token needs no slow hash: it cannot
be guessed from its digest), in a file beside the database that Datasette never serves (`.traces.db.tokens.json`,
mode 0600), with its name, what it may do (`upload`, or `admin`: upload, relabel, remove runs), when it was made,
when it expires and whether it was revoked. `check` answers who a presented token is, or why it is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tlindex.errors import TlindexError, UsageError

PREFIX = "tli_"
ABILITIES = ("upload", "admin")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
DURATION_RE = re.compile(r"^(\d+)([dhm])$")


class TokenRefused(TlindexError):
    """A token that is missing, unknown, expired or revoked (HTTP 401), or not allowed to (403): the message says
    which."""

    def __init__(self, message: str, status: int = 401):
        super().__init__(message)
        self.status = status


@dataclass
class Token:
    name: str
    digest: str          # sha256 of the token, hex
    can: str             # upload or admin
    created: str         # UTC, ISO
    expires: str | None  # UTC, ISO; None: never
    revoked: str | None  # UTC, ISO; None: valid

    def allows(self, ability: str) -> bool:
        """Whether the token may do `ability` (admin may do everything upload may)."""
        return self.can == "admin" or self.can == ability

    def state(self, now: datetime | None = None) -> str:
        """valid, expired or revoked."""
        if self.revoked:
            return "revoked"
        if self.expires and datetime.fromisoformat(self.expires) <= (now or _now()):
            return "expired"
        return "valid"


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def tokens_file(db_path: Path) -> Path:
    """Where a database's tokens are kept: beside it, hidden, never served."""
    real = Path(db_path).resolve()
    return real.parent / f".{real.name}.tokens.json"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load(db_path: Path) -> list[Token]:
    """The database's tokens (none when it has no file of them)."""
    try:
        data = json.loads(tokens_file(db_path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as error:
        raise TlindexError(f"{tokens_file(db_path)}: cannot be read ({error})") from None
    return [Token(**entry) for entry in data.get("tokens", [])]


def _save(db_path: Path, tokens: list[Token]) -> None:
    """The tokens written whole beside the database, readable by its owner alone."""
    path = tokens_file(db_path)
    partial = path.with_name(path.name + f".{os.getpid()}.partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump({"tlindex": "tokens", "tokens": [asdict(token) for token in tokens]}, out, indent=1)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def duration(text: str) -> timedelta:
    """`30d`, `12h` or `90m` as a duration (UsageError for anything else)."""
    match = DURATION_RE.match(text.strip())
    if not match or int(match.group(1)) == 0:
        raise UsageError(f"--expires {text!r}: a number of days, hours or minutes, e.g. 30d, 12h, 90m")
    return timedelta(**{{"d": "days", "h": "hours", "m": "minutes"}[match.group(2)]: int(match.group(1))})


def create(db_path: Path, name: str, can: str = "upload", expires: str | None = None) -> str:
    """A new token of `name` (unique among the database's, revoked ones aside), stored hashed; the token itself,
    which is never stored."""
    if not NAME_RE.match(name):
        raise UsageError(f"a token's name is letters, digits and _.@- (at most 64), not {name!r}")
    if can not in ABILITIES:
        raise UsageError(f"--can {can!r}: one of {', '.join(ABILITIES)}")
    tokens = load(db_path)
    if any(token.name == name and token.state() == "valid" for token in tokens):
        raise UsageError(f"a valid token named {name!r} exists: revoke it first (tlindex token revoke {name})")
    token = PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).decode().rstrip("=")
    now = _now()
    until = (now + duration(expires)).isoformat() if expires else None
    tokens.append(Token(name, digest(token), can, now.isoformat(), until, None))
    _save(db_path, tokens)
    return token


def revoke(db_path: Path, name: str) -> int:
    """Revoke every valid token of `name`; how many."""
    tokens, revoked = load(db_path), 0
    for token in tokens:
        if token.name == name and not token.revoked:
            token.revoked = _now().isoformat()
            revoked += 1
    if not revoked:
        raise UsageError(f"no valid token named {name!r} (tlindex token list)")
    _save(db_path, tokens)
    return revoked


def check(db_path: Path, presented: str | None, ability: str) -> Token:
    """The token presented (an `Authorization: Bearer` header's), if it may do `ability`; else TokenRefused saying
    why: missing, unknown, expired, revoked, or not allowed to."""
    if not presented:
        raise TokenRefused("a token is needed: send it as `Authorization: Bearer <token>` (tlindex token create NAME "
                           "makes one)")
    wanted = digest(presented.strip())
    for token in load(db_path):
        if hmac.compare_digest(token.digest, wanted):
            state = token.state()
            if state != "valid":
                raise TokenRefused(f"the token {token.name!r} is {state}")
            if not token.allows(ability):
                raise TokenRefused(f"the token {token.name!r} may {token.can}, not {ability}", 403)
            return token
    raise TokenRefused("this token is not one of this server's (tlindex token list shows its tokens)")
