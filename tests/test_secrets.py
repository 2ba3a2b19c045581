"""Safe to share (issue 48): secrets a command line carries are never stored, and a report leaves out where and by
whom a run was made unless asked.

One secret of each shape, and words that look like them but must survive, are planted in a real `tlindex run` (its
command copies a real fixture log into $TORCH_TRACE, so it needs no torch); then every surface is searched for the
secrets: every table and column of the database (and its file's bytes), every page of the route table with its JSON
twin, Datasette's own pages of every table and canned query (HTML, JSON, CSV), every file of a report, and every
command of the click registry (their output and every file they write). The cases come from the registries
(tlindex.pages.PAGES, sqlite_master, queries/, tests/test_odd_values.RECIPES), so a new surface is covered the day
it lands.
"""

from __future__ import annotations

import json
import random
import shutil
import sqlite3
import time
from contextlib import chdir
from pathlib import Path
from unittest import mock

import pytest
from click.testing import CliRunner
from conftest import DATA
from crawl import route_seeds
from test_odd_values import RECIPES, Case

from tlindex import pages
from tlindex.cli import cli
from tlindex.ingest.runs import check_label, normalize_label
from tlindex.store import redact
from tlindex.store.redact import (
    LINE_CHARS,
    MASK,
    WORD_CHARS,
    redact_text,
    redact_words,
    scrub,
    secret_name,
    storable,
    stored_command,
)
from tlindex.store.secret_shapes import SHAPES, shape_of

SECRET = "S3CRET"  # every planted secret holds it; nothing tlindex shows may
HF = "hf_S3CRETmAbCdEfGhIjKlMnOpQrStUvWxYz12"  # hf_ and 35 letters and digits
PLANTED = ["--token=S3CRETa", "--api-key", "S3CRETb", "https://bob:S3CRETc@example.org/x",
           "https://h.example/x?download=true&access_token=S3CRETh", "-H", "Authorization: Bearer S3CRETi",
           "--config", '{"api_key": "S3CRETj", "db": {"password": "S3CRETk"}}', "PGPASSWORD=S3CRETl", HF,
           "--password", "-xS3CRETn", "HF_TOKEN=S3CRETd"]
REDACTED = ["--token=***", "--api-key", "***", "https://bob:***@example.org/x",
            "https://h.example/x?download=true&access_token=***", "-H", "Authorization: Bearer ***",
            "--config", '{"api_key": "***", "db": {"password": "***"}}', "PGPASSWORD=***", "***",
            "--password", "***", "HF_TOKEN=***"]
SURVIVE = ["--max-tokens", "4096", "--keep-alive", "https://example.org/plain", "MAX_TOKENS=4096"]
CWD, HOST, USER = "cwd-Qz7", "host-Qz7", "user-Qz7"  # the run facts, recognisable wherever they show
LOG = next((DATA / "graph_breaks").glob("*.log"))
COPY = 'cp "$0" "$TORCH_TRACE/x.log"'

# One token of each shape the secret scanners know (tlindex.store.secret_shapes.SHAPES, by gitleaks rule id).
TOKENS = {
    "tlindex-token": "tli_" + "q7Zr2Lk9Xw_3mNb5Vc8Td-1aYh4Sg6Jp0Ue" + "Fi2Ko9",
    "huggingface-access-token": "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",
    "github-pat": "ghp_" + "aB3dE6gH9j" * 3 + "kL2mN5",
    "github-oauth": "gho_" + "Zy8xW7vU6t" * 3 + "sR5qP4",
    "github-app-token": "ghs_" + "Q1w2E3r4T5" * 3 + "y6U7i8",
    "github-refresh-token": "ghr_" + "Mn0bV9cX8z" * 3 + "Lk7Jh6",
    "github-fine-grained-pat": "github_pat_11ABCDEFG0abcdefghij12_" + "aB3dE6gH9jkL2mN5pQ8rS1tU4vW7xY0zA3bC6dE9fG2hJ5kL8mN1pQ4",
    "openai-api-key": "sk-proj-SevzWEV_NmNnMndQ5gn6PjFcX_9ay5SEKse8AL0EuYAB0cIgFW7Equ3vCbUbYShvii6L3rBw3W",
    "aws-access-token": "AKIALALEMEL33243OLIB",
    "slack-bot-token": "xoxb-781236542736-2364535789652-GkwFDQoHqzXDVsC6GzqYUypD",
    "gcp-api-key": "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "gitlab-pat": "glpat-aB3dE6gH9jkL2mN5pQ8r",
    "stripe-access-token": "sk_live_aB3dE6gH9jkL2mN5pQ8rS1tU",
    "npm-access-token": "npm_" + "aB3dE6gH9j" * 3 + "kL2mN5",
    "pypi-upload-token": "pypi-AgEIcHlwaS5vcmc" + "CJDE4YjU5ZTQ1LWNmNDctNDI2Zi05ZGM3LTYyMDU3NGQzM2QwMQ" + "AAI",
}
ANTHROPIC = "sk-ant-api03-" + "abc123xyz-456def789ghij-klmnopqrstuvwx-3456yza789bcde-1234fghijklmnopby56aaaogaop" + "AA"


