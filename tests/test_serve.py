"""`tlindex serve`: the runs page's URL said first and answering there, a taken port passed over (or, given with
--port, refused), --open opening that URL, and `tlindex run` finding the server on whichever port it took.

Servers are real: `python -m tlindex serve` in a subprocess on a free port, always stopped.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import connect, fixture_logs
from waiting import until_busy

from tlindex.cli import cli
from tlindex.pages import database_path
from tlindex.pages import path as page_path
from tlindex.run import served_url
from tlindex.serve import DEFAULT_PORT, marker_path, open_when_answering, port_free

WAIT_S = 30  # a deadline for a server to start (never asserted on: a slow machine only waits longer)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


class Server:
    """A `tlindex serve` subprocess, its output read line by line (stderr with stdout)."""

    def __init__(self, db: Path, args: list[str], env: dict | None = None):
        self.process = subprocess.Popen([sys.executable, "-m", "tlindex", "serve", str(db), *args],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        env={**os.environ, **(env or {})})
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.said: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def url(self) -> str:
        """The tlindex URL it printed, once its server answers there."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.5)
            except queue.Empty:
                continue
            assert line is not None, f"tlindex serve ended: {self.said}"
            self.said.append(line)
            if line.startswith("tlindex: "):
                url = line.split()[1]
                while status(url) is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                return url
        raise AssertionError(f"no URL printed: {self.said}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def serving(db: Path, *args: str, env: dict | None = None) -> Iterator[Server]:
    server = Server(db, list(args), env)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def db(traces_db, tmp_path) -> Path:
    """The fixtures database in a folder of the test's own (its server's marker goes beside it)."""
    path = tmp_path / "traces.db"
    shutil.copy(traces_db, path)
    return path


def test_the_url_printed_is_the_runs_page_and_answers_on_the_port_printed(db):
    port = free_port()
    with serving(db, "-p", str(port)) as server:
        url = server.url()
        assert url == f"http://127.0.0.1:{port}{database_path('traces')}{page_path('runs')}" == \
            f"http://127.0.0.1:{port}/traces/-/tlindex"
        assert status(url) == 200
        with urllib.request.urlopen(url, timeout=5) as response:
            assert "tlindex" in response.read().decode()
        marker = json.loads(marker_path(db, port).read_text())
        assert marker["tlindex"] == "serve" and marker["url"] == f"http://127.0.0.1:{port}"
        assert marker["pid"] == server.process.pid and marker["database"] == str(db.resolve())
        hits = json.loads(CliRunner().invoke(cli, ["search", "aten", "--db", str(db), "--json"]).output)
        assert hits and all(hit["url"].startswith(url + "/") for hit in hits)  # links to the server that answers
        with urllib.request.urlopen(hits[0]["url"], timeout=5) as response:
            assert response.status == 200
    assert not marker_path(db, port).exists()  # gone with the server


def test_a_taken_port_is_passed_over_and_said(db):
    """Without --port: 8001, taken here (by this test, or by whatever holds it), so the next free port."""
    holder = socket.socket()
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", DEFAULT_PORT))
            holder.listen()
        except OSError:
            pass  # taken already
        assert not port_free("127.0.0.1", DEFAULT_PORT)
        with serving(db) as server:
            url = server.url()
            port = int(url.split(":")[2].split("/")[0])
            assert port != DEFAULT_PORT and f"port {DEFAULT_PORT} is in use; serving on {port}" in server.said
            assert status(url) == 200
    finally:
        holder.close()


def test_a_port_given_and_taken_is_refused_in_one_line(db):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = CliRunner().invoke(cli, ["serve", str(db), "--port", str(port)])
    assert result.exit_code == 1 and f"port {port} is in use" in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not list(db.parent.glob(".*.serve-*.json"))


def test_open_opens_the_runs_page_once_it_answers(db, tmp_path):
    """--open is tlindex's (Datasette's own opens its home page): the browser (BROWSER, as webbrowser reads it)
    is given the runs page."""
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser"
    browser.write_text(f"#!{sys.executable}\nimport sys\nopen({str(opened)!r}, 'a').write(sys.argv[1] + '\\n')\n")
    browser.chmod(0o755)
    with serving(db, "-p", str(free_port()), "--open", env={"BROWSER": str(browser)}) as server:
        url = server.url()
        deadline = time.monotonic() + WAIT_S
        while not opened.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    assert opened.read_text().split() == [url]


def test_open_without_a_browser_says_so_and_the_server_goes_on(monkeypatch):
    import http.server

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    asked = []
    monkeypatch.setattr("webbrowser.open", lambda url: asked.append(url) or False)
    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    said: list[str] = []
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/traces/-/tlindex"
        open_when_answering(url, said.append).join(WAIT_S)
    finally:
        server.shutdown()
    assert asked == [url] and said == [f"--open: no browser could be opened here; open {url}"]


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def write_marker(db: Path, port: int, pid: int) -> Path:
    path = marker_path(db, port)
    path.write_text(json.dumps({"tlindex": "serve", "database": str(db.resolve()), "name": db.stem,
                                "url": f"http://127.0.0.1:{port}", "pid": pid}) + "\n")
    return path


def test_run_finds_the_server_on_the_port_it_took_and_passes_over_stale_markers(db):
    (run,) = connect(db).execute("SELECT min(id) FROM runs").fetchone()
    nobody = free_port()  # where the default port is probed: not 8001, which this machine may use
    killed = write_marker(db, free_port(), dead_pid())  # a server killed with -9 left it
    assert served_url(db, run, nobody) is None
    port = free_port()
    with serving(db, "-p", str(port)) as server:
        server.url()
        assert not killed.exists()  # a new server of the database clears what dead ones left
        alive_but_silent = write_marker(db, free_port(), os.getpid())  # a pid that runs, but serves nothing
        assert served_url(db, run, nobody) == f"http://127.0.0.1:{port}/traces/-/tlindex/run/{run}"
    assert alive_but_silent.exists() and served_url(db, run, nobody) is None


def test_tlindex_run_prints_the_run_page_of_the_server_that_answers(db, tmp_path):
    """`tlindex run` with a server on a port not 8001; then, with none, the command that serves the database."""
    log = fixture_logs()[0]
    copy = [sys.executable, "-c", f"import os, shutil; shutil.copy({str(log)!r}, os.environ['TORCH_TRACE'])"]

    def run() -> str:
        done = subprocess.run([sys.executable, "-m", "tlindex", "run", "--db", str(db), "--", *copy],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stderr

    port = free_port()
    with serving(db, "-p", str(port)) as server:
        server.url()
        said = run()
    (run_id,) = connect(db).execute("SELECT max(id) FROM runs").fetchone()
    assert f"open http://127.0.0.1:{port}/traces/-/tlindex/run/{run_id}" in said
    said = run()
    assert f"see it: tlindex serve {db}" in said and "/traces/-/tlindex/run/" in said


def worker_of(pid: int, timeout: float = 60) -> int:
    """The first child process of `pid` (a worker of tlindex.served_sql), once there is one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1]) == pid:
                    return int(entry)
            except (OSError, IndexError, ValueError):
                continue
        time.sleep(0.05)
    raise AssertionError(f"process {pid} started no worker in {timeout} s")


def test_sigterm_stops_the_server_while_a_statement_runs(db):
    """A request whose statement would run for minutes (the time limit raised to 10 minutes): SIGTERM interrupts it
    and the server exits (issue 46: it ignored SIGTERM for ~113 s, Uvicorn waiting for the request's thread). The
    bound here is loose (a shared machine); it stops within a second of the signal where it runs alone."""
    port = free_port()
    with serving(db, "--port", str(port), "--setting", "sql_time_limit_ms", "600000") as server:
        url = server.url()
        base = url.split("/-/tlindex")[0]
        sql = "with recursive c(x) as (select 1 union all select x + 1 from c) select count(*) from c"
        answered: queue.Queue = queue.Queue()
        query = urllib.parse.urlencode({"sql": sql})

        def ask() -> None:
            try:
                with urllib.request.urlopen(f"{base}.json?{query}", timeout=120) as response:
                    answered.put(response.status)
            except urllib.error.HTTPError as error:
                answered.put(error.code)
            except OSError as error:
                answered.put(repr(error))

        threading.Thread(target=ask, daemon=True).start()
        until_busy(worker_of(server.process.pid), 0.5)  # the statement is running, in a worker of the server
        assert answered.empty()
        started = time.monotonic()
        server.process.terminate()
        server.process.wait(timeout=30)
        stopped_in = time.monotonic() - started
    assert stopped_in < 10, stopped_in
