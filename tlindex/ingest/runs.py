"""Group sources into runs, and keep the run-level columns up to date.

A run is one torch job. Sources in one directory belong to the same run when
they share a pid (one process writing several files, e.g. draft_export), their
time spans overlap (the ranks of one distributed job), or they are the rank
files of the directory and no rank appears twice; a script run twice into the
same directory gives two runs. `--run LABEL` puts every new
source in the run of that label instead. A file ingested again (--replace, or rewritten in place) gives its new
sources back to the run its old ones were in: what the user said of the run (its label, kept mark, run facts) stays.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Callable
from pathlib import Path

from tlindex.errors import RunBusy, TlindexError, UsageError
from tlindex.store.db import immediate
from tlindex.store.redact import redact_text, storable


class _Groups:
    """Union-find over source ids."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}

    def find(self, item: int) -> int:
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def _run_for_label(conn: sqlite3.Connection, label: str) -> int:
    row = conn.execute("SELECT id FROM runs WHERE label = ?", (label,)).fetchone()
    if row:
        return row[0]
    return conn.execute("INSERT INTO runs (label, label_source) VALUES (?, 'given')", (label,)).lastrowid


def _unique_label(conn: sqlite3.Connection, base: str) -> str:
    label, n = base, 1
    while conn.execute("SELECT 1 FROM runs WHERE label = ?", (label,)).fetchone():
        n += 1
        label = f"{base} ({n})"
    return label


class Attacher:
    """Each merged file's new sources attached to a run in the merge's own transaction (merge's `attach` hook), so
    that no source is ever visible without a run: to the run of `label` (with `unique`, a run of its own made at the
    first merge, its label made unique in that transaction: two `tlindex run` of one command are two runs), else to
    the run the processes of the file it replaces were in (a re-ingest keeps the run: its id, label, run facts and
    kept mark), else to a provisional run of this ingest for the file's directory (runs.ingest = `ingest`, this
    ingest's staging folder), regrouped by `assign_runs`. Every run the file's processes are in is marked as written
    by this ingest (runs.last_ingest), in the same transaction: `tlindex rm` refuses it while the ingest runs."""

    def __init__(self, label: str | None, ingest: str, unique: bool = False, source: str = "given"):
        self.label, self.ingest, self.unique, self.source = label, ingest, unique, source  # source: runs.label_source
        self.touched: set[int] = set()  # the runs of `label` attached to
        self.replaced: dict[int, list[tuple]] = {}  # file id: (pid, run) of the processes of the file it replaced

    def __call__(self, conn: sqlite3.Connection, file_id: int, replaced: list[tuple] | None = None) -> None:
        """`replaced`: (pid, run) of the processes of the file this one replaces, read by the merge before it deleted
        them (a later chunk of the file is given them again from here)."""
        if replaced:
            self.replaced[file_id] = replaced
        if self.label is not None and self.unique:
            run_id = next(iter(self.touched), None) or conn.execute(
                "INSERT INTO main.runs (label, label_source) VALUES (?, ?)",
                (_unique_label(conn, self.label), self.source)).lastrowid
            self.touched.add(run_id)
            self._attach(conn, file_id, run_id)
        elif self.label is not None:
            run_id = _run_for_label(conn, self.label)
            self.touched.add(run_id)
            self._attach(conn, file_id, run_id)
        else:
            _give_back(conn, file_id, self.replaced.get(file_id, ()))
            if conn.execute("SELECT 1 FROM main.sources WHERE file_id = ? AND run_id IS NULL LIMIT 1",
                            (file_id,)).fetchone():
                self._attach(conn, file_id, self._provisional(conn, file_id))
        conn.execute("UPDATE main.compiles SET run_id = (SELECT run_id FROM main.sources s WHERE s.id = "
                     "compiles.source_id) WHERE run_id IS NULL AND source_id IN "
                     "(SELECT id FROM main.sources WHERE file_id = ?)", (file_id,))
        for (run_id,) in conn.execute("SELECT DISTINCT run_id FROM main.sources WHERE file_id = ? AND run_id IS NOT "
                                      "NULL", (file_id,)).fetchall():
            conn.execute("UPDATE main.runs SET last_ingest = ? WHERE id = ?", (self.ingest, run_id))
            # Its counts only: its processes are named once every chunk of every file is merged (assign_runs), as a
            # chunk's ranks are not yet the whole file's (a file whose rank claim changes past its first chunk).
            _refresh_counts(conn, run_id)

    def _provisional(self, conn: sqlite3.Connection, file_id: int) -> int:
        """This ingest's provisional run for the file's directory, made at its first file."""
        (directory,) = conn.execute("SELECT directory FROM main.files WHERE id = ?", (file_id,)).fetchone()
        row = conn.execute("SELECT id FROM main.runs WHERE ingest = ? AND directory = ?",
                           (self.ingest, directory)).fetchone()
        return row[0] if row else conn.execute(
            "INSERT INTO main.runs (label, label_source, directory, ingest) VALUES (?, 'folder', ?, ?)",
            (_unique_label(conn, f"{folder_label(directory)} (ingest not finished)"), directory,
             self.ingest)).lastrowid

    @staticmethod
    def _attach(conn: sqlite3.Connection, file_id: int, run_id: int) -> None:
        conn.execute("UPDATE main.sources SET run_id = ? WHERE file_id = ? AND run_id IS NULL", (run_id, file_id))


