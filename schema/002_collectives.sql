-- tlindex schema, migration 002: what multi-rank jobs need to find a desync.
-- Inductor logs the collectives it scheduled for each graph, its per-op
-- runtime estimates and output shapes, and (on request) the order in which
-- compiled graphs ran; ranks that disagree on any of these hang or straggle.

-- Collective ops of a graph compiled by inductor, one row per op: the order
-- inductor scheduled them in (`inductor_collective_schedule`) and the calls in
-- the generated code (`inductor_output_code`).
CREATE TABLE collective_ops (
    id INTEGER PRIMARY KEY,              -- row id
    envelope_id INTEGER NOT NULL REFERENCES envelopes(id), -- the schedule artifact or the output code
    compile INTEGER REFERENCES compiles(id), -- its compilation
    origin TEXT NOT NULL,                -- schedule or code
    position INTEGER NOT NULL,           -- 0-based order in the schedule or the code
    op TEXT NOT NULL,                    -- the op as logged, e.g. torch.ops._c10d_functional.all_reduce_.default
    collective TEXT NOT NULL             -- what it does: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, wait, else the op's own name
);

-- Inductor's runtime estimate and output tensors of each op of a graph
-- (`inductor_runtime_and_tensor_meta`, logged when LOG_TLPARSE=1).
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

-- The order in which compiled graphs ran (`graph_execution`, logged when the
-- program runs inside `torch._inductor.debug.record_and_log_graph_execution_order()`).
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
