-- Graph breaks that cost most
-- Graph breaks across runs, grouped by type and user code location: the type is torch's graph-break id
-- (gb0025, from the link torch 2.13 appends) and its title (the line after the "Encountered graph break"
-- header), else the reason's first informative line. Each group says how often it broke, in how many runs
-- (the first and the last, in time order), the compile time thrown away by the analysis restarts it caused
-- (dynamo_time_before_restart_s of the compiles it broke, shared among a compile's breaks) and torch's own
-- Explanation (whole, with the lines saying which code) and Hints. The costliest first, then the most frequent.
-- What is read of a reason is its first 16,384 characters after the header (a log's reason can be 64 MiB: no row,
-- key or aggregate holds more).
-- Asked of every run, it sums each run's groups stored once (run_graph_break_groups) while current, and computes the
-- others'.
-- :run  run id (empty: every run)
-- :limit  groups (default 50)
WITH fresh AS MATERIALIZED (  -- every run's: the runs whose stored groups are current (run_answers_fresh)
    SELECT run_id FROM run_answers_fresh WHERE coalesce(:run, '') = ''
), breaks AS MATERIALIZED (  -- computed once: each later reference would read the whole reason again
    SELECT substr(g.user_file, 1, 1000) AS user_file, g.user_line, c.id AS compile, c.run_id, c.co_name,
           CASE WHEN c.attempts > 1 AND c.graph_breaks > 0
                THEN (SELECT sum(m.dynamo_time_before_restart_s) FROM metrics m
                      WHERE m.compile = c.id AND m.kind = 'compilation_metrics') / c.graph_breaks END AS restart_s,
           CASE WHEN g.reason LIKE 'Encountered graph break when attempting%'
                     AND instr(substr(g.reason, 1, 16384), char(10) || char(10)) > 0
                THEN substr(g.reason, instr(g.reason, char(10) || char(10)) + 2, 16384)
                ELSE substr(g.reason, 1, 16384) END AS body,
           CASE WHEN instr(g.reason, '/gb/gb') > 0 THEN substr(g.reason, instr(g.reason, '/gb/gb') + 4, 6) END AS gb
    FROM graph_break_events g JOIN compiles c ON c.id = g.compile
    WHERE c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL
                       SELECT id FROM runs WHERE coalesce(:run, '') = '' AND id NOT IN (SELECT run_id FROM fresh))
), parsed AS (
    SELECT *, trim(substr(body, 1, instr(body || char(10), char(10)) - 1)) AS title,
           CASE WHEN instr(body, 'Explanation: ') > 0
                THEN substr(body, instr(body, 'Explanation: ') + 13) END AS explained,
           CASE WHEN instr(body, 'Hint: ') > 0 THEN substr(body, instr(body, 'Hint: ')) END AS hinted
    FROM breaks
), explaining AS (  -- the Explanation whole: up to the first Hint, else up to the developer context
    SELECT *, substr(explained, 1, instr(explained || char(10) || '  Developer debug context:',
                                         char(10) || '  Developer debug context:') - 1) AS explained_only
    FROM parsed
), typed AS (
    SELECT *, coalesce(gb, '') || '|' || title || '|' || coalesce(user_file, '') || ':' || coalesce(user_line, '') AS key,
           trim(substr(explained_only, 1, instr(explained_only || char(10) || '  Hint: ', char(10) || '  Hint: ') - 1),
                ' ' || char(10)) AS explanation,
           replace(replace(substr(hinted, 1, instr(hinted || char(10) || char(10), char(10) || char(10)) - 1),
                           'Hint: ', ''), char(10) || '  ', char(10)) AS hints
    FROM explaining
), computed AS (  -- each run's groups
    SELECT run_id, key, gb, title, user_file, user_line, count(*) AS breaks, sum(restart_s) AS restart_s,
           min(compile) AS compile, min(explanation) AS explanation, min(hints) AS hints
    FROM typed GROUP BY run_id, key, gb, title, user_file, user_line
), computed_functions AS (  -- and the functions each broke in
    SELECT DISTINCT run_id, key, substr(co_name, 1, 200) AS function FROM typed
),
-- stored per run (tlindex.answers.derived): the rows of `computed` and `computed_functions`, in
-- run_graph_break_groups and run_graph_break_functions
groups AS (
    SELECT * FROM computed
    UNION ALL
    SELECT s.* FROM fresh f CROSS JOIN run_graph_break_groups s WHERE s.run_id = f.run_id
), functions AS (  -- each group's functions, in order of name
    SELECT key, group_concat(function) AS functions
    FROM (SELECT DISTINCT key, function FROM (
              SELECT key, function FROM computed_functions
              UNION ALL
              SELECT s.key, s.function FROM fresh f CROSS JOIN run_graph_break_functions s WHERE s.run_id = f.run_id)
          ORDER BY key, function)
    GROUP BY key
), placed AS (
    SELECT g.*, first_value(g.run_id) OVER (PARTITION BY g.key ORDER BY r.start_time, g.run_id
                                            ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS first_run,
           last_value(g.run_id) OVER (PARTITION BY g.key ORDER BY r.start_time, g.run_id
                                      ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS last_run
    FROM groups g JOIN runs r ON r.id = g.run_id
)
SELECT p.gb, p.title, p.user_file || ':' || p.user_line AS location, sum(p.breaks) AS breaks, count(*) AS runs,
       min(p.first_run) AS first_run, min(p.last_run) AS last_run, round(coalesce(sum(p.restart_s), 0), 3) AS restart_s,
       min(p.compile) AS compile, min(f.functions) AS functions, min(p.explanation) AS explanation,
       min(p.hints) AS hints
FROM placed p LEFT JOIN functions f ON f.key = p.key
GROUP BY p.key, p.gb, p.title, p.user_file, p.user_line
ORDER BY restart_s DESC, breaks DESC, location, title
LIMIT coalesce(nullif(:limit, ''), 50)
