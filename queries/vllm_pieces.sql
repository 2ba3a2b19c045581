-- vLLM piece compiles
-- vLLM's piecewise compilation, one row per piece compile in log order: which piece (index,
-- submodule) of which compile call was compiled for which range of token counts (start-end; a single
-- size, a CUDA-graph capture size), with the piece's graph (graph_dump vllm_submod_N, older
-- vllm_subgraph_N) and Inductor's output code (artifact ids; NULL when the piece logged none, e.g. cut
-- short by a restart), its cache result and compile time (its inductor_compile spans); abandoned is 1
-- for a piece compile of an attempt Dynamo restarted (cut short, never used).
-- :run  run id (empty: every run)
WITH spans AS MATERIALIZED (
    SELECT p.id, p.envelope_id, p.compile, p.piecewise_index, p.submod_name, p.total_piecewise_compiles,
           p.compile_range_start, p.compile_range_end, p.is_single_size, p.is_cudagraph_capture_size,
           p.source_id, p.attempt, p.compile_call, p.end_envelope, p.abandoned
    FROM piece_compile_spans p JOIN sources s ON s.id = p.source_id
    WHERE coalesce(:run, '') = '' OR s.run_id = :run
), records AS MATERIALIZED (
    -- the records of each piece compile (its process, between its start and its end), read by id range
    -- (+source_id: the per-process index would walk the whole process per piece: 46 s against 0.3 s on
    -- a 1 GB log)
    SELECT p.id AS piece, e.id AS envelope_id
    FROM spans p CROSS JOIN envelopes e
    WHERE e.id > p.envelope_id AND e.id < p.end_envelope AND +e.source_id = p.source_id
), graphs AS (
    SELECT r.piece, min(a.id) AS artifact FROM records r JOIN artifacts a ON a.envelope_id = r.envelope_id
    WHERE substr(a.name, 1, 12) = 'vllm_submod_' OR substr(a.name, 1, 14) = 'vllm_subgraph_' GROUP BY r.piece
), codes AS (
    SELECT r.piece, min(a.id) AS artifact FROM records r JOIN artifacts a ON a.envelope_id = r.envelope_id
    WHERE a.kind = 'inductor_output_code' GROUP BY r.piece
), caches AS (
    SELECT piece, group_concat(result, ', ') AS results
    FROM (SELECT r.piece, x.cache || ' ' || x.result AS result FROM records r
          JOIN cache_events x ON x.envelope_id = r.envelope_id ORDER BY x.id)
    GROUP BY piece
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
