-- Recompile reasons (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/recompile_reasons.sql, in Spark SQL.
-- :run  run id (NULL: every run)
-- :rank  rank (NULL: every rank)
WITH selected AS (
    SELECT * FROM compiles
    WHERE (:run IS NULL OR run_id = :run) AND (:rank IS NULL OR rank = :rank)
), frame AS (
    SELECT co_name, co_filename, co_firstlineno,
           count_if(frame_compile_id > 0) AS recompiles,
           max(CASE WHEN coalesce(fail_reason, '') LIKE 'Dynamo recompile limit exceeded%' THEN 1 ELSE 0 END) AS hit_limit
    FROM selected GROUP BY co_name, co_filename, co_firstlineno
)
SELECT f.co_name, f.co_filename || ':' || CAST(f.co_firstlineno AS STRING) AS location, f.recompiles, f.hit_limit,
       r.reason AS failed_guard, count(*) AS times,
       nullif(array_join(array_sort(collect_set(c.compile_id)), ','), '') AS compile_ids,
       count(DISTINCT c.run_id) AS runs, nullif(array_join(array_sort(collect_set(CAST(c.rank AS STRING))), ','), '') AS ranks
FROM selected c
JOIN failed_guards r ON r.compile = c.id
JOIN frame f ON f.co_name IS NOT DISTINCT FROM c.co_name AND f.co_filename IS NOT DISTINCT FROM c.co_filename
    AND f.co_firstlineno IS NOT DISTINCT FROM c.co_firstlineno
GROUP BY f.co_name, f.co_filename, f.co_firstlineno, f.recompiles, f.hit_limit, r.reason
ORDER BY f.recompiles DESC, f.co_name, times DESC, failed_guard
