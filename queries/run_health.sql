-- Compile health per run
-- Each run's compile health, oldest first, as `tlindex trend` shows it and its CI gate judges it (the view
-- run_health: one definition): compiles, recompiles, failures, graph breaks, restarts, compile time (Dynamo's
-- whole frame, AOTAutograd and Inductor within it, the backward apart, autotuning when logged, in seconds),
-- guards, cache lookups, hits, misses and bypasses (all caches, then the FX-graph and AOTAutograd caches).
-- Asked of every run, it reads each run's row stored once (run_health_stored) while current, and computes the others.
-- :run  run id (empty: every run)
WITH fresh AS MATERIALIZED (  -- every run's: the runs whose stored row is current (run_answers_fresh)
    SELECT run_id FROM run_answers_fresh WHERE coalesce(:run, '') = ''
), computed AS (
    -- from the raw tables: the run asked (the view reads that run's rows only), else every run not stored
    SELECT * FROM run_health WHERE run_id = :run
    UNION ALL
    SELECT * FROM run_health WHERE coalesce(:run, '') = '' AND run_id NOT IN (SELECT run_id FROM fresh)
)
-- stored per run (tlindex.answers.derived): the rows of `computed`, in run_health_stored
SELECT * FROM computed
UNION ALL
SELECT r.id, r.label, r.start_time, r.torch_version, s.compiles, s.recompiles, s.failures, s.graph_breaks,
       s.restarts, s.compile_time_s, s.aot_time_s, s.inductor_time_s, s.backward_time_s, s.autotune_time_s, s.guards,
       s.cache_lookups, s.cache_hits, s.cache_misses, s.cache_bypasses, s.fx_graph_hits, s.fx_graph_misses,
       s.aotautograd_hits, s.aotautograd_misses
FROM fresh f CROSS JOIN run_health_stored s CROSS JOIN runs r WHERE s.run_id = f.run_id AND r.id = s.run_id
ORDER BY start_time, run_id
