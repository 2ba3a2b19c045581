"""The report's worker processes: forked where that is safe (they start at once and share what the report has
read), spawned elsewhere; they die with the report (tlindex.worker_pool.WorkerPool)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from tlindex.stopping import can_fork

if TYPE_CHECKING:
    from concurrent.futures import Executor


def start_workers(jobs: int) -> Executor:
    """`jobs` worker processes, started now, in a pool entered (the caller exits it: `with`, an ExitStack). Forked
    where that is safe (Linux, and no other thread in this process that a fork would copy mid-flight): a fork starts
    in milliseconds with the renderer imported, where a fresh process (spawn, elsewhere) spends about 0.4 s importing
    it."""
    import multiprocessing

    from tlindex.worker_pool import WorkerPool

    pool = WorkerPool(jobs, multiprocessing.get_context("fork" if can_fork() else "spawn"))  # they die with this process
    pool.__enter__()  # (the caller exits it)
    try:
        for _ in range(jobs):
            pool.submit(_started)  # a forking pool starts every process at its first task; a spawning one, one per task
    except BaseException:
        pool.__exit__(*sys.exc_info())  # no worker, thread or switch interval left
        raise
    return pool


def _started() -> None:
    """A worker's first task: nothing (its process exists, and has imported this module)."""
