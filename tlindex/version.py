"""The version of tlindex (the package's own, read by the build: pyproject.toml)."""

__version__ = "0.1.0"