@pytest.mark.parametrize("words, expected", [
    (["--token=V"], ["--token=***"]),
    (["--api-key", "V"], ["--api-key", "***"]),
    (["--apiKey", "V", "--Session-Id=V", "--db-password", "V"], ["--apiKey", "***", "--Session-Id=***",
                                                                 "--db-password", "***"]),
    (["https://bob:V@example.org/x", "git+ssh://u:V@h/r", "https://bob:p@ss@h/x"],
     ["https://bob:***@example.org/x", "git+ssh://u:***@h/r", "https://bob:***@h/x"]),
    (["HF_TOKEN=V", "AWS_SECRET_ACCESS_KEY=V", "cookie=V"], ["HF_TOKEN=***", "AWS_SECRET_ACCESS_KEY=***", "cookie=***"]),
    (["--token", "--verbose"], ["--token", "--verbose"]),  # a flag before another option: nothing to hide
    (["sh", "-c", "export HF_TOKEN=V; run --password V"], ["sh", "-c", "export HF_TOKEN=***; run --password ***"]),
    # URLs: a secret parameter after another one, a presigned S3 URL, a fragment, a password holding `/`
    (["https://h/x?download=true&access_token=V"], ["https://h/x?download=true&access_token=***"]),
    (["https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=V%2F20240101&X-Amz-Date=1"
      "&X-Amz-Signature=V"],
     ["https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***&X-Amz-Date=1"
      "&X-Amz-Signature=***"]),
    (["https://a.blob.core.windows.net/c/f?sv=2020&se=2024&sig=V;sp=r"],
     ["https://a.blob.core.windows.net/c/f?sv=2020&se=2024&sig=***;sp=r"]),
    (["https://app/cb#state=1&access_token=V&token_type=bearer"],
     ["https://app/cb#state=1&access_token=***&token_type=bearer"]),
    (["https://bob:pa/ss@h/x"], ["https://bob:***@h/x"]),
    # headers, as one word or inside a script; the header's name and the auth scheme stay
    (["curl", "-H", "Authorization: Bearer V", "https://h/x"], ["curl", "-H", "Authorization: Bearer ***", "https://h/x"]),
    (["sh", "-c", "curl -H 'X-Api-Key: V' -H \"Authorization: token V\" https://h/x"],
     ["sh", "-c", "curl -H 'X-Api-Key: ***' -H \"Authorization: token ***\" https://h/x"]),
    (["wget", "--header=Authorization:Bearer V", "https://h/x"], ["wget", "--header=Authorization:Bearer ***",
                                                                   "https://h/x"]),
    (["curl", "-H", "Cookie: a=V; b=V"], ["curl", "-H", "Cookie: ***"]),
    (["curl", "-H", "x-api-key: V"], ["curl", "-H", "x-api-key: ***"]),
    # JSON, YAML and TOML pairs inside a word
    (["--config", '{"api_key": "V", "n": 1}'], ["--config", '{"api_key": "***", "n": 1}']),
    (["--config", '{"auth": {"user": "bob", "password": "V"}, "port": 5}'],
     ["--config", '{"auth": {"user": "bob", "password": "***"}, "port": 5}']),
    (["--config", '{"client_secret":"V","pin":{"pass":12345},"use_auth_token":true}'],
     ["--config", '{"client_secret":"***","pin":{"pass":"***"},"use_auth_token":true}']),
    (["--yaml", "password: V"], ["--yaml", "password: ***"]),
    (["--toml", 'api_key = "V"'], ["--toml", 'api_key = "***"']),
    (["python", "-c", "run(headers={'Authorization': 'Bearer V'}, private_key='V')"],
     ["python", "-c", "run(headers={'Authorization': '***'}, private_key='***')"]),
    # a secret word anywhere in a name
    (["PGPASSWORD=V", "DBPASS=V", "db_pass=V", "MYSQL_PWD=V", "x-api-key=V"],
     ["PGPASSWORD=***", "DBPASS=***", "db_pass=***", "MYSQL_PWD=***", "x-api-key=***"]),
    (["refresh_token=V", "clientSecret=V", "-Dpassword=V", "authtoken=V"],
     ["refresh_token=***", "clientSecret=***", "-Dpassword=***", "authtoken=***"]),
    # NAME=VALUE lists
    (["a=1&token=V&b=2", "a=1;password=V;b=2", "a=1,secret=V,b=2", "password=V,W"],
     ["a=1&token=***&b=2", "a=1;password=***;b=2", "a=1,secret=***,b=2", "password=***"]),
    # the value after a secret option, whatever it starts with
    (["--password", "-xV", "--token", "-", "--api-key", "'V W'"], ["--password", "***", "--token", "***", "--api-key",
                                                                     "'***'"]),
    # plurals and short forms
    (["--secrets", "V", "--passwords", "V", "--pass", "V", "--pw", "V", "--passphrase", "V", "--bearer", "V"],
     ["--secrets", "***", "--passwords", "***", "--pass", "***", "--pw", "***", "--passphrase", "***", "--bearer",
      "***"]),
    # -p is a password only after the programs that take it so
    (["mysql", "-u", "root", "-pV", "db"], ["mysql", "-u", "root", "-p***", "db"]),
    (["/usr/bin/mysqldump", "-p", "db"], ["/usr/bin/mysqldump", "-p", "db"]),  # prompts; db is the database
    (["sshpass", "-p", "V", "ssh", "-p", "2222", "h"], ["sshpass", "-p", "***", "ssh", "-p", "2222", "h"]),
    (["curl", "-u", "bob:V", "https://h/x"], ["curl", "-u", "bob:***", "https://h/x"]),
    (["curl", "--user=bob:V", "-u", "x:y"], ["curl", "--user=bob:***", "-u", "x:y"]),  # one password a command
    (["redis-cli", "-a", "V", "ping"], ["redis-cli", "-a", "***", "ping"]),
    (["sh", "-c", "mysql -uroot -pV db; pytest -p no:cacheprovider"],
     ["sh", "-c", "mysql -uroot -p*** db; pytest -p no:cacheprovider"]),
    # tokens of a known shape, anywhere in a word
    *[([f"--model-{i}", f"{prefix}{token}{suffix}"], [f"--model-{i}", f"{prefix}***{suffix}"])
      for i, ((prefix, suffix), token) in enumerate(zip([("", ""), ("x=", ""), ("path/", "/file"), ("'", "'"),
                                                         ("Token ", ""), ("a,", ",b"), ("(", ")"), ("key:", "")] * 3,
                                                        [*TOKENS.values(), ANTHROPIC]))],
    (SURVIVE + ["--keys-file", "k", "--tokenizer", "t", "monkey=1"], SURVIVE + ["--keys-file", "k", "--tokenizer",
                                                                               "t", "monkey=1"]),
])
def test_each_shape_of_secret_is_redacted_and_lookalikes_survive(words, expected):
    assert redact_words(words) == expected
    assert redact_text(" ".join(words)) == " ".join(expected)
    assert redact_words(expected) == expected  # redacting again changes nothing (the migration may meet either)


