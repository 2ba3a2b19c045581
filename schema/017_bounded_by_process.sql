-- tlindex schema, migration 017: a question about one run reads that run's rows only, in a database of
-- thousands of runs. piece_compile_spans found "the next record of this kind" through envelopes(kind, name),
-- whose entries of one kind run through every process of the database: for a piece compile whose process
-- has no later record of that kind, the seek walked every later run's records of the kind (a vLLM page of an
-- early run cost 0.5 s at 3,000 runs against 3 ms alone), and counting the compile calls before a piece walked
-- every earlier run's. An index by process, kind and name bounds each seek to the piece's own process, and a later
-- attempt is looked for only in a compile that had one. Same rows.

-- A process's records of one kind, in log order: the next one after a record, or those before it, are a seek.
CREATE INDEX envelopes_source_kind ON envelopes(source_id, kind, name);

DROP VIEW piece_compile_spans;

-- Each piece compile with where its records stop and which compile call of its process it is in: the
-- records of the piece are those of its process after its start envelope and before end_envelope
-- (the next piece start, the next compilation config, Dynamo's own next record, or the first record of
-- a later attempt of its compile). Every lookup is bounded by the piece's process (envelopes_source_kind).
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
       -- (a later attempt is looked for only when its compile had one: compiles.attempts counts them)
       coalesce(CASE WHEN (SELECT c.attempts - 1 > s.attempt FROM compiles c WHERE c.id = s.compile)
                     THEN (SELECT min(b.id) FROM envelopes b WHERE b.compile = s.compile AND b.id > s.envelope_id
                           AND b.id < s.base_end AND b.attempt > s.attempt) END, s.base_end) AS end_envelope, -- first record after it
       (SELECT c.attempts - 1 > s.attempt FROM compiles c WHERE c.id = s.compile) AS abandoned -- 1 when Dynamo restarted the attempt it belongs to: cut short, never used
FROM (
    SELECT p.id, p.envelope_id, p.compile, p.piecewise_index, p.submod_name, p.total_piecewise_compiles,
           p.compile_range_start, p.compile_range_end, p.is_single_size, p.is_cudagraph_capture_size,
           e.source_id, e.attempt,
           (SELECT count(*) FROM envelopes c WHERE c.source_id = e.source_id AND c.kind = 'artifact'
            AND c.name = 'vllm_compilation_config' AND c.id < e.id) AS compile_call,
           coalesce(nullif(min(
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.source_id = e.source_id AND b.kind = 'artifact'
                             AND b.name = 'vllm_piecewise_compile_start' AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.source_id = e.source_id AND b.kind = 'artifact'
                             AND b.name = 'vllm_compilation_config' AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.source_id = e.source_id AND b.kind = 'dynamo_start'
                             AND b.name IS NULL AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.source_id = e.source_id AND b.kind = 'dynamo_guards'
                             AND b.name IS NULL AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.source_id = e.source_id
                             AND b.kind = 'dynamo_cpp_guards_str' AND b.name IS NULL AND b.id > e.id), 9223372036854775807),
                   coalesce((SELECT min(b.id) FROM envelopes b WHERE b.source_id = e.source_id
                             AND b.kind = 'compilation_metrics' AND b.name IS NULL AND b.id > e.id), 9223372036854775807)),
                   9223372036854775807),
                -- past the process's last record (ids increase in log order: its last line holds its largest id)
                (SELECT l.id + 1 FROM envelopes l WHERE l.source_id = e.source_id ORDER BY l.line DESC LIMIT 1)) AS base_end
    FROM piece_compiles p JOIN envelopes e ON e.id = p.envelope_id
) s;

-- A record's cache lookups and the chromium spans it began: what a vLLM piece compile's records hold, read
-- through its records instead of through every lookup and span of the database.
CREATE INDEX cache_events_envelope ON cache_events(envelope_id);
CREATE INDEX chromium_events_begin ON chromium_events(begin_envelope);

-- The largest artifacts first (the canned query biggest_artifacts over every run) without sorting them all.
CREATE INDEX artifacts_size ON artifacts(size);

-- A compile's cache lookups with their cache and result, read from the index alone (the run's health, rank
-- divergence's hit and miss patterns): without it SQLite built a temporary index of every lookup of the database
-- for each question about one run. It starts with the compile, as the index it replaces did.
CREATE INDEX cache_events_results ON cache_events(compile, cache, result);
DROP INDEX cache_events_compile;
