"""Every way out of a command runs its cleanup: signals become an exception, workers die with their parent.

While a command runs (`stoppable`), SIGINT, SIGTERM and SIGHUP raise `Stopped` in the main process,
so every `finally` and `with` already written runs on them as on an error: workers are shut down,
temporaries removed (tlindex.owned). `Stopped` is a KeyboardInterrupt, so `except Exception` lets it
through, as every library already does for Ctrl-C.

Python runs a signal handler wherever the main thread is, and some places swallow what it raises:
a function SQLite calls (a user function, a progress handler) turns it into an `OperationalError`
that code may catch and carry on. So until the command is out, the stop is raised again: at the
next line of the frames that called SQLite (sqlite3 reports what it swallowed), and every RERAISE_S
wherever the main thread is not already unwinding from it. A signal never interrupts
`deferred_signals` (a folder swapped into place), and a third one ends the process at once.

Worker processes come from `tlindex.worker_pool.WorkerPool`, or are forked alone (`fork`: a report's ingest,
tlindex.ingest.beside): the kernel kills them when their parent dies (Linux, `PR_SET_PDEATHSIG`; elsewhere a thread
watches the parent), they leave signals to the parent, and the parent kills them on its way out, whatever it is
(a forked child's own workers then die with it).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
ALARM = getattr(signal, "SIGALRM", None)  # the re-raise's clock (POSIX; elsewhere a stop is raised once)
RERAISE_S = 0.2  # a stop swallowed (see above) is raised again this soon
FORCE_AFTER = 3  # signals: the third ends the process without cleaning up (the user insists)


class Stopped(KeyboardInterrupt):
    """The command was stopped by a signal: its cleanup runs as it unwinds."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


@dataclass
class Stop:
    """What `stoppable` saw: the first signal, and how many came."""
    signum: int | None = None
    count: int = 0
    settled: bool = False   # the command is out: nothing is raised any more
    raised: bool = False    # Stopped was raised (and is raised again until the command is out)
    previous: dict = field(default_factory=dict)
    previous_hook: Callable | None = None
    traced: bool = False    # a swallowed stop is being raised again by tracing (sys.settrace)

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""


_stop: Stop | None = None  # the running command's, while it is stoppable


@contextmanager
def stoppable() -> Iterator[Stop]:
    """Turn SIGINT, SIGTERM and SIGHUP into `Stopped` in this (main) thread while the `with` runs; call
    `settle()` once the command is out, before what must not be interrupted (the last cleanup, its message)."""
    global _stop
    stop = Stop()
    if threading.current_thread() is not threading.main_thread():  # signals reach only the main thread
        yield stop
        return
    stop.previous = {sig: signal.signal(sig, _on_signal) for sig in SIGNALS}
    if ALARM is not None:
        signal.signal(ALARM, _on_alarm)
    _stop = stop
    try:
        yield stop
    finally:
        settle()
        _stop = None
        for sig, handler in stop.previous.items():
            signal.signal(sig, handler)
        if ALARM is not None:
            signal.signal(ALARM, signal.SIG_DFL)
        if stop.raised:
            _stop_watching(stop)


def settle() -> None:
    """The command is out: no stop is raised again (signals after this are counted, the third still ends it)."""
    if _stop is not None:
        _stop.settled = True
        _alarm(0)


def _alarm(every: float) -> None:
    """SIGALRM every `every` seconds from now (0: none)."""
    if hasattr(signal, "setitimer"):
        signal.setitimer(signal.ITIMER_REAL, every, every)


def relay(signum: int, to: int) -> None:
    """While the command runs, take `signum` as what stopped it but deliver `to` instead: for a server that
    shuts down gracefully on `to` (its own handler), then raises it again for this module to see."""
    def relayed(received: int, frame) -> None:
        if _stop is not None and _stop.signum is None:
            _stop.signum = received
        signal.raise_signal(to)

    if _stop is not None:  # `stoppable` puts its own handler back when the command is out
        signal.signal(signum, relayed)


def _on_signal(signum: int, frame) -> None:
    stop = _stop
    if stop is None:
        return
    stop.count += 1
    if stop.count >= FORCE_AFTER:
        os._exit(128 + (stop.signum or signum))
    if stop.signum is None:
        stop.signum = signum
    if not stop.raised:
        stop.raised = True
        _watch_for_swallowing(stop)
        _alarm(RERAISE_S)
    _raise_unless_unwinding(stop)


def _on_alarm(signum: int, frame) -> None:
    if _stop is not None and _stop.raised:
        _raise_unless_unwinding(_stop)


def _raise_unless_unwinding(stop: Stop) -> None:
    """Raise the stop, unless the command is out or the main thread is running the cleanup of a stop already."""
    if stop.settled or _unwinding():
        return
    raise Stopped(stop.signum)


