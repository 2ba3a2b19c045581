"""What a canned query reads, as SQLite says preparing it on an empty database of the migrations' schema
(tlindex.store.reads): the tests' own question (a query of `payloads` reads `payload_data`)."""

from __future__ import annotations

import functools

from tlindex.store.reads import SchemaCopy, schema_rows


@functools.lru_cache(maxsize=1)  # the migrations do not change under a running process
def schema_copy() -> SchemaCopy:
    """An empty database of the migrations' schema, made once."""
    from tlindex.store.compression import register
    from tlindex.store.db import apply_schema
    from tlindex.store.limits import connect

    conn = connect(":memory:")
    try:
        apply_schema(conn)
        return SchemaCopy(schema_rows(conn), prepare=register)
    finally:
        conn.close()


def tables_read(sql: str) -> frozenset[str]:
    """The tables and views a query reads."""
    found = schema_copy().reads(sql)
    if found is None:
        raise ValueError("SQLite cannot prepare this query on the schema")
    return found
