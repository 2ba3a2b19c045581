"""The configurations a compile ran with, and the keys whose values differ between two runs.

torch logs Dynamo's, Inductor's, functorch's and the compiler's configs with each compilation_metrics record;
the database stores each distinct config once (a payload) and refers to it from `metrics.dynamo_config`,
`inductor_config`, `functorch_config` and `compiler_config`. A run's config is every config its compiles
logged (usually one per kind); two runs differ in a key when the values they logged for it differ.

Why a key differs (`cause`), from what the logs carry. The configs are whole dumps: they do not say which keys were
set. A key only one run logged is one its torch added (`new_key`) or removed (`gone_key`): no program can set a key
its torch lacks. Inductor's repro (`fx_graph_runnable`) lists every Dynamo, Inductor and functorch key not at its
default (set by the program, an environment variable, or torch itself while compiling): a key either run's repros
list is `set`, one that neither lists while both runs logged repros is a `default` (no run set it: the torch build
or the machine moved it), and any other (no repro, or the compiler config, which repros do not list) is `unknown`.
"""

from __future__ import annotations

import json
import re
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
    """The config keys whose values differ between two runs: {"config", "key", "a", "b", "cause", "set_in"}, a and b
    the lists of values each run logged (empty: the run did not log that key), cause why it differs (the module's
    docstring) and set_in the runs whose repros list it ("a", "b"). Configs only one run logged are not compared."""
    a, b = run_config(conn, run_a), run_config(conn, run_b)
    changes = []
    set_a = set_b = None
    for name in CONFIGS:
        if name not in a or name not in b:
            continue
        for key in sorted(set(a[name]) | set(b[name])):
            values_a, values_b = a[name].get(key, []), b[name].get(key, [])
            if _canonical(values_a) != _canonical(values_b):
                changes.append({"config": name, "key": key, "a": values_a, "b": values_b})
    if any(change["a"] and change["b"] for change in changes):
        set_a, set_b = set_keys(conn, run_a), set_keys(conn, run_b)
    for change in changes:
        change.update(_cause(change, set_a, set_b))
    return changes


def _cause(change: dict, set_a: dict[str, set[str]] | None, set_b: dict[str, set[str]] | None) -> dict:
    """Why one key differs: {"cause", "set_in"} (the module's docstring)."""
    if not change["a"]:
        return {"cause": "new_key", "set_in": []}
    if not change["b"]:
        return {"cause": "gone_key", "set_in": []}
    name, key = change["config"], change["key"]
    set_in = [side for side, listed in (("a", set_a), ("b", set_b)) if listed and key in listed.get(name, ())]
    if set_in:
        return {"cause": "set", "set_in": set_in}
    known = name in RUNNABLE_MODULES and set_a is not None and set_b is not None
    return {"cause": "default" if known else "unknown", "set_in": []}


# The config modules a repro (fx_graph_runnable) sets keys of, one line per key not at its default
# (torch._dynamo.debug_utils.generate_config_string: `torch._inductor.config.max_fusion_size = 16`).
RUNNABLE_MODULES = {"dynamo": "torch._dynamo.config", "inductor": "torch._inductor.config",
                    "functorch": "torch._functorch.config"}
SET_LINE_RE = re.compile(r"^(torch\._dynamo\.config|torch\._inductor\.config|torch\._functorch\.config)\.([\w.]+) = ",
                         re.M)
RUNNABLE_HEAD = 1 << 16  # a repro's config lines come before its graph: what is read of each
RUNNABLE_END = "\nisolate_fails_code_str"  # the line after them
MODULE_NAMES = {module: name for name, module in RUNNABLE_MODULES.items()}
SET_KEYS: dict[str, frozenset[tuple[str, str]] | None] = {}  # (config, key) pairs a repro sets, by its payload
SET_KEYS_KEPT = 256