def _give_back(conn: sqlite3.Connection, file_id: int, replaced: list[tuple] | tuple) -> None:
    """A re-ingested file's new processes given the runs its old ones were in (`replaced`: their (pid, run), in
    order): each to the run of the first old process of its pid, and the others, when the old file was one run's,
    to that run."""
    runs = {run for _, run in replaced}
    conn.executemany("UPDATE main.sources SET run_id = ? WHERE file_id = ? AND pid = ? AND run_id IS NULL",
                     [(run, file_id, pid) for pid, run in replaced if pid is not None])
    if len(runs) == 1:
        conn.execute("UPDATE main.sources SET run_id = ? WHERE file_id = ? AND run_id IS NULL", (*runs, file_id))


def _detach(conn: sqlite3.Connection, runs: str, params: tuple) -> None:
    """The provisional runs selected by `runs` (SQL) undone: their sources and compiles back to no run (for
    assign_runs to group in the same transaction), the runs gone."""
    conn.execute(f"UPDATE compiles SET run_id = NULL WHERE run_id IN ({runs})", params)
    conn.execute(f"UPDATE sources SET run_id = NULL WHERE run_id IN ({runs})", params)
    conn.execute(f"DELETE FROM runs WHERE id IN ({runs})", params)


Derive = Callable[[sqlite3.Connection, list[int]], object]  # what readers read of runs, derived by the writer


def regroup_stopped(conn: sqlite3.Connection, live: Callable[[], set[str]], derive: Derive | None = None,
                    ingest: str | None = None) -> list[int]:
    """The provisional runs of ingests that are gone (`live()`: the staging folders of the ingests still running,
    asked while this holds the write lock, so no ingest merges in between) grouped as an ingest groups its sources,
    and any source an older tlindex left without a run; the runs made (derived by `derive`, written by `ingest`, the
    ingest that groups them). One transaction."""
    with immediate(conn):
        running = live()
        stopped = tuple(row[0] for row in conn.execute("SELECT DISTINCT ingest FROM runs WHERE ingest IS NOT NULL")
                        if row[0] not in running)
        if not stopped and not conn.execute("SELECT 1 FROM sources WHERE run_id IS NULL LIMIT 1").fetchone():
            return []
        made = _assign(conn, None, regroup=stopped, ingest=ingest)
        if derive is not None:
            derive(conn, made)
        return made


