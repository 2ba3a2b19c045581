-- tlindex schema, migration 005: guards comparable across processes, and a fingerprint of each
-- compile's guards, so that a diff compares guard lines only where the fingerprints differ.
ALTER TABLE guards ADD COLUMN identity INTEGER; -- crc32 of guard_type and text with one process's object and type ids masked (the same guard in any process; NULL in rows written before this column)

ALTER TABLE compiles ADD COLUMN guards_print TEXT; -- count and sum of its guards' distinct identities, "n:sum" (written by the merge; NULL when not known: the diff then compares guard lines)
