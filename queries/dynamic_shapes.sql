-- Dynamic shapes
-- Symbols the shape environment created (backed and unbacked) and the specializations of
-- symbols to constants, with their sources and reasons, and line: the user line that created
-- or specialized each (file:line and its source line, as torch logged the user's stack).
-- :run  run id (empty: every run)
SELECT 'symbol' AS what, c.run_id, c.rank, c.id AS compile, c.compile_id, c.co_name, s.symbol,
       CASE WHEN s.unbacked THEN 'unbacked' ELSE 'backed' END AS detail, s.value, s.value_range,
       s.source AS sources, NULL AS reason,
       (SELECT f.filename || ':' || f.line || coalesce('  ' || f.loc, '') FROM frames f
        WHERE f.envelope_id = s.envelope_id AND f.stack = 'user_stack' AND f.filename NOT LIKE '%-packages/%'
          AND f.filename NOT LIKE '%/lib/python3.%' AND f.filename NOT LIKE '<%' ORDER BY f.depth DESC LIMIT 1) AS line
FROM symbols s JOIN compiles c ON c.id = s.compile
WHERE c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')
UNION ALL
SELECT 'specialization', c.run_id, c.rank, c.id, c.compile_id, c.co_name, g.symbol, g.user_code, g.value, NULL,
       g.source, g.reason, coalesce((SELECT f.filename || ':' || f.line || coalesce('  ' || f.loc, '') FROM frames f
        WHERE f.envelope_id = g.envelope_id AND f.stack = 'user_stack' AND f.filename NOT LIKE '%-packages/%'
          AND f.filename NOT LIKE '%/lib/python3.%' AND f.filename NOT LIKE '<%' ORDER BY f.depth DESC LIMIT 1), g.user_code)
FROM guards g JOIN compiles c ON c.id = g.compile
WHERE g.origin = 'symbolic_shape_specialization' AND (c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = ''))
ORDER BY 2, 3, 4, 1
