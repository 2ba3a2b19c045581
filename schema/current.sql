-- tlindex's whole schema in one script: what the migrations schema/001_initial.sql to schema/029_ranks_derived_at_write.sql make.
-- A new database is made from it in one go (tlindex.store.db.apply_schema) and every migration up to the one
-- named on the `as of` line is recorded as applied; a database made before is upgraded by the migrations.
-- Written by `python -m tlindex.store.schema_script > schema/current.sql`, not by hand. The comments of the
-- tables, and of the columns added after a table was made, are in the migrations (and docs/schema.md).
-- as of: 029_ranks_derived_at_write

CREATE TABLE files (
    id INTEGER PRIMARY KEY,              -- file id
    path TEXT NOT NULL,                  -- absolute path at ingest time
    name TEXT NOT NULL,                  -- file name, e.g. dedicated_log_torch_trace_rank_0_ab12cd34.log
    directory TEXT NOT NULL,             -- directory holding the file (the TORCH_TRACE dir)
    size INTEGER NOT NULL,               -- size on disk in bytes (compressed size for .gz)
    mtime TEXT,                          -- modification time of the file, ISO 8601 local time
    sha256 TEXT NOT NULL,                -- sha256 of the (decompressed) content ingested so far
    compressed INTEGER NOT NULL,         -- 1 for a .gz file
    bytes_ingested INTEGER NOT NULL,     -- (decompressed) bytes consumed; a grown log continues here
    lines_ingested INTEGER NOT NULL,     -- lines consumed
    ingested_at TEXT NOT NULL            -- when tlindex last ingested it, ISO 8601 UTC
, copy_of INTEGER REFERENCES files(id));

CREATE TABLE runs (
    id INTEGER PRIMARY KEY,              -- run id
    label TEXT NOT NULL UNIQUE,          -- --run LABEL, or directory name + start time
    directory TEXT,                      -- directory of its files
    torch_version TEXT,                  -- pytorch_version of the torch_version artifact
    torch_commit TEXT,                   -- commit of the torch_version artifact
    start_time TEXT,                     -- first envelope time of any of its sources
    end_time TEXT,                       -- last envelope time of any of its sources
    world_size INTEGER,                  -- number of distinct ranks (NULL when not distributed)
    source_count INTEGER                 -- number of sources (processes)
, command TEXT, cwd TEXT, host TEXT, user TEXT, started TEXT, duration_s REAL, exit_code INTEGER, signal TEXT, ingest TEXT, label_source TEXT, last_ingest TEXT, kept INTEGER NOT NULL DEFAULT 0);

CREATE TABLE sources (
    id INTEGER PRIMARY KEY,              -- source id
    file_id INTEGER NOT NULL REFERENCES files(id), -- the file it was read from
    run_id INTEGER REFERENCES runs(id),  -- the run it belongs to
    pid INTEGER,                         -- process id of the glog prefix
    rank INTEGER,                        -- distributed rank: the envelopes' "rank" key, else the file name's rank (older torch logged no key)
    file_rank INTEGER,                   -- rank from the file name (..._rank_N_...), for cross-checking
    first_time TEXT,                     -- time of its first envelope
    last_time TEXT,                      -- time of its last envelope
    envelope_count INTEGER NOT NULL DEFAULT 0, -- number of envelopes
    bytes INTEGER NOT NULL DEFAULT 0,    -- bytes of its envelope and payload lines
    torch_version TEXT,                  -- pytorch_version of its torch_version artifact
    torch_commit TEXT                    -- commit of its torch_version artifact
, logged_rank INTEGER, restart INTEGER, process TEXT, rank_decision TEXT);

CREATE TABLE strings (
    source_id INTEGER NOT NULL REFERENCES sources(id), -- the source that defined it
    string_id INTEGER NOT NULL,          -- the id stack frames use as "filename"
    value TEXT NOT NULL,                 -- the string (an absolute source path)
    PRIMARY KEY (source_id, string_id)
);

CREATE TABLE "payload_data" (
    hash TEXT PRIMARY KEY,               -- md5 hex of the payload bytes (what has_payload claims when intact)
    size INTEGER NOT NULL,               -- payload size in bytes (without the tab prefixes)
    text_size INTEGER NOT NULL DEFAULT 0, data BLOB NOT NULL DEFAULT x'');

