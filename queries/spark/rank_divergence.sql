-- Rank divergence (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/rank_divergence.sql, in Spark SQL.
-- :run  run id (NULL: every multi-rank run)
WITH runs_ AS (
    SELECT id, world_size FROM runs WHERE world_size > 1 AND (:run IS NULL OR id = :run)
), per_id AS (
    SELECT c.run_id, c.compile_id, count(DISTINCT c.rank) AS n,
           nullif(array_join(array_sort(collect_set(CAST(c.rank AS STRING))), ','), '') AS ranks
    FROM compiles c JOIN runs_ r ON r.id = c.run_id GROUP BY c.run_id, c.compile_id
), cache AS (
    SELECT c.run_id, c.compile_id, e.cache, c.rank, nullif(array_join(transform(array_sort(collect_list(struct(e.id AS k, e.result AS v))), s -> s.v), ','), '') AS results
    FROM cache_events e JOIN compiles c ON c.id = e.compile JOIN runs_ r ON r.id = c.run_id
    GROUP BY c.run_id, c.compile_id, e.cache, c.rank
), graphs AS (
    SELECT c.run_id, c.compile_id, a.name, c.rank, nullif(array_join(transform(array_sort(collect_list(struct(a.payload AS k, a.payload AS v))), s -> s.v), ','), '') AS payloads
    FROM artifacts a JOIN compiles c ON c.id = a.compile JOIN runs_ r ON r.id = c.run_id
    WHERE a.kind IN ('dynamo_output_graph', 'aot_forward_graph', 'aot_backward_graph', 'aot_joint_graph',
                     'aot_inference_graph', 'optimize_ddp_split_graph', 'optimize_ddp_split_child',
                     'inductor_post_grad_graph')
       OR a.name = 'inductor_post_grad_graph'
    GROUP BY c.run_id, c.compile_id, a.name, c.rank
), times AS (
    SELECT c.run_id, c.compile_id, c.rank, c.duration_s FROM compiles c JOIN runs_ r ON r.id = c.run_id
    WHERE c.duration_s IS NOT NULL
)
SELECT p.run_id, 'missing_compile' AS finding, p.compile_id, p.ranks,
       'present on ' || CAST(p.n AS STRING) || ' of ' || CAST(r.world_size AS STRING) || ' ranks' AS detail
FROM per_id p JOIN runs_ r ON r.id = p.run_id WHERE p.n < r.world_size
UNION ALL
SELECT run_id, 'cache', compile_id, nullif(array_join(transform(array_sort(collect_list(struct(rank AS k, CAST(rank AS STRING) AS v))), s -> s.v), ','), ''),
       cache || ': ' || nullif(array_join(transform(array_sort(collect_list(struct(rank AS k, 'rank ' || CAST(rank AS STRING) || ' ' || results AS v))), s -> s.v), ', '), '')
FROM cache GROUP BY run_id, compile_id, cache HAVING count(DISTINCT results) > 1
UNION ALL
SELECT run_id, 'graph', compile_id, nullif(array_join(transform(array_sort(collect_list(struct(rank AS k, CAST(rank AS STRING) AS v))), s -> s.v), ','), ''),
       name || ': ' || CAST(count(DISTINCT payloads) AS STRING) || ' different versions across ranks'
FROM graphs GROUP BY run_id, compile_id, name HAVING count(DISTINCT payloads) > 1
UNION ALL
SELECT run_id, 'time', compile_id, nullif(array_join(transform(array_sort(collect_list(struct(rank AS k, CAST(rank AS STRING) AS v))), s -> s.v), ','), ''),
       'slowest rank ' || CAST(max_by(rank, duration_s) AS STRING) || ' took '
       || CAST(round(max(duration_s) - min(duration_s), 3) AS STRING) || ' s longer than the fastest'
FROM times GROUP BY run_id, compile_id HAVING count(*) > 1
ORDER BY 1, 2, 3
