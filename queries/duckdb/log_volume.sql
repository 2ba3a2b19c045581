-- Log volume (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/log_volume.sql, in DuckDB's dialect (keys are text).
-- :by  kind, emitter, compile, rank or run (NULL: kind)
-- :run  run id (NULL: every run)
-- :rank  rank (NULL: every rank)
-- :limit  rows (NULL: 50)
WITH compiles_ AS (
    SELECT * FROM compiles WHERE ($run IS NULL OR run_id = $run) AND ($rank IS NULL OR rank = $rank)
), volume_ AS (
    SELECT v.*, s.run_id, s.rank FROM volume v JOIN sources s ON s.id = v.source_id
    WHERE ($run IS NULL OR s.run_id = $run) AND ($rank IS NULL OR s.rank = $rank)
), by_compile AS (
    SELECT CAST(id AS VARCHAR) AS key, id AS compile, compile_id, co_name, run_id, rank, envelope_count AS records,
           envelope_bytes + payload_bytes AS bytes FROM compiles_
    UNION ALL
    SELECT '(no compile)', NULL, NULL, NULL, NULL, NULL,
           (SELECT sum(records) FROM volume_) - coalesce((SELECT sum(envelope_count) FROM compiles_), 0),
           (SELECT sum(bytes) FROM volume_) - coalesce((SELECT sum(envelope_bytes + payload_bytes) FROM compiles_), 0)
), by_other AS (
    SELECT CASE coalesce($by, 'kind')
               WHEN 'emitter' THEN emitter_file || ':' || CAST(emitter_line AS VARCHAR)
               WHEN 'rank' THEN coalesce(CAST(rank AS VARCHAR), '(no rank)')
               WHEN 'run' THEN CAST(run_id AS VARCHAR)
               ELSE kind || coalesce(' ' || name, '') END AS key,
           NULL AS compile, NULL AS compile_id, NULL AS co_name, min(run_id) AS run_id, min(rank) AS rank,
           sum(records) AS records, sum(bytes) AS bytes
    FROM volume_ GROUP BY 1
), grouped AS (
    SELECT * FROM by_compile WHERE coalesce($by, 'kind') = 'compile'
    UNION ALL
    SELECT * FROM by_other WHERE coalesce($by, 'kind') != 'compile'
)
SELECT key, compile, compile_id, co_name AS function,
       CASE WHEN coalesce($by, 'kind') IN ('compile', 'rank', 'run') THEN run_id END AS run_id,
       CASE WHEN coalesce($by, 'kind') IN ('compile', 'rank') THEN rank END AS rank,
       records, bytes, round(100.0 * bytes / sum(bytes) OVER (), 2) AS share_percent
FROM grouped WHERE records > 0 ORDER BY bytes DESC LIMIT coalesce($limit, 50)
