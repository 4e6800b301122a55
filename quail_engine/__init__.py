"""Quail engine: parse warehouse AI-SQL, plan it, run it on DuckDB and a local model."""

__version__ = "0.1.0"
