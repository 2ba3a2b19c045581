-- tlindex schema, migration 004: payload text compressed (tlindex/store/compression.py). The table
-- payload_data holds the bytes; the view payloads gives the text as before. The view's function is
-- the sqlite3 shell's own sqlar_uncompress; tlindex and its Datasette plugin register it for their
-- connections. Renaming keeps every foreign key (envelopes.payload, the metrics configs) pointing at
-- the stored rows; existing payloads are compressed here, keeping their rowids.
DROP TABLE IF EXISTS payloads_fts;

ALTER TABLE payloads RENAME TO payload_data;

ALTER TABLE payload_data ADD COLUMN text_size INTEGER NOT NULL DEFAULT 0; -- bytes of the stored UTF-8 text (differs from size only where invalid UTF-8 was replaced)

ALTER TABLE payload_data ADD COLUMN data BLOB NOT NULL DEFAULT x''; -- the text, zlib-compressed unless that is not smaller (the sqlite3 shell's sqlar format)

UPDATE payload_data SET text_size = length(CAST(text AS BLOB)), data = sqlar_compress(CAST(text AS BLOB));

ALTER TABLE payload_data DROP COLUMN text;

-- Distinct payload texts, stored once however many records (or ranks) carry them: payload_data read as
-- text. The plain sqlite3 shell reads it as is (sqlar_uncompress is built into the shell).
CREATE VIEW payloads AS
SELECT rowid AS id,                                            -- row of payload_data (what payloads_fts indexes)
       hash,                                                   -- md5 hex of the payload bytes
       size,                                                   -- payload size in bytes (without the tab prefixes)
       CAST(sqlar_uncompress(data, text_size) AS TEXT) AS text -- the payload, tabs removed, lines joined with \n
FROM payload_data;
