-- Cache behaviour (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/cache.sql, in Spark SQL (python -m tlindex.formats.dialects).
-- :run  run id (NULL: every run)
SELECT c.run_id, c.rank, e.cache,
       count_if(e.result = 'hit') AS hits, count_if(e.result = 'miss') AS misses, count_if(e.result = 'bypass') AS bypasses,
       nullif(array_join(array_sort(collect_set(CAST(e.reason AS STRING))), ','), '') AS bypass_reasons
FROM cache_events e JOIN compiles c ON c.id = e.compile
WHERE c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE :run IS NULL)
GROUP BY c.run_id, c.rank, e.cache
ORDER BY c.run_id, c.rank, e.cache
