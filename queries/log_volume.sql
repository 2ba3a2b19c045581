-- Log volume
-- Who is generating all the log bytes: bytes and records grouped by envelope kind and
-- artifact name (by=kind), emitting torch file:line (by=emitter), compile (by=compile),
-- rank (by=rank) or run (by=run), with each group's share of the total. "Which compile
-- emitted the most bytes" is by=compile, limit=1.
-- :by  kind (default), emitter, compile, rank or run
-- :run  run id (empty: every run)
-- :rank  rank (empty: every rank)
-- :limit  rows (default 50)
WITH grouped AS (
    SELECT CASE coalesce(nullif(:by, ''), 'kind')
               WHEN 'emitter' THEN e.emitter_file || ':' || e.emitter_line
               WHEN 'compile' THEN coalesce(e.compile, '(no compile)')
               WHEN 'rank' THEN coalesce(s.rank, '(no rank)')
               WHEN 'run' THEN s.run_id
               ELSE e.kind || coalesce(' ' || e.name, '') END AS key,
           count(*) AS records, sum(e.envelope_bytes + e.payload_bytes) AS bytes,
           min(s.run_id) AS run_id, min(e.compile_id) AS compile_id, min(s.rank) AS rank
    FROM envelopes e JOIN sources s ON s.id = e.source_id
    WHERE (coalesce(:run, '') = '' OR s.run_id = :run) AND (coalesce(:rank, '') = '' OR s.rank = :rank)
    GROUP BY key
)
SELECT key, CASE coalesce(nullif(:by, ''), 'kind') WHEN 'compile' THEN compile_id END AS compile_id,
       CASE WHEN coalesce(nullif(:by, ''), 'kind') IN ('compile', 'rank', 'run') THEN run_id END AS run_id,
       CASE WHEN coalesce(nullif(:by, ''), 'kind') IN ('compile', 'rank') THEN rank END AS rank,
       records, bytes, round(100.0 * bytes / sum(bytes) OVER (), 2) AS share_percent
FROM grouped ORDER BY bytes DESC LIMIT coalesce(nullif(:limit, ''), 50)
