-- tlindex schema, migration 015: each run's findings, computed once when the run is written and read by the lists
-- over runs (the runs page, `tlindex runs`, `tlindex findings`) instead of computed for every run on every request.
-- tlindex.answers.findings.stored writes and reads them; a database made before is given its findings on first use.
CREATE TABLE run_findings (
    run_id INTEGER NOT NULL REFERENCES runs(id), -- the run
    position INTEGER NOT NULL,           -- its place among the run's findings, most severe first (0 is the worst)
    severity TEXT NOT NULL,              -- error, warning or info
    kind TEXT NOT NULL,                  -- the kind of finding (its check's: the glossary explains it)
    count INTEGER NOT NULL,              -- how many (breaks, recompiles, failures, ...)
    text TEXT NOT NULL,                  -- the sentence
    query TEXT,                          -- the canned query that shows the detail, run with the run's id
    compile INTEGER,                     -- or the compile that shows it
    items TEXT,                          -- every thing it counts when its sentence names only some (JSON list)
    PRIMARY KEY (run_id, position)
);

-- What a run's stored findings were computed from: the findings registry's version, the last schema migration and
-- the run's processes (how many, their bytes, the newest). Another stamp now means they are stale: computed again.
CREATE TABLE run_findings_stamps (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id), -- the run
    stamp TEXT NOT NULL                  -- version:migrations:processes:bytes:newest process
);
