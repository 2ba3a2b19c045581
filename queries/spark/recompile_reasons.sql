-- Recompile reasons (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/recompile_reasons.sql, in Spark SQL.
-- :run  run id (NULL: every run)
-- :rank  rank (NULL: every rank)
WITH recompiled AS (  -- the recompiles asked: a function compiled again (its frame_compile_id counts up)
    SELECT id, run_id, rank, source_id, generation, co_name, co_filename, co_firstlineno, compile_id,
           status = 'error' AND (fail_reason LIKE 'Dynamo recompile limit exceeded%'
                                 OR fail_type = 'FailOnRecompileLimitHit') AS limit_hit
    FROM compiles
    WHERE (run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE :run IS NULL)) AND (:rank IS NULL OR rank = :rank)
      AND frame_compile_id > 0
), frame AS (
    SELECT co_name, co_filename, co_firstlineno, count(*) AS recompiles, max(CASE WHEN limit_hit THEN 1 ELSE 0 END) AS hit_limit
    FROM recompiled GROUP BY co_name, co_filename, co_firstlineno
), newest AS (  -- each recompile's first reason (of its first artifact): the guard of its newest cache entry
    SELECT c.id, c.run_id, c.rank, c.source_id, c.generation, c.co_name, c.co_filename, c.co_firstlineno,
           c.compile_id, r.previous_compile_id AS previous,
           trim(substr(r.reason, 1, instr(r.reason || chr(10), chr(10)) - 1)) AS first_line
    FROM recompiled c JOIN failed_guards r ON r.compile = c.id AND r.position = 0
    WHERE NOT EXISTS (SELECT 1 FROM failed_guards o WHERE o.compile = c.id AND o.position = 0 AND o.id < r.id)
), split AS (  -- the guard, and torch's comment on it (the user line it comes from)
    SELECT *, CASE WHEN instr(first_line, '  #') > 0 THEN rtrim(substr(first_line, 1, instr(first_line, '  #') - 1))
                   ELSE first_line END AS guard_text,
              CASE WHEN instr(first_line, '  #') > 0 THEN trim(substr(first_line, instr(first_line, '  #') + 3)) END
                  AS comment
    FROM newest
), named AS (  -- a tensor's name in torch's words ("tensor 'x' dtype mismatch. ..."), what follows it
    SELECT *, CASE WHEN guard_text LIKE 'tensor ''%'' %'
                   THEN substr(guard_text, 9, instr(substr(guard_text, 9), '''') - 1) END AS tensor
    FROM split
), tensors AS (
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
), inputs AS (
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
           CASE WHEN EXISTS (SELECT 1 FROM symbols s WHERE s.compile = i.id AND s.source = i.input) THEN 1 ELSE 0 END
               AS dynamic,
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
), keyed AS (
    SELECT *, coalesce(input, guard_text) AS what FROM observed
), by_id AS (
    SELECT co_name, co_filename, co_firstlineno, what, kind, compile_id, count(*) AS n, min(id) AS first
    FROM keyed GROUP BY co_name, co_filename, co_firstlineno, what, kind, compile_id
), listed AS (
    SELECT co_name, co_filename, co_firstlineno, what, kind, sum(n) AS compiles,
           nullif(array_join(transform(array_sort(collect_list(struct(first AS k, compile_id || CASE WHEN n > 1 THEN ' ×' || CAST(n AS STRING) ELSE '' END AS v))), s -> s.v), ', '), '')
               AS compile_ids
    FROM by_id GROUP BY co_name, co_filename, co_firstlineno, what, kind
), seen AS (  -- each value once, where it was first seen: the entry's value, then the recompile's
    SELECT co_name, co_filename, co_firstlineno, what, kind, value, min(place) AS place
    FROM (SELECT co_name, co_filename, co_firstlineno, what, kind, expected AS value, 2 * id AS place FROM keyed
          UNION ALL
          SELECT co_name, co_filename, co_firstlineno, what, kind, actual, 2 * id + 1 FROM keyed)
    WHERE value IS NOT NULL
    GROUP BY co_name, co_filename, co_firstlineno, what, kind, value
), valued AS (
    SELECT co_name, co_filename, co_firstlineno, what, kind, nullif(array_join(transform(array_sort(collect_list(struct(place AS k, value AS v))), s -> s.v), ', '), '') AS `values`
    FROM seen GROUP BY co_name, co_filename, co_firstlineno, what, kind
), spread AS (
    SELECT co_name, co_filename, co_firstlineno, what, kind, max(input) AS input, count(DISTINCT run_id) AS runs,
           nullif(array_join(array_sort(collect_set(CAST(rank AS STRING))), ','), '') AS ranks, max(dynamic) AS dynamic, min(id) AS first,
           min_by(guard_text, id) AS guard_text, min_by(line, id) AS line
    FROM keyed GROUP BY co_name, co_filename, co_firstlineno, what, kind
)
SELECT f.co_name, f.co_filename || ':' || f.co_firstlineno AS location, f.recompiles, f.hit_limit,
       s.input, l.kind AS guard, v.`values`, l.compiles, s.dynamic, s.line, l.compile_ids, s.guard_text AS failed_guard,
       s.runs, s.ranks
FROM listed l
JOIN spread s ON s.co_name IS NOT DISTINCT FROM l.co_name AND s.co_filename IS NOT DISTINCT FROM l.co_filename AND s.co_firstlineno IS NOT DISTINCT FROM l.co_firstlineno
    AND s.what = l.what AND s.kind = l.kind
LEFT JOIN valued v ON v.co_name IS NOT DISTINCT FROM l.co_name AND v.co_filename IS NOT DISTINCT FROM l.co_filename
    AND v.co_firstlineno IS NOT DISTINCT FROM l.co_firstlineno AND v.what = l.what AND v.kind = l.kind
JOIN frame f ON f.co_name IS NOT DISTINCT FROM l.co_name AND f.co_filename IS NOT DISTINCT FROM l.co_filename AND f.co_firstlineno IS NOT DISTINCT FROM l.co_firstlineno
ORDER BY f.recompiles DESC, f.co_name, l.compiles DESC, s.first
