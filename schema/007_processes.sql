-- tlindex schema, migration 007: a process is the unit of a multi-rank comparison. When several
-- processes of one run claim the same rank, tlindex decides what they are (at run grouping,
-- tlindex.ingest.runs.resolve_processes): distinct ranks when their file names say so (tlparse reads
-- ranks from file names), restarts when they ran one after another, else concurrent processes
-- told apart by pid. Two processes are never compared, counted or diffed as one sequence.
ALTER TABLE sources ADD COLUMN logged_rank INTEGER; -- the rank its envelopes logged (else its file name's); `rank` is this rank as resolved within the run

ALTER TABLE sources ADD COLUMN restart INTEGER; -- 0 for the first process of its rank in the run, N for the N-th that started after the one before it ended (a restarted rank); NULL without a rank

ALTER TABLE sources ADD COLUMN process TEXT; -- the process's name within its run, as comparisons and pages show it: "R" (rank R), "R (restart N)", "R (pid P)" (another process claiming rank R at the same time), NULL without a rank

ALTER TABLE sources ADD COLUMN rank_decision TEXT; -- why `rank` or `process` differs from what it logged (e.g. "logged rank 1; file name says rank 5"), NULL when nothing was decided

UPDATE sources SET logged_rank = rank, restart = CASE WHEN rank IS NOT NULL THEN 0 END,
    process = CAST(rank AS TEXT);
