"""The GPU forward path: Triton kernels (quail_kernels) + cuBLAS bf16 / cuBLASLt fp8 GEMMs over a
paged KV arena. `GpuCausalLM` keeps the plain-torch CausalLM contract (models/base.py), so the
engine loop runs unchanged on it. Imports torch and triton only (no duckdb/sqlglot/dbt)."""