LOOKALIKES = [
    "--max-tokens 4096", "--keep-alive", "MAX_TOKENS=4096", "--tokenizer t", "--keys-file k", "monkey=1",
    "pip install sk-learn scikit-learn", "from huggingface_hub import hf_hub_download", "--passes 3",
    "--password-file /run/secrets/db", "HF_TOKEN_PATH=/home/u/.cache/huggingface/token", "--token-type jwt",
    "--max-token-length 512", "--pad-token-id 0 --eos_token </s> --mask_token [MASK]", "--bypass-cache yes",
    "/usr/lib/python3/site-packages/torch/_dynamo/eval_frame.py", "TORCH_LOGS=+dynamo,recompiles TORCH_TRACE=/tmp/t",
    "torch._dynamo.config.cache_size_limit=8", "pytest -p no:cacheprovider -n 0", "ssh -p 2222 host", "mysql -p db",
    "https://h.example:8080/a@b", "https://example.org/x?page=2&sort=asc#top", "key-value store", "sk-learn-intelex-x",
    "hf_" + "x" * 34, "ghp_" + "x" * 36, "AKIA123", "eyJhbGciOi.x", "xoxo-indieweb-1.jpg", "glpat-short",
    "{\"model\": \"gpt2\", \"max_new_tokens\": 64}", "session_count: 3", "Note: the token expired", "a = b",
]


@pytest.mark.parametrize("text", LOOKALIKES)
def test_what_only_looks_like_a_secret_survives(text):
    assert redact_text(text) == text and redact_words(text.split()) == text.split() and scrub(text) == text