CREATE TABLE envelopes (
    id INTEGER PRIMARY KEY,              -- envelope id (increases in file order)
    source_id INTEGER NOT NULL REFERENCES sources(id), -- the process stream it belongs to
    line INTEGER NOT NULL,               -- 1-based line number of the envelope line in the file
    offset INTEGER NOT NULL,             -- byte offset of the envelope line in the (decompressed) file
    time TEXT NOT NULL,                  -- glog time, ISO 8601 local time with inferred year
    pid INTEGER NOT NULL,                -- process id of the glog prefix
    emitter_file TEXT,                   -- torch source file that logged it, e.g. torch/_dynamo/utils.py
    emitter_line INTEGER,                -- line in emitter_file
    kind TEXT NOT NULL,                  -- envelope name: the first key of the JSON, e.g. artifact
    name TEXT,                           -- artifact name, or the metadata "name" of graph_dump, dump_file, ...
    compile INTEGER REFERENCES compiles(id), -- the compilation it belongs to
    compile_id TEXT,                     -- compile id as torch prints it: 0/1, !0/1/2, !3; -/- for a record without any (tlparse's [-/-])
    compiled_autograd_id INTEGER,        -- compiled_autograd_id context key
    frame_id INTEGER,                    -- frame_id context key
    frame_compile_id INTEGER,            -- frame_compile_id context key
    attempt INTEGER,                     -- attempt context key (restarts of analysis)
    rank INTEGER,                        -- rank context key
    subgraph_name TEXT,                  -- subgraph_name context key (regional inductor)
    metadata TEXT,                       -- the envelope's metadata as JSON (NULL when {} or kept in metrics)
    payload TEXT REFERENCES "payload_data"(hash), -- the payload, if any
    envelope_bytes INTEGER NOT NULL,     -- bytes of the envelope line, newline included
    payload_bytes INTEGER NOT NULL,      -- bytes of the payload lines, tabs and newlines included
    payload_lines INTEGER NOT NULL,      -- number of payload lines
    md5_ok INTEGER                       -- 1 payload md5 verified, 0 mismatch, NULL no payload
);

CREATE TABLE compiles (
    id INTEGER PRIMARY KEY,              -- compile row id
    run_id INTEGER REFERENCES runs(id),  -- run of its source
    source_id INTEGER NOT NULL REFERENCES sources(id), -- process that compiled
    rank INTEGER,                        -- rank of that process
    generation INTEGER NOT NULL,         -- 0, then +1 each time the process's compile ids restart
    compile_id TEXT NOT NULL,            -- compile id as torch prints it: 0/1, !0/1/2, !3; -/- for the records without one
    compiled_autograd_id INTEGER,        -- compiled autograd graph id
    frame_id INTEGER,                    -- dynamo frame id
    frame_compile_id INTEGER,            -- compile number of that frame (0 first, then recompiles)
    attempts INTEGER NOT NULL,           -- number of analysis attempts seen (restarts + 1)
    co_name TEXT,                        -- compiled function name
    co_filename TEXT,                    -- its file
    co_firstlineno INTEGER,              -- its first line
    status TEXT NOT NULL,                -- ok, break (restarted), empty (no ops), error (fail_type), missing (no compilation_metrics), none (-/- without compilation_metrics)
    fail_type TEXT,                      -- e.g. Unsupported, BackendCompilerFailed
    fail_reason TEXT,                    -- failure message
    fail_user_frame_filename TEXT,       -- user file of the failure
    fail_user_frame_lineno INTEGER,      -- user line of the failure
    recompile_reason TEXT,               -- first reason this compile happened again (NULL for a first compile)
    restart_reasons TEXT,                -- JSON list of restart reasons
    graph_breaks INTEGER NOT NULL,       -- number of dynamo_graph_break_reason artifacts
    start_time TEXT,                     -- time of its first envelope
    end_time TEXT,                       -- time of its last envelope
    duration_s REAL,                     -- entire_frame_compile_time_s of its compilation_metrics
    dynamo_start INTEGER REFERENCES envelopes(id), -- its dynamo_start envelope (stack in frames)
    envelope_count INTEGER NOT NULL,     -- envelopes it emitted
    envelope_bytes INTEGER NOT NULL,     -- bytes of those envelope lines
    payload_bytes INTEGER NOT NULL       -- bytes of their payload lines
, guards_print TEXT, stack_print INTEGER, content_print INTEGER);

CREATE TABLE frames (
    id INTEGER PRIMARY KEY,              -- frame row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- envelope carrying the stack
    stack TEXT NOT NULL,                 -- which stack: stack, user_stack (in metadata), context (top-level "stack"), guards[N].stack / guards[N].user_stack (dynamo_guards)
    depth INTEGER NOT NULL,              -- 0 = outermost frame
    filename_id INTEGER,                 -- string-table id of the file
    filename TEXT,                       -- file resolved through the process's string table (NULL if undefined)
    line INTEGER,                        -- line number
    name TEXT,                           -- function name
    loc TEXT                             -- source line, when logged
);

CREATE TABLE artifacts (
    id INTEGER PRIMARY KEY,              -- artifact id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- its envelope
    compile INTEGER REFERENCES compiles(id), -- its compilation
    kind TEXT NOT NULL,                  -- envelope kind, e.g. dynamo_output_graph, artifact, graph_dump
    name TEXT NOT NULL,                  -- artifact name, metadata name, or the kind
    encoding TEXT,                       -- "string" or "json" for artifact records
    payload TEXT REFERENCES "payload_data"(hash), -- its payload (NULL for payload-less artifacts)
    size INTEGER NOT NULL                -- payload size in bytes
);

CREATE TABLE guards (
    id INTEGER PRIMARY KEY,              -- guard row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- its envelope
    compile INTEGER REFERENCES compiles(id), -- its compilation
    origin TEXT NOT NULL,                -- dynamo_cpp_guards_str, dynamo_guards, guard_added, guard_added_fast or symbolic_shape_specialization
    position INTEGER NOT NULL,           -- index within the guard tree or list (0 for single records)
    depth INTEGER,                       -- depth in the guard tree (0 = TREE_GUARD_MANAGER)
    guard_type TEXT,                     -- e.g. TENSOR_MATCH, GuardManager, EQUALS_MATCH
    text TEXT NOT NULL,                  -- the guard (tree line without type and comment, or expr)
    source TEXT,                         -- guarded source, e.g. L['x'] (sources of a specialization)
    user_code TEXT,                      -- user code the guard comes from (tree comment or user_stack top)
    symbol TEXT,                         -- specialized symbol
    value TEXT,                          -- specialized value
    reason TEXT,                         -- specialization reason
    key INTEGER                          -- crc32 of guard_type and text: compares guards across compiles as integers
, identity INTEGER);

CREATE TABLE metrics (
    id INTEGER PRIMARY KEY,              -- metrics row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- its envelope
    compile INTEGER REFERENCES compiles(id), -- its compilation
    kind TEXT NOT NULL,                  -- envelope kind
    compile_id TEXT,                     -- compile_id field of the record
    co_name TEXT,                        -- compiled function
    co_filename TEXT,                    -- its file
    co_firstlineno INTEGER,              -- its first line
    cache_size INTEGER,                  -- cache entries of the frame before this compile
    accumulated_cache_size INTEGER,      -- cache entries including other cache lines
    guard_count INTEGER,                 -- guards installed
    shape_env_guard_count INTEGER,       -- symbolic shape guards
    graph_op_count INTEGER,              -- ops in the dynamo graph
    graph_node_count INTEGER,            -- nodes in the dynamo graph
    graph_input_count INTEGER,           -- graph inputs
    start_time REAL,                     -- compile start, unix seconds
    entire_frame_compile_time_s REAL,    -- whole compile of the frame
    backend_compile_time_s REAL,         -- backend (AOTAutograd + inductor)
    inductor_compile_time_s REAL,        -- inductor
    code_gen_time_s REAL,                -- inductor code generation
    dynamo_time_before_restart_s REAL,   -- time spent before analysis restarted
    fail_type TEXT,                      -- failure exception type
    fail_reason TEXT,                    -- failure message
    fail_user_frame_filename TEXT,       -- user file of the failure
    fail_user_frame_lineno INTEGER,      -- user line of the failure
    restart_reasons TEXT,                -- JSON list (NULL when the key is absent)
    recompile_reason TEXT,               -- first recompile reason
    num_graph_breaks INTEGER,            -- graph breaks counted by dynamo
    has_guarded_code INTEGER,            -- 1 when guarded code was installed
    is_forward INTEGER,                  -- 1 forward, 0 backward
    guard_latency_us REAL,               -- measured guard evaluation latency
    structured_logging_overhead_s REAL,  -- time spent writing this trace
    duration_us INTEGER,                 -- compile duration, microseconds
    pytorch_version TEXT,                -- torch version
    dynamo_config TEXT REFERENCES "payload_data"(hash), -- dynamo_config JSON, stored once in payloads
    inductor_config TEXT REFERENCES "payload_data"(hash), -- inductor_config JSON, stored once in payloads
    functorch_config TEXT REFERENCES "payload_data"(hash), -- functorch_config JSON, stored once in payloads
    compiler_config TEXT REFERENCES "payload_data"(hash), -- compiler_config JSON, stored once in payloads
    other TEXT                           -- JSON object of every other key of the record
);

CREATE TABLE chromium_events (
    id INTEGER PRIMARY KEY,              -- event row id
    source_id INTEGER NOT NULL REFERENCES sources(id), -- process
    compile INTEGER REFERENCES compiles(id), -- compilation of the begin (or only) event
    name TEXT NOT NULL,                  -- event name, e.g. dynamo, inductor_compile, backend_compile
    cat TEXT,                            -- category (dynamo_timed)
    ph TEXT NOT NULL,                    -- X paired span, i instant, B begin without end, E end without begin
    ts_us REAL,                          -- start, microseconds (the event's ts)
    duration_us REAL,                    -- end ts - begin ts (NULL unless ph = X)
    begin_envelope INTEGER REFERENCES envelopes(id), -- envelope of the begin (or only) event
    end_envelope INTEGER REFERENCES envelopes(id) -- envelope of the end event (its payload holds the event's args)
);

CREATE TABLE failed_guards (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the recompile_reasons artifact
    compile INTEGER REFERENCES compiles(id), -- the compilation that recompiled
    position INTEGER NOT NULL,           -- index within the artifact
    previous_compile_id TEXT,            -- the cache entry whose guard failed, e.g. 0/0
    reason TEXT NOT NULL                 -- the failed guard, e.g. tensor 'x' size mismatch at index 0. expected 4, actual 8
);

CREATE TABLE graph_break_events (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the artifact
    compile INTEGER REFERENCES compiles(id), -- compilation that broke
    reason TEXT NOT NULL,                -- the reason (first lines of the artifact, without the traceback)
    user_file TEXT,                      -- user file where the graph broke
    user_line INTEGER                    -- user line where the graph broke
);

CREATE TABLE cache_events (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the artifact
    compile INTEGER REFERENCES compiles(id), -- its compilation
    cache TEXT NOT NULL,                 -- fx_graph, aotautograd, ... (artifact name before _cache_)
    result TEXT NOT NULL,                -- hit, miss, bypass, ... (artifact name after _cache_)
    key TEXT,                            -- cache key
    reason TEXT                          -- bypass reason
);

CREATE TABLE symbols (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- create_symbol or create_unbacked_symbol
    compile INTEGER REFERENCES compiles(id), -- its compilation
    symbol TEXT NOT NULL,                -- e.g. s77, u0
    unbacked INTEGER NOT NULL,           -- 1 for create_unbacked_symbol
    value TEXT,                          -- hint value (backed symbols)
    value_range TEXT,                    -- value range, e.g. [2, int_oo]
    source TEXT,                         -- source, e.g. L['x'].size()[0]
    node_id TEXT                         -- FX node (unbacked symbols)
);

CREATE TABLE tensor_descriptions (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- its envelope
    compile INTEGER REFERENCES compiles(id), -- its compilation
    kind TEXT NOT NULL,                  -- tensor, storage or source
    describer_id INTEGER,                -- describer (one per fake-tensor conversion)
    described_id INTEGER,                -- id of the tensor or storage described
    dtype TEXT,                          -- tensor dtype
    device TEXT,                         -- tensor device
    size TEXT,                           -- JSON list: tensor sizes, or storage size in bytes
    stride TEXT,                         -- JSON list: tensor strides
    storage INTEGER,                     -- storage id of the tensor
    requires_grad INTEGER,               -- tensor requires grad
    is_parameter INTEGER,                -- tensor is a parameter
    source TEXT                          -- source name (describe_source), e.g. L['x']
);

CREATE TABLE volume (
    source_id INTEGER NOT NULL REFERENCES sources(id), -- the process stream
    kind TEXT NOT NULL,                  -- envelope kind
    name TEXT,                           -- artifact name or metadata name
    emitter_file TEXT,                   -- torch source file that logged them
    emitter_line INTEGER,                -- line in emitter_file
    records INTEGER NOT NULL,            -- number of envelopes
    bytes INTEGER NOT NULL               -- bytes of their envelope and payload lines
);

CREATE TABLE ingest_errors (
    id INTEGER PRIMARY KEY,              -- row id
    file_id INTEGER NOT NULL REFERENCES files(id), -- file
    source_id INTEGER REFERENCES sources(id), -- source, when known
    line INTEGER NOT NULL,               -- 1-based line number of the first line concerned
    offset INTEGER NOT NULL,             -- byte offset of that line
    lines INTEGER NOT NULL,              -- number of lines concerned
    bytes INTEGER NOT NULL,              -- bytes of those lines not indexed in envelopes (0 when they are)
    kind TEXT NOT NULL,                  -- bad_prefix, bad_json, not_an_object, orphan_payload, blank_line, md5_mismatch, invalid_utf8, incomplete_record, rank_mismatch
    message TEXT NOT NULL,               -- what is wrong
    excerpt TEXT                         -- the start of the line
);

CREATE INDEX files_sha256 ON files(sha256);

CREATE INDEX files_path ON files(path);

CREATE INDEX sources_file ON sources(file_id);

CREATE INDEX sources_run ON sources(run_id);

CREATE INDEX envelopes_source ON envelopes(source_id, line);

CREATE INDEX envelopes_compile ON envelopes(compile);

CREATE INDEX envelopes_kind ON envelopes(kind, name);

CREATE INDEX envelopes_payload ON envelopes(payload);

CREATE INDEX compiles_source ON compiles(source_id);

CREATE INDEX compiles_run ON compiles(run_id, rank);

CREATE INDEX compiles_compile_id ON compiles(compile_id);

CREATE INDEX compiles_frame ON compiles(source_id, generation, frame_id, frame_compile_id);

CREATE INDEX frames_envelope ON frames(envelope_id);

CREATE INDEX artifacts_compile ON artifacts(compile);

CREATE INDEX artifacts_envelope ON artifacts(envelope_id);

CREATE INDEX artifacts_payload ON artifacts(payload);

CREATE INDEX guards_compile ON guards(compile);

CREATE INDEX guards_envelope ON guards(envelope_id);

CREATE INDEX metrics_compile ON metrics(compile);

CREATE INDEX metrics_envelope ON metrics(envelope_id);

CREATE INDEX chromium_events_compile ON chromium_events(compile);

CREATE INDEX chromium_events_source ON chromium_events(source_id);

CREATE INDEX failed_guards_compile ON failed_guards(compile);

CREATE INDEX graph_break_events_compile ON graph_break_events(compile);

CREATE INDEX symbols_compile ON symbols(compile);

CREATE INDEX tensor_descriptions_compile ON tensor_descriptions(compile);

CREATE INDEX ingest_errors_file ON ingest_errors(file_id, line);

CREATE INDEX volume_source ON volume(source_id);

CREATE TABLE collective_ops (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the schedule artifact or the output code
    compile INTEGER REFERENCES compiles(id), -- its compilation
    origin TEXT NOT NULL,                -- schedule or code
    position INTEGER NOT NULL,           -- 0-based order in the schedule or the code
    op TEXT NOT NULL,                    -- the op as logged, e.g. torch.ops._c10d_functional.all_reduce_.default
    collective TEXT NOT NULL             -- what it does: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, wait, else the op's own name
);

CREATE TABLE op_estimates (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the artifact
    compile INTEGER REFERENCES compiles(id), -- its compilation
    position INTEGER NOT NULL,           -- 0-based order of the op in the graph
    op TEXT,                             -- kernel or op name
    type TEXT,                           -- compute or collective
    estimated_runtime_ns REAL,           -- inductor's estimate
    outputs TEXT                         -- JSON list of the outputs' {shape, stride, dtype}
);

CREATE TABLE graph_executions (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the artifact
    position INTEGER NOT NULL,           -- 0-based place in the execution order
    compile_id TEXT                      -- compile id of the graph that ran (as in compiles.compile_id)
);

CREATE INDEX collective_ops_compile ON collective_ops(compile);

CREATE INDEX collective_ops_envelope ON collective_ops(envelope_id);

CREATE INDEX op_estimates_compile ON op_estimates(compile);

CREATE INDEX op_estimates_envelope ON op_estimates(envelope_id);

CREATE INDEX graph_executions_envelope ON graph_executions(envelope_id);

CREATE VIEW payloads AS
SELECT rowid AS id,                                            -- row of payload_data (what payloads_fts indexes)
       hash,                                                   -- md5 hex of the payload bytes
       size,                                                   -- payload size in bytes (without the tab prefixes)
       CAST(sqlar_uncompress(data, text_size) AS TEXT) AS text -- the payload, tabs removed, lines joined with \n
FROM payload_data;

CREATE INDEX payload_data_text_size ON payload_data(text_size);

CREATE VIEW export_issue_records AS
SELECT id,                                                     -- the envelope
       source_id,                                              -- its process
       line,                                                   -- its line in the log
       kind,                                                   -- propagate_real_tensors_provenance, guard_added, missing_fake_kernel or mismatched_fake_kernel
       metadata                                                -- its metadata (expr, op, ...)
FROM envelopes
WHERE kind IN ('propagate_real_tensors_provenance', 'missing_fake_kernel', 'mismatched_fake_kernel', 'guard_added')
  AND (kind != 'guard_added' OR json_extract(metadata, '$.prefix') = 'eval');

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

CREATE TABLE run_findings (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    position INTEGER NOT NULL,           -- its place among the run's findings, most severe first (0 is the worst)
    severity TEXT NOT NULL,              -- error, warning or info
    kind TEXT NOT NULL,                  -- the kind of finding (its check's: the glossary explains it)
    count INTEGER NOT NULL,              -- how many (breaks, recompiles, failures, ...)
    text TEXT NOT NULL,                  -- the sentence
    query TEXT,                          -- the canned query that shows the detail, run with the run's id
    compile INTEGER,                     -- or the compile that shows it
    items TEXT, next_steps TEXT,                          -- every thing it counts when its sentence names only some (JSON list)
    PRIMARY KEY (run_id, position)
);

CREATE INDEX envelopes_source_kind ON envelopes(source_id, kind, name);

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

CREATE INDEX cache_events_envelope ON cache_events(envelope_id);

CREATE INDEX chromium_events_begin ON chromium_events(begin_envelope);

CREATE INDEX artifacts_size ON artifacts(size);

CREATE INDEX cache_events_results ON cache_events(compile, cache, result);

CREATE TABLE run_health_stored (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id), -- the run
    compiles INTEGER,                    -- compilations, not counting [-/-]
    recompiles INTEGER,                  -- compiles of a frame compiled before
    failures INTEGER,                    -- compiles that failed
    graph_breaks INTEGER,                -- graph breaks of all its compiles
    restarts INTEGER,                    -- times Dynamo restarted an analysis
    compile_time_s REAL,                 -- Dynamo's whole-frame compile time
    aot_time_s REAL,                     -- AOTAutograd, Inductor included
    inductor_time_s REAL,                -- Inductor on the forward graphs
    backward_time_s REAL,                -- backward graphs
    autotune_time_s REAL,                -- autotuning at compile time
    guards INTEGER,                      -- guards installed by its compiles
    cache_lookups INTEGER,               -- cache lookups of every cache
    cache_hits INTEGER,                  -- hits of every cache
    cache_misses INTEGER,                -- misses of every cache
    cache_bypasses INTEGER,              -- lookups that bypassed a cache
    fx_graph_hits INTEGER,               -- Inductor's FX-graph cache: hits
    fx_graph_misses INTEGER,             -- Inductor's FX-graph cache: misses
    aotautograd_hits INTEGER,            -- AOTAutograd's cache: hits
    aotautograd_misses INTEGER           -- AOTAutograd's cache: misses
);

CREATE TABLE run_vllm_pieces (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    envelope_id INTEGER NOT NULL,        -- the piece's vllm_piecewise_compile_start record (the query's order)
    compile INTEGER,                     -- the Dynamo compile
    compile_id TEXT,                     -- its compile id
    compile_call INTEGER,                -- which compile call of the process
    attempt INTEGER,                     -- Dynamo's attempt it belongs to
    piece_compile INTEGER,               -- the piece compile
    piecewise_index INTEGER,             -- the piece's index
    submod_name TEXT,                    -- the piece's submodule
    total_piecewise_compiles INTEGER,    -- how many pieces the graph has to compile
    compile_range_start INTEGER,         -- first token count of the range
    compile_range_end INTEGER,           -- last token count of the range
    is_single_size INTEGER,              -- 1 for a single size
    is_cudagraph_capture_size INTEGER,   -- 1 for a CUDA-graph capture size
    graph_artifact INTEGER,              -- the piece's graph
    output_code_artifact INTEGER,        -- Inductor's output code
    cache TEXT,                          -- its cache results
    compile_time_s REAL,                 -- its inductor_compile spans
    abandoned INTEGER,                   -- 1 for a piece compile of a restarted attempt
    PRIMARY KEY (run_id, envelope_id)
);

CREATE TABLE run_rank_divergence (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    position INTEGER NOT NULL,           -- the row's place among the run's, in the query's order
    finding TEXT,                        -- what diverges
    compile_id TEXT,                     -- where
    ranks TEXT,                          -- the ranks (processes) named
    detail TEXT,                         -- the sentence
    PRIMARY KEY (run_id, position)
);

CREATE TABLE run_graph_break_groups (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    key TEXT NOT NULL,                   -- the group: type, title and location
    gb TEXT,                             -- torch's graph-break id
    title TEXT,                          -- its title
    user_file TEXT,                      -- the user code's file
    user_line INTEGER,                   -- and line
    breaks INTEGER NOT NULL,             -- how often it broke in the run
    restart_s REAL,                      -- compile time thrown away by the restarts it caused
    compile INTEGER,                     -- the run's first compile it broke
    explanation TEXT,                    -- torch's Explanation
    hints TEXT,                          -- torch's Hints
    PRIMARY KEY (run_id, key)
);

CREATE TABLE run_graph_break_functions (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    key TEXT NOT NULL,                   -- the group (run_graph_break_groups.key)
    function TEXT,                       -- a function it broke in (its first 200 characters)
    PRIMARY KEY (run_id, key, function)
);

CREATE INDEX chromium_events_open ON chromium_events(source_id) WHERE ph = 'B';

CREATE TABLE derived_runs (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id), -- the run
    findings INTEGER NOT NULL            -- how many findings it has (run_findings)
);

CREATE VIEW run_answers_fresh AS
SELECT run_id                                                  -- the run
FROM derived_runs;

CREATE TRIGGER run_derived_removed BEFORE DELETE ON runs
BEGIN
    DELETE FROM derived_runs WHERE run_id = OLD.id;
    DELETE FROM run_findings WHERE run_id = OLD.id;
    DELETE FROM run_health_stored WHERE run_id = OLD.id;
    DELETE FROM run_compile_time_totals WHERE run_id = OLD.id;
    DELETE FROM run_vllm_pieces WHERE run_id = OLD.id;
    DELETE FROM run_rank_divergence WHERE run_id = OLD.id;
    DELETE FROM run_graph_break_groups WHERE run_id = OLD.id;
    DELETE FROM run_graph_break_functions WHERE run_id = OLD.id;
END;

CREATE TABLE uploads (
    id INTEGER PRIMARY KEY,              -- the upload (its status page: /<db>/-/tlindex/upload/<id>)
    digest TEXT NOT NULL UNIQUE,         -- sha256 of the bytes posted: its folder in the spool
    name TEXT,                           -- the file name the client gave
    bytes INTEGER NOT NULL,              -- how many bytes were posted
    label TEXT,                          -- the label asked for (redacted), else none: the run's is its logs' folder's
    facts TEXT,                          -- the run facts posted (JSON: command, exit_code, duration_s; redacted)
    baseline TEXT,                       -- the run the gate compares it with, when asked (judged as its status is read)
    fail_on TEXT,                        -- the gate's bounds, when asked
    allow_unjudged INTEGER,              -- 1: the gate passes what it cannot judge (--allow-unjudged)
    token TEXT,                          -- the name of the token that posted it
    state TEXT NOT NULL,                 -- queued, ingesting, done or failed
    run_id INTEGER REFERENCES runs(id),  -- the run it became (NULL until done, or when the run was removed)
    message TEXT,                        -- done: the run's findings in one line; failed: why
    received_at TEXT NOT NULL,           -- when its last byte arrived (UTC)
    finished_at TEXT                     -- when it was done or failed (UTC)
);

CREATE INDEX uploads_run ON uploads(run_id);

CREATE INDEX runs_last_ingest ON runs(last_ingest);

CREATE VIEW compile_times AS
SELECT compile,                                                -- the compile (compiles.id)
       run_id,                                                 -- its run
       source_id,                                              -- its process
       rank,                                                   -- its rank
       compile_id,                                             -- its compile id
       status,                                                 -- its status (never none)
       frames_s,                                               -- tracing and compiling its frame (Dynamo's whole compile, the backend's included)
       backward_s,                                             -- compiling its backward graph, at the first backward call
       CASE WHEN frames_s IS NOT NULL OR backward_s IS NOT NULL
            THEN coalesce(frames_s, 0) + coalesce(backward_s, 0) END AS compile_time_s -- both: its compile time
FROM (
    SELECT c.id AS compile, c.run_id, c.source_id, c.rank, c.compile_id, c.status,
           coalesce(c.duration_s, (SELECT sum(e.duration_us) / 1e6 FROM chromium_events e
                                   WHERE e.compile = c.id AND e.name = 'entire_frame_compile' AND e.ph = 'X')) AS frames_s,
           coalesce((SELECT sum(m.duration_us) / 1e6 FROM metrics m
                     WHERE m.compile = c.id AND m.kind = 'bwd_compilation_metrics'),
                    (SELECT sum(e.duration_us) / 1e6 FROM chromium_events e
                     WHERE e.compile = c.id AND e.name = 'entire_backward_compile' AND e.ph = 'X')) AS backward_s
    FROM compiles c WHERE c.compile_id != '-/-' AND c.status != 'none'
);

CREATE VIEW run_totals AS
SELECT c.run_id,                                               -- the run
       count(t.compile) AS compiles,                           -- compiles (compile_times: not [-/-], no export's context)
       sum(c.status = 'error') AS failures,                    -- compiles that failed
       count(CASE WHEN c.frame_compile_id > 0 THEN t.compile END) AS recompiles, -- compiles of a frame compiled before
       sum(c.graph_breaks) AS graph_breaks,                    -- graph breaks of all its compiles
       round(sum(t.compile_time_s), 3) AS compile_time_s,      -- seconds of compile time: frames and backward (compile_times)
       round(sum(t.backward_s), 3) AS backward_time_s          -- of which compiling backward graphs
FROM compiles c LEFT JOIN compile_times t ON t.compile = c.id GROUP BY c.run_id;

CREATE VIEW run_health AS
SELECT t.run_id,                                               -- the run
       (SELECT label FROM runs WHERE id = t.run_id) AS label, -- its label
       (SELECT start_time FROM runs WHERE id = t.run_id) AS start_time, -- its first record's time (the trend's order)
       (SELECT torch_version FROM runs WHERE id = t.run_id) AS torch_version, -- the torch version it ran
       coalesce(t.compiles, 0) AS compiles, -- compilations, not counting [-/-] (run_totals)
       coalesce(t.recompiles, 0) AS recompiles, -- compiles of a frame compiled before (run_totals)
       coalesce(t.failures, 0) AS failures, -- compiles that failed (run_totals)
       coalesce(t.graph_breaks, 0) AS graph_breaks, -- graph breaks of all its compiles (run_totals)
       (SELECT coalesce(sum(max(c.attempts - 1, coalesce(json_array_length(c.restart_reasons), 0))), 0) FROM compiles c
        WHERE c.run_id = t.run_id) AS restarts,                -- times Dynamo restarted an analysis: each compile's attempts after its first, or its restart reasons when more (torch's failure path logs attempts without reasons)
       t.compile_time_s,                                       -- compile time: the frames' (Dynamo's whole compile of each, the backend's included) and their backward's (compile_times, run_totals)
       (SELECT round(sum(m.backend_compile_time_s), 3) FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind = 'compilation_metrics') AS aot_time_s, -- AOTAutograd, Inductor included (backend_compile_time_s, logged also as aot_autograd_cumulative_compile_time_us)
       (SELECT round(sum(m.inductor_compile_time_s), 3) FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind = 'compilation_metrics') AS inductor_time_s, -- Inductor on the forward graphs (inductor_compile_time_s, logged also as inductor_cumulative_compile_time_us)
       t.backward_time_s,                                      -- of which the backward graphs, compiled at the first backward call (compile_times, run_totals)
       (SELECT round(sum(CASE WHEN json_type(m.other, '$.compile_time_autotune_time_us') IN ('integer', 'real')
                              THEN json_extract(m.other, '$.compile_time_autotune_time_us') END) / 1e6, 3)
        FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind IN ('compilation_metrics', 'bwd_compilation_metrics')) AS autotune_time_s, -- autotuning at compile time (compile_time_autotune_time_us, NULL when not logged, as on CPU)
       (SELECT sum(m.guard_count) FROM compiles c JOIN metrics m ON m.compile = c.id
        WHERE c.run_id = t.run_id AND m.kind = 'compilation_metrics') AS guards, -- guards installed by its compiles (guard_count)
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id) AS cache_lookups,            -- cache lookups of every cache (cache_events)
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.result = 'hit') AS cache_hits, -- hits of every cache
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.result = 'miss') AS cache_misses, -- misses of every cache
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.result = 'bypass') AS cache_bypasses, -- lookups that bypassed a cache
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache IN ('fx_graph', 'fx_graph_bundled') AND e.result = 'hit') AS fx_graph_hits, -- Inductor's FX-graph cache: hits (a warm start's bundled hits too)
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache IN ('fx_graph', 'fx_graph_bundled') AND e.result = 'miss') AS fx_graph_misses, -- Inductor's FX-graph cache: misses
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache = 'aotautograd' AND e.result = 'hit') AS aotautograd_hits, -- AOTAutograd's cache: hits
       (SELECT count(*) FROM compiles c JOIN cache_events e ON e.compile = c.id
        WHERE c.run_id = t.run_id AND e.cache = 'aotautograd' AND e.result = 'miss') AS aotautograd_misses -- AOTAutograd's cache: misses
FROM run_totals t;

CREATE TABLE run_compile_time_totals (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    rank INTEGER,                        -- the rank (NULL: a process without one)
    compiles INTEGER NOT NULL,           -- its compiles
    total_s REAL,                        -- their compile time (compile_times), seconds
    frames_s REAL,                       -- of which tracing and compiling their frames
    backward_s REAL,                     -- and compiling their backward graphs
    slowest_s REAL                       -- the slowest compile's
);

CREATE INDEX run_compile_time_totals_run ON run_compile_time_totals(run_id);
