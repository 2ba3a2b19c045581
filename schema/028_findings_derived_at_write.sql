-- tlindex schema, migration 028: a finding says what to try next about itself (the line, the input, the compile),
-- beside the sentence; the check's general advice stays in the glossary. The failed compiles, the recompile limit,
-- recompiles and the cache findings say more of what they count, so the step of this migration derives every run
-- again (tlindex.answers.derived.derive_every_run).
ALTER TABLE run_findings ADD COLUMN next_steps TEXT; -- what to try next about this finding (NULL: its check's general advice)
