-- Compile time
-- The slowest compiles, with their compile time (seconds, as the view compile_times defines it: the frame's and its
-- backward's) and the phases of it from their chromium spans: frames_s is tracing and compiling the frame (Dynamo's
-- whole compile of it), of which tracing (bytecode_tracing), guards (build_guards) and backend (backend_compile)
-- are disjoint parts; aot, inductor and codegen are the spans of those names inside backend; backward_s is the
-- separate, later backward compile.
-- Needs :run (the phases of every compile of a database of many runs would be summed from every chromium event).
-- :run  run id
-- :rank  rank (empty: every rank)
-- :limit  rows (default 50)
WITH chosen AS (
    SELECT compile, run_id, rank, compile_id, status, frames_s, backward_s, compile_time_s FROM compile_times
    WHERE run_id IN (SELECT id FROM runs WHERE id = :run)
      AND (coalesce(:rank, '') = '' OR rank = :rank)
), spans AS (  -- the run's spans only
    SELECT compile, name, ts_us, duration_us FROM chromium_events
    WHERE ph = 'X' AND compile IN (SELECT compile FROM chosen)
), top AS (
    SELECT compile,
           sum(CASE WHEN name = 'bytecode_tracing' THEN duration_us END) / 1e6 AS tracing_s,
           sum(CASE WHEN name = 'build_guards' THEN duration_us END) / 1e6 AS guards_s,
           sum(CASE WHEN name = 'backend_compile' THEN duration_us END) / 1e6 AS backend_s
    FROM spans GROUP BY compile
), nested AS (
    SELECT s.compile,
           sum(CASE WHEN s.name = 'create_aot_dispatcher_function' THEN s.duration_us END) / 1e6 AS aot_s,
           sum(CASE WHEN s.name = 'inductor_compile' THEN s.duration_us END) / 1e6 AS inductor_s,
           sum(CASE WHEN s.name = 'code_gen' THEN s.duration_us END) / 1e6 AS codegen_s
    FROM spans s JOIN spans b ON b.compile = s.compile AND b.name = 'backend_compile'
        AND s.ts_us >= b.ts_us AND s.ts_us + s.duration_us <= b.ts_us + b.duration_us
    WHERE s.name IN ('create_aot_dispatcher_function', 'inductor_compile', 'code_gen')
    GROUP BY s.compile
)
SELECT c.compile, c.run_id, c.rank, c.compile_id, k.co_name, c.status,
       round(c.compile_time_s, 3) AS total_s, round(c.frames_s, 3) AS frames_s, round(t.tracing_s, 3) AS tracing_s,
       round(t.guards_s, 3) AS guards_s, round(t.backend_s, 3) AS backend_s, round(n.aot_s, 3) AS aot_s,
       round(n.inductor_s, 3) AS inductor_s, round(n.codegen_s, 3) AS codegen_s, round(c.backward_s, 3) AS backward_s
FROM chosen c JOIN compiles k ON k.id = c.compile LEFT JOIN top t ON t.compile = c.compile
LEFT JOIN nested n ON n.compile = c.compile
ORDER BY coalesce(c.compile_time_s, 0) DESC, c.compile
LIMIT coalesce(nullif(:limit, ''), 50)
