-- Compile time per run and rank
-- Total compile time (dynamo spans plus backward compiles, seconds) per run and rank, the
-- number of compiles and the slowest one, and how far each rank is from its run's fastest.
-- Asked of every run, it reads each run's rows stored once (run_compile_time_totals) while current, and computes
-- the others'.
-- :run  run id (empty: every run)
WITH fresh AS MATERIALIZED (  -- every run's: the runs whose stored rows are current (run_answers_fresh)
    SELECT run_id FROM run_answers_fresh WHERE coalesce(:run, '') = ''
), chosen AS (
    SELECT id, run_id, rank FROM compiles
    WHERE run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL
                     SELECT id FROM runs WHERE coalesce(:run, '') = '' AND id NOT IN (SELECT run_id FROM fresh))
), per_compile AS (
    -- one run's question, or the runs not stored, read their compiles' spans only; when no run is stored, every
    -- run's are read in one pass
    SELECT compile, sum(CASE WHEN name IN ('dynamo', 'entire_backward_compile') THEN duration_us END) / 1e6 AS s
    FROM chromium_events WHERE ph = 'X' AND compile IN (SELECT id FROM chosen)
      AND (coalesce(:run, '') != '' OR EXISTS (SELECT 1 FROM fresh))
    GROUP BY compile
    UNION ALL
    SELECT compile, sum(CASE WHEN name IN ('dynamo', 'entire_backward_compile') THEN duration_us END) / 1e6 AS s
    FROM chromium_events WHERE ph = 'X' AND compile IS NOT NULL
      AND coalesce(:run, '') = '' AND NOT EXISTS (SELECT 1 FROM fresh)
    GROUP BY compile
), computed AS (
    SELECT c.run_id, c.rank, count(*) AS compiles, sum(p.s) AS total_s, max(p.s) AS slowest_s
    FROM chosen c LEFT JOIN per_compile p ON p.compile = c.id
    GROUP BY c.run_id, c.rank
),
-- stored per run (tlindex.answers.derived): the rows of `computed`, in run_compile_time_totals
per_rank AS (
    SELECT * FROM computed
    UNION ALL
    SELECT s.run_id, s.rank, s.compiles, s.total_s, s.slowest_s
    FROM fresh f CROSS JOIN run_compile_time_totals s WHERE s.run_id = f.run_id
)
SELECT r.label AS run, p.run_id, p.rank, p.compiles, round(p.total_s, 3) AS total_s,
       round(p.slowest_s, 3) AS slowest_s,
       round(p.total_s - min(p.total_s) OVER (PARTITION BY p.run_id), 3) AS behind_fastest_rank_s
FROM per_rank p JOIN runs r ON r.id = p.run_id
ORDER BY p.run_id, p.rank