def assign_runs(conn: sqlite3.Connection, label: str | None = None, changed_files: tuple[int, ...] = (),
                touched_runs: tuple[int, ...] = (), regroup: tuple[str, ...] = (), all_mine: bool = False,
                replaced: tuple[int, ...] = (), derive: Derive | None = None, ingest: str | None = None) -> list[int]:
    """Give every source without a run its run, the provisional runs of the ingests `regroup` names first undone
    (their sources grouped as if never attached); return the runs touched. One transaction, in which `derive` derives
    what readers read of the runs touched and of the runs `replaced` files were taken from, once they are whole.

    With `label`, sources without a run are not taken (an ingest with a label attached its own as it merged them:
    a source without a run is another's) unless `all_mine` (a database only this caller writes: Spark's driver);
    `touched_runs` and the runs of `changed_files` (continued logs: their sources keep their run) are refreshed. The
    runs touched are marked as written last by `ingest` (runs.last_ingest: the runs that arrived in one ingest).
    """
    with immediate(conn):
        touched = _assign(conn, label, changed_files, touched_runs, regroup, all_mine, ingest)
        for run_id in set(replaced) - set(touched):
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                _refresh_run(conn, run_id)  # it lost processes: named and counted again
        if derive is not None:
            derive(conn, sorted(set(touched) | set(replaced)))
        return touched


def _assign(conn: sqlite3.Connection, label: str | None = None, changed_files: tuple[int, ...] = (),
            touched_runs: tuple[int, ...] = (), regroup: tuple[str, ...] = (), all_mine: bool = False,
            ingest: str | None = None) -> list[int]:
    """assign_runs' work, in the caller's transaction."""
    if regroup:
        _detach(conn, f"SELECT id FROM runs WHERE ingest IN ({', '.join('?' * len(regroup))})", regroup)
    # Runs whose sources were all replaced (--replace) give their labels back first.
    conn.execute("DELETE FROM runs WHERE id NOT IN (SELECT run_id FROM sources WHERE run_id IS NOT NULL)")
    pending = conn.execute(
        "SELECT s.id, f.directory FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id IS NULL"
    ).fetchall() if label is None or all_mine else []
    touched: set[int] = {run_id for (run_id,) in conn.execute(
        f"SELECT DISTINCT run_id FROM sources WHERE run_id IS NOT NULL AND file_id IN "
        f"({', '.join('?' * len(changed_files))})", changed_files)} if changed_files else set()
    touched |= {run for run in touched_runs
                if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run,)).fetchone()}
    if pending and label is not None:
        run_id = _run_for_label(conn, label)
        conn.executemany("UPDATE sources SET run_id = ? WHERE id = ?", [(run_id, s) for s, _ in pending])
        touched.add(run_id)
    elif pending:
        directories = sorted({directory for _, directory in pending})
        for directory in directories:
            touched |= _group_directory(conn, directory)
    # Only the sources given a run here changed run: their compiles, and the frames of the runs touched (a file
    # name one file of a process defined for another), are what is updated (not every row of a big database).
    conn.executemany("UPDATE compiles SET run_id = (SELECT run_id FROM sources WHERE sources.id = compiles.source_id) "
                     "WHERE source_id = ?", [(source,) for source, _ in pending])
    conn.execute("UPDATE compiles SET run_id = (SELECT run_id FROM sources WHERE sources.id = compiles.source_id) "
                 "WHERE run_id IS NULL")
    _resolve_cross_file_strings(conn, sorted(touched))
    for run_id in touched:
        _refresh_run(conn, run_id)
        if ingest is not None:
            conn.execute("UPDATE runs SET last_ingest = ? WHERE id = ?", (ingest, run_id))
    conn.execute("DELETE FROM runs WHERE id NOT IN (SELECT run_id FROM sources WHERE run_id IS NOT NULL)")
    return sorted(touched)