@pytest.mark.parametrize("rule", [rule for rule, _, _ in SHAPES])
def test_every_shape_of_the_scanners_rules_is_masked_wherever_it_is(rule):
    token = TOKENS[rule]  # every rule of secret_shapes.SHAPES has its token here
    assert shape_of(token) == rule
    for text in (token, f"x {token} y", f"--flag={token}", f"u/{token}/v", f'"{token}"'):
        masked = text.replace(token, MASK)
        assert scrub(text) == masked and redact_text(text) == masked, text
    assert scrub(token[:12]) == token[:12]  # its prefix alone is not a token


def test_scrub_masks_only_the_shapes_in_any_text():
    log = f"V0101 12:00:00 1 x.py:1] {{\"token\": \"plain\"}} Bearer plain {TOKENS['github-pat']}\n" * 3
    assert scrub(log) == log.replace(TOKENS["github-pat"], MASK) and scrub(scrub(log)) == scrub(log)
    assert scrub(ANTHROPIC) == MASK and scrub("") == "" and scrub(None) is None


def test_a_name_is_split_into_words_at_dashes_underscores_and_case():
    assert [secret_name(n) for n in ("HF_TOKEN", "apiKey", "APIKEY", "x-api-key", "Credentials", "passwd")] == [True] * 6
    assert [secret_name(n) for n in ("MAX_TOKENS", "keep-alive", "monkey", "tokenizer", "keys")] == [False] * 5
    glued = ("PGPASSWORD", "DBPASS", "db_pass", "MYSQL_PWD", "client_secret", "private_key", "access_token",
             "refresh_token", "X-Amz-Credential", "X-Amz-Security-Token", "passphrase", "--bearer", "--pw", "Cookie",
             "Authorization", "Proxy-Authorization", "HUGGINGFACEHUB_API_TOKEN", "secrets", "passwords")
    assert [n for n in glued if not secret_name(n)] == []
    plain = ("--passes", "password-file", "token_path", "pad_token_id", "eos_token", "bypass", "compass", "tokens",
             "num_keys", "--token-type", "X-Amz-Signature", "sig", "")  # a signature is a secret in a URL's query
    assert [n for n in plain if secret_name(n)] == []


def test_redacting_twice_changes_nothing():
    texts = [*LOOKALIKES, *TOKENS.values(), " ".join(PLANTED), " ".join(REDACTED), "Cookie: a=1 --token V",
             "'password': 123, 'b': 2", '{"password": 123, "tokens": [1, 2]}', '{"secrets": ["a", "b"]}',
             "a=1&&token=V", "Authorization=Bearer V", "--token Bearer V", "token: \"a b\" # c", "x=--token=V",
             "https://bob:@h/x", "https://bob:***@h/x?sig=***", '"Authorization: Bearer V" more', "--token ''"]
    for text in texts:
        once = redact_text(text)
        assert redact_text(once) == once, text
        assert SECRET not in once or SECRET not in text
    words = [*PLANTED, *SURVIVE, "x" * (WORD_CHARS * 2), "--token=" + "V" * WORD_CHARS, *["--token", "V"] * 2000]
    once = redact_words(words)
    assert redact_words(once) == once and once[-1].startswith("…(") and redact.redact_command(json.dumps(once)) == \
        json.dumps(once)


def test_a_json_word_is_parsed_and_every_secret_in_it_masked():
    document = {"secrets": ["a", "b"], "nested": [{"api_key": 5, "name": "n"}], "url": "https://u:pw@h/x",
                "api\u005fkey2": "V", "ok": None, "token": True}
    redacted = json.loads(redact_text(json.dumps(document, indent=2)))
    assert redacted == {"secrets": ["***", "***"], "nested": [{"api_key": "***", "name": "n"}],
                        "url": "https://u:***@h/x", "api_key2": "***", "ok": None, "token": True}


