"""Worker processes that never outlive the command (tlindex.stopping): a module of its own, so that a command that
starts no worker does not import multiprocessing and concurrent.futures (0.02 s of every start)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing.context import BaseContext

from tlindex.stopping import signals_held, worker_started

HANDOFF_S = 0.0005  # the switch interval while a pool runs (Python's is 0.005 s; see WorkerPool)


class WorkerPool(ProcessPoolExecutor):
    """Worker processes that never outlive the command: each dies with it (kill -9 included) and leaves
    signals to it; on an error or a stop they are killed at once (shutdown alone would wait for the tasks
    running), after their work when all went well. Started with signals held, so that no stop falls
    between a worker's start and its set-up (a spawned one would be left reading what never comes).

    The pool's threads hand each task to a worker and take its result back; while the main thread computes, each
    of them waits for the GIL up to Python's switch interval (5 ms) at every step, and a task reached its worker
    30-75 ms after it was submitted. While a pool is entered (`with`), the interval is HANDOFF_S: 4-7 ms."""

    def __init__(self, jobs: int, context: BaseContext, initializer: Callable | None = None, initargs: tuple = ()):
        super().__init__(jobs, mp_context=context, initializer=_start_worker,
                         initargs=(os.getpid(), initializer, initargs))
        self.switch_interval: float | None = None  # this process's, while the pool is entered

    def __enter__(self) -> WorkerPool:
        if self.switch_interval is None:
            self.switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self.switch_interval, HANDOFF_S))
        return self

    def submit(self, fn, /, *args, **kwargs) -> Future:
        with signals_held():  # a submit may start a worker
            return super().submit(fn, *args, **kwargs)

    def __exit__(self, kind, error, traceback) -> bool:
        try:
            if error is not None:
                self.kill()
            try:
                self.shutdown(wait=True, cancel_futures=True)
            except BaseException:  # stopped while it waited for the last tasks
                self.kill()
                raise
        finally:
            if self.switch_interval is not None:
                sys.setswitchinterval(self.switch_interval)
                self.switch_interval = None
        return False

    def kill(self) -> None:
        """Kill the workers now (Python 3.14 has it; before, the pool's own table of them)."""
        with signals_held():
            if hasattr(super(), "kill_workers"):
                super().kill_workers()
                return
            for process in list((getattr(self, "_processes", None) or {}).values()):
                try:
                    process.kill()
                except (OSError, ValueError):  # gone already, or closed
                    pass


def _start_worker(parent: int, initializer: Callable | None, initargs: tuple) -> None:
    worker_started(parent)
    if initializer is not None:
        initializer(*initargs)