def _group_directory(conn: sqlite3.Connection, directory: str) -> set[int]:
    rows = conn.execute(
        "SELECT s.id, s.run_id, s.pid, s.first_time, s.last_time FROM sources s "
        "JOIN files f ON f.id = s.file_id WHERE f.directory = ? ORDER BY s.first_time, s.id",
        (directory,)).fetchall()
    groups = _Groups()
    # Rank files (dedicated_log_torch_trace_rank_N_*.log) of one directory, each rank once,
    # are one job however their times fall (tlparse --all-ranks-html reads them so too).
    rank_files = conn.execute(
        "SELECT s.id, s.file_rank FROM sources s JOIN files f ON f.id = s.file_id "
        "WHERE f.directory = ? AND s.file_rank IS NOT NULL", (directory,)).fetchall()
    if len(rank_files) > 1 and len({rank for _, rank in rank_files}) == len(rank_files):
        for source_id, _ in rank_files[1:]:
            groups.union(source_id, rank_files[0][0])
    by_pid: dict[int, int] = {}
    # Sweep in start order: a source overlapping the running end of a group joins it.
    group_end: str | None = None
    previous: int | None = None
    for source_id, _, pid, first, last in rows:
        groups.find(source_id)
        if pid is not None:
            if pid in by_pid:
                groups.union(source_id, by_pid[pid])
            by_pid[pid] = source_id
        if previous is not None and first is not None and group_end is not None and first <= group_end:
            groups.union(source_id, previous)
            group_end = max(group_end, last or first)
        else:
            group_end = last or first
        previous = source_id
    members: dict[int, list[tuple]] = {}
    for row in rows:
        members.setdefault(groups.find(row[0]), []).append(row)
    touched = set()
    for group in members.values():
        if all(run_id is not None for _, run_id, *_ in group):
            continue
        existing = sorted({run_id for _, run_id, *_ in group if run_id is not None})
        if existing:
            run_id = existing[0]
        else:
            start = min((first for *_, first, _ in group if first), default="")
            name = folder_label(directory)
            base = f"{name}@{start[:19]}" if start else name
            if not base.strip() or re.fullmatch(r"[-+]?\d+", base.strip()):  # would print as nothing, or as an id
                base = f"run {base.strip()}".strip()
            run_id = conn.execute("INSERT INTO runs (label, label_source) VALUES (?, 'folder')",
                                  (_unique_label(conn, base),)).lastrowid
        conn.executemany("UPDATE sources SET run_id = ? WHERE id = ? AND run_id IS NULL",
                         [(run_id, source_id) for source_id, *_ in group])
        touched.add(run_id)
    return touched


def _resolve_cross_file_strings(conn: sqlite3.Connection, runs: list[int]) -> None:
    """Resolve frame file names defined in another file of the same process (draft_export), in the runs given."""
    marks = ",".join("?" * len(runs))
    conn.execute(f"""
        UPDATE frames SET filename = (
            SELECT st.value FROM envelopes e
            JOIN sources s ON s.id = e.source_id
            JOIN sources peer ON peer.run_id = s.run_id AND peer.pid = s.pid
            JOIN strings st ON st.source_id = peer.id AND st.string_id = frames.filename_id
            WHERE e.id = frames.envelope_id LIMIT 1)
        WHERE filename IS NULL AND filename_id IS NOT NULL AND envelope_id IN (
            SELECT e.id FROM sources s JOIN envelopes e ON e.source_id = s.id WHERE s.run_id IN ({marks}))""", runs)


