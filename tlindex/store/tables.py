"""Column order of the rows the normalizer emits, per table: read from the schema itself.

schema/*.sql defines the tables; the columns a row fills are the table's columns in schema order
less those filled later (FILLED_LATER). A new column is added by its migration alone (and, when
rows do not fill it, here); tests/test_row_order.py checks every `sink.add` tuple against COLUMNS.
"""

from __future__ import annotations

# The tables rows are emitted for, in the order the normalizer emits them to staging.
EMITTED = ("files", "sources", "strings", "payload_data", "envelopes", "compiles", "frames", "artifacts", "guards",
           "metrics", "volume", "chromium_events", "failed_guards", "graph_break_events", "cache_events", "symbols",
           "tensor_descriptions", "collective_ops", "op_estimates", "graph_executions", "ingest_errors",
           "piece_compiles")
# Columns of those tables that rows do not fill: written later, when the rows are merged or grouped.
FILLED_LATER = {
    "files": {"copy_of"},
    "sources": {"run_id", "logged_rank", "restart", "process", "rank_decision"},
    "compiles": {"run_id", "guards_print", "stack_print", "content_print"},
}


def _schema_columns() -> dict[str, tuple[str, ...]]:
    """Each emitted table's columns in schema order (the current schema's image: schema/*.sql), less FILLED_LATER."""
    from tlindex.store.db import schema_image

    image = schema_image()
    return {table: tuple(row[1] for row in image.execute(f"PRAGMA table_info({table})")
                         if row[1] not in FILLED_LATER.get(table, ()))
            for table in EMITTED}


COLUMNS: dict[str, tuple[str, ...]] = _schema_columns()

# The metrics columns that are not a key of the record: the row's own, where it came from, and the rest (`other`).
METRICS_BOOKKEEPING = ("id", "envelope_id", "compile", "kind", "compile_id", "other")
METRICS_CONFIGS = ("dynamo_config", "inductor_config", "functorch_config", "compiler_config")
# Columns typed in metrics (a key of the record each); every other key of a metrics record goes to `other`.
METRICS_TYPED = tuple(column for column in COLUMNS["metrics"]
                      if column not in METRICS_BOOKKEEPING and column not in METRICS_CONFIGS)
