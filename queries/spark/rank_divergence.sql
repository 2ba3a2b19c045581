-- Rank divergence (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/rank_divergence.sql, in Spark SQL: compiles matched across ranks by code
-- object and how many times the process compiled it before, not by compile id.
-- A process is the unit (sources.process), as in queries/rank_divergence.sql.
-- :run  run id (NULL: every multi-rank run)
WITH candidates AS (
    SELECT id, world_size FROM runs WHERE world_size > 0 AND source_count > 1 AND (:run IS NULL OR id = :run)
), procs AS (
    SELECT s.id AS source_id, s.run_id, s.process AS rank,
           dense_rank() OVER (PARTITION BY s.run_id ORDER BY s.rank, coalesce(s.restart, 0), s.pid) AS place
    FROM sources s JOIN candidates r ON r.id = s.run_id WHERE s.process IS NOT NULL
), runs_ AS (
    SELECT p.run_id AS id, count(DISTINCT p.rank) AS world_size,
           CASE WHEN count(DISTINCT p.rank) = max(r.world_size) THEN 'ranks' ELSE 'processes' END AS unit
    FROM procs p JOIN candidates r ON r.id = p.run_id GROUP BY p.run_id HAVING count(DISTINCT p.rank) > 1
), last_frames AS (
    SELECT f.envelope_id, max_by(f.name, f.depth) AS name, max_by(f.filename, f.depth) AS filename,
           max_by(f.line, f.depth) AS line
    FROM frames f JOIN compiles c ON c.dynamo_start = f.envelope_id JOIN runs_ r ON r.id = c.run_id
    WHERE f.stack = 'stack' GROUP BY f.envelope_id
), coded AS (
    SELECT c.id, c.run_id, c.compile_id, c.duration_s, c.source_id, p.rank, p.place, c.status, c.dynamo_start,
           c.start_time, c.end_time, c.guards_print, c.co_name,
           coalesce(CAST(c.compiled_autograd_id AS STRING), '') || '|' ||
           CASE WHEN f.name IS NOT NULL THEN f.name || '|' || coalesce(f.filename, '') || '|'
                                             || coalesce(CAST(f.line AS STRING), '')
                WHEN c.co_name IS NULL THEN 'id ' || c.compile_id
                ELSE c.co_name || '|' || coalesce(c.co_filename, '') || '|'
                     || coalesce(CAST(c.co_firstlineno AS STRING), '') END AS code
    FROM compiles c JOIN procs p ON p.source_id = c.source_id JOIN runs_ r ON r.id = c.run_id
    LEFT JOIN last_frames f ON f.envelope_id = c.dynamo_start
    WHERE c.compile_id = '-/-' OR c.status != 'none'
), keyed AS (
    SELECT *, code || '#' || CAST(row_number() OVER (PARTITION BY source_id, code ORDER BY id) AS STRING) AS key
    FROM coded
), comp AS (
    SELECT *, first_value(compile_id) OVER (PARTITION BY run_id, key ORDER BY place, id) AS cid FROM keyed
), per_key AS (
    SELECT run_id, key, min(cid) AS cid, count(DISTINCT rank) AS n, nullif(array_join(transform(array_sort(collect_list(struct(place AS k, rank AS v))), s -> s.v), ', '), '') AS ranks
    FROM (SELECT DISTINCT run_id, key, cid, rank, place FROM comp WHERE compile_id != '-/-')
    GROUP BY run_id, key
), cache AS (
    SELECT c.run_id, c.key, min(c.cid) AS cid, e.cache, c.rank, min(c.place) AS place,
           nullif(array_join(transform(array_sort(collect_list(struct(e.id AS k, e.result AS v))), s -> s.v), ' '), '') AS results
    FROM cache_events e JOIN comp c ON c.id = e.compile
    GROUP BY c.run_id, c.key, e.cache, c.rank
), cache_splits AS (
    SELECT *, count(*) OVER (PARTITION BY run_id, key, cache) AS groups
    FROM (SELECT run_id, key, min(cid) AS cid, cache, results, nullif(array_join(transform(array_sort(collect_list(struct(place AS k, rank AS v))), s -> s.v), ', '), '') AS ranks
          FROM cache GROUP BY run_id, key, cache, results)
), cache_patterns AS (
    SELECT p.run_id, p.rank, min(p.place) AS place, coalesce(nullif(array_join(transform(array_sort(collect_list(struct(e.id AS k, e.result AS v))), s -> s.v), ' '), ''), '') AS pattern,
           count(e.result) AS lookups, count(*) FILTER (WHERE e.result = 'hit') AS hits,
           count(*) FILTER (WHERE e.result = 'miss') AS misses
    FROM procs p JOIN runs_ r ON r.id = p.run_id
    LEFT JOIN compiles c ON c.source_id = p.source_id LEFT JOIN cache_events e ON e.compile = c.id
    GROUP BY p.run_id, p.rank
), pattern_groups AS (
    SELECT *, count(*) OVER (PARTITION BY run_id) AS groups
    FROM (SELECT run_id, pattern, shown, nullif(array_join(transform(array_sort(collect_list(struct(place AS k, rank AS v))), s -> s.v), ', '), '') AS ranks
          FROM (SELECT *, CASE WHEN lookups = 0 THEN 'no cache lookups'
                               ELSE CAST(hits AS STRING) || ' hits, ' || CAST(misses AS STRING) || ' misses'
                                    || CASE WHEN lookups > hits + misses
                                            THEN ', ' || CAST(lookups - hits - misses AS STRING)
                                                 || ' other (bypass or no result)' ELSE '' END
                          END AS shown FROM cache_patterns)
          GROUP BY run_id, pattern, shown)
), graphs AS (
    SELECT c.run_id, c.key, min(c.cid) AS cid, a.name, c.rank, min(c.place) AS place,
           nullif(array_join(transform(array_sort(collect_list(struct(a.payload AS k, a.payload AS v))), s -> s.v), ','), '') AS payloads
    FROM artifacts a JOIN comp c ON c.id = a.compile
    WHERE c.status != 'missing' AND (a.kind IN ('dynamo_output_graph', 'aot_forward_graph', 'aot_backward_graph', 'aot_joint_graph',
                     'aot_inference_graph', 'optimize_ddp_split_graph', 'optimize_ddp_split_child',
                     'inductor_post_grad_graph')
       OR a.name = 'inductor_post_grad_graph')
    GROUP BY c.run_id, c.key, a.name, c.rank
), graph_versions AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, key, name ORDER BY first_rank) AS version,
           count(*) OVER (PARTITION BY run_id, key, name) AS versions
    FROM (SELECT run_id, key, min(cid) AS cid, name, payloads, nullif(array_join(transform(array_sort(collect_list(struct(place AS k, rank AS v))), s -> s.v), ', '), '') AS ranks,
                 min(place) AS first_rank
          FROM graphs GROUP BY run_id, key, name, payloads)
), guard_versions AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, key ORDER BY first_rank) AS version,
           count(*) OVER (PARTITION BY run_id, key) AS versions
    FROM (SELECT run_id, key, min(cid) AS cid, guards_print, nullif(array_join(transform(array_sort(collect_list(struct(place AS k, rank AS v))), s -> s.v), ', '), '') AS ranks,
                 min(place) AS first_rank
          FROM comp WHERE guards_print IS NOT NULL AND compile_id != '-/-' AND status != 'missing'
          GROUP BY run_id, key, guards_print)
), times AS (
    SELECT run_id, key, min(cid) AS cid, rank, min(place) AS place, sum(duration_s) AS duration_s FROM comp
    WHERE duration_s IS NOT NULL GROUP BY run_id, key, rank
), scheduled AS (
    SELECT DISTINCT c.run_id, c.key FROM collective_ops o JOIN comp c ON c.id = o.compile
    WHERE o.origin = 'schedule'
), schedules AS (
    SELECT c.run_id, c.key, min(c.cid) AS cid, c.rank, min(c.place) AS place,
           coalesce(nullif(array_join(transform(array_sort(collect_list(struct(o.envelope_id, o.position AS k, o.op AS v))), s -> s.v), ' '), ''), '') AS ops,
           coalesce(nullif(array_join(transform(array_sort(collect_list(struct(o.envelope_id, o.position AS k, o.collective AS v))), s -> s.v), ' '), ''), 'none') AS shown
    FROM comp c JOIN scheduled s ON s.run_id = c.run_id AND s.key = c.key
    LEFT JOIN collective_ops o ON o.compile = c.id AND o.origin = 'schedule'
    GROUP BY c.run_id, c.key, c.rank
), schedule_groups AS (
    SELECT *, count(*) OVER (PARTITION BY run_id, key) AS groups
    FROM (SELECT run_id, key, min(cid) AS cid, ops, shown, nullif(array_join(transform(array_sort(collect_list(struct(place AS k, rank AS v))), s -> s.v), ', '), '') AS ranks
          FROM schedules GROUP BY run_id, key, ops, shown)
), tensor_meta AS (
    SELECT c.run_id, c.key, min(c.cid) AS cid, c.rank, min(c.place) AS place,
           nullif(array_join(transform(array_sort(collect_list(struct(o.envelope_id, o.position AS k, coalesce(o.op, '') || ' ' || coalesce(o.outputs, '') AS v))), s -> s.v), '; '), '') AS meta
    FROM op_estimates o JOIN comp c ON c.id = o.compile
    GROUP BY c.run_id, c.key, c.rank
), meta_versions AS (
    SELECT *, row_number() OVER (PARTITION BY run_id, key ORDER BY first_rank) AS version,
           count(*) OVER (PARTITION BY run_id, key) AS versions
    FROM (SELECT run_id, key, min(cid) AS cid, meta, nullif(array_join(transform(array_sort(collect_list(struct(place AS k, rank AS v))), s -> s.v), ', '), '') AS ranks,
                 min(place) AS first_rank
          FROM tensor_meta GROUP BY run_id, key, meta)
), estimates AS (
    SELECT c.run_id, c.key, min(c.cid) AS cid, c.rank, min(c.place) AS place, sum(o.estimated_runtime_ns) AS ns
    FROM op_estimates o JOIN comp c ON c.id = o.compile
    GROUP BY c.run_id, c.key, c.rank
), last_executions AS (
    SELECT e.source_id, max(g.envelope_id) AS envelope_id
    FROM graph_executions g JOIN envelopes e ON e.id = g.envelope_id GROUP BY e.source_id
), ids AS (
    SELECT source_id, compile_id, min(cid) AS cid FROM comp GROUP BY source_id, compile_id
), executions AS (
    SELECT p.run_id, p.rank, min(p.place) AS place, count(*) AS runs,
           nullif(array_join(transform(array_sort(collect_list(struct(g.position AS k, coalesce(i.cid, g.compile_id) AS v))), s -> s.v), ' '), '') AS graphs
    FROM graph_executions g JOIN last_executions l ON l.envelope_id = g.envelope_id
    JOIN procs p ON p.source_id = l.source_id JOIN runs_ r ON r.id = p.run_id
    LEFT JOIN ids i ON i.source_id = l.source_id AND i.compile_id = g.compile_id
    GROUP BY p.run_id, p.rank
), signatures AS (
    SELECT p.run_id, p.rank, min(p.place) AS place, count(k.key) AS compiles, coalesce(sum(k.duration_s), 0) AS seconds,
           coalesce(nullif(array_join(transform(array_sort(collect_list(struct(k.key AS k, k.key || '=' || coalesce(k.graphs, '') || '=' || coalesce(k.guards_print, '') AS v))), s -> s.v), chr(10)), ''), '') AS signature
    FROM procs p JOIN runs_ r ON r.id = p.run_id
    LEFT JOIN (SELECT c.source_id, c.key, c.duration_s, c.guards_print,
                      (SELECT nullif(array_join(transform(array_sort(collect_list(struct(g.name AS k, g.name || ':' || g.payloads AS v))), s -> s.v), ' '), '') FROM graphs g
                       WHERE g.run_id = c.run_id AND g.key = c.key AND g.rank = c.rank) AS graphs
               FROM comp c WHERE c.compile_id != '-/-') k ON k.source_id = p.source_id
    GROUP BY p.run_id, p.rank
), alike AS (
    SELECT *, dense_rank() OVER (PARTITION BY run_id ORDER BY signature) AS grouping,
           row_number() OVER (PARTITION BY run_id, signature ORDER BY seconds, place) AS by_time,
           count(*) OVER (PARTITION BY run_id, signature) AS size
    FROM signatures
), medians AS (
    SELECT run_id, grouping, avg(seconds) AS median FROM alike
    WHERE by_time IN ((size + 1) div 2, (size + 2) div 2) GROUP BY run_id, grouping
), groups AS (
    SELECT a.run_id, nullif(array_join(transform(array_sort(collect_list(struct(a.place AS k, a.rank AS v))), s -> s.v), ', '), '') AS ranks, min(a.compiles) AS compiles,
           min(a.seconds) AS fastest, max(a.seconds) AS slowest
    FROM alike a GROUP BY a.run_id, a.grouping
), slow AS (
    SELECT a.run_id, a.rank, a.seconds, m.median, a.size FROM alike a
    JOIN medians m ON m.run_id = a.run_id AND m.grouping = a.grouping
    WHERE a.size >= 3 AND a.seconds - m.median > greatest(2.0, 0.25 * m.median)
), last_records AS (
    SELECT p.run_id, max(s.last_time) AS last_time FROM procs p JOIN sources s ON s.id = p.source_id GROUP BY p.run_id
), last_compiles AS (
    SELECT source_id, max(id) AS id FROM compiles WHERE compile_id != '-/-' GROUP BY source_id
), behind AS (
    SELECT o.run_id, o.rank, o.cid, o.co_name, o.start_time, count(DISTINCT f.rank) AS compiled,
           count(DISTINCT CASE WHEN f.status != 'missing' THEN f.rank END) AS finished,
           max(CASE WHEN f.status != 'missing' THEN f.end_time END) AS last_end
    FROM comp o JOIN last_compiles l ON l.id = o.id
    JOIN comp f ON f.run_id = o.run_id AND f.key = o.key AND f.rank != o.rank
    WHERE o.status = 'missing' AND o.dynamo_start IS NOT NULL
    GROUP BY o.run_id, o.rank, o.cid, o.co_name, o.start_time
), execution_groups AS (
    SELECT *, count(*) OVER (PARTITION BY run_id) AS groups
    FROM (SELECT run_id, runs, graphs, nullif(array_join(transform(array_sort(collect_list(struct(place AS k, rank AS v))), s -> s.v), ', '), '') AS ranks
          FROM executions GROUP BY run_id, runs, graphs)
)
SELECT p.run_id, 'missing_compile' AS finding, p.cid AS compile_id, p.ranks,
       'present on ' || CAST(p.n AS STRING) || ' of ' || CAST(r.world_size AS STRING) || ' ' || r.unit AS detail
