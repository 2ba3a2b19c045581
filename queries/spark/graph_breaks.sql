-- Graph breaks (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/graph_breaks.sql, in Spark SQL (python -m tlindex.formats.dialects).
-- :run  run id (NULL: every run)
-- :rank  rank (NULL: every rank)
SELECT g.reason, g.user_file || ':' || g.user_line AS location, count(*) AS times,
       nullif(array_join(array_sort(collect_set(CAST(c.co_name AS STRING))), ','), '') AS functions, nullif(array_join(array_sort(collect_set(CAST(c.compile_id AS STRING))), ','), '') AS compile_ids,
       count(DISTINCT c.run_id) AS runs, nullif(array_join(array_sort(collect_set(CAST(c.rank AS STRING))), ','), '') AS ranks
FROM graph_break_events g JOIN compiles c ON c.id = g.compile
WHERE (c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE :run IS NULL)) AND (:rank IS NULL OR c.rank = :rank)
GROUP BY g.reason, g.user_file, g.user_line
ORDER BY times DESC, location
