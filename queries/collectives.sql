-- Collectives per graph
-- For each graph inductor compiled with collectives or runtime estimates, per rank: the
-- collectives it scheduled, in order; the collective calls in its generated code; whether the
-- two agree (parity: `unmatched_collectives` is how many the code has too many or too few,
-- `missing_waits` how many collectives in the code no wait_tensor waits for); and inductor's
-- estimated runtime of the graph (LOG_TLPARSE=1). Compare ranks with rank_divergence.
-- :run  run id (empty: every run)
WITH graphs AS (
    SELECT c.id AS compile, c.run_id, c.rank, c.compile_id FROM compiles c
    WHERE (c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = ''))
      AND (EXISTS (SELECT 1 FROM collective_ops o WHERE o.compile = c.id)
           OR EXISTS (SELECT 1 FROM op_estimates o WHERE o.compile = c.id))
), ops AS (
    SELECT compile, origin,
           group_concat(collective, ' ') AS collectives,
           sum(collective = 'wait') AS waits, sum(collective != 'wait') AS issued
    FROM (SELECT o.compile, o.origin, o.collective FROM collective_ops o
          WHERE o.compile IN (SELECT compile FROM graphs) ORDER BY o.envelope_id, o.position)
    GROUP BY compile, origin
), counts AS (
    SELECT compile, collective, sum(origin = 'schedule') AS scheduled, sum(origin = 'code') AS called
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
