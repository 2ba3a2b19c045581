"""The configurations a compile ran with, and the keys whose values differ between two runs.

torch logs Dynamo's, Inductor's, functorch's and the compiler's configs with each compilation_metrics record;
the database stores each distinct config once (a payload) and refers to it from `metrics.dynamo_config`,
`inductor_config`, `functorch_config` and `compiler_config`. A run's config is every config its compiles
logged (usually one per kind); two runs differ in a key when the values they logged for it differ.
"""

from __future__ import annotations

import json
import sqlite3
from functools import lru_cache

from tlindex.store.tables import METRICS_CONFIGS

CONFIGS = {column.removesuffix("_config"): column for column in METRICS_CONFIGS}  # name -> metrics column
MAX_CONFIG_BYTES = 4_000_000  # a config larger than this is not parsed (torch 2.13's largest, Inductor's: 25 KB)


def _texts(conn: sqlite3.Connection, hashes: set[str]) -> dict[str, tuple[str | None, str | None]]:
    """Each config payload's text, or (None, why it is not read)."""
    found: dict[str, tuple[str | None, str | None]] = {}
    for payload in hashes:
        size = conn.execute("SELECT text_size FROM payload_data WHERE hash = ?", (payload,)).fetchone()
        if size is None:
            found[payload] = None, "not stored"
        elif size[0] > MAX_CONFIG_BYTES:
            found[payload] = None, f"larger than {MAX_CONFIG_BYTES:,} bytes: not compared"
        else:
            found[payload] = conn.execute("SELECT text FROM payloads WHERE hash = ?", (payload,)).fetchone()[0], None
    return found


@lru_cache(maxsize=64)  # compile after compile logs the same few configs: each is parsed once per process
def _config_of(text: str) -> dict | str:
    """A config's text as a dict, or why it is not one."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    return value if isinstance(value, dict) else "not a JSON object"


@lru_cache(maxsize=64)
def _shown(text: str) -> tuple[tuple[str, str], ...]:
    """A config's keys in order with their values as the log wrote them (JSON; strings without their quotes)."""
    config = _config_of(text)
    return tuple((key, value if isinstance(value, str) else json.dumps(value, default=repr))
                 for key, value in sorted(config.items())) if isinstance(config, dict) else ()


def _parsed(conn: sqlite3.Connection, hashes: set[str]) -> dict[str, dict | str]:
    """Each payload's config as a dict, or why it is not one."""
    return {payload: note if text is None else _config_of(text) for payload, (text, note) in _texts(conn, hashes).items()}


def compile_config(conn: sqlite3.Connection, compile_id: int) -> dict[str, dict]:
    """One compile's configs by name (dynamo, inductor, functorch, compiler), as its first metrics record with
    that config logged it: {"payload": hash, "values": its (key, value as logged) pairs or None, "note": why values
    is None}."""
    columns = ", ".join(CONFIGS.values())
    rows = conn.execute(f"SELECT {columns} FROM metrics WHERE compile = ? ORDER BY id", (compile_id,)).fetchall()
    chosen = {name: next((row[i] for row in rows if row[i] is not None), None) for i, name in enumerate(CONFIGS)}
    texts = _texts(conn, {payload for payload in chosen.values() if payload})
    result = {}
    for name, payload in chosen.items():
        if payload is None:
            continue
        text, note = texts[payload]
        config = _config_of(text) if text is not None else note
        result[name] = ({"payload": payload, "values": _shown(text), "note": None} if isinstance(config, dict)
                        else {"payload": payload, "values": None, "note": config})
    return result


def run_config(conn: sqlite3.Connection, run_id: int) -> dict[str, dict[str, list]]:
    """A run's configs: name -> key -> the distinct values its compiles logged (usually one), in log order."""
    columns = ", ".join(CONFIGS.values())
    rows = conn.execute(f"""SELECT {columns} FROM compiles c JOIN metrics m ON m.compile = c.id
                            WHERE c.run_id = ? ORDER BY m.id""", (run_id,)).fetchall()
    order: dict[str, list[str]] = {name: [] for name in CONFIGS}
    for row in rows:
        for name, payload in zip(CONFIGS, row):
            if payload is not None and payload not in order[name]:
                order[name].append(payload)
    parsed = _parsed(conn, {payload for payloads in order.values() for payload in payloads})
    config: dict[str, dict[str, list]] = {}
    for name, payloads in order.items():
        keys: dict[str, list] = {}
        seen: dict[str, set[str]] = {}
        for payload in payloads:
            values = parsed[payload]
            if not isinstance(values, dict):
                continue
            for key, value in values.items():
                if _text(value) not in seen.setdefault(key, set()):
                    seen[key].add(_text(value))
                    keys.setdefault(key, []).append(value)
        if payloads:
            config[name] = keys
    return config


def config_changes(conn: sqlite3.Connection, run_a: int, run_b: int) -> list[dict]:
    """The config keys whose values differ between two runs: {"config", "key", "a", "b"}, a and b the lists of
    values each run logged (empty: the run did not log that key). Configs only one run logged are not compared."""
    a, b = run_config(conn, run_a), run_config(conn, run_b)
    changes = []
    for name in CONFIGS:
        if name not in a or name not in b:
            continue
        for key in sorted(set(a[name]) | set(b[name])):
            values_a, values_b = a[name].get(key, []), b[name].get(key, [])
            if _canonical(values_a) != _canonical(values_b):
                changes.append({"config": name, "key": key, "a": values_a, "b": values_b})
    return changes


def _text(value) -> str:
    """A value as JSON with sorted keys: how values are compared (True and 1 differ, as in the log)."""
    return json.dumps(value, sort_keys=True, default=repr)


def _canonical(values: list) -> set[str]:
    return {_text(value) for value in values}


def shown(values: list) -> str:
    """A key's values in one run, as the diff prints them."""
    return " | ".join(_text(value) for value in values) if values else "(not logged)"
