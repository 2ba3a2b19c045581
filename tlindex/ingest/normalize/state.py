"""What the normalizer remembers per process and per compilation."""

from __future__ import annotations

import orjson

FILE_RANK_CONFLICT = "file name says rank {file_rank}, its envelopes say rank {rank}"
RANK_CONFLICT = "process {pid} logs rank {rank} after rank {first}"
CompileKey = tuple  # (compiled_autograd_id, frame_id, frame_compile_id)
ANONYMOUS: CompileKey = (None, None, None)  # records without a compile id: tlparse's [-/-]


def integer(value: object) -> int | None:
    """An envelope's integer field, or None when it is missing or not an integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_PLAIN = (int, type(None))


def context_ids(data: dict) -> tuple[int | None, int | None, int | None, int | None, list[str]]:
    """(compiled_autograd_id, frame_id, frame_compile_id, attempt, fields that are not integers)."""
    get = data.get
    ca, frame, frame_compile, attempt = (get("compiled_autograd_id"), get("frame_id"), get("frame_compile_id"),
                                         get("attempt"))
    if (type(ca) in _PLAIN and type(frame) in _PLAIN and type(frame_compile) in _PLAIN
            and type(attempt) in _PLAIN):  # as torch writes them (bool is not int here)
        return ca, frame, frame_compile, attempt, []
    values = [ca, frame, frame_compile, attempt]
    odd = [name for name, value in zip(("compiled_autograd_id", "frame_id", "frame_compile_id", "attempt"), values)
           if value is not None and integer(value) is None]
    ca, frame, frame_compile, attempt = (integer(value) for value in values)
    return ca, frame, frame_compile, attempt, odd


def compile_id_text(ca: int | None, frame: int | None, frame_compile: int | None) -> str:
    """The compile id as torch prints it (torch/_guards.py CompileId.__str__): 0/1, !0/1/2, !0."""
    frame_part = f"{frame if frame is not None else '-'}/{frame_compile if frame_compile is not None else '-'}"
    if ca is None:
        return frame_part
    if frame is None and frame_compile is None:
        return f"!{ca}"
    return f"!{ca}/{frame_part}"


class Compile:
    """One compilation of one process, accumulated while its records stream by."""

    __slots__ = ("id", "source_id", "rank", "generation", "key", "compile_id", "max_attempt",
                 "started_attempts", "co_name", "co_filename", "co_firstlineno", "fail_type",
                 "fail_reason", "fail_user_frame_filename", "fail_user_frame_lineno",
                 "recompile_reason", "restart_reasons", "graph_breaks", "start_time", "end_time",
                 "duration_s", "dynamo_start", "envelope_count", "envelope_bytes", "payload_bytes",
                 "metrics_seen", "any_fail", "any_empty", "any_restart", "finished", "loaded", "returned")

    def __init__(self, id: int, source_id: int, rank: int | None, generation: int, key: CompileKey):
        self.id = id
        self.source_id = source_id
        self.rank = rank
        self.generation = generation
        self.key = key
        self.compile_id = compile_id_text(*key)
        self.max_attempt = 0
        self.started_attempts: set[int] = set()
        self.co_name = self.co_filename = self.co_firstlineno = None
        self.fail_type = self.fail_reason = None
        self.fail_user_frame_filename = self.fail_user_frame_lineno = None
        self.recompile_reason = None
        self.restart_reasons: list | None = None
        self.graph_breaks = 0
        self.start_time = self.end_time = None
        self.duration_s = None
        self.dynamo_start = None
        self.envelope_count = self.envelope_bytes = self.payload_bytes = 0
        self.metrics_seen = self.any_fail = self.any_empty = self.any_restart = False
        self.finished = False  # a forward compilation_metrics record closed it
        self.loaded = False    # it loaded its guards from torch's caches (its precompile_load_guards span ended)
        self.returned = False  # its whole-frame span (entire_frame_compile) ended: Dynamo returned from compiling it

    RESTORED = ("co_name", "co_filename", "co_firstlineno", "fail_type", "fail_reason", "fail_user_frame_filename",
                "fail_user_frame_lineno", "recompile_reason", "graph_breaks", "start_time", "end_time", "duration_s",
                "dynamo_start", "envelope_count", "envelope_bytes", "payload_bytes")

    @classmethod
    def restore(cls, row: dict, metrics: list[tuple[str, dict]], ended: tuple[bool, bool] = (False, False)) \
            -> "Compile":
        """A compile as an earlier ingest wrote it (its `compiles` row and metrics; `ended`: whether it loaded its
        guards from torch's caches, and its whole-frame span ended), to continue it.

        Ids become negative: they name rows of the main database (tlindex.ingest.merge keeps them).
        """
        compile = cls(-row["id"], -row["source_id"], row["rank"], row["generation"],
                      (row["compiled_autograd_id"], row["frame_id"], row["frame_compile_id"]))
        for name in cls.RESTORED:
            setattr(compile, name, row[name])
        if compile.dynamo_start is not None:
            compile.dynamo_start = -compile.dynamo_start
        compile.max_attempt = row["attempts"] - 1
        compile.started_attempts = set(range(row["attempts"])) if row["dynamo_start"] else set()
        for kind, fields in metrics:  # status flags and restart reasons, as the records set them
            compile.add_metrics(kind, fields)
        compile.loaded, compile.returned = ended
        return compile

    @property
    def anonymous(self) -> bool:
        """Whether this is the compile of records without a compile id (tlparse's [-/-])."""
        return self.key == ANONYMOUS

    def starts_again(self, attempt: int) -> bool:
        """Whether a dynamo_start for this id and attempt means the ids restarted (a reset)."""
        return self.finished or attempt in self.started_attempts

    def add_metrics(self, kind: str, metrics: dict) -> None:
        """Fold one compilation_metrics record in (status follows tlparse, without its bug)."""
        for field in ("co_name", "co_filename", "co_firstlineno", "fail_type", "fail_reason",
                      "fail_user_frame_filename", "fail_user_frame_lineno", "recompile_reason"):
            value = metrics.get(field)
            if value is not None and getattr(self, field) is None:
                setattr(self, field, value)
        if kind != "compilation_metrics":
            return
        self.metrics_seen = True
        self.finished = True
        if self.duration_s is None:
            self.duration_s = metrics.get("entire_frame_compile_time_s")
        if metrics.get("fail_type"):
            self.any_fail = True
        if not metrics.get("graph_op_count"):
            self.any_empty = True
        restarts = metrics.get("restart_reasons")
        if restarts:  # tlparse paints an absent key as a restart; an absent key is no restart
            self.any_restart = True
            self.restart_reasons = (self.restart_reasons or []) + list(restarts)

    def absorb(self, later: "Compile") -> None:
        """Fold in what a later stretch of the same log recorded of this compilation."""
        named_by_metrics = later.metrics_seen and not self.metrics_seen  # over the name its stack gave at merge
        for name in ("co_name", "co_filename", "co_firstlineno", "fail_type", "fail_reason",
                     "fail_user_frame_filename", "fail_user_frame_lineno", "recompile_reason",
                     "duration_s", "dynamo_start", "start_time", "rank"):
            if getattr(self, name) is None or (named_by_metrics and name in ("co_name", "co_filename")
                                               and getattr(later, name) is not None):
                setattr(self, name, getattr(later, name))
        if later.end_time is not None:
            self.end_time = later.end_time
        self.max_attempt = max(self.max_attempt, later.max_attempt)
        self.started_attempts |= later.started_attempts
        if later.restart_reasons:
            self.restart_reasons = (self.restart_reasons or []) + later.restart_reasons
        self.graph_breaks += later.graph_breaks
        self.envelope_count += later.envelope_count
        self.envelope_bytes += later.envelope_bytes
        self.payload_bytes += later.payload_bytes
        for flag in ("metrics_seen", "any_fail", "any_empty", "any_restart", "finished", "loaded", "returned"):
            setattr(self, flag, getattr(self, flag) or getattr(later, flag))

    @property
    def began(self) -> bool:
        """Whether Dynamo began compiling it (a dynamo_start): a compile id with records and none (an export's or
        AOTInductor's compile context, compiled autograd's captured graph `!N`) is no compile."""
        return bool(self.started_attempts)

    @property
    def counted(self) -> bool:
        """Whether it is a compile, as the view compile_times keeps them: not [-/-], status not none."""
        return not self.anonymous and self.status != "none"

    @property
    def status(self) -> str:
        """ok, break, empty, error from its compilation_metrics (as tlparse, without its bug); without them: none
        when no compile began ([-/-], an export's compile context), ok when it ended all the same (a warm start
        from torch's caches loads its guards from them and returns, but logs no metrics), else missing (it began and
        never ended: the log stops mid-compile, before the compilation_metrics of a cold compile)."""
        if not self.metrics_seen:
            if self.anonymous or not self.began:
                return "none"
            return "ok" if self.loaded and self.returned else "missing"
        if self.any_fail:
            return "error"
        if self.any_empty:
            return "empty"
        if self.any_restart:
            return "break"
        return "ok"

    def row(self) -> tuple:
        ca, frame, frame_compile = self.key
        restarts = orjson.dumps(self.restart_reasons).decode() if self.restart_reasons else None
        return (self.id, self.source_id, self.rank, self.generation, self.compile_id, ca, frame,
                frame_compile, self.max_attempt + 1, self.co_name, self.co_filename,
                self.co_firstlineno, self.status, self.fail_type, self.fail_reason,
                self.fail_user_frame_filename, self.fail_user_frame_lineno, self.recompile_reason,
                restarts, self.graph_breaks, self.start_time, self.end_time, self.duration_s,
                self.dynamo_start, self.envelope_count, self.envelope_bytes, self.payload_bytes)


class Process:
    """One process's stream within a file: its source row, string table and compiles."""

    __slots__ = ("source_id", "pid", "rank", "file_rank", "strings", "compiles", "all_compiles",
                 "generation", "open_spans", "first_time", "last_time", "envelope_count", "bytes",
                 "torch_version", "torch_commit", "rank_conflict_reported", "volume")

    def __init__(self, source_id: int, pid: int, file_rank: int | None):
        self.source_id = source_id
        self.pid = pid
        self.rank: int | None = None
        self.file_rank = file_rank
        self.strings: dict[int, str] = {}
        self.compiles: dict[CompileKey, Compile] = {}   # current generation
        self.all_compiles: list[Compile] = []
        self.generation = 0
        self.open_spans: dict[str, list[tuple]] = {}
        self.first_time: str | None = None
        self.last_time: str | None = None
        self.envelope_count = 0
        self.bytes = 0
        self.torch_version: str | None = None
        self.torch_commit: str | None = None
        self.rank_conflict_reported = False
        self.volume: dict[tuple, list[int]] = {}  # (kind, name, emitter) -> [records, bytes]

    def absorb(self, later: "Process") -> None:
        """Fold in the totals a later stretch of the same log recorded of this process."""
        self.first_time = self.first_time or later.first_time
        self.last_time = later.last_time or self.last_time
        self.envelope_count += later.envelope_count
        self.bytes += later.bytes
        for name in ("rank", "torch_version", "torch_commit"):
            if getattr(self, name) is None:
                setattr(self, name, getattr(later, name))

    def volume_rows(self) -> list[tuple]:
        return [(self.source_id, *key, records, size) for key, (records, size) in self.volume.items()]

    def file_rank_conflict(self) -> str | None:
        """The rank_mismatch message when the file name's rank is not the envelopes' rank."""
        if self.file_rank is not None and self.rank is not None and self.file_rank != self.rank:
            return FILE_RANK_CONFLICT.format(file_rank=self.file_rank, rank=self.rank)
        return None

    def finished_compiles(self) -> list[Compile]:
        """All compiles, completed from their siblings, ready to be written."""
        # A compile that failed before dynamo_start (the recompile limit) names no
        # function: it is the same frame as the other compiles of its frame id.
        frame_code: dict[tuple, Compile] = {}
        for compile in self.all_compiles:
            if compile.co_name is not None:
                frame_code.setdefault((compile.generation, *compile.key[:2]), compile)
        for compile in self.all_compiles:
            sibling = frame_code.get((compile.generation, *compile.key[:2]))
            if compile.co_name is None and sibling is not None:
                compile.co_name = sibling.co_name
                compile.co_filename = compile.co_filename or sibling.co_filename
                compile.co_firstlineno = compile.co_firstlineno or sibling.co_firstlineno
            if compile.rank is None:
                compile.rank = self.effective_rank
        return self.all_compiles

    @property
    def effective_rank(self) -> int | None:
        """The envelopes' rank, else the file name's (older torch logged no "rank" key)."""
        return self.rank if self.rank is not None else self.file_rank

    def reset_compile_ids(self) -> None:
        """torch._dynamo.reset() happened: the same ids now name new compiles."""
        self.generation += 1
        self.compiles = {}

    def row(self, file_id: int) -> tuple:
        return (self.source_id, file_id, self.pid, self.effective_rank, self.file_rank, self.first_time,
                self.last_time, self.envelope_count, self.bytes, self.torch_version, self.torch_commit)


class CompileState:
    """Per process, the compile ids started or finished since the last reset.

    This is all that decides whether a dynamo_start is a torch._dynamo.reset(),
    so it is what a chunk of a file must start with (tlindex.ingest.chunks). fold()
    follows FileNormalizer.on_record, on_dynamo_start and Compile.add_metrics.
    """

    def __init__(self, processes: dict[int, dict[CompileKey, tuple[set[int], bool]]] | None = None):
        self.processes = processes or {}

    def copy(self) -> "CompileState":
        return CompileState({pid: {key: (set(started), finished) for key, (started, finished) in ids.items()}
                             for pid, ids in self.processes.items()})

    def fold(self, pid: int, data: dict) -> None:
        """Take one dynamo_start or compilation_metrics envelope of process pid into account."""
        kind = next(iter(data))
        ca, frame, frame_compile, attempt, odd = context_ids(data)
        key = (ca, frame, frame_compile)
        if key == ANONYMOUS or odd:
            return
        ids = self.processes.setdefault(pid, {})
        started, finished = ids.get(key, (set(), False))
        if kind == "dynamo_start":
            attempt = attempt or 0
            if key in ids and (finished or attempt in started):
                ids.clear()  # a reset: the ids start over
                started, finished = set(), False
            started.add(attempt)
        elif kind == "compilation_metrics" and isinstance(data[kind], dict):
            finished = True
        ids[key] = (started, finished)
