-- Graph breaks (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/graph_breaks.sql, in DuckDB's dialect (python -m tlindex.formats.dialects).
-- :run  run id (NULL: every run)
-- :rank  rank (NULL: every rank)
SELECT g.reason, g.user_file || ':' || g.user_line AS location, count(*) AS times,
       string_agg(DISTINCT CAST(c.co_name AS VARCHAR), ',') AS functions, string_agg(DISTINCT CAST(c.compile_id AS VARCHAR), ',') AS compile_ids,
       count(DISTINCT c.run_id) AS runs, string_agg(DISTINCT CAST(c.rank AS VARCHAR), ',') AS ranks
FROM graph_break_events g JOIN compiles c ON c.id = g.compile
WHERE (c.run_id IN (SELECT id FROM runs WHERE id = $run UNION ALL SELECT id FROM runs WHERE $run IS NULL)) AND ($rank IS NULL OR c.rank = $rank)
GROUP BY g.reason, g.user_file, g.user_line
ORDER BY times DESC, location