def resolve_processes(conn: sqlite3.Connection, run_id: int) -> None:
    """Name each ranked process of a run so that no two processes are one participant.

    Processes that logged the same rank are: distinct ranks when their file names give each
    its own rank (tlparse reads ranks from file names) and no other process of the run has
    that rank; else restarts when each started after the one before it ended; else concurrent
    processes of one rank, named by pid. A process that is the same pid as another (one
    process writing two files) shares its name.
    """
    rows = conn.execute("""
        SELECT id, coalesce(logged_rank, rank), file_rank, pid, first_time, last_time FROM sources
        WHERE run_id = ? ORDER BY first_time, id""", (run_id,)).fetchall()
    by_rank: dict[int, list[tuple]] = {}
    for row in rows:
        if row[1] is not None:
            by_rank.setdefault(row[1], []).append(row)
    taken = set(by_rank)
    updates = []
    for rank, group in sorted(by_rank.items()):
        pids = {row[3] for row in group}
        file_ranks = [row[2] for row in group]
        if len(pids) == 1:  # one process (several files of it): one participant
            updates += [(rank, rank, 0, str(rank), None, row[0]) for row in group]
        elif (None not in file_ranks and len(set(file_ranks)) == len(group)
              and not (set(file_ranks) - {rank}) & taken):
            for row in group:
                decided = None if row[2] == rank else f"logged rank {rank}; file name says rank {row[2]}"
                updates.append((row[2], rank, 0, str(row[2]), decided, row[0]))
            taken |= set(file_ranks)
        elif all(later[4] is not None and (earlier[5] or earlier[4] or "") < later[4]
                 for earlier, later in zip(group, group[1:])):
            for n, row in enumerate(group):
                decided = (f"rank {rank} ran {len(group)} times one after another (restarts); this is run "
                           f"{n + 1}") if n else None
                updates.append((rank, rank, n, f"{rank} (restart {n})" if n else str(rank), decided, row[0]))
        else:
            for row in group:
                updates.append((rank, rank, None, f"{rank} (pid {row[3]})",
                                f"{len(pids)} processes logged rank {rank} at the same time", row[0]))
    conn.executemany("UPDATE sources SET rank = ?, logged_rank = ?, restart = ?, process = ?, rank_decision = ? "
                     "WHERE id = ?", updates)
    conn.execute("UPDATE compiles SET rank = (SELECT rank FROM sources WHERE sources.id = compiles.source_id) "
                 "WHERE run_id = ? AND rank IS NOT (SELECT rank FROM sources WHERE sources.id = compiles.source_id)",
                 (run_id,))


def rank_decisions(conn: sqlite3.Connection, run_id: int) -> list[str]:
    """What resolve_processes decided for a run, one sentence per rank it had to decide for."""
    rows = conn.execute("""
        SELECT logged_rank, group_concat(process, ', '), count(*), max(restart), min(rank_decision), count(DISTINCT rank),
               group_concat(name, ', ')
        FROM (SELECT s.*, f.name FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id = ?
              ORDER BY s.rank, s.restart, s.pid)
        GROUP BY logged_rank HAVING count(DISTINCT pid) > 1 ORDER BY logged_rank""", (run_id,)).fetchall()
    said = []
    for logged, processes, count, restarts, decision, ranks, files in rows:
        claimed = f"rank {logged} is claimed by {count} processes ({files})"
        if ranks > 1:
            said.append(f"{claimed}; their file names give them ranks {processes} (read as tlparse reads them)")
        elif restarts:
            said.append(f"{claimed}, one after another: restarts, compared as processes {processes}")
        else:
            said.append(f"{claimed} at the same time: compared as processes {processes}")
    return said


def ranks_text(world_size: int | None, processes: int, decisions: list[str]) -> str:
    """How many ranks a run has, in words, with what its processes claimed when they share ranks:
    "4 ranks", "1 process", "4 ranks, 5 processes: rank 1 is claimed by 2 processes (a.log, b.log), ..."."""
    if not world_size:
        return f"{processes} process{'es' * (processes != 1)}"
    text = f"{world_size} rank{'s' * (world_size != 1)}"
    if processes != world_size:
        text += f", {processes} processes" + (f": {'; '.join(decisions)}" if decisions else "")
    return text


def _refresh_run(conn: sqlite3.Connection, run_id: int) -> None:
    resolve_processes(conn, run_id)
    _refresh_counts(conn, run_id)


def _refresh_counts(conn: sqlite3.Connection, run_id: int) -> None:
    """A run's directory, torch, times, world size and process count, from its sources as they are now."""
    conn.execute("""
        UPDATE runs SET
            directory = (SELECT min(f.directory) FROM sources s JOIN files f ON f.id = s.file_id WHERE s.run_id = runs.id),
            torch_version = (SELECT torch_version FROM sources WHERE run_id = runs.id AND torch_version IS NOT NULL
                             ORDER BY first_time LIMIT 1),
            torch_commit = (SELECT torch_commit FROM sources WHERE run_id = runs.id AND torch_commit IS NOT NULL
                            ORDER BY first_time LIMIT 1),
            start_time = (SELECT min(first_time) FROM sources WHERE run_id = runs.id),
            end_time = (SELECT max(last_time) FROM sources WHERE run_id = runs.id),
            world_size = (SELECT nullif(count(DISTINCT rank), 0) FROM sources WHERE run_id = runs.id),
            source_count = (SELECT count(*) FROM sources WHERE run_id = runs.id)
        WHERE id = ?""", (run_id,))


