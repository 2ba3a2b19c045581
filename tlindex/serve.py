"""`tlindex serve`: Datasette on a database, on a port that is free, its tlindex runs page's URL said first.

Without --port the server takes 8001, or the next free port when 8001 is taken (and says so); a --port
given is kept or refused, never changed behind the user's back (a bookmark, a tunnel or a script
names it). The port is tried by binding it as the server will, just before Datasette starts.

While it serves, a marker beside the database (`.traces.db.serve-8002.json`: tlindex's, the database,
the URL and the server's pid) says where: `tlindex run` finds the server of its database there, on
whichever port it took. The marker is removed when the command ends, whatever way it ends; a server killed with -9
leaves it, so a reader believes it only while that pid runs and the URL
answers.

When it is stopped (SIGTERM, SIGINT, SIGHUP relayed), the statements its requests run end first: Uvicorn stops
gracefully, waiting for the requests in flight, while a statement of SQLite runs on out of reach of any signal handler
(issue 46: ~113 s). A request's SQL runs in a worker process, which is killed (tlindex.served_sql); a page's read
checks `STOPPING` at its progress handler's every call.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
import webbrowser
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tlindex import owned
from tlindex.errors import TlindexError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8001  # Datasette's
NEXT_PORTS = 20  # ports after the default tried before any free port the system gives
OPEN_WAIT_S = 30  # --open: how long the browser waits for the server to answer
MARKER_KIND = "serve"
# Options of `datasette serve` after which there is no server on a port to print or find: a Unix socket,
# one request answered and out, the settings listed.
NO_PORT_OPTIONS = ("--uds", "--get", "--help-settings")


class ServeError(TlindexError):
    """A server that cannot start where it was asked to: the message names the host or port and why."""


@dataclass(frozen=True)
class Served:
    """Where a database is served: what the server binds, and the URLs a browser opens."""

    host: str
    port: int
    name: str  # the database's name in Datasette (its file's stem)
    scheme: str = "http"

    @property
    def base(self) -> str:
        """Datasette's home page, on an address a browser on this machine reaches (0.0.0.0 is 127.0.0.1)."""
        return f"{self.scheme}://{link_host(self.host)}:{self.port}"

    @property
    def runs_url(self) -> str:
        """The tlindex runs page of the database."""
        from tlindex.pages import database_path
        from tlindex.pages import path as page_path

        return self.base + database_path(self.name) + page_path("runs")


