-- Compile time
-- The slowest compiles, with phase times from their chromium spans (seconds): tracing
-- (bytecode_tracing), guards (build_guards) and backend (backend_compile) are disjoint
-- parts of total (the dynamo span); aot, inductor and codegen are nested inside backend;
-- backward is the separate backward compile. metrics_total_s is the compile's own
-- entire_frame_compile_time_s.
-- :run  run id (empty: every run)
-- :rank  rank (empty: every rank)
-- :limit  rows (default 50)
WITH spans AS (
    SELECT compile,
           sum(CASE WHEN name = 'dynamo' THEN duration_us END) / 1e6 AS total_s,
           sum(CASE WHEN name = 'bytecode_tracing' THEN duration_us END) / 1e6 AS tracing_s,
           sum(CASE WHEN name = 'build_guards' THEN duration_us END) / 1e6 AS guards_s,
           sum(CASE WHEN name = 'backend_compile' THEN duration_us END) / 1e6 AS backend_s,
           sum(CASE WHEN name = 'create_aot_dispatcher_function' THEN duration_us END) / 1e6 AS aot_s,
           sum(CASE WHEN name = 'inductor_compile' THEN duration_us END) / 1e6 AS inductor_s,
           sum(CASE WHEN name = 'code_gen' THEN duration_us END) / 1e6 AS codegen_s,
           sum(CASE WHEN name = 'entire_backward_compile' THEN duration_us END) / 1e6 AS backward_s
    FROM chromium_events WHERE ph = 'X' AND compile IS NOT NULL GROUP BY compile
)
SELECT c.id AS compile, c.run_id, c.rank, c.compile_id, c.co_name, c.status,
       round(s.total_s, 3) AS total_s, round(s.tracing_s, 3) AS tracing_s, round(s.guards_s, 3) AS guards_s,
       round(s.backend_s, 3) AS backend_s, round(s.aot_s, 3) AS aot_s, round(s.inductor_s, 3) AS inductor_s,
       round(s.codegen_s, 3) AS codegen_s, round(s.backward_s, 3) AS backward_s,
       round(c.duration_s, 3) AS metrics_total_s
FROM compiles c JOIN spans s ON s.compile = c.id
WHERE (coalesce(:run, '') = '' OR c.run_id = :run) AND (coalesce(:rank, '') = '' OR c.rank = :rank)
ORDER BY coalesce(s.total_s, 0) + coalesce(s.backward_s, 0) DESC
LIMIT coalesce(nullif(:limit, ''), 50)
