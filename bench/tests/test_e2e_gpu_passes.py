"""bench/e2e_gpu.py's closing tables: a query row's per-kind pass summary is tabled; an engine
row's `passes` (its count of forward passes) is not one (it crashed the run's end:
"'int' object has no attribute 'items'")."""

from bench.e2e_gpu import pass_tables


def test_engine_rows_count_passes_and_query_rows_summarize_them():
    summary = {"plain": {"passes": 2, "tokens": 100, "prefix_tokens": 0,
                         "attention_pairs": 5050, "gpu_s": 0.5, "tokens_per_s": 200}}
    rows = [{"workload": "filter", "path": "engine", "precision": "fp8", "passes": 12},
            {"workload": "filter", "path": "query", "precision": "fp8", "passes": summary},
            {"workload": "join", "path": "query", "precision": "bf16", "error": "x"}]
    md = pass_tables(rows)
    assert md.count("GPU passes of the") == 1
    assert "GPU passes of the filter query (fp8)" in md and "| plain | 2 | 100 |" in md
    assert pass_tables(rows[:1]) == ""
