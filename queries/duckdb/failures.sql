-- Failures and restarts (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/failures.sql, in DuckDB's dialect.
-- :run  run id (NULL: every run)
-- :rank  rank (NULL: every rank)
WITH selected AS (
    SELECT * FROM compiles
    WHERE ($run IS NULL OR run_id = $run) AND ($rank IS NULL OR rank = $rank)
), found AS (
    SELECT CASE WHEN fail_reason LIKE 'Dynamo recompile limit exceeded%' OR fail_type = 'FailOnRecompileLimitHit'
                THEN 'recompile_limit' ELSE 'failure' END AS kind, fail_type AS type, fail_reason AS reason,
           fail_user_frame_filename || ':' || CAST(fail_user_frame_lineno AS VARCHAR) AS user_frame, id, compile_id, co_name, run_id, rank
    FROM selected WHERE fail_type IS NOT NULL
    UNION ALL
    SELECT 'restart', 'RestartAnalysis', c.value, NULL, c.id, c.compile_id, c.co_name, c.run_id, c.rank
    FROM (SELECT *, unnest(CAST(json(restart_reasons) AS VARCHAR[])) AS value FROM selected
          WHERE restart_reasons IS NOT NULL) c
    UNION ALL
    SELECT 'restart', 'RestartAnalysis', 'no reason logged (' || CAST(attempts AS VARCHAR) || ' attempts)', NULL, id,
           compile_id, co_name, run_id, rank
    FROM selected WHERE attempts - 1 > coalesce(json_array_length(restart_reasons), 0)
)
SELECT kind, type, reason, user_frame, count(*) AS times, string_agg(DISTINCT CAST(co_name AS VARCHAR), ',') AS functions,
       string_agg(DISTINCT CAST(compile_id AS VARCHAR), ',') AS compile_ids, count(DISTINCT run_id) AS runs,
       string_agg(DISTINCT CAST(rank AS VARCHAR), ',') AS ranks
FROM found GROUP BY kind, type, reason, user_frame
ORDER BY kind = 'restart', kind, times DESC
