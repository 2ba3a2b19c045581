-- vLLM piece compiles
-- vLLM's piecewise compilation, one row per piece compile in log order: which piece (index,
-- submodule) of which compile call was compiled for which range of token counts (start-end; a single
-- size, a CUDA-graph capture size), with the piece's graph (graph_dump vllm_submod_N, older
-- vllm_subgraph_N) and Inductor's output code (artifact ids; NULL when the piece logged none, e.g. cut
-- short by a restart), its cache result and compile time (its inductor_compile spans).
-- :run  run id (empty: every run)
SELECT s.run_id, p.compile, c.compile_id, p.compile_call, p.attempt, p.id AS piece_compile,
       p.piecewise_index, p.submod_name, p.total_piecewise_compiles, p.compile_range_start, p.compile_range_end,
       p.is_single_size, p.is_cudagraph_capture_size,
       (SELECT min(a.id) FROM envelopes e CROSS JOIN artifacts a WHERE e.source_id = p.source_id
        AND e.id > p.envelope_id AND e.id < p.end_envelope AND a.envelope_id = e.id
        AND (a.name LIKE 'vllm\_submod\_%' ESCAPE '\' OR a.name LIKE 'vllm\_subgraph\_%' ESCAPE '\')) AS graph_artifact,
       (SELECT min(a.id) FROM envelopes e CROSS JOIN artifacts a WHERE e.source_id = p.source_id
        AND e.id > p.envelope_id AND e.id < p.end_envelope AND a.envelope_id = e.id
        AND a.kind = 'inductor_output_code') AS output_code_artifact,
       (SELECT group_concat(x.cache || ' ' || x.result, ', ') FROM envelopes e CROSS JOIN cache_events x
        WHERE e.source_id = p.source_id AND e.id > p.envelope_id AND e.id < p.end_envelope
        AND x.envelope_id = e.id) AS cache,
       (SELECT round(sum(ce.duration_us) / 1e6, 3) FROM chromium_events ce WHERE ce.source_id = p.source_id
        AND ce.name = 'inductor_compile' AND ce.ph = 'X' AND ce.begin_envelope > p.envelope_id
        AND ce.begin_envelope < p.end_envelope) AS compile_time_s
FROM piece_compile_spans p JOIN sources s ON s.id = p.source_id LEFT JOIN compiles c ON c.id = p.compile
WHERE coalesce(:run, '') = '' OR s.run_id = :run
ORDER BY p.envelope_id
