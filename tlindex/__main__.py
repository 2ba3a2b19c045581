from tlindex.cli import cli

cli()
