-- tlindex schema, migration 025: who chose a run's label (a shared report replaces one made of the command line,
-- retention keeps the runs people named), and the logs a team's server received (`tlindex serve --uploads`).
ALTER TABLE runs ADD COLUMN label_source TEXT; -- who chose the label: command (`tlindex run`, from the command line), folder (the logs' folder), upload (a team's server: the client's, or the file's name), given (--label, --run, `tlindex label`)

-- Labels an older tlindex gave: from the command line where `tlindex run` ran one, else from the folder.
UPDATE runs SET label_source = CASE WHEN command IS NOT NULL THEN 'command' ELSE 'folder' END;

-- Each log, compressed log or archive of a TORCH_TRACE folder posted to `tlindex serve --uploads`, from its arrival
-- to the run it became (tlindex.uploads): the same bytes posted twice are one upload, and one run.
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
