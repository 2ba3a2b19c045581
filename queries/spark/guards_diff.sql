-- Guards diff between recompiles (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/guards_diff.sql, in Spark SQL.
-- :compile  compile row id of N or N+1 (NULL: every recompile)
WITH pairs AS (
    SELECT a.id AS before_id, b.id AS after_id, a.compile_id AS before, b.compile_id AS after,
           a.co_name, a.run_id, a.rank
    FROM compiles a JOIN compiles b ON b.source_id = a.source_id AND b.generation = a.generation
        AND b.compiled_autograd_id IS NOT DISTINCT FROM a.compiled_autograd_id AND b.frame_id = a.frame_id
        AND b.frame_compile_id = a.frame_compile_id + 1
    WHERE :compile IS NULL OR :compile IN (a.id, b.id)
), sides AS (
    SELECT p.*, 0 AS side, g.guard_type, g.text FROM pairs p
    JOIN guards g ON g.compile = p.before_id AND g.origin = 'dynamo_cpp_guards_str'
    UNION ALL
    SELECT p.*, 1, g.guard_type, g.text FROM pairs p
    JOIN guards g ON g.compile = p.after_id AND g.origin = 'dynamo_cpp_guards_str'
)
SELECT run_id, rank, co_name, before, after,
       'only in ' || CASE max(side) WHEN 0 THEN before ELSE after END AS change, guard_type, text
FROM sides
GROUP BY before_id, after_id, run_id, rank, co_name, before, after, guard_type, text HAVING min(side) = max(side)
ORDER BY run_id, rank, co_name, before, change
