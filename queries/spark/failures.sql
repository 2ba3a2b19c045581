-- Failures and restarts (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/failures.sql, in Spark SQL.
-- :run  run id (NULL: every run)
-- :rank  rank (NULL: every rank)
WITH selected AS (
    SELECT * FROM compiles
    WHERE (:run IS NULL OR run_id = :run) AND (:rank IS NULL OR rank = :rank)
), found AS (
    SELECT CASE WHEN fail_reason LIKE 'Dynamo recompile limit exceeded%' OR fail_type = 'FailOnRecompileLimitHit'
                THEN 'recompile_limit' ELSE 'failure' END AS kind, fail_type AS type, fail_reason AS reason,
           fail_user_frame_filename || ':' || CAST(fail_user_frame_lineno AS STRING) AS user_frame, id, compile_id, co_name, run_id, rank
    FROM selected WHERE fail_type IS NOT NULL
    UNION ALL
    SELECT 'restart', 'RestartAnalysis', c.value, NULL, c.id, c.compile_id, c.co_name, c.run_id, c.rank
    FROM (SELECT *, explode(from_json(restart_reasons, 'array<string>')) AS value FROM selected
          WHERE restart_reasons IS NOT NULL) c
    UNION ALL
    SELECT 'restart', 'RestartAnalysis', 'no reason logged (' || CAST(attempts AS STRING) || ' attempts)', NULL, id,
           compile_id, co_name, run_id, rank
    FROM selected WHERE attempts - 1 > coalesce(json_array_length(restart_reasons), 0)
)
SELECT kind, type, reason, user_frame, count(*) AS times, nullif(array_join(array_sort(collect_set(CAST(co_name AS STRING))), ','), '') AS functions,
       nullif(array_join(array_sort(collect_set(CAST(compile_id AS STRING))), ','), '') AS compile_ids, count(DISTINCT run_id) AS runs,
       nullif(array_join(array_sort(collect_set(CAST(rank AS STRING))), ','), '') AS ranks
FROM found GROUP BY kind, type, reason, user_frame
ORDER BY kind = 'restart', kind, times DESC
