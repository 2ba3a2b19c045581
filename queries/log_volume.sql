-- Log volume
-- Who is generating all the log bytes: bytes and records grouped by envelope kind and
-- artifact name (by=kind), emitting torch file:line (by=emitter), compile (by=compile),
-- rank (by=rank) or run (by=run), with each group's share of the total. "Which compile
-- emitted the most bytes" is by=compile, limit=1.
-- :by  kind (default), emitter, compile, rank or run
-- :run  run id (empty: every run)
-- :rank  rank (empty: every rank)
-- :limit  rows (default 50)
WITH selected AS (
    SELECT e.kind, e.name, e.emitter_file, e.emitter_line, e.compile, e.compile_id, e.rank AS envelope_rank,
           s.rank, s.run_id, e.envelope_bytes + e.payload_bytes AS bytes
    FROM envelopes e JOIN sources s ON s.id = e.source_id
    WHERE (coalesce(:run, '') = '' OR s.run_id = :run) AND (coalesce(:rank, '') = '' OR s.rank = :rank)
), grouped AS (
    SELECT CASE coalesce(nullif(:by, ''), 'kind')
               WHEN 'emitter' THEN emitter_file || ':' || emitter_line
               WHEN 'compile' THEN coalesce(compile, '(no compile)')
               WHEN 'rank' THEN coalesce(rank, '(no rank)')
               WHEN 'run' THEN run_id
               ELSE kind || coalesce(' ' || name, '') END AS key,
           count(*) AS records, sum(bytes) AS bytes,
           min(run_id) AS run_id, min(compile_id) AS compile_id, min(rank) AS rank
    FROM selected GROUP BY key
)
SELECT key, CASE coalesce(nullif(:by, ''), 'kind') WHEN 'compile' THEN compile_id END AS compile_id,
       CASE WHEN coalesce(nullif(:by, ''), 'kind') IN ('compile', 'rank', 'run') THEN run_id END AS run_id,
       CASE WHEN coalesce(nullif(:by, ''), 'kind') IN ('compile', 'rank') THEN rank END AS rank,
       records, bytes, round(100.0 * bytes / (SELECT sum(bytes) FROM selected), 2) AS share_percent
FROM grouped ORDER BY bytes DESC LIMIT coalesce(nullif(:limit, ''), 50)
