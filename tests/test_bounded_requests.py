"""Every request is bounded by its process (issue 62): the SQL a request sends to a tlindex database runs in a worker
process (tlindex.served_sql), killed past its time limit, with a memory limit and a cap on the bytes it returns,
whatever function it calls; the other readers are answered meanwhile; and the plugin leaves every other database as
Datasette made it (issue 61).

The hostile statements are generated from SQLite's own list of functions (`PRAGMA function_list`), so a function a
later SQLite adds is called with the same arguments the day it appears.
"""

from __future__ import annotations

import asyncio
import resource
import sqlite3
import time

import pytest
from datasette.app import Datasette

LIMIT_S = 1.0  # Datasette's sql_time_limit_ms
BOUND_S = LIMIT_S + 1.0 + 3.0  # the limit, the grace before the worker is killed, and room for a new worker
LONG = "printf('%.*c', 4000000, 'a')"  # a 4 MB text
NEEDLE = "printf('%.*c', 100000, 'a') || 'b'"  # one it holds all but the last character of, everywhere
DENIED = {"load_extension", "fts3_tokenizer", "fts5", "sqlite_log", "zeroblob", "randomblob"}


def builtin_functions() -> list[tuple[str, int]]:
    """SQLite's own scalar functions and how many arguments each takes (-1: any), as this SQLite lists them."""
    conn = sqlite3.connect(":memory:")
    try:
        return sorted({(name, narg) for name, builtin, kind, narg in conn.execute(
            "SELECT name, builtin, type, narg FROM pragma_function_list") if builtin and kind == "s"
            and name not in DENIED})
    finally:
        conn.close()


def hostile(name: str, narg: int) -> str:
    """`name` called with a long text and, for each further argument, a long needle (two for a function of any
    number): the worst case of every search (instr, replace, like, glob, trim) compares at every position."""
    count = 2 if narg < 0 else narg
    args = ", ".join([LONG] + [NEEDLE] * (count - 1))
    return f"select length({name}({args}))" if count else f"select {name}()"


HEAVY = [  # each one VM step, or one value, that once stalled the server or filled its memory
    "with recursive n(i) as (select 1 union all select i + 1 from n where i < 100000) "
    "select length(json_patch((select json_group_object(i, i) from n), (select json_group_object(i, i + 1) from n)))",
    "select printf('%.*c', 60000000, 'x') from runs limit 10",
    f"select instr({LONG}, printf('%.*c', 100000, 'a') || 'b')",
    f"select replace({LONG}, 'a', {LONG})",
    "with recursive n(i) as (select 1 union all select i + 1 from n) select count(*) from n",
]


@pytest.fixture(scope="module")
def served(traces_db):
    datasette = Datasette([str(traces_db)], settings={"sql_time_limit_ms": int(LIMIT_S * 1000)})
    asyncio.run(datasette.invoke_startup())
    yield datasette
    datasette.__dict__["_tlindex_sql_workers"].stop()


async def timed(datasette, path: str, **params) -> tuple[float, int, str]:
    started = time.monotonic()
    response = await datasette.client.get(path, params=params)
    return time.monotonic() - started, response.status_code, response.text


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.asyncio
@pytest.mark.parametrize("sql", HEAVY, ids=range(len(HEAVY)))
async def test_a_statement_that_would_run_on_or_fill_the_server_is_stopped_in_its_worker(served, traces_db, sql):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    seconds, status, text = await timed(served, f"/{traces_db.stem}.json", sql=sql)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert seconds < BOUND_S, (sql, seconds)
    assert grown_mb < 200, (sql, grown_mb)  # never the rows of gigabytes: they stay in the worker, refused
    assert status in (200, 400), (status, text[:300])


@pytest.mark.asyncio
async def test_the_plain_table_page_of_every_payload_is_bounded_too(served, traces_db):
    seconds, status, text = await timed(served, f"/{traces_db.stem}/payloads.json", _size="max")
    assert seconds < BOUND_S and status in (200, 400, 500), (seconds, status)


