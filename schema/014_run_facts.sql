-- tlindex schema, migration 014: what `tlindex run` knew of the command it ran (tlhub keeps the same), on the
-- run's row, so that relabelling a run keeps them and removing it removes them. NULL for runs ingested from logs.
ALTER TABLE runs ADD COLUMN command TEXT; -- the command line `tlindex run` ran, a JSON list of its words (NULL for logs ingested)

ALTER TABLE runs ADD COLUMN cwd TEXT; -- the working directory it ran in

ALTER TABLE runs ADD COLUMN host TEXT; -- the host name of the machine it ran on

ALTER TABLE runs ADD COLUMN user TEXT; -- the user who ran it (the login name)

ALTER TABLE runs ADD COLUMN started TEXT; -- when the command started, UTC (its log's first record may come later: imports)

ALTER TABLE runs ADD COLUMN duration_s REAL; -- how long the command ran, in seconds (wall clock)

ALTER TABLE runs ADD COLUMN exit_code INTEGER; -- its exit status (NULL when a signal ended it)

ALTER TABLE runs ADD COLUMN signal TEXT; -- the signal that ended it, by name (SIGINT, SIGKILL, ...), else NULL
