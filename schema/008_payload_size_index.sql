-- tlindex schema, migration 008: the largest stored payload found without a scan. sqlar_uncompress,
-- which any SQL may call, inflates at most that many bytes (tlindex/store/compression.py).
CREATE INDEX payload_data_text_size ON payload_data(text_size);
