"""What changed in the configuration between two runs, and one compile's config: read against the raw logs."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner
from conftest import connect, raw_envelopes
from test_trend import SERIES, series_runs

from tlindex.answers.configs import CONFIGS, compile_config, config_changes
from tlindex.answers.diff import diff
from tlindex.cli import cli


def raw_configs(log) -> dict[str, dict]:
    """The configs a log's compilation_metrics records carry (each day logs one of each), parsed here."""
    found: dict[str, dict] = {}
    for envelope in raw_envelopes([log]):
        metrics = envelope.get("compilation_metrics") or envelope.get("bwd_compilation_metrics") or {}
        for name, column in CONFIGS.items():
            if metrics.get(column):
                config = json.loads(metrics[column])
                assert found.setdefault(name, config) == config  # one config per kind and day
    return found


def days_in_order(db) -> list:
    """The series' logs in time order (day 0 to day 3): the day with more compiles is the later one."""
    from test_trend import raw_health

    return sorted(SERIES, key=lambda log: (raw_health(log)["compiles"], raw_health(log)["graph_breaks"]))


def raw_set_keys(log) -> set[tuple[str, str]] | None:
    """The (config, key) pairs a log's repros set (their payload lines `torch._inductor.config.KEY = ...`), read here;
    None for a log without a repro (fx_graph_runnable)."""
    text = log.read_text(encoding="utf-8", errors="replace")
    if '"name": "fx_graph_runnable"' not in text:
        return None
    return set(re.findall(r"^\ttorch\._(dynamo|inductor|functorch)\.config\.([\w.]+) = ", text, re.M))


def expected_cause(name: str, key: str, a: dict, b: dict, set_a, set_b) -> dict:
    """Why a key differs, by the rule of tlindex.answers.configs, from the raw logs."""
    if key not in a[name]:
        return {"cause": "new_key", "set_in": []}
    if key not in b[name]:
        return {"cause": "gone_key", "set_in": []}
    set_in = [side for side, keys in (("a", set_a), ("b", set_b)) if keys and (name, key) in keys]
    if set_in:
        return {"cause": "set", "set_in": set_in}
    return {"cause": "default" if name != "compiler" and None not in (set_a, set_b) else "unknown", "set_in": []}


def expected_changes(log_a, log_b) -> list[dict]:
    a, b = raw_configs(log_a), raw_configs(log_b)
    set_a, set_b = raw_set_keys(log_a), raw_set_keys(log_b)
    return [{"config": name, "key": key, "a": [a[name][key]] if key in a[name] else [],
             "b": [b[name][key]] if key in b[name] else [], **expected_cause(name, key, a, b, set_a, set_b)}
            for name in CONFIGS for key in sorted(set(a[name]) | set(b[name]))
            if (key in a[name], a[name].get(key)) != (key in b[name], b[name].get(key))]  # a key logged null or not


def test_day_two_to_day_three_changes_two_config_keys(db):
    """The series sets max_fusion_size and cache_size_limit on day 3 (torch logs the latter as recompile_limit):
    those two keys, with their values before and after as the logs carry them; no key changes on other days."""
    runs = series_runs(db)
    days = days_in_order(db)
    for before, after in zip(days, days[1:]):
        changes = config_changes(db, runs[before.name], runs[after.name])
        assert changes == expected_changes(before, after)
    changed = config_changes(db, runs[days[2].name], runs[days[3].name])
    assert [(c["config"], c["key"], c["a"], c["b"], c["cause"], c["set_in"]) for c in changed] == [
        ("dynamo", "recompile_limit", [8], [16], "set", ["b"]), ("inductor", "max_fusion_size", [64], [16], "set", ["b"])]
    assert config_changes(db, runs[days[0].name], runs[days[2].name]) == []


def test_the_diff_says_the_config_first(fixtures_db):
    conn = connect(fixtures_db)
    runs = series_runs(conn)
    days = days_in_order(conn)
    a, b = str(runs[days[2].name]), str(runs[days[3].name])
    result = diff(conn, a, b)
    assert list(result)[:4] == ["torch", "a", "b", "config"] and result["config"] == config_changes(conn, int(a), int(b))
    assert result["torch"]["changed"] is None  # one torch for the four days
    text = CliRunner().invoke(cli, ["diff", a, b, "--db", str(fixtures_db)])
    lines = text.output.splitlines()
    assert lines[0] == f"torch {result['a']['torch_version']} ({result['a']['torch_commit'][:8]}) in both runs"
    assert lines[3:7] == ["config: 2 keys changed: 2 set by a run", "  set by a run (its fx_graph_runnable lists it):",
                          "    dynamo.recompile_limit: 8 -> 16 (set in B)", "    inductor.max_fusion_size: 64 -> 16 (set in B)"]
    as_json = json.loads(CliRunner().invoke(cli, ["diff", a, b, "--db", str(fixtures_db), "--json"]).output)
    assert as_json["config"] == result["config"]
    same = CliRunner().invoke(cli, ["diff", a, a, "--db", str(fixtures_db)])
    assert "config:" not in same.output


def test_a_compile_config_is_the_one_its_record_logged(db):
    runs = series_runs(db)
    for log in SERIES:
        (compile_id,) = db.execute("SELECT min(id) FROM compiles WHERE run_id = ? AND compile_id != '-/-'",
                                   (runs[log.name],)).fetchone()
        config = compile_config(db, compile_id)
        shown = {name: tuple((key, value if isinstance(value, str) else json.dumps(value)) for key, value in
                             sorted(values.items())) for name, values in raw_configs(log).items()}  # as logged
        assert {name: entry["values"] for name, entry in config.items()} == shown
        assert all(entry["note"] is None for entry in config.values())
    (none,) = db.execute("SELECT min(id) FROM compiles WHERE compile_id = '-/-'").fetchone()
    assert compile_config(db, none) == {}
