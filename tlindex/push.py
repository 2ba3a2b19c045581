"""`tlindex push URL PATH...`: logs posted to a team's server (`tlindex serve --uploads`), their run's link printed.

One log (or `.gz`, or archive) is sent as it is; a folder, or several paths, is packed as a `.tar.gz` while it is sent
(written into a pipe that the request reads: no temporary copy), the same files always into the same bytes, so that
the server knows them for an upload it has. The request is streamed (chunked), its progress drawn
on a terminal. The server answers at once with the upload's status URL; with `wait`, the status is followed until
the run is made, and its URL, its findings and the gate's verdict are said. The URL is the server's root or any URL
`tlindex serve` printed (the database is read from it, or asked of the server when it serves only one).
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import sys
import tarfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tlindex.errors import TlindexError, UsageError

DONE, GATE_FAILED, REFUSED = 0, 1, 3  # push's exit codes (2: usage, click's)
POLL_S = 1.0
SEND_BLOCK = 1 << 20  # bytes read from a file, and sent, at a time (http.client's 8 KiB cost a system call each)


class PushFailed(TlindexError):
    """The server refused the upload, or its ingest failed: the message says why."""

    exit_code = REFUSED


@dataclass(frozen=True)
class Target:
    """Where to post: the server's base URL and the database's name."""

    base: str
    database: str

    @property
    def upload_url(self) -> str:
        return f"{self.base}/{urllib.parse.quote(self.database)}/-/tlindex/upload"


def target_of(url: str, token: str | None) -> Target:
    """The server and database a URL names: `/<db>/…` in its path, else the one database the server serves."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{url!r} is not a server's URL (http://host:port/, as `tlindex serve` prints it)")
    base = f"{parts.scheme}://{parts.netloc}"
    segments = [s for s in parts.path.split("/") if s]
    if segments and not segments[0].startswith("-"):
        return Target(base, urllib.parse.unquote(segments[0]).split(".")[0])
    try:
        databases = _json(f"{base}/-/databases.json", token)
    except (OSError, ValueError) as error:
        raise PushFailed(f"{base}: cannot ask which databases it serves ({error})") from None
    if isinstance(databases, dict):  # Datasette 1.0: {"ok": true, "databases": [...]}; 0.65: the list
        databases = databases.get("databases") or []
    names = [d["name"] for d in databases if isinstance(d, dict) and not d.get("name", "_").startswith("_")]
    if len(names) != 1:
        raise UsageError(f"{base} serves {len(names)} databases ({', '.join(names)}): give the URL of one, "
                         f"{base}/<database>")
    return Target(base, names[0])


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _json(url: str, token: str | None) -> object:
    request = urllib.request.Request(url, headers={**_headers(token), "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


class _Counted:
    """A stream read by the request, its bytes counted for the progress line."""

    def __init__(self, stream, progress: Callable[[int], None]):
        self.stream, self.progress, self.sent = stream, progress, 0

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(size if size and size > 0 else SEND_BLOCK)
        self.sent += len(chunk)
        self.progress(self.sent)
        return chunk


def _packed(paths: list[Path]):
    """A readable stream of a `.tar.gz` of the paths, written by a thread as it is read; the thread's failure."""
    read_end, write_end = os.pipe()
    failed: list[BaseException] = []

    def pack() -> None:  # the same files give the same bytes (no time in the gzip header; tarfile sorts a folder)
        try:
            with os.fdopen(write_end, "wb") as out, gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as zipped, \
                    tarfile.open(fileobj=zipped, mode="w|") as archive:
                for path in paths:
                    archive.add(path, arcname=path.name, filter=_regular_only)
        except BaseException as error:  # (the reader sees the stream end; the caller says why)
            failed.append(error)

    threading.Thread(target=pack, name="tlindex-push-pack", daemon=True).start()
    return os.fdopen(read_end, "rb"), failed


def _regular_only(member: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Folders and regular files go into the archive; links and devices do not (the server refuses them)."""
    return member if member.isdir() or member.isreg() else None


def push(url: str, paths: list[str], *, token: str | None, label: str | None = None, facts: dict | None = None,
         baseline: str | None = None, fail_on: str | None = None, allow_unjudged: bool = False, wait: bool = False,
         say: Callable[[str], None] = print, progress: Callable[[int], None] | None = None) -> int:
    """Post the logs, say where their upload's status (and with `wait`, their run) is; the exit code."""
    files = [Path(path) for path in paths]
    for path in files:
        if not path.exists():
            raise UsageError(f"{path}: no such file or folder")
    target = target_of(url, token)
    one_file = len(files) == 1 and files[0].is_file()
    name = files[0].name if one_file else (files[0].name if len(files) == 1 else "logs") + ".tar.gz"
    query = {key: value for key, value in (("name", name), ("label", label), ("baseline", baseline),
                                           ("fail_on", fail_on), ("allow_unjudged", "1" if allow_unjudged else None))
             if value}
    stream, failed = (open(files[0], "rb"), []) if one_file else _packed(files)
    headers = {**_headers(token), "Content-Type": "application/octet-stream",
               "X-Tlindex-Facts": json.dumps(facts or {})}
    if one_file:
        headers["Content-Length"] = str(files[0].stat().st_size)
    answer, status = _post(target, query, _Counted(stream, progress or (lambda sent: None)), headers, one_file)
    if failed:
        raise PushFailed(f"packing {', '.join(map(str, files))} failed: {failed[0]}")
    if status not in (200, 202):
        raise PushFailed(f"{target.upload_url}: {status}: {answer.get('error', answer)}")
    status_url = target.base + answer["status_url"]
    if answer.get("duplicate"):
        say(f"posted before: {status_url}" + (" (the same bytes: their run keeps its label)" if label else ""))
    else:
        say(f"uploaded: {status_url}")
    if not wait and not fail_on:
        return DONE
    gate = {key: value for key, value in query.items() if key in ("baseline", "fail_on", "allow_unjudged")}
    return _followed(status_url + ".json" + (f"?{urllib.parse.urlencode(gate)}" if gate else ""), token, say)


def _post(target: Target, query: dict, body, headers: dict, sized: bool) -> tuple[dict, int]:
    parts = urllib.parse.urlsplit(target.base)
    connection = (http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection)(
        parts.netloc, timeout=600, blocksize=SEND_BLOCK)
    path = urllib.parse.urlsplit(target.upload_url).path + "?" + urllib.parse.urlencode(query)
    try:
        connection.request("POST", path, body=body, headers=headers, encode_chunked=not sized)
        response = connection.getresponse()
        text = response.read()
    except OSError as error:
        raise PushFailed(f"{target.upload_url}: {error}") from None
    finally:
        connection.close()
    try:
        return json.loads(text), response.status
    except ValueError:
        return {"error": text[:300].decode("utf-8", "replace")}, response.status


def _followed(status_url: str, token: str | None, say: Callable[[str], None]) -> int:
    """The upload's status (its JSON, judged by the gate asked for) followed until it is done or failed; its run,
    findings and verdict said."""
    while True:
        try:
            status = _json(status_url, token)
        except (OSError, ValueError) as error:
            raise PushFailed(f"{status_url}: {error}") from None
        if status["state"] == "failed":
            raise PushFailed(f"the upload's ingest failed: {status.get('error')}")
        if status["state"] == "done":
            base = "/".join(status_url.split("/")[:3])
            say(f"run {status['run']}: {base}{status['run_url']}")
            say(status.get("findings") or "")
            gate = status.get("gate")
            for line in (gate or {}).get("lines", []):
                say(line)
            return GATE_FAILED if gate and gate.get("exit_code") else DONE
        time.sleep(POLL_S)


def progress_line(enabled: bool) -> Callable[[int], None]:
    """A progress line on stderr (a terminal's): MB sent."""
    last = [0.0]

    def show(sent: int) -> None:
        if enabled and time.monotonic() - last[0] > 0.2:
            last[0] = time.monotonic()
            sys.stderr.write(f"\rUploading {sent / 1e6:,.1f} MB")
            sys.stderr.flush()

    return show
