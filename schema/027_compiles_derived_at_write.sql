-- tlindex schema, migration 027: one definition of a compile and of its compile time, read by every surface (issues
-- 64 and 65). A compile is a compile id Dynamo began (its dynamo_start) or finished (its compilation_metrics): not
-- tlparse's [-/-], not the compile context of a torch.export or AOTInductor (torch 2.15 gives their records a compile
-- id and no dynamo_start), not compiled autograd's captured graph ([!N]: it is compiled as the frames [!N/F/C]); their
-- rows keep their records and say status none. `missing` is said only of a compile that began and never ended. A
-- warm start from torch's caches logs no compilation_metrics, but the guards it loaded from them and the end of its
-- whole-frame span: it finished (ok). A compile's time is its frames' (entire_frame_compile_time_s) and its backward's, compiled lazily at
-- the first backward call under the forward's compile id (bwd_compilation_metrics): the view compile_times, which
-- run_totals, run_health and the canned queries read. A compile's span ends with its own last record: the spans the
-- next compile of its id opens before its dynamo_start, after torch._dynamo.reset(), are filed under no compile. The
-- statements below bring the rows an older tlindex stored to these rules; the step (derived_at_write) derives
-- every run again.

-- Every compile of every run, with its compile time in seconds: the one definition. The frames' time is
-- entire_frame_compile_time_s, else (a warm start logs no metrics) its entire_frame_compile span; the backward's is
-- its bwd_compilation_metrics, else its entire_backward_compile spans. Where both are logged they are equal.
CREATE VIEW compile_times AS
SELECT compile,                                                -- the compile (compiles.id)
       run_id,                                                 -- its run
       source_id,                                              -- its process
       rank,                                                   -- its rank
       compile_id,                                             -- its compile id
       status,                                                 -- its status (never none)
       frames_s,                                               -- tracing and compiling its frame (Dynamo's whole compile, the backend's included)
       backward_s,                                             -- compiling its backward graph, at the first backward call
       CASE WHEN frames_s IS NOT NULL OR backward_s IS NOT NULL
            THEN coalesce(frames_s, 0) + coalesce(backward_s, 0) END AS compile_time_s -- both: its compile time
FROM (
    SELECT c.id AS compile, c.run_id, c.source_id, c.rank, c.compile_id, c.status,
           coalesce(c.duration_s, (SELECT sum(e.duration_us) / 1e6 FROM chromium_events e
                                   WHERE e.compile = c.id AND e.name = 'entire_frame_compile' AND e.ph = 'X')) AS frames_s,
           coalesce((SELECT sum(m.duration_us) / 1e6 FROM metrics m
                     WHERE m.compile = c.id AND m.kind = 'bwd_compilation_metrics'),
                    (SELECT sum(e.duration_us) / 1e6 FROM chromium_events e
                     WHERE e.compile = c.id AND e.name = 'entire_backward_compile' AND e.ph = 'X')) AS backward_s
    FROM compiles c WHERE c.compile_id != '-/-' AND c.status != 'none'
);

DROP VIEW IF EXISTS run_health;

DROP VIEW IF EXISTS run_totals;

-- Each run's totals, as the run page, the runs page and `tlindex diff` show them: its compiles and their time
-- (compile_times), the failed ones (a failed export's compilation_metrics, in [-/-], too), the recompiles among its
-- compiles (frame_compile_id past 0), its graph breaks.
CREATE VIEW run_totals AS
SELECT c.run_id,                                               -- the run
       count(t.compile) AS compiles,                           -- compiles (compile_times: not [-/-], no export's context)
       sum(c.status = 'error') AS failures,                    -- compiles that failed
       count(CASE WHEN c.frame_compile_id > 0 THEN t.compile END) AS recompiles, -- compiles of a frame compiled before
       sum(c.graph_breaks) AS graph_breaks,                    -- graph breaks of all its compiles
       round(sum(t.compile_time_s), 3) AS compile_time_s,      -- seconds of compile time: frames and backward (compile_times)
       round(sum(t.backward_s), 3) AS backward_time_s          -- of which compiling backward graphs
FROM compiles c LEFT JOIN compile_times t ON t.compile = c.id GROUP BY c.run_id;

-- Each run's compile health (013, 020), its compile time and backward time from run_totals, FX-graph cache hits with
-- the bundled hits of a warm start.
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
       t.compile_time_s,                                       -- compile time: the frames' (Dynamo's whole compile of each, the backend's included) and their backward's (compile_times, run_totals)
       (SELECT round(sum(m.backend_compile_time_s), 3) FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind = 'compilation_metrics') AS aot_time_s, -- AOTAutograd, Inductor included (backend_compile_time_s, logged also as aot_autograd_cumulative_compile_time_us)
       (SELECT round(sum(m.inductor_compile_time_s), 3) FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind = 'compilation_metrics') AS inductor_time_s, -- Inductor on the forward graphs (inductor_compile_time_s, logged also as inductor_cumulative_compile_time_us)
       t.backward_time_s,                                      -- of which the backward graphs, compiled at the first backward call (compile_times, run_totals)
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
        WHERE c.run_id = t.run_id AND e.cache IN ('fx_graph', 'fx_graph_bundled') AND e.result = 'hit') AS fx_graph_hits, -- Inductor's FX-graph cache: hits (a warm start's bundled hits too)
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache IN ('fx_graph', 'fx_graph_bundled') AND e.result = 'miss') AS fx_graph_misses, -- Inductor's FX-graph cache: misses
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache = 'aotautograd' AND e.result = 'hit') AS aotautograd_hits, -- AOTAutograd's cache: hits
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache = 'aotautograd' AND e.result = 'miss') AS aotautograd_misses -- AOTAutograd's cache: misses
FROM run_totals t;

