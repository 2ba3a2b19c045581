-- tlindex schema, migration 019: a run an ingest made to hold what it merged before it grouped its files into runs.
-- Every source is attached to a run in the transaction that merges it, so a stopped ingest leaves no row without a
-- run: to the run of --run LABEL, else to a provisional run of that ingest per log directory, which the ingest
-- regroups (as runs.py groups sources) once its files are merged. A provisional run whose ingest is gone (stopped,
-- killed) is regrouped by the next ingest, which says so.
ALTER TABLE runs ADD COLUMN ingest TEXT; -- while the run is provisional: the staging folder of the ingest that made it (it regroups the run's sources when it ends); NULL for a run as grouped
