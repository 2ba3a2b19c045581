"""Reading logs into the database: discover, read, normalize, stage, merge, index."""
