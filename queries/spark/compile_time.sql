-- Compile time (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/compile_time.sql, in Spark SQL (python -m tlindex.formats.dialects).
-- :run  run id
-- :rank  rank (NULL: every rank)
-- :limit  rows (default 50)
WITH chosen AS (
    SELECT id FROM compiles
    WHERE run_id IN (SELECT id FROM runs WHERE id = :run)
      AND (:rank IS NULL OR rank = :rank)
), spans AS (  -- the run's spans only
    SELECT compile, name, ts_us, duration_us FROM chromium_events
    WHERE ph = 'X' AND compile IN (SELECT id FROM chosen)
), top AS (
    SELECT compile,
           sum(CASE WHEN name = 'dynamo' THEN duration_us END) / 1e6 AS total_s,
           sum(CASE WHEN name = 'bytecode_tracing' THEN duration_us END) / 1e6 AS tracing_s,
           sum(CASE WHEN name = 'build_guards' THEN duration_us END) / 1e6 AS guards_s,
           sum(CASE WHEN name = 'backend_compile' THEN duration_us END) / 1e6 AS backend_s,
           sum(CASE WHEN name = 'entire_backward_compile' THEN duration_us END) / 1e6 AS backward_s
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
SELECT c.id AS compile, c.run_id, c.rank, c.compile_id, c.co_name, c.status,
       round(t.total_s, 3) AS total_s, round(t.tracing_s, 3) AS tracing_s, round(t.guards_s, 3) AS guards_s,
       round(t.backend_s, 3) AS backend_s, round(n.aot_s, 3) AS aot_s, round(n.inductor_s, 3) AS inductor_s,
       round(n.codegen_s, 3) AS codegen_s, round(t.backward_s, 3) AS backward_s,
       round(c.duration_s, 3) AS metrics_total_s
FROM compiles c JOIN top t ON t.compile = c.id LEFT JOIN nested n ON n.compile = c.id
WHERE c.id IN (SELECT id FROM chosen)
ORDER BY coalesce(t.total_s, 0) + coalesce(t.backward_s, 0) DESC
LIMIT coalesce(:limit, 50)