def test_a_word_is_redacted_whole_then_cut():
    for name, secret in (("", TOKENS["huggingface-access-token"]), ("", TOKENS["jwt"]), ("--token=", "S3CRET" * 9),
                         ("Authorization: Bearer ", "S3CRET" * 9)):
        word = "a " * ((WORD_CHARS - len(name) - 12) // 2) + name + secret + " b" * 100  # 12 characters before the cut
        for stored in (redact_words([word])[0], storable(word), redact_text(storable(word)), check_label(word)):
            assert len(stored) < WORD_CHARS + 50 and stored.endswith("more characters)")
            assert secret[:12] not in stored and SECRET not in stored, stored[-80:]
        assert redact_words(redact_words([word])) == redact_words([word])


ODD = ["", " ", "\x00", "\ud800", "\udcff\udcfe", b"caf\xe9".decode("utf-8", "surrogateescape"), "…(", "…(5 more "
       "characters)", "{", "[", "[" * 5_000 + "]" * 5_000, '{"a": ' * 3_000, '{"a": NaN, "token": Infinity}',
       '{"token": 1e999}', '{"token": "\\ud800"}', "[" * 100 + '{"token": "x"}' + "]" * 100, "\\", "'\"'\"", "-" * 9,
       "--", "-p", "mysql", "mysql -p", "curl -u", "curl -u :", "https://", "a://b:@", "::::", "= = =", "a=", "=a",
       "Authorization:", "Authorization: Bearer", "Bearer", "\"token\":", "'token': '", "token = \"", "x\n" * 100,
       "\t--token\t", "--token\nV", "sk-" * 100, "eyJ." * 100, "\u202e--token=V", "ｔｏｋｅｎ=V", "TOKEN=\u00e9\u00e9"]


def test_redaction_never_raises_and_is_idempotent_on_odd_input():
    rng = random.Random(48)
    alphabet = "aZ9_-=&;,?#:/@\"' \t\n{}[]()\\.…" + "\udcff\ud800é"
    texts = ODD + ["".join(rng.choice(alphabet) for _ in range(rng.randrange(60))) for _ in range(2_000)]
    for text in texts:
        once = redact_text(text)
        assert isinstance(once, str) and redact_text(once) == once, repr(text)
        assert isinstance(storable(text), str) and isinstance(scrub(text), str)
        words = redact_words(text.split(" "))
        assert redact_words(words) == words, repr(text)
        assert isinstance(redact.redact_command(text), str)
    for value in (None, 5, 1.5, b"x", ["--token", "V"]):
        assert redact_text(value) == value and isinstance(storable(value), str)
    assert redact.redact_command(None) is None and redact.redact_command("[1, null, {}]") == '["1", "None", "{}"]'


HUGE = ("a", "=", "&", '"', "'", "-", ":", " ", "\\", "{", "a=", "a: ", '"a":', "sk-", "eyJ-", "a://b:", "token=",
        "--token ", "mysql -p ", "Bearer ", "a=1&", "-a ")


@pytest.mark.parametrize("word", [
    *[char * (5_000_000 // len(char)) for char in HUGE[:10]],
    *[char * (1_000_000 // len(char)) + " token" for char in HUGE],  # with a secret word: every pass reads it
], ids=[f"{char!r}x5MB" for char in HUGE[:10]] + [f"{char!r}x1MB" for char in HUGE])
@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
def test_redaction_takes_linear_time_on_a_huge_word(word):
    for redaction in (redact_text, scrub, redact_words, storable):
        started = time.perf_counter()
        redaction([word] if redaction is redact_words else word)
        assert time.perf_counter() - started < 5, redaction  # a regex that backtracks takes minutes here, not seconds


def test_bad_input_is_stored_bounded_and_never_fails_the_run():
    undecodable = b"caf\xe9-\xff".decode("utf-8", "surrogateescape")  # what argv holds for bytes not UTF-8
    words = ["prog", "a\x1b]0;x\x07\nb", undecodable, "x" * 5_000_000, *["--token=S3CRETx"] * 100_000]
    stored = redact_words(words)
    assert sum(map(len, stored)) < LINE_CHARS + WORD_CHARS + 100 and stored[-1].startswith("…(")
    assert stored[1] == "a\x1b]0;x\x07\nb"  # kept as the other names are; every output escapes it
    assert stored[2] == "caf\\xe9-\\xff" and SECRET not in json.dumps(stored)
    sqlite3.connect(":memory:").execute("SELECT ?", (json.dumps(stored),))  # storable
    with mock.patch("tlindex.store.redact.redact_words", side_effect=RuntimeError("a bug")):
        assert stored_command(["/usr/bin/python3", "--token=S3CRETx"]) == ["python3"]  # the program, never a secret
    assert stored_command(["/usr/bin/python3", "train.py", "--token=S3CRETx"], program_only=True) == ["python3"]


def _tlindex_run(db: Path, cwd: Path, *options: str, env: dict | None = None):
    """A real `tlindex run` of a command carrying the planted secrets, in `cwd`, on a host and by a user of
    recognisable names (the run facts `tlindex run` keeps)."""
    cwd.mkdir(parents=True, exist_ok=True)
    args = ["run", "--db", str(db), *options, "--", "sh", "-c", COPY, str(LOG), *PLANTED, *SURVIVE]
    with mock.patch("socket.gethostname", return_value=HOST), mock.patch("getpass.getuser", return_value=USER), \
            chdir(cwd):
        return CliRunner().invoke(cli, args, env=env)


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, str]:
    """A database whose run 1 was made by `tlindex run` with the secrets on its command line (run 2: logs ingested);
    and what the run printed."""
    tmp = tmp_path_factory.mktemp("planted")
    db = tmp / "db" / "share.db"
    db.parent.mkdir()
    result = _tlindex_run(db, tmp / CWD)
    assert result.exit_code == 0, result.output
    ingested = CliRunner().invoke(cli, ["ingest", str(DATA / "dynamic"), "--db", str(db), "--silent"])
    assert ingested.exit_code == 0, ingested.output
    return db, result.output


def _leaks(text: str | bytes) -> bool:
    return (SECRET.encode() if isinstance(text, bytes) else SECRET) in text


def test_the_run_prints_and_keeps_its_command_redacted_and_its_facts(planted):
    db, printed = planted
    assert not _leaks(printed) and "--token=***" in printed
    listed = json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).stdout)
    run = next(run for run in listed if run["id"] == 1)
    ran = run["ran"]
    assert ran["command"] == ["sh", "-c", COPY, str(LOG), *REDACTED, *SURVIVE]
    # the default label is the redacted command's first 200 characters (the fixture's path is as long as the checkout's)
    assert run["label"] == normalize_label(" ".join(ran["command"])[:200]) and not _leaks(run["label"])
    assert "HF_TOKEN=*** --max-tokens 4096" in " ".join(ran["command"])
    assert (ran["exit_code"], Path(ran["cwd"]).name, ran["host"], ran["user"]) == (0, CWD, HOST, USER)
    assert ran["duration_s"] is not None and ran["ended"] == "exit 0"


def test_no_column_of_any_table_holds_a_secret(planted):
    from conftest import connect

    db, _ = planted
    conn = connect(db)  # (the payload index reads the payloads view: the sqlar functions)
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert "runs" in tables and len(tables) > 20
    found = [(table, value) for table in tables for row in conn.execute(f'SELECT * FROM "{table}"')
             for value in row if isinstance(value, (str, bytes)) and _leaks(value)]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert found == []
    assert not _leaks(db.read_bytes())  # nor a page of the file: it was never written


def _datasette_urls(conn: sqlite3.Connection, base: str) -> list[str]:
    """Every page of the route table (a few of each, from the database's own values) with its JSON twin, and
    Datasette's own pages of every table and view, canned query and `?sql=`, as HTML, JSON and CSV."""
    from tlindex.answers.queries import load_queries

    urls = ["/", base, base + pages.path("runs"), base + pages.path("runs") + ".json"]
    for url in route_seeds(conn, base):
        urls.append(url)
        found = pages.match(url.split("?")[0][len(base):])
        if found and found[0].json_twin:
            path, _, query = url.partition("?")
            urls.append(path + ".json" + (f"?{query}" if query else ""))
    names = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
    queries = [f"{name}?run=1" if "run" in dict(q.params) else name for name, q in load_queries().items()]
    for name in [*names, *queries, "?sql=select+*+from+runs"]:
        path, _, query = name.partition("?")
        for suffix in ("", ".json", ".csv"):
            urls.append(f"{base}/{path}{suffix}" + (f"?{query}" if query else "") if path
                        else f"{base}{suffix}?{query}")
    return urls


@pytest.mark.slow  # a sweep (seconds to a minute): CI runs it, -m "slow or not slow"
@pytest.mark.asyncio
async def test_no_served_page_shows_a_secret(planted):
    from datasette.app import Datasette

    db, _ = planted
    conn = sqlite3.connect(db)
    urls = _datasette_urls(conn, "/share")
    conn.close()
    datasette = Datasette([str(db)])
    await datasette.invoke_startup()
    answered, leaks, facts = 0, [], 0
    for url in urls:
        response = await datasette.client.get(url)
        answered += response.status_code == 200
        if _leaks(response.text):
            leaks.append(url)
        facts += HOST in response.text  # the database's owner sees the run facts
    assert leaks == []
    assert answered > len(urls) * 0.8 and facts >= 4  # the run page, its twin, runs.json, runs.csv, ...


def _files_leaking(folder: Path, *words: str) -> list[tuple[str, str]]:
    return [(str(path.relative_to(folder)), word) for path in sorted(folder.rglob("*")) if path.is_file()
            for word in words if word.encode() in path.read_bytes()]


def test_a_report_shows_no_secret_and_leaves_the_run_facts_out_unless_asked(planted, tmp_path):
    db, _ = planted
    out = tmp_path / "report"
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(out), "--silent", "-j", "1"])
    assert result.exit_code == 0, result.output
    assert len(list(out.rglob("*.html"))) > 20
    assert _files_leaking(out, SECRET, CWD, HOST, USER) == []
    page = (out / "run-1" / "index.html").read_text()
    assert "left out of this report" in page and "--with-run-facts" in page
    assert "Run run 1 " in page and "--token" not in page  # a label made of the command line is left out: `run 1`
    facts = tmp_path / "with-facts"
    result = CliRunner().invoke(cli, ["report", "--db", str(db), "-o", str(facts), "--silent", "-j", "2",
                                      "--with-run-facts"])
    assert result.exit_code == 0, result.output
    assert _files_leaking(facts, SECRET) == []
    page = (facts / "run-1" / "index.html").read_text()
    assert CWD in page and f"{USER}@{HOST}" in page and "--api-key &#39;***&#39;" in page
    assert "left out of this report" not in page