FROM per_key p JOIN runs_ r ON r.id = p.run_id WHERE p.n < r.world_size
UNION ALL
SELECT run_id, 'cache', cid, ranks, cache || ': ' || results FROM cache_splits WHERE groups > 1
UNION ALL
SELECT run_id, 'cache_pattern', NULL, ranks, shown FROM pattern_groups WHERE groups > 1
UNION ALL
SELECT run_id, 'graph', cid, ranks, name || ': version ' || CAST(version AS STRING) || ' of ' || CAST(versions AS STRING)
FROM graph_versions WHERE versions > 1
UNION ALL
SELECT run_id, 'time', max(cid), max_by(rank, duration_s),
       'slowest rank ' || max_by(rank, duration_s) || ' took '
       || CAST(round(max(duration_s) - min(duration_s), 3) AS STRING) || ' s longer than the fastest'
FROM times GROUP BY run_id, key HAVING count(*) > 1
UNION ALL
SELECT run_id, 'collective_schedule', cid, ranks, shown FROM schedule_groups WHERE groups > 1
UNION ALL
SELECT run_id, 'tensor_meta', cid, ranks, 'version ' || CAST(version AS STRING) || ' of ' || CAST(versions AS STRING)
FROM meta_versions WHERE versions > 1
UNION ALL
SELECT run_id, 'estimated_runtime', max(cid), max_by(rank, ns),
       'slowest rank ' || max_by(rank, ns) || ' is estimated '
       || CAST(round((max(ns) - min(ns)) / 1e6, 3) AS STRING) || ' ms slower than the fastest'
