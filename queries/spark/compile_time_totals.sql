-- Compile time per run and rank (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/compile_time_totals.sql, in Spark SQL: the view compile_times is not in the
-- Parquet export, so its definition is written here.
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
    WHERE c.compile_id != '-/-' AND c.status != 'none' AND (:run IS NULL OR c.run_id = :run)
), per_rank AS (
    SELECT run_id, rank, count(*) AS compiles, sum(compile_time_s) AS total_s, sum(frames_s) AS frames_s,
           sum(backward_s) AS backward_s, max(compile_time_s) AS slowest_s
    FROM compile_times GROUP BY run_id, rank
)
SELECT r.label AS run, p.run_id, p.rank, p.compiles, round(p.total_s, 3) AS total_s, round(p.frames_s, 3) AS frames_s,
       round(p.backward_s, 3) AS backward_s, round(p.slowest_s, 3) AS slowest_s,
       round(p.total_s - min(p.total_s) OVER (PARTITION BY p.run_id), 3) AS behind_fastest_rank_s
FROM per_rank p JOIN runs r ON r.id = p.run_id
ORDER BY p.run_id, p.rank
