-- tlindex schema, migration 006: fingerprints of each compile's stack and contents, written by the
-- merge (tlindex.ingest.fingerprints), so that the stack trie reads each distinct stack once and a diff
-- reads breaks, caches, graphs and symbols only where they differ.
ALTER TABLE compiles ADD COLUMN stack_print INTEGER; -- 64-bit hash of its dynamo_start stack as the frames rows hold it (NULL when it logged none, or in rows written before this column)

ALTER TABLE compiles ADD COLUMN content_print INTEGER; -- 64-bit hash of its graph-break reasons, cache results, FX graph and code payloads and symbols (NULL in rows written before this column: the diff then reads them)
