-- Compile time (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/compile_time.sql, in Spark SQL: the view compile_times is
-- not in the Parquet export, so its definition is written here.
-- :run  run id
-- :rank  rank (NULL: every rank)
-- :limit  rows (default 50)
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
    WHERE c.compile_id != '-/-' AND c.status != 'none' AND (:run IS NULL OR c.run_id = :run)
), chosen AS (
    SELECT compile, run_id, rank, compile_id, status, frames_s, backward_s, compile_time_s FROM compile_times
    WHERE run_id IN (SELECT id FROM runs WHERE id = :run)
      AND (:rank IS NULL OR rank = :rank)
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
LIMIT coalesce(:limit, 50)
