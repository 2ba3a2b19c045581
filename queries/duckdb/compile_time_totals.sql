-- Compile time per run and rank (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/compile_time_totals.sql, in DuckDB's dialect (python -m tlindex.formats.dialects).
-- :run  run id (NULL: every run)
WITH chosen AS (
    SELECT id, run_id, rank FROM compiles WHERE run_id IN (SELECT id FROM runs WHERE id = $run UNION ALL SELECT id FROM runs WHERE $run IS NULL)
), per_compile AS (
    -- one run's question reads that run's spans only; every run's reads them all in one pass
    SELECT compile, sum(CASE WHEN name IN ('dynamo', 'entire_backward_compile') THEN duration_us END) / 1e6 AS s
    FROM chromium_events WHERE ph = 'X' AND compile IN (SELECT id FROM chosen) AND coalesce($run, '') != ''
    GROUP BY compile
    UNION ALL
    SELECT compile, sum(CASE WHEN name IN ('dynamo', 'entire_backward_compile') THEN duration_us END) / 1e6 AS s
    FROM chromium_events WHERE ph = 'X' AND compile IS NOT NULL AND $run IS NULL
    GROUP BY compile
), per_rank AS (
    SELECT c.run_id, c.rank, count(*) AS compiles, sum(p.s) AS total_s, max(p.s) AS slowest_s
    FROM chosen c LEFT JOIN per_compile p ON p.compile = c.id
    GROUP BY c.run_id, c.rank
)
SELECT r.label AS run, p.run_id, p.rank, p.compiles, round(p.total_s, 3) AS total_s,
       round(p.slowest_s, 3) AS slowest_s,
       round(p.total_s - min(p.total_s) OVER (PARTITION BY p.run_id), 3) AS behind_fastest_rank_s
FROM per_rank p JOIN runs r ON r.id = p.run_id
ORDER BY p.run_id, p.rank
