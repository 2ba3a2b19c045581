-- tlindex schema, version 1.
--
-- Every table and column carries a comment: docs/schema.md is generated from
-- them (python -m tlindex.formats.schema_doc) and a test keeps the two in step.
-- Times are local wall-clock times as the logging machine wrote them, in ISO 8601
-- without a zone; glog has no year, so it is taken from the file's mtime.

-- One ingested log file (plain or .gz).
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
);

-- One torch job: the processes whose logs sit side by side in one directory and
-- overlap in time (or share a pid), or everything given one --run LABEL.
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
);

-- One process's stream of records within a file. A file normally holds one
-- process; a file that interleaves several pids is split into one source each.
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
);

-- The per-process string table: {"str": [value, id]} envelopes.
CREATE TABLE strings (
    source_id INTEGER NOT NULL REFERENCES sources(id), -- the source that defined it
    string_id INTEGER NOT NULL,          -- the id stack frames use as "filename"
    value TEXT NOT NULL,                 -- the string (an absolute source path)
    PRIMARY KEY (source_id, string_id)
);

-- Distinct payload texts, stored once however many records (or ranks) carry them.
CREATE TABLE payloads (
    hash TEXT PRIMARY KEY,               -- md5 hex of the payload bytes (what has_payload claims when intact)
    size INTEGER NOT NULL,               -- payload size in bytes (without the tab prefixes)
    text TEXT NOT NULL                   -- the payload, tabs removed, lines joined with \n
);

-- One row per record (envelope line and its payload lines), in file order.
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
    payload TEXT REFERENCES payloads(hash), -- the payload, if any
    envelope_bytes INTEGER NOT NULL,     -- bytes of the envelope line, newline included
    payload_bytes INTEGER NOT NULL,      -- bytes of the payload lines, tabs and newlines included
    payload_lines INTEGER NOT NULL,      -- number of payload lines
    md5_ok INTEGER                       -- 1 payload md5 verified, 0 mismatch, NULL no payload
);

-- One row per compilation. Compile ids repeat within a process after
-- torch._dynamo.reset(): such compiles are told apart by generation. The records
-- a process logs without any compile id (torch.export, AOTInductor, spans outside a
-- compilation, the torch version) form one more compile per process and generation,
-- compile_id '-/-' (tlparse's [-/-]); its status follows the same rules when it
-- has compilation_metrics (an export's failure), else it is 'none'.
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
);

-- Stack frames of every stack the log carries (dynamo_start, stack, user_stack).
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

-- Every IR dump and artifact: records with a payload (chromium events aside)
-- and every "artifact" and "link" record (a link's url is in its envelope's metadata), payload or not.
CREATE TABLE artifacts (
    id INTEGER PRIMARY KEY,              -- artifact id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- its envelope
    compile INTEGER REFERENCES compiles(id), -- its compilation
    kind TEXT NOT NULL,                  -- envelope kind, e.g. dynamo_output_graph, artifact, graph_dump
    name TEXT NOT NULL,                  -- artifact name, metadata name, or the kind
    encoding TEXT,                       -- "string" or "json" for artifact records
    payload TEXT REFERENCES payloads(hash), -- its payload (NULL for payload-less artifacts)
    size INTEGER NOT NULL                -- payload size in bytes
);

-- Guards: one row per line of dynamo_cpp_guards_str, one per entry of the
-- older dynamo_guards list, and one per guard_added, guard_added_fast and
-- symbolic_shape_specialization record.
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
);

-- Every key of compilation_metrics, bwd_compilation_metrics,
-- aot_autograd_backward_compilation_metrics and their *_runtime variants.
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
    dynamo_config TEXT REFERENCES payloads(hash), -- dynamo_config JSON, stored once in payloads
    inductor_config TEXT REFERENCES payloads(hash), -- inductor_config JSON, stored once in payloads
    functorch_config TEXT REFERENCES payloads(hash), -- functorch_config JSON, stored once in payloads
    compiler_config TEXT REFERENCES payloads(hash), -- compiler_config JSON, stored once in payloads
    other TEXT                           -- JSON object of every other key of the record
);

-- Chromium trace events (dynamo_timed): B/E pairs joined into spans. The
-- events themselves, args included, are the payloads of their envelopes.
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

-- Why compiles happened again: one row per failed guard of a recompile_reasons artifact.
CREATE TABLE failed_guards (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the recompile_reasons artifact
    compile INTEGER REFERENCES compiles(id), -- the compilation that recompiled
    position INTEGER NOT NULL,           -- index within the artifact
    previous_compile_id TEXT,            -- the cache entry whose guard failed, e.g. 0/0
    reason TEXT NOT NULL                 -- the failed guard, e.g. tensor 'x' size mismatch at index 0. expected 4, actual 8
);

-- Graph breaks from dynamo_graph_break_reason artifacts.
CREATE TABLE graph_break_events (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the artifact
    compile INTEGER REFERENCES compiles(id), -- compilation that broke
    reason TEXT NOT NULL,                -- the reason (first lines of the artifact, without the traceback)
    user_file TEXT,                      -- user file where the graph broke
    user_line INTEGER                    -- user line where the graph broke
);

-- FX-graph and AOTAutograd cache lookups.
CREATE TABLE cache_events (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the artifact
    compile INTEGER REFERENCES compiles(id), -- its compilation
    cache TEXT NOT NULL,                 -- fx_graph, aotautograd, ... (artifact name before _cache_)
    result TEXT NOT NULL,                -- hit, miss, bypass, ... (artifact name after _cache_)
    key TEXT,                            -- cache key
    reason TEXT                          -- bypass reason
);

-- Symbols created by the shape environment.
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

-- describe_tensor, describe_storage and describe_source records.
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

-- Log volume per source, envelope kind, artifact name and emitting torch line:
-- envelopes summed at ingest, so "who is generating all the logs" reads a few rows.
CREATE TABLE volume (
    source_id INTEGER NOT NULL REFERENCES sources(id), -- the process stream
    kind TEXT NOT NULL,                  -- envelope kind
    name TEXT,                           -- artifact name or metadata name
    emitter_file TEXT,                   -- torch source file that logged them
    emitter_line INTEGER,                -- line in emitter_file
    records INTEGER NOT NULL,            -- number of envelopes
    bytes INTEGER NOT NULL               -- bytes of their envelope and payload lines
);

-- Lines that could not be indexed as they are, and other problems met while
-- reading. Lines recorded here with bytes > 0 are not in envelopes.
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
CREATE INDEX cache_events_compile ON cache_events(compile);
CREATE INDEX symbols_compile ON symbols(compile);
CREATE INDEX tensor_descriptions_compile ON tensor_descriptions(compile);
CREATE INDEX ingest_errors_file ON ingest_errors(file_id, line);
CREATE INDEX volume_source ON volume(source_id);
