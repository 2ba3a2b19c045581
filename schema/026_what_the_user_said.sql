-- tlindex schema, migration 026: what an ingest must not lose of a run, and which ingest wrote it last. A file
-- re-ingested (--replace, or rewritten in place) gives its new processes back to the run its old ones were in, so
-- the run keeps its id, label, run facts and kept mark; `last_ingest` says which runs arrived in one ingest (the CI
-- gate judges one of several only when it is named) and which runs an ingest still running is writing (`tlindex rm`
-- refuses those).
ALTER TABLE runs ADD COLUMN last_ingest TEXT; -- the ingest that last made or grew the run (its staging folder's name): runs made or grown by one ingest share it; NULL for runs written before it was kept

ALTER TABLE runs ADD COLUMN kept INTEGER NOT NULL DEFAULT 0; -- 1 when a user marked the run kept (`tlindex label RUN --keep`): a run to stay, such as a baseline

-- The runs that arrived in one ingest, found without reading every run.
CREATE INDEX runs_last_ingest ON runs(last_ingest);
