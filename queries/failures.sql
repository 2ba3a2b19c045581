-- Failures and restarts
-- Failed compiles (fail type, reason, user frame; kind recompile_limit for a function that hit the recompile limit,
-- not a failed compile) and analysis restarts (restart reasons, and the attempts
-- past them, which torch's failure path logs without a reason), each distinct one counted with the compile
-- ids it hit: the restarts counted here are run_health's.
-- :run  run id (empty: every run)
-- :rank  rank (empty: every rank)
WITH selected AS (
    SELECT * FROM compiles
    WHERE (run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')) AND (coalesce(:rank, '') = '' OR rank = :rank)
), found AS (
    SELECT CASE WHEN fail_reason LIKE 'Dynamo recompile limit exceeded%' OR fail_type = 'FailOnRecompileLimitHit'
                THEN 'recompile_limit' ELSE 'failure' END AS kind, fail_type AS type, fail_reason AS reason,
           fail_user_frame_filename || ':' || fail_user_frame_lineno AS user_frame, id, compile_id, co_name, run_id, rank
    FROM selected WHERE fail_type IS NOT NULL
    UNION ALL
    SELECT 'restart', 'RestartAnalysis', j.value, NULL, c.id, c.compile_id, c.co_name, c.run_id, c.rank
    FROM selected c, json_each(c.restart_reasons) j WHERE c.restart_reasons IS NOT NULL
    UNION ALL  -- a compile with attempts past the reasons logged (torch's failure path logs none)
    SELECT 'restart', 'RestartAnalysis', 'no reason logged (' || c.attempts || ' attempts)', NULL, c.id,
           c.compile_id, c.co_name, c.run_id, c.rank
    FROM selected c WHERE c.attempts - 1 > coalesce(json_array_length(c.restart_reasons), 0)
)
SELECT kind, type, reason, user_frame, count(*) AS times, group_concat(DISTINCT co_name) AS functions,
       group_concat(DISTINCT compile_id) AS compile_ids, count(DISTINCT run_id) AS runs,
       group_concat(DISTINCT rank) AS ranks
FROM found GROUP BY kind, type, reason, user_frame
ORDER BY kind = 'restart', kind, times DESC
