-- Rank divergence
-- Where the ranks of a multi-rank run part ways. Compiles are matched across ranks by what was
-- compiled, not by compile id: by code object (the frame Dynamo compiled: name, file, first line;
-- else the compile id) and how many times the process compiled that code before, so a rank whose ids are shifted (an
-- export or any extra frame took a frame id) still matches; records that hold no compilation (no
-- dynamo_start, no compilation metrics: an export's) are left out. compile_id is the id on the
-- first rank that compiled it. Kinds: compiles present on some ranks but not all
-- (missing_compile), caches that hit on some ranks and miss on others (cache, a row per group of
-- ranks with the same results), ranks whose whole sequence of cache hits and misses differs
-- (cache_pattern, tlparse's check: a row per group), graphs that differ for the same compile
-- (graph: a row per version, the ranks that logged it), guards that differ (guards, a row per
-- version), the slowest rank of each compile and how
-- much longer it took than the fastest (time); and, from inductor's own logs, collectives
-- scheduled differently across ranks (collective_schedule: the classic cause of a hang, a row per
-- group), ops or output shapes that differ (tensor_meta, a row per version), estimated runtimes
-- that differ (estimated_runtime, the slowest rank), and ranks that ran compiled graphs in a
-- different order (execution_order, a row per group, when the program recorded it with
-- torch._inductor.debug.record_and_log_graph_execution_order()).
-- A process is the unit: each ranked process is compared under its name (sources.process: the
-- rank, or "1 (restart 1)" for a restarted rank, "1 (pid 4242)" for two processes claiming one).
-- ranks lists them, in rank order, separated by ", ".
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
), coded AS (
    -- the run's compiles, each under its process's name, with its code: what a compile is matched by (the frame
    -- Dynamo compiles, the last of its dynamo_start stack: name, file and first line; else the compile's code object,
    -- else its compile id)
    SELECT c.id, c.run_id, c.compile_id, c.duration_s, c.source_id, p.rank, p.place, c.status, c.dynamo_start,
           c.start_time, c.end_time, c.guards_print, c.co_name,
           coalesce(c.compiled_autograd_id, '') || '|' ||
           CASE WHEN f.name IS NOT NULL THEN f.name || '|' || coalesce(f.filename, '') || '|' || coalesce(f.line, '')
                WHEN c.co_name IS NULL THEN 'id ' || c.compile_id
                ELSE c.co_name || '|' || coalesce(c.co_filename, '') || '|' || coalesce(c.co_firstlineno, '') END AS code
    FROM runs_ r CROSS JOIN compiles c CROSS JOIN procs p
    LEFT JOIN frames f ON f.envelope_id = c.dynamo_start AND f.stack = 'stack'
         AND f.depth = (SELECT max(depth) FROM frames WHERE envelope_id = c.dynamo_start AND stack = 'stack')
    WHERE c.run_id = r.id AND p.source_id = c.source_id
      AND (c.compile_id = '-/-' OR c.status != 'none')
), keyed AS (
    -- key: the code and how many times this process compiled it before (its compiles in log order)
    SELECT *, code || '#' || row_number() OVER (PARTITION BY source_id, code ORDER BY id) AS key FROM coded
), comp AS (
    -- each compile with the id the first rank that compiled the same gave it (cid)
    SELECT *, first_value(compile_id) OVER (PARTITION BY run_id, key ORDER BY place, id) AS cid FROM keyed
), per_key AS (
    SELECT run_id, key, min(cid) AS cid, count(DISTINCT rank) AS n, group_concat(rank, ', ') AS ranks
    FROM (SELECT DISTINCT run_id, key, cid, rank, place FROM comp WHERE compile_id != '-/-' ORDER BY place)
    GROUP BY run_id, key
), cache AS (
    SELECT run_id, key, min(cid) AS cid, cache, rank, min(place) AS place, group_concat(result, ' ') AS results
    FROM (SELECT c.run_id, c.key, c.cid, c.rank, c.place, e.cache, e.result
          FROM comp c CROSS JOIN cache_events e WHERE e.compile = c.id ORDER BY e.id)  -- (the run's compiles first)
    GROUP BY run_id, key, cache, rank
), cache_groups_ AS (
    SELECT run_id, key, cid, cache, results, group_concat(rank, ', ') AS ranks, min(place) AS first_rank
    FROM (SELECT * FROM cache ORDER BY place) GROUP BY run_id, key, cache, results
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
    SELECT run_id, pattern, shown, group_concat(rank, ', ') AS ranks, min(place) AS first_rank
    FROM (SELECT * FROM cache_patterns ORDER BY place) GROUP BY run_id, pattern, shown
), graphs AS (
    -- per process: the payloads of each graph artifact of a compile that ended (forward and backward graphs share
    -- a name, so compare the whole set; a compile still running has not logged them all)
    SELECT run_id, key, min(cid) AS cid, name, rank, min(place) AS place, group_concat(payload) AS payloads
    -- (CROSS JOIN: from the run's compiles to their artifacts, not through every artifact)
    FROM (SELECT c.run_id, c.key, c.cid, a.name, c.rank, c.place, a.payload
          FROM comp c CROSS JOIN artifacts a
          WHERE a.compile = c.id AND c.status != 'missing' AND (a.kind IN ('dynamo_output_graph', 'aot_forward_graph', 'aot_backward_graph', 'aot_joint_graph',
                           'aot_inference_graph', 'optimize_ddp_split_graph', 'optimize_ddp_split_child',
                           'inductor_post_grad_graph')
             OR a.name = 'inductor_post_grad_graph')
          ORDER BY a.payload)
    GROUP BY run_id, key, name, rank
), graph_versions AS (
    -- each version of a compile's graph, numbered in rank order, with the ranks that logged it
    SELECT *, row_number() OVER (PARTITION BY run_id, key, name ORDER BY first_rank) AS version,
           count(*) OVER (PARTITION BY run_id, key, name) AS versions
    FROM (SELECT run_id, key, cid, name, payloads, group_concat(rank, ', ') AS ranks, min(place) AS first_rank
          FROM (SELECT * FROM graphs ORDER BY place) GROUP BY run_id, key, name, payloads)
), guard_versions AS (
    -- each version of a compile's guards (their identities, processes' addresses masked), as graph_versions; a
    -- compile still running has logged none
    SELECT *, row_number() OVER (PARTITION BY run_id, key ORDER BY first_rank) AS version,
           count(*) OVER (PARTITION BY run_id, key) AS versions
    FROM (SELECT run_id, key, min(cid) AS cid, guards_print, group_concat(rank, ', ') AS ranks, min(place) AS first_rank
          FROM (SELECT * FROM comp WHERE guards_print IS NOT NULL AND compile_id != '-/-' AND status != 'missing'
                ORDER BY place)
          GROUP BY run_id, key, guards_print)
), times AS (
    -- place 1: the slowest process of the compile (one row per process: its compiles of that key summed)
    SELECT run_id, key, cid, rank, duration_s,
           row_number() OVER (PARTITION BY run_id, key ORDER BY duration_s DESC, first_place) AS place
    FROM (SELECT run_id, key, min(cid) AS cid, rank, min(place) AS first_place, sum(duration_s) AS duration_s
          FROM comp WHERE duration_s IS NOT NULL GROUP BY run_id, key, rank)
), scheduled AS (
    -- compiles for which some process scheduled collectives; a process that compiled one
    -- without any is shown as "none"
    SELECT DISTINCT c.run_id, c.key FROM collective_ops o JOIN comp c ON c.id = o.compile
    WHERE o.origin = 'schedule'
), schedules AS (
    SELECT run_id, key, min(cid) AS cid, rank, min(place) AS place, coalesce(group_concat(op, ' '), '') AS ops,
           coalesce(group_concat(collective, ' '), 'none') AS shown
    FROM (SELECT c.run_id, c.key, c.cid, c.rank, c.place, o.op, o.collective
          FROM comp c JOIN scheduled s ON s.run_id = c.run_id AND s.key = c.key
          LEFT JOIN collective_ops o ON o.compile = c.id AND o.origin = 'schedule'
          ORDER BY o.envelope_id, o.position)
    GROUP BY run_id, key, rank
), schedule_groups AS (
    SELECT run_id, key, cid, ops, shown, group_concat(rank, ', ') AS ranks, min(place) AS first_rank,
           count(*) OVER (PARTITION BY run_id, key) AS groups
    FROM (SELECT * FROM schedules ORDER BY place) GROUP BY run_id, key, ops, shown
), tensor_meta AS (
    SELECT run_id, key, min(cid) AS cid, rank, min(place) AS place, group_concat(op || ' ' || outputs, '; ') AS meta
    FROM (SELECT c.run_id, c.key, c.cid, c.rank, c.place, coalesce(o.op, '') AS op, coalesce(o.outputs, '') AS outputs
          FROM op_estimates o JOIN comp c ON c.id = o.compile
          ORDER BY o.envelope_id, o.position)
    GROUP BY run_id, key, rank
), meta_versions AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, key ORDER BY first_rank) AS version,
           count(*) OVER (PARTITION BY run_id, key) AS versions
    FROM (SELECT run_id, key, cid, meta, group_concat(rank, ', ') AS ranks, min(place) AS first_rank
          FROM (SELECT * FROM tensor_meta ORDER BY place) GROUP BY run_id, key, meta)
), estimates AS (
    SELECT run_id, key, cid, rank, ns,
           row_number() OVER (PARTITION BY run_id, key ORDER BY ns DESC, first_place) AS place
    FROM (SELECT c.run_id, c.key, min(c.cid) AS cid, c.rank, min(c.place) AS first_place,
                 sum(o.estimated_runtime_ns) AS ns
          FROM op_estimates o JOIN comp c ON c.id = o.compile
          GROUP BY c.run_id, c.key, c.rank)
), last_executions AS (
    -- per process: its last graph_execution artifact (its own records of that name, not every run's)
    SELECT p.source_id, max(e.id) AS envelope_id
    FROM procs p JOIN runs_ r ON r.id = p.run_id CROSS JOIN envelopes e
    WHERE e.source_id = p.source_id AND e.kind = 'artifact' AND e.name = 'graph_execution'
      AND EXISTS (SELECT 1 FROM graph_executions g WHERE g.envelope_id = e.id)
    GROUP BY p.source_id
), ids AS (
    -- a process's compile id as the first rank that compiled the same numbers it
    SELECT source_id, compile_id, min(cid) AS cid FROM comp GROUP BY source_id, compile_id
), executions AS (
    -- per process: the order its last graph_execution artifact recorded, in the ids of the first rank
    SELECT run_id, rank, min(place) AS place, count(*) AS runs, group_concat(compile_id, ' ') AS graphs
    FROM (SELECT p.run_id, p.rank, p.place, coalesce(i.cid, g.compile_id) AS compile_id
          FROM graph_executions g JOIN last_executions l ON l.envelope_id = g.envelope_id
          JOIN procs p ON p.source_id = l.source_id
          LEFT JOIN ids i ON i.source_id = l.source_id AND i.compile_id = g.compile_id
          ORDER BY g.position)
    GROUP BY run_id, rank
), execution_groups AS (
    SELECT run_id, runs, graphs, group_concat(rank, ', ') AS ranks, min(place) AS first_rank,
           count(*) OVER (PARTITION BY run_id) AS groups
    FROM (SELECT * FROM executions ORDER BY place) GROUP BY run_id, runs, graphs
), pattern_groups AS (
    SELECT *, count(*) OVER (PARTITION BY run_id) AS groups FROM cache_groups
), cache_splits AS (
    SELECT *, count(*) OVER (PARTITION BY run_id, key, cache) AS groups FROM cache_groups_
), signatures AS (
    -- per process: what it compiled (each compile's key, graphs and guards) and how long it took
    SELECT p.run_id, p.rank, p.place, count(k.key) AS compiles, coalesce(sum(k.duration_s), 0) AS seconds,
           coalesce(group_concat(k.key || '=' || coalesce(k.graphs, '') || '=' || coalesce(k.guards_print, ''),
                                 char(10)), '') AS signature
    FROM procs p JOIN runs_ r ON r.id = p.run_id
    LEFT JOIN (SELECT c.source_id, c.key, c.duration_s, c.guards_print,
                      (SELECT group_concat(g.name || ':' || g.payloads, ' ') FROM graphs g
                       WHERE g.run_id = c.run_id AND g.key = c.key AND g.rank = c.rank) AS graphs
               FROM comp c WHERE c.compile_id != '-/-' ORDER BY c.key) k ON k.source_id = p.source_id
    GROUP BY p.run_id, p.rank
), alike AS (
    -- the groups of processes that compiled the same; each process's place in its group by compile time
    SELECT *, dense_rank() OVER (PARTITION BY run_id ORDER BY signature) AS grouping,
           row_number() OVER (PARTITION BY run_id, signature ORDER BY seconds, place) AS by_time,
           count(*) OVER (PARTITION BY run_id, signature) AS size
    FROM signatures
), medians AS (
    SELECT run_id, grouping, avg(seconds) AS median FROM alike
    WHERE by_time IN ((size + 1) / 2, (size + 2) / 2) GROUP BY run_id, grouping
), groups AS (
    SELECT a.run_id, group_concat(a.rank, ', ') AS ranks, count(*) AS n, min(a.compiles) AS compiles,
           min(a.seconds) AS fastest, max(a.seconds) AS slowest, m.median
    FROM (SELECT * FROM alike ORDER BY place) a JOIN medians m ON m.run_id = a.run_id AND m.grouping = a.grouping
    GROUP BY a.run_id, a.grouping
), slow AS (
    -- a process that compiled as others did but took far longer (over 2 s and a quarter more than its group's median)
    SELECT a.run_id, a.rank, a.seconds, m.median, a.size FROM alike a
    JOIN medians m ON m.run_id = a.run_id AND m.grouping = a.grouping
    WHERE a.size >= 3 AND a.seconds - m.median > max(2.0, 0.25 * m.median)
), last_records AS (
    SELECT p.run_id, max(s.last_time) AS last_time FROM procs p JOIN sources s ON s.id = p.source_id GROUP BY p.run_id
), open_ AS (
    -- each process's last compile when it began and never ended (no compilation metrics): compiling at the last record
    SELECT c.* FROM comp c
    WHERE c.compile_id != '-/-' AND c.status = 'missing' AND c.dynamo_start IS NOT NULL
      AND c.id = (SELECT max(id) FROM compiles WHERE source_id = c.source_id AND compile_id != '-/-')
), behind AS (
    -- those compiles that other processes compiled too: how many, how many finished, when the last of them did (a
    -- process is behind every other when each that compiled it finished it)
    SELECT o.run_id, o.rank, o.cid, o.co_name, o.start_time, count(DISTINCT f.rank) AS compiled,
           count(DISTINCT CASE WHEN f.status != 'missing' THEN f.rank END) AS finished,
           max(CASE WHEN f.status != 'missing' THEN f.end_time END) AS last_end
    FROM open_ o JOIN comp f ON f.run_id = o.run_id AND f.key = o.key AND f.rank != o.rank
    GROUP BY o.run_id, o.rank, o.cid, o.co_name, o.start_time
), computed AS (
    SELECT p.run_id, 'missing_compile' AS finding, p.cid AS compile_id,
           p.ranks AS ranks, 'present on ' || p.n || ' of ' || r.world_size || ' ' || r.unit AS detail
    FROM per_key p JOIN runs_ r ON r.id = p.run_id WHERE p.n < r.world_size
    UNION ALL
    SELECT run_id, 'cache', cid, ranks, cache || ': ' || results FROM cache_splits WHERE groups > 1
    UNION ALL
    SELECT run_id, 'cache_pattern', NULL, ranks, shown FROM pattern_groups WHERE groups > 1
    UNION ALL
    SELECT run_id, 'graph', cid, ranks, name || ': version ' || version || ' of ' || versions
    FROM graph_versions WHERE versions > 1
    UNION ALL
    SELECT run_id, 'guards', cid, ranks, 'version ' || version || ' of ' || versions FROM guard_versions WHERE versions > 1
    UNION ALL
    SELECT run_id, 'time', max(cid), max(CASE WHEN place = 1 THEN rank END),
           'slowest rank ' || max(CASE WHEN place = 1 THEN rank END)
           || ' took ' || round(max(duration_s) - min(duration_s), 3) || ' s longer than the fastest'
    FROM times t GROUP BY run_id, key HAVING count(*) > 1
    UNION ALL
    SELECT run_id, 'collective_schedule', cid, ranks, shown FROM schedule_groups WHERE groups > 1
    UNION ALL
    SELECT run_id, 'tensor_meta', cid, ranks, 'version ' || version || ' of ' || versions
    FROM meta_versions WHERE versions > 1
    UNION ALL
    SELECT run_id, 'estimated_runtime', max(cid), max(CASE WHEN place = 1 THEN rank END),
           'slowest rank ' || max(CASE WHEN place = 1 THEN rank END)
           || ' is estimated ' || round((max(ns) - min(ns)) / 1e6, 3) || ' ms slower than the fastest'
    FROM estimates e GROUP BY run_id, key HAVING count(*) > 1 AND max(ns) > min(ns)
    UNION ALL
    SELECT run_id, 'group', NULL, ranks,
           compiles || CASE WHEN compiles = 1 THEN ' compile, ' ELSE ' compiles, ' END || round(fastest, 1) || CASE WHEN round(slowest, 1) > round(fastest, 1)
                                                                   THEN '–' || round(slowest, 1) ELSE '' END || ' s'
    FROM groups
    UNION ALL
    SELECT run_id, 'slow_rank', NULL, rank,
           round(seconds, 1) || ' s compiling, ' || round(seconds - median, 1) || ' s more than the median ('
           || round(median, 1) || ' s) of the ' || size || ' that compiled the same'
    FROM slow
    UNION ALL
    SELECT b.run_id, 'behind', b.cid, b.rank,
           'compiling [' || b.cid || ']' || coalesce(' ' || b.co_name, '') || ' for '
           || round((julianday(l.last_time) - julianday(b.start_time)) * 86400, 1) || ' s at the last record; '
           || CASE WHEN b.compiled = r.world_size - 1 THEN 'the other ' || b.finished || ' ' || r.unit
                   ELSE 'the ' || b.finished || ' other ' || r.unit || ' that compiled it' END || ' finished it, the last '
           || round((julianday(l.last_time) - julianday(b.last_end)) * 86400, 1) || ' s before'
    FROM behind b JOIN last_records l ON l.run_id = b.run_id JOIN runs_ r ON r.id = b.run_id
    WHERE b.finished = b.compiled AND b.finished > 0
    UNION ALL
    SELECT run_id, 'execution_order', NULL, ranks,
           runs || ' graph runs (' || CASE WHEN length(graphs) > 200 THEN substr(graphs, 1, 200) || ' ...' ELSE graphs END || ')'
    FROM execution_groups WHERE groups > 1
)
-- stored per run (tlindex.answers.derived): the rows of `computed`, in run_rank_divergence
SELECT * FROM computed
UNION ALL
SELECT s.run_id, s.finding, s.compile_id, s.ranks, s.detail
FROM fresh f CROSS JOIN run_rank_divergence s WHERE s.run_id = f.run_id
ORDER BY 1, 2, 3, 4, 5
