-- Guards diff between recompiles (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/guards_diff.sql, in DuckDB's dialect (python -m tlindex.formats.dialects).
-- :compile  compile row id of N or N+1
-- :run  run id (every recompile of that run)
WITH pairs AS (
    SELECT a.id AS before_id, b.id AS after_id, a.compile_id AS before, b.compile_id AS after,
           a.co_name, a.run_id, a.rank
    FROM (SELECT * FROM compiles WHERE id IN ($compile, (SELECT x.id FROM compiles x JOIN compiles y
              ON y.source_id = x.source_id AND y.generation = x.generation AND y.frame_id = x.frame_id
              AND y.frame_compile_id = x.frame_compile_id + 1 AND y.compiled_autograd_id IS NOT DISTINCT FROM x.compiled_autograd_id
              WHERE y.id = $compile))
          UNION SELECT * FROM compiles WHERE run_id = $run) a
    JOIN compiles b ON b.source_id = a.source_id AND b.generation = a.generation
        AND b.compiled_autograd_id IS NOT DISTINCT FROM a.compiled_autograd_id AND b.frame_id = a.frame_id
        AND b.frame_compile_id = a.frame_compile_id + 1
    WHERE ($compile IS NULL OR $compile IN (a.id, b.id))
      AND ($run IS NULL OR a.run_id = $run)
), sides AS (
    -- guards compared by key (an integer hash of type and text): cheap to group
    SELECT p.before_id, p.after_id, 0 AS side, g.key FROM pairs p
    JOIN guards g ON g.compile = p.before_id AND g.origin = 'dynamo_cpp_guards_str'
    UNION ALL
    SELECT p.before_id, p.after_id, 1, g.key FROM pairs p
    JOIN guards g ON g.compile = p.after_id AND g.origin = 'dynamo_cpp_guards_str'
), changed AS (
    SELECT before_id, after_id, key, max(side) AS side FROM sides
    GROUP BY before_id, after_id, key HAVING min(side) = max(side)
)
SELECT DISTINCT p.run_id, p.rank, p.co_name, p.before, p.after,
       'only in ' || CASE d.side WHEN 0 THEN p.before ELSE p.after END AS change, g.guard_type, g.text
FROM changed d JOIN pairs p ON p.before_id = d.before_id AND p.after_id = d.after_id
JOIN guards g ON g.compile = CASE d.side WHEN 0 THEN d.before_id ELSE d.after_id END
    AND g.origin = 'dynamo_cpp_guards_str' AND g.key = d.key
ORDER BY 1, 2, 3, 4, 6, 7, 8
