-- Biggest artifacts (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/biggest_artifacts.sql, in DuckDB's dialect (python -m tlindex.formats.dialects).
-- :run  run id (NULL: every run)
-- :limit  rows (default 50)
SELECT a.id AS artifact, a.size, a.kind, a.name, c.run_id, c.rank, a.compile, c.compile_id, c.co_name, a.payload
FROM artifacts a LEFT JOIN compiles c ON c.id = a.compile
LEFT JOIN envelopes e ON e.id = a.envelope_id LEFT JOIN sources s ON s.id = e.source_id
WHERE $run IS NULL OR s.run_id = $run
ORDER BY a.size DESC LIMIT coalesce($limit, 50)
