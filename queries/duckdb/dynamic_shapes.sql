-- Dynamic shapes (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/dynamic_shapes.sql, in DuckDB's dialect.
-- :run  run id (NULL: every run)
SELECT 'symbol' AS what, c.run_id, c.rank, c.id AS compile, c.compile_id, c.co_name, s.symbol,
       CASE WHEN s.unbacked = 1 THEN 'unbacked' ELSE 'backed' END AS detail, s.value, s.value_range,
       s.source AS sources, NULL AS reason,
       (SELECT f.filename || ':' || f.line || coalesce('  ' || f.loc, '') FROM frames f
        WHERE f.envelope_id = s.envelope_id AND f.stack = 'user_stack' AND f.filename NOT LIKE '%-packages/%'
          AND f.filename NOT LIKE '%/lib/python3.%' AND f.filename NOT LIKE '<%' ORDER BY f.depth DESC LIMIT 1) AS line
FROM symbols s JOIN compiles c ON c.id = s.compile
WHERE $run IS NULL OR c.run_id = $run
UNION ALL
SELECT 'specialization', c.run_id, c.rank, c.id, c.compile_id, c.co_name, g.symbol, g.user_code, g.value, NULL,
       g.source, g.reason, coalesce((SELECT f.filename || ':' || f.line || coalesce('  ' || f.loc, '') FROM frames f
        WHERE f.envelope_id = g.envelope_id AND f.stack = 'user_stack' AND f.filename NOT LIKE '%-packages/%'
          AND f.filename NOT LIKE '%/lib/python3.%' AND f.filename NOT LIKE '<%' ORDER BY f.depth DESC LIMIT 1), g.user_code)
FROM guards g JOIN compiles c ON c.id = g.compile
WHERE g.origin = 'symbolic_shape_specialization' AND ($run IS NULL OR c.run_id = $run)
ORDER BY 2, 3, 4, 1
