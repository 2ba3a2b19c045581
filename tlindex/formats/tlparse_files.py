"""The machine-readable files tlparse writes, from the database: `compile_directory.json` and `raw.jsonl`.

Tools built on tlparse's output read these two files; `tlindex report` writes them in tlparse
0.4.3's formats for each log of a run (docs/tlparse.md):

- `compile_directory.json`: `{"[0/0]": {"artifacts": [{"name", "url", "number", "suffix",
  "readable_url"}, ...]}, ...}`, keyed as tlparse keys compiles (attempts kept: `[0/0_1]`;
  `[-/-]` for records without a compile id), keys sorted as tlparse's JSON map sorts them. `number` is tlparse's global
  output counter, `name` its file name (`dynamo_output_graph_2.txt`); the records tlparse skips as another rank's
  (after a log's first ranked record, those without its rank) are left out, as tlparse leaves them out. `url` leads
  to the payload's text (each distinct payload is one file of the report) or, for the kinds tlparse renders as a
  page (compilation metrics, guards), to the compile page; `readable_url` to the highlighted page.
- `raw.jsonl`: line 1 `{"string_table": [...]}` (indexed by string id, null where none), then
  every record except `str` and `chromium_event`: its envelope as logged, plus `timestamp`,
  `thread` (the pid), `pathname` (with tlparse's leading space), `lineno` (of the emitting torch
  source) and `payload_filename`; keys sorted. The envelope is read back from the log at its
  offset, so the log must still be where it was ingested, and still be the file ingested: its first bytes (as many
  as were ingested) must hash as they did (a log grown since still is; one replaced, truncated or rewritten is not,
  and raw.jsonl is then not written: `LogChanged` says so, with its size and time then and now).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

import orjson

from tlindex.formats.tlparse_names import IR_KINDS, PAGE_KINDS, compile_key, output_name
from tlindex.ingest.reader import ENVELOPE_RE, LAUNCHER_PREFIX_RE, line_body

READABLE = "inductor_provenance_tracking_kernel_stack_traces"  # tlparse adds a readable page of these
CACHE_SUFFIXES = (("cache_miss", "❌"), ("cache_hit", "✅"), ("cache_bypass", "❓"))
EMPTY = "d41d8cd98f00b204e9800998ecf8427e"  # md5 of no bytes: the file of an artifact logged without a payload


@dataclass
class Links:
    """Where the report put what a compile_directory entry points at (paths relative to the json file)."""

    payload_text: Callable[[str], str]      # md5 -> its text file
    payload_page: Callable[[str], str]      # md5 -> its highlighted page
    compile_page: Callable[[int], str]      # compile row id -> its page


def _key(row: tuple) -> str:
    compile_id, ca, frame, frame_compile, attempt = row
    if compile_id == "-/-" or compile_id is None:
        return "[-/-]"
    return compile_key(ca, frame, frame_compile, attempt)


def _file_name(kind: str, stem: str, number: int, metadata: dict) -> str:
    if kind == "inductor_output_code":  # a page, named after the generated file when the record says
        filename = metadata.get("filename")
        if isinstance(filename, str) and filename:
            stem += "_" + filename.replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0]
        return f"{stem}_{number}.html"
    if kind == "dump_file":  # a global file, no counter: dump_file/<name>.html or eval_with_key_<K>.html
        name = str(metadata.get("name", stem))
        marker = name.find("<eval_with_key>.")
        return f"eval_with_key_{name[marker + len('<eval_with_key>.'):]}.html" if marker != -1 else f"{name}.html"
    encoding = metadata.get("encoding") if kind == "artifact" else None
    if kind in PAGE_KINDS:
        extension = "html"
    elif kind in IR_KINDS:
        extension = "txt"
    else:
        extension = "json" if encoding == "json" else "txt"
    return f"{stem}_{number}.{extension}"


def compile_directory(conn: sqlite3.Connection, file_id: int, links: Links) -> Iterator[str]:
    """tlparse's compile_directory.json of one ingested log, in pieces: one compile per line.

    Each artifact is kept as its JSON text until the compiles are sorted (tlparse's serde map sorts its
    keys), and the document is never built whole: a 1 GB log's was 76 MB of objects and strings."""
    directory: dict[str, list[str]] = {}
    number, latched = 0, None
    for (kind, name, payload, metadata, compile, traces, rank, *context) in conn.execute(f"""
            SELECT e.kind, e.name, e.payload, e.metadata, e.compile,
                   CASE WHEN e.name LIKE '{READABLE}%' THEN (SELECT text FROM payloads WHERE hash = e.payload) END,
                   e.rank, e.compile_id, e.compiled_autograd_id, e.frame_id, e.frame_compile_id, e.attempt
            FROM envelopes e JOIN sources s ON s.id = e.source_id
            WHERE s.file_id = ? AND e.kind != 'str' ORDER BY e.id""", (file_id,)):
        # tlparse reads a log as its first rank's: once a record names a rank, it skips every later one that does
        # not name the same (torch logs its torch_version artifact without one), and numbers none of them
        latched = rank if latched is None else latched
        if latched is not None and rank != latched:
            continue
        artifacts = directory.setdefault(_key(tuple(context)), [])
        stem = output_name(kind, name)
        if stem is None:
            continue
        if kind == "link":
            url = _object(metadata).get("url")
            artifacts.append(_json({"name": name, "number": number, "readable_url": None, "suffix": "",
                                    "url": url if isinstance(url, str) else None}))
            number += 1
            continue
        fields = _object(metadata)
        if kind in PAGE_KINDS and compile is not None:
            url, readable = links.compile_page(compile), None
        elif payload is not None or kind == "artifact":  # tlparse writes a payload-less artifact as an empty file
            url = links.payload_text(payload or EMPTY)
            readable = links.payload_page(payload) if payload is not None else None
        else:
            url, readable = None, None
        suffix = next((mark for word, mark in CACHE_SUFFIXES if word in (name or kind)), "")
        # tlparse writes non-empty kernel stack traces a second time, readable (<stem>_readable.html): the file
        # keeps the first number, the entry says the second, and the next output gets the one after
        twice = traces is not None and bool(_object(traces))
        artifacts.append(_json({"name": _file_name(kind, stem, number, fields), "number": number + twice,
                                "readable_url": readable, "suffix": suffix, "url": url}))
        number += 2 if twice else 1
    yield "{\n"
    for position, (key, artifacts) in enumerate(sorted(directory.items())):  # tlparse's serde map: keys sorted
        yield (",\n" if position else "") + f'  {_json(key)}: {{"artifacts": [{", ".join(artifacts)}]}}'
    yield "\n}\n"


