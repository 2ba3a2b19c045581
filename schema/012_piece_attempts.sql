-- tlindex schema, migration 012: a piece compile ends where Dynamo's next attempt of its compile begins.
-- When Dynamo restarts its analysis after vLLM's backend has started (TensorifyScalarRestartAnalysis during
-- AOT tracing), the piece being compiled is cut short: its records stop at the first record of the next
-- attempt, not at the next config, which comes only after the next attempt has traced its graph again
-- (011 gave the cut piece that graph). The search for that record is bounded by 011's end, so it reads
-- only the piece's own records.

DROP VIEW piece_compile_spans;

-- Each piece compile with where its records stop and which compile call of its process it is in: the
-- records of the piece are those of its process after its start envelope and before end_envelope
-- (the next piece start, the next compilation config, Dynamo's own next record, or the first record of
-- a later attempt of its compile).
CREATE VIEW piece_compile_spans AS
SELECT s.id,                                                   -- piece compile id
       s.envelope_id,                                          -- its vllm_piecewise_compile_start record
       s.compile,                                              -- the Dynamo compile
       s.piecewise_index,                                      -- the piece's index among the compiled pieces
       s.submod_name,                                          -- the piece's submodule
       s.total_piecewise_compiles,                             -- how many pieces the graph has to compile
       s.compile_range_start,                                  -- first token count of the range
       s.compile_range_end,                                    -- last token count of the range
       s.is_single_size,                                       -- 1 for a single size
       s.is_cudagraph_capture_size,                            -- 1 for a CUDA-graph capture size
       s.source_id,                                            -- its process
       s.attempt,                                              -- Dynamo's attempt (restart) it belongs to
       s.compile_call,                                         -- which compile call of the process (1 = the first config)
       coalesce((SELECT min(b.id) FROM envelopes b WHERE b.compile = s.compile AND b.id > s.envelope_id
                 AND b.id < s.base_end AND b.attempt > s.attempt), s.base_end) AS end_envelope, -- first record after it
       (SELECT c.attempts - 1 > s.attempt FROM compiles c WHERE c.id = s.compile) AS abandoned -- 1 when Dynamo restarted the attempt it belongs to: cut short, never used
FROM (
    SELECT p.id, p.envelope_id, p.compile, p.piecewise_index, p.submod_name, p.total_piecewise_compiles,
           p.compile_range_start, p.compile_range_end, p.is_single_size, p.is_cudagraph_capture_size,
           e.source_id, e.attempt,
           (SELECT count(*) FROM envelopes c WHERE c.kind = 'artifact' AND c.name = 'vllm_compilation_config'
            AND +c.source_id = e.source_id AND c.id < e.id) AS compile_call,
           coalesce(nullif(min(
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.kind = 'artifact' AND b.name = 'vllm_piecewise_compile_start'
                             AND +b.source_id = e.source_id AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.kind = 'artifact' AND b.name = 'vllm_compilation_config'
                             AND +b.source_id = e.source_id AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.kind = 'dynamo_start' AND b.name IS NULL
                             AND +b.source_id = e.source_id AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.kind = 'dynamo_guards' AND b.name IS NULL
                             AND +b.source_id = e.source_id AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.kind = 'dynamo_cpp_guards_str' AND b.name IS NULL
                             AND +b.source_id = e.source_id AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.kind = 'compilation_metrics' AND b.name IS NULL
                             AND +b.source_id = e.source_id AND b.id > e.id), 9223372036854775807)), 9223372036854775807),
                (SELECT max(id) + 1 FROM envelopes l WHERE l.source_id = e.source_id)) AS base_end
    FROM piece_compiles p JOIN envelopes e ON e.id = p.envelope_id
) s;
