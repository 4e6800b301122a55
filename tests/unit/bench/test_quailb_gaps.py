"""The gap analysis of the committed QUAIL-B rows (bench/quailb/gaps.py): every timed query,
its x SoL the product of its host, kernel and work factors, its floor never above its kernel
factor's large-pass part."""

import json

from bench.quailb import gaps


def test_every_committed_query_splits_into_host_kernel_and_work():
    result = json.loads((gaps.RESULTS / "quailb_gpu.json").read_text())
    rows = gaps.gaps(result, gaps.RESULTS / "quailb_reports")
    assert len(rows) == len([r for r in result["queries"] if "run_s" in r]) > 0
    for r in rows:
        product = r["host"] * r["kernel"] * r["work"]
        assert abs(product - r["run_s"] / r["sol_s"]) < 1e-6 * product, r
        assert r["floor"] > 1.0 and 0.0 <= r["small_gpu_share"] <= 1.0, r
    text = gaps.markdown(result, rows)
    assert text.count("\n| ") == len(rows) and "floor" in text  # (header first, then rows)
