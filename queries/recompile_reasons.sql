-- Recompile reasons
-- Per compiled frame (function and file:line), across runs and ranks: how often it
-- recompiled, whether it hit the recompile limit, and each distinct failed guard with the
-- compiles it caused: compiles counts them all (each rank's and each run's), and compile_ids
-- lists the same compiles by id, with ×N where one id recompiled on N ranks or runs.
-- :run  run id (empty: every run)
-- :rank  rank (empty: every rank)
WITH selected AS (
    SELECT * FROM compiles
    WHERE (run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')) AND (coalesce(:rank, '') = '' OR rank = :rank)
), frame AS (
    SELECT co_name, co_filename, co_firstlineno,
           sum(frame_compile_id > 0) AS recompiles,
           max(coalesce(fail_reason, '') LIKE 'Dynamo recompile limit exceeded%') AS hit_limit
    FROM selected GROUP BY co_name, co_filename, co_firstlineno
), caused AS (
    -- each compile a failed guard caused, once (a guard may fail against several cache entries)
    SELECT DISTINCT c.id, c.co_name, c.co_filename, c.co_firstlineno, c.compile_id, c.run_id, c.rank, r.reason
    FROM selected c JOIN failed_guards r ON r.compile = c.id
), by_id AS (
    SELECT co_name, co_filename, co_firstlineno, reason, compile_id, count(*) AS n, min(id) AS first
    FROM caused GROUP BY co_name, co_filename, co_firstlineno, reason, compile_id
), listed AS (
    SELECT co_name, co_filename, co_firstlineno, reason, sum(n) AS compiles,
           group_concat(compile_id || CASE WHEN n > 1 THEN ' ×' || n ELSE '' END, ', ') AS compile_ids
    FROM (SELECT * FROM by_id ORDER BY first)
    GROUP BY co_name, co_filename, co_firstlineno, reason
), spread AS (
    SELECT co_name, co_filename, co_firstlineno, reason, count(DISTINCT run_id) AS runs,
           group_concat(DISTINCT rank) AS ranks
    FROM caused GROUP BY co_name, co_filename, co_firstlineno, reason
)
SELECT f.co_name, f.co_filename || ':' || f.co_firstlineno AS location, f.recompiles, f.hit_limit,
       l.reason AS failed_guard, l.compiles, l.compile_ids, s.runs, s.ranks
FROM listed l
JOIN spread s ON s.co_name IS l.co_name AND s.co_filename IS l.co_filename
    AND s.co_firstlineno IS l.co_firstlineno AND s.reason = l.reason
JOIN frame f ON f.co_name IS l.co_name AND f.co_filename IS l.co_filename
    AND f.co_firstlineno IS l.co_firstlineno
ORDER BY f.recompiles DESC, f.co_name, l.compiles DESC, failed_guard
