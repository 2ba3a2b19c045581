-- Compile health per run (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/run_health.sql, in DuckDB's dialect: the views run_health and run_totals are not in
-- the Parquet export, so their definitions (schema/027_compiles_one_definition.sql, with compile_times) are written here.
-- :run  run id (NULL: every run)
WITH compile_times AS (  -- the view compile_times (schema/027_compiles_one_definition.sql), not in the Parquet export
    SELECT c.id AS compile, c.run_id, c.source_id, c.rank, c.compile_id, c.status,
           coalesce(c.duration_s, f.s) AS frames_s, coalesce(b.s, k.s) AS backward_s,
           CASE WHEN coalesce(c.duration_s, f.s) IS NOT NULL OR coalesce(b.s, k.s) IS NOT NULL
                THEN coalesce(c.duration_s, f.s, 0) + coalesce(b.s, k.s, 0) END AS compile_time_s
    FROM compiles c
    LEFT JOIN (SELECT compile, sum(duration_us) / 1e6 AS s FROM chromium_events
               WHERE name = 'entire_frame_compile' AND ph = 'X' GROUP BY compile) f ON f.compile = c.id
    LEFT JOIN (SELECT compile, sum(duration_us) / 1e6 AS s FROM metrics
               WHERE kind = 'bwd_compilation_metrics' GROUP BY compile) b ON b.compile = c.id
    LEFT JOIN (SELECT compile, sum(duration_us) / 1e6 AS s FROM chromium_events
               WHERE name = 'entire_backward_compile' AND ph = 'X' GROUP BY compile) k ON k.compile = c.id
    WHERE c.compile_id != '-/-' AND c.status != 'none' AND ($run IS NULL OR c.run_id = $run)
), per_run AS (
    SELECT c.run_id, count(t.compile) AS compiles, count(CASE WHEN c.frame_compile_id > 0 THEN t.compile END) AS recompiles,
           count_if(c.status = 'error') AS failures, coalesce(sum(c.graph_breaks), 0) AS graph_breaks,
           coalesce(sum(greatest(c.attempts - 1, coalesce(json_array_length(c.restart_reasons), 0))), 0) AS restarts,
           round(sum(t.compile_time_s), 3) AS compile_time_s, round(sum(t.backward_s), 3) AS backward_time_s
    FROM compiles c LEFT JOIN compile_times t ON t.compile = c.id
    WHERE $run IS NULL OR c.run_id = $run
    GROUP BY c.run_id
), timed AS (
    SELECT c.run_id,
           round(sum(CASE WHEN m.kind = 'compilation_metrics' THEN m.backend_compile_time_s END), 3) AS aot_time_s,
           round(sum(CASE WHEN m.kind = 'compilation_metrics' THEN m.inductor_compile_time_s END), 3) AS inductor_time_s,
           round(sum(CASE WHEN m.kind IN ('compilation_metrics', 'bwd_compilation_metrics')
                          THEN CAST(nullif(regexp_extract(m.other, '"compile_time_autotune_time_us":(-?[0-9][0-9.eE+-]*)', 1), '')
                                    AS DOUBLE) END) / 1e6, 3) AS autotune_time_s,
           sum(CASE WHEN m.kind = 'compilation_metrics' THEN m.guard_count END) AS guards
    FROM compiles c JOIN metrics m ON m.compile = c.id
    WHERE $run IS NULL OR c.run_id = $run
    GROUP BY c.run_id
), cached AS (
    SELECT c.run_id, count(*) AS cache_lookups, count_if(e.result = 'hit') AS cache_hits,
           count_if(e.result = 'miss') AS cache_misses, count_if(e.result = 'bypass') AS cache_bypasses,
           count_if(e.cache IN ('fx_graph', 'fx_graph_bundled') AND e.result = 'hit') AS fx_graph_hits,
           count_if(e.cache IN ('fx_graph', 'fx_graph_bundled') AND e.result = 'miss') AS fx_graph_misses,
           count_if(e.cache = 'aotautograd' AND e.result = 'hit') AS aotautograd_hits,
           count_if(e.cache = 'aotautograd' AND e.result = 'miss') AS aotautograd_misses
    FROM compiles c JOIN cache_events e ON e.compile = c.id
    WHERE $run IS NULL OR c.run_id = $run
    GROUP BY c.run_id
)
SELECT p.run_id, r.label, r.start_time, r.torch_version, p.compiles, p.recompiles, p.failures, p.graph_breaks,
       p.restarts, p.compile_time_s, t.aot_time_s, t.inductor_time_s, p.backward_time_s, t.autotune_time_s, t.guards,
       coalesce(k.cache_lookups, 0) AS cache_lookups, coalesce(k.cache_hits, 0) AS cache_hits,
       coalesce(k.cache_misses, 0) AS cache_misses, coalesce(k.cache_bypasses, 0) AS cache_bypasses,
       coalesce(k.fx_graph_hits, 0) AS fx_graph_hits, coalesce(k.fx_graph_misses, 0) AS fx_graph_misses,
       coalesce(k.aotautograd_hits, 0) AS aotautograd_hits, coalesce(k.aotautograd_misses, 0) AS aotautograd_misses
FROM per_run p JOIN runs r ON r.id = p.run_id
LEFT JOIN timed t ON t.run_id = p.run_id
LEFT JOIN cached k ON k.run_id = p.run_id
ORDER BY r.start_time, p.run_id
