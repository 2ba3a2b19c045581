-- Rank divergence
-- Where the ranks of a multi-rank run part ways: compile ids present on some ranks but not
-- all (missing_compile; records without a compile id, [-/-], are no compilation and do not
-- count), caches that hit on some ranks and miss on others (cache, per compile id), ranks
-- whose whole sequence of cache hits and misses differs (cache_pattern, tlparse's check), graphs
-- that differ for the same compile id (graph: same artifact, different payload), and the
-- compile-time gap between the fastest and slowest rank of each compile id (time); and, from
-- inductor's own logs, graphs whose collectives are scheduled differently across ranks
-- (collective_schedule: the classic cause of a hang), whose ops or output shapes differ
-- (tensor_meta), whose estimated runtime differs (estimated_runtime), and ranks that ran
-- compiled graphs in a different order (execution_order, when the program recorded it with
-- torch._inductor.debug.record_and_log_graph_execution_order()).
-- A process is the unit: each ranked process is compared under its name (sources.process: the
-- rank, or "1 (restart 1)" for a restarted rank, "1 (pid 4242)" for two processes claiming one).
-- Asked of every run, it reads each run's rows stored once (run_rank_divergence) while current, and computes the others.
-- :run  run id (empty: every multi-rank run)
WITH fresh AS MATERIALIZED (  -- every run's: the runs whose stored rows are current (run_answers_fresh)
    SELECT run_id FROM run_answers_fresh WHERE coalesce(:run, '') = ''
), candidates AS (
    SELECT id, world_size FROM runs
    WHERE world_size > 0 AND source_count > 1
      AND id IN (SELECT id FROM runs WHERE id = :run UNION ALL
                 SELECT id FROM runs WHERE coalesce(:run, '') = '' AND id NOT IN (SELECT run_id FROM fresh))
), procs AS (
    -- every ranked process of those runs; place orders them by rank, restart, pid
    SELECT s.id AS source_id, s.run_id, s.process AS rank,
           dense_rank() OVER (PARTITION BY s.run_id ORDER BY s.rank, coalesce(s.restart, 0), s.pid) AS place
    FROM sources s JOIN candidates r ON r.id = s.run_id WHERE s.process IS NOT NULL
), runs_ AS (
    SELECT p.run_id AS id, count(DISTINCT p.rank) AS world_size,
           CASE WHEN count(DISTINCT p.rank) = r.world_size THEN 'ranks' ELSE 'processes' END AS unit
    FROM procs p JOIN candidates r ON r.id = p.run_id GROUP BY p.run_id HAVING count(DISTINCT p.rank) > 1
), comp AS (
    -- the run's compiles, each under its process's name
    SELECT c.id, c.run_id, c.compile_id, c.duration_s, p.rank, p.place, p.source_id
    FROM runs_ r CROSS JOIN compiles c CROSS JOIN procs p WHERE c.run_id = r.id AND p.source_id = c.source_id
), per_id AS (
    SELECT run_id, compile_id, count(DISTINCT rank) AS n, group_concat(rank, ',') AS ranks
    FROM (SELECT DISTINCT run_id, compile_id, rank, place FROM comp WHERE compile_id != '-/-' ORDER BY place)
    GROUP BY run_id, compile_id
), cache AS (
    SELECT c.run_id, c.compile_id, e.cache, c.rank, min(c.place) AS place, group_concat(e.result) AS results
    FROM comp c CROSS JOIN cache_events e WHERE e.compile = c.id  -- (CROSS JOIN: the run's compiles first)
    GROUP BY c.run_id, c.compile_id, e.cache, c.rank
), cache_patterns AS (
    -- per process: every cache result in log order (tlparse's hit/miss pattern)
    SELECT run_id, rank, min(place) AS place, coalesce(group_concat(result, ' '), '') AS pattern,
           CASE WHEN count(result) = 0 THEN 'no cache lookups'
                ELSE sum(result = 'hit') || ' hits, ' || sum(result = 'miss') || ' misses'
                     || CASE WHEN count(result) > sum(result IN ('hit', 'miss'))
                             THEN ', ' || (count(result) - sum(result IN ('hit', 'miss'))) || ' other (bypass or no result)' ELSE '' END
           END AS shown
    FROM (SELECT p.run_id, p.rank, p.place, e.result
          FROM procs p JOIN runs_ r ON r.id = p.run_id
          LEFT JOIN compiles c ON c.source_id = p.source_id LEFT JOIN cache_events e ON e.compile = c.id
          ORDER BY e.id)
    GROUP BY run_id, rank
), cache_groups AS (
    SELECT run_id, pattern, shown, group_concat(rank) AS ranks, min(place) AS first_rank
    FROM (SELECT * FROM cache_patterns ORDER BY place) GROUP BY run_id, pattern, shown
), graphs AS (
    -- per process: the payloads of each graph artifact of a compile id (forward and backward
    -- graphs share a name, so compare the whole set)
    SELECT run_id, compile_id, name, rank, group_concat(payload) AS payloads
    -- (CROSS JOIN: from the run's compiles to their artifacts, not through every artifact)
    FROM (SELECT c.run_id, c.compile_id, a.name, c.rank, a.payload
          FROM comp c CROSS JOIN artifacts a
          WHERE a.compile = c.id AND (a.kind IN ('dynamo_output_graph', 'aot_forward_graph', 'aot_backward_graph', 'aot_joint_graph',
                           'aot_inference_graph', 'optimize_ddp_split_graph', 'optimize_ddp_split_child',
                           'inductor_post_grad_graph')
             OR a.name = 'inductor_post_grad_graph')
          ORDER BY a.payload)
    GROUP BY run_id, compile_id, name, rank
), times AS (
    -- place 1: the slowest process of the compile id (one row per process: its compiles of that id summed)
    SELECT run_id, compile_id, rank, duration_s,
           row_number() OVER (PARTITION BY run_id, compile_id ORDER BY duration_s DESC, first_place) AS place
    FROM (SELECT run_id, compile_id, rank, min(place) AS first_place, sum(duration_s) AS duration_s
          FROM comp WHERE duration_s IS NOT NULL GROUP BY run_id, compile_id, rank)
), scheduled AS (
    -- compile ids for which some process scheduled collectives; a process that compiled one
    -- without any is shown as "none"
    SELECT DISTINCT c.run_id, c.compile_id FROM collective_ops o JOIN comp c ON c.id = o.compile
    WHERE o.origin = 'schedule'
), schedules AS (
    SELECT run_id, compile_id, rank, min(place) AS place, coalesce(group_concat(op, ' '), '') AS ops,
           coalesce(group_concat(collective, ' '), 'none') AS shown
    FROM (SELECT c.run_id, c.compile_id, c.rank, c.place, o.op, o.collective
          FROM comp c JOIN scheduled s ON s.run_id = c.run_id AND s.compile_id = c.compile_id
          LEFT JOIN collective_ops o ON o.compile = c.id AND o.origin = 'schedule'
          ORDER BY o.envelope_id, o.position)
    GROUP BY run_id, compile_id, rank
), schedule_groups AS (
    SELECT run_id, compile_id, ops, shown, group_concat(rank) AS ranks, min(place) AS first_rank
    FROM (SELECT * FROM schedules ORDER BY place) GROUP BY run_id, compile_id, ops, shown
), tensor_meta AS (
    SELECT run_id, compile_id, rank, group_concat(op || ' ' || outputs, '; ') AS meta
    FROM (SELECT c.run_id, c.compile_id, c.rank, coalesce(o.op, '') AS op, coalesce(o.outputs, '') AS outputs
          FROM op_estimates o JOIN comp c ON c.id = o.compile
          ORDER BY o.envelope_id, o.position)
    GROUP BY run_id, compile_id, rank
), estimates AS (
    SELECT run_id, compile_id, rank, ns,
           row_number() OVER (PARTITION BY run_id, compile_id ORDER BY ns DESC, first_place) AS place
    FROM (SELECT c.run_id, c.compile_id, c.rank, min(c.place) AS first_place, sum(o.estimated_runtime_ns) AS ns
          FROM op_estimates o JOIN comp c ON c.id = o.compile
          GROUP BY c.run_id, c.compile_id, c.rank)
), last_executions AS (
    -- per process: its last graph_execution artifact (its own records of that name, not every run's)
    SELECT p.source_id, max(e.id) AS envelope_id
    FROM procs p JOIN runs_ r ON r.id = p.run_id CROSS JOIN envelopes e
    WHERE e.source_id = p.source_id AND e.kind = 'artifact' AND e.name = 'graph_execution'
      AND EXISTS (SELECT 1 FROM graph_executions g WHERE g.envelope_id = e.id)
    GROUP BY p.source_id
), executions AS (
    -- per process: the order its last graph_execution artifact recorded
    SELECT run_id, rank, min(place) AS place, count(*) AS runs, group_concat(compile_id, ' ') AS graphs
    FROM (SELECT p.run_id, p.rank, p.place, g.compile_id
          FROM graph_executions g JOIN last_executions l ON l.envelope_id = g.envelope_id
          JOIN procs p ON p.source_id = l.source_id
          ORDER BY g.position)
    GROUP BY run_id, rank
), execution_groups AS (
    SELECT run_id, runs, graphs, group_concat(rank) AS ranks, min(place) AS first_rank
    FROM (SELECT * FROM executions ORDER BY place) GROUP BY run_id, runs, graphs
), computed AS (
    SELECT p.run_id, 'missing_compile' AS finding, p.compile_id,
           p.ranks AS ranks, 'present on ' || p.n || ' of ' || r.world_size || ' ' || r.unit AS detail
    FROM per_id p JOIN runs_ r ON r.id = p.run_id WHERE p.n < r.world_size
    UNION ALL
    SELECT run_id, 'cache', compile_id, group_concat(rank), cache || ': ' ||
           group_concat('rank ' || rank || ' ' || results, ', ')
    FROM (SELECT * FROM cache ORDER BY place) GROUP BY run_id, compile_id, cache HAVING count(DISTINCT results) > 1
    UNION ALL
    SELECT run_id, 'cache_pattern', NULL, group_concat(ranks),
           group_concat(CASE WHEN instr(ranks, ',') THEN 'ranks ' ELSE 'rank ' END || ranks || ': ' || shown, '; ')
    FROM (SELECT * FROM cache_groups ORDER BY first_rank)
    GROUP BY run_id HAVING count(*) > 1
    UNION ALL
    SELECT run_id, 'graph', compile_id, group_concat(rank),
           name || ': ' || count(DISTINCT payloads) || ' different versions across ranks'
    FROM graphs GROUP BY run_id, compile_id, name HAVING count(DISTINCT payloads) > 1
    UNION ALL
    SELECT run_id, 'time', compile_id, group_concat(rank),
           'slowest rank ' || max(CASE WHEN place = 1 THEN rank END)
           || ' took ' || round(max(duration_s) - min(duration_s), 3) || ' s longer than the fastest'
    FROM times t GROUP BY run_id, compile_id HAVING count(*) > 1
    UNION ALL
    SELECT run_id, 'collective_schedule', compile_id, group_concat(ranks),
           group_concat(CASE WHEN instr(ranks, ',') THEN 'ranks ' ELSE 'rank ' END || ranks || ': ' || shown, '; ')
    FROM (SELECT * FROM schedule_groups ORDER BY first_rank)
    GROUP BY run_id, compile_id HAVING count(*) > 1
    UNION ALL
    SELECT run_id, 'tensor_meta', compile_id, group_concat(rank),
           count(DISTINCT meta) || ' different lists of ops and output shapes across ranks'
    FROM tensor_meta GROUP BY run_id, compile_id HAVING count(DISTINCT meta) > 1
    UNION ALL
    SELECT run_id, 'estimated_runtime', compile_id, group_concat(rank),
           'slowest rank ' || max(CASE WHEN place = 1 THEN rank END)
           || ' is estimated ' || round((max(ns) - min(ns)) / 1e6, 3) || ' ms slower than the fastest'
    FROM estimates e GROUP BY run_id, compile_id HAVING count(*) > 1 AND max(ns) > min(ns)
    UNION ALL
    SELECT run_id, 'execution_order', NULL, group_concat(ranks),
           group_concat(CASE WHEN instr(ranks, ',') THEN 'ranks ' ELSE 'rank ' END || ranks || ': ' || runs || ' graph runs ('
                        || CASE WHEN length(graphs) > 200 THEN substr(graphs, 1, 200) || ' ...' ELSE graphs END || ')', '; ')
    FROM (SELECT * FROM execution_groups ORDER BY first_rank)
    GROUP BY run_id HAVING count(*) > 1
)
-- stored per run (tlindex.answers.derived): the rows of `computed`, in run_rank_divergence
SELECT * FROM computed
UNION ALL
SELECT s.run_id, s.finding, s.compile_id, s.ranks, s.detail
FROM fresh f CROSS JOIN run_rank_divergence s WHERE s.run_id = f.run_id
ORDER BY 1, 2, 3, 4, 5
