-- tlindex schema, migration 010: vLLM's piecewise compiles. vLLM's backend splits one Dynamo graph at
-- its attention ops and compiles each piece with Inductor once per compile range (a dynamic range of
-- token counts, and each CUDA-graph capture size), logging a vllm_piecewise_compile_start artifact
-- before each. Everything logged after it, up to the next one, belongs to that piece compile.

-- One vllm_piecewise_compile_start record: a piece of a split graph compiled for one range.
CREATE TABLE piece_compiles (
    id INTEGER PRIMARY KEY,              -- piece compile id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- its vllm_piecewise_compile_start record
    compile INTEGER REFERENCES compiles(id), -- the Dynamo compile (one compile id holds every piece compile)
    piecewise_index INTEGER,             -- the piece's index among the compiled pieces
    submod_name TEXT,                    -- the piece's submodule in the split graph, e.g. submod_0
    total_piecewise_compiles INTEGER,    -- how many pieces the graph has to compile
    compile_range_start INTEGER,         -- first token count of the range (a size: start = end)
    compile_range_end INTEGER,           -- last token count of the range
    is_single_size INTEGER,              -- 1 for a single size (compile_sizes), 0 for a dynamic range
    is_cudagraph_capture_size INTEGER    -- 1 when the size is a CUDA-graph capture size
);
CREATE INDEX piece_compiles_envelope ON piece_compiles(envelope_id);
CREATE INDEX piece_compiles_compile ON piece_compiles(compile);

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
       (SELECT count(*) FROM envelopes c WHERE c.source_id = e.source_id AND c.kind = 'artifact'
        AND c.name = 'vllm_compilation_config' AND c.id < e.id) AS compile_call, -- which compile call of the process (1 = the first config)
       coalesce((SELECT min(b.id) FROM envelopes b WHERE b.source_id = e.source_id AND b.id > e.id
                 AND ((b.kind = 'artifact' AND b.name IN ('vllm_piecewise_compile_start', 'vllm_compilation_config'))
                      OR b.kind IN ('dynamo_start', 'dynamo_guards', 'dynamo_cpp_guards_str', 'compilation_metrics'))),
                (SELECT max(id) + 1 FROM envelopes l WHERE l.source_id = e.source_id)) AS end_envelope -- first record after it
FROM piece_compiles p JOIN envelopes e ON e.id = p.envelope_id;
