-- tlindex schema, migration 022: the canned queries asked of every run (run_health, compile_time_totals,
-- vllm_pieces, rank_divergence, top_graph_breaks) read each run's rows stored once, as its findings are (015),
-- instead of computing every run's on every request (issue 45: 0.3-0.85 s at 3,682 runs).
-- tlindex.answers.run_answers stores them with a stamp of what they were computed from, when the findings are
-- stored; a query reads a run's stored rows only while that stamp is the run's now (run_answers_fresh), and computes
-- the other runs' from the raw tables as before. A query given one run reads the raw tables. A change to what is
-- stored is a migration that says the next version below.

-- What each run's stored answers were computed from (run_answers_now's stamp then); another stamp now: not read.
CREATE TABLE run_answers_stamps (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id), -- the run
    stamp TEXT NOT NULL                  -- run_answers_now's stamp of the run when its rows were stored
);

-- What each run's stored answers would be computed from now: the version of what is stored, the migrations applied
-- (how many, the last) and the run's processes (how many, their bytes, the newest): more of its log ingested, a
-- migration, or a process moved to another run gives another stamp.
CREATE VIEW run_answers_now AS
SELECT r.id AS run_id,                                         -- the run
       '1:' || (SELECT count(*) || '.' || max(name) FROM _tlindex_migrations) || ':' || count(s.id) || ':'
       || coalesce(sum(s.bytes), 0) || ':' || coalesce(max(s.id), '') AS stamp -- version:migrations:processes:bytes:newest process
FROM runs r LEFT JOIN sources s ON s.run_id = r.id
GROUP BY r.id;

-- The runs whose stored answers are current: the canned queries read these runs' stored rows and compute the others.
CREATE VIEW run_answers_fresh AS
SELECT n.run_id                                                -- the run
FROM run_answers_now n JOIN run_answers_stamps t ON t.run_id = n.run_id
WHERE t.stamp = n.stamp;

-- Each run's row of the view run_health (its numbers; its label, start and torch version are read from runs).
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

-- Each run's compile time per rank (the canned query compile_time_totals, its chromium spans summed per compile).
CREATE TABLE run_compile_time_totals (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    rank INTEGER,                        -- the rank (NULL: a process without one)
    compiles INTEGER NOT NULL,           -- its compiles
    total_s REAL,                        -- their dynamo and backward-compile spans, seconds
    slowest_s REAL                       -- the slowest compile's
);
CREATE INDEX run_compile_time_totals_run ON run_compile_time_totals(run_id);

-- Each run's rows of the canned query vllm_pieces (one per piece compile).
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

-- Each run's rows of the canned query rank_divergence.
CREATE TABLE run_rank_divergence (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    position INTEGER NOT NULL,           -- the row's place among the run's, in the query's order
    finding TEXT,                        -- what diverges
    compile_id TEXT,                     -- where
    ranks TEXT,                          -- the ranks (processes) named
    detail TEXT,                         -- the sentence
    PRIMARY KEY (run_id, position)
);

-- Each run's graph-break groups (by type and user code location), which the canned query top_graph_breaks sums
-- over runs.
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

-- The functions each run's graph-break groups broke in.
CREATE TABLE run_graph_break_functions (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    key TEXT NOT NULL,                   -- the group (run_graph_break_groups.key)
    function TEXT,                       -- a function it broke in (its first 200 characters)
    PRIMARY KEY (run_id, key, function)
);

-- A run removed takes its stored answers with it (a later run given its id is computed).
CREATE TRIGGER run_answers_removed BEFORE DELETE ON runs
BEGIN
    DELETE FROM run_answers_stamps WHERE run_id = OLD.id;
    DELETE FROM run_health_stored WHERE run_id = OLD.id;
    DELETE FROM run_compile_time_totals WHERE run_id = OLD.id;
    DELETE FROM run_vllm_pieces WHERE run_id = OLD.id;
    DELETE FROM run_rank_divergence WHERE run_id = OLD.id;
    DELETE FROM run_graph_break_groups WHERE run_id = OLD.id;
    DELETE FROM run_graph_break_functions WHERE run_id = OLD.id;
END;
