-- Graph breaks that cost most (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/top_graph_breaks.sql, in Spark SQL.
-- :run  run id (NULL: every run)
-- :limit  groups (default 50)
WITH before_restart AS (
    SELECT compile, sum(dynamo_time_before_restart_s) AS s FROM metrics
    WHERE kind = 'compilation_metrics' GROUP BY compile
), breaks AS (
    SELECT substr(g.user_file, 1, 1000) AS user_file, g.user_line, c.id AS compile, c.run_id, c.co_name, r.start_time,
           CASE WHEN c.attempts > 1 AND c.graph_breaks > 0 THEN b.s / c.graph_breaks END AS restart_s,
           CASE WHEN g.reason LIKE 'Encountered graph break when attempting%'
                     AND instr(substr(g.reason, 1, 16384), chr(10) || chr(10)) > 0
                THEN substr(g.reason, instr(g.reason, chr(10) || chr(10)) + 2, 16384)
                ELSE substr(g.reason, 1, 16384) END AS body,
           CASE WHEN instr(g.reason, '/gb/gb') > 0 THEN substr(g.reason, instr(g.reason, '/gb/gb') + 4, 6) END AS gb
    FROM graph_break_events g JOIN compiles c ON c.id = g.compile JOIN runs r ON r.id = c.run_id
    LEFT JOIN before_restart b ON b.compile = c.id
    WHERE :run IS NULL OR c.run_id = :run
), parsed AS (
    SELECT *, trim(substr(body, 1, instr(body || chr(10), chr(10)) - 1)) AS title,
           CASE WHEN instr(body, 'Explanation: ') > 0
                THEN substr(body, instr(body, 'Explanation: ') + 13) END AS explained,
           CASE WHEN instr(body, 'Hint: ') > 0 THEN substr(body, instr(body, 'Hint: ')) END AS hinted
    FROM breaks
), explaining AS (
    SELECT *, substr(explained, 1, instr(explained || chr(10) || '  Developer debug context:',
                                         chr(10) || '  Developer debug context:') - 1) AS explained_only
    FROM parsed
), typed AS (
    SELECT *, coalesce(gb, '') || '|' || title || '|' || coalesce(user_file, '') || ':'
              || coalesce(CAST(user_line AS STRING), '') AS key,
           trim(BOTH ' ' || chr(10) FROM substr(explained_only, 1, instr(explained_only || chr(10) || '  Hint: ', chr(10) || '  Hint: ') - 1)) AS explanation,
           replace(replace(substr(hinted, 1, instr(hinted || chr(10) || chr(10), chr(10) || chr(10)) - 1),
                           'Hint: ', ''), chr(10) || '  ', chr(10)) AS hints
    FROM explaining
), placed AS (
    SELECT *, first_value(run_id) OVER (PARTITION BY key ORDER BY start_time, run_id
                                        ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS first_run,
           last_value(run_id) OVER (PARTITION BY key ORDER BY start_time, run_id
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS last_run
    FROM typed
)
SELECT gb, title, user_file || ':' || CAST(user_line AS STRING) AS location, count(*) AS breaks,
       count(DISTINCT run_id) AS runs, min(first_run) AS first_run, min(last_run) AS last_run,
       round(coalesce(sum(restart_s), 0), 3) AS restart_s, min(compile) AS compile,
       nullif(array_join(array_sort(collect_set(substr(CAST(co_name AS STRING), 1, 200))), ','), '') AS functions, min(explanation) AS explanation,
       min(hints) AS hints
FROM placed
GROUP BY key, gb, title, user_file, user_line
ORDER BY restart_s DESC, breaks DESC, location, title
LIMIT coalesce(:limit, 50)
