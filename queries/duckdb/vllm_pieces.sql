-- vLLM piece compiles (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/vllm_pieces.sql, in DuckDB's dialect (the piece_compile_spans view written out).
-- :run  run id (NULL: every run)
WITH spans AS (
    SELECT p.*, e.source_id, e.attempt,
           (SELECT count(*) FROM envelopes c WHERE c.source_id = e.source_id AND c.kind = 'artifact'
            AND c.name = 'vllm_compilation_config' AND c.id < e.id) AS compile_call,
           coalesce((SELECT min(b.id) FROM envelopes b WHERE b.source_id = e.source_id AND b.id > e.id
                     AND ((b.kind = 'artifact' AND b.name IN ('vllm_piecewise_compile_start', 'vllm_compilation_config'))
                          OR b.kind IN ('dynamo_start', 'dynamo_guards', 'dynamo_cpp_guards_str', 'compilation_metrics'))),
                    (SELECT max(id) + 1 FROM envelopes l WHERE l.source_id = e.source_id)) AS end_envelope
    FROM piece_compiles p JOIN envelopes e ON e.id = p.envelope_id
)
SELECT s.run_id, p.compile, c.compile_id, p.compile_call, p.attempt, p.id AS piece_compile,
       p.piecewise_index, p.submod_name, p.total_piecewise_compiles, p.compile_range_start, p.compile_range_end,
       p.is_single_size, p.is_cudagraph_capture_size,
       (SELECT min(a.id) FROM envelopes e JOIN artifacts a ON a.envelope_id = e.id WHERE e.source_id = p.source_id
        AND e.id > p.envelope_id AND e.id < p.end_envelope
        AND (a.name LIKE 'vllm\_submod\_%' ESCAPE '\' OR a.name LIKE 'vllm\_subgraph\_%' ESCAPE '\')) AS graph_artifact,
       (SELECT min(a.id) FROM envelopes e JOIN artifacts a ON a.envelope_id = e.id WHERE e.source_id = p.source_id
        AND e.id > p.envelope_id AND e.id < p.end_envelope AND a.kind = 'inductor_output_code') AS output_code_artifact,
       (SELECT string_agg(x.cache || ' ' || x.result, ', ' ORDER BY x.id) FROM envelopes e
        JOIN cache_events x ON x.envelope_id = e.id
        WHERE e.source_id = p.source_id AND e.id > p.envelope_id AND e.id < p.end_envelope) AS cache,
       (SELECT round(sum(ce.duration_us) / 1e6, 3) FROM chromium_events ce WHERE ce.source_id = p.source_id
        AND ce.name = 'inductor_compile' AND ce.ph = 'X' AND ce.begin_envelope > p.envelope_id
        AND ce.begin_envelope < p.end_envelope) AS compile_time_s
FROM spans p JOIN sources s ON s.id = p.source_id LEFT JOIN compiles c ON c.id = p.compile
WHERE $run IS NULL OR s.run_id = $run
ORDER BY p.envelope_id