def set_keys(conn: sqlite3.Connection, run_id: int) -> dict[str, set[str]] | None:
    """The Dynamo, Inductor and functorch keys the run's repros (fx_graph_runnable) list as set, by config name;
    None when it logged no repro whose config lines could be read whole."""
    payloads = [row[0] for row in conn.execute(
        "SELECT DISTINCT a.payload FROM compiles c JOIN artifacts a ON a.compile = c.id "
        "WHERE c.run_id = ? AND a.name = 'fx_graph_runnable' AND a.payload IS NOT NULL", (run_id,))]
    found: dict[str, set[str]] = {}
    for payload in payloads:
        if payload not in SET_KEYS:
            row = conn.execute("SELECT substr(text, 1, ?) FROM payloads WHERE hash = ?",
                               (RUNNABLE_HEAD, payload)).fetchone()
            head = row[0] if row and isinstance(row[0], str) else ""
            if len(SET_KEYS) >= SET_KEYS_KEPT:
                SET_KEYS.clear()
            end = head.find(RUNNABLE_END)
            SET_KEYS[payload] = None if end < 0 else frozenset(
                (MODULE_NAMES[module], key) for module, key in SET_LINE_RE.findall(head[:end]))
        pairs = SET_KEYS[payload]
        if pairs is None:
            return None
        for name, key in pairs:
            found.setdefault(name, set()).add(key)
    return found if payloads else None


def _text(value) -> str:
    """A value as JSON with sorted keys: how values are compared (True and 1 differ, as in the log)."""
    return json.dumps(value, sort_keys=True, default=repr)


def _canonical(values: list) -> set[str]:
    return {_text(value) for value in values}


def shown(values: list) -> str:
    """A key's values in one run, as the diff prints them."""
    return " | ".join(_text(value) for value in values) if values else "(not logged)"


CAUSE_ORDER = ("set", "unknown", "default", "new_key", "gone_key")  # how the diff lists them: what a run did first


def cause_words(cause: str, torch: dict) -> str:
    """A cause as the diff names a group of keys (`torch` as tlindex.answers.diff.torch_change gives it)."""
    moved = torch.get("changed") in ("version", "commit")
    version = torch["b"]["version"] if torch.get("changed") == "version" else "this torch build"
    return {"set": "set by a run (its fx_graph_runnable lists it)",
            "unknown": "differ; the logs do not say whether a run set them",
            "default": "defaults that moved with the torch version (no run set them)" if moved
            else "defaults that differ (no run set them: the machine or the install)",
            "new_key": f"new in torch {version}" if moved else "only in B's config",
            "gone_key": f"gone in torch {version}" if moved else "only in A's config"}[cause]


def config_groups(changes: list[dict], torch: dict) -> list[tuple[str, list[dict]]]:
    """The changed keys grouped by cause, in CAUSE_ORDER: (the group's words, its changes)."""
    return [(cause_words(cause, torch), items) for cause in CAUSE_ORDER
            if (items := [change for change in changes if change.get("cause", "unknown") == cause])]


def change_words(change: dict) -> str:
    """One changed key's values as the diff prints them: both, or the one its run logged, and who set it."""
    if change.get("cause") == "new_key":
        return shown(change["b"])
    if change.get("cause") == "gone_key":
        return shown(change["a"])
    set_in = change.get("set_in") or []
    where = f" (set in {' and '.join(side.upper() for side in set_in)})" if set_in else ""
    return f"{shown(change['a'])} -> {shown(change['b'])}{where}"


def config_lines(changes: list[dict], torch: dict) -> list[str]:
    """The config keys that changed, grouped by cause, as `tlindex diff` prints them."""
    if not changes:
        return []
    groups = config_groups(changes, torch)
    lines = [f"config: {len(changes)} key{'s' * (len(changes) != 1)} changed: "
             + "; ".join(f"{len(items)} {words.split(' (')[0]}" for words, items in groups)]
    for words, items in groups:
        lines.append(f"  {words}:")
        lines += [f"    {change['config']}.{change['key']}: {change_words(change)}" for change in items]
    return lines
