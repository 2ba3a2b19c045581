-- tlindex schema, migration 023: the chromium spans a process still has open (ph 'B', their end not read yet)
-- found without reading every event of the process. Each chunk of a split log, and each grown log continued,
-- looks them up and drops them from the main database before its own rows are merged; through the index of
-- events by process that read all of the process's events so far, chunk after chunk (at 1 GB in ten chunks,
-- 0.6 s of the main process's merges). Only open spans are in this index: a few rows, whatever the log's size.
CREATE INDEX chromium_events_open ON chromium_events(source_id) WHERE ph = 'B';
