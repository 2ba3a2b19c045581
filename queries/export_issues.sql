-- Export issues
-- What a draft export found (torch.export.draft_export, run with TORCH_DTRACE set), as tlparse's
-- export report lists it, for every run at once: data-dependent errors (a branch on an unbacked
-- value, specialized to its real value), guards evaluated on dynamic dims, ops without a fake
-- kernel, fake kernels that disagree with the real kernel; with the user frame that caused each,
-- and the exported program that resulted (the next exported_program artifact of the process).
-- :run  run id (empty: every run)
WITH issues AS (
    SELECT id, source_id, line, kind, metadata FROM export_issue_records
), user_frames AS (
    SELECT f.envelope_id, f.filename || ':' || f.line || ' in ' || f.name AS frame
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
       coalesce(json_extract(i.metadata, '$.expr'), json_extract(i.metadata, '$.op')) AS subject,
       CASE i.kind WHEN 'propagate_real_tensors_provenance'
                   THEN 'specialized to ' || json_extract(i.metadata, '$.result')
                   WHEN 'mismatched_fake_kernel' THEN json_extract(i.metadata, '$.reason') END AS detail,
       u.frame AS user_frame, p.artifact
FROM issues i JOIN sources s ON s.id = i.source_id
LEFT JOIN user_frames u ON u.envelope_id = i.id
LEFT JOIN next_program n ON n.id = i.id
LEFT JOIN programs p ON p.source_id = i.source_id AND p.line = n.line
WHERE s.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL SELECT id FROM runs WHERE coalesce(:run, '') = '')
ORDER BY s.run_id, s.rank, i.source_id, i.line
