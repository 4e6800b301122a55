"""Helpers the tests, the device checks (tests/device/) and the bench share: random-weight models
and checkpoints, engine calls in the product's prompt layouts, QUAIL-B's queries and corpora run
through the product, GPU timing and a sectioned results writer. It imports the product and never
bench/ (tests/unit/test_bench_boundary.py); modules that run on the GPU machine import no duckdb,
sqlglot or dbt at module level."""