def _json(value: object) -> str:
    """`value` as json.dumps writes it with its C encoder (its indent= runs the pure-Python one)."""
    return json.dumps(value, ensure_ascii=False)


def _object(metadata: str | None) -> dict:
    try:
        value = json.loads(metadata) if metadata else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def string_table(conn: sqlite3.Connection, file_id: int) -> list[str | None]:
    """The log's interned strings, indexed by id (null where an id was never defined)."""
    strings = dict(conn.execute("""
        SELECT t.string_id, t.value FROM strings t JOIN sources s ON s.id = t.source_id
        WHERE s.file_id = ? ORDER BY s.id""", (file_id,)).fetchall())
    return [strings.get(i) for i in range(max(strings, default=-1) + 1)]


class LogChanged(OSError):
    """The file at the path a log was ingested from is no longer that log (replaced, truncated, rewritten)."""


def ingested_log(conn: sqlite3.Connection, file_id: int) -> str:
    """The path of an ingested log, when the file there is still the log ingested: its first bytes, as many as were
    ingested, hash as they did then (files.sha256; a log that has grown since still is). Raises LogChanged, saying
    its size and time then and now, when it is not; OSError when it cannot be read."""
    from tlindex.ingest.task import prefix_sha256  # here: it imports the normalizer, which a report need not

    # main.files: the real path (a report's connection shows the folder `tlindex run` traced into by its name alone)
    path, size, mtime, sha256, consumed = conn.execute(
        "SELECT path, size, mtime, sha256, bytes_ingested FROM main.files WHERE id = ?", (file_id,)).fetchone()
    now = os.stat(path)
    if prefix_sha256(path, consumed) != sha256:
        raise LogChanged(f"{path} is no longer the log that was ingested: its first {consumed:,} bytes differ "
                         f"({now.st_size:,} bytes modified {datetime.fromtimestamp(now.st_mtime).isoformat(timespec='seconds')}"
                         f" now, {size:,} bytes modified {mtime} when ingested); ingest it again to read it")
    return path


def raw_jsonl(conn: sqlite3.Connection, file_id: int, payload_text: Callable[[str], str]) -> Iterator[str]:
    """The lines of tlparse's raw.jsonl for one log, read back from the log itself.

    Raises OSError when the log is no longer where it was ingested, LogChanged when the file there is no longer the
    log ingested (ingested_log), before any line.
    """
    from tlindex.ingest.task import open_content  # here: it imports the normalizer, which a report need not

    path = ingested_log(conn, file_id)
    yield json.dumps({"string_table": string_table(conn, file_id)}, ensure_ascii=False, separators=(",", ":"))
    content, disk = open_content(path)
    position = 0
    try:
        for offset, size, time, pid, emitter, emitter_line, payload in conn.execute("""
                SELECT e.offset, e.envelope_bytes, e.time, e.pid, e.emitter_file, e.emitter_line, e.payload
                FROM envelopes e JOIN sources s ON s.id = e.source_id
                WHERE s.file_id = ? AND e.kind NOT IN ('str', 'chromium_event') ORDER BY e.offset""", (file_id,)):
            if content is disk:
                content.seek(offset)
            else:  # a .gz reads forward only: offsets come in order
                while position < offset:
                    position += len(content.read(min(offset - position, 1 << 20)) or b"\0" * (offset - position))
            raw = content.read(size)
            position = offset + len(raw)
            envelope = _envelope(raw)
            if envelope is None:
                continue
            if any(key in envelope for key in ("timestamp", "thread", "pathname", "lineno", "payload_filename")):
                continue  # tlparse drops such a record too (fail_key_conflict)
            envelope.update(timestamp=f"{time}Z", thread=pid, pathname=f" {emitter}", lineno=emitter_line)
            if payload is not None:
                envelope["payload_filename"] = payload_text(payload)
            try:
                yield orjson.dumps(envelope, option=orjson.OPT_SORT_KEYS).decode("utf-8")
            except TypeError:  # integers past 64 bits: the standard library writes them
                yield json.dumps(envelope, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    finally:
        content.close()
        disk.close()


def _envelope(raw: bytes) -> dict | None:
    line = line_body(raw)
    prefix = LAUNCHER_PREFIX_RE.match(line)
    match = ENVELOPE_RE.match(line, prefix.end() if prefix else 0) or ENVELOPE_RE.search(line)
    if match is None:
        return None
    body = line[match.end():]
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:
            data = json.loads(body.decode("utf-8", "replace"))  # what orjson refuses (huge ints, bad UTF-8)
        except (ValueError, RecursionError):
            return None
    return data if isinstance(data, dict) else None
