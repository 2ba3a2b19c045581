-- Recompile reasons
-- Per compiled frame (function and file:line), across runs and ranks: how often it
-- recompiled, whether it hit the recompile limit, and each distinct failed guard with how
-- many times it failed and the compile ids it caused.
-- :run  run id (empty: every run)
-- :rank  rank (empty: every rank)
WITH selected AS (
    SELECT * FROM compiles
    WHERE (coalesce(:run, '') = '' OR run_id = :run) AND (coalesce(:rank, '') = '' OR rank = :rank)
), frame AS (
    SELECT co_name, co_filename, co_firstlineno,
           sum(frame_compile_id > 0) AS recompiles,
           max(coalesce(fail_reason, '') LIKE 'Dynamo recompile limit exceeded%') AS hit_limit
    FROM selected GROUP BY co_name, co_filename, co_firstlineno
)
SELECT f.co_name, f.co_filename || ':' || f.co_firstlineno AS location, f.recompiles, f.hit_limit,
       r.reason AS failed_guard, count(*) AS times,
       group_concat(DISTINCT c.compile_id) AS compile_ids,
       count(DISTINCT c.run_id) AS runs, group_concat(DISTINCT c.rank) AS ranks
FROM selected c
JOIN failed_guards r ON r.compile = c.id
JOIN frame f ON f.co_name IS c.co_name AND f.co_filename IS c.co_filename
    AND f.co_firstlineno IS c.co_firstlineno
GROUP BY f.co_name, f.co_filename, f.co_firstlineno, r.reason
ORDER BY f.recompiles DESC, f.co_name, times DESC, failed_guard
