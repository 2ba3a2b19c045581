"""Answers computed from the database: queries, findings, search, diff, trie, provenance, bytecode."""
