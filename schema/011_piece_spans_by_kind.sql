-- tlindex schema, migration 011: piece_compile_spans finds where a piece compile's records stop through
-- envelopes(kind, name), one seek per kind of boundary, where 010 walked the process's records after
-- each piece (its cost grew with pieces × records: a vLLM model of many layers in a long log). Same
-- rows. A kind's records are in envelopes_kind by id, so `kind = ? AND name IS ? AND id > ?` finds the
-- next one at once; `+source_id` keeps SQLite from choosing the per-process index instead.

DROP VIEW piece_compile_spans;

-- Each piece compile with where its records stop and which compile call of its process it is in: the
-- records of the piece are those of its process after its start envelope and before end_envelope
-- (the next piece start, the next compilation config, or Dynamo's own next record).
CREATE VIEW piece_compile_spans AS
SELECT p.id,                                                   -- piece compile id
       p.envelope_id,                                          -- its vllm_piecewise_compile_start record
       p.compile,                                              -- the Dynamo compile
       p.piecewise_index,                                      -- the piece's index among the compiled pieces
       p.submod_name,                                          -- the piece's submodule
       p.total_piecewise_compiles,                             -- how many pieces the graph has to compile
       p.compile_range_start,                                  -- first token count of the range
       p.compile_range_end,                                    -- last token count of the range
       p.is_single_size,                                       -- 1 for a single size
       p.is_cudagraph_capture_size,                            -- 1 for a CUDA-graph capture size
       e.source_id,                                            -- its process
       e.attempt,                                              -- Dynamo's attempt (restart) it belongs to
       (SELECT count(*) FROM envelopes c WHERE c.kind = 'artifact' AND c.name = 'vllm_compilation_config'
        AND +c.source_id = e.source_id AND c.id < e.id) AS compile_call, -- which compile call of the process (1 = the first config)
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
                (SELECT max(id) + 1 FROM envelopes l WHERE l.source_id = e.source_id)) AS end_envelope -- first record after it
FROM piece_compiles p JOIN envelopes e ON e.id = p.envelope_id;
