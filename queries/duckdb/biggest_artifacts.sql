-- Biggest artifacts (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/biggest_artifacts.sql, in DuckDB's dialect (python -m tlindex.formats.dialects).
-- :run  run id (NULL: every run)
-- :limit  rows (default 50)
SELECT a.id AS artifact, a.size, a.kind, a.name, c.run_id, c.rank, a.compile, c.compile_id, c.co_name, a.payload
FROM artifacts a LEFT JOIN compiles c ON c.id = a.compile
WHERE $run IS NULL  -- every run: the largest first, by the index on size
UNION ALL
SELECT a.id AS artifact, a.size, a.kind, a.name, c.run_id, c.rank, a.compile, c.compile_id, c.co_name, a.payload
FROM sources s JOIN envelopes e ON e.source_id = s.id JOIN artifacts a ON a.envelope_id = e.id
LEFT JOIN compiles c ON c.id = a.compile
WHERE s.run_id = $run  -- one run: its processes' records
ORDER BY 2 DESC LIMIT coalesce($limit, 50)
