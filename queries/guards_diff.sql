-- Guards diff between recompiles
-- For a frame that recompiled: which guards of compile N are absent or changed in the next
-- compile N+1 of the same frame (what exactly changed). Guards are the lines of
-- dynamo_cpp_guards_str, compared by type and text.
-- :compile  compile row id of N or N+1 (empty: every recompile)
WITH pairs AS (
    SELECT a.id AS before_id, b.id AS after_id, a.compile_id AS before, b.compile_id AS after,
           a.co_name, a.run_id, a.rank
    FROM compiles a JOIN compiles b ON b.source_id = a.source_id AND b.generation = a.generation
        AND b.compiled_autograd_id IS a.compiled_autograd_id AND b.frame_id = a.frame_id
        AND b.frame_compile_id = a.frame_compile_id + 1
    WHERE coalesce(:compile, '') = '' OR CAST(:compile AS INTEGER) IN (a.id, b.id)
), lines AS (
    SELECT compile, guard_type, text FROM guards WHERE origin = 'dynamo_cpp_guards_str'
)
SELECT p.run_id, p.rank, p.co_name, p.before, p.after, 'only in ' || p.before AS change,
       g.guard_type, g.text
FROM pairs p JOIN lines g ON g.compile = p.before_id
WHERE NOT EXISTS (SELECT 1 FROM lines h WHERE h.compile = p.after_id AND h.guard_type IS g.guard_type
                  AND h.text = g.text)
UNION ALL
SELECT p.run_id, p.rank, p.co_name, p.before, p.after, 'only in ' || p.after, g.guard_type, g.text
FROM pairs p JOIN lines g ON g.compile = p.after_id
WHERE NOT EXISTS (SELECT 1 FROM lines h WHERE h.compile = p.before_id AND h.guard_type IS g.guard_type
                  AND h.text = g.text)
ORDER BY 1, 2, 3, 4, 6