# Characters that print as nothing: format characters (bidi controls such as U+202E, zero-width spaces and joiners,
# the byte-order mark, ...) and the fillers that fonts draw blank.
INVISIBLE_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def normalize_label(text: str) -> str:
    """A label as it is kept and compared: NFC, without characters that print as nothing or turn the text around
    (a label "5\u200b" would print as the run id 5; "\u202e" would print the rest backwards)."""
    return "".join(c for c in unicodedata.normalize("NFC", text)
                   if unicodedata.category(c) != "Cf" and c not in INVISIBLE_FILLERS)


def folder_label(directory: str) -> str:
    """What a run's label says of the folder its logs are in: the folder's name, normalized, its secrets redacted (a
    folder may be named after a command: `logs/HF_TOKEN=hf_...`)."""
    return redact_text(storable(normalize_label(Path(directory).name)))


def check_label(label: str) -> str:
    """A label a run may carry, normalized (normalize_label), else UsageError: not empty, and not a whole number
    once normalized (it would print as, and read as, a run id); returned as it is stored, its secrets redacted
    (tlindex.store.redact: `--token=***`)."""
    given, label = label, normalize_label(label)
    if not label.strip():
        raise UsageError(f"a run's label cannot be empty ({given!r} prints as nothing)" if given.strip()
                         else "a run's label cannot be empty")
    if re.fullmatch(r"[-+]?\d+", label.strip()):
        raise UsageError(f"a run's label cannot be a whole number ({given!r} prints as {label.strip()!r}, which names "
                         f"a run id); give it a word, e.g. 'run {label.strip()}'")
    return redact_text(storable(label))


def remove_runs(conn: sqlite3.Connection, run_ids: list[int], live: Callable[[], set[str]] = set) -> dict[str, int]:
    """Delete runs and every row that belongs only to them, in one transaction: their processes' rows,
    their files (when no other run has a process in them), payloads no other record uses, and their
    entries in the full-text indexes (external content: told to forget each row before it goes).
    Returns how many runs, files and processes went. Raises RunBusy, deleting nothing, when an ingest still running
    (`live()`: their staging folders, asked while this holds the write lock) is writing one of them."""
    from tlindex.ingest.merge import UNUSED_PAYLOADS, foreign_keys
    from tlindex.ingest.text_index import FTS_COLUMNS, unindex
    from tlindex.store.db import immediate

    ids = sorted(set(run_ids))
    if not ids:
        return {"runs": 0, "files": 0, "sources": 0}
    marks = ",".join("?" * len(ids))
    sources = f"SELECT id FROM main.sources WHERE run_id IN ({marks})"
    envelopes = f"SELECT id FROM main.envelopes WHERE source_id IN ({sources})"
    files = (f"SELECT id FROM main.files WHERE id IN (SELECT file_id FROM main.sources WHERE run_id IN ({marks})) "
             f"AND NOT EXISTS (SELECT 1 FROM main.sources o WHERE o.file_id = files.id AND "
             f"(o.run_id IS NULL OR o.run_id NOT IN ({marks})))")
    rows_of = {  # the rows of each searchable table that go, given the runs twice over (sources, files)
        "compiles": (f"source_id IN ({sources})", ids),
        "ingest_errors": (f"source_id IN ({sources}) OR file_id IN ({files})", ids + ids + ids),
    }
    with immediate(conn):
        _refuse_busy(conn, ids, live())
        counts = {"runs": conn.execute(f"SELECT count(*) FROM main.runs WHERE id IN ({marks})", ids).fetchone()[0],
                  "files": conn.execute(f"SELECT count(*) FROM ({files})", ids + ids).fetchone()[0],
                  "sources": conn.execute(f"SELECT count(*) FROM ({sources})", ids).fetchone()[0]}
        for table in FTS_COLUMNS:
            unindex(conn, table, *rows_of.get(table, (f"envelope_id IN ({envelopes})", ids)))
        for table, links in foreign_keys(conn).items():
            if table in ("files", "sources", "envelopes", "payload_data"):
                continue
            if table == "ingest_errors":
                conn.execute(f"DELETE FROM main.ingest_errors WHERE source_id IN ({sources}) OR file_id IN ({files})",
                             ids + ids + ids)
            elif "envelope_id" in links:
                conn.execute(f"DELETE FROM main.{table} WHERE envelope_id IN ({envelopes})", ids)
            elif "source_id" in links:
                conn.execute(f"DELETE FROM main.{table} WHERE source_id IN ({sources})", ids)
        conn.execute(f"DELETE FROM main.envelopes WHERE source_id IN ({sources})", ids)
        doomed_files = [row[0] for row in conn.execute(files, ids + ids)]
        conn.execute(f"DELETE FROM main.sources WHERE run_id IN ({marks})", ids)
        conn.executemany("DELETE FROM main.files WHERE id = ?", [(file_id,) for file_id in doomed_files])
        conn.execute(f"DELETE FROM main.runs WHERE id IN ({marks})", ids)  # (a trigger: what was derived of them)
        unindex(conn, "payloads", f"id IN ({UNUSED_PAYLOADS})")
        conn.execute(f"DELETE FROM main.payload_data WHERE rowid IN ({UNUSED_PAYLOADS})")
    return counts


