-- tlindex schema, migration 003: a file whose content equals a file ingested
-- before under another path (two rank files of one job can be byte-identical)
-- is ingested as its own file and source; this says which file it copies.

ALTER TABLE files ADD COLUMN copy_of INTEGER REFERENCES files(id); -- the file ingested earlier with the same content (sha256), when this one is a byte-identical copy of it
