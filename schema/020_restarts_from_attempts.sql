-- tlindex schema, migration 020: a run's restarts counted from its compiles' attempts (issue 47). A compile whose
-- analysis restarted and then failed logs attempt 0 and attempt 1 but no restart_reasons (torch's failure path):
-- counted from the reasons alone it had no restart, while its compile page said "attempts: 2" and the graph-breaks
-- page charged it the restart's time. Each compile now counts its attempts after the first, or its restart
-- reasons when they are more. The rest of the view is 013's.

DROP VIEW IF EXISTS run_health;

CREATE VIEW run_health AS
SELECT t.run_id,                                               -- the run
       (SELECT label FROM runs WHERE id = t.run_id) AS label, -- its label
       (SELECT start_time FROM runs WHERE id = t.run_id) AS start_time, -- its first record's time (the trend's order)
       (SELECT torch_version FROM runs WHERE id = t.run_id) AS torch_version, -- the torch version it ran
       coalesce(t.compiles, 0) AS compiles, -- compilations, not counting [-/-] (run_totals)
       coalesce(t.recompiles, 0) AS recompiles, -- compiles of a frame compiled before (run_totals)
       coalesce(t.failures, 0) AS failures, -- compiles that failed (run_totals)
       coalesce(t.graph_breaks, 0) AS graph_breaks, -- graph breaks of all its compiles (run_totals)
       (SELECT coalesce(sum(max(c.attempts - 1, coalesce(json_array_length(c.restart_reasons), 0))), 0) FROM compiles c
        WHERE c.run_id = t.run_id) AS restarts,                -- times Dynamo restarted an analysis: each compile's attempts after its first, or its restart reasons when more (torch's failure path logs attempts without reasons)
       t.compile_time_s,                                       -- Dynamo's whole-frame compile time, the backend's included: entire_frame_compile_time_s, which torch 2.13 also logs as dynamo_cumulative_compile_time_us (run_totals)
       (SELECT round(sum(m.backend_compile_time_s), 3) FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind = 'compilation_metrics') AS aot_time_s, -- AOTAutograd, Inductor included (backend_compile_time_s, logged also as aot_autograd_cumulative_compile_time_us)
       (SELECT round(sum(m.inductor_compile_time_s), 3) FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind = 'compilation_metrics') AS inductor_time_s, -- Inductor on the forward graphs (inductor_compile_time_s, logged also as inductor_cumulative_compile_time_us)
       (SELECT round(sum(m.duration_us) / 1e6, 3) FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind = 'bwd_compilation_metrics') AS backward_time_s, -- backward graphs, compiled at the first backward call (bwd_compilation_metrics: backward_cumulative_compile_time_us)
       (SELECT round(sum(CASE WHEN json_type(m.other, '$.compile_time_autotune_time_us') IN ('integer', 'real')
                              THEN json_extract(m.other, '$.compile_time_autotune_time_us') END) / 1e6, 3)
        FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind IN ('compilation_metrics', 'bwd_compilation_metrics')) AS autotune_time_s, -- autotuning at compile time (compile_time_autotune_time_us, NULL when not logged, as on CPU)
       (SELECT sum(m.guard_count) FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind = 'compilation_metrics') AS guards, -- guards installed by its compiles (guard_count)
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id) AS cache_lookups,            -- cache lookups of every cache (cache_events)
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.result = 'hit') AS cache_hits, -- hits of every cache
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.result = 'miss') AS cache_misses, -- misses of every cache
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.result = 'bypass') AS cache_bypasses, -- lookups that bypassed a cache
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache = 'fx_graph' AND e.result = 'hit') AS fx_graph_hits, -- Inductor's FX-graph cache: hits
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache = 'fx_graph' AND e.result = 'miss') AS fx_graph_misses, -- Inductor's FX-graph cache: misses
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache = 'aotautograd' AND e.result = 'hit') AS aotautograd_hits, -- AOTAutograd's cache: hits
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache = 'aotautograd' AND e.result = 'miss') AS aotautograd_misses -- AOTAutograd's cache: misses
FROM run_totals t;
