-- vLLM piece compiles (DuckDB and Parquet: see docs/scale.md)
-- The same answer as queries/vllm_pieces.sql, in DuckDB's dialect (the piece_compile_spans view written out).
-- :run  run id (NULL: every run)
WITH bounds AS (
    -- the records that end a piece compile: the next piece start, the next config, Dynamo's next record
    SELECT source_id, id FROM envelopes
    WHERE (kind = 'artifact' AND name IN ('vllm_piecewise_compile_start', 'vllm_compilation_config'))
       OR kind IN ('dynamo_start', 'dynamo_guards', 'dynamo_cpp_guards_str', 'compilation_metrics')
), configs AS (
    SELECT source_id, id FROM envelopes WHERE kind = 'artifact' AND name = 'vllm_compilation_config'
), lasts AS (
    SELECT source_id, max(id) + 1 AS id FROM envelopes GROUP BY source_id
), starts AS (
    SELECT p.id, p.envelope_id, p.compile, p.piecewise_index, p.submod_name, p.total_piecewise_compiles,
           p.compile_range_start, p.compile_range_end, p.is_single_size, p.is_cudagraph_capture_size,
           e.source_id, e.attempt
    FROM piece_compiles p JOIN envelopes e ON e.id = p.envelope_id JOIN sources s ON s.id = e.source_id
    WHERE $run IS NULL OR s.run_id = $run
), base_ends AS (
    SELECT p.id, coalesce(min(b.id), max(l.id)) AS end_envelope
    FROM starts p JOIN lasts l ON l.source_id = p.source_id
    LEFT JOIN bounds b ON b.source_id = p.source_id AND b.id > p.envelope_id
    GROUP BY p.id
), ends AS (
    -- or the first record of a later attempt of its compile (Dynamo restarted: the piece was cut short)
    SELECT p.id, coalesce(min(a.id), n.end_envelope) AS end_envelope
    FROM starts p JOIN base_ends n ON n.id = p.id
    LEFT JOIN envelopes a ON a.compile = p.compile AND a.id > p.envelope_id AND a.id < n.end_envelope
                          AND a.attempt > p.attempt
    GROUP BY p.id, n.end_envelope
), calls AS (
    SELECT p.id, count(c.id) AS compile_call
    FROM starts p LEFT JOIN configs c ON c.source_id = p.source_id AND c.id < p.envelope_id
    GROUP BY p.id
), spans AS (
    SELECT p.*, n.end_envelope, k.compile_call, CAST(c.attempts - 1 > p.attempt AS INTEGER) AS abandoned
    FROM starts p JOIN ends n ON n.id = p.id JOIN calls k ON k.id = p.id LEFT JOIN compiles c ON c.id = p.compile
), records AS (
    SELECT p.id AS piece, e.id AS envelope_id
    FROM spans p JOIN envelopes e ON e.source_id = p.source_id AND e.id > p.envelope_id AND e.id < p.end_envelope
), graphs AS (
    SELECT r.piece, min(a.id) AS artifact FROM records r JOIN artifacts a ON a.envelope_id = r.envelope_id
    WHERE substr(a.name, 1, 12) = 'vllm_submod_' OR substr(a.name, 1, 14) = 'vllm_subgraph_' GROUP BY r.piece
), codes AS (
    SELECT r.piece, min(a.id) AS artifact FROM records r JOIN artifacts a ON a.envelope_id = r.envelope_id
    WHERE a.kind = 'inductor_output_code' GROUP BY r.piece
), caches AS (
    SELECT r.piece, string_agg(x.cache || ' ' || x.result, ', ' ORDER BY x.id) AS results FROM records r
    JOIN cache_events x ON x.envelope_id = r.envelope_id GROUP BY r.piece
), times AS (
    SELECT r.piece, round(sum(c.duration_us) / 1e6, 3) AS seconds FROM records r
    JOIN chromium_events c ON c.begin_envelope = r.envelope_id
    WHERE c.name = 'inductor_compile' AND c.ph = 'X' GROUP BY r.piece
)
SELECT s.run_id, p.compile, c.compile_id, p.compile_call, p.attempt, p.id AS piece_compile,
       p.piecewise_index, p.submod_name, p.total_piecewise_compiles, p.compile_range_start, p.compile_range_end,
       p.is_single_size, p.is_cudagraph_capture_size, g.artifact AS graph_artifact,
       o.artifact AS output_code_artifact, x.results AS cache, t.seconds AS compile_time_s, p.abandoned
FROM spans p JOIN sources s ON s.id = p.source_id LEFT JOIN compiles c ON c.id = p.compile
LEFT JOIN graphs g ON g.piece = p.id LEFT JOIN codes o ON o.piece = p.id
LEFT JOIN caches x ON x.piece = p.id LEFT JOIN times t ON t.piece = p.id
ORDER BY p.envelope_id
