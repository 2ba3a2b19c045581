-- vLLM piece compiles
-- vLLM's piecewise compilation, one row per piece compile in log order: which piece (index,
-- submodule) of which compile call was compiled for which range of token counts (start-end; a single
-- size, a CUDA-graph capture size), with the piece's graph (graph_dump vllm_submod_N, older
-- vllm_subgraph_N) and Inductor's output code (artifact ids; NULL when the piece logged none, e.g. cut
-- short by a restart), its cache result and compile time (its inductor_compile spans); abandoned is 1
-- for a piece compile of an attempt Dynamo restarted (cut short, never used).
-- Asked of every run, it reads each run's rows stored once (run_vllm_pieces) while current, and computes the others.
-- :run  run id (empty: every run)
WITH fresh AS MATERIALIZED (  -- every run's: the runs whose stored rows are current (run_answers_fresh)
    SELECT run_id FROM run_answers_fresh WHERE coalesce(:run, '') = ''
), spans AS MATERIALIZED (
    -- the run's piece compiles, found from its processes' piece starts (envelopes_source_kind): the view is
    -- read for those pieces only
    SELECT p.id, p.envelope_id, p.compile, p.piecewise_index, p.submod_name, p.total_piecewise_compiles,
           p.compile_range_start, p.compile_range_end, p.is_single_size, p.is_cudagraph_capture_size,
           p.source_id, p.attempt, p.compile_call, p.end_envelope, p.abandoned
    FROM sources s CROSS JOIN envelopes e CROSS JOIN piece_compile_spans p
    WHERE s.run_id IN (SELECT id FROM runs WHERE id = :run UNION ALL
                       SELECT id FROM runs WHERE coalesce(:run, '') = '' AND id NOT IN (SELECT run_id FROM fresh))
      AND e.source_id = s.id AND e.kind = 'artifact' AND e.name = 'vllm_piecewise_compile_start'
      AND p.envelope_id = e.id
), parts AS (
    -- what each piece compile logged (records of its process between its start and its end), read by id range
    -- through the artifacts, cache lookups and spans themselves: the piece's records are never all read
    SELECT p.id AS piece,
           min(CASE WHEN substr(a.name, 1, 12) = 'vllm_submod_' OR substr(a.name, 1, 14) = 'vllm_subgraph_'
                    THEN a.id END) AS graph,
           min(CASE WHEN a.kind = 'inductor_output_code' THEN a.id END) AS code
    FROM spans p CROSS JOIN artifacts a CROSS JOIN envelopes e
    WHERE a.envelope_id > p.envelope_id AND a.envelope_id < p.end_envelope AND e.id = a.envelope_id
      AND e.source_id = p.source_id
    GROUP BY p.id
), caches AS (
    SELECT piece, group_concat(result, ', ') AS results
    FROM (SELECT p.id AS piece, x.cache || ' ' || x.result AS result
          FROM spans p CROSS JOIN cache_events x CROSS JOIN envelopes e
          WHERE x.envelope_id > p.envelope_id AND x.envelope_id < p.end_envelope AND e.id = x.envelope_id
            AND e.source_id = p.source_id
          ORDER BY x.id)
    GROUP BY piece
), times AS (
    SELECT p.id AS piece, round(sum(c.duration_us) / 1e6, 3) AS seconds
    FROM spans p CROSS JOIN chromium_events c CROSS JOIN envelopes e
    WHERE c.begin_envelope > p.envelope_id AND c.begin_envelope < p.end_envelope AND e.id = c.begin_envelope
      AND e.source_id = p.source_id AND +c.name = 'inductor_compile' AND +c.ph = 'X'  -- (+: by the range, not by name)
    GROUP BY p.id
), computed AS (
    SELECT s.run_id, p.envelope_id, p.compile, c.compile_id, p.compile_call, p.attempt, p.id AS piece_compile,
           p.piecewise_index, p.submod_name, p.total_piecewise_compiles, p.compile_range_start, p.compile_range_end,
           p.is_single_size, p.is_cudagraph_capture_size, g.graph AS graph_artifact,
           g.code AS output_code_artifact, x.results AS cache, t.seconds AS compile_time_s, p.abandoned
    FROM spans p JOIN sources s ON s.id = p.source_id LEFT JOIN compiles c ON c.id = p.compile
    LEFT JOIN parts g ON g.piece = p.id
    LEFT JOIN caches x ON x.piece = p.id LEFT JOIN times t ON t.piece = p.id
),
-- stored per run (tlindex.answers.derived): the rows of `computed`, in run_vllm_pieces
answered AS (
    SELECT * FROM computed
    UNION ALL
    SELECT s.* FROM fresh f CROSS JOIN run_vllm_pieces s WHERE s.run_id = f.run_id
)
SELECT run_id, compile, compile_id, compile_call, attempt, piece_compile, piecewise_index, submod_name,
       total_piecewise_compiles, compile_range_start, compile_range_end, is_single_size, is_cudagraph_capture_size,
       graph_artifact, output_code_artifact, cache, compile_time_s, abandoned
FROM answered
ORDER BY envelope_id
