-- Cache behaviour
-- FX-graph and AOTAutograd cache hits, misses and bypasses per run and rank, with the
-- bypass reasons.
-- :run  run id (empty: every run)
SELECT c.run_id, c.rank, e.cache,
       sum(e.result = 'hit') AS hits, sum(e.result = 'miss') AS misses, sum(e.result = 'bypass') AS bypasses,
       group_concat(DISTINCT e.reason) AS bypass_reasons
FROM cache_events e JOIN compiles c ON c.id = e.compile
WHERE c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')
GROUP BY c.run_id, c.rank, e.cache
ORDER BY c.run_id, c.rank, e.cache
