"""Waiting on a condition, not a clock: a test that must act while a process is busy waits until it is."""

from __future__ import annotations

import os
import time


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used so far (user and system, from /proc)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def until_busy(pid: int, more_than: float, timeout: float = 60) -> None:
    """Return once the process has used `more_than` seconds of CPU beyond what it had used at the call: it is at
    work (a statement running, not a process starting or waiting)."""
    start, deadline = cpu_seconds(pid), time.monotonic() + timeout
    while cpu_seconds(pid) - start < more_than:
        assert time.monotonic() < deadline, f"process {pid} did not get to work in {timeout} s"
        time.sleep(0.05)
