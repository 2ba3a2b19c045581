-- Collectives per graph (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/collectives.sql, in DuckDB's dialect.
-- :run  run id (NULL: every run)
WITH graphs AS (
    SELECT c.id AS compile, c.run_id, c.rank, c.compile_id FROM compiles c
    WHERE ($run IS NULL OR c.run_id = $run)
      AND (c.id IN (SELECT compile FROM collective_ops) OR c.id IN (SELECT compile FROM op_estimates))
), ops AS (
    SELECT o.compile, o.origin,
           string_agg(o.collective, ' ' ORDER BY o.envelope_id, o.position) AS collectives,
           count_if(o.collective = 'wait') AS waits, count_if(o.collective != 'wait') AS issued
    FROM collective_ops o WHERE o.compile IN (SELECT compile FROM graphs)
    GROUP BY o.compile, o.origin
), counts AS (
    SELECT compile, collective, count_if(origin = 'schedule') AS scheduled, count_if(origin = 'code') AS called
    FROM collective_ops WHERE collective != 'wait' AND compile IN (SELECT compile FROM graphs)
    GROUP BY compile, collective
), offsets AS (
    SELECT compile, sum(abs(scheduled - called)) AS unmatched FROM counts GROUP BY compile
), estimates AS (
    SELECT compile, count(*) AS ops_estimated, sum(estimated_runtime_ns) AS ns
    FROM op_estimates WHERE compile IN (SELECT compile FROM graphs) GROUP BY compile
)
SELECT g.run_id, g.rank, g.compile_id, g.compile,
       s.collectives AS schedule, k.collectives AS code,
       CASE WHEN s.compile IS NULL THEN NULL WHEN k.compile IS NULL THEN 'no code logged'
            WHEN f.unmatched = 0 AND k.issued - k.waits <= 0 THEN 'ok' ELSE 'mismatch' END AS parity,
       CASE WHEN k.compile IS NULL OR s.compile IS NULL THEN NULL ELSE f.unmatched END AS unmatched_collectives,
       CASE WHEN k.compile IS NULL THEN NULL WHEN k.issued > k.waits THEN k.issued - k.waits ELSE 0 END
           AS missing_waits,
       e.ops_estimated, round(e.ns / 1e6, 6) AS estimated_runtime_ms
FROM graphs g
LEFT JOIN ops s ON s.compile = g.compile AND s.origin = 'schedule'
LEFT JOIN ops k ON k.compile = g.compile AND k.origin = 'code'
LEFT JOIN offsets f ON f.compile = g.compile
LEFT JOIN estimates e ON e.compile = g.compile
ORDER BY g.run_id, g.compile_id, g.rank