def test_no_command_prints_or_writes_a_secret(planted, tmp_path):
    """Every command of the click registry (tests/test_odd_values.RECIPES: runs, findings, trend and its gate, show of
    every page, diff, query of every canned query, search, export, report, ...): its output and every file it writes."""
    db, _ = planted
    copy = tmp_path / "share.db"
    shutil.copy(db, copy)
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(LOG, logs / LOG.name)
    written = tmp_path / "written"
    written.mkdir()
    case = Case(logs, copy, written, ["2", "1"])  # `label` renames the first, `rm` removes the last: run 1 at the end
    leaks, ran = [], 0
    for command, recipe in RECIPES.items():
        for args in recipe(case):
            result = CliRunner().invoke(cli, [*command, *args])
            ran += 1
            if _leaks(result.stdout) or _leaks(result.stderr):
                leaks.append((command, args))
    assert leaks == [] and ran > 50
    assert _files_leaking(written, SECRET) == []


def test_no_command_keeps_only_the_program(tmp_path):
    for options, env in (["--no-command"], None), ([], {"TLINDEX_NO_COMMAND": "1"}):
        db = tmp_path / f"{len(options)}.db"
        result = _tlindex_run(db, tmp_path / "cwd", *options, env=env)
        assert result.exit_code == 0, result.output
        conn = sqlite3.connect(db)
        assert conn.execute("SELECT command, label FROM runs").fetchall() == [('["sh"]', "sh")]
        conn.close()
        assert not _leaks(result.output) and not _leaks(db.read_bytes())
    # a label typed is redacted the same way (tlindex label, --label, ingest --run)
    result = CliRunner().invoke(cli, ["label", "1", "nightly HF_TOKEN=S3CRETe", "--db", str(tmp_path / "0.db")])
    assert result.exit_code == 0, result.output
    assert sqlite3.connect(tmp_path / "0.db").execute("SELECT label FROM runs").fetchone() == ("nightly HF_TOKEN=***",)


