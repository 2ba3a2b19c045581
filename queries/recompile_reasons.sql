-- Recompile reasons
-- Per compiled function (name and file:line), across runs and ranks: its recompiles grouped by the input whose guard
-- failed (its source, as `L['n']` or `L['x'].size()[0]`, or a global state such as grad_mode; else torch's words)
-- and the kind of guard (size, stride, dtype, value, global state, ...), the values that input took in order, and
-- how many recompiles each caused. A recompile counts once, under the guard of its newest cache entry, the first
-- reason torch lists (the older entries' guards failed for older changes). line is the user code the guard comes
-- from (torch's comment, else where the recompile made the input a symbol, else torch's comment on the guard of
-- the entry that failed), dynamic is 1 when the recompile
-- made that input a symbol (torch's automatic dynamic shapes), compile_ids lists the compiles it caused, with ×N
-- where one id recompiled on N ranks or runs, and failed_guard is torch's text of the first.
-- :run  run id (empty: every run)
-- :rank  rank (empty: every rank)
WITH recompiled AS MATERIALIZED (  -- the recompiles asked: a function compiled again (its frame_compile_id counts up)
    SELECT id, run_id, rank, source_id, generation, co_name, co_filename, co_firstlineno, compile_id,
           status = 'error' AND (fail_reason LIKE 'Dynamo recompile limit exceeded%'
                                 OR fail_type = 'FailOnRecompileLimitHit') AS limit_hit
    FROM compiles
    WHERE (run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')) AND (coalesce(:rank, '') = '' OR rank = :rank)
      AND frame_compile_id > 0
), frame AS (
    SELECT co_name, co_filename, co_firstlineno, count(*) AS recompiles, max(limit_hit) AS hit_limit
    FROM recompiled GROUP BY co_name, co_filename, co_firstlineno
), newest AS MATERIALIZED (  -- each recompile's first reason (of its first artifact): the guard of its newest cache entry
    SELECT c.id, c.run_id, c.rank, c.source_id, c.generation, c.co_name, c.co_filename, c.co_firstlineno,
           c.compile_id, r.previous_compile_id AS previous,
           trim(substr(r.reason, 1, instr(r.reason || char(10), char(10)) - 1)) AS first_line
    FROM recompiled c JOIN failed_guards r ON r.compile = c.id AND r.position = 0
    WHERE NOT EXISTS (SELECT 1 FROM failed_guards o WHERE o.compile = c.id AND o.position = 0 AND o.id < r.id)
), split AS MATERIALIZED (  -- the guard, and torch's comment on it (the user line it comes from)
    SELECT *, CASE WHEN instr(first_line, '  #') > 0 THEN rtrim(substr(first_line, 1, instr(first_line, '  #') - 1))
                   ELSE first_line END AS guard_text,
              CASE WHEN instr(first_line, '  #') > 0 THEN trim(substr(first_line, instr(first_line, '  #') + 3)) END
                  AS comment
    FROM newest
), named AS (  -- a tensor's name in torch's words ("tensor 'x' dtype mismatch. ..."), what follows it
    SELECT *, CASE WHEN guard_text LIKE 'tensor ''%'' %'
                   THEN substr(guard_text, 9, instr(substr(guard_text, 9), '''') - 1) END AS tensor
    FROM split
), tensors AS MATERIALIZED (
    SELECT *, CASE WHEN tensor IS NULL THEN NULL
                   WHEN tensor LIKE 'L[%' OR tensor LIKE 'G[%' THEN tensor
                   WHEN instr(tensor, '[') > 0 THEN 'L[''' || substr(tensor, 1, instr(tensor, '[') - 1) || ''']'
                                                    || substr(tensor, instr(tensor, '['))
                   ELSE 'L[''' || tensor || ''']' END AS tensor_source,
              CASE WHEN tensor IS NOT NULL THEN substr(guard_text, length(tensor) + 11) END AS rest,
              CASE WHEN tensor IS NULL AND instr(guard_text, ' == ') > 0
                   THEN trim(substr(guard_text, 1, instr(guard_text, ' == ') - 1)) END AS lhs
    FROM named
), kinds AS (
    SELECT *,
           CASE WHEN rest LIKE 'size mismatch at index %' THEN 'size'
                WHEN rest LIKE 'stride mismatch at index %' THEN 'stride'
                WHEN instr(rest, ' mismatch') > 0 THEN substr(rest, 1, instr(rest, ' mismatch') - 1)
                WHEN guard_text LIKE 'GLOBAL_STATE changed: %' THEN 'global state'
                WHEN lhs IS NOT NULL THEN 'value'
                ELSE 'other' END AS kind,
           CASE WHEN rest LIKE '%mismatch at index %'
                THEN substr(rest, instr(rest, ' index ') + 7,
                            instr(substr(rest, instr(rest, ' index ') + 7) || '.', '.') - 1) END AS dim
    FROM tensors
), inputs AS MATERIALIZED (
    SELECT *,
           CASE WHEN kind IN ('size', 'stride') THEN tensor_source || '.' || kind || '()[' || dim || ']'
                WHEN tensor_source IS NOT NULL THEN tensor_source
                WHEN kind = 'global state' THEN trim(substr(guard_text, 23))
                WHEN kind = 'value' AND lhs NOT LIKE '%[%' AND lhs NOT LIKE '%.%' AND lhs NOT LIKE '%(%' AND lhs NOT LIKE '% %' THEN 'L[''' || lhs || ''']'
                WHEN kind = 'value' THEN lhs END AS input,
           CASE WHEN instr(rest, 'expected ') > 0 AND instr(rest, ', actual ') > instr(rest, 'expected ')
                THEN substr(rest, instr(rest, 'expected ') + 9, instr(rest, ', actual ') - instr(rest, 'expected ') - 9)
                WHEN lhs IS NOT NULL THEN trim(substr(guard_text, instr(guard_text, ' == ') + 4)) END AS expected,
           CASE WHEN instr(rest, ', actual ') > 0 THEN substr(rest, instr(rest, ', actual ') + 9) END AS actual_said
    FROM kinds
), observed AS (  -- what the recompile saw: torch's "actual", else its own guard or symbol on that input
    SELECT i.*,
           coalesce(i.actual_said,
                    (SELECT trim(substr(g.text, length(i.input) + 5)) FROM guards g
                     WHERE i.kind = 'value' AND g.compile = i.id AND g.guard_type = 'EQUALS_MATCH'
                       AND substr(g.text, 1, length(i.input) + 4) = i.input || ' == ' LIMIT 1),
                    (SELECT s.value FROM symbols s WHERE i.kind = 'value' AND s.compile = i.id AND s.source = i.input
                     LIMIT 1)) AS actual,
           EXISTS (SELECT 1 FROM symbols s WHERE s.compile = i.id AND s.source = i.input) AS dynamic,
           coalesce(i.comment,
                    (SELECT f.loc || '  # ' || f.filename || ':' || f.line || ' in ' || f.name
                     FROM symbols s JOIN frames f ON f.envelope_id = s.envelope_id AND f.stack = 'user_stack'
                     WHERE s.compile = i.id AND s.source = i.input AND f.loc IS NOT NULL
                       AND f.filename NOT LIKE '%-packages/%' AND f.filename NOT LIKE '%/lib/python3.%'
                       AND f.filename NOT LIKE '<%'
                     ORDER BY f.depth DESC LIMIT 1),
                    (SELECT g.user_code FROM compiles p JOIN guards g ON g.compile = p.id
                     WHERE i.tensor_source IS NOT NULL AND p.source_id = i.source_id AND p.generation = i.generation
                       AND p.compile_id = i.previous AND g.guard_type = 'TENSOR_MATCH'
                       AND substr(g.text, 1, length(i.tensor_source) + 14) = 'check_tensor(' || i.tensor_source || ','
                     LIMIT 1)) AS line
    FROM inputs i
), keyed AS MATERIALIZED (
    SELECT *, coalesce(input, guard_text) AS what FROM observed
), by_id AS (
    SELECT co_name, co_filename, co_firstlineno, what, kind, compile_id, count(*) AS n, min(id) AS first
    FROM keyed GROUP BY co_name, co_filename, co_firstlineno, what, kind, compile_id
), listed AS (
    SELECT co_name, co_filename, co_firstlineno, what, kind, sum(n) AS compiles,
           group_concat(compile_id || CASE WHEN n > 1 THEN ' ×' || n ELSE '' END, ', ') AS compile_ids
    FROM (SELECT * FROM by_id ORDER BY first)
    GROUP BY co_name, co_filename, co_firstlineno, what, kind
), seen AS (  -- each value once, where it was first seen: the entry's value, then the recompile's
    SELECT co_name, co_filename, co_firstlineno, what, kind, value, min(place) AS place
    FROM (SELECT co_name, co_filename, co_firstlineno, what, kind, expected AS value, 2 * id AS place FROM keyed
          UNION ALL
          SELECT co_name, co_filename, co_firstlineno, what, kind, actual, 2 * id + 1 FROM keyed)
    WHERE value IS NOT NULL
    GROUP BY co_name, co_filename, co_firstlineno, what, kind, value
), valued AS (
    SELECT co_name, co_filename, co_firstlineno, what, kind, group_concat(value, ', ') AS "values"
    FROM (SELECT * FROM seen ORDER BY place)
    GROUP BY co_name, co_filename, co_firstlineno, what, kind
), spread AS (  -- (guard_text and line: the first recompile's, SQLite's bare columns beside min())
    SELECT co_name, co_filename, co_firstlineno, what, kind, max(input) AS input, count(DISTINCT run_id) AS runs,
           group_concat(DISTINCT rank) AS ranks, max(dynamic) AS dynamic, min(id) AS first, guard_text, line
    FROM keyed GROUP BY co_name, co_filename, co_firstlineno, what, kind
)
SELECT f.co_name, f.co_filename || ':' || f.co_firstlineno AS location, f.recompiles, f.hit_limit,
       s.input, l.kind AS guard, v."values", l.compiles, s.dynamic, s.line, l.compile_ids, s.guard_text AS failed_guard,
       s.runs, s.ranks
FROM listed l
JOIN spread s ON s.co_name IS l.co_name AND s.co_filename IS l.co_filename AND s.co_firstlineno IS l.co_firstlineno
    AND s.what = l.what AND s.kind = l.kind
LEFT JOIN valued v ON v.co_name IS l.co_name AND v.co_filename IS l.co_filename
    AND v.co_firstlineno IS l.co_firstlineno AND v.what = l.what AND v.kind = l.kind
JOIN frame f ON f.co_name IS l.co_name AND f.co_filename IS l.co_filename AND f.co_firstlineno IS l.co_firstlineno
ORDER BY f.recompiles DESC, f.co_name, l.compiles DESC, s.first
