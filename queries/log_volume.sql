-- Log volume
-- Who is generating all the log bytes: bytes and records grouped by envelope kind and
-- artifact name (by=kind), emitting torch file:line (by=emitter), compile (by=compile),
-- rank (by=rank) or run (by=run), with each group's share of the total (by=compile names the
-- compile and its function). "Which compile emitted the most bytes" is by=compile, limit=1.
-- :by  kind (default), emitter, compile, rank or run
-- :run  run id (empty: every run)
-- :rank  rank (empty: every rank)
-- :limit  rows (default 50)
WITH by_compile AS (
    SELECT c.id AS key, c.id AS compile, c.compile_id, c.co_name, c.run_id, c.rank, c.envelope_count AS records,
           c.envelope_bytes + c.payload_bytes AS bytes
    FROM compiles c
    WHERE (c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')) AND (coalesce(:rank, '') = '' OR c.rank = :rank)
    UNION ALL  -- what no compile emitted
    SELECT '(no compile)', NULL, NULL, NULL, NULL, NULL, sum(v.records) - coalesce((SELECT sum(envelope_count) FROM compiles c
               WHERE (c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')) AND (coalesce(:rank, '') = '' OR c.rank = :rank)), 0),
           sum(v.bytes) - coalesce((SELECT sum(envelope_bytes + payload_bytes) FROM compiles c
               WHERE (c.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')) AND (coalesce(:rank, '') = '' OR c.rank = :rank)), 0)
    FROM volume v JOIN sources s ON s.id = v.source_id
    WHERE (s.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')) AND (coalesce(:rank, '') = '' OR s.rank = :rank)
), by_other AS (
    SELECT CASE coalesce(nullif(:by, ''), 'kind')
               WHEN 'emitter' THEN v.emitter_file || ':' || v.emitter_line
               WHEN 'rank' THEN coalesce(s.rank, '(no rank)')
               WHEN 'run' THEN s.run_id
               ELSE v.kind || coalesce(' ' || v.name, '') END AS key,
           NULL AS compile, NULL AS compile_id, NULL AS co_name, min(s.run_id) AS run_id, min(s.rank) AS rank,
           sum(v.records) AS records, sum(v.bytes) AS bytes
    FROM volume v JOIN sources s ON s.id = v.source_id
    WHERE (s.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')) AND (coalesce(:rank, '') = '' OR s.rank = :rank)
    GROUP BY 1
), grouped AS (
    SELECT * FROM by_compile WHERE coalesce(nullif(:by, ''), 'kind') = 'compile'
    UNION ALL
    SELECT * FROM by_other WHERE coalesce(nullif(:by, ''), 'kind') != 'compile'
)
SELECT key, compile, compile_id, co_name AS function,
       CASE WHEN coalesce(nullif(:by, ''), 'kind') IN ('compile', 'rank', 'run') THEN run_id END AS run_id,
       CASE WHEN coalesce(nullif(:by, ''), 'kind') IN ('compile', 'rank') THEN rank END AS rank,
       records, bytes, round(100.0 * bytes / sum(bytes) OVER (), 2) AS share_percent
FROM grouped WHERE records > 0 ORDER BY bytes DESC LIMIT coalesce(nullif(:limit, ''), 50)