def test_a_database_written_before_redaction_is_redacted_once_and_says_so(planted, tmp_path):
    """What an older tlindex stored (its command line and label, secrets and all), redacted by the migration the
    first time a command writes to the database; it says how many it changed, once; two labels that become one
    are told apart by their ids."""
    db = tmp_path / "old.db"
    shutil.copy(planted[0], db)
    conn = sqlite3.connect(db)
    command = json.dumps(["python", "train.py", *PLANTED, *SURVIVE])
    conn.execute("UPDATE runs SET command = ?, label = ? WHERE id = 1", (command, "python train.py --token=S3CRETa"))
    conn.execute("UPDATE runs SET label = 'python train.py --token=S3CRETf' WHERE id = 2")
    migration = conn.execute("SELECT name FROM _tlindex_migrations WHERE name LIKE '%redacted_secrets'").fetchone()[0]
    conn.execute("DELETE FROM _tlindex_migrations WHERE name = ?", (migration,))
    conn.commit()
    conn.close()
    first = CliRunner().invoke(cli, ["ingest", str(DATA / "dynamic"), "--db", str(db), "--silent"])
    assert first.exit_code == 0, first.output
    assert "secrets redacted from 1 stored command line and 2 labels" in first.stderr
    again = CliRunner().invoke(cli, ["ingest", str(DATA / "dynamic"), "--db", str(db), "--silent"])
    assert "redacted" not in again.stderr
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT id, label, command FROM runs ORDER BY id").fetchall()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert rows[0][1:] == ("python train.py --token=*** (run 1)", json.dumps(["python", "train.py", *REDACTED,
                                                                               *SURVIVE]))
    assert rows[1][1] == "python train.py --token=***"  # the last of those that met takes the name
    assert not _leaks(db.read_bytes())