@pytest.mark.asyncio
async def test_readers_are_answered_while_hostile_statements_run(served, traces_db):
    slow = [asyncio.create_task(timed(served, f"/{traces_db.stem}.json", sql=HEAVY[0])) for _ in range(3)]
    await asyncio.sleep(0.2)
    seconds, status, _ = await timed(served, f"/{traces_db.stem}/-/tlindex.json")
    assert status == 200 and seconds < 3.0, seconds  # a tlindex page: it reads in the server, not in a worker
    for done in await asyncio.gather(*slow):
        assert done[0] < 2 * BOUND_S


@pytest.mark.slow  # a sweep or a long run: CI runs it (-m "slow or not slow")
@pytest.mark.asyncio
async def test_every_function_of_sqlite_called_with_long_arguments_answers_in_bounded_time(served, traces_db):
    """A quick pass over every scalar function SQLite has (-m slow: each with every argument long, one by one)."""
    slowest = 0.0
    for name, narg in builtin_functions():
        seconds, status, text = await timed(served, f"/{traces_db.stem}.json", sql=hostile(name, narg))
        slowest = max(slowest, seconds)
        assert status in (200, 400) and seconds < BOUND_S, (name, narg, status, seconds, text[:200])
    assert slowest < BOUND_S


@pytest.mark.asyncio
async def test_an_answer_is_the_answer_sqlite_gives(served, traces_db):
    """Through the workers, rows, columns and errors are what Datasette gives on its own connection."""
    conn = sqlite3.connect(traces_db)
    expected = conn.execute("select id, label from runs order by id").fetchall()
    conn.close()
    # Datasette 1.0 answers /db.json?sql= with a redirect to /db/-/query.json
    response = await served.client.get(f"/{traces_db.stem}.json", params={"sql": "select id, label from runs order "
                                                                                   "by id", "_shape": "array"},
                                       follow_redirects=True)
    assert [(row["id"], row["label"]) for row in response.json()] == [tuple(row) for row in expected]
    bad = await served.client.get(f"/{traces_db.stem}.json", params={"sql": "select nonsense from runs"},
                                  follow_redirects=True)
    assert bad.status_code == 400 and "no such column: nonsense" in bad.text
    table = await served.client.get(f"/{traces_db.stem}/runs.json", params={"_shape": "array"})
    assert table.status_code == 200 and len(table.json()) == len(expected)


@pytest.mark.asyncio
async def test_another_database_is_left_as_datasette_made_it(tmp_path):
    """No function of tlindex's on it, SQLite's like, glob, instr and replace its own, no limit or pragma changed:
    LIKE there runs at SQLite's speed (it ran 19 times slower when the plugin replaced it)."""
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("create table t (x text)")
    conn.executemany("insert into t values (?)", [(f"row {i}",) for i in range(1000)])
    conn.commit()
    conn.close()
    datasette = Datasette([str(other)])
    await datasette.invoke_startup()
    db = datasette.get_database("other")

    def inspect(conn):
        app = {row[0] for row in conn.execute("select name from pragma_function_list where builtin = 0")}
        builtin = {row[0] for row in conn.execute("select name from pragma_function_list where builtin = 1")}
        return (app, builtin, conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH),
                conn.execute("pragma hard_heap_limit").fetchone()[0])

    app, builtin, length, heap = await db.execute_fn(inspect)
    assert not app & {"sqlar_uncompress", "sqlar_compress", "like", "glob", "instr", "replace", "printf", "trim"}
    assert {"like", "glob", "instr", "replace", "printf"} <= builtin
    assert length == sqlite3.connect(":memory:").getlimit(sqlite3.SQLITE_LIMIT_LENGTH) and heap == 0
    assert not getattr(db.execute, "bounded", False)  # its SQL runs as Datasette runs it
