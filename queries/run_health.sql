-- Compile health per run
-- Each run's compile health, oldest first, as `tlindex trend` shows it and its CI gate judges it (the view
-- run_health: one definition): compiles, recompiles, failures, graph breaks, restarts, compile time (Dynamo's
-- whole frame, AOTAutograd and Inductor within it, the backward apart, autotuning when logged, in seconds),
-- guards, cache lookups, hits, misses and bypasses (all caches, then the FX-graph and AOTAutograd caches).
-- :run  run id (empty: every run)
SELECT * FROM run_health WHERE run_id = :run  -- one run: the view reads that run's rows only
UNION ALL
SELECT * FROM run_health WHERE coalesce(:run, '') = ''
ORDER BY start_time, run_id
