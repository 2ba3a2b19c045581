"""The database itself: schema migrations, columns, compression, runs."""
