-- Rank divergence
-- Where the ranks of a multi-rank run part ways: compile ids present on some ranks but not
-- all (missing_compile), caches that hit on some ranks and miss on others (cache), graphs
-- that differ for the same compile id (graph: same artifact, different payload), and the
-- compile-time gap between the fastest and slowest rank of each compile id (time).
-- :run  run id (empty: every multi-rank run)
WITH runs_ AS (
    SELECT id, world_size FROM runs
    WHERE world_size > 1 AND (coalesce(:run, '') = '' OR id = :run)
), per_id AS (
    SELECT c.run_id, c.compile_id, count(DISTINCT c.rank) AS n, group_concat(DISTINCT c.rank) AS ranks
    FROM compiles c JOIN runs_ r ON r.id = c.run_id GROUP BY c.run_id, c.compile_id
), cache AS (
    SELECT c.run_id, c.compile_id, e.cache, c.rank, group_concat(e.result) AS results
    FROM cache_events e JOIN compiles c ON c.id = e.compile JOIN runs_ r ON r.id = c.run_id
    GROUP BY c.run_id, c.compile_id, e.cache, c.rank
), graphs AS (
    -- per rank: the payloads of each graph artifact of a compile id (forward and backward
    -- graphs share a name, so compare the whole set)
    SELECT run_id, compile_id, name, rank, group_concat(payload) AS payloads
    FROM (SELECT c.run_id, c.compile_id, a.name, c.rank, a.payload
          FROM artifacts a JOIN compiles c ON c.id = a.compile JOIN runs_ r ON r.id = c.run_id
          WHERE a.kind IN ('dynamo_output_graph', 'aot_forward_graph', 'aot_backward_graph', 'aot_joint_graph',
                           'aot_inference_graph', 'optimize_ddp_split_graph', 'optimize_ddp_split_child',
                           'inductor_post_grad_graph')
             OR a.name = 'inductor_post_grad_graph'
          ORDER BY a.payload)
    GROUP BY run_id, compile_id, name, rank
), times AS (
    SELECT c.run_id, c.compile_id, c.rank, c.duration_s FROM compiles c JOIN runs_ r ON r.id = c.run_id
    WHERE c.duration_s IS NOT NULL
)
SELECT p.run_id, 'missing_compile' AS finding, p.compile_id,
       p.ranks AS ranks, 'present on ' || p.n || ' of ' || r.world_size || ' ranks' AS detail
FROM per_id p JOIN runs_ r ON r.id = p.run_id WHERE p.n < r.world_size
UNION ALL
SELECT run_id, 'cache', compile_id, group_concat(rank), cache || ': ' ||
       group_concat('rank ' || rank || ' ' || results, ', ')
FROM cache GROUP BY run_id, compile_id, cache HAVING count(DISTINCT results) > 1
UNION ALL
SELECT run_id, 'graph', compile_id, group_concat(rank),
       name || ': ' || count(DISTINCT payloads) || ' different versions across ranks'
FROM graphs GROUP BY run_id, compile_id, name HAVING count(DISTINCT payloads) > 1
UNION ALL
SELECT run_id, 'time', compile_id, group_concat(rank),
       'slowest rank ' || (SELECT t2.rank FROM times t2 WHERE t2.run_id = t.run_id AND t2.compile_id = t.compile_id
                            ORDER BY t2.duration_s DESC LIMIT 1)
       || ' took ' || round(max(duration_s) - min(duration_s), 3) || ' s longer than the fastest'
FROM times t GROUP BY run_id, compile_id HAVING count(*) > 1
ORDER BY 1, 2, 3