def test_a_hostile_command_line_is_stored_bounded_and_the_run_keeps_its_exit_code(tmp_path):
    """Control characters, undecodable bytes and a 100 KB argument on the command line of a real run: the run is
    ingested, its exit code is the command's, the stored line is bounded and every line printed is escaped."""
    db = tmp_path / "t.db"
    undecodable = b"\xff\xfe".decode("utf-8", "surrogateescape")
    args = ["run", "--db", str(db), "--", "sh", "-c", COPY + "; exit 3", str(LOG), undecodable, "a\x1b[31m\nb",
            "x" * 100_000, "--password", "S3CRETg"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 3, result.output
    (command, label), = sqlite3.connect(db).execute("SELECT command, label FROM runs").fetchall()
    words = json.loads(command)
    assert words[4:6] == ["\\xff\\xfe", "a\x1b[31m\nb"] and len(words[6]) < WORD_CHARS + 50
    assert words[-2:] == ["--password", "***"] and len(label) <= 200
    listed = CliRunner().invoke(cli, ["runs", "--db", str(db)])
    assert "\x1b" not in listed.output and "^[[31m⏎ b" in listed.output and not _leaks(listed.output)


def test_a_label_made_from_a_folder_name_and_the_working_directory_are_redacted(tmp_path):
    """Issue 62: a log folder named after a command (`logs/HF_TOKEN=…`) gave its run a label in clear, and `tlindex
    run` kept the working directory as it was."""
    from conftest import ingest

    from tlindex import Database
    from tlindex.run import run_command

    folder = tmp_path / f"HF_TOKEN={SECRET}f" / f"job-{HF}"
    folder.mkdir(parents=True)
    shutil.copy(LOG, folder / LOG.name)
    ingest(tmp_path / "t.db", [str(folder)], jobs=1)
    with Database(tmp_path / "t.db") as db:
        (label,) = [run["label"] for run in db.runs()]
    assert not _leaks(label) and label.startswith("job-***@"), label
    cwd = tmp_path / f"work-PGPASSWORD={SECRET}m"
    cwd.mkdir()
    with chdir(cwd):
        ran = run_command(["true"], tmp_path)
    assert not _leaks(ran.cwd) and ran.cwd.endswith("work-PGPASSWORD=***"), ran.cwd


def test_a_report_says_the_logs_text_is_as_torch_wrote_it_and_scrub_masks_its_token_shapes(tmp_path):
    """The logs' own text carries a token (HAND-MADE variant of a real log: the user file's path in its string table
    holds a Hugging Face token): a default report keeps it and says so on its first page; --scrub masks it in every
    file, the tlparse files included, and says how many."""
    log = tmp_path / "logs" / LOG.name
    log.parent.mkdir()
    text = LOG.read_text()
    user_file = next(line.split('"str": ["', 1)[1].split('"', 1)[0] for line in text.splitlines()
                     if '"str": [' in line and "site-packages" not in line)
    log.write_text(text.replace(user_file, user_file.replace("graph_breaks.py", f"{HF}/graph_breaks.py")))
    kept, scrubbed = tmp_path / "kept", tmp_path / "scrubbed"
    for out, extra in ((kept, []), (scrubbed, ["--scrub"])):
        result = CliRunner().invoke(cli, ["report", str(log.parent), "-o", str(out), "-j", "1", *extra])
        assert result.exit_code == 0, result.output
    shown = [path for path in kept.rglob("*") if path.is_file() and HF.encode() in path.read_bytes()]
    assert shown and "as torch wrote it" in (kept / "index.html").read_text()  # said where it is shared as-is
    assert not [path for path in scrubbed.rglob("*") if path.is_file() and SECRET.encode() in path.read_bytes()]
    assert sorted(p.relative_to(scrubbed) for p in scrubbed.rglob("*")) == sorted(p.relative_to(kept)
                                                                                for p in kept.rglob("*"))
    index = (scrubbed / "index.html").read_text()
    assert "tokens of a known shape" in index and "scrubbed:" in result.output
    count = int(result.output.split("scrubbed: ", 1)[1].split()[0].replace(",", ""))
    assert count == sum(path.read_bytes().count(HF.encode()) for path in kept.rglob("*") if path.is_file())


def test_scrubbing_a_file_masks_a_token_cut_by_a_block_end(tmp_path, monkeypatch):
    from tlindex.report import output

    monkeypatch.setattr(output, "SCRUB_BLOCK", 64)
    page = tmp_path / "page.html"
    body = "".join(f"<p>{'x' * n} {HF}</p>\n" for n in range(0, 130, 7))  # the token astride every offset
    page.write_text(body)
    assert output._scrub_file(page) == body.count(HF)
    assert page.read_text() == body.replace(HF, MASK)
