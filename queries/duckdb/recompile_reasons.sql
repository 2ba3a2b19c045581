-- Recompile reasons (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/recompile_reasons.sql, in DuckDB's dialect.
-- :run  run id (NULL: every run)
-- :rank  rank (NULL: every rank)
WITH selected AS (
    SELECT * FROM compiles
    WHERE ($run IS NULL OR run_id = $run) AND ($rank IS NULL OR rank = $rank)
), frame AS (
    SELECT co_name, co_filename, co_firstlineno,
           count_if(frame_compile_id > 0) AS recompiles,
           max(CASE WHEN coalesce(fail_reason, '') LIKE 'Dynamo recompile limit exceeded%' THEN 1 ELSE 0 END) AS hit_limit
    FROM selected GROUP BY co_name, co_filename, co_firstlineno
), caused AS (
    SELECT DISTINCT c.id, c.co_name, c.co_filename, c.co_firstlineno, c.compile_id, c.run_id, c.rank, r.reason
    FROM selected c JOIN failed_guards r ON r.compile = c.id
), by_id AS (
    SELECT co_name, co_filename, co_firstlineno, reason, compile_id, count(*) AS n, min(id) AS first
    FROM caused GROUP BY co_name, co_filename, co_firstlineno, reason, compile_id
), listed AS (
    SELECT co_name, co_filename, co_firstlineno, reason, sum(n) AS compiles,
           string_agg(compile_id || CASE WHEN n > 1 THEN ' ×' || CAST(n AS VARCHAR) ELSE '' END, ', '
                      ORDER BY first) AS compile_ids
    FROM by_id GROUP BY co_name, co_filename, co_firstlineno, reason
), spread AS (
    SELECT co_name, co_filename, co_firstlineno, reason, count(DISTINCT run_id) AS runs,
           string_agg(DISTINCT CAST(rank AS VARCHAR), ',') AS ranks
    FROM caused GROUP BY co_name, co_filename, co_firstlineno, reason
)
SELECT f.co_name, f.co_filename || ':' || CAST(f.co_firstlineno AS VARCHAR) AS location, f.recompiles, f.hit_limit,
       l.reason AS failed_guard, l.compiles, l.compile_ids, s.runs, s.ranks
FROM listed l
JOIN spread s ON s.co_name IS NOT DISTINCT FROM l.co_name AND s.co_filename IS NOT DISTINCT FROM l.co_filename
    AND s.co_firstlineno IS NOT DISTINCT FROM l.co_firstlineno AND s.reason = l.reason
JOIN frame f ON f.co_name IS NOT DISTINCT FROM l.co_name AND f.co_filename IS NOT DISTINCT FROM l.co_filename
    AND f.co_firstlineno IS NOT DISTINCT FROM l.co_firstlineno
ORDER BY f.recompiles DESC, f.co_name, l.compiles DESC, failed_guard
