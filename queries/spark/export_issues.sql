-- Export issues (Spark SQL over Parquet: see docs/scale.md)
-- The same answer as queries/export_issues.sql, in Spark SQL.
-- :run  run id (NULL: every run)
WITH issues AS (
    SELECT e.id, e.source_id, e.line, e.kind, e.metadata FROM envelopes e
    WHERE e.kind IN ('propagate_real_tensors_provenance', 'missing_fake_kernel', 'mismatched_fake_kernel')
       OR (e.kind = 'guard_added' AND get_json_object(e.metadata, '$.prefix') = 'eval')
), user_frames AS (
    SELECT f.envelope_id, f.filename || ':' || CAST(f.line AS STRING) || ' in ' || f.name AS frame
    FROM frames f JOIN (SELECT envelope_id, max(depth) AS depth FROM frames
                        WHERE stack = 'user_stack' AND envelope_id IN (SELECT id FROM issues)
                        GROUP BY envelope_id) last
      ON last.envelope_id = f.envelope_id AND last.depth = f.depth AND f.stack = 'user_stack'
), programs AS (
    SELECT x.source_id, x.line, a.id AS artifact FROM envelopes x JOIN artifacts a ON a.envelope_id = x.id
    WHERE x.kind = 'exported_program'
), next_program AS (
    SELECT i.id, min(p.line) AS line FROM issues i JOIN programs p ON p.source_id = i.source_id AND p.line > i.line
    GROUP BY i.id
)
SELECT s.run_id, s.rank, i.line,
       CASE i.kind WHEN 'propagate_real_tensors_provenance' THEN 'data-dependent error'
                   WHEN 'guard_added' THEN 'guard evaluated'
                   WHEN 'missing_fake_kernel' THEN 'missing fake kernel'
                   ELSE 'mismatched fake kernel' END AS issue,
       coalesce(get_json_object(i.metadata, '$.expr'), get_json_object(i.metadata, '$.op')) AS subject,
       CASE i.kind WHEN 'propagate_real_tensors_provenance'
                   THEN 'specialized to ' || get_json_object(i.metadata, '$.result')
                   WHEN 'mismatched_fake_kernel' THEN get_json_object(i.metadata, '$.reason') END AS detail,
       u.frame AS user_frame, p.artifact
FROM issues i JOIN sources s ON s.id = i.source_id
LEFT JOIN user_frames u ON u.envelope_id = i.id
LEFT JOIN next_program n ON n.id = i.id
LEFT JOIN programs p ON p.source_id = i.source_id AND p.line = n.line
WHERE :run IS NULL OR s.run_id = :run
ORDER BY s.run_id, s.rank, i.source_id, i.line
