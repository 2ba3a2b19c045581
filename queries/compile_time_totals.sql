-- Compile time per run and rank
-- Total compile time per run and rank (seconds: tracing and compiling frames, and compiling their backward graphs,
-- each compile's as the view compile_times defines it), the number of compiles ([-/-] and the compile contexts of
-- torch.export are none) and the slowest one, and how far each rank is from its run's fastest.
-- Asked of every run, it reads each run's rows stored once (run_compile_time_totals) while current, and computes
-- the others'.
-- :run  run id (empty: every run)
WITH fresh AS MATERIALIZED (  -- every run's: the runs whose stored rows are current (run_answers_fresh)
    SELECT run_id FROM run_answers_fresh WHERE coalesce(:run, '') = ''
), computed AS (
    -- one run's question, or the runs not stored
    SELECT run_id, rank, count(*) AS compiles, sum(compile_time_s) AS total_s, sum(frames_s) AS frames_s,
           sum(backward_s) AS backward_s, max(compile_time_s) AS slowest_s
    FROM compile_times
    WHERE run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL
                     SELECT id FROM runs WHERE coalesce(:run, '') = '' AND id NOT IN (SELECT run_id FROM fresh))
    GROUP BY run_id, rank
),
-- stored per run (tlindex.answers.derived): the rows of `computed`, in run_compile_time_totals
per_rank AS (
    SELECT * FROM computed
    UNION ALL
    SELECT s.run_id, s.rank, s.compiles, s.total_s, s.frames_s, s.backward_s, s.slowest_s
    FROM fresh f CROSS JOIN run_compile_time_totals s WHERE s.run_id = f.run_id
)
SELECT r.label AS run, p.run_id, p.rank, p.compiles, round(p.total_s, 3) AS total_s, round(p.frames_s, 3) AS frames_s,
       round(p.backward_s, 3) AS backward_s, round(p.slowest_s, 3) AS slowest_s,
       round(p.total_s - min(p.total_s) OVER (PARTITION BY p.run_id), 3) AS behind_fastest_rank_s
FROM per_rank p JOIN runs r ON r.id = p.run_id
ORDER BY p.run_id, p.rank