-- column compiles.status: ok, break (restarted), empty (no ops), error (fail_type) from its compilation_metrics; ok also for a warm start from torch's caches (no metrics: its guards loaded from them, its whole-frame span ended); missing: it began (dynamo_start) and never ended; none: no compile ([-/-] without compilation_metrics, a compile id with neither a dynamo_start nor compilation_metrics: an export's compile context)

-- No compile began: an export's or AOTInductor's compile context, compiled autograd's captured graph.
UPDATE compiles SET status = 'none' WHERE status = 'missing' AND dynamo_start IS NULL;

-- It began, loaded its guards from torch's caches, and its whole-frame span ended: a warm start (no metrics).
UPDATE compiles SET status = 'ok'
WHERE status = 'missing'
  AND EXISTS (SELECT 1 FROM chromium_events e WHERE e.compile = compiles.id AND e.name = 'precompile_load_guards'
              AND e.ph IN ('X', 'E'))
  AND EXISTS (SELECT 1 FROM chromium_events e WHERE e.compile = compiles.id AND e.name = 'entire_frame_compile'
              AND e.ph IN ('X', 'E'));

-- The file of the frame a compile without metrics compiled, from its dynamo_start's stack (a warm start pairs
-- with its cold start in `tlindex diff` by it).
UPDATE compiles SET co_filename = (SELECT f.filename FROM frames f WHERE f.envelope_id = compiles.dynamo_start
                                   AND f.stack = 'stack' ORDER BY f.depth DESC LIMIT 1)
WHERE co_filename IS NULL AND dynamo_start IS NOT NULL;

-- The spans the next compile of an id opened before its dynamo_start (after torch._dynamo.reset()), filed under the
-- compile that had finished: their span is the next compile's, their records no compile's (under their compile id,
-- as tlparse files them).
CREATE TEMP TABLE compiles_027_opened AS
SELECT e.id AS envelope, e.compile AS compile FROM chromium_events s JOIN envelopes e ON e.id = s.begin_envelope
WHERE s.name IN ('dynamo', 'entire_frame_compile') AND e.compile IS NOT NULL AND e.compile IS NOT s.compile
  AND e.compile_id != '-/-';

UPDATE envelopes SET compile = NULL WHERE id IN (SELECT envelope FROM temp.compiles_027_opened);

UPDATE compiles SET end_time = (SELECT max(e.time) FROM envelopes e WHERE e.compile = compiles.id),
                    envelope_count = (SELECT count(*) FROM envelopes e WHERE e.compile = compiles.id),
                    envelope_bytes = (SELECT coalesce(sum(e.envelope_bytes), 0) FROM envelopes e WHERE e.compile = compiles.id),
                    payload_bytes = (SELECT coalesce(sum(e.payload_bytes), 0) FROM envelopes e WHERE e.compile = compiles.id)
WHERE id IN (SELECT compile FROM temp.compiles_027_opened);

DROP TABLE temp.compiles_027_opened;

-- run_compile_time_totals says what its compile time is made of (derived again by the step).
DROP TABLE run_compile_time_totals;

-- Each run's compile time per rank (the canned query compile_time_totals: its compiles' compile_times).
CREATE TABLE run_compile_time_totals (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    rank INTEGER,                        -- the rank (NULL: a process without one)
    compiles INTEGER NOT NULL,           -- its compiles
    total_s REAL,                        -- their compile time (compile_times), seconds
    frames_s REAL,                       -- of which tracing and compiling their frames
    backward_s REAL,                     -- and compiling their backward graphs
    slowest_s REAL                       -- the slowest compile's
);

CREATE INDEX run_compile_time_totals_run ON run_compile_time_totals(run_id);
