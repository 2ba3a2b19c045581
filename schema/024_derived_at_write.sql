-- tlindex schema, migration 024: what readers read about a run is derived by the writer, in the transaction that
-- makes the run whole (tlindex.answers.derived), never by a reader. The stamps that told readers when stored findings
-- (015) and stored answers (022) were stale are gone: a run is in derived_runs once its findings and answers are
-- stored, and an ingest that changes a run derives it again in the same transaction. The step of this migration
-- (derived_at_write) derives every run of the database once.
DROP VIEW run_answers_fresh;
DROP VIEW run_answers_now;
DROP TRIGGER run_answers_removed;
DROP TABLE run_answers_stamps;
DROP TABLE run_findings_stamps;

-- The runs whose findings (run_findings) and per-run answers (run_health_stored, ...) are stored.
CREATE TABLE derived_runs (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id), -- the run
    findings INTEGER NOT NULL            -- how many findings it has (run_findings)
);

-- The runs whose stored answers the canned queries read (they compute the others from the raw tables).
CREATE VIEW run_answers_fresh AS
SELECT run_id                                                  -- the run
FROM derived_runs;

-- A run removed takes what was derived of it with it (a later run given its id is derived anew).
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
