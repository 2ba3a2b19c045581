"""What tlindex writes for other tools: the report folder, tlparse's files, Chromium traces, Parquet, Spark."""
