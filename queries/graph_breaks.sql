-- Graph breaks
-- Distinct graph-break reasons with the user file:line where they happened, how many
-- times, in which functions and compile ids (tlparse lists every duplicate).
-- :run  run id (empty: every run)
-- :rank  rank (empty: every rank)
SELECT g.reason, g.user_file || ':' || g.user_line AS location, count(*) AS times,
       group_concat(DISTINCT c.co_name) AS functions, group_concat(DISTINCT c.compile_id) AS compile_ids,
       count(DISTINCT c.run_id) AS runs, group_concat(DISTINCT c.rank) AS ranks
FROM graph_break_events g JOIN compiles c ON c.id = g.compile
WHERE (c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')) AND (coalesce(:rank, '') = '' OR c.rank = :rank)
GROUP BY g.reason, g.user_file, g.user_line
ORDER BY times DESC, location