def _refuse_busy(conn: sqlite3.Connection, ids: list[int], running: set[str]) -> None:
    """RunBusy for the first of these runs that an ingest still running (`running`: its staging folder) made or is
    writing: its provisional runs, and every run a merge of it attached a file to (runs.ingest, runs.last_ingest)."""
    if not running:
        return
    for run_id, label, ingest, last in conn.execute(
            f"SELECT id, label, ingest, last_ingest FROM main.runs WHERE id IN ({','.join('?' * len(ids))}) "
            f"ORDER BY id", ids):
        writer = ingest if ingest in running else last if last in running else None
        if writer is not None:
            raise RunBusy(f"run {run_id} {label!r} is being written by an ingest still running (its staging folder "
                          f"{writer}): nothing removed; remove it once that ingest has ended")


RUN_FACTS = ("command", "cwd", "host", "user", "started", "duration_s", "exit_code", "signal")


def record_facts(conn: sqlite3.Connection, run_id: int, facts: dict) -> None:
    """Store what `tlindex run` knew of the command that wrote a run (the RUN_FACTS columns), in one transaction."""
    with immediate(conn):
        conn.execute(f"UPDATE runs SET {', '.join(f'{name} = ?' for name in RUN_FACTS)} WHERE id = ?",
                     [facts.get(name) for name in RUN_FACTS] + [run_id])


def rename_run(conn: sqlite3.Connection, run_id: int, label: str | None,
               kept: bool | None = None) -> tuple[str, bool]:
    """Give a run a new label (labels are unique: another run's label is refused; see check_label) and, unless
    `kept` is None, mark it kept or not (runs.kept), in one transaction; its label as stored, and whether it is
    kept."""
    label = check_label(label) if label is not None else None
    with immediate(conn):
        if label is not None:
            taken = conn.execute("SELECT id FROM runs WHERE label = ? AND id != ?", (label, run_id)).fetchone()
            if taken:
                raise TlindexError(f"run {taken[0]} is already labelled {label!r}")
            conn.execute("UPDATE runs SET label = ?, label_source = 'given' WHERE id = ?", (label, run_id))
        if kept is not None:
            conn.execute("UPDATE runs SET kept = ? WHERE id = ?", (int(kept), run_id))
        stored, marked = conn.execute("SELECT label, kept FROM runs WHERE id = ?", (run_id,)).fetchone()
        return stored, bool(marked)
