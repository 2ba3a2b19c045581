-- tlindex schema, migration 018: the rows a migration's new table derives from what a database already stores,
-- derived. Migration 010 added piece_compiles empty: a database ingested before it and migrated kept none of its
-- vLLM piece compiles (the vLLM findings and pages silently lost them, where a fresh ingest of the same logs makes
-- them). Each vllm_piecewise_compile_start record that has no row gets the one its handler makes: the fields of
-- its JSON payload, integers and booleans as numbers (anything else is NULL, as the types at the door make it).
INSERT INTO piece_compiles (envelope_id, compile, piecewise_index, submod_name, total_piecewise_compiles,
                            compile_range_start, compile_range_end, is_single_size, is_cudagraph_capture_size)
SELECT e.id, e.compile,
       CASE WHEN json_type(p.text, '$.piecewise_index') IN ('integer', 'true', 'false')
            THEN json_extract(p.text, '$.piecewise_index') END,
       CASE WHEN json_type(p.text, '$.submod_name') IN ('text', 'integer')
            THEN json_extract(p.text, '$.submod_name') END,
       CASE WHEN json_type(p.text, '$.total_piecewise_compiles') IN ('integer', 'true', 'false')
            THEN json_extract(p.text, '$.total_piecewise_compiles') END,
       CASE WHEN json_type(p.text, '$.compile_range_start') IN ('integer', 'true', 'false')
            THEN json_extract(p.text, '$.compile_range_start') END,
       CASE WHEN json_type(p.text, '$.compile_range_end') IN ('integer', 'true', 'false')
            THEN json_extract(p.text, '$.compile_range_end') END,
       CASE WHEN json_type(p.text, '$.is_single_size') IN ('integer', 'true', 'false')
            THEN json_extract(p.text, '$.is_single_size') END,
       CASE WHEN json_type(p.text, '$.is_cudagraph_capture_size') IN ('integer', 'true', 'false')
            THEN json_extract(p.text, '$.is_cudagraph_capture_size') END
FROM envelopes e JOIN payloads p ON p.hash = e.payload
WHERE e.kind = 'artifact' AND e.name = 'vllm_piecewise_compile_start'
  AND CASE WHEN json_valid(p.text) THEN json_type(p.text) END = 'object'
  AND NOT EXISTS (SELECT 1 FROM piece_compiles c WHERE c.envelope_id = e.id)
ORDER BY e.id;
