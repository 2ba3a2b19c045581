"""SQL a request sends to a tlindex database, run where the operating system can stop it: a worker process.

Datasette runs a request's SQL (a `?sql=` query, a canned query, a table page and its JSON twin) on a connection of
its own, bounded by a progress handler that SQLite calls between two steps of a statement. One step can run for a
minute (`json_patch` over 100,000 keys), and what a statement returns can hold gigabytes (ten rows of 60 MB): no
handler or list of functions bounds them. Here each such statement runs in a worker process instead, like a web
server's workers: started with a memory limit (RLIMIT_AS), killed when it outlives the time limit by GRACE_S, its
rows sent back only up to a byte cap; a worker that is killed or dies is replaced, and the request gets an error
that says which limit it met. The workers end with the server, whichever way it ends.

The plugin gives each tlindex database Datasette serves a `BoundedExecute` in place of its `execute` (its own
databases only); the tlindex pages read through `execute_fn`, in the server, within their page time limit.
"""

from __future__ import annotations

import os
import pickle
import queue
import resource
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import dataclass

GRACE_S = 1.0  # how long past its time limit a statement runs before its worker is killed
MEMORY_BYTES = 512 << 20  # a worker's address space (RLIMIT_AS): SQLite's heap and the rows it sends
RESPONSE_BYTES = 16 << 20  # the rows one statement may send back (their values' bytes)
WORKERS = 3  # as many as Datasette's SQL threads (num_sql_threads)
_HEADER = struct.Struct("!Q")


@dataclass(frozen=True)
class Limits:
    """What one worker, and one statement in it, may take."""

    memory_bytes: int = MEMORY_BYTES
    response_bytes: int = RESPONSE_BYTES
    grace_s: float = GRACE_S


class Refused(Exception):
    """A statement stopped by a limit of its worker (killed on time-out, out of memory, too many bytes back)."""


def _send(stream, value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream) -> object:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class Row(tuple):
    """A row as sqlite3.Row reads: by index, by column name, `keys()`, `dict(row)`."""

    def __new__(cls, values: tuple, keys: tuple[str, ...]):
        row = super().__new__(cls, values)
        row._keys = keys
        return row

    def keys(self) -> list[str]:
        return list(self._keys)

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self._keys.index(key))
        return tuple.__getitem__(self, key)


class Worker:
    """One worker process (`python -m tlindex.served_sql`), its requests and answers pickled over its pipes."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.proc = subprocess.Popen([sys.executable, "-m", "tlindex.served_sql", str(os.getpid()),
                                      str(limits.memory_bytes), str(limits.response_bytes)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)  # (a Ctrl-C to the server's terminal is the server's)

    def run(self, request: dict, timeout_s: float) -> dict:
        """The worker's answer to `request` (Refused when it is killed past `timeout_s`, or dies)."""
        timer = threading.Timer(timeout_s, self.kill)
        timer.start()
        try:
            _send(self.proc.stdin, request)
            answer = _receive(self.proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            killed = timer.finished.is_set()
            self.kill()
            raise Refused(f"stopped after {timeout_s:g} s, the longest a statement may run here" if killed else
                          f"its worker process ended ({self.proc.poll()}): it needed more than "
                          f"{self.limits.memory_bytes >> 20} MiB, the most a statement may hold here") from None
        finally:
            timer.cancel()
        return answer

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            self.proc.kill()
        except OSError:
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


class Workers:
    """The server's worker processes, each taken by one statement at a time; started when first needed."""

    SERVED: weakref.WeakSet[Workers] = weakref.WeakSet()  # the registry of every pool of this process (stop_all)

    def __init__(self, size: int = WORKERS, limits: Limits | None = None):
        self.limits = limits or Limits()
        self.idle: queue.LifoQueue[Worker | None] = queue.LifoQueue()
        for _ in range(size):
            self.idle.put(None)  # a slot: its worker is started by the first statement that takes it
        self.started: set[Worker] = set()
        self.lock = threading.Lock()
        self.stopped = False
        Workers.SERVED.add(self)

    def run(self, request: dict, timeout_s: float) -> dict:
        if self.stopped:
            raise Refused("the server is stopping")
        worker = self.idle.get()
        try:
            if worker is None or not worker.alive():
                worker = Worker(self.limits)
                with self.lock:
                    self.started.add(worker)
            return worker.run(request, timeout_s)
        finally:
            if worker is not None and not worker.alive():
                with self.lock:
                    self.started.discard(worker)
                worker = None
            self.idle.put(worker)

    def stop(self) -> None:
        """Every worker killed (the statements they run answer at once)."""
        self.stopped = True
        with self.lock:
            workers = list(self.started)
            self.started.clear()
        for worker in workers:
            worker.kill()


def stop_all() -> None:
    """Every pool's workers killed (a server that stops: the statements they run answer at once)."""
    for workers in list(Workers.SERVED):
        workers.stop()


# --- in the worker process ---------------------------------------------------------------------------

def _connection(path: str, cache: dict):
    """The worker's read-only connection to a database, prepared as the plugin prepares Datasette's."""
    conn = cache.get(path)
    if conn is None:
        from tlindex.answers.queries import guard_functions
        from tlindex.store.db import connect_read_only

        conn = cache[path] = guard_functions(connect_read_only(path, check_same_thread=False))
    return conn


def _answer(request: dict, cache: dict, response_bytes: int) -> dict:
    """One statement run: rows (up to the byte cap), whether they were truncated, the description; or its error."""
    import sqlite3

    conn = _connection(request["path"], cache)
    deadline = time.perf_counter() + request["time_limit_ms"] / 1000
    conn.set_progress_handler(lambda: time.perf_counter() >= deadline, 1 if request["time_limit_ms"] <= 20 else 1000)
    try:
        cursor = conn.execute(request["sql"], request["params"])
        limit, rows, size = request["max_rows"], [], 0
        for row in cursor:
            size += sum(len(value) if isinstance(value, (str, bytes)) else 8 for value in row)
            if size > response_bytes:
                return {"error": "too_big", "message": (
                    f"the rows would take more than {response_bytes >> 20} MiB, the most a response may hold here: "
                    f"ask for fewer rows (_size) or columns (_col), or shorter values")}
            rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
        return {"rows": rows, "description": cursor.description}
    except sqlite3.DatabaseError as error:
        return {"error": "interrupted" if error.args == ("interrupted",) else "sql", "message": str(error),
                "type": type(error).__name__}
    except MemoryError:
        return {"error": "memory", "message": "out of memory"}
    finally:
        conn.set_progress_handler(None, 0)


def _end_with(server: int) -> None:
    """End this worker when the server is gone, even in the middle of a statement (SQLite lets go of the GIL as it
    runs). Not PR_SET_PDEATHSIG: it follows the thread that started the worker, and the server's threads come and go."""
    while os.getppid() == server:
        time.sleep(0.5)
    os._exit(1)


def serve_forever(server: int, memory_bytes: int, response_bytes: int) -> None:
    """The worker's loop: a statement in, its answer out, until the server closes the pipe (or dies)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server stops its workers itself
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    threading.Thread(target=_end_with, args=(server,), daemon=True).start()
    cache: dict = {}
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            request = _receive(stdin)
        except EOFError:
            return
        _send(stdout, _answer(request, cache, response_bytes))


if __name__ == "__main__":
    serve_forever(*map(int, sys.argv[1:4]))
