"""Tokens whose shape alone says they are secrets, as the secret scanners know them: `scrub(text)` masks them.

Each shape follows a rule of gitleaks (cmd/generate/config/rules/, named beside it), a little wider where the
issuer's format grew (a token longer than the rule's fixed length is still masked). They are found anywhere in a
text, glued to what is around them or not, except right after a letter or a digit (`xsk-…` is a word, not a key);
a shape whose token may hold `_` or `-` must also not follow one of those, which keeps the search linear (a run of
`sk-sk-sk-…` is tried once, not once per `sk-`). A shape marked random must look random as well, two of lower case,
upper case and digits after its prefix (gitleaks asks for entropy; this is its cheap cousin): `sk-learn-intelex`
and `hf_xxxx…` placeholders stay.
"""

from __future__ import annotations

import re

MASK = "***"


def _shape(prefix: str, width: int, body: str, *, part: bool = False) -> str:
    """A prefix of `width` characters, not right after a letter or a digit (or `_`, `-` when `part`: the body may
    hold them), then its body. The prefix comes first so that the search skips ahead to it."""
    before = r"[\w-]" if part else r"[A-Za-z0-9]"
    return rf"{prefix}(?<!{before}.{{{width}}}){body}"


# (gitleaks rule, pattern, random)
SHAPES: tuple[tuple[str, str, bool], ...] = (
    ("huggingface-access-token", _shape("hf_", 3, r"[A-Za-z0-9]{34,}"), True),  # gitleaks: hf_ + 34 letters
    ("github-pat", _shape("ghp_", 4, r"[A-Za-z0-9]{36,}"), True),
    ("github-oauth", _shape("gho_", 4, r"[A-Za-z0-9]{36,}"), True),
    ("github-app-token", _shape("gh[us]_", 4, r"[A-Za-z0-9]{36,}"), True),
    ("github-refresh-token", _shape("ghr_", 4, r"[A-Za-z0-9]{36,}"), True),
    ("github-fine-grained-pat", _shape("github_pat_", 11, r"\w{22,}", part=True), True),  # gitleaks: \w{82}
    # openai-api-key (sk-, sk-proj-, sk-svcacct-, sk-admin-) and anthropic-api-key (sk-ant-api03-, -admin01-,
    # -oat01-) as one shape: gitleaks pins each one's lengths and marks (T3BlbkFJ, a final AA)
    ("openai-api-key", _shape("sk-", 3, r"[\w-]{20,}", part=True), True),
    ("aws-access-token", _shape("(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)", 4, r"[A-Z0-9]{16}(?![A-Za-z0-9])"), False),
    # slack-bot-token, slack-user-token, slack-legacy-*-token: xox?-, a number, then the rest
    ("slack-bot-token", _shape("xox[abeoprs]-", 5, r"\d+-[A-Za-z0-9-]{10,}", part=True), False),
    ("gcp-api-key", _shape("AIza", 4, r"[\w-]{35}"), False),
    ("jwt", _shape("eyJ", 3, r"[\w-]{10,}\.eyJ[\w-]{10,}\.[\w-]*", part=True), False),
    ("gitlab-pat", _shape("glpat-", 6, r"[\w-]{20,}", part=True), True),
    ("stripe-access-token", _shape("(?:sk|rk)_(?:live|test)_", 8, r"[A-Za-z0-9]{10,}"), True),  # pk_ is public
    ("npm-access-token", _shape("npm_", 4, r"[A-Za-z0-9]{36,}"), True),
    # pypi-upload-token: a macaroon, AgE… (gitleaks pins pypi.org's AgEIcHlwaS5vcmc; test.pypi.org's differs)
    ("pypi-upload-token", _shape("pypi-AgE", 8, r"[\w-]{50,}", part=True), False),
    # tlindex's own (tlindex.tokens: tli_ and 32 random bytes in URL-safe base64, 43 characters)
    ("tlindex-token", _shape("tli_", 4, r"[\w-]{40,}", part=True), True),
)
_SHAPES = [(name, re.compile(pattern), random) for name, pattern, random in SHAPES]
_ANY_SHAPE_RE = re.compile("|".join(pattern for _, pattern, _ in SHAPES))  # unnamed: named groups slow it tenfold
_PREFIX_RE = re.compile(r"(?:[a-z]+[_-])+")  # hf_, sk-proj-, github_pat_: not the random part


def _looks_random(token: str) -> bool:
    prefix = _PREFIX_RE.match(token)
    body = token[prefix.end():] if prefix else token
    return sum((any(c.islower() for c in body), any(c.isupper() for c in body), any(c.isdigit() for c in body))) >= 2


def shape_of(token: str) -> str | None:
    """The gitleaks rule a token follows, whole, or None."""
    for name, pattern, random in _SHAPES:
        if pattern.fullmatch(token) and (not random or _looks_random(token)):
            return name
    return None


def _masked(match: re.Match) -> str:
    token = match.group()
    return MASK if shape_of(token) else token


def scrub(text: str) -> str:
    """Text (a log, a page, a command line) with every token of a known shape replaced by `***`; names are not
    judged (that is redact_text's), so `max_tokens=4096` and `--api-key=V` stay unless V has a shape."""
    return scrub_counted(text)[0]


def scrub_counted(text: str) -> tuple[str, int]:
    """scrub(text), and how many tokens it masked."""
    if not isinstance(text, str) or not text:
        return text, 0
    masked = [0]

    def mask(match: re.Match) -> str:
        said = _masked(match)
        masked[0] += said is MASK
        return said

    return _ANY_SHAPE_RE.sub(mask, text), masked[0]