FROM estimates GROUP BY run_id, key HAVING count(*) > 1 AND max(ns) > min(ns)
UNION ALL
SELECT run_id, 'guards', cid, ranks, 'version ' || CAST(version AS STRING) || ' of ' || CAST(versions AS STRING)
FROM guard_versions WHERE versions > 1
UNION ALL
SELECT run_id, 'group', NULL, ranks,
       CAST(compiles AS STRING) || CASE WHEN compiles = 1 THEN ' compile, ' ELSE ' compiles, ' END
       || CAST(round(fastest, 1) AS STRING)
       || CASE WHEN round(slowest, 1) > round(fastest, 1) THEN '–' || CAST(round(slowest, 1) AS STRING) ELSE '' END || ' s'
FROM groups
UNION ALL
SELECT run_id, 'slow_rank', NULL, rank,
       CAST(round(seconds, 1) AS STRING) || ' s compiling, ' || CAST(round(seconds - median, 1) AS STRING)
       || ' s more than the median (' || CAST(round(median, 1) AS STRING) || ' s) of the ' || CAST(size AS STRING)
       || ' that compiled the same'
FROM slow
UNION ALL
SELECT b.run_id, 'behind', b.cid, b.rank,
       'compiling [' || b.cid || ']' || coalesce(' ' || b.co_name, '') || ' for '
       || CAST(round((unix_micros(CAST(l.last_time AS TIMESTAMP)) / 1e6) - (unix_micros(CAST(b.start_time AS TIMESTAMP)) / 1e6), 1) AS STRING)
       || ' s at the last record; '
       || CASE WHEN b.compiled = r.world_size - 1 THEN 'the other ' || CAST(b.finished AS STRING) || ' ' || r.unit
               ELSE 'the ' || CAST(b.finished AS STRING) || ' other ' || r.unit || ' that compiled it' END
       || ' finished it, the last '
       || CAST(round((unix_micros(CAST(l.last_time AS TIMESTAMP)) / 1e6) - (unix_micros(CAST(b.last_end AS TIMESTAMP)) / 1e6), 1) AS STRING)
       || ' s before'
FROM behind b JOIN last_records l ON l.run_id = b.run_id JOIN runs_ r ON r.id = b.run_id
WHERE b.finished = b.compiled AND b.finished > 0
UNION ALL
SELECT run_id, 'execution_order', NULL, ranks,
       CAST(runs AS STRING) || ' graph runs ('
       || CASE WHEN length(graphs) > 200 THEN substr(graphs, 1, 200) || ' ...' ELSE graphs END || ')'
FROM execution_groups WHERE groups > 1
ORDER BY 1, 2, 3
