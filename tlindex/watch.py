"""`tlindex watch PATH...` and `tlindex run --watch`: a job's logs ingested as they grow, every few seconds.

Each pass is one `Database.ingest` of the paths: a log ingested before and grown since is continued where the last
pass stopped (tlindex.ingest.continuation), a new one (a rank that started late) ingested, an unchanged one skipped;
the runs it grew are derived again in the ingest's transaction, so the run page (which refreshes itself while its
logs are being ingested) and `tlindex findings` say what each rank is compiling at the last record. A stop (Ctrl-C,
SIGTERM: KeyboardInterrupt, tlindex.stopping) ends the pass it falls in as a stopped ingest ends, the database
consistent: what was merged stays, the rest is read by the next pass or ingest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tlindex.database import Database

EVERY_S = 1.0  # seconds between the starts of two passes (a pass that takes longer is followed at once)


class Watcher:
    """The passes over some logs: each ingests them and says what it grew (its summary line, what is compiling at the
    last record, the problems new since the pass before). `label`: every file into the run of that label
    (`unique_label`: a new run, made by the first pass that finds a log; the later passes grow that run)."""

    def __init__(self, db: Database, paths: list[str], say: Callable[[str], None], label: str | None = None,
                 unique_label: bool = False, label_source: str = "given"):
        self.db, self.paths, self.say = db, paths, say
        self.label, self.unique_label, self.label_source = label, unique_label, label_source
        self.runs: list[int] = []  # the runs grown, in the order first grown
        self.said: dict[int, set[str]] = {}  # what was said of each run, to say only what is new
        self.said_before: set[int] = set()  # the runs named (by label) once

    def once(self) -> None:
        """One pass: the logs ingested, what changed said."""
        from tlindex.answers.findings import problems
        from tlindex.answers.findings.compiling import compiling_now
        from tlindex.answers.runs import run_ranks

        summary = self.db.ingest(self.paths, self.label, unique_label=self.unique_label,
                                 label_source=self.label_source)
        for run in summary.runs:
            if run not in self.runs:
                self.runs.append(run)
            if self.unique_label:  # the run is made: the later passes grow it, by its label
                self.label, self.unique_label = self.db.run(run)["label"], False
            found = self.db.findings(run)
            lines = [*compiling_now(found, run_ranks(self.db.conn, run)),
                     *(f"{f.severity}: {f.text}" for f in problems(found))]
            new = [line for line in lines if line not in self.said.get(run, set())]
            self.said[run] = set(lines)
            if new or summary.files:
                named = "" if run in self.said_before else f" {self.db.run(run)['label']}"
                self.said_before.add(run)
                self.say(f"{time.strftime('%H:%M:%S')} run {run}{named}: {summary.line()}")
                for line in new:
                    self.say(f"  {line}")

    def follow(self, every: float = EVERY_S, passes: int | None = None) -> None:
        """A pass every `every` seconds, `passes` times or until stopped."""
        done = 0
        while passes is None or done < passes:
            started = time.monotonic()
            self.once()
            done += 1
            if passes is None or done < passes:
                time.sleep(max(0.0, every - (time.monotonic() - started)))