def _watch_for_swallowing(stop: Stop) -> None:
    """From the first stop on, a stop swallowed where Python reports what it cannot raise (a function SQLite
    called, whose exception sqlite3 then reports instead of clearing it; a __del__) is raised again by the
    frames below, at their next line: after SQLite returned, never in the next call of the function."""
    import sqlite3

    stop.previous_hook = sys.unraisablehook
    sys.unraisablehook = _on_unraisable
    sqlite3.enable_callback_tracebacks(True)


def _stop_watching(stop: Stop) -> None:
    # sqlite3's callback tracebacks stay on: there is no reading what they were, and Datasette turns them on
    sys.unraisablehook = stop.previous_hook
    if stop.traced:
        sys.settrace(None)


def _on_unraisable(unraisable) -> None:
    """What could not be raised, while stopping: a swallowed stop is raised again below (anything else is
    what the stop interrupted, not worth a traceback on the way out)."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and _stop is not None and not _stop.settled:
        frame = sys._getframe(1)  # the Python frame that called into C (SQLite), its callback's frame gone
        while frame is not None:
            frame.f_trace, frame.f_trace_lines = _raise_at_line, True
            frame = frame.f_back
        sys.settrace(_trace_no_new_frame)  # lines are traced only while a trace function is set
        _stop.traced = True


def _trace_no_new_frame(frame, event: str, arg) -> None:
    return None


def _raise_at_line(frame, event: str, arg):
    if event == "line" and _stop is not None and not _stop.settled and not _unwinding():
        raise Stopped(_stop.signum)  # (an error in a trace function also turns tracing off)
    return _raise_at_line


def _unwinding() -> bool:
    """Whether the exception being handled here (in an `except`, a `finally`, an `__exit__`) is, or follows, a stop."""
    error = sys.exc_info()[1]
    while error is not None:
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__context__
    return False


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT, SIGTERM, SIGHUP (and the re-raise) back while a step runs that must not stop half-way."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, [*SIGNALS, ALARM])
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


# --- workers -----------------------------------------------------------------------------------------

def worker_started(parent: int) -> None:
    """In a new worker process: die with `parent`, and leave Ctrl-C to it (it ends the workers itself).

    A forked worker inherits the parent's handlers (which raise `Stopped`): back to the defaults, then
    the signals held while it was started let through."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in [*SIGNALS[1:], *([ALARM] if ALARM is not None else [])]:
        signal.signal(sig, signal.SIG_DFL)
    _alarm(0)
    die_with_parent(parent)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [*SIGNALS, ALARM])


def die_with_parent(parent: int) -> None:
    """End this process when `parent` dies, kill -9 included, so that no worker outlives the command holding
    its memory and the caller's stdout and stderr open."""
    try:  # Linux: the kernel sends SIGKILL when the parent dies
        watched = prctl()(1, signal.SIGKILL) == 0  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        watched = False
    if os.getppid() != parent:  # it died while this worker was starting
        os._exit(1)
    if watched:
        return

    def watch() -> None:  # where prctl is missing: poll
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


@cache
def prctl() -> Callable[[int, int], int]:
    """The C library's prctl (ctypes, ~3 ms to import and find: a parent about to fork workers finds it once for
    them); OSError or AttributeError where there is none."""
    import ctypes

    return ctypes.CDLL(None, use_errno=True).prctl


def can_fork() -> bool:
    """Whether worker processes can be forked from this one safely (they start in milliseconds, with what this
    process imported): on Linux, with no other thread running that a fork would copy mid-flight."""
    return sys.platform == "linux" and threading.active_count() == 1


def children() -> set:
    """The processes this process started with multiprocessing that are alive (none if it never loaded it)."""
    multiprocessing = sys.modules.get("multiprocessing")
    return set(multiprocessing.active_children()) if multiprocessing is not None else set()


def end_children(spared: set) -> list[str]:
    """Kill and reap the worker processes this process started, but `spared`, that are still alive, and those it
    forked itself (`fork`); what stayed."""
    for pid in list(_forked):
        end_forked(pid)
    left = children() - spared
    for child in left:
        child.kill()
    for child in left:
        child.join(timeout=5)
    return [f"{child.name} (pid {child.pid})" for child in children() - spared]


_forked: set[int] = set()  # processes forked by `fork`, not yet reaped


def fork() -> int:
    """os.fork (where can_fork says it is safe: the caller asks first), the child registered (killed and reaped by
    end_children unless `end_forked` first) before a stop can fall; in the child: 0, with signals held until
    worker_started lets them through."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, [*SIGNALS, ALARM])
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
        raise
    if pid:
        _forked.add(pid)
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    else:
        _forked.clear()  # (the child's signals stay held: worker_started lets them through)
    return pid


def end_forked(pid: int, kill: bool = True) -> int | None:
    """A forked child killed (unless `kill` is False: waited for), reaped; its exit status (None: not ours)."""
    if pid not in _forked:
        return None
    if kill:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    _forked.discard(pid)
    return os.waitstatus_to_exitcode(status)