def link_host(host: str) -> str:
    """The host to put in a link: a wildcard address is this machine's loopback; IPv6 literals bracketed."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def passes_through(args: list[str]) -> bool:
    """Whether `datasette serve` is asked for something else than a server on a port (--uds, --get, ...)."""
    return any(arg == option or arg.startswith(option + "=") for arg in args for option in NO_PORT_OPTIONS)


def scheme_of(args: list[str]) -> str:
    """https when `datasette serve` is given a certificate, else http."""
    return "https" if any(arg == "--ssl-certfile" or arg.startswith("--ssl-certfile=") for arg in args) else "http"


# --- the port ------------------------------------------------------------------------------------

def port_free(host: str, port: int) -> bool:
    """Whether the server could bind `port` on `host` now: every address the host names bound as asyncio binds
    a server's (SO_REUSEADDR on POSIX, so a closed connection's TIME_WAIT does not count; IPv6 alone on IPv6).
    A port in use is False; a host that names no address, or a port this user may not bind, is a ServeError."""
    try:
        addresses = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        raise ServeError(f"--host {host}: {error.strerror}") from None
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            if os.name == "posix":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    return False
                raise ServeError(f"cannot serve on {host}:{port}: {error.strerror or error}") from None
    return True


def any_free_port(host: str) -> int:
    """A port the system says is free on `host` (free on every address the host names)."""
    for _ in range(10):
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.bind((host or "", 0))
            port = sock.getsockname()[1]
        if port_free(host, port):
            return port
    raise ServeError(f"no free port on {host}")


def pick_port(host: str, wanted: int | None) -> tuple[int, str | None]:
    """The port to serve on, and what to say about it (None: nothing). No --port (None): 8001, else the next
    free one, else any; --port 0: any free port; any other --port: that one, or a ServeError when it is taken."""
    if wanted == 0:
        return any_free_port(host), None
    port = DEFAULT_PORT if wanted is None else wanted
    if port_free(host, port):
        return port, None
    if wanted is not None:
        raise ServeError(f"port {port} is in use on {host}: give another --port, or leave --port out to serve "
                         f"on the first free port from {DEFAULT_PORT}")
    for other in range(port + 1, min(port + 1 + NEXT_PORTS, 65536)):
        if port_free(host, other):
            return other, f"port {port} is in use; serving on {other}"
    other = any_free_port(host)
    return other, f"port {port} is in use; serving on {other}"


# --- the marker beside the database ----------------------------------------------------------------

def marker_path(db_path: Path, port: int) -> Path:
    """The marker of a server of this database on this port (beside the database, hidden)."""
    real = db_path.resolve()
    return real.parent / f".{real.name}.serve-{int(port)}.json"


def write_marker(db_path: Path, served: Served) -> Path | None:
    """Say beside the database that this process serves it at `served` (a temporary: gone when the command
    ends); None when the folder is not writable (then `tlindex run` finds the server on 8001 only)."""
    clear_stale_markers(db_path)
    path = marker_path(db_path, served.port)
    text = json.dumps({"tlindex": MARKER_KIND, "database": str(db_path.resolve()), "name": served.name,
                       "url": served.base, "pid": os.getpid()}) + "\n"
    try:
        owned.atomic_file(path, [text.encode("utf-8")], b'{"tlindex": "%s"' % MARKER_KIND.encode(), "serve marker")
        return path
    except (OSError, owned.NotOwned):  # (a file of that name that is not a marker: left alone, no marker)
        return None


@contextmanager
def marked(db_path: Path, served: Served) -> Iterator[Path | None]:
    """The marker of this server beside the database while the `with` runs (write_marker), removed after it."""
    marker = write_marker(db_path, served)
    try:
        yield marker
    finally:
        if marker is not None:
            marker.unlink(missing_ok=True)


def read_marker(path: Path) -> dict | None:
    """A serve marker's content: a small regular file of tlindex's, else None."""
    try:
        info = path.lstat()
        if not path.is_file() or path.is_symlink() or info.st_size > owned.MARKER_MAX_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("tlindex") != MARKER_KIND:
        return None
    if not isinstance(data.get("pid"), int) or not isinstance(data.get("name"), str):
        return None
    if not isinstance(data.get("url"), str) or not data["url"].startswith(("http://", "https://")):
        return None
    return data


def markers(db_path: Path) -> Iterator[tuple[Path, dict]]:
    """The serve markers beside the database that name it, newest first."""
    real = db_path.resolve()
    found = []
    for path in real.parent.glob(f".{real.name}.serve-*.json"):
        data = read_marker(path)
        if data is not None and data.get("database") == str(real):
            try:
                found.append((path.stat().st_mtime, path, data))
            except OSError:
                continue
    for _, path, data in sorted(found, key=lambda item: item[0], reverse=True):
        yield path, data


def alive(pid: int) -> bool:
    """Whether a process of this id runs (one of another user's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def clear_stale_markers(db_path: Path) -> None:
    """Remove the markers that servers of this database killed with -9 left (their pid runs no more)."""
    for path, data in markers(db_path):
        if not alive(data["pid"]):
            try:
                path.unlink(missing_ok=True)
            except OSError:  # a folder this user may not write: passed over by readers all the same
                pass


def running_servers(db_path: Path) -> list[tuple[str, str]]:
    """(Datasette's home URL, the database's name there) of each `tlindex serve` of this database whose marker's
    process still runs, newest first (whether it answers is the caller's to ask)."""
    return [(data["url"], data["name"]) for _, data in markers(db_path) if alive(data["pid"])]


# --- the browser ---------------------------------------------------------------------------------

def answers(url: str, timeout: float = 1.0) -> int | None:
    """The HTTP status `url` answers with (any: the server is up), None when nothing answers."""
    context = None
    if url.startswith("https:"):  # our own server, its certificate maybe self-signed: whether it answers, not who
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (OSError, ValueError):
        return None


def open_when_answering(url: str, say: Callable[[str], None], wait_s: float = OPEN_WAIT_S) -> threading.Thread:
    """Open `url` in a browser once the server answers it, from a thread (the server runs in this one); no
    browser, or none answering in time, is said, never an error."""
    def run() -> None:
        deadline = time.monotonic() + wait_s
        while answers(url) is None:
            if time.monotonic() > deadline:
                say(f"--open: nothing answered at {url} within {wait_s:.0f} s; no browser opened")
                return
            time.sleep(0.2)
        try:
            opened = webbrowser.open(url)
        except Exception:  # webbrowser.Error, a browser that fails to start: the server goes on
            opened = False
        if not opened:
            say(f"--open: no browser could be opened here; open {url}")

    thread = threading.Thread(target=run, name="tlindex-open", daemon=True)
    thread.start()
    return thread


# --- a stop interrupts the statements of the requests in flight ----------------------------------------------------

STOPPING = threading.Event()  # set as `tlindex serve` stops: the statements its requests run end (interrupt_on_stop)


@dataclass
class Team:
    """What `tlindex serve --uploads` adds to a served database: its queue of uploads (tlindex.uploads.Uploader),
    read by the plugin's upload routes."""

    uploader: object  # tlindex.uploads.Uploader


TEAMS: dict[str, Team] = {}  # the registry of the databases (by resolved path) this process takes uploads for


def team_of(db_path: str | Path | None) -> Team | None:
    """The uploads of a served database, when this server takes them."""
    return TEAMS.get(str(Path(db_path).resolve())) if db_path else None


SIZE_RE = r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$"


def parse_size(text: str | None) -> int | None:
    """`2G`, `500M`, `1.5GB`, `1048576` as bytes (UsageError otherwise); None as None."""
    import re

    from tlindex.errors import UsageError

    if text is None:
        return None
    match = re.match(SIZE_RE, text, re.I)
    if not match:
        raise UsageError(f"--max-upload {text!r}: a size such as 2G, 500M or 1048576")
    number, unit = float(match.group(1)), match.group(2).lower()
    return int(number * 1024 ** ("kmgt".index(unit) + 1 if unit else 0))


@contextmanager
def taking_uploads(db_path: Path, max_upload: int | None, max_queued: int | None, keep_runs: int | None,
                   keep_days: float | None) -> Iterator[Team]:
    """While the `with` runs, the server takes uploads for the database (its queue's thread running, what a killed
    server left recovered); its queue stopped after."""
    from tlindex.uploads import Limits, Retention, Uploader

    limits = Limits(**{name: value for name, value in (("max_upload", max_upload), ("queue", max_queued)) if value})
    uploader = Uploader(db_path, limits, Retention(keep_runs, keep_days))
    uploader.start()
    team = TEAMS[str(db_path.resolve())] = Team(uploader)
    try:
        yield team
    finally:
        uploader.stop()
        TEAMS.pop(str(db_path.resolve()), None)


@contextmanager
def private(args: list[str]) -> Iterator[list[str]]:
    """Datasette's options that close every page to anyone without an actor (a token, or a user signed in through an
    auth plugin): its instance-level `allow`, in a file of its own for as long as the server runs."""
    from tlindex import owned
    from tlindex.errors import UsageError

    if any(arg in ("-m", "--metadata", "-c", "--config") or arg.startswith(("--metadata=", "--config="))
           for arg in args):
        raise UsageError("--private writes Datasette's `allow` itself: put `allow: {id: \"*\"}` in your own "
                         "metadata or config instead")
    import datasette

    option = "-c" if datasette.__version__.startswith("1.") else "-m"  # 1.0 reads `allow` from its config
    with owned.TemporaryFolder("tlindex-serve-") as folder:
        settings = folder.path / "private.json"
        settings.write_text(json.dumps({"allow": {"id": "*"}}))
        yield [option, str(settings)]


def interrupt_on_stop() -> None:
    """Make the server's stop (Uvicorn's signal handler, `Server.handle_exit`) end every statement first."""
    from uvicorn.server import Server

    handle_exit = Server.handle_exit
    if getattr(handle_exit, "interrupts", False):
        return

    def interrupting(self, sig, frame) -> None:
        from tlindex.served_sql import stop_all

        STOPPING.set()  # the pages' reads end at their next step (the plugin's progress handler checks it)
        stop_all()  # the statements requests run in worker processes (tlindex.served_sql)
        handle_exit(self, sig, frame)

    interrupting.interrupts = True  # type: ignore[attr-defined]
    Server.handle_exit = interrupting  # type: ignore[method-assign]
