-- Cache behaviour (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/cache.sql, in DuckDB's dialect (python -m tlindex.formats.dialects).
-- :run  run id (NULL: every run)
SELECT c.run_id, c.rank, e.cache,
       count_if(e.result = 'hit') AS hits, count_if(e.result = 'miss') AS misses, count_if(e.result = 'bypass') AS bypasses,
       string_agg(DISTINCT CAST(e.reason AS VARCHAR), ',') AS bypass_reasons
FROM cache_events e JOIN compiles c ON c.id = e.compile
WHERE c.run_id IN (SELECT id FROM runs WHERE id = $run UNION ALL SELECT id FROM runs WHERE $run IS NULL)
GROUP BY c.run_id, c.rank, e.cache
ORDER BY c.run_id, c.rank, e.cache
