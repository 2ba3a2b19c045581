-- tlindex schema, migration 009: definitions that pages, findings, queries and the diff share, written
-- once as views.

-- Each run's totals, as the run page, the runs page and `tlindex diff` show them. A recompile is a
-- compile whose frame_compile_id is past 0; compiles without a compile id ([-/-]) are no compilation.
CREATE VIEW run_totals AS
SELECT run_id,                                                 -- the run
       sum(compile_id != '-/-') AS compiles,                   -- compilations (not counting [-/-])
       sum(status = 'error') AS failures,                      -- compiles that failed
       sum(frame_compile_id > 0) AS recompiles,                -- compiles of a frame compiled before
       sum(graph_breaks) AS graph_breaks,                      -- graph breaks of all its compiles
       round(sum(duration_s), 3) AS compile_time_s             -- seconds of compile time (compilation_metrics)
FROM compiles GROUP BY run_id;

-- The records in which a draft export reports an issue, as tlparse's export report counts them:
-- data-dependent errors, guards evaluated on dynamic dims, missing and mismatched fake kernels.
CREATE VIEW export_issue_records AS
SELECT id,                                                     -- the envelope
       source_id,                                              -- its process
       line,                                                   -- its line in the log
       kind,                                                   -- propagate_real_tensors_provenance, guard_added, missing_fake_kernel or mismatched_fake_kernel
       metadata                                                -- its metadata (expr, op, ...)
FROM envelopes
WHERE kind IN ('propagate_real_tensors_provenance', 'missing_fake_kernel', 'mismatched_fake_kernel', 'guard_added')
  AND (kind != 'guard_added' OR json_extract(metadata, '$.prefix') = 'eval');
