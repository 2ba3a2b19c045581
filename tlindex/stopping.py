"""Stopping a command as Python stops one: SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread, so
every `finally` and `with` already written runs (workers shut down, temporary folders removed); workers die with
their parent.

Python runs a signal's handler between two bytecodes of the main thread, and a statement runs in SQLite's C code,
where none runs: every connection tlindex opens has a progress handler (`STOP.progress`), Python code SQLite calls
every few thousand steps, where a stop interrupts the statement. An exception raised inside a function SQLite calls is
swallowed (the statement fails, the caller may carry on), so a signal handled there is only noted; the callback ends
its statement, and the signal is raised again a moment later (`_thread.interrupt_main`, from a timer's thread), to be
handled once SQLite has returned. A second signal while the first one's cleanup runs is counted, not raised; the third
ends the process at once.
"""

from __future__ import annotations

import _thread
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache
from types import FrameType

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
FORCE_AFTER = 3  # signals: the third ends the process without cleaning up (the user insists)
PROGRESS_STEPS = 10_000  # SQLite's steps between two calls of the progress handler
RAISE_AGAIN_S = 0.005  # a stop noted inside a callback is raised again this soon


class Stop:
    """This process's stop, one per process as signals are: the first signal, how many came, whether one waits to be
    raised outside a callback."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self.pending = False  # a signal noted inside a callback, to be raised again once SQLite returns
        self.later: threading.Timer | None = None  # what raises it again
        self.again = False  # the signal being handled is one raised again (not a new one)
        self.taken = False  # the command has its stop and is cleaning up: nothing more is raised
        self.held = 0  # the main thread is in a step that must not stop half-way (signals_held), this deep
        self.held_back: int | None = None  # a signal that came meanwhile (taken by another thread): raised after it
        self.active = False   # a command is stoppable (its handlers installed)

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or 0)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""

    def handle(self, signum: int, frame: FrameType | None) -> None:
        """The handler of SIGNALS while a command runs."""
        again, self.again = self.again, False
        if not (self.pending or again):  # (a signal raised again below is the same stop)
            self.count += 1
        if self.count >= FORCE_AFTER:
            os._exit(128 + (self.signum or signum))
        if self.signum is None:
            self.signum = signum
        if self.taken:  # raised again once the command had caught it, or a second signal during its cleanup
            return
        if self.held:  # another thread took the signal the main thread holds back: raised when the step is done
            self.held_back = signum
            return
        if _in_callback(frame):
            # Raised inside, SQLite would swallow it: noted, the callback ends its statement, and the signal is
            # raised again from another thread a moment later, to be handled once SQLite has returned.
            self.pending = True
            self._raise_later()
            return
        if again and sys.exc_info()[1] is not None and not _unwinding():
            # an error is being handled (the statement the stop ended?): raised again once it is handled, or taken by
            # the command it reaches (Commands.invoke), not raised inside its handler
            self._raise_later()
            return
        self.pending = False
        if not _unwinding():
            raise KeyboardInterrupt

    def _raise_later(self) -> None:
        """The signal raised again in the main thread RAISE_AGAIN_S from now, from a thread of its own (raised from the
        main thread, it would be handled at once, inside the callback again)."""
        if self.later is None or not self.later.is_alive():
            self.later = threading.Timer(RAISE_AGAIN_S, self._again)
            self.later.daemon = True
            self.later.start()

    def _again(self) -> None:
        self.again = True
        _thread.interrupt_main(self.signum or signal.SIGINT)

    def take(self) -> None:
        """The command has caught its stop (however it unwound) and cleans up: a stop noted in a callback is not
        raised again, and the statements of the cleanup run."""
        self.taken, self.pending = True, False
        if self.later is not None:
            self.later.cancel()
            self.later.join()  # (one already raising: handled, and ignored, before the handlers are put back)

    def progress(self) -> bool:
        """SQLite's progress handler on tlindex's connections: whether to interrupt the statement (a stop came)."""
        return self.pending


STOP = Stop()  # the registry of this process's stop


class StatementStopped(Exception):
    """Raised by a function SQLite calls when a stop came: its statement fails, and the stop is raised after it."""


def callback(function: Callable) -> Callable:
    """A function SQLite calls (a SQL function registered on a tlindex connection; its authorizers and progress
    handlers are wrapped by tlindex.store.limits.StoppableConnection), made safe for a stop: a signal that comes while
    it runs ends its statement and is raised once SQLite has returned."""

    @functools.wraps(function)
    def called(*args):
        if STOP.pending:
            raise StatementStopped("stopped")
        result = function(*args)
        if STOP.pending:
            raise StatementStopped("stopped")
        return result

    return called


_CALLBACKS = frozenset({callback(lambda: None).__code__, Stop.progress.__code__})


def _in_callback(frame: FrameType | None) -> bool:
    """Whether the main thread is inside a function SQLite called (its frames up to the command's)."""
    while frame is not None:
        if frame.f_code in _CALLBACKS:
            return True
        frame = frame.f_back
    return False


def _unwinding() -> bool:
    """Whether the exception being handled here (in an `except`, a `finally`, an `__exit__`) is, or follows, a stop."""
    error = sys.exc_info()[1]
    while error is not None:
        if isinstance(error, KeyboardInterrupt):
            return True
        error = error.__context__
    return False


@contextmanager
def stoppable() -> Iterator[Stop]:
    """SIGINT, SIGTERM and SIGHUP raise KeyboardInterrupt in the main thread while the `with` runs (Stop says which
    came); the previous handlers are back after it."""
    if threading.current_thread() is not threading.main_thread():  # signals reach only the main thread
        yield STOP
        return
    STOP.signum, STOP.count, STOP.pending, STOP.taken, STOP.again = None, 0, False, False, False
    STOP.held, STOP.held_back = 0, None
    previous = {sig: signal.signal(sig, STOP.handle) for sig in SIGNALS}
    STOP.active = True
    try:
        yield STOP
    finally:
        STOP.take()  # (the command is out: nothing is raised again)
        STOP.active = False
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def relay(signum: int, to: int) -> None:
    """While the command runs, take `signum` as what stopped it but deliver `to` instead: for a server that
    shuts down gracefully on `to` (its own handler), then raises it again for this module to see."""
    def relayed(received: int, frame) -> None:
        if STOP.signum is None:
            STOP.signum = received
        signal.raise_signal(to)

    if STOP.active:  # `stoppable` puts its own handler back when the command is out
        signal.signal(signum, relayed)


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back while a step runs that must not stop half-way (a folder swapped in)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    main = threading.current_thread() is threading.main_thread()
    held = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)  # (in this thread, and in the processes it starts)
    STOP.held += main  # a signal is process-wide: another thread may take it, and the handler runs here anyway
    try:
        yield
    finally:
        STOP.held -= main
        signal.pthread_sigmask(signal.SIG_SETMASK, held)  # one this thread held is handled here
        if main and not STOP.held and STOP.held_back is not None:  # one another thread took
            signum, STOP.held_back = STOP.held_back, None
            STOP.again = True  # (the same stop: not counted twice)
            signal.raise_signal(signum)


# --- workers -----------------------------------------------------------------------------------------

def worker_started(parent: int) -> None:
    """In a new worker process: die with `parent`, and leave Ctrl-C to it (it ends the workers itself). A forked
    worker inherits the parent's handlers: back to the defaults, then the signals held while it started let through."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in SIGNALS[1:]:
        signal.signal(sig, signal.SIG_DFL)
    STOP.signum, STOP.pending, STOP.active, STOP.held, STOP.held_back = None, False, False, 0, None
    die_with_parent(parent)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)


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
    """The C library's prctl; OSError or AttributeError where there is none."""
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
    """Kill and reap the worker processes this process started with multiprocessing, but `spared`, that are still
    alive (a pool that was not exited); what stayed."""
    left = children() - spared
    for child in left:
        child.kill()
    for child in left:
        child.join(timeout=5)
    return [f"{child.name} (pid {child.pid})" for child in children() - spared]
