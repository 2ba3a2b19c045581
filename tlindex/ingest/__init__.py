"""Reading logs into the database: discover, read, normalize, stage, merge, index."""

from tlindex.ingest import rederive  # noqa: F401 (registers the step that migration 021 runs: tlindex.store.db)
